//! The actuators that hold background processes back: a cgroup of
//! irqlab's own, frozen while the gate is closed (the processes stop
//! issuing anything, their requests already in the device finish), or
//! throttled to one request per second on the disk while closed (v2: two,
//! the least `io.max` takes) (the
//! processes keep running and their bios wait in the throttle). Where the
//! machine has the v1 controller (freezer, blkio) the cgroup is in its
//! hierarchy; on a cgroup v2 machine it is a v2 cgroup (`cgroup.freeze`;
//! `io.max`, the io controller given to the root's children when it was
//! not). The cgroup, the controller's enabling and every move into the
//! cgroup go through the control journal; the gate's own state is a file
//! of that cgroup, undone by removing it (which moves its tasks to the
//! parent, thawed and unthrottled).

use super::disk::Disk;
use irqlab_host::error::{Error, Result};
use irqlab_host::journal::cgroup::{self, Hierarchy};
use irqlab_host::journal::threads::Thread;
use irqlab_host::journal::{self, Applied, Object, Value};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mechanism {
    /// The v1 freezer: closed = the background processes frozen.
    Freezer,
    /// The v1 blkio throttle: closed = 1 read and 1 write per second on the disk.
    Throttle,
}

impl std::str::FromStr for Mechanism {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s {
            "freezer" => Ok(Mechanism::Freezer),
            "throttle" => Ok(Mechanism::Throttle),
            _ => Err(format!("`{s}`: expected freezer or throttle")),
        }
    }
}

impl std::fmt::Display for Mechanism {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Mechanism::Freezer => "freezer",
            Mechanism::Throttle => "throttle",
        })
    }
}

impl Mechanism {
    /// The v1 controller (its v2 counterpart: [`cgroup::v2_counterpart`]).
    pub fn controller(self) -> &'static str {
        match self {
            Mechanism::Freezer => "freezer",
            Mechanism::Throttle => "blkio",
        }
    }

    /// The hierarchy the gate will use here; exit 3 naming the controller
    /// when there is none.
    pub fn hierarchy(self) -> Result<Hierarchy> {
        cgroup::hierarchy(self.controller())
    }

    /// What the gate does in `hierarchy`, for `doctor`.
    pub fn describe(self, hierarchy: &Hierarchy) -> String {
        let how = match (self, hierarchy) {
            (Mechanism::Freezer, Hierarchy::V1(_)) => "a freezer cgroup (freezer.state)",
            (Mechanism::Freezer, Hierarchy::V2(_)) => "a cgroup frozen through cgroup.freeze",
            (Mechanism::Throttle, Hierarchy::V1(_)) => "a blkio cgroup (blkio.throttle.*_iops_device)",
            (Mechanism::Throttle, Hierarchy::V2(_)) => {
                "an io cgroup (io.max riops=2 wiops=2 while closed; +io in the root's subtree_control)"
            }
        };
        format!("{} ({}): {how}", hierarchy.version(), hierarchy.root().display())
    }
}

/// The gate: irqlab's cgroup, the threads moved into it, and its state.
pub struct CgroupGate {
    mechanism: Mechanism,
    hierarchy: Hierarchy,
    /// The disk a throttle limits (none for the freezer).
    disk: Option<Disk>,
    dir: PathBuf,
    /// Path below the hierarchy's root, as /proc/PID/cgroup shows it.
    name: String,
    /// The controller's enabling (v2, when needed) and the cgroup's entry
    /// first, then one per moved thread (v1) or process (v2).
    changes: Vec<Applied>,
    moved: BTreeSet<i32>,
}

fn write(path: &Path, text: &str) -> Result<()> {
    std::fs::write(path, text).map_err(|e| Error::io(format!("writing `{text}` to {}", path.display()), e))
}

impl CgroupGate {
    /// Creates the cgroup (journalled), open. Exit 3 naming the controller
    /// when neither its v1 hierarchy nor the v2 one has it; the throttle
    /// needs the disk.
    pub fn create(mechanism: Mechanism, disk: Option<&Disk>) -> Result<CgroupGate> {
        if mechanism == Mechanism::Throttle && disk.is_none() {
            return Err(Error::Invalid("--gate throttle: only a disk can be throttled".into()));
        }
        let hierarchy = mechanism.hierarchy()?;
        let root = hierarchy.root().to_path_buf();
        let name = format!("irqlab-idletime-{}", std::process::id());
        let dir = root.join(&name);
        let mut gate = CgroupGate {
            mechanism,
            hierarchy,
            disk: disk.cloned(),
            dir,
            name: format!("/{name}"),
            changes: Vec::new(),
            moved: BTreeSet::new(),
        };
        if let (Hierarchy::V2(_), Some(controller)) = (&gate.hierarchy, cgroup::v2_counterpart(mechanism.controller())) {
            if !cgroup::subtree_enabled(&root, controller)? {
                let subtree = Object::Cgroup2Subtree { cgroup: root.display().to_string(), controller: controller.into() };
                gate.changes.push(journal::apply(subtree, Value::Text { text: "enabled".into() })?);
            }
        }
        let entry = journal::apply(Object::Cgroup { path: gate.dir.display().to_string() }, Value::Text { text: "present".into() })?;
        gate.changes.push(entry);
        gate.set(true)?;
        Ok(gate)
    }

    /// The cgroup's hierarchy.
    pub fn hierarchy(&self) -> &Hierarchy {
        &self.hierarchy
    }

    /// Where a command irqlab starts puts itself before it runs (its
    /// children follow it): this cgroup's `cgroup.procs`.
    pub fn procs_file(&self) -> PathBuf {
        self.dir.join("cgroup.procs")
    }

    /// The processes in the cgroup now.
    pub fn members(&self) -> BTreeSet<i32> {
        std::fs::read_to_string(self.procs_file()).unwrap_or_default().split_whitespace().filter_map(|s| s.parse().ok()).collect()
    }

    /// Moves every thread of process `pid` into the cgroup, each through
    /// the journal (restored to its own cgroup at the end; v2: the process,
    /// one entry). A process that exits meanwhile is skipped.
    pub fn admit(&mut self, pid: i32) -> Result<()> {
        if !self.moved.insert(pid) {
            return Ok(());
        }
        if self.hierarchy.is_v2() {
            let Some(process) = Thread::of(pid) else { return Ok(()) };
            return match journal::apply(Object::Cgroup2Member { process }, Value::Text { text: self.name.clone() }) {
                Ok(applied) => {
                    self.changes.push(applied);
                    Ok(())
                }
                Err(_) if !Path::new(&format!("/proc/{pid}")).exists() => Ok(()),
                Err(e) => Err(e),
            };
        }
        for tid in irqlab_host::procs::tids(pid) {
            let Some(thread) = Thread::of(tid) else { continue };
            let member = Object::CgroupMember { thread, controller: self.mechanism.controller().into() };
            match journal::apply(member, Value::Text { text: self.name.clone() }) {
                Ok(applied) => self.changes.push(applied),
                // The thread exited between the listing and the move.
                Err(_) if !Path::new(&format!("/proc/{pid}/task/{tid}")).exists() => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Opens or closes the gate; returns when the kernel has done it (the
    /// freezer: when the cgroup reads FROZEN (v2: `frozen 1` in
    /// cgroup.events), or after 20 ms of freezing).
    pub fn set(&self, open: bool) -> Result<()> {
        match (self.mechanism, self.hierarchy.is_v2()) {
            (Mechanism::Freezer, true) => {
                write(&self.dir.join("cgroup.freeze"), if open { "0" } else { "1" })?;
                if !open {
                    let events = self.dir.join("cgroup.events");
                    let deadline = irqlab_host::rt::monotonic_ns() + 20_000_000;
                    while std::fs::read_to_string(&events).is_ok_and(|s| !v2_frozen(&s)) && irqlab_host::rt::monotonic_ns() < deadline {
                        std::thread::sleep(Duration::from_micros(20));
                    }
                }
            }
            (Mechanism::Throttle, true) => {
                let Some(disk) = &self.disk else { return Ok(()) };
                write(&self.dir.join("io.max"), &io_max(disk, open))?;
            }
            (Mechanism::Freezer, false) => {
                let state = self.dir.join("freezer.state");
                write(&state, if open { "THAWED" } else { "FROZEN" })?;
                if !open {
                    let deadline = irqlab_host::rt::monotonic_ns() + 20_000_000;
                    while std::fs::read_to_string(&state).is_ok_and(|s| s.trim() == "FREEZING")
                        && irqlab_host::rt::monotonic_ns() < deadline
                    {
                        std::thread::sleep(Duration::from_micros(20));
                    }
                }
            }
            (Mechanism::Throttle, false) => {
                let Some(disk) = &self.disk else { return Ok(()) };
                let limit = if open { 0 } else { 1 };
                let dev = format!("{}:{} {limit}", disk.major, disk.minor);
                write(&self.dir.join("blkio.throttle.read_iops_device"), &dev)?;
                write(&self.dir.join("blkio.throttle.write_iops_device"), &dev)?;
            }
        }
        Ok(())
    }

    /// Opens the gate, then undoes every change, newest first.
    pub fn restore(mut self) -> Result<()> {
        let opened = self.set(true);
        journal::restore_all(std::mem::take(&mut self.changes))?;
        opened
    }
}

impl Drop for CgroupGate {
    fn drop(&mut self) {
        if !self.changes.is_empty() {
            let _ = self.set(true);
        }
        while let Some(applied) = self.changes.pop() {
            drop(applied);
        }
    }
}

/// Whether a v2 `cgroup.events` text says the cgroup is frozen.
fn v2_frozen(events: &str) -> bool {
    events.lines().any(|l| l.split_whitespace().eq(["frozen", "1"]))
}

/// The v2 `io.max` line for `disk`: two reads and two writes per second
/// while closed (the kernel refuses a limit below 2 with EINVAL, seen on
/// 6.12), no limit while open.
fn io_max(disk: &Disk, open: bool) -> String {
    let limit = if open { "max" } else { "2" };
    format!("{}:{} riops={limit} wiops={limit}", disk.major, disk.minor)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn v2_gate_files_are_written_and_read_as_the_kernel_has_them() {
        assert!(v2_frozen("populated 1\nfrozen 1\n"));
        assert!(!v2_frozen("populated 1\nfrozen 0\n"));
        assert!(!v2_frozen(""));
        let disk = Disk { name: "vda".into(), major: 254, minor: 0 };
        assert_eq!(io_max(&disk, false), "254:0 riops=2 wiops=2");
        assert_eq!(io_max(&disk, true), "254:0 riops=max wiops=max");
    }

    #[test]
    fn each_gate_names_its_hierarchy_and_files() {
        let v1 = Hierarchy::V1("/sys/fs/cgroup/freezer".into());
        let v2 = Hierarchy::V2("/sys/fs/cgroup".into());
        assert!(Mechanism::Freezer.describe(&v1).starts_with("cgroup v1 (/sys/fs/cgroup/freezer): a freezer cgroup"));
        assert!(Mechanism::Freezer.describe(&v2).contains("cgroup v2 (/sys/fs/cgroup)"));
        assert!(Mechanism::Freezer.describe(&v2).contains("cgroup.freeze"));
        assert!(Mechanism::Throttle.describe(&v2).contains("io.max"));
        assert!(Mechanism::Throttle.describe(&Hierarchy::V1("/sys/fs/cgroup/blkio".into())).contains("blkio"));
    }
}
