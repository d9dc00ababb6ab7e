//! Holding a set of journalled changes for a run: until Ctrl-C / SIGTERM or
//! a duration, then restored newest first, or kept as persistent entries.
//! The run-end shape of the commands that only set values (`control irq`,
//! `control apply`, `control sched-feature`, `control fair-server`). While
//! a run holds its changes it reads them back ([`DriftWatch`]): a value
//! something else changed (irqbalance, tuned, stalld) is said as it
//! happens, with who likely did it, not only by `control status` after.

use super::{Applied, Author, Restored, Value};
use crate::error::Result;
use serde::Serialize;
use std::collections::HashMap;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

pub use crate::run_end::{EndedBy, RunEnd};

/// Waits until `stop` or `duration_ns` (forever without either; not at all
/// with `persist`); how long it held and why it ended.
pub fn wait(stop: &AtomicBool, duration_ns: Option<u64>, persist: bool) -> (u64, EndedBy) {
    wait_while(stop, duration_ns, persist, || None)
}

/// Waits as [`wait`] does, also ending when `gone` says what went away
/// (checked every 50 ms).
pub fn wait_while(stop: &AtomicBool, duration_ns: Option<u64>, persist: bool, mut gone: impl FnMut() -> Option<EndedBy>) -> (u64, EndedBy) {
    if persist {
        return (0, EndedBy::Persisted);
    }
    let run = RunEnd::start(stop, duration_ns);
    let ended_by = loop {
        if let Some(why) = run.ended(&mut gone) {
            break why;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    (run.elapsed_ns(), ended_by)
}

/// One change made, as a report shows it.
#[derive(Debug, Clone, Serialize)]
pub struct Changed {
    pub object: String,
    pub old: String,
    pub new: String,
    /// The journal entry (kept only with `persist`).
    pub entry: String,
    /// The old value is back (false when persisted or the object is gone).
    pub restored: bool,
}

/// What became of one change at the end of a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Settled {
    Persisted,
    Restored,
    /// The object is gone (its thread exited): nothing to restore.
    Gone,
}

/// Persists one change or restores it: the one persist-or-restore.
pub fn settle_one(applied: Applied, persist: bool) -> Result<Settled> {
    if persist {
        applied.persist()?;
        return Ok(Settled::Persisted);
    }
    Ok(match applied.restore()? {
        Restored::Restored => Settled::Restored,
        Restored::Gone => Settled::Gone,
    })
}

/// Restores `applied` newest first (or persists each); the changes in the
/// order they were made.
pub fn settle(applied: Vec<Applied>, persist: bool) -> Result<Vec<Changed>> {
    let mut changes = Vec::new();
    for a in applied.into_iter().rev() {
        let e = a.entry().clone();
        let restored = settle_one(a, persist)? == Settled::Restored;
        changes.push(Changed { object: e.object.to_string(), old: e.old.to_string(), new: e.new.to_string(), entry: e.id, restored });
    }
    changes.reverse();
    Ok(changes)
}

/// How often a hold reads back what it holds.
pub const CHECK_EVERY: Duration = Duration::from_secs(1);

/// A value something else changed while a run held it.
#[derive(Debug, Clone, Serialize)]
pub struct Drift {
    pub object: String,
    /// What irqlab set.
    pub set: String,
    /// What it found instead.
    pub found: String,
    /// Who likely changed it, where irqlab can tell.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub by: Option<Author>,
    /// When, from the start of the hold.
    pub at_ms: u64,
    /// Whether irqlab wrote its value again (`control apply --follow`).
    pub set_back: bool,
    /// Setting it again failed: why.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failed: Option<String>,
}

impl std::fmt::Display for Drift {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: irqlab set {}, now {}{}; {}", self.object, self.set, self.found, self.by_whom(), self.outcome())
    }
}

impl Drift {
    /// `, by WHO` where irqlab can tell who changed it, else nothing.
    pub fn by_whom(&self) -> String {
        self.by.as_ref().map(|by| format!(", by {by}")).unwrap_or_default()
    }

    /// What irqlab did about it, in words.
    pub fn outcome(&self) -> String {
        match (&self.failed, self.set_back) {
            (Some(why), _) => format!("setting it again failed: {why}"),
            (None, true) => "set again".into(),
            (None, false) => "held as it is now, restored at the end".into(),
        }
    }
}

/// Reads held changes back while a run holds them (every [`CHECK_EVERY`]):
/// a change whose object holds something else now is a [`Drift`], said
/// once per value found (a value that stays drifted is not said every
/// second), written over when asked.
pub struct DriftWatch {
    started: Instant,
    checked: Instant,
    /// The drifted value last found, per journal entry.
    found: HashMap<String, Value>,
    /// Say each drift on stderr as it is found.
    say: bool,
    pub drifts: Vec<Drift>,
}

impl DriftWatch {
    /// A watch starting now; `say`: each drift on stderr when found
    /// (a command whose own rows say it passes false).
    pub fn new(say: bool) -> DriftWatch {
        let now = Instant::now();
        DriftWatch { started: now, checked: now, found: HashMap::new(), say, drifts: Vec::new() }
    }

    /// Whether a check is due; the next is due [`CHECK_EVERY`] from now.
    pub fn due(&mut self) -> bool {
        if self.checked.elapsed() < CHECK_EVERY {
            return false;
        }
        self.checked = Instant::now();
        true
    }

    /// Reads one held change back: a drift not said before is recorded
    /// (and, with `set_back`, written over) and returned.
    pub fn check(&mut self, applied: &Applied, set_back: bool) -> Option<&Drift> {
        let entry = applied.entry();
        let Some(found) = applied.drift() else {
            self.found.remove(&entry.id);
            return None;
        };
        if self.found.get(&entry.id).is_some_and(|said| said.same_setting(&found)) {
            return None;
        }
        let failed = if set_back { applied.set_again().err().map(|e| e.to_string()) } else { None };
        if failed.is_some() || !set_back {
            self.found.insert(entry.id.clone(), found.clone());
        }
        let drift = Drift {
            object: entry.object.to_string(),
            set: entry.new.to_string(),
            by: super::drifted_by(&entry.object, &found),
            found: found.to_string(),
            at_ms: self.started.elapsed().as_millis() as u64,
            set_back,
            failed,
        };
        if self.say {
            eprintln!("drift: {drift}");
        }
        self.drifts.push(drift);
        self.drifts.last()
    }

    /// [`check`](Self::check) on each of `held` when a check is due.
    pub fn check_all<'a>(&mut self, held: impl IntoIterator<Item = &'a Applied>) {
        if self.due() {
            for applied in held {
                self.check(applied, false);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::Ordering;

    #[test]
    fn a_hold_ends_at_its_duration_or_at_once_when_persisting() {
        let stop = AtomicBool::new(false);
        assert_eq!(wait(&stop, None, true).1, EndedBy::Persisted);
        let (held, by) = wait(&stop, Some(60_000_000), false);
        assert_eq!(by, EndedBy::Duration);
        assert!(held >= 60_000_000);
        assert_eq!(wait_while(&stop, None, false, || Some(EndedBy::DeviceGone)).1, EndedBy::DeviceGone);
        stop.store(true, Ordering::SeqCst);
        assert_eq!(wait(&stop, Some(u64::MAX), false).1, EndedBy::Stopped);
    }
}
