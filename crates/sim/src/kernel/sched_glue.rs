//! Tasks on the CPU: asking behaviors for steps, sleeping, blocking,
//! waking with preemption checks, the context switch, and budget
//! enforcement for SCHED_DEADLINE and servers.

use super::{Ev, Sim};
use crate::server::ServerAction;
use crate::task::{Policy, RunState, Step, StepCtx, TaskId, TaskKind};
use irqlab_analysis::Nanos;

impl Sim {
    /// The current task has no step in progress: get its next one.
    pub(super) fn task_step(&mut self, c: TaskId) {
        match self.tasks[c].kind {
            TaskKind::Ksoftirqd | TaskKind::SoftirqThread { .. } => return self.bh_thread_step(c),
            TaskKind::IrqThread { line } => return self.irq_thread_step(c, line),
            TaskKind::NapiThread { nic } => return self.napi_thread_step(c, nic),
            TaskKind::User(_) => {}
        }
        let received = std::mem::take(&mut self.tasks[c].received);
        let now = self.now;
        let step = {
            let task = &mut self.tasks[c];
            let TaskKind::User(b) = &mut task.kind else { unreachable!() };
            let mut ctx = StepCtx { now, task: c, received, sockets: &mut self.sockets, jobs: &mut task.jobs };
            b.next(&mut ctx)
        };
        match step {
            Step::User(ns) => {
                self.tasks[c].chunk = Some(ns);
                self.tasks[c].chunk_kernel = false;
            }
            Step::Kernel(ns) => {
                self.tasks[c].chunk = Some(ns);
                self.tasks[c].chunk_kernel = true;
            }
            Step::SleepUntil(t) => {
                if t > now {
                    let task = &mut self.tasks[c];
                    task.wake_gen = task.wake_gen.wrapping_add(1);
                    let gen = task.wake_gen;
                    self.q.schedule_at(t, Ev::Wake { task: c as u32, gen });
                    self.stop_current(c, RunState::Sleeping);
                }
                // A time already past: no sleep; the settle loop asks again.
            }
            Step::Recv(s) => {
                if self.sockets[s].try_recv().is_some() {
                    self.tasks[c].received = true;
                } else {
                    self.sockets[s].waiter = Some(c);
                    self.tasks[c].blocked_on = Some(s);
                    self.stop_current(c, RunState::Blocked);
                }
            }
            Step::Read { dev, sector, sectors } => {
                // Blocks first: the device wakes the task at completion.
                self.stop_current(c, RunState::Blocked);
                self.with_device(dev, |d, sim| d.submit_read(sim, c, sector, sectors));
            }
            Step::Send { dev, size } => {
                self.with_device(dev, |d, sim| d.transmit(sim, size, Some(c)));
            }
            Step::Exit => self.stop_current(c, RunState::Exited),
        }
    }

    /// The current task's step finished.
    pub(super) fn task_chunk_done(&mut self, c: TaskId) {
        match self.tasks[c].kind {
            TaskKind::Ksoftirqd | TaskKind::SoftirqThread { .. } => self.bh_thread_chunk_done(c),
            TaskKind::IrqThread { line } => self.irq_thread_done(c, line),
            TaskKind::NapiThread { .. } => self.bh_thread_chunk_done(c),
            TaskKind::User(_) => {}
        }
    }

    /// The current task leaves the CPU without staying runnable.
    fn stop_current(&mut self, c: TaskId, state: RunState) {
        debug_assert_eq!(self.cpu.current, Some(c));
        self.tasks[c].state = state;
        self.tasks[c].chunk = None;
        self.sched.remove(c, &self.tasks);
        self.cpu.current = None;
        if let Some(s) = self.tasks[c].server {
            let mut timers = Vec::new();
            let a = self.servers[s].on_block(self.now, &mut timers);
            self.apply_server(s, a, timers);
        }
    }

    pub(super) fn block_current(&mut self, c: TaskId) {
        self.stop_current(c, RunState::Blocked);
    }

    /// Makes a sleeping or blocked task runnable, asking for a reschedule
    /// if it should preempt the current task.
    pub fn wake(&mut self, t: TaskId) {
        if !matches!(self.tasks[t].state, RunState::Sleeping | RunState::Blocked) {
            return;
        }
        self.tasks[t].state = RunState::Runnable;
        if let Some(s) = self.tasks[t].blocked_on.take() {
            if self.sockets[s].waiter == Some(t) {
                self.sockets[s].waiter = None;
            }
        }
        if let Some(s) = self.tasks[t].server {
            let mut timers = Vec::new();
            let a = self.servers[s].on_wakeup(self.now, &mut timers);
            self.apply_server(s, a, timers);
            if self.servers[s].throttled() {
                return;
            }
        }
        self.sched.enqueue(t, &mut self.tasks, self.now, true);
        if matches!(self.tasks[t].policy, Policy::Deadline { .. }) && self.sched.dl.is_throttled(t) {
            return;
        }
        self.check_preempt(t);
    }

    fn check_preempt(&mut self, t: TaskId) {
        match self.cpu.current {
            None => self.cpu.need_resched = true,
            Some(c) => {
                if c != t && self.sched.should_preempt(c, t, &self.tasks) {
                    self.cpu.need_resched = true;
                }
            }
        }
    }

    /// Picks the next task and switches to it (charging the context switch).
    pub(super) fn schedule(&mut self) {
        self.cpu.need_resched = false;
        let prev = self.cpu.current.take();
        if let Some(p) = prev {
            if self.tasks[p].state == RunState::Running {
                self.tasks[p].state = RunState::Runnable;
                let preempted = self.tasks[p].chunk.is_some() && !self.tasks[p].requeue_tail;
                self.tasks[p].requeue_tail = false;
                self.sched.put_prev(p, &mut self.tasks, self.now, preempted);
            }
        }
        if self.pending != 0 && !self.threaded {
            if let Some(mut pol) = self.bh_policy.take() {
                // The task the switch would go to, for the policy to weigh
                // against the pending bottom halves.
                let next_hint = self.sched.peek_next(&self.tasks);
                let run = pol.run_before_switch(self, next_hint);
                self.bh_policy = Some(pol);
                if run && self.cpu.softirq.is_none() {
                    // Run the bottom halves first; the switch happens after.
                    self.softirq_stats.irq_exit_runs += 1;
                    self.cpu.softirq = Some(crate::softirq::SoftirqRun::new(self.now, u32::MAX));
                    self.cpu.need_resched = true;
                    if let Some(p) = prev {
                        if self.tasks[p].state == RunState::Runnable {
                            // Keep prev current until the switch really happens.
                            self.sched.remove(p, &self.tasks);
                            self.tasks[p].state = RunState::Running;
                            self.cpu.current = Some(p);
                        }
                    }
                    return;
                }
            }
        }
        let next = self.sched.pick_next(&mut self.tasks, self.now);
        if let Some(n) = next {
            self.tasks[n].state = RunState::Running;
            if Some(n) != prev {
                if let Some(p) = prev {
                    if self.tasks[p].state == RunState::Runnable && self.tasks[p].chunk.is_some() {
                        self.tasks[p].acct.preemptions += 1;
                    }
                }
                self.tasks[n].acct.context_switches_in += 1;
                self.times.context_switches += 1;
                if self.cfg.context_switch > 0 {
                    self.cpu.switch_left = Some(self.cfg.context_switch);
                }
            }
        }
        self.cpu.current = next;
    }

    /// Budget the current task may still run before enforcement.
    pub(super) fn budget_left(&self, c: TaskId) -> Option<Nanos> {
        if let Policy::Deadline { .. } = self.tasks[c].policy {
            return Some(self.sched.dl.budget_left(c));
        }
        let bandwidth = self.sched.bandwidth_left(c, &self.tasks);
        let server = self.tasks[c].server.and_then(|s| self.servers[s].budget_left(self.now));
        match (bandwidth, server) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// RT throttling's or the fair server's timer.
    pub(super) fn bandwidth_timer(&mut self) {
        let fair_waiting =
            self.sched.fair.has_runnable() || self.cpu.current.is_some_and(|c| !crate::sched::Scheduler::is_rt_or_dl(&self.tasks, c));
        let t = self.sched.bandwidth.timer(self.now, fair_waiting);
        if t.resched {
            self.cpu.need_resched = true;
        }
        self.q.schedule_at(t.next, Ev::Bandwidth);
    }

    pub(super) fn enforce_budget(&mut self, c: TaskId) {
        if self.sched.bandwidth_left(c, &self.tasks) == Some(0) && self.sched.bandwidth.exhausted() {
            // Throttled RT, or the fair server's boost over: the task stays
            // runnable, the pick decides.
            self.cpu.need_resched = true;
            return;
        }
        if let Policy::Deadline { .. } = self.tasks[c].policy {
            let at = self.sched.dl.throttle(c, self.tasks[c].policy);
            self.q.schedule_at(at.max(self.now), Ev::DlReplenish { task: c as u32 });
            if self.cpu.current == Some(c) {
                self.tasks[c].state = RunState::Runnable;
                self.cpu.current = None;
                self.sched.remove(c, &self.tasks);
            }
            return;
        }
        if let Some(s) = self.tasks[c].server {
            let mut timers = Vec::new();
            let a = self.servers[s].exhausted(self.now, &mut timers);
            self.apply_server(s, a, timers);
        }
    }

    pub(super) fn dl_replenish(&mut self, t: TaskId) {
        let policy = self.tasks[t].policy;
        self.sched.dl.replenish(t, policy);
        if self.tasks[t].state == RunState::Runnable && self.cpu.current != Some(t) {
            self.sched.enqueue(t, &mut self.tasks, self.now, false);
            self.check_preempt(t);
        }
    }

    pub(super) fn server_timer(&mut self, s: usize, token: u64) {
        let mut timers = Vec::new();
        let a = self.servers[s].timer(self.now, token, &mut timers);
        self.apply_server(s, a, timers);
    }

    /// The timer tick, for servers that account by sampling it: did it
    /// interrupt the served task (not a softirq run on its stack)?
    pub(super) fn server_tick(&mut self, s: usize) {
        let running = self.cpu.current == Some(self.servers[s].task()) && self.cpu.softirq.is_none();
        let mut timers = Vec::new();
        let a = self.servers[s].on_tick(self.now, running, &mut timers);
        self.apply_server(s, a, timers);
    }

    /// Carries out what a server asked for: new timers, throttling, a
    /// priority change of the served task.
    fn apply_server(&mut self, s: usize, action: ServerAction, timers: Vec<(Nanos, u64)>) {
        for (at, token) in timers {
            self.q.schedule_at(at.max(self.now), Ev::Server { server: s as u32, token });
        }
        let t = self.servers[s].task();
        match action {
            ServerAction::None => {}
            ServerAction::Throttle => {
                if self.cpu.current == Some(t) {
                    self.cpu.current = None;
                    self.sched.remove(t, &self.tasks);
                    self.tasks[t].state = RunState::Runnable;
                } else if self.tasks[t].state == RunState::Runnable {
                    self.sched.remove(t, &self.tasks);
                }
            }
            ServerAction::Unthrottle => {
                if self.tasks[t].state == RunState::Runnable && self.cpu.current != Some(t) {
                    self.sched.enqueue(t, &mut self.tasks, self.now, false);
                    self.check_preempt(t);
                }
            }
            ServerAction::SetPolicy(p) => self.set_policy(t, p),
        }
    }

    /// Changes a task's policy (sched_setscheduler), requeueing it.
    pub fn set_policy(&mut self, t: TaskId, p: Policy) {
        if self.tasks[t].policy == p {
            return;
        }
        let queued = self.tasks[t].state == RunState::Runnable && self.cpu.current != Some(t);
        if queued || self.cpu.current == Some(t) {
            self.sched.remove(t, &self.tasks);
        }
        self.tasks[t].policy = p;
        if queued {
            self.sched.enqueue(t, &mut self.tasks, self.now, false);
            self.check_preempt(t);
        } else if self.cpu.current == Some(t) {
            // Running task lowered or raised: let the scheduler decide now.
            self.cpu.need_resched = true;
        }
    }
}
