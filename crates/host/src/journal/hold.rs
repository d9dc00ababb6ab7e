//! Holding a set of journalled changes for a run: until Ctrl-C / SIGTERM or
//! a duration, then restored newest first, or kept as persistent entries.
//! The run-end shape of the commands that only set values (`control irq`,
//! `control apply`, `control sched-feature`, `control fair-server`).

use super::{Applied, Restored};
use crate::error::Result;
use serde::Serialize;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Why a hold ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum EndedBy {
    /// Its `--duration` ran out.
    Duration,
    /// Ctrl-C or SIGTERM.
    Stopped,
    /// `--persist`: applied and left, nothing held.
    Persisted,
}

impl EndedBy {
    /// The run is complete unless a stop cut a `--duration` short: Ctrl-C is
    /// how an open-ended hold is meant to end.
    pub fn complete(self, duration_ns: Option<u64>) -> bool {
        !(self == EndedBy::Stopped && duration_ns.is_some())
    }
}

impl std::fmt::Display for EndedBy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            EndedBy::Duration => "duration",
            EndedBy::Stopped => "stopped",
            EndedBy::Persisted => "persisted",
        })
    }
}

/// Waits until `stop` or `duration_ns` (forever without either; not at all
/// with `persist`); how long it held and why it ended.
pub fn wait(stop: &AtomicBool, duration_ns: Option<u64>, persist: bool) -> (u64, EndedBy) {
    let started = Instant::now();
    let ended_by = if persist {
        EndedBy::Persisted
    } else {
        loop {
            if stop.load(Ordering::SeqCst) {
                break EndedBy::Stopped;
            }
            if duration_ns.is_some_and(|d| started.elapsed() >= Duration::from_nanos(d)) {
                break EndedBy::Duration;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    };
    (started.elapsed().as_nanos() as u64, ended_by)
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

/// Restores `applied` newest first (or persists each); the changes in the
/// order they were made.
pub fn settle(applied: Vec<Applied>, persist: bool) -> Result<Vec<Changed>> {
    let mut changes = Vec::new();
    for a in applied.into_iter().rev() {
        let e = a.entry().clone();
        let restored = if persist {
            a.persist()?;
            false
        } else {
            a.restore()? == Restored::Restored
        };
        changes.push(Changed { object: e.object.to_string(), old: e.old.to_string(), new: e.new.to_string(), entry: e.id, restored });
    }
    changes.reverse();
    Ok(changes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_duration_cut_short_is_incomplete() {
        assert!(EndedBy::Stopped.complete(None));
        assert!(!EndedBy::Stopped.complete(Some(1)));
        assert!(EndedBy::Duration.complete(Some(1)) && EndedBy::Persisted.complete(None));
        assert_eq!(serde_json::to_string(&EndedBy::Persisted).unwrap(), "\"persisted\"");
    }

    #[test]
    fn a_hold_ends_at_its_duration_or_at_once_when_persisting() {
        let stop = AtomicBool::new(false);
        assert_eq!(wait(&stop, None, true).1, EndedBy::Persisted);
        let (held, by) = wait(&stop, Some(60_000_000), false);
        assert_eq!(by, EndedBy::Duration);
        assert!(held >= 60_000_000);
        stop.store(true, Ordering::SeqCst);
        assert_eq!(wait(&stop, Some(u64::MAX), false).1, EndedBy::Stopped);
    }
}
