//! Which processes a SELECTOR names: a cgroup directory (its
//! `cgroup.procs`), `pid:N` (the process and its descendants),
//! `comm:GLOB` (every process whose name matches), or a command irqlab
//! starts itself (`-- CMD ARGS`). Resolved again while the controller runs,
//! so processes a selected one starts are selected too.

use irqlab_host::error::{Error, Result};
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Selector {
    Cgroup(PathBuf),
    Pid(i32),
    Comm(glob::Pattern),
    /// A command irqlab starts (its process and descendants, once started).
    Command(Vec<String>),
}

impl std::fmt::Display for Selector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Selector::Cgroup(p) => write!(f, "{}", p.display()),
            Selector::Pid(p) => write!(f, "pid:{p}"),
            Selector::Comm(g) => write!(f, "comm:{}", g.as_str()),
            Selector::Command(c) => write!(f, "-- {}", c.join(" ")),
        }
    }
}

impl Selector {
    /// Parses the value of `flag` (`--foreground`, `--background`); an
    /// error names the flag and the value (exit 2).
    pub fn parse(flag: &str, text: &str) -> Result<Selector> {
        let bad = |why: String| Error::Invalid(format!("{flag} {text}: {why}"));
        if let Some(pid) = text.strip_prefix("pid:") {
            return pid
                .parse()
                .ok()
                .filter(|&p: &i32| p > 0)
                .map(Selector::Pid)
                .ok_or_else(|| bad("the pid must be a positive number".into()));
        }
        if let Some(glob) = text.strip_prefix("comm:") {
            if glob.is_empty() {
                return Err(bad("nothing after comm:".into()));
            }
            return glob::Pattern::new(glob).map(Selector::Comm).map_err(|e| bad(format!("bad glob: {e}")));
        }
        let path = PathBuf::from(text);
        if path.is_absolute() {
            if path.join("cgroup.procs").is_file() {
                return Ok(Selector::Cgroup(path));
            }
            return Err(bad("not a cgroup directory (no cgroup.procs in it)".into()));
        }
        Err(bad("expected a cgroup directory (an absolute path), pid:N, comm:GLOB, or a command after --".into()))
    }

    /// The processes (tgids) it names now; `started` is the pid of the
    /// command irqlab started, for [`Selector::Command`].
    pub fn processes(&self, started: Option<i32>) -> BTreeSet<i32> {
        self.processes_in(&process_table(), started)
    }

    /// [`Selector::processes`] on a [`process_table`] already read (one
    /// scan of /proc for several selectors).
    pub fn processes_in(&self, table: &ProcessTable, started: Option<i32>) -> BTreeSet<i32> {
        let own = std::process::id() as i32;
        let mut found: BTreeSet<i32> = match self {
            Selector::Cgroup(p) => std::fs::read_to_string(p.join("cgroup.procs"))
                .unwrap_or_default()
                .split_whitespace()
                .filter_map(|s| s.parse().ok())
                .collect(),
            Selector::Pid(p) => with_descendants(*p, table),
            Selector::Comm(g) => table.iter().filter(|(_, (_, comm))| g.matches(comm)).map(|(&pid, _)| pid).collect(),
            Selector::Command(_) => started.map(|p| with_descendants(p, table)).unwrap_or_default(),
        };
        found.remove(&own);
        found.retain(|p| table.contains_key(p));
        found
    }
}

/// pid → (parent pid, comm) of every live process.
pub type ProcessTable = BTreeMap<i32, (i32, String)>;

/// The [`ProcessTable`] now (zombies left out).
pub fn process_table() -> ProcessTable {
    let mut table = BTreeMap::new();
    for pid in irqlab_host::procs::pids() {
        if let Some(stat) = irqlab_host::task_stat::of(pid).filter(|s| !s.exited()) {
            table.insert(pid, (stat.ppid, stat.comm));
        }
    }
    table
}

fn with_descendants(root: i32, table: &BTreeMap<i32, (i32, String)>) -> BTreeSet<i32> {
    let mut found = BTreeSet::new();
    if !table.contains_key(&root) {
        return found;
    }
    found.insert(root);
    // Parents before children is not guaranteed by pid order: repeat until stable.
    loop {
        let before = found.len();
        for (&pid, (parent, _)) in table {
            if found.contains(parent) {
                found.insert(pid);
            }
        }
        if found.len() == before {
            return found;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selectors_parse_or_name_the_flag() {
        assert_eq!(Selector::parse("--foreground", "pid:12").unwrap(), Selector::Pid(12));
        assert!(matches!(Selector::parse("--foreground", "comm:fio*").unwrap(), Selector::Comm(_)));
        for bad in ["pid:0", "pid:x", "comm:", "comm:[", "fio", "/nonexistent/cgroup"] {
            let e = Selector::parse("--background", bad).unwrap_err();
            assert_eq!(e.exit_code(), 2, "{bad}");
            assert!(e.to_string().starts_with(&format!("--background {bad}: ")), "{e}");
        }
    }

    #[test]
    fn descendants_are_found_whatever_the_pid_order() {
        let table: BTreeMap<i32, (i32, String)> = [(10, (1, "a")), (5, (10, "b")), (3, (5, "c")), (20, (1, "d"))]
            .into_iter()
            .map(|(p, (pp, c))| (p, (pp, c.to_string())))
            .collect();
        assert_eq!(with_descendants(10, &table), [3, 5, 10].into_iter().collect());
        assert!(with_descendants(99, &table).is_empty());
    }

    #[test]
    fn this_process_is_never_selected() {
        let me = std::process::id() as i32;
        assert!(!Selector::Pid(me).processes(None).contains(&me));
    }
}
