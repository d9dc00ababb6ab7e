//! The process scheduler: classes in Linux's order — deadline (EDF + CBS),
//! real-time (FIFO/RR, priorities 1–99), then one fair class chosen per
//! scenario (CFS-like, or the tick-charged Linux 2.4 epoch scheduler).
//! SCHED_IDLE tasks live in the fair class with weight 3, as in Linux.
//!
//! To add a fair-class scheduler, implement [`FairClass`] and add a name in
//! the scenario parser. Servers (sporadic, polling, deferrable) sit on top:
//! they change a task's priority or throttle it (see [`crate::server`]).

pub mod bandwidth;
pub mod cfs;
pub mod deadline;
pub mod epoch;
pub mod rt;

use crate::task::{Policy, Task, TaskId};
use irqlab_analysis::Nanos;

/// A scheduling class for SCHED_OTHER / SCHED_IDLE tasks. The kernel keeps
/// the running task out of the queue (`pick` removes, `put_prev` returns).
pub trait FairClass {
    /// Sets up a new task's class state (e.g. the 2.4 counter).
    fn init_task(&self, _task: &mut Task) {}
    fn enqueue(&mut self, t: TaskId, tasks: &mut [Task], now: Nanos, wakeup: bool);
    /// Puts the task that was running back (it is still runnable).
    fn put_prev(&mut self, t: TaskId, tasks: &mut [Task], now: Nanos);
    fn remove(&mut self, t: TaskId);
    fn pick(&mut self, tasks: &mut [Task], now: Nanos) -> Option<TaskId>;
    /// The task `pick` would return now, without picking it (no slice
    /// started, no queue order changed, no epoch recalculated).
    fn peek(&self, tasks: &[Task]) -> Option<TaskId>;
    /// The current task executed (or, without IRQ time accounting, was
    /// charged for) `ns` of time.
    fn charge(&mut self, cur: TaskId, tasks: &mut [Task], ns: Nanos);
    /// Timer tick while `cur` is current; true asks for a reschedule.
    fn tick(&mut self, cur: TaskId, tasks: &mut [Task], now: Nanos) -> bool;
    /// Should `woken` preempt the current fair task `cur`?
    fn wakeup_preempt(&self, cur: TaskId, woken: TaskId, tasks: &[Task]) -> bool;
    fn has_runnable(&self) -> bool;
    fn name(&self) -> &'static str;
}

/// Which fair class a scenario selects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FairKind {
    Cfs,
    Linux24,
}

pub struct Scheduler {
    pub rt: rt::RtClass,
    pub dl: deadline::DlClass,
    pub fair: Box<dyn FairClass>,
    /// RT throttling or the fair server, as the kernel preset has it.
    pub bandwidth: bandwidth::Bandwidth,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum ClassRank {
    Fair = 0,
    Rt = 1,
    Dl = 2,
}

fn class_of(p: Policy) -> ClassRank {
    match p {
        Policy::Deadline { .. } => ClassRank::Dl,
        Policy::Fifo(_) | Policy::Rr(_) => ClassRank::Rt,
        Policy::Other(_) | Policy::Idle => ClassRank::Fair,
    }
}

impl Scheduler {
    pub fn new(fair: FairKind, hz: u32) -> Self {
        let fair: Box<dyn FairClass> = match fair {
            FairKind::Cfs => Box::new(cfs::Cfs::new()),
            FairKind::Linux24 => Box::new(epoch::Epoch24::new(hz)),
        };
        Scheduler { rt: rt::RtClass::new(), dl: deadline::DlClass::default(), fair, bandwidth: bandwidth::Bandwidth::Unlimited }
    }

    /// A task became runnable (wake-up or creation).
    pub fn enqueue(&mut self, t: TaskId, tasks: &mut [Task], now: Nanos, wakeup: bool) {
        match class_of(tasks[t].policy) {
            ClassRank::Dl => self.dl.enqueue(t, tasks, now, wakeup),
            ClassRank::Rt => self.rt.enqueue(t, tasks[t].policy, false),
            ClassRank::Fair => self.fair.enqueue(t, tasks, now, wakeup),
        }
    }

    /// The running task stops running but stays runnable. `preempted`
    /// keeps an RT task at the head of its priority (Linux semantics).
    pub fn put_prev(&mut self, t: TaskId, tasks: &mut [Task], now: Nanos, preempted: bool) {
        match class_of(tasks[t].policy) {
            ClassRank::Dl => self.dl.enqueue(t, tasks, now, false),
            ClassRank::Rt => self.rt.enqueue(t, tasks[t].policy, preempted),
            ClassRank::Fair => self.fair.put_prev(t, tasks, now),
        }
    }

    /// Removes a runnable, not running task from its queue (throttling).
    pub fn remove(&mut self, t: TaskId, tasks: &[Task]) {
        match class_of(tasks[t].policy) {
            ClassRank::Dl => self.dl.remove(t),
            ClassRank::Rt => self.rt.remove(t),
            ClassRank::Fair => self.fair.remove(t),
        }
    }

    pub fn pick_next(&mut self, tasks: &mut [Task], now: Nanos) -> Option<TaskId> {
        if let Some(t) = self.dl.pick() {
            return Some(t);
        }
        if self.bandwidth.fair_boosted() && self.fair.has_runnable() {
            return self.fair.pick(tasks, now);
        }
        if !self.bandwidth.rt_held_back() {
            if let Some(t) = self.rt.pick() {
                return Some(t);
            }
        }
        self.fair.pick(tasks, now)
    }

    /// The task `pick_next` would return now, leaving every queue as it is.
    pub fn peek_next(&self, tasks: &[Task]) -> Option<TaskId> {
        if let Some(t) = self.dl.peek() {
            return Some(t);
        }
        if self.bandwidth.fair_boosted() && self.fair.has_runnable() {
            return self.fair.peek(tasks);
        }
        let rt = if self.bandwidth.rt_held_back() { None } else { self.rt.peek() };
        rt.or_else(|| self.fair.peek(tasks))
    }

    /// Whether a task could be picked (a throttled RT class's cannot).
    pub fn has_runnable(&self) -> bool {
        self.dl.has_runnable() || (self.rt.has_runnable() && !self.bandwidth.rt_held_back()) || self.fair.has_runnable()
    }

    /// How long `cur` may run before RT throttling or the end of the fair
    /// server's boost acts (None: no such limit).
    #[inline]
    pub fn bandwidth_left(&self, cur: TaskId, tasks: &[Task]) -> Option<Nanos> {
        match class_of(tasks[cur].policy) {
            ClassRank::Rt => self.bandwidth.left(true),
            ClassRank::Fair => self.bandwidth.left(false),
            ClassRank::Dl => None,
        }
    }

    /// Should the woken task preempt the current one?
    pub fn should_preempt(&self, cur: TaskId, woken: TaskId, tasks: &[Task]) -> bool {
        let (pc, pw) = (tasks[cur].policy, tasks[woken].policy);
        let (cc, cw) = (class_of(pc), class_of(pw));
        if cw == ClassRank::Rt && self.bandwidth.rt_held_back() {
            return false;
        }
        if (cc, cw) == (ClassRank::Fair, ClassRank::Rt) && self.bandwidth.fair_boosted() {
            return false; // the fair server, a deadline entity, runs it
        }
        if cw != cc {
            return cw > cc;
        }
        match cw {
            ClassRank::Dl => self.dl.wakeup_preempt(cur, woken),
            ClassRank::Rt => pw.rt_priority() > pc.rt_priority(),
            ClassRank::Fair => self.fair.wakeup_preempt(cur, woken, tasks),
        }
    }

    /// The current task ran (or was charged) `ns`.
    pub fn charge(&mut self, cur: TaskId, tasks: &mut [Task], ns: Nanos) {
        match class_of(tasks[cur].policy) {
            ClassRank::Fair => {
                self.bandwidth.fair_ran(ns);
                self.fair.charge(cur, tasks, ns)
            }
            ClassRank::Rt => {
                self.bandwidth.rt_ran(ns);
                if let Policy::Rr(_) = tasks[cur].policy {
                    tasks[cur].rr_left = tasks[cur].rr_left.saturating_sub(ns);
                }
            }
            ClassRank::Dl => self.dl.charge(cur, ns),
        }
    }

    /// Timer tick with `cur` current; true asks for a reschedule.
    pub fn tick(&mut self, cur: TaskId, tasks: &mut [Task], now: Nanos) -> bool {
        match class_of(tasks[cur].policy) {
            ClassRank::Fair => self.fair.tick(cur, tasks, now),
            ClassRank::Rt => {
                let t = &mut tasks[cur];
                if let Policy::Rr(p) = t.policy {
                    if t.rr_left == 0 {
                        t.rr_left = rt::RR_TIMESLICE_NS;
                        // Slice used up: to the tail of its priority, and
                        // give way if anyone else waits there.
                        return self.rt.has_at(p);
                    }
                }
                false
            }
            ClassRank::Dl => false,
        }
    }

    /// Tells the fair class a task has a different policy now (a server
    /// lowered or restored its priority): caller must have removed it.
    pub fn is_rt_or_dl(tasks: &[Task], t: TaskId) -> bool {
        class_of(tasks[t].policy) != ClassRank::Fair
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::task::TaskKind;
    use proptest::prelude::*;

    /// A policy from a code; without `rt` only the fair class's (an RT or
    /// deadline task would otherwise win every pick and leave the fair
    /// class untested).
    fn policy(code: u8, rt: bool) -> Policy {
        match code % if rt { 6 } else { 3 } {
            0 => Policy::Other(0),
            1 => Policy::Other(5),
            2 => Policy::Idle,
            3 => Policy::Fifo(10 + code / 6 % 3),
            4 => Policy::Rr(10 + code / 6 % 3),
            _ => Policy::Deadline { runtime: 1_000_000, deadline: 5_000_000 + (code as u64 % 4) * 1_000_000, period: 10_000_000 },
        }
    }

    /// Who is queued and with what class state, to compare before and
    /// after a peek.
    fn snapshot(tasks: &[Task]) -> Vec<(u128, i64, Nanos, Nanos)> {
        tasks.iter().map(|t| (t.vruntime, t.counter, t.fair_slice_start, t.rr_left)).collect()
    }

    proptest! {
        /// The process-aware policy is shown the task a switch would go to
        /// before the switch happens: the peek must name exactly what the
        /// pick then returns, and leave every queue and slice as it was
        /// (a pick-and-put-back reordered fair tasks of equal vruntime).
        #[test]
        fn peek_names_what_pick_returns_and_changes_nothing(
            codes in proptest::collection::vec(any::<u8>(), 1..12),
            runs in proptest::collection::vec(0u64..80_000_000, 1..40),
            fair in prop_oneof![Just(FairKind::Cfs), Just(FairKind::Linux24)],
            rt in any::<bool>(),
        ) {
            let mut tasks: Vec<Task> = codes.iter().map(|&c| Task::new("t", policy(c, rt), TaskKind::Ksoftirqd)).collect();
            let mut sched = Scheduler::new(fair, 100);
            for task in tasks.iter_mut() {
                sched.fair.init_task(task);
            }
            let mut now = 0;
            for t in 0..tasks.len() {
                sched.enqueue(t, &mut tasks, now, true);
            }
            for ran in runs {
                let before = snapshot(&tasks);
                let peeked = sched.peek_next(&tasks);
                prop_assert_eq!(snapshot(&tasks), before.clone(), "the peek changed task state");
                prop_assert_eq!(sched.peek_next(&tasks), peeked, "a second peek disagrees");
                let picked = sched.pick_next(&mut tasks, now);
                prop_assert_eq!(picked, peeked);
                let Some(cur) = picked else { break };
                // Run it for a while (ticks for the 2.4 counters), then put
                // it back as a preempted task.
                now += ran;
                sched.charge(cur, &mut tasks, ran);
                for _ in 0..ran / 10_000_000 {
                    sched.tick(cur, &mut tasks, now);
                }
                sched.put_prev(cur, &mut tasks, now, true);
            }
        }
    }
}
