//! The actuators that hold background processes back: a cgroup of
//! irqlab's own in the v1 freezer hierarchy (frozen while the gate is
//! closed: the processes stop issuing anything, their requests already in
//! the device finish), or in the v1 blkio hierarchy (a throttle of one
//! request per second on the disk while closed: the processes keep running
//! and their bios wait in the throttle). The cgroup and every move into it
//! go through the control journal; the gate's own state is a file of that
//! cgroup, undone by removing it (which moves its tasks to the parent,
//! thawed and unthrottled).

use super::disk::Disk;
use crate::control::cgroup;
use crate::control::journal::{self, Applied, Object, Value};
use crate::control::threads::Thread;
use crate::error::{Error, Result};
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
    pub fn controller(self) -> &'static str {
        match self {
            Mechanism::Freezer => "freezer",
            Mechanism::Throttle => "blkio",
        }
    }
}

/// The gate: irqlab's cgroup, the threads moved into it, and its state.
pub struct CgroupGate {
    mechanism: Mechanism,
    /// The disk a throttle limits (none for the freezer).
    disk: Option<Disk>,
    dir: PathBuf,
    /// Path below the hierarchy's root, as /proc/PID/cgroup shows it.
    name: String,
    /// The cgroup's entry first, then one per moved thread.
    changes: Vec<Applied>,
    moved: BTreeSet<i32>,
}

fn write(path: &Path, text: &str) -> Result<()> {
    std::fs::write(path, text).map_err(|e| Error::io(format!("writing `{text}` to {}", path.display()), e))
}

impl CgroupGate {
    /// Creates the cgroup (journalled), open. Exit 3 naming the controller
    /// when its v1 hierarchy is not mounted; the throttle needs the disk.
    pub fn create(mechanism: Mechanism, disk: Option<&Disk>) -> Result<CgroupGate> {
        if mechanism == Mechanism::Throttle && disk.is_none() {
            return Err(Error::Invalid("--gate throttle: only a disk can be throttled".into()));
        }
        let root = cgroup::hierarchy_root(mechanism.controller())?;
        let name = format!("irqlab-idletime-{}", std::process::id());
        let dir = root.join(&name);
        let entry = journal::apply(Object::Cgroup { path: dir.display().to_string() }, Value::Text { text: "present".into() })?;
        let gate =
            CgroupGate { mechanism, disk: disk.cloned(), dir, name: format!("/{name}"), changes: vec![entry], moved: BTreeSet::new() };
        gate.set(true)?;
        Ok(gate)
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
    /// the journal (restored to its own cgroup at the end). A process
    /// that exits meanwhile is skipped.
    pub fn admit(&mut self, pid: i32) -> Result<()> {
        if !self.moved.insert(pid) {
            return Ok(());
        }
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else { return Ok(()) };
        for t in tasks.flatten() {
            let Some(thread) = t.file_name().to_str().and_then(|s| s.parse().ok()).and_then(Thread::of) else { continue };
            let member = Object::CgroupMember { thread, controller: self.mechanism.controller().into() };
            match journal::apply(member, Value::Text { text: self.name.clone() }) {
                Ok(applied) => self.changes.push(applied),
                // The thread exited between the listing and the move.
                Err(_) if !Path::new(&format!("/proc/{pid}/task/{}", t.file_name().to_string_lossy())).exists() => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Opens or closes the gate; returns when the kernel has done it (the
    /// freezer: when the cgroup reads FROZEN, or after 20 ms of FREEZING).
    pub fn set(&self, open: bool) -> Result<()> {
        match self.mechanism {
            Mechanism::Freezer => {
                let state = self.dir.join("freezer.state");
                write(&state, if open { "THAWED" } else { "FROZEN" })?;
                if !open {
                    let deadline = crate::rt::monotonic_ns() + 20_000_000;
                    while std::fs::read_to_string(&state).is_ok_and(|s| s.trim() == "FREEZING") && crate::rt::monotonic_ns() < deadline {
                        std::thread::sleep(Duration::from_micros(20));
                    }
                }
            }
            Mechanism::Throttle => {
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
