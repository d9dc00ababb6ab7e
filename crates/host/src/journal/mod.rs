//! The control journal: every change irqlab makes to the machine is written
//! to `/run/irqlab/control/` (object, old value, new value, owner) *before*
//! it is applied, and the entry is removed once the old value is back. The
//! owner restores on every exit path it can run code on (return, error,
//! panic, Ctrl-C, SIGTERM: the guard's `Drop`, or the `at_exit` hook for an
//! exit without unwinding). After a SIGKILL the entry stays, its owner is
//! dead, and `irqlab control status` / `irqlab doctor` name it and
//! `irqlab control revert --all` restores it.
//!
//! One process at a time controls an object: an exclusive flock per
//! object, whose file holds the controlling pid for the refusal message.
//!
//! A new kind of change is a variant of [`Object`] and [`Value`] and its
//! arms in [`read`] and [`write`].
//!
//! The objects live below: [`sched`] sets any thread's scheduling class
//! through `sched_setattr` (SCHED_DEADLINE included), [`sched_knobs`] the
//! scheduler's debugfs knobs (HRTICK_DL, the fair server), [`threads`]
//! resolves which threads a user means, [`cgroup`] and [`root_domain`] the
//! cgroups irqlab creates, [`netdev`] a device's queues and NAPI settings.

pub mod boot_file;
pub mod cgroup;
pub mod hold;
pub mod irq;
pub mod netdev;
pub mod root_domain;
pub mod sched;
pub mod sched_knobs;
pub mod threads;

use crate::cleanup::{self, Registration};
use crate::error::{Error, Result};
use netdev::{Knob, Netdev};
use sched::SchedAttr;
use serde::{Deserialize, Serialize};
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use threads::Thread;

/// Where entries live. tmpfs: a reboot, which undoes every change, also
/// empties the journal.
pub const DIR: &str = "/run/irqlab/control";

/// Where the entries of changes that outlast the boot live
/// ([`Object::BootFile`]): a revert after the reboot still finds them.
/// Their locks stay in [`DIR`]: a lock is held by a process, which a
/// reboot ends.
pub const DURABLE_DIR: &str = "/var/lib/irqlab/control";

/// What was changed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Object {
    /// A thread's scheduling attributes.
    ThreadSched { thread: Thread },
    /// The CPUs a thread may run on.
    ThreadAffinity { thread: Thread },
    /// A kernel knob: one sysfs or procfs file (e.g. a queue's rps_cpus).
    File { path: String },
    /// One setting of one NAPI instance (netdev netlink `napi-set`).
    Napi { dev: String, ifindex: u32, id: u32, knob: Knob },
    /// The testbed (network namespaces irqlab-a/b and their links), which
    /// live commands share through their own protocol (`testbed`); shown
    /// here when a killed run left it behind, and reverted by removing it.
    Testbed,
    /// RT throttling (`kernel.sched_rt_runtime_us`), which interference
    /// probes lift for their runs. Concurrent probes share one lift, so it
    /// keeps its own lock protocol (`probe::rt_limit`); the journal shows a
    /// lift a killed run left behind and reverts it.
    RtLimit,
    /// A cgroup irqlab created, in a v1 hierarchy
    /// (`/sys/fs/cgroup/cpuset/irqlab-dl`) or the v2 one
    /// (`/sys/fs/cgroup/irqlab-dl`): `present` or `absent`; removing it
    /// first moves any task still in it to its parent.
    Cgroup { path: String },
    /// The cgroup a thread is in, in the v1 hierarchy of `controller`
    /// (`cpuset`): a path below the hierarchy's root (`/`, `/irqlab-dl`).
    CgroupMember { thread: Thread, controller: String },
    /// The v2 cgroup a process is in (v2 places whole processes; `process`
    /// is its thread-group leader): a path below the v2 root.
    Cgroup2Member { process: Thread },
    /// The v2 cgroup one thread is in, within its process's threaded
    /// subtree (`cgroup.threads`): a path below the v2 root.
    Cgroup2Thread { thread: Thread },
    /// Whether v2 cgroup `cgroup` (its directory) gives `controller`
    /// (`cpuset`, `io`) to its children: `enabled` or `disabled`, through
    /// its `cgroup.subtree_control`.
    Cgroup2Subtree { cgroup: String, controller: String },
    /// A disk's I/O scheduler (`/sys/block/DISK/queue/scheduler`): the
    /// selected one's name (the file lists them all, the selected in brackets).
    IoScheduler { disk: String },
    /// A network device's root qdisc, as `tc` takes it (`tbf rate 100mbit
    /// burst 3000 latency 200ms`), or `default` (the one the kernel gives
    /// a device: set back by deleting the root qdisc).
    RootQdisc { dev: String },
    /// The qdisc below a class of a device's qdisc (`parent`, e.g.
    /// `8044:1`, a token bucket's one class), as `tc` takes it
    /// (`bfifo limit 2503000b`, the bucket's own FIFO).
    ChildQdisc { dev: String, parent: String },
    /// debugfs mounted at `path` by irqlab for the scheduler's knobs
    /// (`journal::sched_knobs`): `mounted` or `unmounted`.
    DebugfsMount { path: String },
    /// A scheduler feature of debugfs's `sched/features` (`HRTICK_DL`):
    /// `on` or `off` (the file lists it as NAME or NO_NAME).
    SchedFeature { name: String },
    /// A CPU's fair-class deadline server (debugfs `sched/fair_server/cpuN`,
    /// 6.12+): runtime and period together, one object, because the kernel
    /// checks runtime <= period after each write and only the pair's writer
    /// can order the two writes so that every step is valid.
    FairServer { cpu: usize },
    /// The CPUs an IRQ may be delivered to (`/proc/irq/N/smp_affinity_list`);
    /// `name` is its handler's, for people (`journal::irq`).
    IrqAffinity { irq: u32, name: String },
    /// The CPUs IRQs registered from now on start with
    /// (`/proc/irq/default_smp_affinity`).
    IrqDefaultAffinity,
    /// A guest of `irqlab lab run` (vng and its QEMU, process group
    /// `pgid`, run directory `share`) whose `lab run` died and whose
    /// watchdog did not end it (`irqlab_lab::guest_group`): `running` or
    /// `absent`; reverted by killing the group.
    LabGuest { pgid: i32, kernel: String, share: String },
    /// A file the next boot reads (a GRUB drop-in, a systemd unit): its
    /// whole content or absent (`Value::Content`), the change's entry in
    /// the durable journal ([`journal::boot_file`](boot_file)).
    BootFile { path: String },
    /// The IRQs a running irqbalance (process `pid`) leaves alone, through
    /// its socket (`crate::irqbalance`): `Value::Irqs`. Gone with the daemon.
    IrqbalanceBans { pid: i32 },
}

impl std::fmt::Display for Object {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Object::ThreadSched { thread } => write!(f, "scheduling of {} (tid {})", thread.comm, thread.tid),
            Object::ThreadAffinity { thread } => write!(f, "CPU affinity of {} (tid {})", thread.comm, thread.tid),
            Object::File { path } => write!(f, "{path}"),
            Object::Napi { dev, id, knob, .. } => write!(f, "{knob} of NAPI {id} ({dev})"),
            Object::RtLimit => write!(f, "RT throttling (kernel.sched_rt_runtime_us)"),
            Object::Testbed => write!(f, "the testbed (namespaces irqlab-a, irqlab-b)"),
            Object::Cgroup { path } => write!(f, "cgroup {path}"),
            Object::CgroupMember { thread, controller } => write!(f, "{controller} cgroup of {} (tid {})", thread.comm, thread.tid),
            Object::Cgroup2Member { process } => write!(f, "cgroup (v2) of {} (pid {})", process.comm, process.tid),
            Object::Cgroup2Thread { thread } => write!(f, "cgroup (v2, threaded) of {} (tid {})", thread.comm, thread.tid),
            Object::Cgroup2Subtree { cgroup, controller } => {
                write!(f, "{controller} for the children of cgroup {cgroup} (v2 subtree_control)")
            }
            Object::IoScheduler { disk } => write!(f, "I/O scheduler of {disk}"),
            Object::RootQdisc { dev } => write!(f, "root qdisc of {dev}"),
            Object::ChildQdisc { dev, parent } => write!(f, "qdisc below {parent} on {dev}"),
            Object::DebugfsMount { path } => write!(f, "debugfs mount at {path}"),
            Object::SchedFeature { name } => write!(f, "scheduler feature {name} (debugfs sched/features)"),
            Object::FairServer { cpu } => write!(f, "fair server of CPU {cpu} (debugfs sched/fair_server)"),
            Object::IrqAffinity { irq, name } if name.is_empty() => write!(f, "affinity of IRQ {irq}"),
            Object::IrqAffinity { irq, name } => write!(f, "affinity of IRQ {irq} ({name})"),
            Object::IrqDefaultAffinity => write!(f, "default IRQ affinity (/proc/irq/default_smp_affinity)"),
            Object::LabGuest { pgid, kernel, .. } => write!(f, "guest {kernel} of irqlab lab run (QEMU, process group {pgid})"),
            Object::BootFile { path } => write!(f, "boot configuration {path}"),
            Object::IrqbalanceBans { pid } => write!(f, "IRQs irqbalance leaves alone (irqbalance pid {pid})"),
        }
    }
}

impl Object {
    /// A file name for the object's lock.
    fn key(&self) -> String {
        match self {
            Object::ThreadSched { thread } => format!("thread-{}-{}", thread.tid, thread.start_ticks),
            Object::ThreadAffinity { thread } => format!("affinity-{}-{}", thread.tid, thread.start_ticks),
            Object::File { path } => format!("file{}", path.replace(['/', '.'], "_")),
            Object::Napi { ifindex, id, knob, .. } => format!("napi-{ifindex}-{id}-{knob}"),
            Object::RtLimit => "rt-limit".into(),
            Object::Testbed => "testbed".into(),
            Object::Cgroup { path } => format!("cgroup{}", path.replace(['/', '.'], "_")),
            Object::CgroupMember { thread, controller } => format!("cgroup-{controller}-{}-{}", thread.tid, thread.start_ticks),
            Object::Cgroup2Member { process } => format!("cgroup2-{}-{}", process.tid, process.start_ticks),
            Object::Cgroup2Thread { thread } => format!("cgroup2t-{}-{}", thread.tid, thread.start_ticks),
            Object::Cgroup2Subtree { cgroup, controller } => format!("subtree-{controller}{}", cgroup.replace(['/', '.'], "_")),
            Object::IoScheduler { disk } => format!("iosched-{disk}"),
            Object::RootQdisc { dev } => format!("qdisc-{dev}"),
            Object::ChildQdisc { dev, parent } => format!("qdisc-{dev}-{}", parent.replace(':', "_")),
            Object::DebugfsMount { path } => format!("debugfs{}", path.replace(['/', '.'], "_")),
            Object::SchedFeature { name } => format!("sched-feature-{name}"),
            Object::FairServer { cpu } => format!("fair-server-{cpu}"),
            Object::IrqAffinity { irq, .. } => format!("irq-{irq}"),
            Object::IrqDefaultAffinity => "irq-default".into(),
            Object::LabGuest { pgid, .. } => format!("lab-guest-{pgid}"),
            Object::BootFile { path } => format!("boot{}", path.replace(['/', '.'], "_")),
            Object::IrqbalanceBans { pid } => format!("irqbalance-{pid}"),
        }
    }

    /// Whether the object still exists (a thread that exited has nothing
    /// left to restore).
    pub fn exists(&self) -> bool {
        match self {
            Object::ThreadSched { thread }
            | Object::ThreadAffinity { thread }
            | Object::CgroupMember { thread, .. }
            | Object::Cgroup2Member { process: thread }
            | Object::Cgroup2Thread { thread } => thread.alive(),
            Object::Cgroup2Subtree { cgroup, .. } => Path::new(cgroup).is_dir(),
            // A device's files go with the device (a testbed taken down).
            Object::File { path } => Path::new(path).exists(),
            Object::Napi { ifindex, id, .. } => Netdev::open().and_then(|mut n| n.napi(*ifindex, *id)).is_ok_and(|n| n.is_some()),
            Object::RtLimit | Object::Testbed | Object::Cgroup { .. } => true,
            Object::IoScheduler { disk } => Path::new(&format!("/sys/block/{disk}/queue/scheduler")).exists(),
            // A testbed device goes with the testbed.
            Object::RootQdisc { dev } => Path::new(&format!("/sys/class/net/{dev}")).exists(),
            // The parent goes with its qdisc (a link's token bucket taken off).
            Object::ChildQdisc { dev, parent } => tc(&["qdisc", "show", "dev", dev]).is_ok_and(|show| has_qdisc(&show, parent)),
            // Kernel-wide settings; a CPU taken offline keeps its server.
            Object::DebugfsMount { .. } | Object::SchedFeature { .. } | Object::FairServer { .. } => true,
            Object::IrqAffinity { irq, .. } => irq::exists(*irq),
            Object::IrqDefaultAffinity => true,
            Object::LabGuest { .. } => lab_guest(self).is_some_and(|g| g.running()),
            // Absent is one of its values.
            Object::BootFile { .. } => true,
            Object::IrqbalanceBans { pid } => crate::irqbalance::Daemon { pid: *pid }.has_socket(),
        }
    }

    /// The journal directory its entries live in.
    fn journal_dir(&self) -> &'static str {
        match self {
            Object::BootFile { .. } => DURABLE_DIR,
            _ => DIR,
        }
    }
}

/// A setting of an object.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Value {
    Sched {
        attr: SchedAttr,
    },
    Cpus {
        cpus: Vec<usize>,
    },
    Text {
        text: String,
    },
    Uint {
        value: u64,
    },
    /// An IRQ's affinity as read back (`Object::IrqAffinity`): the CPUs it
    /// may go to, and those the kernel delivers it to. Restoring it puts
    /// the delivery back too: x86 keeps an IRQ on its current CPU when a
    /// mask written still contains it, and an IRQ's thread (PREEMPT_RT,
    /// threadirqs) runs where the IRQ is delivered.
    IrqCpus {
        cpus: Vec<usize>,
        effective: Option<Vec<usize>>,
    },
    /// A deadline server's budget (`Object::FairServer`).
    DlServer {
        runtime_ns: u64,
        period_ns: u64,
    },
    /// A whole file's content, `None` when there is no file
    /// (`Object::BootFile`).
    Content {
        content: Option<String>,
    },
    /// IRQ numbers, sorted (`Object::IrqbalanceBans`).
    Irqs {
        irqs: Vec<u32>,
    },
}

impl std::fmt::Display for Value {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Value::Sched { attr } => write!(f, "{attr}"),
            Value::Cpus { cpus } | Value::IrqCpus { cpus, effective: None } => write!(f, "CPU {}", crate::rt::format_cpu_list(cpus)),
            Value::IrqCpus { cpus, effective: Some(effective) } => {
                write!(f, "CPU {} (delivered to {})", crate::rt::format_cpu_list(cpus), crate::rt::format_cpu_list(effective))
            }
            Value::Text { text } => write!(f, "`{text}`"),
            Value::Uint { value } => write!(f, "{value}"),
            Value::DlServer { runtime_ns, period_ns } => {
                write!(f, "runtime {} per {}", irqlab_analysis::format_ns(*runtime_ns), irqlab_analysis::format_ns(*period_ns))
            }
            Value::Content { content } => write!(f, "{}", boot_file::describe(content)),
            Value::Irqs { irqs } => write!(f, "IRQs {}", crate::irqbalance::format_irqs(irqs)),
        }
    }
}

impl Value {
    /// Whether two values are the same setting, as the kernel shows it:
    /// CPU masks compare as masks (`00000002` = `2` = `0,00000002`), CPU
    /// lists as sets, text by its trimmed words.
    pub fn same_setting(&self, other: &Value) -> bool {
        match (self, other) {
            (Value::Text { text: a }, Value::Text { text: b }) => normal_text(a) == normal_text(b),
            // Where an IRQ is delivered within its mask is the kernel's
            // choice, not a setting: only the masks compare.
            (Value::Cpus { cpus: a } | Value::IrqCpus { cpus: a, .. }, Value::Cpus { cpus: b } | Value::IrqCpus { cpus: b, .. }) => {
                let set = |c: &[usize]| c.iter().copied().collect::<std::collections::BTreeSet<_>>();
                set(a) == set(b)
            }
            _ => self == other,
        }
    }
}

/// A text setting reduced to what it means: a hex mask (digits and
/// commas) without its grouping and leading zeros, other text with its
/// whitespace collapsed.
fn normal_text(text: &str) -> String {
    let t = text.trim();
    if !t.is_empty() && t.chars().all(|c| c.is_ascii_hexdigit() || c == ',') && t.chars().any(|c| c.is_ascii_hexdigit()) {
        let digits: String = t.chars().filter(|c| *c != ',').collect::<String>().to_ascii_lowercase();
        let trimmed = digits.trim_start_matches('0');
        return if trimmed.is_empty() { "0".into() } else { trimmed.into() };
    }
    t.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// What an entry's object holds now, beside what irqlab set and what was
/// there before (tuned's verify): `control status` shows it, and a
/// persistent entry someone changed since is reverted only with `--force`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "now", rename_all = "kebab-case")]
pub enum Now {
    /// Its owner runs and manages the value (a server moves its thread's
    /// priority): not read.
    Held,
    /// The value irqlab set.
    AsSet,
    /// The value from before irqlab's change: someone put it back (who,
    /// where irqlab can tell, as for a drift).
    Old {
        #[serde(skip_serializing_if = "Option::is_none")]
        by: Option<Author>,
    },
    /// Neither: someone changed it since.
    Drifted {
        value: Value,
        /// Who likely changed it, where irqlab can tell (an IRQ a running
        /// irqbalance balances).
        #[serde(skip_serializing_if = "Option::is_none")]
        by: Option<Author>,
    },
    /// The object is gone (its thread exited, its device went away).
    Gone,
    /// It could not be read.
    Unknown { why: String },
}

impl std::fmt::Display for Now {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Now::Held => write!(f, "held by its owner"),
            Now::AsSet => write!(f, "as set"),
            Now::Old { by: None } => write!(f, "back to the old value"),
            Now::Old { by: Some(by) } => write!(f, "back to the old value, by {by}"),
            Now::Drifted { value, by: None } => write!(f, "DRIFTED: now {value}"),
            Now::Drifted { value, by: Some(by) } => write!(f, "DRIFTED: now {value}, by {by}"),
            Now::Gone => write!(f, "gone"),
            Now::Unknown { why } => write!(f, "unknown ({why})"),
        }
    }
}

/// The object's setting now.
pub fn read(object: &Object) -> Result<Value> {
    match object {
        Object::ThreadSched { thread } => Ok(Value::Sched { attr: sched::get(thread.tid)? }),
        Object::ThreadAffinity { thread } => Ok(Value::Cpus { cpus: crate::rt::affinity(thread.tid)? }),
        Object::File { path } => {
            let text = std::fs::read_to_string(path).map_err(|e| Error::io(format!("reading {path}"), e))?;
            Ok(Value::Text { text: text.trim().to_string() })
        }
        Object::Napi { ifindex, id, knob, dev } => {
            let napi = Netdev::open()?.napi(*ifindex, *id)?.ok_or_else(|| Error::Failed(format!("NAPI {id} of {dev} is gone")))?;
            let value = knob.of(&napi).ok_or_else(|| Error::MissingKernelFeature {
                feature: format!("per-NAPI {knob}"),
                detail: "this kernel's napi-get does not report it".into(),
            })?;
            Ok(Value::Uint { value })
        }
        Object::Testbed => Ok(Value::Text { text: testbed_state(crate::testbed::Testbed::status()?.as_ref()).into() }),
        Object::LabGuest { .. } => {
            Ok(Value::Text { text: if lab_guest(object).is_some_and(|g| g.running()) { "running" } else { "absent" }.into() })
        }
        Object::RtLimit => Ok(Value::Text { text: crate::rt_limit::RtBandwidth::read()?.runtime_us.to_string() }),
        Object::Cgroup { path } => Ok(Value::Text { text: if Path::new(path).is_dir() { "present" } else { "absent" }.into() }),
        Object::CgroupMember { thread, controller } => Ok(Value::Text { text: cgroup::of_thread(thread.tid, controller)? }),
        Object::Cgroup2Member { process } => Ok(Value::Text { text: cgroup::of_process_v2(process.tid)? }),
        Object::Cgroup2Thread { thread } => Ok(Value::Text { text: cgroup::of_thread_v2(thread.tid)? }),
        Object::Cgroup2Subtree { cgroup, controller } => {
            let on = cgroup::subtree_enabled(Path::new(cgroup), controller)?;
            Ok(Value::Text { text: if on { "enabled" } else { "disabled" }.into() })
        }
        Object::IoScheduler { disk } => {
            let path = format!("/sys/block/{disk}/queue/scheduler");
            let text = std::fs::read_to_string(&path).map_err(|e| Error::io(format!("reading {path}"), e))?;
            let selected =
                selected_scheduler(&text).ok_or_else(|| Error::Failed(format!("{path}: no scheduler selected in `{}`", text.trim())))?;
            Ok(Value::Text { text: selected })
        }
        Object::RootQdisc { dev } => Ok(Value::Text { text: root_qdisc_spec(&tc(&["qdisc", "show", "dev", dev, "root"])?) }),
        Object::ChildQdisc { dev, parent } => {
            let show = tc(&["qdisc", "show", "dev", dev, "invisible"])?;
            let text = child_qdisc_spec(&show, parent).ok_or_else(|| Error::Failed(format!("{dev} has no qdisc below {parent}")))?;
            Ok(Value::Text { text })
        }
        Object::DebugfsMount { path } => Ok(sched_knobs::read_mount(path)),
        Object::SchedFeature { name } => sched_knobs::read_feature(name),
        Object::FairServer { cpu } => sched_knobs::read_fair_server(*cpu),
        Object::IrqAffinity { irq, .. } => Ok(Value::IrqCpus { cpus: irq::affinity(*irq)?, effective: irq::effective(*irq) }),
        Object::IrqDefaultAffinity => Ok(Value::Cpus { cpus: irq::default_affinity()? }),
        Object::BootFile { path } => Ok(Value::Content { content: boot_file::read(path)? }),
        Object::IrqbalanceBans { pid } => Ok(Value::Irqs { irqs: crate::irqbalance::Daemon { pid: *pid }.banned()? }),
    }
}

/// Whether `tc qdisc show` lists a qdisc whose handle is `parent`'s major.
fn has_qdisc(show: &str, parent: &str) -> bool {
    let Some((major, _)) = parent.split_once(':') else { return false };
    show.lines().any(|l| l.split_whitespace().nth(2) == Some(&format!("{major}:")))
}

/// The qdisc below `parent` in `tc qdisc show dev DEV invisible` as `tc
/// qdisc replace` takes it back (`bfifo limit 2503000b`): its kind and
/// options, its handle only when it had one of its own.
fn child_qdisc_spec(show: &str, parent: &str) -> Option<String> {
    show.lines().find_map(|line| {
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            ["qdisc", kind, handle, "parent", p, rest @ ..] if *p == parent => {
                let mut spec: Vec<&str> = if *handle == "0:" { vec![] } else { vec!["handle", handle] };
                spec.push(kind);
                spec.extend(rest);
                Some(spec.join(" "))
            }
            _ => None,
        }
    })
}

/// Runs iproute2's `tc` with `args`; its output, or an error naming the command.
pub fn tc(args: &[&str]) -> Result<String> {
    let out = std::process::Command::new("tc").args(args).output().map_err(|e| Error::io("running tc (iproute2)", e))?;
    if !out.status.success() {
        return Err(Error::Failed(format!("tc {}: {}", args.join(" "), String::from_utf8_lossy(&out.stderr).trim())));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The root qdisc of `tc qdisc show dev DEV root` as `tc qdisc replace`
/// takes it back (`tbf rate 100Mbit burst 3000b lat 200ms`; tc takes its
/// own abbreviations), or `default` for the kernel's own (handle 0:).
fn root_qdisc_spec(show: &str) -> String {
    let words: Vec<&str> = show.lines().next().unwrap_or("").split_whitespace().collect();
    match words.as_slice() {
        ["qdisc", kind, handle, rest @ ..] if *handle != "0:" => {
            // Drop "root", "refcnt N" and the flags tc prints but does not take.
            let mut spec = vec![*kind];
            let mut it = rest.iter();
            while let Some(&w) = it.next() {
                match w {
                    "root" => {}
                    "refcnt" => {
                        it.next();
                    }
                    _ => spec.push(w),
                }
            }
            spec.join(" ")
        }
        _ => "default".into(),
    }
}

/// The bracketed name of a `queue/scheduler` text (`[none] mq-deadline bfq`).
pub(crate) fn selected_scheduler(text: &str) -> Option<String> {
    text.split_whitespace().find_map(|w| w.strip_prefix('[').and_then(|w| w.strip_suffix(']')).map(String::from))
}

/// Applies `value` to `object`.
pub fn write(object: &Object, value: &Value) -> Result<()> {
    match (object, value) {
        (Object::ThreadSched { thread }, Value::Sched { attr }) => sched::set(thread.tid, *attr),
        (Object::ThreadAffinity { thread }, Value::Cpus { cpus }) => crate::rt::set_affinity(thread.tid, cpus),
        (Object::File { path }, Value::Text { text }) => std::fs::write(path, text).map_err(|e| Error::io(format!("writing {path}"), e)),
        (Object::Napi { id, knob, .. }, Value::Uint { value }) => Netdev::open()?.set(*id, *knob, *value),
        // Only ever restored, and only through its own protocol.
        (Object::RtLimit, _) => crate::rt_limit::repair_abandoned().map(|_| ()),
        (Object::Testbed, _) => crate::testbed::Testbed::down(),
        // Only ever ended.
        (Object::LabGuest { pgid, .. }, _) => match lab_guest(object) {
            Some(guest) => guest.end().map_err(|e| Error::io(format!("ending the guest of process group {pgid}"), e)),
            None => Ok(()),
        },
        (Object::Cgroup { path }, Value::Text { text }) if text == "present" => cgroup::create(Path::new(path)),
        (Object::Cgroup { path }, Value::Text { text }) if text == "absent" => cgroup::remove(Path::new(path)),
        (Object::CgroupMember { thread, controller }, Value::Text { text }) => cgroup::move_thread(thread.tid, controller, text),
        (Object::Cgroup2Member { process }, Value::Text { text }) => cgroup::move_process_v2(process.tid, text),
        (Object::Cgroup2Thread { thread }, Value::Text { text }) => cgroup::move_thread_v2(thread.tid, text),
        (Object::Cgroup2Subtree { cgroup, controller }, Value::Text { text }) if text == "enabled" || text == "disabled" => {
            cgroup::set_subtree(Path::new(cgroup), controller, text == "enabled")
        }
        (Object::IoScheduler { disk }, Value::Text { text }) => {
            let path = format!("/sys/block/{disk}/queue/scheduler");
            std::fs::write(&path, text).map_err(|e| Error::io(format!("writing `{text}` to {path}"), e))
        }
        (Object::RootQdisc { dev }, Value::Text { text }) if text == "default" => {
            if read(object)? != *value {
                tc(&["qdisc", "del", "dev", dev, "root"])?;
            }
            Ok(())
        }
        (Object::RootQdisc { dev }, Value::Text { text }) => {
            let mut args = vec!["qdisc", "replace", "dev", dev, "root"];
            args.extend(text.split_whitespace());
            tc(&args).map(|_| ())
        }
        (Object::ChildQdisc { dev, parent }, Value::Text { text }) => {
            let mut args = vec!["qdisc", "replace", "dev", dev, "parent", parent];
            args.extend(text.split_whitespace());
            tc(&args).map(|_| ())
        }
        (Object::DebugfsMount { path }, value) => sched_knobs::write_mount(path, value),
        (Object::SchedFeature { name }, value) => sched_knobs::write_feature(name, value),
        (Object::FairServer { cpu }, value) => sched_knobs::write_fair_server(*cpu, value),
        (Object::IrqAffinity { irq, name }, Value::Cpus { cpus }) => irq::set_affinity_and_threads(*irq, name, cpus, None),
        (Object::IrqAffinity { irq, name }, Value::IrqCpus { cpus, effective }) => {
            irq::set_affinity_and_threads(*irq, name, cpus, effective.as_deref())
        }
        (Object::IrqDefaultAffinity, Value::Cpus { cpus }) => irq::set_default_affinity(cpus),
        (Object::BootFile { path }, Value::Content { content }) => boot_file::write(path, content.as_deref()),
        (Object::IrqbalanceBans { pid }, Value::Irqs { irqs }) => crate::irqbalance::Daemon { pid: *pid }.set_banned(irqs),
        (object, value) => Err(Error::Failed(format!("{object} cannot be set to {value}"))),
    }
}

/// The process that made a change.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Owner {
    pub pid: i32,
    pub start_ticks: u64,
    pub command: String,
}

impl Owner {
    fn this_process() -> Owner {
        let pid = std::process::id() as i32;
        let start_ticks = crate::task_stat::of_self().map_or(0, |s| s.start_ticks);
        let command = std::env::args().collect::<Vec<_>>().join(" ");
        Owner { pid, start_ticks, command }
    }

    /// "irqlab process N", or "an irqlab run" when the pid is unknown (an
    /// RT-limit lift records none).
    pub fn describe(&self) -> String {
        if self.pid > 0 {
            format!("irqlab process {}", self.pid)
        } else {
            "an irqlab run".into()
        }
    }

    /// Whether that process (not a later one with its pid) still runs.
    pub fn alive(&self) -> bool {
        crate::task_stat::of(self.pid).is_some_and(|s| s.start_ticks == self.start_ticks)
    }
}

/// One journal entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    pub id: String,
    pub object: Object,
    pub old: Value,
    pub new: Value,
    pub owner: Owner,
    /// Wall clock of the change, Unix ms.
    pub time_unix_ms: u64,
    /// Left applied on purpose (`--persist`): reverted only when asked.
    pub persistent: bool,
}

/// An entry and what became of its owner.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum State {
    /// Its owner runs and will restore it.
    Active,
    /// Kept on purpose.
    Persistent,
    /// Its owner died without restoring it (SIGKILL, OOM kill, crash).
    Leftover,
}

impl Entry {
    pub fn state(&self) -> State {
        if self.persistent {
            State::Persistent
        } else if self.owner.alive() {
            State::Active
        } else {
            State::Leftover
        }
    }

    fn path(&self) -> PathBuf {
        Path::new(self.object.journal_dir()).join(format!("{}.json", self.id))
    }

    /// What the object holds now (read from the machine).
    pub fn now(&self) -> Now {
        if self.state() == State::Active {
            return Now::Held;
        }
        if !self.object.exists() {
            return Now::Gone;
        }
        match read(&self.object) {
            Ok(v) if v.same_setting(&self.new) => Now::AsSet,
            Ok(v) if v.same_setting(&self.old) => Now::Old { by: drifted_by(&self.object, &v) },
            Ok(value) => Now::Drifted { by: drifted_by(&self.object, &value), value },
            Err(e) => Now::Unknown { why: e.to_string() },
        }
    }
}

/// Who likely changed a value irqlab set, for programs (`tool`, `pids`,
/// tuned's `rule`) and for people (`says`, what Display shows).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Author {
    /// `irqbalance`, `stalld` or `tuned`.
    pub tool: &'static str,
    /// Its processes running (irqbalance's that balances the IRQ, stalld's).
    pub pids: Vec<i32>,
    /// tuned's rule that sets the value (`group.NAME`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rule: Option<String>,
    pub says: String,
}

impl std::fmt::Display for Author {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.says)
    }
}

/// Who likely moved `object` from what irqlab set (issue 54): an IRQ
/// that a running irqbalance does not leave alone is moved at its every
/// pass; a thread at SCHED_DEADLINE where stalld runs is stalld's boost;
/// a thread whose policy or CPUs are what a rule of tuned's active
/// profile sets is tuned's (it applies its rules again at every start and
/// profile change).
fn drifted_by(object: &Object, value: &Value) -> Option<Author> {
    match (object, value) {
        (Object::IrqAffinity { irq, .. }, _) => {
            crate::irqbalance::running().into_iter().find(|d| !d.banned().is_ok_and(|banned| banned.contains(irq))).map(|d| Author {
                tool: "irqbalance",
                pids: vec![d.pid],
                rule: None,
                says: format!("irqbalance (pid {}), which balances IRQ {irq}", d.pid),
            })
        }
        (Object::ThreadSched { .. }, Value::Sched { attr: SchedAttr::Deadline { .. } }) => {
            let stalld = crate::daemons::stalld_running();
            (!stalld.is_empty()).then(|| {
                let list = stalld.iter().map(i32::to_string).collect::<Vec<_>>().join(", ");
                Author {
                    tool: "stalld",
                    says: format!("stalld (pid {list}), which boosts starved threads to SCHED_DEADLINE"),
                    pids: stalld,
                    rule: None,
                }
            })
        }
        (Object::ThreadSched { thread } | Object::ThreadAffinity { thread }, _) => by_tuned_rule(thread, value),
        _ => None,
    }
}

/// tuned's active profile and its `[scheduler]` rules in tuned's order,
/// read once per command (`control status` asks for each entry).
fn tuned_rules() -> &'static Option<(String, Vec<crate::tuned_profile::Rule>)> {
    use crate::tuned_profile;
    static RULES: std::sync::OnceLock<Option<(String, Vec<tuned_profile::Rule>)>> = std::sync::OnceLock::new();
    RULES.get_or_init(|| {
        let roots = tuned_profile::Roots::system();
        let active = roots.active()?;
        let merged = tuned_profile::load(&active, &roots, &tuned_profile::Machine::read());
        Some((active, tuned_profile::scheduler_rules(&merged, &mut Vec::new())))
    })
}

/// tuned, where a rule of its active profile sets `thread` to `value`.
fn by_tuned_rule(thread: &threads::Thread, value: &Value) -> Option<Author> {
    use crate::tuned_profile;
    let (active, rules) = tuned_rules().as_ref()?;
    let (policy, affinity) = tuned_profile::deciding_rules(rules, &tuned_profile::ps_cmd(thread.tid, &thread.comm), &mut Vec::new());
    let rule = match value {
        Value::Sched { attr } => policy.filter(|r| r.policy.is_some_and(|p| p.same_class_and_priority(attr))),
        Value::Cpus { cpus } => affinity.filter(|r| r.affinity.as_ref() == Some(cpus)),
        _ => None,
    }?;
    Some(Author {
        tool: "tuned",
        pids: crate::machine::processes_named("tuned"),
        rule: Some(format!("group.{}", rule.name)),
        says: format!("tuned (profile {active}), whose rule group.{} ({}) sets it", rule.name, rule.from),
    })
}

fn now_unix_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

fn ensure_dir() -> Result<()> {
    std::fs::create_dir_all(Path::new(DIR).join("locks")).map_err(|e| Error::io(format!("creating {DIR}"), e))
}

fn ensure_durable_dir() -> Result<()> {
    std::fs::create_dir_all(DURABLE_DIR).map_err(|e| Error::io(format!("creating {DURABLE_DIR}"), e))
}

/// Writes `entry` atomically (temp file, fsync, rename, the directory
/// fsynced): a crash leaves the old entry or the new one, never half of one,
/// and a rename that reached the directory survives it.
fn save(entry: &Entry) -> Result<()> {
    ensure_dir()?;
    let dir = entry.object.journal_dir();
    if dir == DURABLE_DIR {
        ensure_durable_dir()?;
    }
    let path = entry.path();
    let tmp = path.with_extension("json.tmp");
    let text = serde_json::to_string_pretty(entry).expect("entries serialise");
    let write = || -> std::io::Result<()> {
        let mut f = File::create(&tmp)?;
        f.write_all(text.as_bytes())?;
        f.sync_all()?;
        std::fs::rename(&tmp, &path)?;
        File::open(dir)?.sync_all()
    };
    write().map_err(|e| Error::io(format!("writing the control journal entry {}", path.display()), e))
}

/// An entry file that cannot be read or parsed (cut short, edited by
/// hand): what it changed is unknown, so it is never undone blindly, and
/// never taken for "nothing changed" either: `control status`, `control
/// revert` and `doctor` name it.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Unreadable {
    pub path: PathBuf,
    pub error: String,
}

impl std::fmt::Display for Unreadable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "unreadable entry {}: what it changed is unknown ({}); check the machine by hand, then delete the file",
            self.path.display(),
            self.error
        )
    }
}

/// The journal's files, each read and parsed.
fn scan() -> Vec<(PathBuf, std::result::Result<Entry, String>)> {
    [DIR, DURABLE_DIR]
        .iter()
        .filter_map(|dir| std::fs::read_dir(dir).ok())
        .flat_map(|dir| dir.flatten())
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .map(|path| {
            let parsed = std::fs::read_to_string(&path)
                .map_err(|e| e.to_string())
                .and_then(|text| serde_json::from_str(&text).map_err(|e| e.to_string()));
            (path, parsed)
        })
        .collect()
}

/// The journal's entries that cannot be read (see [`Unreadable`]).
pub fn unreadable() -> Vec<Unreadable> {
    let mut found: Vec<Unreadable> =
        scan().into_iter().filter_map(|(path, parsed)| parsed.err().map(|error| Unreadable { path, error })).collect();
    found.sort_by(|a, b| a.path.cmp(&b.path));
    found
}

/// Every readable entry in the journal, oldest first ([`unreadable`] lists
/// the others; they are never applied blindly).
pub fn entries() -> Vec<Entry> {
    let mut found: Vec<Entry> = scan().into_iter().filter_map(|(_, parsed)| parsed.ok()).collect();
    found.sort_by(|a, b| (a.time_unix_ms, &a.id).cmp(&(b.time_unix_ms, &b.id)));
    found.extend(abandoned_rt_lift());
    found.extend(abandoned_testbed());
    found.extend(abandoned_guests());
    found
}

/// The record of the guest an [`Object::LabGuest`] names.
fn lab_guest(object: &Object) -> Option<irqlab_lab::guest_group::GuestRecord> {
    let Object::LabGuest { pgid, .. } = object else { return None };
    irqlab_lab::guest_group::GuestRecord::all().into_iter().find(|g| g.pgid == *pgid)
}

/// Guests of `lab run`s that died and still run, as entries (records of
/// guests that ended with them are left for the next `revert --all`'s
/// `end`, which removes them; they are not shown).
fn abandoned_guests() -> Vec<Entry> {
    irqlab_lab::guest_group::GuestRecord::all()
        .into_iter()
        .filter(|g| !g.owner_alive() && g.running())
        .map(|g| Entry {
            id: format!("lab-guest-{}", g.pgid),
            object: Object::LabGuest { pgid: g.pgid, kernel: g.kernel.clone(), share: g.share.display().to_string() },
            old: Value::Text { text: "absent".into() },
            new: Value::Text { text: "running".into() },
            owner: Owner { pid: g.owner_pid, start_ticks: g.owner_start_ticks, command: format!("irqlab lab run --kernel {}", g.kernel) },
            time_unix_ms: 0,
            persistent: false,
        })
        .collect()
}

/// The testbed's value in the journal's words, one word per state, so
/// that an abandoned testbed reads back as the value irqlab set (not as
/// drifted): `absent`, `up`, or `half-made` (a killed `testbed up`).
fn testbed_state(layout: Option<&crate::testbed::Layout>) -> &'static str {
    match layout {
        None => "absent",
        Some(layout) if layout.complete => "up",
        Some(_) => "half-made",
    }
}

/// A testbed a killed run left behind, as an entry (its owner, being
/// dead, makes it a leftover: "up" is not "in use").
fn abandoned_testbed() -> Option<Entry> {
    let layout = crate::testbed::abandoned()?;
    let new = testbed_state(Some(&layout));
    Some(Entry {
        id: "testbed".into(),
        object: Object::Testbed,
        old: Value::Text { text: "absent".into() },
        new: Value::Text { text: new.into() },
        owner: Owner { pid: 0, start_ticks: 0, command: "irqlab (testbed user)".into() },
        time_unix_ms: 0,
        persistent: false,
    })
}

/// An RT-limit lift whose runs were all killed, as an entry (it lives in
/// `probe::rt_limit`'s own files, not in the journal's).
fn abandoned_rt_lift() -> Option<Entry> {
    let old = crate::rt_limit::abandoned_lift()?;
    Some(Entry {
        id: "rt-limit".into(),
        object: Object::RtLimit,
        old: Value::Text { text: old.to_string() },
        new: Value::Text { text: "-1".into() },
        owner: Owner { pid: 0, start_ticks: 0, command: "irqlab measure interference".into() },
        time_unix_ms: 0,
        persistent: false,
    })
}

/// Entries whose owner died without restoring them.
pub fn leftovers() -> Vec<Entry> {
    entries().into_iter().filter(|e| e.state() == State::Leftover).collect()
}

/// The exclusive lock of an object, held by whoever controls it.
struct ObjectLock {
    _file: File,
}

impl ObjectLock {
    fn acquire(object: &Object) -> Result<ObjectLock> {
        ensure_dir()?;
        let path = Path::new(DIR).join("locks").join(format!("{}.lock", object.key()));
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .read(true)
            .write(true)
            .open(&path)
            .map_err(|e| Error::io(format!("opening {}", path.display()), e))?;
        use std::os::fd::AsRawFd;
        // SAFETY: flock on a descriptor we own.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
            let holder = std::fs::read_to_string(&path).unwrap_or_default();
            return Err(Error::Invalid(format!(
                "{object} is already controlled by irqlab process {} (see `irqlab control status`)",
                holder.trim()
            )));
        }
        file.set_len(0)
            .and_then(|_| write!(file, "{}", std::process::id()))
            .map_err(|e| Error::io(format!("writing {}", path.display()), e))?;
        Ok(ObjectLock { _file: file })
    }
}

/// A change in force: restores the old value when dropped (or at exit),
/// then removes its entry. `persist` leaves it applied and recorded.
pub struct Applied {
    entry: Entry,
    restored: bool,
    _lock: ObjectLock,
    _at_exit: Registration,
}

impl std::fmt::Debug for Applied {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Applied").field("entry", &self.entry).finish()
    }
}

/// Records the change, then applies it. An entry left by a dead owner for
/// the same object is restored first (and said on stderr): its old value
/// is the object's real original.
pub fn apply(object: Object, new: Value) -> Result<Applied> {
    let lock = ObjectLock::acquire(&object)?;
    let mut old = read(&object)?;
    for stale in entries().into_iter().filter(|e| e.object == object && e.state() == State::Leftover) {
        eprintln!(
            "note: {} was left at {} by {} (killed); its value before that was {}",
            stale.object,
            stale.new,
            stale.owner.describe(),
            stale.old
        );
        old = stale.old.clone();
        let _ = std::fs::remove_file(stale.path());
    }
    let entry = Entry {
        id: format!("{}-{}-{}", now_unix_ms(), std::process::id(), object.key()),
        object,
        old,
        new,
        owner: Owner::this_process(),
        time_unix_ms: now_unix_ms(),
        persistent: false,
    };
    save(&entry)?;
    if let Err(e) = write(&entry.object, &entry.new) {
        // Nothing changed: nothing to remember.
        let _ = std::fs::remove_file(entry.path());
        return Err(e);
    }
    let at_exit = {
        let entry = entry.clone();
        cleanup::at_exit(move || {
            let _ = restore(&entry);
        })
    };
    Ok(Applied { entry, restored: false, _lock: lock, _at_exit: at_exit })
}

impl Applied {
    pub fn entry(&self) -> &Entry {
        &self.entry
    }

    /// Leaves the change applied and recorded as persistent.
    pub fn persist(mut self) -> Result<Entry> {
        self.entry.persistent = true;
        save(&self.entry)?;
        self.restored = true;
        Ok(self.entry.clone())
    }

    /// What the object holds now when something else changed it since it
    /// was set (drift: irqbalance moving an IRQ back), `None` while it
    /// holds what was set or is gone.
    pub fn drift(&self) -> Option<Value> {
        if !self.entry.object.exists() {
            return None;
        }
        read(&self.entry.object).ok().filter(|now| !now.same_setting(&self.entry.new))
    }

    /// Writes the value set again, over a drift (the entry, and so the
    /// value a restore puts back, is unchanged).
    pub fn set_again(&self) -> Result<()> {
        write(&self.entry.object, &self.entry.new)
    }

    /// Restores now, reporting what happened.
    pub fn restore(mut self) -> Result<Restored> {
        self.restored = true;
        let _busy = cleanup::busy();
        restore(&self.entry)
    }
}

impl Drop for Applied {
    fn drop(&mut self) {
        if !self.restored {
            let _busy = cleanup::busy();
            if let Err(e) = restore(&self.entry) {
                eprintln!("warning: {}: {e}; `irqlab control revert {}` tries again", self.entry.object, self.entry.id);
            }
        }
    }
}

/// What a restore did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Restored {
    /// The old value is back.
    Restored,
    /// The object is gone (the thread exited): nothing to restore.
    Gone,
}

/// Puts `entry`'s old value back (unless the object is gone) and removes
/// the entry. Idempotent.
/// Restores changes in the reverse order they were applied (the first
/// error is the result; the changes after it are still restored by their
/// guards' `Drop`).
pub fn restore_all(changes: Vec<Applied>) -> Result<()> {
    for applied in changes.into_iter().rev() {
        applied.restore()?;
    }
    Ok(())
}

pub fn restore(entry: &Entry) -> Result<Restored> {
    let release = deadline_release(entry);
    let outcome = if entry.object.exists() {
        write(&entry.object, &entry.old)?;
        Restored::Restored
    } else {
        Restored::Gone
    };
    // What follows a thread's restore is often a root domain's (the split
    // of `root_domain` is undone next): the kernel must have let the
    // thread's deadline bandwidth go first (`sched::deadline_release_bound`).
    if let Some(wait) = release {
        std::thread::sleep(wait);
    }
    let _ = std::fs::remove_file(entry.path());
    Ok(outcome)
}

/// How long to wait after restoring `entry` for the kernel to release a
/// SCHED_DEADLINE thread's bandwidth: a thread irqlab set to
/// SCHED_DEADLINE that goes back to another policy, or is gone. Its
/// setting now (a controller may have changed it) when it is still there.
fn deadline_release(entry: &Entry) -> Option<std::time::Duration> {
    let Object::ThreadSched { thread } = &entry.object else { return None };
    if matches!(entry.old, Value::Sched { attr: SchedAttr::Deadline { .. } }) {
        return None;
    }
    let now = if entry.object.exists() { sched::get(thread.tid).ok() } else { None };
    let set = match entry.new {
        Value::Sched { attr } => Some(attr),
        _ => None,
    };
    match now.or(set)? {
        SchedAttr::Deadline { runtime_ns, period_ns, .. } => Some(sched::deadline_release_bound(runtime_ns, period_ns)),
        _ => None,
    }
}

/// Restores a leftover or persistent entry by id; an entry whose owner is
/// alive is refused (it restores its own), and so is a persistent entry
/// someone changed since ([`Now::Drifted`]) unless `force`: putting the
/// old value back would undo their change too. A leftover is restored
/// even so: the controller that died may itself have moved the value
/// (a server switches its thread's priority).
pub fn revert(id: &str, force: bool) -> Result<(Entry, Restored)> {
    let entry = entries()
        .into_iter()
        .find(|e| e.id == id)
        .ok_or_else(|| Error::Invalid(format!("no control journal entry {id} (see `irqlab control status`)")))?;
    if entry.state() == State::Active {
        return Err(Error::Invalid(format!(
            "{} is controlled by irqlab process {}, which restores it when it ends (stop it with Ctrl-C or kill -TERM {})",
            entry.object, entry.owner.pid, entry.owner.pid
        )));
    }
    let _lock = ObjectLock::acquire(&entry.object)?;
    // Read the object only where its value decides: a persistent entry, unforced.
    if entry.state() == State::Persistent && !force {
        if let Now::Drifted { value, .. } = entry.now() {
            return Err(Error::Failed(format!(
                "{} ({}) drifted: irqlab set {}, it is now {value}; reverting puts back {} over that change (add --force to do it anyway)",
                entry.id, entry.object, entry.new, entry.old
            )));
        }
    }
    let outcome = restore(&entry)?;
    Ok((entry, outcome))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_compare_as_the_kernel_means_them() {
        let text = |t: &str| Value::Text { text: t.into() };
        // CPU masks: grouping and leading zeros do not matter.
        assert!(text("00000002").same_setting(&text("2")));
        assert!(text("0,00000002\n").same_setting(&text("2")));
        assert!(text("10,00000000,00000000,00000000").same_setting(&text("10000000000000000000000000")));
        assert!(text("0").same_setting(&text("00000000")));
        assert!(!text("2").same_setting(&text("3")));
        // Other text by its words.
        assert!(text("tbf rate 100Mbit  burst 3000b").same_setting(&text("tbf rate 100Mbit burst 3000b ")));
        assert!(!text("mq-deadline").same_setting(&text("bfq")));
        let cpus = |c: &[usize]| Value::Cpus { cpus: c.to_vec() };
        assert!(cpus(&[1, 0]).same_setting(&cpus(&[0, 1])));
        assert!(!cpus(&[1]).same_setting(&cpus(&[0, 1])));
    }

    #[test]
    fn root_qdisc_specs_read_back() {
        assert_eq!(root_qdisc_spec("qdisc noqueue 0: root refcnt 2 \n"), "default");
        assert_eq!(root_qdisc_spec(""), "default");
        assert_eq!(
            root_qdisc_spec("qdisc tbf 8001: root refcnt 2 rate 100Mbit burst 3000b lat 200ms \n"),
            "tbf rate 100Mbit burst 3000b lat 200ms"
        );
    }

    #[test]
    fn child_qdisc_specs_read_back() {
        let show = "qdisc tbf 8044: root refcnt 3 rate 100Mbit burst 3000b lat 200ms \n\
                    qdisc bfifo 0: parent 8044:1 limit 2503000b \n";
        assert_eq!(child_qdisc_spec(show, "8044:1").as_deref(), Some("bfifo limit 2503000b"));
        assert_eq!(child_qdisc_spec(show, "8045:1"), None);
        let show = "qdisc htb 1a: parent 8044:1 r2q 10 default 0x10 direct_packets_stat 0\n";
        assert_eq!(child_qdisc_spec(show, "8044:1").as_deref(), Some("handle 1a: htb r2q 10 default 0x10 direct_packets_stat 0"));
        assert!(has_qdisc("qdisc tbf 8044: root refcnt 3\n", "8044:1"));
        assert!(!has_qdisc("qdisc noqueue 0: root refcnt 2\n", "8044:1"));
    }

    #[test]
    fn entries_round_trip_through_json() {
        let e = Entry {
            id: "1-2-thread-3-4".into(),
            object: Object::ThreadSched { thread: Thread { tid: 3, comm: "napi/x-1".into(), start_ticks: 4 } },
            old: Value::Sched { attr: SchedAttr::Other { nice: 0 } },
            new: Value::Sched { attr: SchedAttr::Deadline { runtime_ns: 1, deadline_ns: 2, period_ns: 2 } },
            owner: Owner { pid: 1, start_ticks: 5, command: "irqlab control threads".into() },
            time_unix_ms: 7,
            persistent: false,
        };
        let text = serde_json::to_string(&e).unwrap();
        assert!(text.contains("\"kind\":\"thread-sched\"") && text.contains("\"policy\":\"deadline\""), "{text}");
        assert_eq!(serde_json::from_str::<Entry>(&text).unwrap(), e);
    }

    #[test]
    fn a_boot_file_is_journalled_where_a_reboot_keeps_it() {
        let e = Entry {
            id: "1-2-boot".into(),
            object: Object::BootFile { path: "/etc/default/grub.d/irqlab.cfg".into() },
            old: Value::Content { content: None },
            new: Value::Content { content: Some("GRUB_CMDLINE_LINUX=\"$GRUB_CMDLINE_LINUX nohz_full=1\"\n".into()) },
            owner: Owner { pid: 1, start_ticks: 5, command: "irqlab control apply --boot".into() },
            time_unix_ms: 7,
            persistent: true,
        };
        assert_eq!(e.path(), Path::new(DURABLE_DIR).join("1-2-boot.json"));
        assert_eq!(e.object.to_string(), "boot configuration /etc/default/grub.d/irqlab.cfg");
        assert_eq!(e.old.to_string(), "absent");
        assert_eq!(e.new.to_string(), "`GRUB_CMDLINE_LINUX=\"$GRUB_CMDLINE_LINUX nohz_full=1\"` (1 lines)");
        let text = serde_json::to_string(&e).unwrap();
        assert!(text.contains("\"kind\":\"boot-file\"") && text.contains("\"content\":null"), "{text}");
        assert_eq!(serde_json::from_str::<Entry>(&text).unwrap(), e);
        // Every other object's entry is this boot's.
        let irq = Object::IrqDefaultAffinity;
        assert_eq!(irq.journal_dir(), DIR);
    }

    #[test]
    fn v2_cgroup_objects_round_trip_and_name_themselves() {
        let process = Thread { tid: 1234, comm: "napi/irqlab-b-1".into(), start_ticks: 99 };
        for (object, kind, says) in [
            (Object::Cgroup2Member { process: process.clone() }, "cgroup2-member", "cgroup (v2) of napi/irqlab-b-1 (pid 1234)"),
            (Object::Cgroup2Thread { thread: process }, "cgroup2-thread", "cgroup (v2, threaded) of napi/irqlab-b-1 (tid 1234)"),
            (
                Object::Cgroup2Subtree { cgroup: "/sys/fs/cgroup".into(), controller: "cpuset".into() },
                "cgroup2-subtree",
                "cpuset for the children of cgroup /sys/fs/cgroup",
            ),
        ] {
            let text = serde_json::to_string(&object).unwrap();
            assert!(text.contains(&format!("\"kind\":\"{kind}\"")), "{text}");
            assert_eq!(serde_json::from_str::<Object>(&text).unwrap(), object);
            assert!(object.to_string().contains(says), "{object}");
        }
        // One lock per object: distinct keys for a thread's v1 and v2 memberships.
        let t = Thread { tid: 5, comm: "x".into(), start_ticks: 6 };
        assert_ne!(Object::Cgroup2Member { process: t.clone() }.key(), Object::Cgroup2Thread { thread: t.clone() }.key());
        assert_ne!(
            Object::Cgroup2Member { process: t.clone() }.key(),
            Object::CgroupMember { thread: t, controller: "cpuset".into() }.key()
        );
        // A value the subtree does not take is refused before anything is written.
        let subtree = Object::Cgroup2Subtree { cgroup: "/nonexistent".into(), controller: "io".into() };
        assert!(write(&subtree, &Value::Text { text: "on".into() }).unwrap_err().to_string().contains("cannot be set"));
    }

    #[test]
    fn debugfs_knob_objects_round_trip_and_name_themselves() {
        for (object, value, kind, says) in [
            (
                Object::SchedFeature { name: "HRTICK_DL".into() },
                Value::Text { text: "on".into() },
                "sched-feature",
                "scheduler feature HRTICK_DL",
            ),
            (
                Object::FairServer { cpu: 1 },
                Value::DlServer { runtime_ns: 0, period_ns: 1_000_000_000 },
                "fair-server",
                "fair server of CPU 1",
            ),
            (
                Object::DebugfsMount { path: "/sys/kernel/debug".into() },
                Value::Text { text: "mounted".into() },
                "debugfs-mount",
                "debugfs mount at /sys/kernel/debug",
            ),
        ] {
            let text = serde_json::to_string(&object).unwrap();
            assert!(text.contains(&format!("\"kind\":\"{kind}\"")), "{text}");
            assert_eq!(serde_json::from_str::<Object>(&text).unwrap(), object);
            assert_eq!(serde_json::from_str::<Value>(&serde_json::to_string(&value).unwrap()).unwrap(), value);
            assert!(object.to_string().contains(says), "{object}");
        }
        assert_eq!(Value::DlServer { runtime_ns: 50_000_000, period_ns: 1_000_000_000 }.to_string(), "runtime 50ms per 1s");
        // The mount's key sorts before the knobs' within one millisecond, so
        // `revert --all` (newest first) restores the knobs before unmounting.
        let mount = Object::DebugfsMount { path: "/sys/kernel/debug".into() }.key();
        assert!(mount < Object::SchedFeature { name: "A".into() }.key() && mount < Object::FairServer { cpu: 0 }.key());
    }

    #[test]
    fn the_selected_scheduler_is_the_bracketed_one() {
        assert_eq!(selected_scheduler("[none] mq-deadline kyber bfq\n").as_deref(), Some("none"));
        assert_eq!(selected_scheduler("none mq-deadline kyber [bfq]").as_deref(), Some("bfq"));
        assert_eq!(selected_scheduler("none bfq"), None);
    }

    #[test]
    fn an_owner_is_the_process_not_its_pid() {
        let me = Owner::this_process();
        assert!(me.alive());
        assert!(!Owner { start_ticks: me.start_ticks + 1, ..me.clone() }.alive());
    }
}
