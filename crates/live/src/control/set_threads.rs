//! `irqlab control threads MATCH --policy P`: puts the matched threads under
//! a fixed scheduling policy for a while (or for good with `persist`), and
//! restores each one's own setting at the end.

use super::journal::{self, Object, Restored, Value};
use super::sched::{PolicySpec, SchedAttr};
use super::threads::{Match, Thread};
use crate::error::{Error, Result};
use crate::privilege::{self, Capability};
use serde::Serialize;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

pub const SCHEMA: &str = "irqlab/control/v1";

/// What to control, resolved from the command line.
#[derive(Debug, Clone)]
pub struct Config {
    /// The MATCH as typed, for messages and the document.
    pub matched: String,
    pub policy: PolicySpec,
    /// How long to hold it; `None`: until stopped or every thread exited.
    pub duration_ns: Option<u64>,
    /// Leave it applied and recorded instead of restoring.
    pub persist: bool,
}

/// One controlled thread.
#[derive(Debug, Clone, Serialize)]
pub struct ThreadOutcome {
    pub thread: Thread,
    pub old: SchedAttr,
    pub new: SchedAttr,
    /// The journal entry (kept only with `persist`).
    pub entry: String,
    /// Exited while controlled (nothing was left to restore).
    pub exited: bool,
    /// Restored at the end (false with `persist` or when it exited).
    pub restored: bool,
}

/// The `irqlab/control/v1` document.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub schema: &'static str,
    pub matched: String,
    pub policy: PolicySpec,
    pub persist: bool,
    pub held_ns: u64,
    pub threads: Vec<ThreadOutcome>,
    /// Why it ended: "duration", "stopped", "threads exited", "persisted".
    pub ended_by: &'static str,
    pub complete: bool,
}

/// Applies the policy to every matched thread and holds it; `on_applied`
/// is told each (thread, old, new) as it takes effect.
pub fn run(config: &Config, stop: &AtomicBool, mut on_applied: impl FnMut(&Thread, SchedAttr, SchedAttr)) -> Result<Report> {
    let PolicySpec::Fixed { attr } = config.policy else {
        return Err(Error::Invalid(format!(
            "--policy sporadic: the live POSIX sporadic server is not built yet (use deadline:{} as the kernel's own server)",
            "BUDGET/PERIOD"
        )));
    };
    privilege::require(&[Capability::SysNice], "change other threads' scheduling (sched_setattr)")?;
    let threads = Match::parse(&config.matched)?.resolve(&config.matched)?;
    let mut applied = Vec::new();
    for thread in &threads {
        let change = journal::apply(Object::ThreadSched { thread: thread.clone() }, Value::Sched { attr })?;
        let Value::Sched { attr: old } = change.entry().old;
        on_applied(thread, old, attr);
        applied.push((thread.clone(), old, change));
    }
    let started = Instant::now();
    let ended_by = if config.persist {
        "persisted"
    } else {
        loop {
            if stop.load(Ordering::SeqCst) {
                break "stopped";
            }
            if config.duration_ns.is_some_and(|d| started.elapsed() >= Duration::from_nanos(d)) {
                break "duration";
            }
            if applied.iter().all(|(t, _, _)| !t.alive()) {
                break "threads exited";
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    };
    let held_ns = started.elapsed().as_nanos() as u64;
    let mut outcomes = Vec::new();
    for (thread, old, change) in applied {
        let entry = change.entry().id.clone();
        let (exited, restored) = if config.persist {
            change.persist()?;
            (false, false)
        } else {
            match change.restore()? {
                Restored::Restored => (false, true),
                Restored::Gone => (true, false),
            }
        };
        outcomes.push(ThreadOutcome { thread, old, new: attr, entry, exited, restored });
    }
    Ok(Report {
        schema: SCHEMA,
        matched: config.matched.clone(),
        policy: config.policy,
        persist: config.persist,
        held_ns,
        threads: outcomes,
        ended_by,
        // Ctrl-C is how an open-ended hold ends; only a --duration cut short is incomplete.
        complete: !(ended_by == "stopped" && config.duration_ns.is_some()),
    })
}
