//! The summed demand of the periodic tasks above a task, kept as tasks are
//! added in priority order, for response-time analysis of large sets
//! (load-bounds paper eq. 3 with eq. 4 or eq. 6 for each periodic task).
//!
//! RTA evaluates `Σ_{i<k} demand_i(t)` at every step of every task's
//! fixed point; summed term by term that is one evaluation per task above.
//! But a task whose period exceeds the window `t` releases one job in it,
//! so its demand is its wcet (eq. 4) or `min(e, t)` (eq. 6): those terms
//! only need their sum of wcets, kept by period rank in a Fenwick tree. The
//! tasks with a period up to `t` (few, in a window of a few periods of the
//! task analysed) are evaluated one by one as before. The value is the
//! same as the term-by-term sum, to the nanosecond.

use crate::demand::{periodic_demand, DemandBound};
use crate::units::Nanos;

/// `Σ demand_i(t)` over the active periodic tasks, under eq. 4
/// (traditional) or eq. 6 (refined) of the load-bounds paper (§2); the
/// per-task terms are [`periodic_demand`]'s. Not for eq. 7, whose demand
/// within one period is not the wcet.
pub(crate) struct PeriodicDemandSum {
    bound: DemandBound,
    /// (period, wcet) of every periodic task of the set, by period.
    by_period: Vec<(Nanos, Nanos)>,
    /// Task index → its position in `by_period`.
    position: Vec<Option<usize>>,
    active: Vec<bool>,
    /// Fenwick tree over positions: wcets of the active tasks.
    wcets: Vec<u128>,
    active_wcet_total: u128,
    /// The largest wcet ever activated (an upper bound of the active ones):
    /// while `t` is at least this, `min(e, t) = e` for every task.
    max_wcet: Nanos,
}

impl PeriodicDemandSum {
    /// `tasks`: (task index, period, wcet) of every periodic task that may
    /// become active; `task_count`: the set's size. None is active yet.
    pub(crate) fn new(bound: DemandBound, task_count: usize, tasks: impl Iterator<Item = (usize, Nanos, Nanos)>) -> Self {
        debug_assert!(matches!(bound, DemandBound::Traditional | DemandBound::Refined));
        let mut items: Vec<(Nanos, Nanos, usize)> = tasks.map(|(i, p, e)| (p, e, i)).collect();
        items.sort_unstable();
        let mut position = vec![None; task_count];
        for (at, &(_, _, i)) in items.iter().enumerate() {
            position[i] = Some(at);
        }
        let n = items.len();
        PeriodicDemandSum {
            bound,
            by_period: items.into_iter().map(|(p, e, _)| (p, e)).collect(),
            position,
            active: vec![false; n],
            wcets: vec![0; n + 1],
            active_wcet_total: 0,
            max_wcet: 0,
        }
    }

    /// Makes task `task` (one given to [`Self::new`]) count, or not.
    pub(crate) fn set_active(&mut self, task: usize, on: bool) {
        let at = self.position[task].expect("a periodic task given to new");
        if self.active[at] == on {
            return;
        }
        self.active[at] = on;
        let wcet = self.by_period[at].1;
        self.max_wcet = self.max_wcet.max(wcet);
        let mut i = at + 1;
        while i < self.wcets.len() {
            if on {
                self.wcets[i] += wcet as u128;
            } else {
                self.wcets[i] -= wcet as u128;
            }
            i += i & i.wrapping_neg();
        }
        if on {
            self.active_wcet_total += wcet as u128;
        } else {
            self.active_wcet_total -= wcet as u128;
        }
    }

    /// Sum of the active wcets at positions before `end`.
    fn wcets_before(&self, end: usize) -> u128 {
        let (mut i, mut sum) = (end, 0);
        while i > 0 {
            sum += self.wcets[i];
            i &= i - 1;
        }
        sum
    }

    /// `Σ demand_i(t)` over the active tasks, unsaturated.
    pub(crate) fn demand(&self, t: Nanos) -> u128 {
        if t == 0 {
            return 0; // every bound's demand in an empty window
        }
        let split = self.by_period.partition_point(|&(p, _)| p <= t);
        let mut sum: u128 = 0;
        for (at, &(p, e)) in self.by_period[..split].iter().enumerate() {
            if self.active[at] {
                sum += periodic_demand(self.bound, p, e, t) as u128;
            }
        }
        // Periods above t: one job each, e (eq. 4) or min(e, t) (eq. 6).
        if self.bound == DemandBound::Refined && self.max_wcet > t {
            for (at, &(_, e)) in self.by_period.iter().enumerate().skip(split) {
                if self.active[at] {
                    sum += e.min(t) as u128;
                }
            }
        } else {
            sum += self.active_wcet_total - self.wcets_before(split);
        }
        sum
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn equals_the_term_by_term_sum(
            tasks in proptest::collection::vec((0u64..300, 0u64..200, any::<bool>()), 1..30),
            windows in proptest::collection::vec(0u64..2_000, 1..20),
            refined in any::<bool>(),
        ) {
            let bound = if refined { DemandBound::Refined } else { DemandBound::Traditional };
            let mut sum = PeriodicDemandSum::new(bound, tasks.len(), tasks.iter().enumerate().map(|(i, &(p, e, _))| (i, p, e)));
            // Activate all, then drop the inactive ones (both directions).
            for i in 0..tasks.len() {
                sum.set_active(i, true);
            }
            for (i, &(_, _, on)) in tasks.iter().enumerate() {
                sum.set_active(i, on);
            }
            for t in windows {
                let expected: u128 =
                    tasks.iter().filter(|x| x.2).map(|&(p, e, _)| periodic_demand(bound, p, e, t) as u128).sum();
                prop_assert_eq!(sum.demand(t), expected, "t = {}", t);
            }
        }
    }
}
