//! Bottom halves: stepping a softirq run (rounds, handlers, jobs),
//! net_rx_action with NAPI polls, ksoftirqd and softirq threads.

use super::Sim;
use crate::softirq::{Admit, Handler, Job, JobWhat, Loc, PollDev, RoundInfo, SoftirqRun, NET_RX};
use crate::task::{RunState, TaskId};
use irqlab_analysis::Nanos;

/// NAPI weight of the per-CPU backlog pseudo-device (weight_p = 64).
const BACKLOG_WEIGHT: i64 = 64;

impl Sim {
    fn take_run(&mut self, loc: Loc) -> Option<SoftirqRun> {
        match loc {
            Loc::Cpu => self.cpu.softirq.take(),
            Loc::Task(t) => self.task_runs[t].take(),
        }
    }

    fn put_run(&mut self, loc: Loc, run: SoftirqRun) {
        match loc {
            Loc::Cpu => self.cpu.softirq = Some(run),
            Loc::Task(t) => self.task_runs[t] = Some(run),
        }
    }

    /// Gives the run at `loc` its next job, or ends it.
    pub(super) fn bh_step(&mut self, loc: Loc) {
        let Some(mut run) = self.take_run(loc) else { return };
        match self.bh_next_job(&mut run, loc) {
            Some(job) => {
                run.job = Some(job);
                run.job_left = job.cost;
                self.softirq_stats.jobs += 1;
                if let Loc::Task(t) = loc {
                    self.tasks[t].chunk = Some(job.cost);
                    self.tasks[t].chunk_kernel = true;
                }
                self.put_run(loc, run);
            }
            None => {
                if let Loc::Task(t) = loc {
                    self.tasks[t].chunk = None;
                }
            }
        }
    }

    fn bh_next_job(&mut self, run: &mut SoftirqRun, loc: Loc) -> Option<Job> {
        loop {
            if let Some(mut h) = run.handler {
                let job = match &mut h {
                    Handler::NetRx { budget, limit_ns, quota } => self.net_rx_next(budget, *limit_ns, quota),
                    Handler::Queue { vector } => self.bh_queues[*vector as usize].pop_front(),
                };
                run.handler = Some(h);
                if let Some(job) = job {
                    if let Some(mut p) = self.bh_policy.take() {
                        let admit = p.admit(self, loc, &job);
                        self.bh_policy = Some(p);
                        if let Admit::Defer { wake_ksoftirqd } = admit {
                            self.bh_unget(job);
                            self.pending |= 1 << job.vector;
                            self.softirq_stats.deferred_by_policy += 1;
                            if wake_ksoftirqd {
                                self.wake_ksoftirqd();
                            }
                            self.end_run(run, loc, false);
                            return None;
                        }
                    }
                    return Some(job);
                }
                if self.cross.ipi_due != 0 {
                    self.send_rps_ipis();
                }
                run.handler = None;
            }
            if run.round_left != 0 {
                let v = run.round_left.trailing_zeros();
                run.round_left &= !(1 << v);
                run.handler = Some(self.start_handler(v));
                continue;
            }
            let pending = self.pending & run.serves;
            if pending == 0 {
                self.end_run(run, loc, false);
                return None;
            }
            if run.rounds > 0 {
                let info = RoundInfo {
                    now: self.now,
                    start: run.start,
                    rounds: run.rounds,
                    pending,
                    not_yet_run: run.not_yet_run,
                    need_resched: self.cpu.need_resched,
                    tick_ns: self.cfg.tick_ns(),
                };
                if !self.model.restart(&info) {
                    self.end_run(run, loc, true);
                    return None;
                }
            }
            run.not_yet_run &= !pending;
            run.rounds += 1;
            self.softirq_stats.max_rounds = self.softirq_stats.max_rounds.max(run.rounds);
            run.round_left = pending;
            self.pending &= !pending;
        }
    }

    /// The run is over. In softirq context, or in the IRQ thread that
    /// raised it (PREEMPT_RT), work left pending goes to ksoftirqd (or the
    /// softirq threads).
    fn end_run(&mut self, run: &SoftirqRun, loc: Loc, handoff: bool) {
        let hands_off = match loc {
            Loc::Cpu => true,
            Loc::Task(t) => matches!(self.tasks[t].kind, crate::task::TaskKind::IrqThread { .. }),
        };
        if hands_off && handoff && self.pending != 0 {
            let st = &mut self.softirq_stats;
            st.handoff_rounds_min = Some(st.handoff_rounds_min.map_or(run.rounds, |m| m.min(run.rounds)));
            st.handoff_rounds_max = Some(st.handoff_rounds_max.map_or(run.rounds, |m| m.max(run.rounds)));
            self.wake_ksoftirqd();
        }
    }

    fn start_handler(&mut self, vector: u32) -> Handler {
        if vector == NET_RX {
            let tick = self.cfg.tick_ns();
            let b = self.model.net_rx_budget(tick);
            // The jiffy limit as the time it starts: `now / tick >= jiffy`
            // exactly when `now >= jiffy * tick`, without a division per packet.
            let limit_jiffy = self.now / tick + b.jiffies;
            Handler::NetRx { budget: b.packets as i64, limit_ns: limit_jiffy.saturating_mul(tick), quota: -1 }
        } else {
            Handler::Queue { vector }
        }
    }

    /// net_rx_action: poll the devices on the poll list, `weight` packets
    /// at a time, until the budget or the time limit runs out (then
    /// re-raise NET_RX) or no device has work.
    fn net_rx_next(&mut self, budget: &mut i64, limit_ns: Nanos, quota: &mut i64) -> Option<Job> {
        loop {
            let dev = *self.poll_list.front()?;
            if *budget <= 0 || self.now >= limit_ns {
                self.pending |= 1 << NET_RX; // softnet_break
                return None;
            }
            if *quota < 0 {
                let w = match dev {
                    PollDev::Nic(n) => self.nics[n].weight as i64,
                    PollDev::Backlog => BACKLOG_WEIGHT,
                };
                *quota = w.min(*budget);
            }
            if *quota > 0 {
                let pkt = match dev {
                    PollDev::Nic(n) => self.nics[n].ring.pop_front(),
                    PollDev::Backlog => self.backlog.pop_front(),
                };
                if let Some(pkt) = pkt {
                    *quota -= 1;
                    *budget -= 1;
                    let (cost, owner) = match (dev, self.rps_target(dev)) {
                        (PollDev::Nic(n), Some(_)) => (self.nics[n].costs.rps_enqueue, None),
                        _ => self.packet_job_cost(&pkt),
                    };
                    return Some(Job { vector: NET_RX, cost, what: JobWhat::Packet { from: dev, pkt }, owner });
                }
            }
            *quota = -1;
            self.poll_list.pop_front();
            let empty = match dev {
                PollDev::Nic(n) => self.nics[n].ring.is_empty(),
                PollDev::Backlog => self.backlog.is_empty(),
            };
            if empty {
                // napi_complete: off the list, device interrupt back on.
                match dev {
                    PollDev::Nic(n) => {
                        let nic = &mut self.nics[n];
                        nic.napi_scheduled = false;
                        nic.stats.napi_polls_completed += 1;
                    }
                    PollDev::Backlog => self.backlog_on_list = false,
                }
            } else {
                self.poll_list.push_back(dev); // weight used up: next device
            }
        }
    }

    /// Puts a job a policy declined back at the head of its queue.
    fn bh_unget(&mut self, job: Job) {
        match job.what {
            JobWhat::Packet { from: PollDev::Nic(n), pkt } => self.nics[n].ring.push_front(pkt),
            JobWhat::Packet { from: PollDev::Backlog, pkt } => self.backlog.push_front(pkt),
            JobWhat::Device { .. } => self.bh_queues[job.vector as usize].push_front(job),
        }
    }

    /// A bottom-half job finished wherever it ran.
    pub(super) fn bh_job_done(&mut self, loc: Loc, job: Job) {
        match job.what {
            JobWhat::Packet { pkt, from } => {
                let n = self.sources[pkt.source as usize].nic;
                self.nics[n].stats.softirq_ns += job.cost;
                match self.rps_target(from) {
                    Some(to) => self.send_to_backlog(to, pkt),
                    None => self.deliver(pkt),
                }
            }
            JobWhat::Device { dev, token } => {
                self.with_device(dev, |d, sim| d.bh_done(sim, token));
            }
        }
        if let Some(mut p) = self.bh_policy.take() {
            p.job_done(self, loc, &job);
            self.bh_policy = Some(p);
        }
    }

    /// Queues a device's bottom-half job on a vector and raises it.
    pub fn queue_bh_job(&mut self, job: Job, from_task: bool) {
        self.bh_queues[job.vector as usize].push_back(job);
        self.raise_softirq(job.vector, from_task);
    }

    pub fn wake_ksoftirqd(&mut self) {
        if self.threaded {
            for v in 0..crate::softirq::NR_VECTORS as u32 {
                if self.pending & (1 << v) != 0 {
                    self.wake_bh_thread(v);
                }
            }
            return;
        }
        if let Some(k) = self.ksoftirqd {
            if matches!(self.tasks[k].state, RunState::Blocked | RunState::Sleeping) {
                self.softirq_stats.ksoftirqd_wakeups += 1;
                self.wake(k);
            }
        }
    }

    pub(super) fn wake_bh_thread(&mut self, vector: u32) {
        let t = self.vector_thread[vector as usize].or(self.ksoftirqd);
        if let Some(t) = t {
            if matches!(self.tasks[t].state, RunState::Blocked | RunState::Sleeping) {
                self.wake(t);
            }
        }
    }

    /// Vectors a kernel thread serves.
    pub(super) fn bh_thread_serves(&self, t: TaskId) -> u32 {
        match self.tasks[t].kind {
            crate::task::TaskKind::SoftirqThread { vectors } => vectors,
            _ => {
                // ksoftirqd: every vector without a thread of its own.
                let mut m = u32::MAX;
                for (v, th) in self.vector_thread.iter().enumerate() {
                    if th.is_some() {
                        m &= !(1 << v);
                    }
                }
                m
            }
        }
    }

    /// ksoftirqd / softirq thread: run __do_softirq while work is pending,
    /// with a reschedule point between runs; sleep when nothing is left.
    pub(super) fn bh_thread_step(&mut self, t: TaskId) {
        if self.task_runs[t].is_some() {
            self.bh_step(Loc::Task(t));
            if self.tasks[t].chunk.is_some() {
                return;
            }
            self.tasks[t].preempt_disabled = false;
            if self.cpu.need_resched {
                return; // cond_resched(): the caller's loop reschedules
            }
        }
        let serves = self.bh_thread_serves(t);
        if self.pending & serves != 0 {
            self.softirq_stats.thread_runs += 1;
            self.task_runs[t] = Some(SoftirqRun::new(self.now, serves));
            // ksoftirqd runs __do_softirq with BHs and preemption off;
            // threads of the threaded model stay preemptible.
            self.tasks[t].preempt_disabled = !self.threaded;
            self.bh_step(Loc::Task(t));
            if self.tasks[t].chunk.is_some() {
                return;
            }
            self.tasks[t].preempt_disabled = false;
        }
        self.block_current(t);
    }

    pub(super) fn bh_thread_chunk_done(&mut self, t: TaskId) {
        let job = self.task_runs[t].as_mut().and_then(|r| r.job.take());
        if let Some(job) = job {
            self.bh_job_done(Loc::Task(t), job);
        }
    }
}

impl Sim {
    /// Threaded NAPI's kernel thread (`napi_threaded_poll`): polls its NIC
    /// a packet per step, `weight` packets per poll with bottom halves (so
    /// preemption, on a non-RT kernel) off, a reschedule point between
    /// polls; `napi_complete` and sleep when the ring is empty.
    pub(super) fn napi_thread_step(&mut self, t: TaskId, n: usize) {
        let weight = self.nics[n].weight;
        let quota = self.nics[n].threaded.as_ref().expect("threaded NAPI").quota;
        if quota == 0 {
            // Between polls: cond_resched() (the settle loop switches).
            self.tasks[t].preempt_disabled = false;
            if self.cpu.need_resched {
                return;
            }
        }
        let Some(pkt) = self.nics[n].ring.pop_front() else {
            // napi_complete_done: the device interrupt back on.
            let nic = &mut self.nics[n];
            nic.napi_scheduled = false;
            nic.stats.napi_polls_completed += 1;
            if let Some(th) = &mut nic.threaded {
                th.quota = 0;
            }
            self.task_runs[t] = None;
            self.tasks[t].preempt_disabled = false;
            return self.block_current(t);
        };
        let th = self.nics[n].threaded.as_mut().expect("threaded NAPI");
        th.quota = if quota == 0 { weight } else { quota } - 1;
        self.tasks[t].preempt_disabled = !self.threaded;
        let (cost, owner) = self.packet_job_cost(&pkt);
        let job = Job { vector: NET_RX, cost, what: JobWhat::Packet { from: PollDev::Nic(n), pkt }, owner };
        let mut run = SoftirqRun::new(self.now, 0);
        run.job = Some(job);
        run.job_left = cost;
        self.task_runs[t] = Some(run);
        self.softirq_stats.jobs += 1;
        self.tasks[t].chunk = Some(cost);
        self.tasks[t].chunk_kernel = true;
    }
}
