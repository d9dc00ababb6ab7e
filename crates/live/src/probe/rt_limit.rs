//! RT bandwidth control. A SCHED_FIFO thread that never sleeps is
//! throttled: `kernel.sched_rt_runtime_us` of each `sched_rt_period_us`
//! (950000 of 1000000 by default) goes to real-time tasks and the rest to
//! other classes (on 6.12+ the fair-class deadline server gives starved fair
//! tasks up to 50 ms per second the same way). The probe must not report
//! that as device interference silently: it either lifts the limit for the
//! run (restored on every exit path) or marks the run as limited.

use crate::error::{Error, Result};
use serde::Serialize;
use std::sync::Mutex;

const RUNTIME: &str = "/proc/sys/kernel/sched_rt_runtime_us";
const PERIOD: &str = "/proc/sys/kernel/sched_rt_period_us";

/// The RT bandwidth setting as the probe saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct RtBandwidth {
    /// -1 means unlimited.
    pub runtime_us: i64,
    pub period_us: i64,
}

impl RtBandwidth {
    pub fn read() -> Result<RtBandwidth> {
        Ok(RtBandwidth { runtime_us: read_i64(RUNTIME)?, period_us: read_i64(PERIOD)? })
    }

    /// Whether a spinning real-time thread loses CPU time to throttling.
    pub fn limits(&self) -> bool {
        self.runtime_us >= 0 && self.runtime_us < self.period_us
    }

    /// Time per period given to other classes while RT tasks spin.
    pub fn throttled_ns_per_period(&self) -> u64 {
        if self.limits() {
            (self.period_us - self.runtime_us) as u64 * 1000
        } else {
            0
        }
    }
}

fn read_i64(path: &str) -> Result<i64> {
    let text = std::fs::read_to_string(path).map_err(|e| Error::io(format!("reading {path}"), e))?;
    text.trim().parse().map_err(|_| Error::Failed(format!("{path}: unexpected content `{}`", text.trim())))
}

/// The value to restore if the process exits without running destructors
/// (`std::process::exit`, e.g. a second Ctrl-C): restored by an atexit hook.
static SAVED: Mutex<Option<i64>> = Mutex::new(None);

extern "C" fn restore_at_exit() {
    if let Ok(mut saved) = SAVED.lock() {
        if let Some(v) = saved.take() {
            let _ = std::fs::write(RUNTIME, v.to_string());
        }
    }
}

/// While alive, RT throttling is off (`sched_rt_runtime_us = -1`); dropping
/// it (or exiting the process) restores the previous value.
#[derive(Debug)]
pub struct LiftedRtLimit {
    previous: i64,
}

impl LiftedRtLimit {
    /// Lifts the limit; needs root (writing a sysctl).
    pub fn lift() -> Result<LiftedRtLimit> {
        let previous = read_i64(RUNTIME)?;
        {
            let mut saved = SAVED.lock().map_err(|_| Error::Failed("RT limit state poisoned".into()))?;
            if saved.is_some() {
                return Err(Error::Failed("the RT limit is already lifted by this process".into()));
            }
            *saved = Some(previous);
        }
        static HOOK: std::sync::Once = std::sync::Once::new();
        // SAFETY: registering a plain extern "C" function.
        HOOK.call_once(|| unsafe {
            libc::atexit(restore_at_exit);
        });
        if let Err(e) = std::fs::write(RUNTIME, "-1") {
            *SAVED.lock().unwrap_or_else(|p| p.into_inner()) = None;
            return Err(match e.raw_os_error() {
                Some(libc::EPERM) | Some(libc::EACCES) | Some(libc::EROFS) => Error::MissingPrivilege {
                    capability: "CAP_SYS_ADMIN",
                    purpose: format!("write {RUNTIME} (lift the RT throttling limit)"),
                },
                _ => Error::io(format!("writing {RUNTIME}"), e),
            });
        }
        Ok(LiftedRtLimit { previous })
    }

    pub fn previous_us(&self) -> i64 {
        self.previous
    }
}

impl Drop for LiftedRtLimit {
    fn drop(&mut self) {
        let mut saved = SAVED.lock().unwrap_or_else(|p| p.into_inner());
        if saved.take().is_some() {
            let _ = std::fs::write(RUNTIME, self.previous.to_string());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_setting_limits_50ms_per_second() {
        let bw = RtBandwidth { runtime_us: 950_000, period_us: 1_000_000 };
        assert!(bw.limits());
        assert_eq!(bw.throttled_ns_per_period(), 50_000_000);
        let off = RtBandwidth { runtime_us: -1, period_us: 1_000_000 };
        assert!(!off.limits());
        assert_eq!(off.throttled_ns_per_period(), 0);
    }
}
