//! One CPU as a scheduling root domain of its own, so that a SCHED_DEADLINE
//! thread can be pinned to it. The kernel admits a SCHED_DEADLINE thread
//! only when it may run on every CPU of its root domain (its bandwidth is
//! accounted per root domain), so a deadline server for a NAPI kthread on
//! one CPU needs that CPU split off: two exclusive cpusets (the CPU, and
//! the others) with load balancing off in the cpuset root, the cgroup v1
//! way of partitioning the scheduler's domains; on a cgroup v2 machine one
//! cpuset partition (`cpuset.cpus` the CPU, `cpuset.cpus.partition`
//! `root`: a scheduling domain, and so a root domain, of its own, its CPU
//! taken from every cgroup outside it). The v2 partition is a threaded
//! child of the root cgroup, so that it takes threads one by one (v2
//! otherwise places whole processes): a thread of a process in the root
//! cgroup can enter it alone, as v1's cpusets take single threads. Every
//! step goes through the control journal and is undone in reverse order.

use super::cgroup::{self, Hierarchy};
use super::sched::SchedAttr;
use super::threads::Thread;
use crate::error::{Error, Result};
use crate::journal::{self, Applied, Object, Value};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

const CONTROLLER: &str = "cpuset";
/// The cgroup of the isolated CPU, and of the others.
const ISOLATED: &str = "irqlab-dl";
const REST: &str = "irqlab-rest";
/// How long a refused SCHED_DEADLINE is retried while the kernel rebuilds
/// its domains after the split.
const RETRY_NS: u64 = 5_000_000_000;

/// The CPU split off while this lives; dropping it (or [`RootDomain::restore`])
/// puts everything back, newest change first.
#[derive(Debug)]
pub struct RootDomain {
    pub cpu: usize,
    /// Where the cpusets are (v1: two exclusive cpusets; v2: a partition).
    pub hierarchy: Hierarchy,
    changes: Vec<Applied>,
    /// v2: the threads of this process that pinned themselves to the CPU
    /// and so entered the partition (`rt::set_admission`); undone first.
    admitted: Arc<Mutex<Vec<Applied>>>,
}

fn write(path: &std::path::Path, text: &str) -> Result<()> {
    std::fs::write(path, text).map_err(|e| Error::io(format!("writing {}", path.display()), e))
}

/// What splitting a CPU off needs: the cpuset controller (a cgroup v1
/// hierarchy with it, else the v2 hierarchy offering it, with cpuset
/// partitions: `cpuset.cpus.effective` in its root), the privilege to
/// create cpusets and move threads (CAP_SYS_ADMIN) and to give a thread
/// SCHED_DEADLINE (CAP_SYS_NICE); exit 3 naming the first missing. Returns
/// the hierarchy it will use.
pub fn check_prerequisites() -> Result<Hierarchy> {
    let hierarchy = cgroup::hierarchy(CONTROLLER)?;
    if hierarchy.is_v2() && !hierarchy.root().join("cpuset.cpus.effective").exists() {
        return Err(Error::MissingKernelFeature {
            feature: "cgroup v2 cpuset partitions".into(),
            detail: format!("{} has no cpuset.cpus.effective (a kernel before 5.0?)", hierarchy.root().display()),
        });
    }
    crate::privilege::require(
        &[crate::privilege::Capability::SysAdmin, crate::privilege::Capability::SysNice],
        "make a CPU a root domain of its own (cpusets) and pin a SCHED_DEADLINE thread there",
    )?;
    Ok(hierarchy)
}

/// How [`isolate`] will split a CPU off in `hierarchy`, for `doctor`.
pub fn describe(hierarchy: &Hierarchy) -> String {
    match hierarchy {
        Hierarchy::V1(root) => {
            format!("cgroup v1 ({}): exclusive cpusets {ISOLATED} and {REST}, cpuset.sched_load_balance 0 in the root", root.display())
        }
        Hierarchy::V2(root) => format!(
            "cgroup v2 ({}): threaded cpuset partition {ISOLATED} (cgroup.type threaded, cpuset.cpus.partition root; +cpuset in \
             the root's subtree_control; threads placed one by one, their processes moved to the root cgroup)",
            root.display()
        ),
    }
}

/// Splits `cpu` off into a root domain of its own. Needs the cpuset
/// controller in a v1 hierarchy or the v2 one (exit 3 naming it) and a
/// second online CPU.
pub fn isolate(cpu: usize) -> Result<RootDomain> {
    let hierarchy = cgroup::hierarchy(CONTROLLER)?;
    let others: Vec<usize> = crate::rt::online_cpus()?.into_iter().filter(|&c| c != cpu).collect();
    if others.is_empty() {
        return Err(Error::MissingKernelFeature {
            feature: "a second CPU".into(),
            detail: format!("CPU {cpu} cannot be a root domain of its own on a one-CPU machine"),
        });
    }
    let mut domain = RootDomain { cpu, hierarchy: hierarchy.clone(), changes: Vec::new(), admitted: Arc::default() };
    match hierarchy {
        Hierarchy::V1(root) => domain.split_v1(&root, others)?,
        Hierarchy::V2(root) => {
            domain.split_v2(&root)?;
            // A thread of this process pinning itself to the CPU enters
            // the partition first.
            let admitted = domain.admitted.clone();
            crate::rt::set_admission(Some(Box::new(move |cpus: &[usize]| {
                if cpus != [cpu] {
                    return Ok(());
                }
                let tid = nix::unistd::gettid().as_raw();
                let thread = Thread::of(tid).ok_or_else(|| Error::Failed(format!("thread {tid} is gone")))?;
                let mut changes = admit_v2(&thread)?;
                admitted.lock().unwrap_or_else(PoisonError::into_inner).append(&mut changes);
                Ok(())
            })));
        }
    }
    Ok(domain)
}

impl RootDomain {
    /// v1: the CPU's exclusive cpuset and the others', load balancing off
    /// in the root.
    fn split_v1(&mut self, root: &std::path::Path, others: Vec<usize>) -> Result<()> {
        let (cpu, domain) = (self.cpu, self);
        let mems = std::fs::read_to_string(root.join("cpuset.mems")).map_err(|e| Error::io("reading cpuset.mems", e))?;
        for (name, cpus) in [(REST, others), (ISOLATED, vec![cpu])] {
            let dir: PathBuf = root.join(name);
            domain
                .changes
                .push(journal::apply(Object::Cgroup { path: dir.display().to_string() }, Value::Text { text: "present".into() })?);
            write(&dir.join("cpuset.cpus"), &crate::rt::format_cpu_list(&cpus))?;
            write(&dir.join("cpuset.mems"), mems.trim())?;
            write(&dir.join("cpuset.cpu_exclusive"), "1")?;
        }
        let balance = Object::File { path: root.join("cpuset.sched_load_balance").display().to_string() };
        domain.changes.push(journal::apply(balance, Value::Text { text: "0".into() })?);
        Ok(())
    }

    /// v2: a partition of the CPU below the root: the cpuset controller
    /// given to the root's children (when it was not), the cgroup, its
    /// `cpuset.cpus` and `cpuset.cpus.partition`, each journalled (undone
    /// newest first: the partition dissolved before the cgroup goes). The
    /// kernel takes the CPU from the root's effective CPUs, and so from
    /// every process outside the partition, which is the shield.
    fn split_v2(&mut self, root: &std::path::Path) -> Result<()> {
        if !cgroup::subtree_enabled(root, CONTROLLER)? {
            let subtree = Object::Cgroup2Subtree { cgroup: root.display().to_string(), controller: CONTROLLER.into() };
            self.changes.push(journal::apply(subtree, Value::Text { text: "enabled".into() })?);
        }
        let dir = root.join(ISOLATED);
        self.changes.push(journal::apply(Object::Cgroup { path: dir.display().to_string() }, Value::Text { text: "present".into() })?);
        cgroup::make_threaded(&dir)?;
        let file = |name: &str| Object::File { path: dir.join(name).display().to_string() };
        self.changes.push(journal::apply(file("cpuset.cpus"), Value::Text { text: self.cpu.to_string() })?);
        self.changes.push(journal::apply(file("cpuset.cpus.partition"), Value::Text { text: "root".into() })?);
        // An invalid partition is taken without an error and reads
        // `root invalid (why)`.
        let state = std::fs::read_to_string(dir.join("cpuset.cpus.partition")).unwrap_or_default();
        if state.trim() != "root" {
            return Err(Error::Failed(format!(
                "{}: the kernel did not make CPU {} a partition: cpuset.cpus.partition reads `{}`",
                dir.display(),
                self.cpu,
                state.trim()
            )));
        }
        Ok(())
    }

    /// Moves `thread` into the isolated CPU's cpuset (which pins it there)
    /// and gives it `attr`, both journalled. The kernel rebuilds its
    /// domains after the split asynchronously; until then SCHED_DEADLINE is
    /// refused, so the change is retried for up to five seconds.
    pub fn run_deadline(&mut self, thread: &Thread, attr: SchedAttr) -> Result<()> {
        let mut changes = self.deadline_changes(thread, attr)?;
        self.changes.append(&mut changes);
        Ok(())
    }

    /// As [`RootDomain::run_deadline`], the two changes handed to the
    /// caller, who undoes them (newest first, by dropping them) while the
    /// domain stays: one split for several layouts in turn.
    pub fn deadline_changes(&self, thread: &Thread, attr: SchedAttr) -> Result<Vec<Applied>> {
        let mut changes = match self.hierarchy {
            Hierarchy::V1(_) => {
                let member = Object::CgroupMember { thread: thread.clone(), controller: CONTROLLER.into() };
                vec![journal::apply(member, Value::Text { text: format!("/{ISOLATED}") })?]
            }
            Hierarchy::V2(_) => self.admit(thread)?,
        };
        // The kernel checks the request against the root domain of the
        // CPU the thread last ran on: a sleeping thread moved into the
        // cpuset is refused until it wakes there.
        let give_up = crate::rt::monotonic_ns() + RETRY_NS;
        loop {
            match journal::apply(Object::ThreadSched { thread: thread.clone() }, Value::Sched { attr }) {
                Ok(applied) => {
                    changes.push(applied);
                    return Ok(changes);
                }
                Err(Error::Invalid(_)) if crate::rt::monotonic_ns() < give_up => {
                    std::thread::sleep(Duration::from_millis(50));
                }
                Err(e) => {
                    while let Some(applied) = changes.pop() {
                        drop(applied);
                    }
                    return Err(e);
                }
            }
        }
    }

    /// Lets `thread` run on the isolated CPU. v1: nothing (the root
    /// cpuset still spans every CPU). v2: the partition took the CPU from
    /// every cgroup outside it, so the thread enters the partition
    /// (journalled), its process first moved to the root cgroup when it
    /// is elsewhere (only threads of the root's own processes may enter
    /// its threaded child). Undone by dropping the changes, newest first.
    pub fn admit(&self, thread: &Thread) -> Result<Vec<Applied>> {
        if !self.hierarchy.is_v2() {
            return Ok(Vec::new());
        }
        admit_v2(thread)
    }

    /// Shields the isolated CPU: moves every user-space thread that may
    /// run on every online CPU and sits in the cpuset root, except those of
    /// process `keep`, into the other CPUs' cpuset (journalled, undone with
    /// the rest), so that no other load reaches the CPU (through the fair
    /// class's deadline server, say). Kernel threads and threads pinned on
    /// purpose stay, as does a thread that exits or refuses meanwhile.
    /// Returns the threads moved and those that stayed. Threads the moved
    /// ones start meanwhile are born in the other CPUs' cpuset and go back
    /// to the root when it is removed. On cgroup v2 the partition itself
    /// keeps every process outside it off the CPU: nothing is moved.
    pub fn shelter_others(&mut self, keep: u32) -> Result<(usize, usize)> {
        if self.hierarchy.is_v2() {
            return Ok((0, 0));
        }
        let all = crate::rt::online_cpus()?;
        let (mut moved, mut stayed) = (0, 0);
        for thread in super::threads::all_threads() {
            let tgid = crate::procs::tgid(thread.tid)
                .and_then(|tgid| Some((u32::try_from(tgid).ok()?, crate::rt::affinity(thread.tid).ok()? == all)));
            let kernel = crate::task_stat::of_task(thread.tid, thread.tid).is_none_or(|s| s.kernel_thread);
            let Some((tgid, anywhere)) = tgid else { continue };
            if kernel || tgid == keep {
                continue;
            }
            if !anywhere || cgroup::of_thread(thread.tid, CONTROLLER).ok().as_deref() != Some("/") {
                stayed += 1;
                continue;
            }
            let member = Object::CgroupMember { thread, controller: CONTROLLER.into() };
            match journal::apply(member, Value::Text { text: format!("/{REST}") }) {
                Ok(applied) => {
                    self.changes.push(applied);
                    moved += 1;
                }
                Err(_) => stayed += 1,
            }
        }
        Ok((moved, stayed))
    }

    /// Undoes every change, newest first.
    pub fn restore(mut self) -> Result<()> {
        journal::restore_all(self.take_changes())
    }

    /// Every change, oldest first, the admitted threads last (so undone
    /// first); no thread is admitted any more.
    fn take_changes(&mut self) -> Vec<Applied> {
        crate::rt::set_admission(None);
        let mut all = std::mem::take(&mut self.changes);
        all.append(&mut self.admitted.lock().unwrap_or_else(PoisonError::into_inner));
        all
    }
}

/// [`RootDomain::admit`] on v2.
fn admit_v2(thread: &Thread) -> Result<Vec<Applied>> {
    let mut changes = Vec::new();
    let tgid = process_of(thread.tid)?;
    if cgroup::of_process_v2(tgid)? != "/" {
        let process = Thread::of(tgid).ok_or_else(|| Error::Failed(format!("process {tgid} of thread {} is gone", thread.tid)))?;
        changes.push(journal::apply(Object::Cgroup2Member { process }, Value::Text { text: "/".into() })?);
    }
    changes.push(journal::apply(Object::Cgroup2Thread { thread: thread.clone() }, Value::Text { text: format!("/{ISOLATED}") })?);
    Ok(changes)
}

/// The process (thread group) of thread `tid`, from /proc/TID/status.
fn process_of(tid: i32) -> Result<i32> {
    crate::procs::tgid(tid).ok_or_else(|| Error::Failed(format!("no thread {tid} to find the process of (/proc/{tid}/status)")))
}

impl Drop for RootDomain {
    fn drop(&mut self) {
        // Newest first: a deadline thread back to its class before it leaves
        // the cpuset, the cpusets removed after load balancing is back on.
        let mut all = self.take_changes();
        while let Some(applied) = all.pop() {
            drop(applied);
        }
    }
}
