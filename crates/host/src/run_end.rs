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

use serde::Serialize;

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

#[cfg(test)]
mod tests {
    use super::*;

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
    fn it_is_written_as_its_text() {
        assert_eq!(serde_json::to_string(&EndedBy::ThreadsExited).unwrap(), "\"threads exited\"");
        assert_eq!(
            serde_json::to_string(&EndedBy::CommandExited("exit status: 0".into())).unwrap(),
            "\"the background command exited (exit status: 0)\""
        );
        assert_eq!(EndedBy::Stopped.to_string(), "stopped");
    }
}
