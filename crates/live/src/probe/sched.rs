//! Putting a thread where the probe (or an injected load) needs it: one
//! CPU, a scheduling policy and priority, memory locked.

use crate::error::{Error, Result};
use serde::Serialize;

/// Scheduling policy of the probe thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Policy {
    Fifo,
    Other,
}

/// Pins the calling thread to `cpu`.
pub fn pin_to_cpu(cpu: usize) -> Result<()> {
    let mut set = nix::sched::CpuSet::new();
    set.set(cpu).map_err(|_| Error::Invalid(format!("CPU {cpu} is out of range")))?;
    nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(0), &set)
        .map_err(|e| Error::sys(format!("pinning to CPU {cpu}"), e))
}

/// Sets the calling thread's policy (priority ignored for `Other`).
pub fn set_policy(policy: Policy, priority: i32) -> Result<()> {
    let (pol, prio) = match policy {
        Policy::Fifo => (libc::SCHED_FIFO, priority),
        Policy::Other => (libc::SCHED_OTHER, 0),
    };
    let param = libc::sched_param { sched_priority: prio };
    // SAFETY: sched_setscheduler on the calling thread (pid 0) with a valid param.
    let rc = unsafe { libc::sched_setscheduler(0, pol, &param) };
    if rc != 0 {
        let err = std::io::Error::last_os_error();
        if err.raw_os_error() == Some(libc::EPERM) {
            return Err(Error::MissingPrivilege { capability: "CAP_SYS_NICE", purpose: "run at SCHED_FIFO".into() });
        }
        return Err(Error::io(format!("setting SCHED_FIFO priority {priority}"), err));
    }
    Ok(())
}

/// Locks current and future memory so the loop never takes a page fault.
pub fn lock_memory() -> Result<()> {
    nix::sys::mman::mlockall(nix::sys::mman::MlockAllFlags::MCL_CURRENT | nix::sys::mman::MlockAllFlags::MCL_FUTURE)
        .map_err(|e| match e {
            nix::errno::Errno::EPERM | nix::errno::Errno::ENOMEM => {
                Error::MissingPrivilege { capability: "CAP_IPC_LOCK", purpose: "lock the probe's memory (mlockall)".into() }
            }
            e => Error::sys("mlockall", e),
        })
}

/// Releases the memory lock taken by [`lock_memory`].
pub fn unlock_memory() {
    let _ = nix::sys::mman::munlockall();
}

/// Number of CPUs the kernel knows.
pub fn cpu_count() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
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
    let Ok(dir) = std::fs::read_dir("/proc") else { return found };
    for entry in dir.flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else { continue };
        let Ok(comm) = std::fs::read_to_string(entry.path().join("comm")) else { continue };
        let comm = comm.trim_end().to_string();
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
