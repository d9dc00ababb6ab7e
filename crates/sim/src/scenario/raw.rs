//! The scenario file as serde reads it: every value spanned, strings not
//! yet interpreted. [`super::validate`] turns it into the typed [`super::spec::Spec`].

use serde::Deserialize;
use std::collections::BTreeMap;
use toml::Spanned;

pub(super) type Dur = Spanned<String>;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Raw {
    pub(super) name: Option<String>,
    pub(super) description: Option<String>,
    pub(super) machine: Spanned<RawMachine>,
    pub(super) nic: Option<Spanned<RawNic>>,
    pub(super) disk: Option<Spanned<RawDisk>>,
    #[serde(default)]
    pub(super) threads: BTreeMap<String, Spanned<RawThread>>,
    #[serde(default)]
    pub(super) irq: Vec<Spanned<RawIrq>>,
    #[serde(default)]
    pub(super) socket: Vec<Spanned<RawSocket>>,
    #[serde(default)]
    pub(super) task: Vec<Spanned<RawTask>>,
    #[serde(default)]
    pub(super) traffic: Vec<Spanned<RawTraffic>>,
    pub(super) policy: Option<Spanned<toml::Table>>,
    pub(super) run: Spanned<RawRun>,
    #[serde(default)]
    pub(super) metric: Vec<Spanned<RawMetric>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawMachine {
    pub(super) hz: Spanned<u32>,
    pub(super) cores: Option<Spanned<u32>>,
    /// A kernel preset (`linux-6.1`, `linux-6.12`): the version's own
    /// mechanisms on top of the `linux-modern` softirq loop.
    pub(super) kernel: Option<Spanned<String>>,
    pub(super) softirq: Option<Spanned<String>>,
    pub(super) scheduler: Option<Spanned<String>>,
    pub(super) ksoftirqd_nice: Option<Spanned<i64>>,
    pub(super) irq_time_accounting: Option<bool>,
    pub(super) netdev_max_backlog: Option<Spanned<u64>>,
    pub(super) netdev_budget: Option<Spanned<u64>>,
    pub(super) netdev_budget_usecs: Option<Dur>,
    pub(super) costs: Spanned<RawCosts>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawCosts {
    pub(super) irq_entry: Dur,
    pub(super) irq_exit: Dur,
    pub(super) tick: Dur,
    pub(super) context_switch: Dur,
    pub(super) irq_primary: Option<Dur>,
    /// hrtimer interrupt handler per sleeping task's timer expiry; omitted,
    /// expiries cost nothing (see [`MachineConfig::hrtimer`]).
    pub(super) hrtimer: Option<Dur>,
    /// The function-call IPI's handler (RPS: it schedules the backlog).
    pub(super) ipi: Option<Dur>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawNic {
    pub(super) name: Option<String>,
    pub(super) ring: Option<Spanned<u64>>,
    pub(super) napi: bool,
    pub(super) weight: Option<Spanned<u64>>,
    pub(super) coalesce_frames: Option<Spanned<u64>>,
    pub(super) coalesce_usecs: Option<Dur>,
    /// The CPU its interrupt is routed to (smp_affinity).
    pub(super) cpu: Option<Spanned<u64>>,
    /// RPS: the CPU whose backlog gets the received packets.
    pub(super) rps_cpu: Option<Spanned<u64>>,
    /// Threaded NAPI (`/sys/class/net/DEV/threaded`), and its thread's CPU.
    pub(super) threaded: Option<Spanned<bool>>,
    pub(super) napi_cpu: Option<Spanned<u64>>,
    pub(super) costs: Spanned<RawNicCosts>,
    /// The transmit side; without it replies cost only their share of
    /// `icmp_echo` and are never queued.
    pub(super) tx: Option<Spanned<RawNicTx>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawNicTx {
    /// txqueuelen (Linux default 1000).
    pub(super) queue: Option<Spanned<u64>>,
    pub(super) link: Option<Spanned<String>>,
    pub(super) irq: Dur,
    pub(super) complete: Dur,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawNicCosts {
    pub(super) irq: Dur,
    pub(super) irq_per_packet: Option<Dur>,
    pub(super) icmp_echo: Dur,
    pub(super) icmp_no_reply: Option<Dur>,
    pub(super) udp: Dur,
    pub(super) rps_enqueue: Option<Dur>,
}

/// `[disk]`: the drive (defaults: the idletime dissertation's WD Caviar
/// AC28200, see [`crate::disk::DiskGeometry`]) and its completion costs.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawDisk {
    pub(super) name: Option<String>,
    pub(super) rpm: Option<Spanned<f64>>,
    pub(super) seek_min: Option<Dur>,
    pub(super) seek_full: Option<Dur>,
    pub(super) overhead: Option<Dur>,
    pub(super) sectors_per_track: Option<Spanned<u64>>,
    pub(super) costs: Spanned<RawDiskCosts>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawDiskCosts {
    pub(super) irq: Dur,
    pub(super) block_softirq: Dur,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawThread {
    pub(super) policy: Spanned<String>,
    pub(super) priority: Option<Spanned<i64>>,
    pub(super) nice: Option<Spanned<i64>>,
    pub(super) runtime: Option<Dur>,
    pub(super) deadline: Option<Dur>,
    pub(super) period: Option<Dur>,
    pub(super) server: Option<Spanned<RawServer>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawIrq {
    pub(super) name: Spanned<String>,
    pub(super) interval: Dur,
    pub(super) poisson: Option<bool>,
    pub(super) handler: Dur,
    pub(super) bottom_half: Option<Dur>,
    pub(super) vector: Option<Spanned<String>>,
    /// The CPU its interrupt is routed to (`/proc/irq/N/smp_affinity_list`).
    pub(super) cpu: Option<Spanned<u64>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawSocket {
    pub(super) name: Spanned<String>,
    pub(super) rcvbuf: Spanned<u64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawServer {
    pub(super) kind: Spanned<String>,
    pub(super) budget: Dur,
    pub(super) period: Dur,
    pub(super) max_repl: Option<Spanned<u64>>,
    pub(super) low_priority: Option<Spanned<i64>>,
    pub(super) granularity: Option<Dur>,
    /// "exact" (default) or "tick" (charged by sampling the timer tick).
    pub(super) accounting: Option<Spanned<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawTask {
    pub(super) name: Spanned<String>,
    pub(super) kind: Spanned<String>,
    pub(super) cpu: Option<Spanned<u64>>,
    pub(super) policy: Option<Spanned<String>>,
    pub(super) priority: Option<Spanned<i64>>,
    pub(super) nice: Option<Spanned<i64>>,
    pub(super) runtime: Option<Dur>,
    pub(super) deadline: Option<Dur>,
    pub(super) period: Option<Dur>,
    pub(super) offset: Option<Dur>,
    pub(super) exec: Option<Dur>,
    pub(super) exec_max: Option<Dur>,
    pub(super) exec_dist: Option<Spanned<String>>,
    pub(super) jobs: Option<u64>,
    pub(super) poll: Option<Spanned<String>>,
    pub(super) socket: Option<Spanned<String>>,
    pub(super) recv_cost: Option<Dur>,
    pub(super) user_cost: Option<Dur>,
    pub(super) run: Option<Dur>,
    pub(super) sleep: Option<Dur>,
    pub(super) frames: Option<u64>,
    /// media-player: kernel time per frame (system calls to read and show it).
    pub(super) kernel_cost: Option<Dur>,
    pub(super) keep_frames: Option<bool>,
    pub(super) server: Option<Spanned<RawServer>>,
    pub(super) pattern: Option<Spanned<String>>,
    pub(super) intensity: Option<Spanned<f64>>,
    pub(super) block: Option<Spanned<u64>>,
    pub(super) issue_cost: Option<Dur>,
    pub(super) reply_size: Option<Spanned<u64>>,
    pub(super) send_cost: Option<Dur>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawTraffic {
    pub(super) kind: Spanned<String>,
    pub(super) name: Option<String>,
    pub(super) interval: Option<Dur>,
    pub(super) size: Option<Spanned<u64>>,
    pub(super) link: Option<Spanned<String>>,
    pub(super) socket: Option<Spanned<String>>,
    pub(super) reply: Option<bool>,
    pub(super) start: Option<Dur>,
    pub(super) stop: Option<Dur>,
    pub(super) burst: Option<Spanned<f64>>,
    pub(super) spacing: Option<Dur>,
    pub(super) gap: Option<Dur>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawRun {
    pub(super) duration: Dur,
    pub(super) seed: Option<u64>,
    pub(super) warmup: Option<Dur>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawMetric {
    pub(super) kind: Spanned<String>,
    pub(super) interval: Option<Dur>,
    pub(super) task: Option<Spanned<String>>,
    pub(super) windows: Option<Vec<Dur>>,
    pub(super) from: Option<Dur>,
    pub(super) to: Option<Dur>,
    pub(super) points: Option<Spanned<u64>>,
}
