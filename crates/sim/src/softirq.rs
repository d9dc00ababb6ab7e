//! Softirq execution models and the bottom-half policy hook.
//!
//! A [`SoftirqRun`] is one invocation of `__do_softirq` (or one pass of a
//! softirq thread): rounds over the pending vectors, each handler handing
//! out jobs (for NET_RX: one packet each, from NAPI polls within the
//! netdev budget). The same run can execute in softirq context on IRQ exit
//! or inside a task (ksoftirqd, a softirq thread). The [`SoftirqModel`]
//! decides whether another round starts; a [`BottomHalfPolicy`] may stop
//! a run before any job and leave the rest pending.

use crate::net::Packet;
use crate::task::TaskId;
use irqlab_analysis::Nanos;
use serde::Serialize;

/// Softirq vector numbers, as in Linux (bit positions in the pending mask).
pub const HI: u32 = 0;
pub const TIMER: u32 = 1;
pub const NET_TX: u32 = 2;
pub const NET_RX: u32 = 3;
pub const BLOCK: u32 = 4;
pub const TASKLET: u32 = 6;
pub const NR_VECTORS: usize = 10;

pub fn vector_name(v: u32) -> &'static str {
    match v {
        HI => "hi",
        TIMER => "timer",
        NET_TX => "net_tx",
        NET_RX => "net_rx",
        BLOCK => "block",
        TASKLET => "tasklet",
        _ => "other",
    }
}

/// What a run's round-end decision may look at.
#[derive(Debug, Clone, Copy)]
pub struct RoundInfo {
    pub now: Nanos,
    pub start: Nanos,
    /// Rounds completed in this invocation.
    pub rounds: u32,
    /// Vectors pending now.
    pub pending: u32,
    /// Linux 2.4: vectors not yet run in this invocation.
    pub not_yet_run: u32,
    pub need_resched: bool,
    /// Length of one jiffy.
    pub tick_ns: Nanos,
}

/// Budget of one `net_rx_action` call.
#[derive(Debug, Clone, Copy)]
pub struct NetRxBudget {
    pub packets: u32,
    /// Time limit as a number of jiffy boundaries after the start
    /// (Linux checks `jiffies`, so the limit is jiffy-granular).
    pub jiffies: u64,
}

/// How `__do_softirq` decides to restart, and the NET_RX budget.
pub trait SoftirqModel {
    fn name(&self) -> &'static str;
    /// After a round, with vectors still pending: run another round here
    /// (true) or stop and leave the rest to ksoftirqd (false)?
    fn restart(&self, r: &RoundInfo) -> bool;
    fn net_rx_budget(&self, tick_ns: Nanos) -> NetRxBudget;
    /// Softirqs run in their own threads (no softirq context at IRQ exit).
    fn threaded(&self) -> bool {
        false
    }
    /// PREEMPT_RT: a softirq raised in a (forced-threaded) IRQ handler runs
    /// in that handler's thread, at its priority, when the handler ends.
    fn runs_in_raising_thread(&self) -> bool {
        false
    }
}

/// Linux 2.4.20 `do_softirq`: restart only for vectors raised during the
/// invocation that had not been pending at its start (`mask`); the rest
/// waits for ksoftirqd. net_rx_action: netdev_max_backlog (300) packets
/// or `jiffies - start > 1`.
pub struct Linux24;
impl SoftirqModel for Linux24 {
    fn name(&self) -> &'static str {
        "linux-2.4"
    }
    fn restart(&self, r: &RoundInfo) -> bool {
        r.pending & r.not_yet_run != 0
    }
    fn net_rx_budget(&self, _tick_ns: Nanos) -> NetRxBudget {
        NetRxBudget { packets: 300, jiffies: 2 }
    }
}

/// Linux 2.6 `__do_softirq`: MAX_SOFTIRQ_RESTART = 10 rounds, then
/// ksoftirqd. net_rx_action: netdev_budget 300 or `jiffies - start > 1`.
pub struct Linux26;
pub const MAX_SOFTIRQ_RESTART: u32 = 10;
impl SoftirqModel for Linux26 {
    fn name(&self) -> &'static str {
        "linux-2.6"
    }
    fn restart(&self, r: &RoundInfo) -> bool {
        r.rounds < MAX_SOFTIRQ_RESTART
    }
    fn net_rx_budget(&self, _tick_ns: Nanos) -> NetRxBudget {
        NetRxBudget { packets: 300, jiffies: 2 }
    }
}

/// Current Linux: restart while under MAX_SOFTIRQ_TIME (2 ms, in jiffies),
/// under 10 rounds and no reschedule is pending. net_rx_action:
/// netdev_budget 300, netdev_budget_usecs 2000 (in jiffies, at least 1).
pub struct LinuxModern {
    pub budget_packets: u32,
    pub budget_ns: Nanos,
}
impl SoftirqModel for LinuxModern {
    fn name(&self) -> &'static str {
        "linux-modern"
    }
    fn restart(&self, r: &RoundInfo) -> bool {
        let end_jiffy = r.start / r.tick_ns + (2_000_000 / r.tick_ns).max(1);
        r.now / r.tick_ns < end_jiffy && !r.need_resched && r.rounds < MAX_SOFTIRQ_RESTART
    }
    fn net_rx_budget(&self, tick_ns: Nanos) -> NetRxBudget {
        NetRxBudget { packets: self.budget_packets, jiffies: self.budget_ns.div_ceil(tick_ns).max(1) }
    }
}

/// Threaded (PREEMPT_RT / Timesys / threaded NAPI): each softirq vector
/// has a thread that loops while its vectors are pending; IRQ handlers
/// run in per-line threads.
pub struct Threaded;
impl SoftirqModel for Threaded {
    fn name(&self) -> &'static str {
        "threaded"
    }
    fn restart(&self, _r: &RoundInfo) -> bool {
        true
    }
    fn net_rx_budget(&self, _tick_ns: Nanos) -> NetRxBudget {
        NetRxBudget { packets: 300, jiffies: 2 }
    }
    fn threaded(&self) -> bool {
        true
    }
}

/// PREEMPT_RT (6.1-rt, 6.12-rt): IRQ handlers forced into threads
/// (`force_irqthreads`); no softirq runs at IRQ exit. A softirq raised in
/// an IRQ thread runs at the end of its handler in that thread
/// (`irq_forced_thread_fn` → `local_bh_enable` → `__do_softirq`, with the
/// thread's priority), restarting as [`LinuxModern`] does; what is left,
/// and what is raised in hard IRQ context, goes to ksoftirqd
/// (`kernel/softirq.c` under `CONFIG_PREEMPT_RT`).
pub struct PreemptRt {
    pub budget_packets: u32,
    pub budget_ns: Nanos,
}
impl SoftirqModel for PreemptRt {
    fn name(&self) -> &'static str {
        "preempt-rt"
    }
    fn restart(&self, r: &RoundInfo) -> bool {
        LinuxModern { budget_packets: self.budget_packets, budget_ns: self.budget_ns }.restart(r)
    }
    fn net_rx_budget(&self, tick_ns: Nanos) -> NetRxBudget {
        LinuxModern { budget_packets: self.budget_packets, budget_ns: self.budget_ns }.net_rx_budget(tick_ns)
    }
    fn threaded(&self) -> bool {
        true
    }
    fn runs_in_raising_thread(&self) -> bool {
        true
    }
}

/// A device that NET_RX polls: a NAPI NIC or the per-CPU backlog.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PollDev {
    Nic(usize),
    Backlog,
}

/// One bottom-half job.
#[derive(Debug, Clone, Copy)]
pub enum JobWhat {
    Packet {
        from: PollDev,
        pkt: Packet,
    },
    /// A device-defined job (disk completion, ...): `token` goes back to
    /// the device's `bh_done`.
    Device {
        dev: usize,
        token: u64,
    },
}

#[derive(Debug, Clone, Copy)]
pub struct Job {
    pub vector: u32,
    pub cost: Nanos,
    pub what: JobWhat,
    /// The task this work is for, when known (socket owner).
    pub owner: Option<TaskId>,
}

#[derive(Debug, Clone, Copy)]
pub enum Handler {
    NetRx {
        budget: i64,
        /// The time net_rx_action's jiffy limit is reached.
        limit_ns: Nanos,
        quota: i64,
    },
    /// Runs the queued jobs of a vector until its queue is empty.
    Queue { vector: u32 },
}

/// Where a run executes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Loc {
    /// Softirq context on IRQ exit.
    Cpu,
    /// Inside a task: ksoftirqd or a softirq thread.
    Task(TaskId),
}

/// One `__do_softirq` invocation in progress.
#[derive(Debug, Clone)]
pub struct SoftirqRun {
    pub start: Nanos,
    pub rounds: u32,
    /// Vectors still to run in the current round.
    pub round_left: u32,
    pub not_yet_run: u32,
    /// Vectors this location serves.
    pub serves: u32,
    pub handler: Option<Handler>,
    pub job: Option<Job>,
    /// Remaining cost of the job (softirq context; in a task, the task's
    /// chunk holds it).
    pub job_left: Nanos,
}

impl SoftirqRun {
    pub fn new(start: Nanos, serves: u32) -> Self {
        SoftirqRun { start, rounds: 0, round_left: 0, not_yet_run: u32::MAX, serves, handler: None, job: None, job_left: 0 }
    }
}

/// A policy's answer before a bottom-half job starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admit {
    Run,
    /// Stop this run here: the job stays at the head of its queue and its
    /// vector stays pending. `wake_ksoftirqd` hands the rest to ksoftirqd
    /// now; otherwise it waits for the next activation.
    Defer {
        wake_ksoftirqd: bool,
    },
}

/// The plug point for bottom-half policies (BH-threshold controller,
/// process-aware bottom halves). Every method has the vanilla behaviour as
/// default; a policy overrides what it changes. Hooks get the simulator
/// read-only (decisions) or mutably (accounting at ticks).
pub trait BottomHalfPolicy {
    fn name(&self) -> &'static str;
    /// Before each job starts, wherever it runs.
    fn admit(&mut self, _sim: &crate::kernel::Sim, _loc: Loc, _job: &Job) -> Admit {
        Admit::Run
    }
    /// After each job finished; `cost` is its full cost.
    fn job_done(&mut self, _sim: &crate::kernel::Sim, _loc: Loc, _job: &Job) {}
    /// On IRQ exit with softirqs pending: run them now in softirq context
    /// (vanilla), or leave them pending for a later point?
    fn run_on_irq_exit(&mut self, _sim: &crate::kernel::Sim) -> bool {
        true
    }
    /// Before the scheduler switches to `next`: run pending bottom halves
    /// first (in softirq context)? Vanilla never does.
    fn run_before_switch(&mut self, _sim: &crate::kernel::Sim, _next: Option<TaskId>) -> bool {
        false
    }
    /// At each timer tick, after the scheduler tick (accounting fixes).
    fn on_tick(&mut self, _sim: &mut crate::kernel::Sim) {}
    /// Policy-specific results for the JSON.
    fn report(&self) -> Option<serde_json::Value> {
        None
    }
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct SoftirqStats {
    /// Invocations in softirq context (IRQ exit).
    pub irq_exit_runs: u64,
    /// Runs in ksoftirqd or softirq threads.
    pub thread_runs: u64,
    pub max_rounds: u32,
    pub ksoftirqd_wakeups: u64,
    /// Rounds completed by each softirq-context run that woke ksoftirqd
    /// (min and max over the run): 10 under linux-2.6 when the restart
    /// limit is what ends the run.
    pub handoff_rounds_min: Option<u32>,
    pub handoff_rounds_max: Option<u32>,
    pub jobs: u64,
    pub deferred_by_policy: u64,
    /// IRQ exits that left pending softirqs to a runnable ksoftirqd
    /// (`linux-6.1`'s "let ksoftirqd do its job").
    pub left_to_running_ksoftirqd: u64,
    pub per_vector_ns: std::collections::BTreeMap<String, Nanos>,
}
