//! EDF processor-demand test (Baruah, Rosier & Howell 1990), with the
//! interferers of the load-bounds paper (drivers, servers, measured curves)
//! running above the EDF-scheduled tasks, as interrupt work does.
//!
//! Not in the load-bounds paper, which treats fixed priorities only; it is
//! offered because users of such a tool expect it. The interferers' demand
//! bound (eq. 2 of the load-bounds paper) is taken out of the supply:
//! schedulable iff for every window `t`,
//! `Σ_k dbf_k(t) ≤ t - interference(t)`.

use crate::task::PeriodicTask;
use crate::units::Nanos;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// EDF demand bound of one task: the work of all its jobs with both release
/// and deadline inside a window of length `t`:
/// `max(0, floor((t - d)/p) + 1) · e`.
pub fn edf_demand(task: &PeriodicTask, window: Nanos) -> Nanos {
    if window < task.deadline_ns {
        return 0;
    }
    ((window - task.deadline_ns) / task.period_ns + 1).saturating_mul(task.wcet_ns)
}

/// The outcome of [`edf_test`].
#[derive(Debug, Clone, PartialEq)]
pub struct EdfOutcome {
    /// Every deadline met (processor-demand criterion held at every checked point).
    pub schedulable: bool,
    /// Smallest `t - interference(t) - Σ dbf(t)` over the checked deadlines
    /// (ns); `None` when the utilisation exceeds 1 (no finite check).
    pub min_slack_ns: Option<i64>,
    /// False when the check stopped at `max_points` deadlines before it
    /// could decide (then `schedulable` is false, to be safe).
    pub decided: bool,
}

/// Processor-demand test of `tasks` under EDF with `interference` (any
/// monotone demand bound that grows no faster than time, e.g. eqs. 6/7/10
/// of the load-bounds paper, taken by the interferers above EDF).
/// `interference_line` = (slope, intercept) of a line above the
/// interference; it tells how far the check must go. At most `max_points`
/// deadlines are checked.
pub fn edf_test(
    tasks: &[PeriodicTask],
    interference: impl Fn(Nanos) -> Nanos,
    interference_line: (f64, f64),
    max_points: usize,
) -> EdfOutcome {
    let (slope, intercept) = interference_line;
    let utilization: f64 = tasks.iter().map(PeriodicTask::utilization).sum::<f64>() + slope;
    if utilization > 1.0 + 1e-12 {
        return EdfOutcome { schedulable: false, min_slack_ns: None, decided: true };
    }
    // Σ dbf(t) + I(t) ≤ U t + C, so nothing can fail beyond C / (1 - U).
    let constant: f64 = intercept + tasks.iter().map(|t| t.utilization() * t.period_ns.saturating_sub(t.deadline_ns) as f64).sum::<f64>();
    let last_deadline = tasks.iter().map(|t| t.deadline_ns).max().unwrap_or(0);
    let horizon = if utilization < 1.0 - 1e-12 {
        let bound = constant / (1.0 - utilization);
        if bound >= u64::MAX as f64 / 2.0 {
            Nanos::MAX
        } else {
            (bound.ceil() as Nanos).max(last_deadline)
        }
    } else if slope == 0.0 && intercept == 0.0 {
        // U = 1 without interference: the synchronous schedule repeats every
        // hyperperiod, so one hyperperiod past the last deadline decides.
        tasks.iter().try_fold(1u64, |h, t| lcm(h, t.period_ns)).and_then(|h| h.checked_add(last_deadline)).unwrap_or(Nanos::MAX)
    } else {
        Nanos::MAX
    };
    let mut next: BinaryHeap<Reverse<(Nanos, usize)>> = tasks.iter().enumerate().map(|(i, t)| Reverse((t.deadline_ns, i))).collect();
    let mut demand: Nanos = 0;
    let mut min_slack = i64::MAX;
    let mut points = 0usize;
    while let Some(&Reverse((t, _))) = next.peek() {
        if t > horizon {
            break;
        }
        if points >= max_points {
            return EdfOutcome { schedulable: false, min_slack_ns: Some(min_slack), decided: false };
        }
        while let Some(&Reverse((u, i))) = next.peek() {
            if u != t {
                break;
            }
            next.pop();
            demand = demand.saturating_add(tasks[i].wcet_ns);
            if let Some(n) = u.checked_add(tasks[i].period_ns) {
                next.push(Reverse((n, i)));
            }
        }
        points += 1;
        let slack = t as i128 - interference(t) as i128 - demand as i128;
        min_slack = min_slack.min(slack.clamp(i64::MIN as i128, i64::MAX as i128) as i64);
    }
    if points == 0 {
        min_slack = 0;
    }
    EdfOutcome { schedulable: min_slack >= 0, min_slack_ns: Some(min_slack), decided: true }
}

fn lcm(a: u64, b: u64) -> Option<u64> {
    fn gcd(a: u64, b: u64) -> u64 {
        if b == 0 {
            a
        } else {
            gcd(b, a % b)
        }
    }
    (a / gcd(a, b).max(1)).checked_mul(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task(p: u64, e: u64, d: u64) -> PeriodicTask {
        PeriodicTask { period_ns: p, wcet_ns: e, deadline_ns: d }
    }

    #[test]
    fn implicit_deadlines_need_only_utilization_at_most_one() {
        let full = [task(4, 2, 4), task(6, 3, 6)]; // U = 1
        assert!(edf_test(&full, |_| 0, (0.0, 0.0), 1_000_000).schedulable);
        let over = [task(4, 2, 4), task(6, 4, 6)];
        assert!(!edf_test(&over, |_| 0, (0.0, 0.0), 1_000_000).schedulable);
    }

    #[test]
    fn constrained_deadlines_can_fail_below_utilization_one() {
        // Both due at 3 with 2 units each: 4 > 3 even though U = 0.4.
        let set = [task(10, 2, 3), task(10, 2, 3)];
        let out = edf_test(&set, |_| 0, (0.0, 0.0), 1_000_000);
        assert!(!out.schedulable);
        assert_eq!(out.min_slack_ns, Some(-1));
    }

    #[test]
    fn interference_takes_supply() {
        let set = [task(10, 5, 10)];
        assert!(edf_test(&set, |_| 0, (0.0, 0.0), 1_000_000).schedulable);
        // A driver that can take 6 of any 10 leaves 4 < 5.
        let driver = |t: Nanos| crate::demand::refined_demand(10, 6, t);
        assert!(!edf_test(&set, driver, (0.6, 6.0), 1_000_000).schedulable);
        let light = |t: Nanos| crate::demand::refined_demand(10, 4, t);
        assert!(edf_test(&set, light, (0.4, 4.0), 1_000_000).schedulable);
    }
}
