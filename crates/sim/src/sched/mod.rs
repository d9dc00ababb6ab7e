//! The process scheduler: classes in Linux's order — deadline (EDF + CBS),
//! real-time (FIFO/RR, priorities 1–99), then one fair class chosen per
//! scenario (CFS-like, or the tick-charged Linux 2.4 epoch scheduler).
//! SCHED_IDLE tasks live in the fair class with weight 3, as in Linux.
//!
//! To add a fair-class scheduler, implement [`FairClass`] and add a name in
//! the scenario parser. Servers (sporadic, polling, deferrable) sit on top:
//! they change a task's priority or throttle it (see [`crate::server`]).

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
        Scheduler { rt: rt::RtClass::new(), dl: deadline::DlClass::default(), fair }
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
        if let Some(t) = self.rt.pick() {
            return Some(t);
        }
        self.fair.pick(tasks, now)
    }

    pub fn has_runnable(&self) -> bool {
        self.dl.has_runnable() || self.rt.has_runnable() || self.fair.has_runnable()
    }

    /// Should the woken task preempt the current one?
    pub fn should_preempt(&self, cur: TaskId, woken: TaskId, tasks: &[Task]) -> bool {
        let (pc, pw) = (tasks[cur].policy, tasks[woken].policy);
        let (cc, cw) = (class_of(pc), class_of(pw));
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
            ClassRank::Fair => self.fair.charge(cur, tasks, ns),
            ClassRank::Rt => {
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
