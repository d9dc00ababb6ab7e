//! A CFS-like fair class: virtual runtime weighted by nice, pick the
//! smallest, sleeper placement at min_vruntime − latency/2, tick and wake-up
//! preemption with Linux's default granularities (single CPU).

use super::FairClass;
use crate::task::{Policy, Task, TaskId};
use irqlab_analysis::Nanos;

/// sysctl_sched_latency (6 ms), min_granularity (0.75 ms),
/// wakeup_granularity (1 ms): Linux defaults for one CPU.
const LATENCY_NS: u64 = 6_000_000;
const MIN_GRAN_NS: u64 = 750_000;
const WAKEUP_GRAN_NS: u64 = 1_000_000;
const NICE_0_WEIGHT: u64 = 1024;
/// Linux's WEIGHT_IDLEPRIO: SCHED_IDLE tasks.
const IDLE_WEIGHT: u64 = 3;

/// kernel/sched/core.c sched_prio_to_weight[], nice -20..19.
const PRIO_TO_WEIGHT: [u64; 40] = [
    88761, 71755, 56483, 46273, 36291, 29154, 23254, 18705, 14949, 11916, 9548, 7620, 6100, 4904, 3906, 3121, 2501, 1991, 1586, 1277, 1024,
    820, 655, 526, 423, 335, 272, 215, 172, 137, 110, 87, 70, 56, 45, 36, 29, 23, 18, 15,
];

pub fn weight(policy: Policy) -> u64 {
    match policy {
        Policy::Other(nice) => PRIO_TO_WEIGHT[(nice.clamp(-20, 19) + 20) as usize],
        Policy::Idle => IDLE_WEIGHT,
        _ => NICE_0_WEIGHT,
    }
}

#[derive(Default)]
pub struct Cfs {
    queue: Vec<TaskId>,
    min_vruntime: u128,
    /// Sum of weights of queued tasks plus the current one.
    running: Option<TaskId>,
}

impl Cfs {
    pub fn new() -> Self {
        Self::default()
    }

    /// Queue index of the smallest vruntime; ties go to the one queued
    /// first (stable).
    fn leftmost(&self, tasks: &[Task]) -> Option<usize> {
        self.queue.iter().enumerate().min_by_key(|(i, &t)| (tasks[t].vruntime, *i)).map(|(i, _)| i)
    }

    fn total_weight(&self, tasks: &[Task]) -> u64 {
        let q: u64 = self.queue.iter().map(|&t| weight(tasks[t].policy)).sum();
        q + self.running.map_or(0, |t| weight(tasks[t].policy))
    }

    fn update_min(&mut self, tasks: &[Task]) {
        let mut m = self.running.map(|t| tasks[t].vruntime);
        for &t in &self.queue {
            let v = tasks[t].vruntime;
            m = Some(m.map_or(v, |x: u128| x.min(v)));
        }
        if let Some(m) = m {
            self.min_vruntime = self.min_vruntime.max(m);
        }
    }
}

impl FairClass for Cfs {
    fn enqueue(&mut self, t: TaskId, tasks: &mut [Task], _now: Nanos, wakeup: bool) {
        if wakeup {
            // place_entity(): a sleeper gets at most half a latency of credit.
            let floor = self.min_vruntime.saturating_sub((LATENCY_NS / 2) as u128 * 1024);
            tasks[t].vruntime = tasks[t].vruntime.max(floor);
        }
        self.queue.push(t);
    }

    fn put_prev(&mut self, t: TaskId, tasks: &mut [Task], _now: Nanos) {
        if self.running == Some(t) {
            self.running = None;
        }
        self.queue.push(t);
        self.update_min(tasks);
    }

    fn remove(&mut self, t: TaskId) {
        self.queue.retain(|&x| x != t);
        if self.running == Some(t) {
            self.running = None;
        }
    }

    fn pick(&mut self, tasks: &mut [Task], now: Nanos) -> Option<TaskId> {
        let i = self.leftmost(tasks)?;
        let t = self.queue.remove(i);
        self.running = Some(t);
        tasks[t].fair_slice_start = now;
        tasks[t].rr_left = 0; // reused: runtime in this slice
        self.update_min(tasks);
        Some(t)
    }

    fn peek(&self, tasks: &[Task]) -> Option<TaskId> {
        self.leftmost(tasks).map(|i| self.queue[i])
    }

    fn charge(&mut self, cur: TaskId, tasks: &mut [Task], ns: Nanos) {
        let w = weight(tasks[cur].policy);
        // vruntime is kept scaled by 1024 to stay exact for every weight.
        tasks[cur].vruntime += ns as u128 * 1024 * NICE_0_WEIGHT as u128 / w as u128;
        tasks[cur].rr_left += ns;
    }

    fn tick(&mut self, cur: TaskId, tasks: &mut [Task], _now: Nanos) -> bool {
        if self.queue.is_empty() {
            return false;
        }
        let n = (self.queue.len() + 1) as u64;
        let period = LATENCY_NS.max(MIN_GRAN_NS * n);
        let ideal = period * weight(tasks[cur].policy) / self.total_weight(tasks).max(1);
        let ran = tasks[cur].rr_left;
        if ran > ideal {
            return true;
        }
        if ran < MIN_GRAN_NS {
            return false;
        }
        let leftmost = self.queue.iter().map(|&t| tasks[t].vruntime).min().unwrap_or(0);
        tasks[cur].vruntime.saturating_sub(leftmost) > ideal as u128 * 1024
    }

    fn wakeup_preempt(&self, cur: TaskId, woken: TaskId, tasks: &[Task]) -> bool {
        let (pc, pw) = (tasks[cur].policy, tasks[woken].policy);
        if pc == Policy::Idle && pw != Policy::Idle {
            return true;
        }
        if pw == Policy::Idle {
            return false;
        }
        let gran = WAKEUP_GRAN_NS as u128 * 1024 * NICE_0_WEIGHT as u128 / weight(pw) as u128;
        tasks[cur].vruntime > tasks[woken].vruntime + gran
    }

    fn has_runnable(&self) -> bool {
        !self.queue.is_empty()
    }

    fn name(&self) -> &'static str {
        "cfs"
    }
}
