//! SCHED_DEADLINE: EDF among deadline tasks, each a constant-bandwidth
//! server (runtime Q, relative deadline D, period P), with Linux's wake-up
//! rule (dl_entity_overflow) and throttling until the next period when the
//! runtime is used up (dl_runtime_exceeded → replenish_dl_entity).

use crate::task::{Policy, Task, TaskId};
use irqlab_analysis::Nanos;

#[derive(Debug, Clone, Copy, Default)]
pub struct DlState {
    pub deadline: Nanos,
    pub runtime_left: i64,
    pub throttled: bool,
}

#[derive(Default)]
pub struct DlClass {
    queue: Vec<TaskId>,
    state: Vec<DlState>,
}

fn params(p: Policy) -> (Nanos, Nanos, Nanos) {
    match p {
        Policy::Deadline { runtime, deadline, period } => (runtime, deadline, period),
        _ => unreachable!("deadline task"),
    }
}

impl DlClass {
    fn st(&mut self, t: TaskId) -> &mut DlState {
        if self.state.len() <= t {
            self.state.resize(t + 1, DlState::default());
        }
        &mut self.state[t]
    }

    pub fn state(&self, t: TaskId) -> DlState {
        self.state.get(t).copied().unwrap_or_default()
    }

    pub fn enqueue(&mut self, t: TaskId, tasks: &mut [Task], now: Nanos, wakeup: bool) {
        let (q, d, _) = params(tasks[t].policy);
        let st = self.st(t);
        if wakeup {
            // CBS: keep (deadline, runtime) only if the remaining runtime
            // fits the remaining time at the reserved bandwidth.
            let overflow = st.deadline <= now || (st.runtime_left.max(0) as u128) * d as u128 > (st.deadline - now) as u128 * q as u128;
            if overflow {
                st.deadline = now + d;
                st.runtime_left = q as i64;
            }
        }
        if !st.throttled {
            self.queue.push(t);
        }
    }

    pub fn remove(&mut self, t: TaskId) {
        self.queue.retain(|&x| x != t);
    }

    pub fn pick(&mut self) -> Option<TaskId> {
        let i = self.earliest()?;
        Some(self.queue.remove(i))
    }

    /// The task `pick` would return, left queued.
    pub fn peek(&self) -> Option<TaskId> {
        self.earliest().map(|i| self.queue[i])
    }

    /// Queue index of the earliest deadline; ties go to the one queued first.
    fn earliest(&self) -> Option<usize> {
        self.queue.iter().enumerate().min_by_key(|(i, &t)| (self.state[t].deadline, *i)).map(|(i, _)| i)
    }

    pub fn has_runnable(&self) -> bool {
        !self.queue.is_empty()
    }

    pub fn wakeup_preempt(&self, cur: TaskId, woken: TaskId) -> bool {
        self.state(woken).deadline < self.state(cur).deadline
    }

    pub fn charge(&mut self, cur: TaskId, ns: Nanos) {
        self.st(cur).runtime_left -= ns as i64;
    }

    /// Runtime left before enforcement (0 when exhausted).
    pub fn budget_left(&self, t: TaskId) -> Nanos {
        self.state(t).runtime_left.max(0) as Nanos
    }

    /// Marks a task whose runtime ran out as throttled; returns when it
    /// is replenished (the start of its next period).
    pub fn throttle(&mut self, t: TaskId, policy: Policy) -> Nanos {
        let (_, d, p) = params(policy);
        let st = self.st(t);
        st.throttled = true;
        st.deadline + p - d
    }

    /// The replenishment timer fired: push the deadline forward a period
    /// at a time until the runtime is positive again.
    pub fn replenish(&mut self, t: TaskId, policy: Policy) {
        let (q, _, p) = params(policy);
        let st = self.st(t);
        while st.runtime_left <= 0 {
            st.deadline += p;
            st.runtime_left += q as i64;
        }
        st.throttled = false;
    }

    pub fn is_throttled(&self, t: TaskId) -> bool {
        self.state(t).throttled
    }
}
