//! Demand and load bounds of one periodic or sporadic task.
//!
//! Load-bounds paper (Lewandowski et al.; `docs/papers.md` §3)
//! §2: the most CPU time a task with period (minimum separation) `p` and
//! worst-case execution time `e` can demand in any window of length Δ
//! (eqs. 4, 6, 7), and the same divided by Δ, the load (eqs. 9, 10).
//!
//! Demands are integer nanoseconds; a bound that is not an integer (the
//! linear one) is rounded *up*, so it stays an upper bound.

use crate::units::Nanos;
use serde::{Deserialize, Serialize};

/// Which demand bound a test uses for periodic and sporadic interferers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DemandBound {
    /// `ceil(Δ/p) e` — load-bounds paper eq. 4.
    Traditional,
    /// `j e + min(e, Δ - j p)`, `j = floor(Δ/p)` — eq. 6.
    Refined,
    /// `min(Δ, u (Δ + p - e))` — eq. 7.
    Linear,
}

impl DemandBound {
    /// The name used on the command line and in JSON.
    pub fn name(self) -> &'static str {
        match self {
            DemandBound::Traditional => "traditional",
            DemandBound::Refined => "refined",
            DemandBound::Linear => "linear",
        }
    }
}

/// Traditional demand bound, load-bounds paper eq. 4: `ceil(Δ/p) · e`.
///
/// It counts the last job whole even when the window is too short to hold
/// it, so it can exceed Δ.
pub fn traditional_demand(period: Nanos, wcet: Nanos, window: Nanos) -> Nanos {
    // Within one period, one job: no division (RTA sums this over every
    // interferer at every step, and most windows are shorter than most
    // periods).
    if window <= period {
        return if window == 0 { 0 } else { wcet };
    }
    window.div_ceil(period.max(1)).saturating_mul(wcet)
}

/// Refined demand bound, load-bounds paper eq. 6:
/// `j e + min(e, Δ - j p)` with `j = floor(Δ/p)`.
///
/// Only the part of the last job that fits into the window counts; for
/// p = 7, e = 2 at Δ = 8 this is 3 where eq. 4 gives 4.
pub fn refined_demand(period: Nanos, wcet: Nanos, window: Nanos) -> Nanos {
    if window < period {
        return wcet.min(window); // j = 0, without the division
    }
    let period = period.max(1);
    let jobs = window / period;
    let rest = window - jobs * period;
    jobs.saturating_mul(wcet).saturating_add(wcet.min(rest))
}

/// Linear demand bound, load-bounds paper eq. 7: `min(Δ, u (Δ + p - e))`,
/// the straight line through the points Δ = j p + e where eqs. 4 and 6 meet.
/// Exact rational arithmetic, rounded up to whole nanoseconds.
pub fn linear_demand(period: Nanos, wcet: Nanos, window: Nanos) -> Nanos {
    let period = period.max(1) as u128;
    let wcet = (wcet as u128).min(period);
    let line = (wcet * (window as u128 + period - wcet)).div_ceil(period);
    line.min(window as u128) as Nanos
}

/// The demand bound `bound` of a periodic task at window `window`.
pub fn periodic_demand(bound: DemandBound, period: Nanos, wcet: Nanos, window: Nanos) -> Nanos {
    match bound {
        DemandBound::Traditional => traditional_demand(period, wcet, window),
        DemandBound::Refined => refined_demand(period, wcet, window),
        DemandBound::Linear => linear_demand(period, wcet, window),
    }
}

/// Load = demand / Δ (load-bounds paper §2, "load"); eq. 9 when `bound` is
/// [`DemandBound::Refined`]. At Δ = 0 the limit from the right is returned
/// (1 for the refined and linear bounds, infinity for the traditional one).
pub fn periodic_load(bound: DemandBound, period: Nanos, wcet: Nanos, window: Nanos) -> f64 {
    if window == 0 {
        return match bound {
            DemandBound::Traditional if wcet > 0 => f64::INFINITY,
            _ if wcet > 0 => 1.0,
            _ => 0.0,
        };
    }
    periodic_demand(bound, period, wcet, window) as f64 / window as f64
}

/// Hyperbolic load bound, load-bounds paper eq. 10:
/// `min(1, u (1 + (p - e)/Δ))` with `u = e/p`. Written in terms of `u` and
/// `p` (as the fitted empirical bound of §4 is), `e = u p`, so it reads
/// `min(1, u + u (1 - u) p / Δ)`.
pub fn hyperbolic_load(utilization: f64, period: Nanos, window: Nanos) -> f64 {
    if window == 0 {
        return if utilization > 0.0 { 1.0 } else { 0.0 };
    }
    let u = utilization;
    (u + u * (1.0 - u) * period as f64 / window as f64).min(1.0)
}

/// Demand of the hyperbolic load bound (eq. 10 times Δ):
/// `min(Δ, u Δ + u (1 - u) p)`, rounded up to whole nanoseconds.
pub fn hyperbolic_demand(utilization: f64, period: Nanos, window: Nanos) -> Nanos {
    let u = utilization;
    let line = u * window as f64 + u * (1.0 - u) * period as f64;
    (line.ceil() as Nanos).min(window)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn paper_check_values_p7_e2() {
        // Load-bounds paper §2: "suppose p_i = d_i = 7 and e_i = 2, and consider
        // the case Δ = 8 ... the maximum amount of time τi can execute in any
        // interval of length 8 is 3, not 4."
        assert_eq!(refined_demand(7, 2, 8), 3);
        assert_eq!(traditional_demand(7, 2, 8), 4);
        // Eq. 7 at the points Δ = j p + e meets eqs. 4 and 6.
        for j in 0..5 {
            let delta = j * 7 + 2;
            assert_eq!(linear_demand(7, 2, delta), refined_demand(7, 2, delta));
            assert_eq!(traditional_demand(7, 2, delta), refined_demand(7, 2, delta));
        }
    }

    #[test]
    fn every_load_bound_tends_to_two_sevenths() {
        // Fig. 2: "all the load bounds converge to the limit 2/7".
        let limit = 2.0 / 7.0;
        let far = 7_000_000_000u64;
        for bound in [DemandBound::Traditional, DemandBound::Refined, DemandBound::Linear] {
            let load = periodic_load(bound, 7, 2, far);
            assert!((load - limit).abs() < 1e-8, "{bound:?}: {load}");
        }
        let hyper = hyperbolic_load(2.0 / 7.0, 7, far);
        assert!((hyper - limit).abs() < 1e-8);
        // ... and they are still visibly above it at a short window.
        assert!(periodic_load(DemandBound::Refined, 7, 2, 9) > limit + 0.1);
    }

    #[test]
    fn hyperbolic_load_is_eq7_over_delta() {
        // With u = e/p, eq. 10 is eq. 7 divided by Δ (before the cap at 1).
        let (p, e) = (7_000u64, 2_000u64);
        for delta in [2_000u64, 5_000, 9_000, 70_000] {
            let from_eq7 = linear_demand(p, e, delta) as f64 / delta as f64;
            let eq10 = hyperbolic_load(e as f64 / p as f64, p, delta);
            assert!((from_eq7 - eq10).abs() < 1e-3, "{delta}: {from_eq7} vs {eq10}");
        }
    }

    proptest! {
        #[test]
        fn refined_never_exceeds_traditional(p in 1u64..10_000, e_frac in 0.0f64..=1.0, delta in 0u64..1_000_000) {
            let e = ((p as f64) * e_frac) as u64;
            prop_assert!(refined_demand(p, e, delta) <= traditional_demand(p, e, delta));
        }

        #[test]
        fn linear_is_at_least_refined(p in 1u64..10_000, e_frac in 0.0f64..=1.0, delta in 0u64..1_000_000) {
            let e = ((p as f64) * e_frac) as u64;
            prop_assert!(linear_demand(p, e, delta) >= refined_demand(p, e, delta));
        }

        #[test]
        fn load_bounds_tend_to_utilization(p in 1u64..10_000, e_frac in 0.0f64..=1.0) {
            let e = ((p as f64) * e_frac) as u64;
            let u = e as f64 / p as f64;
            // Each bound is within (p + e)/Δ of u; the error shrinks as Δ grows.
            let mut last_error = f64::INFINITY;
            for scale in [100u64, 10_000, 1_000_000] {
                let delta = p * scale;
                let mut error: f64 = 0.0;
                for bound in [DemandBound::Traditional, DemandBound::Refined, DemandBound::Linear] {
                    error = error.max((periodic_load(bound, p, e, delta) - u).abs());
                }
                error = error.max((hyperbolic_load(u, p, delta) - u).abs());
                prop_assert!(error <= 2.0 / scale as f64 + 1e-12, "error {error} at {scale} periods");
                prop_assert!(error <= last_error + 1e-12);
                last_error = error;
            }
        }

        #[test]
        fn demands_never_decrease(p in 1u64..1_000, e_frac in 0.0f64..=1.0, delta in 0u64..100_000) {
            let e = ((p as f64) * e_frac) as u64;
            for bound in [DemandBound::Traditional, DemandBound::Refined, DemandBound::Linear] {
                prop_assert!(periodic_demand(bound, p, e, delta) <= periodic_demand(bound, p, e, delta + 1));
            }
        }
    }
}
