//! Holding a set of journalled changes for a run: until Ctrl-C / SIGTERM or
//! a duration, then restored newest first, or kept as persistent entries.
//! The run-end shape of the commands that only set values (`control irq`,
//! `control apply`, `control sched-feature`, `control fair-server`).

use super::{Applied, Restored};
use crate::error::Result;
use serde::Serialize;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

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
