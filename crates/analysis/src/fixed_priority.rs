//! Fixed-priority tests of one task against the demand of the tasks that
//! can preempt it: the load test (load-bounds paper eq. 8) and exact
//! response-time analysis (eq. 3 solved for the smallest window).
//!
//! Both take the interference as a function `Δ → demand` (ns), so any
//! monotone demand bound works: eqs. 4/6/7 for periodic tasks, server
//! demand, the hyperbola of eq. 10 or a measured curve.

use crate::units::Nanos;

/// Load test, load-bounds paper eq. 8 (in demand form, eq. 3 at Δ = d_k):
/// τk always meets its deadline `d_k ≤ p_k` if
/// `e_k + Σ_{i<k} demand_i(d_k) ≤ d_k`, i.e. `e_k/d_k + Σ load_i(d_k) ≤ 1`.
/// Returns the left-hand side of eq. 8 (the load at the deadline).
pub fn load_at_deadline(wcet: Nanos, deadline: Nanos, interference: impl Fn(Nanos) -> Nanos) -> f64 {
    (wcet as f64 + interference(deadline) as f64) / deadline.max(1) as f64
}

/// The verdict of eq. 8, in integer nanoseconds so that it agrees exactly
/// with [`response_time`] (a task that passes eq. 8 has `R ≤ d`).
pub fn passes_load_test(wcet: Nanos, deadline: Nanos, interference: impl Fn(Nanos) -> Nanos) -> bool {
    wcet.saturating_add(interference(deadline)) <= deadline
}

/// Bounds on how long [`response_time`] searches before calling a response
/// time unbounded.
#[derive(Debug, Clone, Copy)]
pub struct Horizon {
    /// No window longer than this is considered (ns).
    pub max_window: Nanos,
    /// No more jobs than this in one level-k busy period.
    pub max_jobs: u64,
    /// No more fixed-point steps than this per job.
    pub max_steps: u64,
}

impl Horizon {
    /// A horizon of `factor` × max(deadline, period), generous for any task
    /// set whose utilisation is below 1.
    pub fn for_task(period: Nanos, deadline: Nanos) -> Self {
        Horizon { max_window: period.max(deadline).saturating_mul(10_000), max_jobs: 100_000, max_steps: 1_000_000 }
    }
}

/// The smallest window `t ≥ work` with `work + interference(t) ≤ t`, by the
/// fixed-point iteration `t ← work + interference(t)` (load-bounds paper
/// eq. 3: the job is done once its own work and everything that can preempt
/// it fit into the window). `None` if `t` would pass the horizon.
pub fn smallest_window(work: Nanos, interference: &impl Fn(Nanos) -> Nanos, horizon: &Horizon) -> Option<Nanos> {
    smallest_window_from(work, work, interference, horizon)
}

/// [`smallest_window`] with the iteration started at `start`, which must
/// not exceed the answer (a known lower bound of it: the iteration from
/// any such point climbs to the same smallest fixed point, in fewer steps).
fn smallest_window_from(work: Nanos, start: Nanos, interference: &impl Fn(Nanos) -> Nanos, horizon: &Horizon) -> Option<Nanos> {
    if start > horizon.max_window {
        return None;
    }
    let mut t = start.max(work);
    for _ in 0..horizon.max_steps {
        let next = work.saturating_add(interference(t));
        if next <= t {
            return Some(t);
        }
        if next > horizon.max_window {
            return None;
        }
        t = next;
    }
    None
}

/// Worst-case response time of a periodic/sporadic task (period `p`, wcet
/// `e`) under fixed-priority preemptive scheduling, with the demand of the
/// tasks that can preempt it given by `interference` (any monotone demand
/// bound, load-bounds paper eq. 2; with eq. 4 this is the classic exact
/// RTA `R = e + Σ ceil(R/p_i) e_i`).
///
/// Deadlines longer than the period are handled by the level-k busy period
/// (Lehoczky 1990): job q (0-based) of the busy period finishes by
/// `w_q = smallest t with (q+1) e + interference(t) ≤ t`, its response is
/// `w_q - q p`, and the busy period ends at the first q with `w_q ≤ (q+1) p`.
/// Returns `None` when the response time is unbounded (or beyond the horizon).
pub fn response_time(period: Nanos, wcet: Nanos, interference: impl Fn(Nanos) -> Nanos, horizon: &Horizon) -> Option<Nanos> {
    response_time_from(period, wcet, interference, horizon, 0).map(|(worst, _)| worst)
}

/// [`response_time`] with the first job's window searched from
/// `first_start`, a lower bound of it (0: none known), and that window
/// returned beside the response time: `(R, w_0)`.
///
/// Each later job q of the busy period starts from `w_{q-1} + e`: its
/// window is the fixed point of `(q+1) e + I(t)`, at least `e` more than
/// job q-1's (`w_q ≥ w_{q-1}` as the work only grew, so
/// `w_q = e + q e + I(w_q) ≥ e + q e + I(w_{q-1}) = e + w_{q-1}`).
pub fn response_time_from(
    period: Nanos,
    wcet: Nanos,
    interference: impl Fn(Nanos) -> Nanos,
    horizon: &Horizon,
    first_start: Nanos,
) -> Option<(Nanos, Nanos)> {
    let mut worst: Nanos = 0;
    let mut first_window = 0;
    let mut start = first_start;
    for q in 0..horizon.max_jobs {
        let work = (q + 1).checked_mul(wcet)?;
        let finish = smallest_window_from(work, start, &interference, horizon)?;
        if q == 0 {
            first_window = finish;
        }
        worst = worst.max(finish.saturating_sub(q.saturating_mul(period)));
        if finish <= (q + 1).saturating_mul(period) {
            return Some((worst, first_window));
        }
        start = finish.saturating_add(wcet);
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::demand::{periodic_demand, DemandBound};

    /// Interference of periodic tasks `(p, e)` under `bound`.
    fn periodic(tasks: &[(u64, u64)], bound: DemandBound) -> impl Fn(Nanos) -> Nanos + '_ {
        move |t| tasks.iter().map(|&(p, e)| periodic_demand(bound, p, e, t)).sum()
    }

    fn rta(tasks: &[(u64, u64)], bound: DemandBound) -> Vec<Option<Nanos>> {
        (0..tasks.len())
            .map(|k| {
                let (p, e) = tasks[k];
                response_time(p, e, periodic(&tasks[..k], bound), &Horizon::for_task(p, p))
            })
            .collect()
    }

    #[test]
    fn textbook_response_times() {
        // Burns & Wellings, "Real-Time Systems and Programming Languages",
        // §13 (RTA worked example): (T, C) = (7, 3), (12, 3), (20, 5) in
        // priority order; response times 3, 6 and 20.
        let set = [(7, 3), (12, 3), (20, 5)];
        assert_eq!(rta(&set, DemandBound::Traditional), [Some(3), Some(6), Some(20)]);
        // A rate-monotonic set of the kind used in Buttazzo, "Hard Real-Time
        // Computing Systems" ch. 4: (T, C) = (4, 1), (6, 2), (10, 3); by hand,
        // R3 iterates 6 → 7 → 9 → 10, so response times 1, 3 and 10.
        let set = [(4, 1), (6, 2), (10, 3)];
        assert_eq!(rta(&set, DemandBound::Traditional), [Some(1), Some(3), Some(10)]);
        // The refined bound (eq. 6) gives the same exact response times.
        assert_eq!(rta(&set, DemandBound::Refined), [Some(1), Some(3), Some(10)]);
    }

    #[test]
    fn deadline_beyond_period_uses_the_busy_period() {
        // Lehoczky (1990), also in Burns & Wellings §13 (arbitrary
        // deadlines): τ1 = (T 70, C 26), τ2 = (T 100, C 62), U = 0.991. The
        // first job of τ2 finishes at 114 > 100, so later jobs of the busy
        // period count: responses 114, 102, 116, 104, 118, 106, 94 — the
        // worst is the fifth job (q = 4), 118; the busy period ends at 694.
        let hp = [(70u64, 26u64)];
        let interference = periodic(&hp, DemandBound::Traditional);
        let horizon = Horizon::for_task(100, 200);
        assert_eq!(smallest_window(62, &interference, &horizon), Some(114));
        assert_eq!(smallest_window(5 * 62, &interference, &horizon), Some(518));
        assert_eq!(response_time(100, 62, &interference, &horizon), Some(118));
    }

    #[test]
    fn overload_is_unbounded() {
        let hp = [(10u64, 6u64)];
        assert_eq!(response_time(10, 5, periodic(&hp, DemandBound::Traditional), &Horizon::for_task(10, 10)), None);
    }

    #[test]
    fn load_test_at_the_deadline() {
        // p=7, e=2 interferer; τk with e = 5, d = 8: traditional demand 4 at
        // Δ = 8 fails eq. 8 (5 + 4 > 8), the refined demand 3 passes it.
        let hp = [(7u64, 2u64)];
        assert!(!passes_load_test(5, 8, periodic(&hp, DemandBound::Traditional)));
        assert!(passes_load_test(5, 8, periodic(&hp, DemandBound::Refined)));
        assert_eq!(load_at_deadline(5, 8, periodic(&hp, DemandBound::Refined)), 1.0);
    }
}
