//! The probe's scheduling: its policy and the default priority just below
//! the driver threads (pinning and memory locking are [`irqlab_host::rt`]'s).

use irqlab_host::error::{Error, Result};
use irqlab_host::rt;
use serde::Serialize;

/// Scheduling policy of the probe thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Policy {
    Fifo,
    Other,
}

/// Sets the calling thread's policy (priority ignored for `Other`).
pub fn set_policy(policy: Policy, priority: i32) -> Result<()> {
    match policy {
        Policy::Fifo => {
            let priority = u8::try_from(priority)
                .ok()
                .filter(|p| (1..=99).contains(p))
                .ok_or_else(|| Error::Invalid(format!("priority {priority}: outside SCHED_FIFO's 1..=99")))?;
            rt::set_fifo(priority)
        }
        Policy::Other => rt::set_other(),
    }
}

/// A kernel thread that handles interrupts or network polling.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DriverThread {
    pub pid: i32,
    pub comm: String,
    /// SCHED_FIFO/RR priority, 0 for the fair class.
    pub rt_priority: i32,
}

/// Threaded IRQ handlers (`irq/*`) and threaded NAPI pollers (`napi/*`).
pub fn driver_threads() -> Vec<DriverThread> {
    let mut found = Vec::new();
    for pid in irqlab_host::procs::pids() {
        let Some(comm) = irqlab_host::procs::comm(pid) else { continue };
        if !(comm.starts_with("irq/") || comm.starts_with("napi/")) {
            continue;
        }
        let mut param = libc::sched_param { sched_priority: 0 };
        // SAFETY: reading another task's parameters into a valid struct.
        let rt_priority = if unsafe { libc::sched_getparam(pid, &mut param) } == 0 { param.sched_priority } else { 0 };
        found.push(DriverThread { pid, comm, rt_priority });
    }
    found
}

/// The default probe priority (load-bounds paper §4: "just below the
/// driver's threads"): one below the lowest real-time driver thread, or 90
/// when no driver thread runs at a real-time priority. Returns the reason.
pub fn default_priority(threads: &[DriverThread]) -> (i32, String) {
    match threads.iter().filter(|t| t.rt_priority > 0).min_by_key(|t| t.rt_priority) {
        Some(t) if t.rt_priority > 1 => (
            t.rt_priority - 1,
            format!("one below the lowest real-time driver thread {} (pid {}, priority {})", t.comm, t.pid, t.rt_priority),
        ),
        Some(t) => (1, format!("driver thread {} runs at priority 1; the probe takes 1 as well", t.comm)),
        None => (90, "no irq/* or napi/* thread runs at a real-time priority; default 90".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_priority_sits_below_driver_threads() {
        let t = |comm: &str, p| DriverThread { pid: 1, comm: comm.into(), rt_priority: p };
        assert_eq!(default_priority(&[]).0, 90);
        assert_eq!(default_priority(&[t("napi/x-1", 0)]).0, 90);
        let (p, why) = default_priority(&[t("irq/9-acpi", 50), t("irq/24-virtio", 45), t("napi/x", 0)]);
        assert_eq!(p, 44);
        assert!(why.contains("irq/24-virtio"));
    }
}
