//! The simulated kernel on one CPU: execution contexts (hard IRQ >
//! softirq > task), the main event loop, time accounting, and the glue
//! between scheduler, softirqs, devices and workloads.
//!
//! The CPU runs exactly one piece of work at a time — the top of the
//! context stack — with a remaining cost. Preempted work keeps its
//! remaining cost and resumes when the context above it finishes. The
//! completion time of the top piece is kept outside the event heap
//! (`cpu.done_at`), so preemption never leaves stale events behind.

mod bh;
mod cross_cpu;
mod irq;
mod sched_glue;

use crate::engine::EventQueue;
use crate::metrics::Series;
use crate::net::{Nic, Packet, Socket, Source};
use crate::probe::Probe;
use crate::sched::{FairKind, Scheduler};
use crate::server::Server;
use crate::softirq::{BottomHalfPolicy, SoftirqModel, SoftirqRun, SoftirqStats};
use crate::task::{RunState, Task, TaskId, TaskKind};
use crate::trace::Trace;
use irqlab_analysis::cpu_time::CpuTime;
use irqlab_analysis::Nanos;
use serde::Serialize;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};

pub use cross_cpu::{CrossCpu, CrossCpuStats, Remote};
pub use irq::{IrqKind, IrqLine};

/// Costs and constants of the machine; every scenario states where its
/// numbers come from.
#[derive(Debug, Clone)]
pub struct MachineConfig {
    pub hz: u32,
    /// Hard-IRQ entry and exit path (do_IRQ, irq_enter/irq_exit).
    pub irq_entry: Nanos,
    pub irq_exit: Nanos,
    /// Timer interrupt handler (scheduler_tick, timekeeping).
    pub tick: Nanos,
    pub context_switch: Nanos,
    /// Threaded model: the primary handler that only wakes the thread.
    pub irq_primary: Nanos,
    /// With IRQ time accounting (modern kernels), ticks that hit IRQ or
    /// softirq context are not charged to the current task.
    pub irq_time_accounting: bool,
    /// netdev_max_backlog: per-CPU backlog of non-NAPI receive.
    pub netdev_max_backlog: usize,
    /// hrtimer_interrupt handler cost of a sleeping task's timer expiry.
    /// `None`: expiries wake the task at no CPU cost (the model before this
    /// existed, which the calibrated reproductions assume).
    pub hrtimer: Option<Nanos>,
    /// Linux 4.9 to 6.4 ("softirq: Let ksoftirqd do its job", 4cd13c21b207;
    /// reverted in 6.5 by d15121be7485): IRQ exit leaves pending softirqs
    /// (but HI and TASKLET) to ksoftirqd while it is runnable.
    pub defer_to_running_ksoftirqd: bool,
    /// The function-call IPI's handler, on the CPU it is sent to.
    pub ipi: Nanos,
}

impl MachineConfig {
    pub fn tick_ns(&self) -> Nanos {
        1_000_000_000 / self.hz as Nanos
    }
}

/// Events in the heap. CPU work completion is not among them (see the
/// module doc).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ev {
    Tick,
    /// A sleeping task's timer (stale if `gen` no longer matches).
    Wake {
        task: u32,
        gen: u32,
    },
    /// The next packet of a traffic source reaches the NIC.
    Arrive {
        source: u32,
    },
    /// Interrupt-coalescing timer of a NIC.
    Coalesce {
        nic: u32,
        gen: u32,
    },
    /// A server's (or SCHED_DEADLINE task's) timer.
    Server {
        server: u32,
        token: u64,
    },
    DlReplenish {
        task: u32,
    },
    /// RT throttling's period, or the fair server's zero laxity or period.
    Bandwidth,
    /// A device's own event (disk completion, ...).
    Device {
        dev: u32,
        token: u64,
    },
    WarmupEnd,
}

/// The hard IRQ in progress.
#[derive(Debug, Clone, Copy)]
pub struct HardIrq {
    pub line: usize,
    pub left: Nanos,
    /// Packets the (non-NAPI) ISR took from the ring and paid for.
    pub packets: u32,
}

#[derive(Debug, Default)]
pub struct Cpu {
    pub hardirq: Option<HardIrq>,
    /// A softirq run in softirq context (IRQ exit).
    pub softirq: Option<SoftirqRun>,
    pub switch_left: Option<Nanos>,
    pub current: Option<TaskId>,
    pub need_resched: bool,
    /// Start of the segment not yet accounted.
    pub seg_start: Nanos,
    /// When the top piece of work completes (MAX when idle).
    pub done_at: Nanos,
}

/// Where the CPU's time went: the four contexts the live accounting also
/// measures (`time`: run, idle, hard IRQ, softirq) and the context switches;
/// the five sum to the accounted span.
#[derive(Debug, Clone, Default, Serialize)]
pub struct CpuTimes {
    /// `run_ns` (tasks' own time; `task_ns` in `irqlab/sim/v1`), `idle_ns`,
    /// `hardirq_ns`, `softirq_ns`: `irqlab_analysis::cpu_time`.
    #[serde(flatten)]
    pub time: CpuTime,
    pub context_switch_ns: Nanos,
    /// Bottom-half work wherever it ran (softirq context + ksoftirqd +
    /// softirq threads).
    pub bottom_half_ns: Nanos,
    pub context_switches: u64,
    pub ticks: u64,
}

impl CpuTimes {
    pub fn total(&self) -> Nanos {
        let t = &self.time;
        t.hardirq_ns + t.softirq_ns + t.run_ns + self.context_switch_ns + t.idle_ns
    }
}

/// The simulated machine.
pub struct Sim {
    pub cfg: MachineConfig,
    pub q: EventQueue<Ev>,
    pub now: Nanos,
    pub cpu: Cpu,
    pub tasks: Vec<Task>,
    pub sched: Scheduler,
    pub model: Box<dyn SoftirqModel>,
    /// `model.threaded()`, asked at every IRQ exit and raise: kept here
    /// instead of a virtual call each time.
    threaded: bool,
    /// `model.runs_in_raising_thread()`, likewise.
    softirq_in_irq_thread: bool,
    pub pending: u32,
    /// Jobs of queue-style vectors (BLOCK, TASKLET, ...).
    pub bh_queues: Vec<VecDeque<crate::softirq::Job>>,
    /// Softirq runs in progress inside tasks (ksoftirqd, threads).
    pub task_runs: Vec<Option<SoftirqRun>>,
    pub ksoftirqd: Option<TaskId>,
    /// Threaded model: the thread serving each vector.
    pub vector_thread: [Option<TaskId>; crate::softirq::NR_VECTORS],
    pub softirq_stats: SoftirqStats,
    /// Bottom-half time per vector (folded into the stats at the end).
    pub bh_vector_ns: [Nanos; crate::softirq::NR_VECTORS],
    pub bh_policy: Option<Box<dyn BottomHalfPolicy>>,
    pub lines: Vec<IrqLine>,
    pub nics: Vec<Nic>,
    pub sockets: Vec<Socket>,
    pub sources: Vec<Source>,
    pub backlog: VecDeque<Packet>,
    pub poll_list: VecDeque<crate::softirq::PollDev>,
    pub backlog_on_list: bool,
    pub servers: Vec<Box<dyn Server>>,
    pub devices: Vec<Option<Box<dyn crate::device::Device>>>,
    pub times: CpuTimes,
    pub probe: Option<Probe>,
    pub bh_series: Option<Series>,
    pub trace: Option<Trace>,
    /// Time statistics start (end of warm-up).
    pub stats_start: Nanos,
    /// Packets in flight when statistics started (conservation offset).
    pub in_flight_at_start: u64,
    pub events: u64,
    pub seed: u64,
    /// The hrtimer interrupt line, when expiries cost CPU time.
    pub hrtimer_line: Option<usize>,
    /// Sleepers whose timer expired, woken when the hrtimer IRQ handler
    /// completes.
    pub expired_timers: Vec<TaskId>,
    /// Which CPU of a multi-core machine this is, and what it exchanges
    /// with the others (`crate::machine`); idle on one core.
    pub cross: CrossCpu,
    /// The `[machine] kernel` preset this CPU was built with, for the results.
    pub kernel_preset: Option<&'static str>,
}

/// Why a run could not proceed (a scenario that makes the model spin).
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    #[error("the model made no progress at t={0} ns (zero-cost steps looping); check the scenario's costs")]
    NoProgress(Nanos),
}

impl Sim {
    pub fn new(cfg: MachineConfig, fair: FairKind, model: Box<dyn SoftirqModel>, seed: u64) -> Self {
        let sched = Scheduler::new(fair, cfg.hz);
        let threaded = model.threaded();
        let softirq_in_irq_thread = model.runs_in_raising_thread();
        let mut sim = Sim {
            cfg,
            q: EventQueue::new(),
            now: 0,
            cpu: Cpu { done_at: Nanos::MAX, ..Cpu::default() },
            tasks: Vec::new(),
            sched,
            model,
            threaded,
            softirq_in_irq_thread,
            pending: 0,
            bh_queues: (0..crate::softirq::NR_VECTORS).map(|_| VecDeque::new()).collect(),
            task_runs: Vec::new(),
            ksoftirqd: None,
            vector_thread: [None; crate::softirq::NR_VECTORS],
            softirq_stats: SoftirqStats::default(),
            bh_vector_ns: [0; crate::softirq::NR_VECTORS],
            bh_policy: None,
            lines: Vec::new(),
            nics: Vec::new(),
            sockets: Vec::new(),
            sources: Vec::new(),
            backlog: VecDeque::new(),
            poll_list: VecDeque::new(),
            backlog_on_list: false,
            servers: Vec::new(),
            devices: Vec::new(),
            times: CpuTimes::default(),
            probe: None,
            bh_series: None,
            trace: None,
            stats_start: 0,
            in_flight_at_start: 0,
            events: 0,
            seed,
            hrtimer_line: None,
            expired_timers: Vec::new(),
            cross: CrossCpu::default(),
            kernel_preset: None,
        };
        sim.lines.push(IrqLine::new("timer", IrqKind::Timer));
        if sim.cfg.hrtimer.is_some() {
            // Right after the tick in priority: both are the local timer.
            sim.hrtimer_line = Some(sim.add_line(IrqLine::new("hrtimer", IrqKind::HrTimer)));
        }
        sim
    }

    /// Adds a task, runnable at time 0.
    pub fn add_task(&mut self, mut task: Task) -> TaskId {
        let id = self.tasks.len();
        self.sched.fair.init_task(&mut task);
        task.state = RunState::Runnable;
        let is_ksoftirqd = matches!(task.kind, TaskKind::Ksoftirqd);
        let idle_thread = matches!(task.kind, TaskKind::SoftirqThread { .. } | TaskKind::IrqThread { .. } | TaskKind::NapiThread { .. });
        self.tasks.push(task);
        self.task_runs.push(None);
        if is_ksoftirqd || idle_thread {
            // Kernel threads sleep until woken.
            self.tasks[id].state = RunState::Blocked;
        } else {
            self.sched.enqueue(id, &mut self.tasks, 0, false);
        }
        if is_ksoftirqd {
            self.ksoftirqd = Some(id);
        }
        id
    }

    pub fn add_line(&mut self, line: IrqLine) -> usize {
        self.lines.push(line);
        self.lines.len() - 1
    }

    /// Runs until `end` (or the stop flag), calling `progress(now)` now and
    /// then. Returns false when stopped early.
    pub fn run(&mut self, end: Nanos, stop: &AtomicBool, mut progress: impl FnMut(Nanos)) -> Result<bool, SimError> {
        self.begin()?;
        let mut n: u64 = 0;
        loop {
            if !self.step_before(end)? {
                self.finish_at(end);
                return Ok(true);
            }
            n += 1;
            if n & 0xffff == 0 {
                progress(self.now);
                if stop.load(Ordering::Relaxed) {
                    return Ok(false);
                }
            }
        }
    }

    /// The first events of a run (once): the tick, the servers' timers,
    /// the traffic.
    pub(crate) fn begin(&mut self) -> Result<(), SimError> {
        if self.events == 0 {
            // The tick charges the jiffy that just ended: first one at 1/HZ.
            self.q.schedule_at(self.cfg.tick_ns(), Ev::Tick);
            if let Some(at) = self.sched.bandwidth.first_timer() {
                self.q.schedule_at(at, Ev::Bandwidth);
            }
            for s in 0..self.servers.len() {
                let mut timers = Vec::new();
                self.servers[s].start(0, &mut timers);
                for (at, token) in timers {
                    self.q.schedule_at(at, Ev::Server { server: s as u32, token });
                }
            }
            for i in 0..self.sources.len() {
                let start = self.sources[i].start;
                self.q.schedule_at(start, Ev::Arrive { source: i as u32 });
            }
            self.settle()?;
            self.reprogram();
        }
        Ok(())
    }

    /// When the next thing happens: an event or the top work's end.
    #[inline]
    pub(crate) fn next_time(&mut self) -> Nanos {
        self.q.peek_time().unwrap_or(Nanos::MAX).min(self.cpu.done_at)
    }

    /// Handles what happens next (see [`Sim::next_time`]).
    #[inline]
    pub(crate) fn step(&mut self) -> Result<(), SimError> {
        self.step_before(Nanos::MAX).map(|_| ())
    }

    /// Handles what happens next if it happens before `end`; false when
    /// nothing does.
    #[inline]
    fn step_before(&mut self, end: Nanos) -> Result<bool, SimError> {
        let t_ev = self.q.peek_time().unwrap_or(Nanos::MAX);
        let t_cpu = self.cpu.done_at;
        if t_ev.min(t_cpu) >= end {
            return Ok(false);
        }
        if t_cpu <= t_ev {
            self.move_to(t_cpu);
            self.cpu_done();
        } else {
            let (t, ev) = self.q.pop().expect("peeked");
            self.advance(t);
            self.now = t;
            self.handle(ev);
        }
        self.settle()?;
        self.reprogram();
        self.events += 1;
        Ok(true)
    }

    /// Brings the clock and the accounting to `t`, where no event is due.
    #[inline]
    fn move_to(&mut self, t: Nanos) {
        self.advance(t);
        self.now = t;
        self.q.advance_to(t);
    }

    /// Ends the run at `end`: the run covers [0, end), nothing happens at
    /// `end` itself.
    pub(crate) fn finish_at(&mut self, end: Nanos) {
        self.advance(end);
        self.now = end;
    }

    /// Something another CPU did reaches this one at `now` (not before
    /// anything of this CPU's own: the machine steps the CPUs in time
    /// order).
    pub(crate) fn receive(&mut self, now: Nanos, what: impl FnOnce(&mut Sim)) -> Result<(), SimError> {
        self.move_to(now);
        what(self);
        self.settle()?;
        self.reprogram();
        Ok(())
    }

    fn handle(&mut self, ev: Ev) {
        match ev {
            Ev::Tick => {
                self.raise_irq(0);
                self.q.schedule_in(self.cfg.tick_ns(), Ev::Tick);
            }
            Ev::Wake { task, gen } => {
                let t = task as usize;
                if self.tasks[t].wake_gen == gen && self.tasks[t].state == RunState::Sleeping {
                    match self.hrtimer_line {
                        // The expiry interrupts whatever runs; the handler wakes.
                        Some(line) => {
                            self.expired_timers.push(t);
                            self.raise_irq(line);
                        }
                        None => self.wake(t),
                    }
                }
            }
            Ev::Arrive { source } => self.packet_arrives(source as usize),
            Ev::Coalesce { nic, gen } => {
                let n = &mut self.nics[nic as usize];
                if n.coalesce_armed && n.coalesce_gen == gen {
                    n.coalesce_armed = false;
                    n.unsignalled = 0;
                    self.raise_nic_irq(nic as usize);
                }
            }
            Ev::Server { server, token } => self.server_timer(server as usize, token),
            Ev::DlReplenish { task } => self.dl_replenish(task as usize),
            Ev::Bandwidth => self.bandwidth_timer(),
            Ev::Device { dev, token } => self.with_device(dev as usize, |d, sim| d.on_event(sim, token)),
            Ev::WarmupEnd => self.reset_statistics(),
        }
    }

    /// Runs `f` on a device taken out of its slot (so it can change the
    /// simulator), then puts it back.
    pub fn with_device<R>(&mut self, dev: usize, f: impl FnOnce(&mut Box<dyn crate::device::Device>, &mut Sim) -> R) -> R {
        let mut d = self.devices[dev].take().expect("device re-entered");
        let r = f(&mut d, self);
        self.devices[dev] = Some(d);
        r
    }

    /// Charges the time since the last accounting point to whatever ran.
    #[inline]
    fn advance(&mut self, now: Nanos) {
        let start = self.cpu.seg_start;
        if now <= start {
            return;
        }
        let dt = now - start;
        self.cpu.seg_start = now;
        let cur = self.cpu.current;
        if let Some(h) = &mut self.cpu.hardirq {
            h.left -= dt;
            let line = h.line;
            self.times.time.hardirq_ns += dt;
            self.lines[line].ns += dt;
            if let IrqKind::Nic(n) = self.lines[line].kind {
                self.nics[n].stats.hardirq_ns += dt;
            }
            if let Some(c) = cur {
                self.tasks[c].acct.stolen_hardirq_ns += dt;
                if !self.cfg.irq_time_accounting {
                    self.sched.charge(c, &mut self.tasks, dt);
                }
            }
            if self.trace.is_some() {
                let name = self.lines[line].name.clone();
                self.trace_seg("hardirq", name, start, now);
            }
        } else if let Some(run) = &mut self.cpu.softirq {
            run.job_left = run.job_left.saturating_sub(dt);
            let vector = run.job.map(|j| j.vector);
            self.times.time.softirq_ns += dt;
            self.times.bottom_half_ns += dt;
            self.bh_time(vector, start, now);
            if let Some(c) = cur {
                self.tasks[c].acct.stolen_softirq_ns += dt;
                if !self.cfg.irq_time_accounting {
                    self.sched.charge(c, &mut self.tasks, dt);
                }
            }
            if self.trace.is_some() {
                let name = vector.map_or("softirq", crate::softirq::vector_name).to_string();
                self.trace_seg("softirq", name, start, now);
            }
        } else if let Some(left) = &mut self.cpu.switch_left {
            *left -= dt;
            self.times.context_switch_ns += dt;
            if self.trace.is_some() {
                self.trace_seg("cpu", "switch".into(), start, now);
            }
        } else if let Some(c) = cur {
            let t = &mut self.tasks[c];
            if let Some(chunk) = &mut t.chunk {
                *chunk -= dt.min(*chunk);
            }
            t.acct.run_ns += dt;
            if t.chunk_kernel {
                t.acct.system_ns += dt;
            } else {
                t.acct.user_ns += dt;
            }
            self.times.time.run_ns += dt;
            if self.task_runs[c].is_some() {
                self.tasks[c].acct.bh_work_ns += dt;
                self.times.bottom_half_ns += dt;
                let vector = self.task_runs[c].as_ref().and_then(|r| r.job.map(|j| j.vector));
                self.bh_time(vector, start, now);
            }
            self.sched.charge(c, &mut self.tasks, dt);
            if let Some(s) = self.tasks[c].server {
                self.servers[s].consume(start, now);
            }
            if let Some(p) = &mut self.probe {
                if p.task == c {
                    p.ran(start, now);
                }
            }
            if self.trace.is_some() {
                let name = self.tasks[c].name.clone();
                self.trace_seg("task", name, start, now);
            }
        } else {
            self.times.time.idle_ns += dt;
        }
    }

    fn bh_time(&mut self, vector: Option<u32>, start: Nanos, end: Nanos) {
        if let Some(s) = &mut self.bh_series {
            s.add(start, end);
        }
        if let Some(v) = vector {
            self.bh_vector_ns[v as usize] += end - start;
        }
    }

    #[inline]
    fn trace_seg(&mut self, track: &'static str, name: String, start: Nanos, end: Nanos) {
        if let Some(tr) = &mut self.trace {
            tr.segment(track, name, start, end);
        }
    }

    /// Sets `cpu.done_at` from the top piece of work.
    fn reprogram(&mut self) {
        let left = if let Some(h) = &self.cpu.hardirq {
            Some(h.left)
        } else if let Some(run) = &self.cpu.softirq {
            run.job.map(|_| run.job_left)
        } else if let Some(l) = self.cpu.switch_left {
            Some(l)
        } else if let Some(c) = self.cpu.current {
            self.tasks[c].chunk.map(|chunk| match self.budget_left(c) {
                Some(b) => chunk.min(b),
                None => chunk,
            })
        } else {
            None
        };
        self.cpu.done_at = left.map_or(Nanos::MAX, |l| self.cpu.seg_start + l);
    }

    /// The top piece of work finished.
    fn cpu_done(&mut self) {
        if let Some(h) = self.cpu.hardirq.take() {
            self.hardirq_done(h);
        } else if self.cpu.softirq.is_some() {
            let run = self.cpu.softirq.as_mut().expect("checked");
            if let Some(job) = run.job.take() {
                self.bh_job_done(crate::softirq::Loc::Cpu, job);
            }
        } else if self.cpu.switch_left.is_some() {
            self.cpu.switch_left = None;
        } else if let Some(c) = self.cpu.current {
            if self.tasks[c].chunk == Some(0) {
                self.tasks[c].chunk = None;
                self.task_chunk_done(c);
            }
            if self.budget_left(c) == Some(0) {
                self.enforce_budget(c);
            }
        }
    }

    /// Brings the CPU to a consistent state after an event: starts pending
    /// hard IRQs, pulls the next softirq job, switches tasks, asks the
    /// current task for its next step. Zero-time transitions only.
    fn settle(&mut self) -> Result<(), SimError> {
        for _ in 0..100_000 {
            if self.cpu.hardirq.is_some() {
                return Ok(());
            }
            if let Some(line) = self.next_pending_line() {
                self.start_hardirq(line);
                return Ok(());
            }
            if let Some(run) = &self.cpu.softirq {
                if run.job.is_some() {
                    return Ok(());
                }
                self.bh_step(crate::softirq::Loc::Cpu);
                continue;
            }
            if self.cpu.switch_left.is_some() {
                return Ok(());
            }
            match self.cpu.current {
                Some(c) => {
                    if self.cpu.need_resched && !self.tasks[c].preempt_disabled {
                        self.schedule();
                        continue;
                    }
                    if self.tasks[c].chunk.is_some() {
                        return Ok(());
                    }
                    self.task_step(c);
                }
                None => {
                    if self.sched.has_runnable() {
                        self.schedule();
                        if self.cpu.current.is_none() {
                            return Ok(());
                        }
                    } else {
                        self.cpu.need_resched = false;
                        return Ok(());
                    }
                }
            }
        }
        Err(SimError::NoProgress(self.now))
    }

    /// Statistics restart (end of warm-up): counters and accounting are
    /// zeroed, the in-flight packets noted for the conservation check.
    pub fn reset_statistics(&mut self) {
        self.stats_start = self.now;
        self.in_flight_at_start = self.packets_in_flight();
        self.times = CpuTimes::default();
        for t in &mut self.tasks {
            t.acct = Default::default();
            t.jobs = Default::default();
            if let TaskKind::User(b) = &mut t.kind {
                b.reset_stats();
            }
        }
        for d in self.devices.iter_mut().flatten() {
            d.reset_stats();
        }
        for n in &mut self.nics {
            n.stats = Default::default();
        }
        for s in &mut self.sockets {
            s.stats = Default::default();
        }
        for l in &mut self.lines {
            l.count = 0;
            l.ns = 0;
        }
        self.softirq_stats = Default::default();
        self.cross.stats = Default::default();
        self.sched.bandwidth.reset_stats();
        self.bh_vector_ns = [0; crate::softirq::NR_VECTORS];
        if let Some(p) = &mut self.probe {
            p.reset(self.now);
        }
        if let Some(s) = &mut self.bh_series {
            *s = Series::new(s.interval_ns, self.now);
        }
    }

    /// Packets somewhere between the wire and the application.
    pub fn packets_in_flight(&self) -> u64 {
        let rings: u64 = self.nics.iter().map(|n| n.in_flight()).sum();
        let sockets: u64 = self.sockets.iter().map(|s| s.queue.len() as u64).sum();
        let in_jobs = self
            .cpu
            .softirq
            .iter()
            .chain(self.task_runs.iter().flatten())
            .filter(|r| matches!(r.job, Some(j) if matches!(j.what, crate::softirq::JobWhat::Packet { .. })))
            .count() as u64;
        // A non-NAPI ISR moves its packets out of the ring only when it
        // completes, so packets under an ISR are still counted in the ring.
        rings + self.backlog.len() as u64 + sockets + in_jobs
    }

    pub fn task_id(&self, name: &str) -> Option<TaskId> {
        self.tasks.iter().position(|t| t.name == name)
    }
}
