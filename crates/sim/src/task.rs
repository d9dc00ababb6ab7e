//! Tasks: scheduling policy, run state, per-task accounting, and the
//! [`Behavior`] trait through which a workload tells the kernel what it does
//! next.

use crate::metrics::Histogram;
use irqlab_analysis::Nanos;
use serde::Serialize;

pub type TaskId = usize;

/// The Linux scheduling policy of a task (`sched_setscheduler`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Policy {
    /// SCHED_FIFO, priority 1..=99 (higher wins).
    Fifo(u8),
    /// SCHED_RR, priority 1..=99, round-robin slice among equals.
    Rr(u8),
    /// SCHED_OTHER with a nice value (-20..=19), in the fair class.
    Other(i8),
    /// SCHED_IDLE: in the fair class with the minimal weight (3), as Linux.
    Idle,
    /// SCHED_DEADLINE: constant-bandwidth server (runtime, deadline, period).
    Deadline { runtime: Nanos, deadline: Nanos, period: Nanos },
}

impl Policy {
    /// The priority an RT policy runs at, if it is one.
    pub fn rt_priority(self) -> Option<u8> {
        match self {
            Policy::Fifo(p) | Policy::Rr(p) => Some(p),
            _ => None,
        }
    }

    /// A single comparable rank for "who is more important" questions asked
    /// by policies (process-aware bottom halves): deadline > RT prio > fair.
    pub fn rank(self) -> i32 {
        match self {
            Policy::Deadline { .. } => 200,
            Policy::Fifo(p) | Policy::Rr(p) => 100 + p as i32,
            Policy::Other(nice) => 20 - nice as i32 - 40, // -60..-21: below every RT
            Policy::Idle => -100,
        }
    }
}

/// What a task does next, decided by its [`Behavior`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Compute for this long in user mode.
    User(Nanos),
    /// Compute for this long in kernel mode (a system call's work).
    Kernel(Nanos),
    /// Sleep until this absolute time (clock_nanosleep TIMER_ABSTIME).
    SleepUntil(Nanos),
    /// Blocking receive on a socket: if it holds a packet, the packet is
    /// consumed and the behavior is asked again with `received = true`;
    /// otherwise the task blocks until a packet arrives.
    Recv(usize),
    /// Blocking read of `sectors` 512-byte sectors at `sector` from device
    /// `dev` (a disk): the task blocks until the request's completion
    /// (hard IRQ, then the BLOCK bottom half) wakes it.
    Read { dev: usize, sector: u64, sectors: u64 },
    /// Hand a frame of `size` bytes to device `dev`'s transmit queue (the
    /// end of a UDP send; its syscall cost is a `Kernel` step before it).
    /// Takes no time; a full queue drops the frame (counted there).
    Send { dev: usize, size: u32 },
    /// The task is finished for the rest of the run.
    Exit,
}

/// What the kernel tells a behavior when it asks for the next step.
pub struct StepCtx<'a> {
    pub now: Nanos,
    /// The task's own id.
    pub task: TaskId,
    /// `Some(true)` right after a `Recv` consumed a packet.
    pub received: bool,
    /// Non-blocking access to the sockets (try_recv).
    pub sockets: &'a mut [crate::net::Socket],
    /// The task's job statistics (response times, misses) to record into.
    pub jobs: &'a mut JobStats,
}

/// A workload: a state machine asked for its next [`Step`] each time its
/// previous step finished. Implementations live in [`crate::workload`];
/// add a new workload by implementing this trait and a `kind` in the
/// scenario parser.
pub trait Behavior {
    fn next(&mut self, ctx: &mut StepCtx) -> Step;
    /// Extra per-task results in the JSON (e.g. frames, heartbeats).
    fn extra(&self) -> Option<serde_json::Value> {
        None
    }
    /// Statistics restart at the end of the warm-up: zero the counters
    /// that `extra` reports.
    fn reset_stats(&mut self) {}
    /// The run ends at `now`: count what is still unfinished (a periodic
    /// job whose deadline passed before the end is a miss).
    fn finish(&mut self, _now: irqlab_analysis::Nanos, _jobs: &mut JobStats) {}
}

/// Kernel threads whose steps the kernel itself decides.
pub enum TaskKind {
    User(Box<dyn Behavior>),
    /// ksoftirqd: runs pending softirqs the interrupt path handed off.
    Ksoftirqd,
    /// A softirq thread (threaded model: net-rx, net-tx, ...) serving the
    /// vectors in the mask.
    SoftirqThread {
        vectors: u32,
    },
    /// A threaded IRQ handler for one line.
    IrqThread {
        line: usize,
    },
    /// Threaded NAPI's kernel thread of one NIC (`napi/DEV-N`): polls it
    /// in task context instead of NET_RX.
    NapiThread {
        nic: usize,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunState {
    Running,
    Runnable,
    Sleeping,
    Blocked,
    Exited,
}

/// Per-task job statistics (periodic tasks, players).
#[derive(Debug, Clone, Default)]
pub struct JobStats {
    pub jobs: u64,
    pub deadline_misses: u64,
    pub response: Histogram,
}

/// Time accounting of one task.
#[derive(Debug, Clone, Default, Serialize)]
pub struct TaskAccounting {
    /// True time the task executed (user + kernel mode), interrupt
    /// contexts excluded: `cpu_time::TaskTime::run_ns`.
    pub run_ns: Nanos,
    pub user_ns: Nanos,
    pub system_ns: Nanos,
    /// Hard-IRQ time that ran while this task was current.
    pub stolen_hardirq_ns: Nanos,
    /// Softirq-context time that ran while this task was current.
    pub stolen_softirq_ns: Nanos,
    /// Tick-sampled user time, as /proc/pid/stat utime.
    pub charged_utime_ns: Nanos,
    /// Tick-sampled system time, as /proc/pid/stat stime (includes ticks
    /// that hit IRQ/softirq context while the task was current, unless the
    /// machine has irq_time_accounting).
    pub charged_stime_ns: Nanos,
    /// Bottom-half work done inside this task (ksoftirqd, threads).
    pub bh_work_ns: Nanos,
    pub context_switches_in: u64,
    pub preemptions: u64,
}

pub struct Task {
    pub name: String,
    pub policy: Policy,
    pub kind: TaskKind,
    pub state: RunState,
    /// Remaining cost of the current step, if one is in progress.
    pub chunk: Option<Nanos>,
    pub chunk_kernel: bool,
    /// Set while the task may not be preempted by other tasks (ksoftirqd
    /// inside __do_softirq has preemption disabled).
    pub preempt_disabled: bool,
    /// Bumped to invalidate a pending wake-up timer.
    pub wake_gen: u32,
    /// A `Recv` the task is blocked in.
    pub blocked_on: Option<usize>,
    pub received: bool,
    pub acct: TaskAccounting,
    pub jobs: JobStats,
    /// Server governing this task, if any (index into the server list).
    pub server: Option<usize>,
    /// Fair-class state.
    pub vruntime: u128,
    pub fair_slice_start: Nanos,
    /// 2.4 epoch scheduler counter (ticks).
    pub counter: i64,
    /// RR time slice left (fair class: runtime in the current slice).
    pub rr_left: Nanos,
    /// The tick used up the slice: back to the tail of the queue.
    pub requeue_tail: bool,
}

impl Task {
    pub fn new(name: impl Into<String>, policy: Policy, kind: TaskKind) -> Self {
        Task {
            name: name.into(),
            policy,
            kind,
            state: RunState::Runnable,
            chunk: None,
            chunk_kernel: false,
            preempt_disabled: false,
            wake_gen: 0,
            blocked_on: None,
            received: false,
            acct: TaskAccounting::default(),
            jobs: JobStats::default(),
            server: None,
            vruntime: 0,
            fair_slice_start: 0,
            counter: 0,
            rr_left: 0,
            requeue_tail: false,
        }
    }

    pub fn is_kernel_thread(&self) -> bool {
        !matches!(self.kind, TaskKind::User(_))
    }
}
