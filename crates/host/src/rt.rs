//! The real-time toolkit every live measurement thread uses, written once:
//! which CPUs are online, pinning to one, SCHED_FIFO / SCHED_OTHER /
//! SCHED_IDLE for the calling thread, locking memory, and the monotonic
//! clock. Errors name the parameter (`cpu`, `priority`), not a CLI flag.

use crate::error::{Error, Result};

const ONLINE: &str = "/sys/devices/system/cpu/online";

/// The CPUs that are online now, from `/sys/devices/system/cpu/online`.
/// Not the calling process's affinity: `taskset -c 0 irqlab ... --cpu 1`
/// must still be able to measure CPU 1 (its threads pin themselves).
pub fn online_cpus() -> Result<Vec<usize>> {
    let text = std::fs::read_to_string(ONLINE).map_err(|e| Error::io(format!("reading {ONLINE}"), e))?;
    parse_cpu_list(text.trim()).map_err(|e| Error::Failed(format!("{ONLINE}: {e}")))
}

/// `Invalid` (exit 2) unless `cpu` is online; the message names the
/// parameter and the CPUs that are.
pub fn require_online(cpu: usize, parameter: &str) -> Result<()> {
    let online = online_cpus()?;
    if online.contains(&cpu) {
        return Ok(());
    }
    Err(Error::Invalid(format!("{parameter} {cpu}: not an online CPU (online: {})", format_cpu_list(&online))))
}

/// A live experiment's measured CPU (`cpu` checked online, exit 2 naming
/// `cpu`; default the last online one) and the other online CPUs, of which
/// there must be one at least (exit 3: `needs` says what for).
pub fn measured_and_others(cpu: Option<usize>, needs: &str) -> Result<(usize, Vec<usize>)> {
    let online = online_cpus()?;
    let focus = match cpu {
        Some(c) => {
            require_online(c, "cpu")?;
            c
        }
        None => *online.last().ok_or_else(|| Error::Failed(format!("{ONLINE} lists no CPU")))?,
    };
    let others: Vec<usize> = online.into_iter().filter(|&c| c != focus).collect();
    if others.is_empty() {
        return Err(Error::MissingKernelFeature { feature: "a second CPU".into(), detail: needs.into() });
    }
    Ok((focus, others))
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

/// Writes CPUs as the kernel does (`0-3,5`), for messages.
pub fn format_cpu_list(cpus: &[usize]) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut i = 0;
    while i < cpus.len() {
        let mut j = i;
        while j + 1 < cpus.len() && cpus[j + 1] == cpus[j] + 1 {
            j += 1;
        }
        parts.push(if i == j { cpus[i].to_string() } else { format!("{}-{}", cpus[i], cpus[j]) });
        i = j + 1;
    }
    parts.join(",")
}

/// Writes CPUs as a bitmask the way the kernel reads and writes one
/// (`/proc/irq/*/smp_affinity`, a queue's `rps_cpus`): hex in 32-bit words
/// separated by commas, most significant first, the first word unpadded
/// (CPU 33: `2,00000000`). No CPU: `0`.
pub fn cpu_mask_hex(cpus: &[usize]) -> String {
    let mut words = vec![0u32; cpus.iter().max().map_or(1, |max| max / 32 + 1)];
    for cpu in cpus {
        words[cpu / 32] |= 1 << (cpu % 32);
    }
    let mut text = String::new();
    for (i, word) in words.iter().rev().enumerate() {
        if i == 0 {
            text.push_str(&format!("{word:x}"));
        } else {
            text.push_str(&format!(",{word:08x}"));
        }
    }
    text
}

/// The CPUs of a kernel CPU mask ([`cpu_mask_hex`]'s format: 32-bit
/// words, most significant first; leading zeros, a `0x` and a single long
/// word written by hand accepted: `3`, `00000003`, `2,00000000`).
pub fn parse_cpu_mask_hex(text: &str) -> std::result::Result<Vec<usize>, String> {
    let bad = || format!("`{}` is not a CPU mask (hex words separated by commas)", text.trim());
    let words: Vec<&str> = text.trim().split(',').map(str::trim).collect();
    let mut cpus = Vec::new();
    for (i, word) in words.iter().rev().enumerate() {
        if word.is_empty() || (word.len() > 8 && words.len() > 1) {
            return Err(bad());
        }
        for (j, c) in word.trim_start_matches("0x").chars().rev().enumerate() {
            let nibble = c.to_digit(16).ok_or_else(bad)? as usize;
            cpus.extend((0..4).filter(|bit| nibble & (1 << bit) != 0).map(|bit| i * 32 + j * 4 + bit));
        }
    }
    cpus.sort_unstable();
    Ok(cpus)
}

/// Pins the calling thread to `cpu`.
pub fn pin_to_cpu(cpu: usize) -> Result<()> {
    pin_to(&[cpu])
}

/// What a thread must do before it may run on some CPUs, beyond setting
/// its affinity; given the CPUs it pins itself to.
pub type Admission = Box<dyn Fn(&[usize]) -> Result<()> + Send + Sync>;

static ADMISSION: std::sync::RwLock<Option<Admission>> = std::sync::RwLock::new(None);

/// Sets (or, with `None`, clears) what [`pin_to`] does first. Set while a
/// CPU is a cgroup v2 cpuset partition (`journal::root_domain`): the
/// partition takes its CPU from every cgroup outside it, so a thread that
/// pins itself there (a probe, a periodic task) must enter it first.
pub fn set_admission(admission: Option<Admission>) {
    *ADMISSION.write().unwrap_or_else(std::sync::PoisonError::into_inner) = admission;
}

/// Pins the calling thread to the CPUs in `cpus`.
pub fn pin_to(cpus: &[usize]) -> Result<()> {
    if let Some(admit) = ADMISSION.read().unwrap_or_else(std::sync::PoisonError::into_inner).as_ref() {
        admit(cpus)?;
    }
    let mut set = nix::sched::CpuSet::new();
    for &cpu in cpus {
        set.set(cpu).map_err(|_| Error::Invalid(format!("cpu {cpu}: beyond what this machine supports")))?;
    }
    nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(0), &set)
        .map_err(|e| Error::Invalid(format!("cannot run on CPU {}: {e} (is it online?)", format_cpu_list(cpus))))
}

/// The CPUs thread `tid` may run on.
/// Pins the calling thread to every online CPU but `cpu` (left as is when
/// `cpu` is the only one): where a controller runs, off the CPU of the
/// threads it controls.
pub fn pin_off(cpu: usize) -> Result<()> {
    let others: Vec<usize> = online_cpus()?.into_iter().filter(|&c| c != cpu).collect();
    if others.is_empty() {
        return Ok(());
    }
    pin_to(&others)
}

pub fn affinity(tid: i32) -> Result<Vec<usize>> {
    let set = nix::sched::sched_getaffinity(nix::unistd::Pid::from_raw(tid))
        .map_err(|e| Error::io(format!("reading the CPU affinity of thread {tid}"), std::io::Error::from(e)))?;
    Ok((0..nix::sched::CpuSet::count()).filter(|&c| set.is_set(c).unwrap_or(false)).collect())
}

/// Lets thread `tid` run only on `cpus`. Per-CPU kthreads (ksoftirqd,
/// per-CPU irq threads) refuse, and the error says so.
pub fn set_affinity(tid: i32, cpus: &[usize]) -> Result<()> {
    let mut set = nix::sched::CpuSet::new();
    for &cpu in cpus {
        set.set(cpu).map_err(|_| Error::Invalid(format!("cpu {cpu}: beyond what this machine supports")))?;
    }
    nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(tid), &set).map_err(|e| match e {
        nix::errno::Errno::EINVAL => Error::Invalid(format!(
            "thread {tid} cannot be pinned to CPU {}: it is bound to its own CPU, or those CPUs are offline",
            format_cpu_list(cpus)
        )),
        nix::errno::Errno::EPERM => Error::MissingPrivilege { capability: "CAP_SYS_NICE", purpose: format!("pin thread {tid}") },
        nix::errno::Errno::ESRCH => Error::Failed(format!("thread {tid} is gone")),
        e => Error::io(format!("pinning thread {tid} to CPU {}", format_cpu_list(cpus)), std::io::Error::from(e)),
    })
}

/// Puts the calling thread in SCHED_FIFO at `priority` (1..=99), or leaves
/// it in SCHED_OTHER when `priority` is 0, as cyclictest's `-p 0` does.
pub fn set_fifo(priority: u8) -> Result<()> {
    fifo(priority, 0)
}

/// [`set_fifo`] with SCHED_RESET_ON_FORK: a process the thread starts
/// begins at SCHED_OTHER, not at the thread's real-time priority (a
/// controller's thread starts the command it then controls).
pub fn set_fifo_not_inherited(priority: u8) -> Result<()> {
    fifo(priority, libc::SCHED_RESET_ON_FORK)
}

fn fifo(priority: u8, flags: libc::c_int) -> Result<()> {
    if priority == 0 {
        return Ok(());
    }
    if priority > 99 {
        return Err(Error::Invalid(format!("priority {priority}: outside SCHED_FIFO's 1..=99")));
    }
    set_scheduler(libc::SCHED_FIFO | flags, priority as i32).map_err(|err| match err.raw_os_error() {
        Some(libc::EPERM) => Error::MissingPrivilege {
            capability: "CAP_SYS_NICE",
            purpose: format!("run at SCHED_FIFO priority {priority} (or raise RLIMIT_RTPRIO)"),
        },
        _ => Error::io(format!("setting SCHED_FIFO priority {priority}"), err),
    })
}

/// Returns the calling thread to SCHED_OTHER (always allowed).
pub fn set_other() -> Result<()> {
    set_scheduler(libc::SCHED_OTHER, 0).map_err(|e| Error::io("returning to SCHED_OTHER", e))
}

/// SCHED_IDLE for the calling thread: it gets only time no other task
/// wants (needs no privilege).
pub fn set_idle() -> Result<()> {
    set_scheduler(libc::SCHED_IDLE, 0).map_err(|e| Error::io("setting SCHED_IDLE", e))
}

fn set_scheduler(policy: libc::c_int, priority: i32) -> std::io::Result<()> {
    let param = libc::sched_param { sched_priority: priority };
    // SAFETY: plain syscall on the calling thread (pid 0) with a valid param.
    if unsafe { libc::sched_setscheduler(0, policy, &param) } == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// How many [`lock_memory`] calls in this process are not yet undone.
/// mlockall and munlockall act on the whole process: a measurement that
/// ends must not unlock the memory of one still running beside it (the
/// exporter runs the probe and the latency thread side by side).
static MEMORY_LOCKS: std::sync::Mutex<usize> = std::sync::Mutex::new(0);

/// Locks all current and future memory, so a page fault never lands in
/// the middle of a measured interval. Pair it with [`unlock_memory`].
pub fn lock_memory() -> Result<()> {
    use nix::sys::mman::{mlockall, MlockAllFlags};
    let mut holders = MEMORY_LOCKS.lock().unwrap_or_else(|p| p.into_inner());
    mlockall(MlockAllFlags::MCL_CURRENT | MlockAllFlags::MCL_FUTURE).map_err(|e| match e {
        nix::errno::Errno::EPERM | nix::errno::Errno::ENOMEM => Error::MissingPrivilege {
            capability: "CAP_IPC_LOCK",
            purpose: "lock the measuring threads' memory (mlockall) beyond RLIMIT_MEMLOCK".into(),
        },
        e => Error::sys("mlockall", e),
    })?;
    *holders += 1;
    Ok(())
}

/// Undoes [`lock_memory`] when a measurement ends, so a long-lived process
/// does not keep everything pinned; the memory stays locked while another
/// measurement in this process still holds it.
pub fn unlock_memory() {
    let mut holders = MEMORY_LOCKS.lock().unwrap_or_else(|p| p.into_inner());
    *holders = holders.saturating_sub(1);
    if *holders == 0 {
        let _ = nix::sys::mman::munlockall();
    }
}

/// CLOCK_MONOTONIC in ns (vDSO: no system call on x86_64 with a
/// vDSO-capable clocksource); what cyclictest uses.
#[inline(always)]
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: ts is a valid out-pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// The calling thread's CPU time (CLOCK_THREAD_CPUTIME_ID), ns.
pub fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: ts is a valid out-pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Sleeps until CLOCK_MONOTONIC reaches `deadline_ns` (absolute), resuming
/// after signals, as cyclictest's default mode does.
pub fn sleep_until_ns(deadline_ns: u64) {
    let ts =
        libc::timespec { tv_sec: (deadline_ns / 1_000_000_000) as libc::time_t, tv_nsec: (deadline_ns % 1_000_000_000) as libc::c_long };
    loop {
        // SAFETY: valid timespec; no remainder is needed with TIMER_ABSTIME.
        let rc = unsafe { libc::clock_nanosleep(libc::CLOCK_MONOTONIC, libc::TIMER_ABSTIME, &ts, std::ptr::null_mut()) };
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
        assert!(parse_cpu_list("3-1").is_err());
        assert!(parse_cpu_list("a").is_err());
        assert!(parse_cpu_list("0,,1").is_err());
        assert_eq!(parse_cpu_list("1,1,0").unwrap(), vec![0, 1]);
        let e = parse_cpu_list("0-18446744073709551615").unwrap_err();
        assert!(e.contains("8191"), "{e}");
    }

    #[test]
    fn cpu_masks_parse_back() {
        for cpus in [vec![0, 1], vec![1], vec![], vec![33], vec![0, 100]] {
            assert_eq!(parse_cpu_mask_hex(&cpu_mask_hex(&cpus)).unwrap(), cpus);
        }
        assert_eq!(parse_cpu_mask_hex("00000003\n").unwrap(), vec![0, 1]);
        assert!(parse_cpu_mask_hex("xyz").unwrap_err().contains("xyz"));
        assert_eq!(parse_cpu_mask_hex("100000000").unwrap(), vec![32], "one long word");
        assert!(parse_cpu_mask_hex("2,").is_err() && parse_cpu_mask_hex("100000000,0").is_err());
    }

    #[test]
    fn cpu_lists_format_back() {
        for text in ["0-3,5,7-8", "1", "0,2,4", "0-1"] {
            assert_eq!(format_cpu_list(&parse_cpu_list(text).unwrap()), text);
        }
    }

    #[test]
    fn cpu_masks_are_written_in_the_kernels_32_bit_words() {
        assert_eq!(cpu_mask_hex(&[0]), "1");
        assert_eq!(cpu_mask_hex(&[3]), "8");
        assert_eq!(cpu_mask_hex(&[0, 1, 2, 3]), "f");
        assert_eq!(cpu_mask_hex(&[31]), "80000000");
        assert_eq!(cpu_mask_hex(&[33]), "2,00000000");
        assert_eq!(cpu_mask_hex(&[64]), "1,00000000,00000000");
        assert_eq!(cpu_mask_hex(&[100]), "10,00000000,00000000,00000000");
        assert_eq!(cpu_mask_hex(&[1, 100]), "10,00000000,00000000,00000002");
        assert_eq!(cpu_mask_hex(&[]), "0");
    }

    #[test]
    fn online_cpus_include_this_one() {
        let cpus = online_cpus().unwrap();
        // SAFETY: sched_getcpu has no preconditions.
        let here = unsafe { libc::sched_getcpu() };
        assert!(cpus.contains(&(here as usize)), "{cpus:?} lacks {here}");
    }

    #[test]
    fn offline_or_absent_cpu_is_invalid_naming_the_parameter() {
        let err = require_online(100_000, "cpu").unwrap_err();
        assert_eq!(err.exit_code(), 2);
        assert!(err.to_string().starts_with("cpu 100000: not an online CPU (online: 0"), "{err}");
    }

    #[test]
    fn absolute_sleep_does_not_wake_early() {
        let deadline = monotonic_ns() + 2_000_000;
        sleep_until_ns(deadline);
        assert!(monotonic_ns() >= deadline);
    }
}
