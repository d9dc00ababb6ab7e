//! How a live run ended, and whether it is complete: one shape for every
//! controller (`control threads`, `napi`, `irq`, `apply`, the sched knobs,
//! `bh-budget`, `process-aware`, `idletime`; and `watch`).
//!
//! The rule: a run is **complete** when it ended the way it was asked to
//! end and lost nothing on the way. Its `--duration` ran out; what it
//! controlled went away (every thread exited, the device went, the
//! background command exited); it persisted its change; it met what it
//! watched for (`watch --on-threshold stop`); or, with no
//! `--duration`, a stop (Ctrl-C / SIGTERM is how an open-ended run ends).
//! A stop that cut a `--duration` short, or any lost event, makes it
//! incomplete (exit 1).
//!
//! How a run ends is decided in one place, [`RunEnd::ended`], which every
//! controller's loop asks each turn (and `watch` once, after its run).

use crate::rt::monotonic_ns;
use serde::Serialize;
use std::sync::atomic::{AtomicBool, Ordering};

/// A run in progress: since when, for how long, and the stop flag that
/// Ctrl-C / SIGTERM set.
#[derive(Debug, Clone, Copy)]
pub struct RunEnd<'a> {
    stop: &'a AtomicBool,
    started_ns: u64,
    duration_ns: Option<u64>,
}

impl<'a> RunEnd<'a> {
    /// A run starting now, ending at `duration_ns` (open-ended without).
    pub fn start(stop: &'a AtomicBool, duration_ns: Option<u64>) -> RunEnd<'a> {
        RunEnd { stop, started_ns: monotonic_ns(), duration_ns }
    }

    /// Whether the run is to end now, and why: a stop first (so a Ctrl-C
    /// that lands as the duration runs out reads as the stop it was), then
    /// the duration, then what the loop itself watches (`watched`: its
    /// threads exited, its device went, its command exited, a threshold
    /// met), asked only when neither of the first two holds.
    pub fn ended(&self, watched: impl FnOnce() -> Option<EndedBy>) -> Option<EndedBy> {
        if self.stop.load(Ordering::SeqCst) {
            Some(EndedBy::Stopped)
        } else if self.ends_at_ns().is_some_and(|end| monotonic_ns() >= end) {
            Some(EndedBy::Duration)
        } else {
            watched()
        }
    }

    /// When the duration runs out (CLOCK_MONOTONIC ns), for a loop that
    /// sleeps until its next event or the end, whichever comes first.
    pub fn ends_at_ns(&self) -> Option<u64> {
        self.duration_ns.map(|d| self.started_ns.saturating_add(d))
    }

    /// When the run started (CLOCK_MONOTONIC ns).
    pub fn started_ns(&self) -> u64 {
        self.started_ns
    }

    /// How long it has run, ns.
    pub fn elapsed_ns(&self) -> u64 {
        monotonic_ns().saturating_sub(self.started_ns)
    }

    /// The rule of this module for this run: complete unless a stop cut
    /// its duration short or it lost events.
    pub fn complete(&self, ended_by: &EndedBy, lost_events: u64) -> bool {
        ended_by.complete(self.duration_ns, lost_events)
    }
}

/// Why a run ended; serialised as its text ("duration", "stopped",
/// "threads exited", "the background command exited (exit status: 0)").
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EndedBy {
    /// Its `--duration` ran out.
    Duration,
    /// Ctrl-C or SIGTERM.
    Stopped,
    /// `--persist`: applied and left, nothing held.
    Persisted,
    /// Every thread it controlled exited.
    ThreadsExited,
    /// The device it controlled went away.
    DeviceGone,
    /// The command it ran exited, with this status.
    CommandExited(String),
    /// `watch --on-threshold stop`: the first wake-up past the threshold.
    Threshold,
}

impl EndedBy {
    /// The rule of this module.
    pub fn complete(&self, duration_ns: Option<u64>, lost_events: u64) -> bool {
        !(*self == EndedBy::Stopped && duration_ns.is_some()) && lost_events == 0
    }
}

impl std::fmt::Display for EndedBy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            EndedBy::Duration => f.write_str("duration"),
            EndedBy::Stopped => f.write_str("stopped"),
            EndedBy::Persisted => f.write_str("persisted"),
            EndedBy::ThreadsExited => f.write_str("threads exited"),
            EndedBy::DeviceGone => f.write_str("device gone"),
            EndedBy::CommandExited(status) => write!(f, "the background command exited ({status})"),
            EndedBy::Threshold => f.write_str("threshold"),
        }
    }
}

impl Serialize for EndedBy {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

/// Read back from its text, as a document written it (`watch --from`).
impl<'de> serde::Deserialize<'de> for EndedBy {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        let command = text.strip_prefix("the background command exited (").and_then(|t| t.strip_suffix(')'));
        Ok(match (text.as_str(), command) {
            (_, Some(status)) => EndedBy::CommandExited(status.to_string()),
            ("duration", _) => EndedBy::Duration,
            ("stopped", _) => EndedBy::Stopped,
            ("persisted", _) => EndedBy::Persisted,
            ("threads exited", _) => EndedBy::ThreadsExited,
            ("device gone", _) => EndedBy::DeviceGone,
            ("threshold", _) => EndedBy::Threshold,
            (other, _) => return Err(serde::de::Error::custom(format!("`{other}` is not how a run ends"))),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_end_reads_back_from_its_text() {
        for ended in [
            EndedBy::Duration,
            EndedBy::Stopped,
            EndedBy::Persisted,
            EndedBy::ThreadsExited,
            EndedBy::DeviceGone,
            EndedBy::CommandExited("exit status: 3".into()),
            EndedBy::Threshold,
        ] {
            let text = serde_json::to_string(&ended).unwrap();
            assert_eq!(serde_json::from_str::<EndedBy>(&text).unwrap(), ended, "{text}");
        }
        assert!(serde_json::from_str::<EndedBy>("\"bored\"").is_err());
    }

    #[test]
    fn one_rule_for_complete() {
        assert!(EndedBy::Stopped.complete(None, 0), "Ctrl-C ends an open-ended run");
        assert!(!EndedBy::Stopped.complete(Some(1), 0), "a duration cut short");
        assert!(!EndedBy::Duration.complete(Some(1), 3), "lost events");
        for ended in [
            EndedBy::Duration,
            EndedBy::Persisted,
            EndedBy::ThreadsExited,
            EndedBy::DeviceGone,
            EndedBy::CommandExited("0".into()),
            EndedBy::Threshold,
        ] {
            assert!(ended.complete(Some(1), 0), "{ended}");
        }
    }

    #[test]
    fn a_stop_comes_first_then_the_duration_then_what_the_loop_watches() {
        let stop = AtomicBool::new(false);
        let open = RunEnd::start(&stop, None);
        assert_eq!(open.ended(|| None), None);
        assert_eq!(open.ended(|| Some(EndedBy::ThreadsExited)), Some(EndedBy::ThreadsExited));
        let over = RunEnd::start(&stop, Some(0));
        let mut asked = false;
        assert_eq!(
            over.ended(|| {
                asked = true;
                Some(EndedBy::DeviceGone)
            }),
            Some(EndedBy::Duration)
        );
        assert!(!asked, "the loop's own check is not asked once the duration is over");
        stop.store(true, Ordering::SeqCst);
        assert_eq!(over.ended(|| Some(EndedBy::DeviceGone)), Some(EndedBy::Stopped));
        assert!(!over.complete(&EndedBy::Stopped, 0), "a duration cut short");
        assert!(open.complete(&EndedBy::Stopped, 0), "Ctrl-C ends an open-ended run");
    }

    #[test]
    fn it_is_written_as_its_text() {
        assert_eq!(serde_json::to_string(&EndedBy::ThreadsExited).unwrap(), "\"threads exited\"");
        assert_eq!(
            serde_json::to_string(&EndedBy::CommandExited("exit status: 0".into())).unwrap(),
            "\"the background command exited (exit status: 0)\""
        );
        assert_eq!(EndedBy::Stopped.to_string(), "stopped");
    }
}
