//! Which threads a MATCH names: `napi:DEV` (the NAPI kthreads of a
//! device), `irq:N` or `irq:NAME` (threaded IRQ handlers), `ksoftirqd:CPU`,
//! `pid:N`, `comm:GLOB`. A thread is identified by its tid *and* its start
//! time, so a journal entry never applies to a later thread that reused the
//! tid.

use crate::error::{Error, Result};
use serde::{Deserialize, Serialize};

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
        let stat = std::fs::read_to_string(format!("/proc/{tid}/stat")).ok()?;
        if matches!(stat.rsplit_once(')')?.1.split_whitespace().next(), Some("Z" | "X")) {
            return None;
        }
        let comm = std::fs::read_to_string(format!("/proc/{tid}/comm")).ok()?.trim_end().to_string();
        Some(Thread { tid, comm, start_ticks: start_ticks(&stat)? })
    }

    /// Whether this very thread (not a later one with its tid) still runs.
    pub fn alive(&self) -> bool {
        Thread::of(self.tid).is_some_and(|t| t.start_ticks == self.start_ticks)
    }
}

/// Field 22 of /proc/PID/stat; the comm before it may hold spaces and
/// parentheses, so fields are counted after the last ')'.
pub fn start_ticks(stat: &str) -> Option<u64> {
    stat.rsplit_once(')')?.1.split_whitespace().nth(19)?.parse().ok()
}

/// Every thread on the machine (kernel threads and every user thread).
pub fn all_threads() -> Vec<Thread> {
    let mut found = Vec::new();
    let Ok(procs) = std::fs::read_dir("/proc") else { return found };
    for p in procs.flatten() {
        let Some(pid) = p.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else { continue };
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else { continue };
        for t in tasks.flatten() {
            if let Some(thread) = t.file_name().to_str().and_then(|s| s.parse::<i32>().ok()).and_then(Thread::of) {
                found.push(thread);
            }
        }
    }
    found.sort_by_key(|t| t.tid);
    found
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

    /// Whether `comm` (and `tid`) is a thread this MATCH names.
    fn matches(&self, t: &Thread) -> bool {
        match self {
            Match::Napi(dev) => t.comm.strip_prefix("napi/").and_then(|r| r.strip_prefix(dev.as_str())).is_some_and(|r| r.starts_with('-')),
            Match::IrqNumber(n) => t.comm.strip_prefix("irq/").and_then(|r| r.split_once('-')).is_some_and(|(num, _)| num == n.to_string()),
            Match::IrqName(name) => t.comm.strip_prefix("irq/").and_then(|r| r.split_once('-')).is_some_and(|(_, nm)| nm == name),
            Match::Ksoftirqd(cpu) => t.comm == format!("ksoftirqd/{cpu}"),
            Match::Pid(pid) => t.tid == *pid,
            Match::Comm(glob) => glob.matches(&t.comm),
        }
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
    fn start_time_survives_odd_comms() {
        let stat = "42 (a) b (c)) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 777 20";
        assert_eq!(start_ticks(stat), Some(777));
        let me = Thread::of(nix::unistd::gettid().as_raw()).unwrap();
        assert!(me.alive());
    }
}
