//! RT bandwidth control. A SCHED_FIFO thread that never sleeps is
//! throttled: `kernel.sched_rt_runtime_us` of each `sched_rt_period_us`
//! (950000 of 1000000 by default) goes to real-time tasks and the rest to
//! other classes (on 6.12+ the fair-class deadline server gives starved fair
//! tasks up to 50 ms per second the same way). The probe must not report
//! that as device interference silently: it either lifts the limit for the
//! run (restored on every exit path) or marks the run as limited.
//!
//! A module of its own, not the probe's: the probe lifts the limit, the
//! control journal lists and reverts a lift killed runs abandoned, and
//! [`crate::machine`] reports the setting (`probe::rt_limit` still names it).

use crate::error::{Error, Result};
use crate::flock::{flock, open};
use serde::Serialize;
use std::fs::File;
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

// Several irqlab processes may lift the limit at once (two probes, or
// tests running side by side). Each holds a shared flock on USERS while it
// needs the limit lifted; SAVED keeps the value from before the first of
// them; whoever can upgrade to an exclusive lock when it is done is the
// last, and restores SAVED. SETUP serialises these transitions. A holder
// that was killed leaves SAVED behind, and the next one restores from it.
const RUN_DIR: &str = "/run/irqlab";
const SETUP: &str = "/run/irqlab/rt-limit.setup.lock";
const USERS: &str = "/run/irqlab/rt-limit.users";
const SAVED: &str = "/run/irqlab/rt-limit.saved";

/// This process's share of the lift (its USERS lock), until restored. In
/// a static so that an exit without destructors (`std::process::exit`,
/// e.g. a second Ctrl-C) still gives it back through an atexit hook.
static HELD: Mutex<Option<Held>> = Mutex::new(None);

/// This process's share: the USERS lock, how many live guards use it, and
/// the original value.
struct Held {
    users: File,
    guards: usize,
    original: i64,
}

extern "C" fn restore_at_exit() {
    if let Ok(mut held) = HELD.lock() {
        if let Some(h) = held.take() {
            give_back(h.users);
        }
    }
}

fn setup_lock() -> std::io::Result<File> {
    let file = open(SETUP)?;
    flock(&file, libc::LOCK_EX)?;
    Ok(file)
}

fn saved() -> Option<i64> {
    std::fs::read_to_string(SAVED).ok()?.trim().parse().ok()
}

/// One guard less; the process's last one lets go of its share.
fn release() {
    let Ok(mut held) = HELD.lock() else { return };
    let Some(h) = held.as_mut() else { return };
    h.guards -= 1;
    if h.guards == 0 {
        let h = held.take().expect("checked above");
        give_back(h.users);
    }
}

/// Lets go of this process's share; the last holder in any process
/// restores the saved value.
fn give_back(users: File) {
    let _setup = setup_lock();
    if flock(&users, libc::LOCK_EX | libc::LOCK_NB).is_ok() {
        if let Some(original) = saved() {
            if std::fs::write(RUNTIME, original.to_string()).is_ok() {
                let _ = std::fs::remove_file(SAVED);
            }
        }
    }
}

/// Whether some irqlab process (this one too) holds the limit lifted;
/// None when no irqlab process ever lifted it here. Opens without creating
/// anything, so `irqlab doctor` can ask.
fn held_anywhere() -> Option<bool> {
    let users = File::open(USERS).ok()?;
    Some(flock(&users, libc::LOCK_EX | libc::LOCK_NB).is_err())
}

/// The value to restore when an irqlab run that lifted the limit was
/// killed (SIGKILL runs no exit hook) and no run holds it now; None
/// otherwise.
pub fn abandoned_lift() -> Option<i64> {
    (held_anywhere() == Some(false)).then(saved).flatten()
}

/// Restores the limit an irqlab run that was killed left lifted (see
/// [`abandoned_lift`]); returns the value restored. Every probe run calls
/// it first, so the machine gets its setting back at the next run.
pub fn repair_abandoned() -> Result<Option<i64>> {
    let _setup = match setup_lock() {
        Ok(lock) => lock,
        // No /run/irqlab (nothing was ever lifted) or no right to it.
        Err(_) => return Ok(None),
    };
    let Some(original) = abandoned_lift() else { return Ok(None) };
    std::fs::write(RUNTIME, original.to_string()).map_err(|e| write_error(RUNTIME, e))?;
    let _ = std::fs::remove_file(SAVED);
    Ok(Some(original))
}

/// The value from before the lift while some irqlab process (this one or
/// another) holds the limit lifted; None otherwise.
pub fn lifted_by_irqlab() -> Option<i64> {
    (held_anywhere() == Some(true)).then(saved).flatten()
}

fn write_error(path: &str, e: std::io::Error) -> Error {
    match e.raw_os_error() {
        Some(libc::EPERM) | Some(libc::EACCES) | Some(libc::EROFS) => {
            Error::MissingPrivilege { capability: "CAP_SYS_ADMIN", purpose: format!("write {path} (lift the RT throttling limit)") }
        }
        _ => Error::io(format!("writing {path}"), e),
    }
}

/// While alive, RT throttling is off (`sched_rt_runtime_us = -1`); when
/// the last holder in any irqlab process drops it (or exits), the value
/// from before the first lift is restored.
#[derive(Debug)]
pub struct LiftedRtLimit {
    original: i64,
}

impl LiftedRtLimit {
    /// Lifts the limit, or joins a lift of this or another irqlab process;
    /// needs root.
    pub fn lift() -> Result<LiftedRtLimit> {
        let mut held = HELD.lock().map_err(|_| Error::Failed("RT limit state poisoned".into()))?;
        if let Some(h) = held.as_mut() {
            h.guards += 1;
            return Ok(LiftedRtLimit { original: h.original });
        }
        std::fs::create_dir_all(RUN_DIR).map_err(|e| write_error(RUN_DIR, e))?;
        let _setup = setup_lock().map_err(|e| write_error(SETUP, e))?;
        let users = open(USERS).map_err(|e| write_error(USERS, e))?;
        let alone = flock(&users, libc::LOCK_EX | libc::LOCK_NB).is_ok();
        // A saved value is the original whether its holder is still here
        // or was killed before restoring it.
        let original = match saved() {
            Some(v) => v,
            None => read_i64(RUNTIME)?,
        };
        if alone {
            std::fs::write(SAVED, original.to_string()).map_err(|e| write_error(SAVED, e))?;
        }
        flock(&users, libc::LOCK_SH).map_err(|e| Error::io(format!("locking {USERS}"), e))?;
        static HOOK: std::sync::Once = std::sync::Once::new();
        // SAFETY: registering a plain extern "C" function.
        HOOK.call_once(|| unsafe {
            libc::atexit(restore_at_exit);
        });
        *held = Some(Held { users, guards: 1, original });
        drop(held);
        if let Err(e) = std::fs::write(RUNTIME, "-1") {
            drop(_setup);
            release();
            return Err(write_error(RUNTIME, e));
        }
        Ok(LiftedRtLimit { original })
    }

    /// `sched_rt_runtime_us` before irqlab lifted it.
    pub fn previous_us(&self) -> i64 {
        self.original
    }
}

impl Drop for LiftedRtLimit {
    fn drop(&mut self) {
        release();
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
