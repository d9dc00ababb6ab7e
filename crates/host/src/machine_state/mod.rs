//! The machine's controllable state in one document
//! (`irqlab/machine-state/v1`): every setting a live irqlab command may
//! change, read as it is now, so that two snapshots taken around a run
//! show what the run left changed ([`diff()`]). `make test` takes one
//! before and one after the live suites; `irqlab doctor --snapshot` /
//! `--diff` give users the same.
//!
//! What is read: each thread's scheduling attributes and CPU affinity
//! (keyed by tid *and* start time: a tid reused by a later thread is
//! another thread), IRQ affinities, per network device its RPS/XPS masks
//! and NAPI settings (sysfs, and netlink per NAPI instance where the
//! kernel has it), the writable `net.core` sysctls, root-namespace
//! qdiscs, block schedulers, the cgroups irqlab made (a name containing
//! `irqlab`, in every v1 hierarchy and the v2 one) with the hierarchy
//! roots' settings irqlab changes, RT throttling, and debugfs's mounts and
//! scheduler knobs: every object of the control journal
//! (`journal::Object`) has its place here.
//! Anything that cannot be read is recorded as unreadable, with why; a
//! snapshot never fails.
//!
//! Only the root network namespace is read. irqlab changes nothing inside
//! the testbed's namespaces after it made them (their devices are the
//! testbed's own, made anew each time it comes up); every actuator works
//! on root-namespace objects, the testbed's root-side devices included.

mod diff;
mod read;

pub use diff::{diff, Diff, Difference};
pub use read::take;

use crate::journal::sched::SchedAttr;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

pub const SCHEMA: &str = "irqlab/machine-state/v1";
/// The document `irqlab doctor --diff --json` writes: the [`Diff`].
pub const DIFF_SCHEMA: &str = "irqlab/machine-state-diff/v1";

/// A value read from the machine, or why it could not be.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Read<T> {
    Value(T),
    Unreadable(String),
}

impl<T> Read<T> {
    pub fn from_result<E: std::fmt::Display>(r: std::result::Result<T, E>) -> Self {
        match r {
            Ok(v) => Read::Value(v),
            Err(e) => Read::Unreadable(e.to_string()),
        }
    }
}

/// A text setting (a file's content, trimmed).
pub type Reading = Read<String>;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MachineState {
    pub schema: String,
    /// `uname -r`, so a diff across a reboot into another kernel says so.
    pub kernel: String,
    /// The boot's id (`/proc/sys/kernel/random/boot_id`): threads and IRQs
    /// of another boot are not the same objects.
    pub boot_id: String,
    pub threads: Vec<ThreadState>,
    /// `/proc/irq/default_smp_affinity` (a hex mask).
    pub default_irq_affinity: Reading,
    /// IRQ number → `/proc/irq/N/smp_affinity_list`.
    pub irq_affinity: BTreeMap<u32, Reading>,
    /// Device name → its settings.
    pub net_devices: BTreeMap<String, NetDevice>,
    /// The writable files of `/proc/sys/net/core`, by name.
    pub net_core: BTreeMap<String, Reading>,
    /// Device name → its qdiscs (one line each, see `read::qdisc_line`);
    /// unreadable as a whole when `tc` is missing or fails.
    pub qdiscs: Read<BTreeMap<String, Vec<String>>>,
    /// Disk → the selected I/O scheduler.
    pub block_schedulers: BTreeMap<String, Reading>,
    /// Every cgroup directory whose name contains `irqlab`, by path.
    pub irqlab_cgroups: Vec<String>,
    /// `kernel.sched_rt_runtime_us` and `kernel.sched_rt_period_us`.
    pub sched_rt: BTreeMap<String, Reading>,
    /// The cgroup hierarchies' own settings irqlab changes, by path: a v1
    /// cpuset root's `cpuset.sched_load_balance`, the v2 root's
    /// `cgroup.subtree_control`.
    pub cgroup_roots: BTreeMap<String, Reading>,
    /// Where debugfs is mounted (irqlab mounts it for the scheduler's knobs
    /// when it is nowhere, and unmounts it after).
    pub debugfs_mounts: Vec<String>,
    /// The scheduler's debugfs knobs (`sched/features`,
    /// `sched/fair_server/cpuN/{runtime,period}`), read where debugfs is
    /// mounted (never mounted for this); unreadable on a kernel in lockdown.
    pub sched_debug: BTreeMap<String, Reading>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ThreadState {
    pub tid: i32,
    /// Clock ticks since boot (`/proc/TID/stat` field 22).
    pub start_ticks: u64,
    pub comm: String,
    pub sched: Read<SchedAttr>,
    /// `Cpus_allowed_list` of `/proc/TID/status`.
    pub affinity: Reading,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NetDevice {
    pub ifindex: Reading,
    /// rx queue (`rx-0`) → `rps_cpus` (a hex mask).
    pub rps_cpus: BTreeMap<String, Reading>,
    /// tx queue (`tx-0`) → `xps_cpus` (a hex mask).
    pub xps_cpus: BTreeMap<String, Reading>,
    /// `threaded`, `napi_defer_hard_irqs`, `gro_flush_timeout`.
    pub settings: BTreeMap<String, Reading>,
    /// Its NAPI instances (netdev netlink, Linux 6.13+).
    pub napi: Read<Vec<NapiState>>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NapiState {
    pub id: u32,
    pub defer_hard_irqs: Option<u64>,
    pub gro_flush_timeout_ns: Option<u64>,
    pub irq_suspend_timeout_ns: Option<u64>,
    pub threaded: Option<bool>,
}

/// Whether `dev` is one of the testbed's root-side devices (`irqlab-a`,
/// `irqlab-b`). The testbed is shared infrastructure: `irqlab testbed up`
/// keeps it up on purpose, tests join one that is up and bring up one
/// that is not (removing it after, when they made it), and other users of
/// the machine do the same at any time. So its coming or going is not a
/// difference (a diff notes it); its settings are compared whenever it is
/// in both snapshots, as any other device's.
pub fn is_testbed_device(dev: &str) -> bool {
    dev.starts_with("irqlab-")
}

/// The short form of a thread's policy in differences: `fifo:50`,
/// `other`, `other nice 5`, `deadline 200us/1ms/1ms`.
pub fn short_sched(attr: &SchedAttr) -> String {
    use irqlab_analysis::format_ns;
    match *attr {
        SchedAttr::Other { nice: 0 } => "other".into(),
        SchedAttr::Other { nice } => format!("other nice {nice}"),
        SchedAttr::Batch { nice: 0 } => "batch".into(),
        SchedAttr::Batch { nice } => format!("batch nice {nice}"),
        SchedAttr::Idle => "idle".into(),
        SchedAttr::Fifo { priority } => format!("fifo:{priority}"),
        SchedAttr::Rr { priority } => format!("rr:{priority}"),
        SchedAttr::Deadline { runtime_ns, deadline_ns, period_ns } => {
            format!("deadline {}/{}/{}", format_ns(runtime_ns), format_ns(deadline_ns), format_ns(period_ns))
        }
    }
}
