//! The real-time set-up that every latency thread does the same way as
//! cyclictest: pin to a CPU, SCHED_FIFO at a priority, all memory locked,
//! and `/dev/cpu_dma_latency` held at 0 so deep C-states cannot add their
//! exit latency to what is measured.

use crate::error::{Error, Result};
use std::fs::File;
use std::io::Write;

/// Pins the calling thread to `cpu`.
pub fn pin_to_cpu(cpu: usize) -> Result<()> {
    let mut set = nix::sched::CpuSet::new();
    set.set(cpu).map_err(|_| Error::Invalid(format!("CPU {cpu} is beyond what this machine supports")))?;
    nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(0), &set)
        .map_err(|e| Error::Invalid(format!("cannot run on CPU {cpu}: {e} (is it online?)")))
}

/// Puts the calling thread in SCHED_FIFO at `priority` (1..=99), or leaves
/// it in SCHED_OTHER when `priority` is 0, as cyclictest's `-p 0` does.
pub fn set_fifo(priority: u8) -> Result<()> {
    if priority == 0 {
        return Ok(());
    }
    if priority > 99 {
        return Err(Error::Invalid(format!("priority {priority} is outside SCHED_FIFO's 1..=99")));
    }
    let param = libc::sched_param { sched_priority: priority as i32 };
    // SAFETY: plain syscall on the calling thread (pid 0) with a valid param.
    let rc = unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) };
    if rc == 0 {
        return Ok(());
    }
    let err = std::io::Error::last_os_error();
    match err.raw_os_error() {
        Some(libc::EPERM) => Err(Error::MissingPrivilege {
            capability: "CAP_SYS_NICE",
            purpose: format!("run at SCHED_FIFO priority {priority} (or raise RLIMIT_RTPRIO)"),
        }),
        _ => Err(Error::io(format!("setting SCHED_FIFO priority {priority}"), err)),
    }
}

/// Locks all current and future memory, so a page fault never lands in
/// the middle of a measured wake-up.
pub fn lock_memory() -> Result<()> {
    // SAFETY: mlockall takes only flags.
    let rc = unsafe { libc::mlockall(libc::MCL_CURRENT | libc::MCL_FUTURE) };
    if rc == 0 {
        return Ok(());
    }
    let err = std::io::Error::last_os_error();
    match err.raw_os_error() {
        Some(libc::EPERM) | Some(libc::ENOMEM) => Err(Error::MissingPrivilege {
            capability: "CAP_IPC_LOCK",
            purpose: "lock the measuring threads' memory (mlockall) beyond RLIMIT_MEMLOCK".into(),
        }),
        _ => Err(Error::io("mlockall", err)),
    }
}

/// What a measuring thread needs, tried for real and undone: lock memory
/// (then unlock it) and take SCHED_FIFO `priority` in a scratch thread
/// that ends at once. Exit 3 naming what is missing. A trial, not a
/// capability check, because RLIMIT_RTPRIO / RLIMIT_MEMLOCK can grant
/// either without a capability.
pub fn check_prerequisites(priority: u8) -> Result<()> {
    lock_memory()?;
    unlock_memory();
    std::thread::spawn(move || set_fifo(priority))
        .join()
        .unwrap_or_else(|_| Err(Error::Failed("the SCHED_FIFO trial thread panicked".into())))
}

/// Undoes [`lock_memory`]; called when the measurement ends so a
/// long-lived process does not keep everything pinned.
pub fn unlock_memory() {
    // SAFETY: munlockall has no arguments.
    unsafe { libc::munlockall() };
}

/// Holds `/dev/cpu_dma_latency` at 0 us while alive; the kernel drops the
/// request when the file is closed, so dropping this restores the system.
pub struct DmaLatencyHold {
    _file: File,
}

impl DmaLatencyHold {
    /// `Ok(None)` when the file does not exist (kernel without PM QoS).
    pub fn zero() -> Result<Option<Self>> {
        let path = "/dev/cpu_dma_latency";
        let mut file = match std::fs::OpenOptions::new().write(true).open(path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
                return Err(Error::MissingPrivilege {
                    capability: "CAP_DAC_OVERRIDE",
                    purpose: "hold /dev/cpu_dma_latency at 0 (it is root's file)".into(),
                })
            }
            Err(e) => return Err(Error::io(format!("opening {path}"), e)),
        };
        file.write_all(&0i32.to_ne_bytes()).map_err(|e| Error::io(format!("writing {path}"), e))?;
        Ok(Some(DmaLatencyHold { _file: file }))
    }
}

/// The CPUs that are online now, from `/sys/devices/system/cpu/online`.
pub fn online_cpus() -> Result<Vec<usize>> {
    let path = "/sys/devices/system/cpu/online";
    let text = std::fs::read_to_string(path).map_err(|e| Error::io(format!("reading {path}"), e))?;
    parse_cpu_list(text.trim()).map_err(|e| Error::Failed(format!("{path}: {e}")))
}

/// The kernel's largest NR_CPUS (CONFIG_NR_CPUS allows up to 8192): a
/// range past it is a typo, and `0-18446744073709551615` would be a list
/// of that many numbers.
const MAX_CPUS: usize = 8192;

/// Parses a CPU list as the kernel writes it: `0-3,5,7-8`.
pub fn parse_cpu_list(text: &str) -> std::result::Result<Vec<usize>, String> {
    let mut cpus = Vec::new();
    for part in text.split(',').map(str::trim) {
        if part.is_empty() {
            return Err(format!("empty entry in CPU list `{text}`"));
        }
        let number = |s: &str| s.trim().parse::<usize>().map_err(|_| format!("`{s}` is not a CPU number in `{text}`"));
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b) = (number(a)?, number(b)?);
                if a > b {
                    return Err(format!("range `{part}` runs backwards in `{text}`"));
                }
                if b >= MAX_CPUS {
                    return Err(format!("CPU {b} in `{text}` is beyond the largest CPU number Linux supports ({})", MAX_CPUS - 1));
                }
                cpus.extend(a..=b);
            }
            None => cpus.push(number(part)?),
        }
    }
    cpus.sort_unstable();
    cpus.dedup();
    Ok(cpus)
}

/// Clock reads in integer ns; CLOCK_MONOTONIC is what cyclictest uses.
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: valid pointer to a timespec on the stack.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Sleeps until CLOCK_MONOTONIC reaches `deadline_ns` (absolute), resuming
/// after signals, as cyclictest's default mode does.
pub fn sleep_until_ns(deadline_ns: u64) {
    let ts = libc::timespec {
        tv_sec: (deadline_ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (deadline_ns % 1_000_000_000) as libc::c_long,
    };
    loop {
        // SAFETY: valid timespec; no remainder is needed with TIMER_ABSTIME.
        let rc = unsafe {
            libc::clock_nanosleep(libc::CLOCK_MONOTONIC, libc::TIMER_ABSTIME, &ts, std::ptr::null_mut())
        };
        if rc != libc::EINTR {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists_parse_like_the_kernel_writes_them() {
        assert_eq!(parse_cpu_list("0-3,5,7-8").unwrap(), vec![0, 1, 2, 3, 5, 7, 8]);
        assert_eq!(parse_cpu_list("1").unwrap(), vec![1]);
        assert_eq!(parse_cpu_list("1,1,0").unwrap(), vec![0, 1]);
        assert!(parse_cpu_list("3-1").is_err());
        assert!(parse_cpu_list("a").is_err());
        assert!(parse_cpu_list("0,,1").is_err());
        let e = parse_cpu_list("0-18446744073709551615").unwrap_err();
        assert!(e.contains("8191"), "{e}");
    }

    #[test]
    fn online_cpus_include_this_one() {
        let cpus = online_cpus().unwrap();
        // SAFETY: sched_getcpu takes no arguments and only reads.
        let here = unsafe { libc::sched_getcpu() };
        assert!(here >= 0 && cpus.contains(&(here as usize)), "CPU {here} not in {cpus:?}");
    }

    #[test]
    fn absolute_sleep_does_not_wake_early() {
        let deadline = monotonic_ns() + 2_000_000;
        sleep_until_ns(deadline);
        assert!(monotonic_ns() >= deadline);
    }
}
