//! A measured load curve turned into a demand function usable in analysis.
//!
//! Load-bounds paper §4: each measured point is the maximum observed load
//! of a window of length Δ, an estimate of `load_max(Δ)`. Between and beyond
//! the points nothing was measured, so the analysis needs the largest demand
//! that is *consistent* with the points. Two facts about the true maximum
//! demand `D(Δ) = Δ · load_max(Δ)` (eq. 2) make that precise:
//!
//! 1. it never decreases: a longer window contains a shorter one;
//! 2. it grows at most as fast as time: `D(Δ + x) ≤ D(Δ) + x`;
//! 3. it is subadditive: `D(a + b) ≤ D(a) + D(b)` (split the window).
//!
//! The envelope first raises points that contradict (1) or (2) given the
//! others (a measured point is a lower bound on the true maximum), then
//! interpolates with the largest function obeying (1) and (2) between
//! points, and extends beyond the last point with (3).

use crate::curve::{Curve, CurvePoint};
use crate::units::Nanos;

/// Conservative demand function of a tabulated load curve (load-bounds
/// paper §4, empirical load bound; eq. 2 properties, see module docs).
#[derive(Debug, Clone, PartialEq)]
pub struct DemandEnvelope {
    /// Window lengths, strictly increasing, all > 0.
    windows: Vec<Nanos>,
    /// Demand (ns, as f64) at each window after raising to consistency.
    demands: Vec<f64>,
}

impl DemandEnvelope {
    /// Builds the envelope of a curve whose points passed
    /// [`Curve::check_points`] (windows > 0, loads in [0, 1]).
    pub fn from_curve(curve: &Curve) -> Self {
        Self::from_points(&curve.points)
    }

    /// See [`DemandEnvelope::from_curve`].
    pub fn from_points(points: &[CurvePoint]) -> Self {
        let mut sorted: Vec<(Nanos, f64)> =
            points.iter().filter(|p| p.window_ns > 0).map(|p| (p.window_ns, p.window_ns as f64 * p.max_load.clamp(0.0, 1.0))).collect();
        sorted.sort_by_key(|&(w, _)| w);
        let mut windows: Vec<Nanos> = Vec::with_capacity(sorted.len());
        let mut demands: Vec<f64> = Vec::with_capacity(sorted.len());
        for (w, d) in sorted {
            if windows.last() == Some(&w) {
                let last = demands.last_mut().expect("same length");
                *last = last.max(d);
            } else {
                windows.push(w);
                demands.push(d);
            }
        }
        // (1) never decreasing: raise each point to the largest one before it.
        for i in 1..demands.len() {
            demands[i] = demands[i].max(demands[i - 1]);
        }
        // (2) slope at most 1: a large demand at a longer window implies
        // at least that much minus the extra length at a shorter one.
        for i in (0..demands.len().saturating_sub(1)).rev() {
            let gap = (windows[i + 1] - windows[i]) as f64;
            demands[i] = demands[i].max(demands[i + 1] - gap);
        }
        DemandEnvelope { windows, demands }
    }

    /// The longest measured window.
    pub fn last_window(&self) -> Nanos {
        self.windows.last().copied().unwrap_or(0)
    }

    /// Upper bound on demand in any window of length `window`, ns (f64).
    pub fn demand(&self, window: Nanos) -> f64 {
        let (Some(&last_w), Some(&last_d)) = (self.windows.last(), self.demands.last()) else {
            return 0.0;
        };
        if window > last_w {
            // (3) subadditivity: q whole copies of the last window plus the rest.
            let q = window / last_w;
            let rest = window - q * last_w;
            return q as f64 * last_d + self.demand_within(rest);
        }
        self.demand_within(window)
    }

    /// Demand rounded up to whole nanoseconds, for the integer tests.
    pub fn demand_ns(&self, window: Nanos) -> Nanos {
        (self.demand(window).ceil() as Nanos).min(window)
    }

    /// Load bound `demand(Δ)/Δ` (1 at Δ = 0, the limit from the right,
    /// unless the curve is all zero).
    pub fn load(&self, window: Nanos) -> f64 {
        if window == 0 {
            return if self.demands.iter().any(|&d| d > 0.0) { 1.0 } else { 0.0 };
        }
        self.demand(window) / window as f64
    }

    /// Long-run utilisation implied by the extension beyond the last point.
    pub fn long_run_utilization(&self) -> f64 {
        match (self.windows.last(), self.demands.last()) {
            (Some(&w), Some(&d)) => d / w as f64,
            _ => 0.0,
        }
    }

    /// Windows ≤ the last measured window, between the implicit point
    /// (0, 0) and the measured ones: the largest function that never
    /// decreases and grows at most with slope 1.
    fn demand_within(&self, window: Nanos) -> f64 {
        let next = self.windows.partition_point(|&w| w < window);
        if next == self.windows.len() {
            return *self.demands.last().unwrap_or(&0.0);
        }
        if self.windows[next] == window {
            return self.demands[next];
        }
        let (prev_w, prev_d) = if next == 0 { (0, 0.0) } else { (self.windows[next - 1], self.demands[next - 1]) };
        let rising = prev_d + (window - prev_w) as f64;
        rising.min(self.demands[next])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn pts(v: &[(u64, f64)]) -> Vec<CurvePoint> {
        v.iter().map(|&(window_ns, max_load)| CurvePoint { window_ns, max_load }).collect()
    }

    #[test]
    fn interpolates_with_slope_one_then_flat() {
        // Demand 5 at window 10, 8 at window 100.
        let env = DemandEnvelope::from_points(&pts(&[(10, 0.5), (100, 0.08)]));
        assert_eq!(env.demand(10), 5.0);
        assert_eq!(env.demand(4), 4.0); // rises with time from (0, 0) ...
        assert_eq!(env.demand(8), 5.0); // ... until it meets the next point
        assert_eq!(env.demand(12), 7.0);
        assert_eq!(env.demand(50), 8.0);
        // Beyond the last point: 2 × 8 plus the demand of the rest (10 → 5).
        assert_eq!(env.demand(210), 21.0);
        assert!((env.long_run_utilization() - 0.08).abs() < 1e-12);
    }

    #[test]
    fn inconsistent_points_are_raised() {
        // Demand 9 at window 100 means at least 9 - 50 at 50 ... and a smaller
        // demand at a longer window means the longer one was under-sampled.
        let env = DemandEnvelope::from_points(&pts(&[(50, 0.1), (60, 0.05), (100, 0.09)]));
        assert_eq!(env.demand(50), 5.0);
        assert_eq!(env.demand(60), 5.0);
        let env = DemandEnvelope::from_points(&pts(&[(10, 0.0), (20, 1.0)]));
        assert_eq!(env.demand(10), 10.0);
    }

    proptest! {
        #[test]
        fn envelope_covers_points_and_never_decreases(
            raw in proptest::collection::vec((1u64..10_000, 0.0f64..=1.0), 1..20),
            probe in proptest::collection::vec(0u64..50_000, 1..40),
        ) {
            let points = pts(&raw);
            let env = DemandEnvelope::from_points(&points);
            for p in &points {
                prop_assert!(env.demand(p.window_ns) >= p.window_ns as f64 * p.max_load - 1e-9);
            }
            let mut probe = probe;
            probe.sort_unstable();
            let mut last = 0.0;
            for w in probe {
                let d = env.demand(w);
                prop_assert!(d >= last - 1e-9, "decreased at {w}");
                prop_assert!(d <= w as f64 + 1e-9, "more than the window at {w}");
                last = d;
            }
        }
    }
}
