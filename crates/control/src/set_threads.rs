//! `irqlab control threads MATCH --policy P [--cpu LIST]`: puts the matched
//! threads under a fixed scheduling policy (or under a live sporadic server,
//! [`crate::sporadic`]) for a while, or for good with `persist` (fixed
//! policies only), optionally pinned to CPUs, and restores each one's own
//! setting at the end.

use crate::sporadic::{self, ServerReport, SporadicParams};
use irqlab_host::error::{Error, Result};
use irqlab_host::journal::hold::{self, Settled};
use irqlab_host::journal::sched::{PolicySpec, SchedAttr};
use irqlab_host::journal::threads::{Match, Thread};
use irqlab_host::journal::{self, Object, Value};
use irqlab_host::privilege::{self, Capability};
use irqlab_host::run_end::{EndedBy, RunEnd};
use serde::Serialize;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

pub const SCHEMA: &str = "irqlab/control/v1";

/// How often an open-ended hold looks for new matching threads.
const NEW_THREAD_SCAN: Duration = Duration::from_millis(200);

/// A thread under the policy: its old setting and the journal's changes
/// (the policy, and the pinning with `--cpu`).
type Held = (Thread, SchedAttr, journal::Applied, Option<journal::Applied>);

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
    /// Pin the threads to these CPUs too.
    pub cpus: Option<Vec<usize>>,
    /// Take every thread a glob matches, kernel threads and PID 1 included
    /// (never the kernel's per-CPU threads nor irqlab's own).
    pub all_matching: bool,
}

impl Config {
    /// Whether the hold also takes matching threads that appear while it
    /// holds (and may start before any exists): an open-ended hold of a
    /// glob or a device's threads with a fixed policy (tuned re-applies on
    /// new threads), not `--persist`, not a sporadic server (it serves the
    /// threads it started with).
    pub fn open_hold(&self, matched: &Match) -> bool {
        !self.persist && matches!(self.policy, PolicySpec::Fixed { .. }) && matched.open()
    }
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
    /// The CPUs it could run on before, and after, when `--cpu` pinned it.
    pub old_cpus: Option<Vec<usize>>,
    pub new_cpus: Option<Vec<usize>>,
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
    /// The live sporadic server's figures (`--policy sporadic:...`).
    pub server: Option<ServerReport>,
    /// Why it ended: "duration", "stopped", "threads exited", "persisted".
    pub ended_by: EndedBy,
    pub complete: bool,
    /// Values something else changed while the run held them, as found
    /// (each said on stderr then; `control status` names them after).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub drifts: Vec<hold::Drift>,
}

/// Applies the policy to every matched thread and holds it (a sporadic
/// server runs its controller meanwhile); `on_applied` is told each
/// (thread, old, new) as it takes effect.
pub fn run(config: &Config, stop: &AtomicBool, mut on_applied: impl FnMut(&Thread, SchedAttr, SchedAttr)) -> Result<Report> {
    // `attr`: what the threads are set to through the journal; a served
    // thread starts at its low level (the server raises it).
    let (attr, server) = match config.policy {
        PolicySpec::Fixed { attr } => (attr, None),
        PolicySpec::Sporadic { budget_ns, period_ns, high, low, max_repl } => {
            if config.persist {
                return Err(Error::Invalid(
                    "--persist with --policy sporadic: the server lives only while irqlab runs (deadline:RUNTIME/PERIOD is the kernel's own \
                     server and can persist)"
                        .into(),
                ));
            }
            let params = SporadicParams::new(budget_ns, period_ns, high, low, max_repl);
            (params.low, Some(params))
        }
    };
    privilege::require(&[Capability::SysNice], "change other threads' scheduling (sched_setattr)")?;
    let matched = Match::parse(&config.matched)?;
    let open_hold = config.open_hold(&matched);
    let threads = match matched.resolve_guarded(&config.matched, config.all_matching) {
        Ok(threads) => threads,
        Err(_) if open_hold && matched.resolve(&config.matched).is_err() => Vec::new(),
        Err(e) => return Err(e),
    };
    let apply = |thread: &Thread| -> Result<Held> {
        let pinned = match &config.cpus {
            Some(cpus) => Some(journal::apply(Object::ThreadAffinity { thread: thread.clone() }, Value::Cpus { cpus: cpus.clone() })?),
            None => None,
        };
        let change = journal::apply(Object::ThreadSched { thread: thread.clone() }, Value::Sched { attr })?;
        let Value::Sched { attr: old } = change.entry().old else {
            return Err(Error::Failed(format!("the journal recorded {} for {}", change.entry().old, change.entry().object)));
        };
        Ok((thread.clone(), old, change, pinned))
    };
    let mut applied = Vec::new();
    for thread in &threads {
        let held = apply(thread)?;
        on_applied(thread, held.1, server.map_or(attr, |p| p.high));
        applied.push(held);
    }
    // A fixed policy is held by the one hold (`journal::hold`), which
    // also reads it back for drift; a server changes the threads'
    // priorities itself, on its own loop.
    let mut drift = hold::DriftWatch::new(true);
    let mut server_report = None;
    let (held_ns, ended_by) = if let Some(params) = server.filter(|_| !config.persist) {
        let run = RunEnd::start(stop, config.duration_ns);
        let (report, ended_by) = sporadic::serve(&threads, params, &run)?;
        server_report = Some(report);
        (run.elapsed_ns(), ended_by)
    } else {
        let mut last_scan = Instant::now();
        hold::wait_while(stop, config.duration_ns, config.persist, || {
            if open_hold && last_scan.elapsed() >= NEW_THREAD_SCAN {
                last_scan = Instant::now();
                let taken: Vec<Thread> = applied.iter().map(|h| h.0.clone()).collect();
                for thread in matched.newcomers(&taken, config.all_matching) {
                    // One that exited between the scan and the change is skipped.
                    if let Ok(held) = apply(&thread) {
                        on_applied(&thread, held.1, attr);
                        applied.push(held);
                    }
                }
            }
            drift.check_all(applied.iter().flat_map(|(_, _, change, pinned)| std::iter::once(change).chain(pinned)));
            (!applied.is_empty() && applied.iter().all(|(t, _, _, _)| !t.alive())).then_some(EndedBy::ThreadsExited)
        })
    };
    let mut outcomes = Vec::new();
    for (thread, old, change, pinned) in applied {
        let entry = change.entry().id.clone();
        let cpus = |v: &Value| match v {
            Value::Cpus { cpus } => Some(cpus.clone()),
            _ => None,
        };
        let (old_cpus, new_cpus) = pinned.as_ref().map_or((None, None), |p| (cpus(&p.entry().old), cpus(&p.entry().new)));
        let settled = hold::settle_one(change, config.persist)?;
        if let Some(p) = pinned {
            hold::settle_one(p, config.persist)?;
        }
        let (exited, restored) = (settled == Settled::Gone, settled == Settled::Restored);
        let new = server.map_or(attr, |p| p.high);
        outcomes.push(ThreadOutcome { thread, old, new, entry, exited, restored, old_cpus, new_cpus });
    }
    Ok(Report {
        schema: SCHEMA,
        matched: config.matched.clone(),
        policy: config.policy,
        persist: config.persist,
        held_ns,
        threads: outcomes,
        // A server that lost monitor events served blind for a while.
        complete: ended_by.complete(config.duration_ns, server_report.as_ref().map_or(0, |s| s.lost_events)),
        server: server_report,
        ended_by,
        drifts: drift.drifts,
    })
}
