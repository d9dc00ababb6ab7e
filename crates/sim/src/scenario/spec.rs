//! The validated scenario: every duration, rate and count as a typed
//! value, every kind as an enum variant carrying only its own fields.
//! [`super::validate`] makes it from the file; [`super::build`] makes a
//! simulator from it; sweeps (the reproductions) change its fields.
//!
//! `at` fields are the byte spans in the file that the build's remaining
//! checks (names that must exist or be unique, the bottom-half policy)
//! point at; a value made in code has an empty span.

use crate::net::{Arrivals, NicCosts};
use crate::sched::FairKind;
use crate::server::Accounting;
use crate::task::Policy;
use crate::workload::{Dist, ReadPattern};
use irqlab_analysis::Nanos;
use std::ops::Range;

/// A byte span of the scenario file.
pub type Span = Range<usize>;

#[derive(Debug, Clone)]
pub struct Spec {
    pub name: Option<String>,
    pub description: Option<String>,
    pub machine: MachineSpec,
    pub nic: Option<NicSpec>,
    pub disk: Option<DiskSpec>,
    pub threads: ThreadsSpec,
    pub irqs: Vec<IrqSpec>,
    pub sockets: Vec<SocketSpec>,
    pub tasks: Vec<TaskSpec>,
    pub traffic: Vec<TrafficSpec>,
    pub policy: Option<PolicySpec>,
    pub run: RunSpec,
    pub metrics: Vec<MetricSpec>,
}

impl Spec {
    /// Declares (as `[[socket]]` would) every socket traffic is sent to
    /// that no task reads: for a variant that removes a reader on purpose,
    /// so the build's check that sent-to sockets are read or declared
    /// passes.
    pub fn declare_unread_sockets(&mut self) {
        let mut unread: Vec<String> = self
            .traffic
            .iter()
            .filter_map(|t| match &t.proto {
                TrafficProto::Udp { socket } => Some(socket.name.clone()),
                TrafficProto::IcmpEcho { .. } => None,
            })
            .filter(|name| !self.tasks.iter().any(|t| t.work.read_socket().is_some_and(|s| &s.name == name)))
            .filter(|name| !self.sockets.iter().any(|s| &s.name == name))
            .collect();
        unread.sort_unstable();
        unread.dedup();
        self.sockets.extend(unread.into_iter().map(|name| SocketSpec { name, rcvbuf: DEFAULT_RCVBUF }));
    }

    pub fn task(&self, name: &str) -> Option<&TaskSpec> {
        self.tasks.iter().find(|t| t.name == name)
    }

    pub fn task_mut(&mut self, name: &str) -> Option<&mut TaskSpec> {
        self.tasks.iter_mut().find(|t| t.name == name)
    }
}

/// The softirq model of `[machine] softirq`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SoftirqKind {
    Linux24,
    Linux26,
    /// With `netdev_budget` packets and `netdev_budget_usecs` per round.
    LinuxModern {
        budget_packets: u32,
        budget_ns: Nanos,
    },
    Threaded,
    /// The PREEMPT_RT presets' model ([`crate::softirq::PreemptRt`]).
    PreemptRt {
        budget_packets: u32,
        budget_ns: Nanos,
    },
}

impl SoftirqKind {
    /// IRQ handlers run in threads (one per line).
    pub fn threads_irqs(self) -> bool {
        matches!(self, SoftirqKind::Threaded | SoftirqKind::PreemptRt { .. })
    }
}

/// `[machine] kernel`: the mechanisms a kernel version has beyond the
/// `linux-modern` softirq loop (`docs/sim-multicore.md` cites the source
/// of each).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KernelPreset {
    /// Linux 6.1: "softirq: Let ksoftirqd do its job" (4.9 to its revert
    /// in 6.5): no softirq on IRQ exit while ksoftirqd is runnable.
    Linux61,
    /// Linux 6.12: that deferral reverted (6.5, d15121be7485).
    Linux612,
    /// Their PREEMPT_RT builds (Debian's `-rt` kernels): forced-threaded
    /// IRQ handlers, softirqs in the thread that raised them.
    Linux61Rt,
    Linux612Rt,
}

impl KernelPreset {
    pub fn name(self) -> &'static str {
        match self {
            KernelPreset::Linux61 => "linux-6.1",
            KernelPreset::Linux612 => "linux-6.12",
            KernelPreset::Linux61Rt => "linux-6.1-rt",
            KernelPreset::Linux612Rt => "linux-6.12-rt",
        }
    }

    pub const ALL: [KernelPreset; 4] = [KernelPreset::Linux61, KernelPreset::Linux612, KernelPreset::Linux61Rt, KernelPreset::Linux612Rt];

    pub fn preempt_rt(self) -> bool {
        matches!(self, KernelPreset::Linux61Rt | KernelPreset::Linux612Rt)
    }

    /// The softirq model, with `netdev_budget` packets and
    /// `netdev_budget_usecs` per NET_RX run.
    pub fn softirq(self, budget_packets: u32, budget_ns: Nanos) -> SoftirqKind {
        if self.preempt_rt() {
            SoftirqKind::PreemptRt { budget_packets, budget_ns }
        } else {
            SoftirqKind::LinuxModern { budget_packets, budget_ns }
        }
    }

    /// Whether IRQ exit leaves softirqs to a runnable ksoftirqd.
    pub fn defers_to_running_ksoftirqd(self) -> bool {
        self == KernelPreset::Linux61
    }

    /// How the version keeps RT tasks from starving fair ones: RT
    /// throttling on 6.1, the fair server on 6.12.
    pub fn bandwidth(self) -> crate::sched::bandwidth::Bandwidth {
        match self {
            KernelPreset::Linux61 | KernelPreset::Linux61Rt => crate::sched::bandwidth::Bandwidth::rt_throttle(),
            KernelPreset::Linux612 | KernelPreset::Linux612Rt => crate::sched::bandwidth::Bandwidth::fair_server(),
        }
    }
}

#[derive(Debug, Clone)]
pub struct MachineSpec {
    pub hz: u32,
    /// CPUs simulated; tasks and interrupts name theirs (`cpu`).
    pub cores: usize,
    pub kernel: Option<KernelPreset>,
    pub softirq: SoftirqKind,
    pub scheduler: FairKind,
    pub ksoftirqd_nice: i8,
    pub irq_entry: Nanos,
    pub irq_exit: Nanos,
    pub tick: Nanos,
    pub context_switch: Nanos,
    pub irq_primary: Nanos,
    pub hrtimer: Option<Nanos>,
    /// The function-call IPI's handler (x86 `sysvec_call_function_single`).
    pub ipi: Nanos,
    pub irq_time_accounting: bool,
    pub netdev_max_backlog: usize,
}

#[derive(Debug, Clone)]
pub struct NicSpec {
    pub name: String,
    pub ring: usize,
    pub napi: bool,
    pub weight: u32,
    pub coalesce_frames: u32,
    pub coalesce_ns: Nanos,
    /// The CPU its interrupt goes to.
    pub cpu: usize,
    /// RPS: the CPU whose backlog takes its packets (None: no RPS).
    pub rps_cpu: Option<usize>,
    /// Threaded NAPI: the CPU its kernel thread is pinned to (None:
    /// NAPI polls in NET_RX).
    pub napi_thread_cpu: Option<usize>,
    pub costs: NicCosts,
    pub tx: Option<NicTxSpec>,
}

impl NicSpec {
    /// The CPU that runs the protocol for its packets (and so wakes
    /// their readers): RPS's target, else the interrupt's CPU.
    pub fn protocol_cpu(&self) -> usize {
        self.rps_cpu.unwrap_or(self.ring_cpu())
    }

    /// The CPU that polls its ring: its NAPI thread's, else the interrupt's.
    pub fn ring_cpu(&self) -> usize {
        self.napi_thread_cpu.unwrap_or(self.cpu)
    }
}

#[derive(Debug, Clone)]
pub struct NicTxSpec {
    pub queue: usize,
    /// Bits per second.
    pub link: u64,
    pub costs: crate::net_tx::TxCosts,
}

#[derive(Debug, Clone)]
pub struct DiskSpec {
    pub name: String,
    pub geometry: crate::disk::DiskGeometry,
    pub costs: crate::disk::DiskCosts,
}

/// Scheduling of a task or kernel thread: its policy and the bandwidth
/// server that governs it, if any.
#[derive(Debug, Clone)]
pub struct SchedSpec {
    pub policy: Policy,
    pub server: Option<ServerSpec>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServerSpec {
    Sporadic {
        budget: Nanos,
        period: Nanos,
        /// Fifo priority out of budget (None: suspended).
        low_priority: Option<u8>,
        max_repl: usize,
        accounting: Accounting,
    },
    Polling {
        budget: Nanos,
        period: Nanos,
    },
    Deferrable {
        budget: Nanos,
        period: Nanos,
    },
}

/// `[threads.*]`: the kernel threads whose scheduling a scenario sets.
#[derive(Debug, Clone, Default)]
pub struct ThreadsSpec {
    pub ksoftirqd: Option<SchedSpec>,
    pub net_rx: Option<SchedSpec>,
    pub net_tx: Option<SchedSpec>,
    pub nic_irq: Option<SchedSpec>,
    /// Threaded NAPI's thread (SCHED_OTHER by default, as the kernel makes it).
    pub napi: Option<SchedSpec>,
}

#[derive(Debug, Clone)]
pub struct IrqSpec {
    pub name: String,
    pub interval: Nanos,
    pub poisson: bool,
    pub handler: Nanos,
    pub bottom_half: Nanos,
    /// Softirq vector number ([`crate::softirq`]).
    pub vector: u32,
    /// The CPU it interrupts (default 0).
    pub cpu: usize,
}

#[derive(Debug, Clone)]
pub struct SocketSpec {
    pub name: String,
    pub rcvbuf: u64,
}

/// The receive buffer of a socket no [[socket]] sizes: Linux's default
/// `net.core.rmem_default`.
pub const DEFAULT_RCVBUF: u64 = 212_992;

#[derive(Debug, Clone)]
pub struct TaskSpec {
    pub name: String,
    /// The CPU it is pinned to (no load balancer is modelled).
    pub cpu: usize,
    pub sched: SchedSpec,
    pub work: Work,
    /// The span of the name (for a name used twice).
    pub at: Span,
}

/// What a task does: one variant per task kind.
#[derive(Debug, Clone)]
pub enum Work {
    Periodic(PeriodicSpec),
    CpuLoop(LoopSpec),
    /// A CPU loop whose progress is the interference probe.
    Probe(LoopSpec),
    UdpServer(UdpServerSpec),
    MediaPlayer(MediaPlayerSpec),
    DiskReader(DiskReaderSpec),
}

impl Work {
    /// The socket a task of this kind reads, if any.
    pub fn read_socket(&self) -> Option<&SocketRef> {
        match self {
            Work::Periodic(p) => p.poll.as_ref(),
            Work::UdpServer(u) => Some(&u.socket),
            _ => None,
        }
    }
}

/// A socket a task reads, with where the file names it.
#[derive(Debug, Clone)]
pub struct SocketRef {
    pub name: String,
    pub at: Span,
}

impl SocketRef {
    pub fn new(name: impl Into<String>) -> Self {
        SocketRef { name: name.into(), at: 0..0 }
    }
}

#[derive(Debug, Clone)]
pub struct PeriodicSpec {
    pub period: Nanos,
    pub offset: Nanos,
    pub deadline: Nanos,
    pub exec: Dist,
    pub jobs: Option<u64>,
    /// One non-blocking receive per job, and its cost.
    pub poll: Option<SocketRef>,
    pub recv_cost: Nanos,
}

#[derive(Debug, Clone, Default)]
pub struct LoopSpec {
    /// Run, then sleep; None: always runnable.
    pub phases: Option<(Nanos, Nanos)>,
}

#[derive(Debug, Clone)]
pub struct UdpServerSpec {
    pub socket: SocketRef,
    pub recv_cost: Nanos,
    pub user_cost: Nanos,
    /// Reply size in bytes and the send cost.
    pub reply: Option<(u32, Nanos)>,
}

#[derive(Debug, Clone)]
pub struct MediaPlayerSpec {
    pub period: Nanos,
    pub exec: Dist,
    pub frames: u64,
    pub keep_frames: bool,
    /// Kernel time per frame (system time), after decoding.
    pub kernel_cost: Nanos,
}

#[derive(Debug, Clone)]
pub struct DiskReaderSpec {
    pub pattern: ReadPattern,
    pub intensity: f64,
    /// Read size in 512-byte sectors.
    pub block_sectors: u64,
    pub issue_cost: Nanos,
}

/// The `kind` of a `[[traffic]]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TrafficKind {
    PingFlood,
    Heartbeat,
    Constant,
    Poisson,
    Mmpp2,
}

#[derive(Debug, Clone)]
pub struct TrafficSpec {
    pub kind: TrafficKind,
    pub name: String,
    pub size: u32,
    /// Bits per second.
    pub link: u64,
    pub start: Nanos,
    pub stop: Nanos,
    pub arrivals: Arrivals,
    pub proto: TrafficProto,
}

#[derive(Debug, Clone)]
pub enum TrafficProto {
    IcmpEcho { reply: bool },
    Udp { socket: SocketRef },
}

#[derive(Debug, Clone)]
pub struct PolicySpec {
    pub bottom_half: String,
    /// The policy's own parameters (checked by the policy).
    pub params: toml::Table,
    pub at: Span,
}

#[derive(Debug, Clone)]
pub struct RunSpec {
    pub duration: Nanos,
    pub seed: Option<u64>,
    pub warmup: Nanos,
    /// Where a warm-up too long for an overridden duration is reported.
    pub warmup_at: Span,
}

#[derive(Debug, Clone)]
pub enum MetricSpec {
    BhTime { interval: Nanos },
    Probe { task: String, windows: Vec<Nanos>, at: Span },
}
