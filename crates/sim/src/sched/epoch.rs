//! The Linux 2.4 scheduler for SCHED_OTHER: per-task tick counters,
//! `goodness()`, and the epoch recalculation when every runnable task has
//! used its counter (kernel/sched.c of 2.4.20). Time is charged only by the
//! tick: whoever is current when the timer interrupt fires loses a tick,
//! even if interrupts and bottom halves took the whole tick — the "tick
//! charging" the BH-threshold paper blames for its scheduling anomaly.

use super::FairClass;
use crate::task::{Policy, Task, TaskId};
use irqlab_analysis::Nanos;

pub struct Epoch24 {
    /// Runnable tasks in 2.4 runqueue order (woken tasks go to the front).
    queue: Vec<TaskId>,
    /// Every task of the class, runnable or not (recalculation visits all).
    members: Vec<TaskId>,
    hz: u32,
}

impl Epoch24 {
    pub fn new(hz: u32) -> Self {
        Epoch24 { queue: Vec::new(), members: Vec::new(), hz }
    }

    /// NICE_TO_TICKS(nice) of 2.4: TICK_SCALE(20 - nice) + 1, where
    /// TICK_SCALE shifts by HZ (x>>2 below 200 Hz ... x<<2 from 1600 Hz).
    pub fn nice_to_ticks(&self, nice: i8) -> i64 {
        let x = (20 - nice as i64).max(0);
        let scaled = match self.hz {
            h if h < 200 => x >> 2,
            h if h < 400 => x >> 1,
            h if h < 800 => x,
            h if h < 1600 => x << 1,
            _ => x << 2,
        };
        scaled + 1
    }

    fn nice(policy: Policy) -> i8 {
        match policy {
            Policy::Other(n) => n,
            _ => 19,
        }
    }

    /// goodness(): 0 when the counter is used up, else counter + 20 − nice.
    fn goodness(task: &Task) -> i64 {
        Self::goodness_with(task.counter, task.policy)
    }

    fn goodness_with(counter: i64, policy: Policy) -> i64 {
        if counter <= 0 {
            0
        } else {
            counter + 20 - Self::nice(policy) as i64
        }
    }

    /// A task's counter after an epoch recalculation.
    fn recalculated(&self, task: &Task) -> i64 {
        (task.counter >> 1) + self.nice_to_ticks(Self::nice(task.policy))
    }

    fn recalculate(&self, tasks: &mut [Task]) {
        for &t in &self.members {
            tasks[t].counter = self.recalculated(&tasks[t]);
        }
    }

    /// Queue index of the task schedule() runs next, and whether an epoch
    /// recalculation comes first: when every runnable counter is used up,
    /// the best by the counters the recalculation will give (each at least
    /// NICE_TO_TICKS >= 1, so one recalculation always finds a task).
    fn choice(&self, tasks: &[Task]) -> Option<(usize, bool)> {
        let (i, g) = self.best(|t| Self::goodness(&tasks[t]))?;
        if g > 0 {
            return Some((i, false));
        }
        let (i, _) = self.best(|t| Self::goodness_with(self.recalculated(&tasks[t]), tasks[t].policy))?;
        Some((i, true))
    }

    /// Queue index and goodness of the best runnable task; ties go to the
    /// one nearer the front (2.4's runqueue walk keeps the first maximum).
    fn best(&self, goodness: impl Fn(TaskId) -> i64) -> Option<(usize, i64)> {
        let mut best: Option<(usize, i64)> = None;
        for (i, &t) in self.queue.iter().enumerate() {
            let g = goodness(t);
            if best.is_none_or(|(_, c)| g > c) {
                best = Some((i, g));
            }
        }
        best
    }
}

impl FairClass for Epoch24 {
    fn init_task(&self, task: &mut Task) {
        task.counter = self.nice_to_ticks(Self::nice(task.policy));
    }

    fn enqueue(&mut self, t: TaskId, _tasks: &mut [Task], _now: Nanos, _wakeup: bool) {
        if !self.members.contains(&t) {
            self.members.push(t);
        }
        self.queue.insert(0, t);
    }

    fn put_prev(&mut self, t: TaskId, _tasks: &mut [Task], _now: Nanos) {
        // schedule() weighs prev first; ties keep it running.
        self.queue.insert(0, t);
    }

    fn remove(&mut self, t: TaskId) {
        self.queue.retain(|&x| x != t);
    }

    fn pick(&mut self, tasks: &mut [Task], _now: Nanos) -> Option<TaskId> {
        let (i, new_epoch) = self.choice(tasks)?;
        if new_epoch {
            self.recalculate(tasks);
        }
        Some(self.queue.remove(i))
    }

    fn peek(&self, tasks: &[Task]) -> Option<TaskId> {
        self.choice(tasks).map(|(i, _)| self.queue[i])
    }

    fn charge(&mut self, _cur: TaskId, _tasks: &mut [Task], _ns: Nanos) {}

    fn tick(&mut self, cur: TaskId, tasks: &mut [Task], _now: Nanos) -> bool {
        let t = &mut tasks[cur];
        t.counter -= 1;
        if t.counter <= 0 {
            t.counter = 0;
            return true;
        }
        false
    }

    fn wakeup_preempt(&self, cur: TaskId, woken: TaskId, tasks: &[Task]) -> bool {
        Self::goodness(&tasks[woken]) > Self::goodness(&tasks[cur])
    }

    fn has_runnable(&self) -> bool {
        !self.queue.is_empty()
    }

    fn name(&self) -> &'static str {
        "linux-2.4"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nice_to_ticks_matches_2_4() {
        // HZ=100: nice 0 -> 6 ticks (60 ms), nice 19 -> 1 tick, nice -20 -> 11.
        let e = Epoch24::new(100);
        assert_eq!(e.nice_to_ticks(0), 6);
        assert_eq!(e.nice_to_ticks(19), 1);
        assert_eq!(e.nice_to_ticks(-20), 11);
        assert_eq!(Epoch24::new(1000).nice_to_ticks(0), 41);
    }
}
