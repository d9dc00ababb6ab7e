//! SCHED_FIFO / SCHED_RR: one FIFO queue per priority and a bitmap, as
//! Linux's rt_prio_array.

use crate::task::{Policy, TaskId};
use std::collections::VecDeque;

/// Linux's RR_TIMESLICE (100 ms).
pub const RR_TIMESLICE_NS: u64 = 100_000_000;

pub struct RtClass {
    queues: Vec<VecDeque<TaskId>>,
    bitmap: u128,
}

impl Default for RtClass {
    fn default() -> Self {
        Self::new()
    }
}

impl RtClass {
    pub fn new() -> Self {
        RtClass { queues: (0..100).map(|_| VecDeque::new()).collect(), bitmap: 0 }
    }

    /// `at_head`: a preempted task keeps its place at the head.
    pub fn enqueue(&mut self, t: TaskId, policy: Policy, at_head: bool) {
        let p = policy.rt_priority().expect("rt task") as usize;
        if at_head {
            self.queues[p].push_front(t);
        } else {
            self.queues[p].push_back(t);
        }
        self.bitmap |= 1u128 << p;
    }

    pub fn remove(&mut self, t: TaskId) {
        // Only the non-empty levels (the kernel calls this at every block,
        // usually for a task that is in no queue at all).
        let mut levels = self.bitmap;
        while levels != 0 {
            let p = levels.trailing_zeros() as usize;
            levels &= levels - 1;
            self.queues[p].retain(|&x| x != t);
            if self.queues[p].is_empty() {
                self.bitmap &= !(1u128 << p);
            }
        }
    }

    pub fn pick(&mut self) -> Option<TaskId> {
        if self.bitmap == 0 {
            return None;
        }
        let p = 127 - self.bitmap.leading_zeros() as usize;
        let t = self.queues[p].pop_front();
        if self.queues[p].is_empty() {
            self.bitmap &= !(1u128 << p);
        }
        t
    }

    /// The task `pick` would return, left queued.
    pub fn peek(&self) -> Option<TaskId> {
        if self.bitmap == 0 {
            return None;
        }
        let p = 127 - self.bitmap.leading_zeros() as usize;
        self.queues[p].front().copied()
    }

    pub fn has_runnable(&self) -> bool {
        self.bitmap != 0
    }

    pub fn has_at(&self, p: u8) -> bool {
        self.bitmap & (1u128 << p) != 0
    }
}
