//! Which threads a MATCH names: `napi:DEV` (the NAPI kthreads of a
//! device), `irq:N` or `irq:NAME` (threaded IRQ handlers), `ksoftirqd:CPU`,
//! `pid:N`, `comm:GLOB`. A thread is identified by its tid *and* its start
//! time, so a journal entry never applies to a later thread that reused the
//! tid.

use crate::error::{Error, Result};
use serde::{Deserialize, Serialize};
use std::path::Path;

/// One thread, as /proc shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Thread {
    pub tid: i32,
    pub comm: String,
    /// Start time in clock ticks since boot (/proc/TID/stat field 22).
    pub start_ticks: u64,
}

impl Thread {
    /// The thread `tid` now, if it exists and has not exited (a zombie
    /// waiting for its parent has nothing left to schedule).
    pub fn of(tid: i32) -> Option<Thread> {
        let stat = crate::task_stat::of(tid).filter(|s| !s.exited())?;
        Some(Thread { tid, comm: stat.comm, start_ticks: stat.start_ticks })
    }

    /// Whether this very thread (not a later one with its tid) still runs.
    pub fn alive(&self) -> bool {
        Thread::of(self.tid).is_some_and(|t| t.start_ticks == self.start_ticks)
    }
}

/// Every thread on the machine (kernel threads and every user thread).
pub fn all_threads() -> Vec<Thread> {
    let mut found: Vec<Thread> = crate::procs::all_tids().into_iter().filter_map(|(_, tid)| Thread::of(tid)).collect();
    found.sort_by_key(|t| t.tid);
    found
}

/// The per-CPU kernel threads whose scheduling the kernel itself relies
/// on (CPU stopper, hotplug, RCU, lockup detector, idle injection): no
/// MATCH takes them. ksoftirqd/N is taken only by `ksoftirqd:N`.
pub fn is_protected(comm: &str) -> bool {
    let per_cpu = ["migration/", "cpuhp/", "idle_inject/", "watchdog/"];
    per_cpu.iter().any(|p| comm.starts_with(p)) || comm.starts_with("rcu") || comm == "watchdogd"
}

/// How many threads a glob may take without `--all-matching`.
pub const GLOB_LIMIT: usize = 16;

/// Whether `tid` is a kernel thread (PF_KTHREAD in /proc/PID/stat's flags).
pub fn is_kernel_thread(tid: i32) -> bool {
    crate::task_stat::of(tid).is_some_and(|s| s.kernel_thread)
}

/// Whether `comm` names a NAPI kthread of device `dev` (`napi/<dev>-<id>`):
/// the rule of `napi:DEV`, also what the testbed lists.
pub fn is_napi_of(comm: &str, dev: &str) -> bool {
    comm.strip_prefix("napi/").and_then(|r| r.strip_prefix(dev)).is_some_and(|r| r.starts_with('-'))
}

/// A parsed MATCH.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Match {
    Napi(String),
    IrqNumber(u32),
    IrqName(String),
    Ksoftirqd(usize),
    Pid(i32),
    Comm(glob::Pattern),
}

impl Match {
    pub fn parse(text: &str) -> Result<Match> {
        let bad = |why: &str| Error::Invalid(format!("MATCH {text}: {why}"));
        let (kind, arg) = text.split_once(':').ok_or_else(|| bad("expected napi:DEV, irq:N|NAME, ksoftirqd:CPU, pid:N or comm:GLOB"))?;
        if arg.is_empty() {
            return Err(bad("nothing after the colon"));
        }
        Ok(match kind {
            "napi" => Match::Napi(arg.to_string()),
            "irq" => match arg.parse::<u32>() {
                Ok(n) => Match::IrqNumber(n),
                Err(_) => Match::IrqName(arg.to_string()),
            },
            "ksoftirqd" => Match::Ksoftirqd(arg.parse().map_err(|_| bad("the CPU must be a number"))?),
            "pid" => Match::Pid(arg.parse().ok().filter(|&p: &i32| p > 0).ok_or_else(|| bad("the pid must be a positive number"))?),
            "comm" => Match::Comm(glob::Pattern::new(arg).map_err(|e| bad(&format!("bad glob: {e}")))?),
            _ => return Err(bad("unknown kind (napi, irq, ksoftirqd, pid, comm)")),
        })
    }

    /// Whether `comm` (and `tid`) is a thread this MATCH names (also what
    /// the simulator's prediction moves: `irqlab sim --from-survey --profile`).
    pub fn matches(&self, t: &Thread) -> bool {
        match self {
            Match::Napi(dev) => is_napi_of(&t.comm, dev),
            Match::IrqNumber(n) => t.comm.strip_prefix("irq/").and_then(|r| r.split_once('-')).is_some_and(|(num, _)| num == n.to_string()),
            Match::IrqName(name) => t.comm.strip_prefix("irq/").and_then(|r| r.split_once('-')).is_some_and(|(_, nm)| nm == name),
            Match::Ksoftirqd(cpu) => t.comm == format!("ksoftirqd/{cpu}"),
            Match::Pid(pid) => t.tid == *pid,
            Match::Comm(glob) => glob.matches(&t.comm),
        }
    }

    /// The threads a user's MATCH may take (`control threads`): never the
    /// kernel's own per-CPU threads ([`is_protected`]; ksoftirqd only by
    /// `ksoftirqd:N`) nor this process's threads; a glob taking more than
    /// [`GLOB_LIMIT`] threads or any kernel thread, and PID 1, only with
    /// `all_matching`. A refusal lists what matched.
    pub fn resolve_guarded(&self, text: &str, all_matching: bool) -> Result<Vec<Thread>> {
        let kept = |t: &Thread| self.may_take(t);
        let found = self.resolve(text)?;
        let refused: Vec<&Thread> = found.iter().filter(|t| !kept(t)).collect();
        let found: Vec<Thread> = found.iter().filter(|t| kept(t)).cloned().collect();
        if found.is_empty() {
            let names: Vec<String> = refused.iter().map(|t| format!("{} ({})", t.comm, t.tid)).collect();
            return Err(Error::Invalid(format!(
                "MATCH {text} names only threads irqlab never changes (the kernel's per-CPU threads, or irqlab's own): {}",
                names.join(", ")
            )));
        }
        let list = |threads: &[Thread]| {
            let shown: Vec<String> = threads.iter().take(40).map(|t| format!("{} ({})", t.comm, t.tid)).collect();
            let more = threads.len().saturating_sub(40);
            shown.join(", ") + &if more > 0 { format!(" and {more} more") } else { String::new() }
        };
        if !all_matching {
            let kernel: Vec<Thread> = found.iter().filter(|t| is_kernel_thread(t.tid)).cloned().collect();
            let why = match self {
                Match::Pid(1) => Some("it is PID 1 (init)".to_string()),
                Match::Comm(_) if found.len() > GLOB_LIMIT => Some(format!("it matches {} threads (more than {GLOB_LIMIT})", found.len())),
                Match::Comm(_) if !kernel.is_empty() => Some(format!("it matches {} kernel thread(s): {}", kernel.len(), list(&kernel))),
                _ => None,
            };
            if let Some(why) = why {
                return Err(Error::Invalid(format!(
                    "MATCH {text}: {why}; add --all-matching if that is meant. It matches: {}",
                    list(&found)
                )));
            }
        }
        Ok(found)
    }

    /// Whether this MATCH may ever take `t`: not one of the kernel's own
    /// per-CPU threads ([`is_protected`]; ksoftirqd only by `ksoftirqd:N`)
    /// nor a thread of this process.
    pub fn may_take(&self, t: &Thread) -> bool {
        let own = std::process::id() as i32;
        let ours = t.tid == own || Path::new(&format!("/proc/self/task/{}", t.tid)).exists();
        let ksoftirqd_by_name = t.comm.starts_with("ksoftirqd/") && !matches!(self, Match::Ksoftirqd(_));
        !ours && !is_protected(&t.comm) && !ksoftirqd_by_name
    }

    /// Threads matching now that `taken` does not hold yet and that a
    /// hold may add as they appear (an open-ended `control threads` on a
    /// glob or a device): what [`Match::may_take`] allows, and without
    /// `all_matching` no kernel thread for a `comm:` glob and no more than
    /// [`GLOB_LIMIT`] in all. Empty when nothing new matches.
    pub fn newcomers(&self, taken: &[Thread], all_matching: bool) -> Vec<Thread> {
        let mut room = if all_matching || !matches!(self, Match::Comm(_)) { usize::MAX } else { GLOB_LIMIT.saturating_sub(taken.len()) };
        let mut out = Vec::new();
        for t in all_threads().into_iter().filter(|t| self.matches(t) && !taken.contains(t) && self.may_take(t)) {
            let kernel_refused = matches!(self, Match::Comm(_)) && !all_matching && is_kernel_thread(t.tid);
            if kernel_refused || room == 0 {
                continue;
            }
            room -= 1;
            out.push(t);
        }
        out
    }

    /// Whether threads of this MATCH can appear later (a glob, a device's
    /// NAPI or IRQ threads), unlike one pid.
    pub fn open(&self) -> bool {
        !matches!(self, Match::Pid(_) | Match::Ksoftirqd(_))
    }

    /// The threads it names now; none is an `Invalid` error naming the
    /// candidates of the same kind that exist.
    pub fn resolve(&self, text: &str) -> Result<Vec<Thread>> {
        if let Match::Pid(pid) = self {
            return Thread::of(*pid).map(|t| vec![t]).ok_or_else(|| Error::Invalid(format!("MATCH {text}: no thread {pid}")));
        }
        let all = all_threads();
        let found: Vec<Thread> = all.iter().filter(|t| self.matches(t)).cloned().collect();
        if !found.is_empty() {
            return Ok(found);
        }
        let prefix = match self {
            Match::Napi(_) => "napi/",
            Match::IrqNumber(_) | Match::IrqName(_) => "irq/",
            Match::Ksoftirqd(_) => "ksoftirqd/",
            _ => "",
        };
        let mut candidates: Vec<&str> =
            all.iter().map(|t| t.comm.as_str()).filter(|c| !prefix.is_empty() && c.starts_with(prefix)).collect();
        candidates.dedup();
        Err(Error::Invalid(if candidates.is_empty() {
            format!(
                "MATCH {text} matches no thread{}",
                if prefix.is_empty() { String::new() } else { format!(" (no {prefix}* threads here)") }
            )
        } else {
            format!("MATCH {text} matches no thread; these exist: {}", candidates.join(", "))
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(comm: &str) -> Thread {
        Thread { tid: 1, comm: comm.into(), start_ticks: 0 }
    }

    #[test]
    fn matches_name_what_they_say() {
        let napi = Match::parse("napi:irqlab-b").unwrap();
        assert!(napi.matches(&t("napi/irqlab-b-8193")));
        assert!(!napi.matches(&t("napi/irqlab-bb-1")));
        assert!(Match::parse("irq:24").unwrap().matches(&t("irq/24-virtio0")));
        assert!(!Match::parse("irq:2").unwrap().matches(&t("irq/24-virtio0")));
        assert!(Match::parse("irq:virtio0").unwrap().matches(&t("irq/24-virtio0")));
        assert!(Match::parse("ksoftirqd:1").unwrap().matches(&t("ksoftirqd/1")));
        assert!(!Match::parse("ksoftirqd:1").unwrap().matches(&t("ksoftirqd/11")));
        assert!(Match::parse("comm:kworker/*").unwrap().matches(&t("kworker/0:1")));
    }

    #[test]
    fn bad_matches_are_invalid() {
        for m in ["napi", "napi:", "ksoftirqd:x", "pid:-3", "cpu:1", "comm:[", "pid:0"] {
            let e = Match::parse(m).unwrap_err();
            assert_eq!(e.exit_code(), 2, "{m}");
            assert!(e.to_string().starts_with(&format!("MATCH {m}: ")), "{e}");
        }
    }

    #[test]
    fn nothing_matched_names_the_candidates() {
        let e = Match::parse("ksoftirqd:100000").unwrap().resolve("ksoftirqd:100000").unwrap_err();
        assert_eq!(e.exit_code(), 2);
        assert!(e.to_string().contains("ksoftirqd/0"), "{e}");
    }

    #[test]
    fn the_kernels_own_per_cpu_threads_are_protected() {
        for comm in ["migration/0", "cpuhp/1", "rcu_preempt", "rcuc/3", "rcuop/0", "watchdog/2", "idle_inject/0"] {
            assert!(is_protected(comm), "{comm}");
        }
        for comm in ["ksoftirqd/0", "napi/irqlab-b-8193", "irq/36-virtio1", "kworker/0:1", "irqlab-probe-1"] {
            assert!(!is_protected(comm), "{comm}");
        }
    }

    #[test]
    fn a_thread_is_itself_and_not_a_later_one_with_its_tid() {
        let me = Thread::of(nix::unistd::gettid().as_raw()).unwrap();
        assert!(me.alive());
        assert!(!Thread { start_ticks: me.start_ticks + 1, ..me.clone() }.alive());
        assert!(is_kernel_thread(2) && !is_kernel_thread(me.tid));
    }
}
