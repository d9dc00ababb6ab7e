//! The probe's output document: a `irqlab/curve/v1` curve (read by
//! `irqlab fit` / `irqlab analyze`) plus everything needed to judge it.

use super::clock::ClockKind;
use super::sched::Policy;
use super::window::Gap;
use irqlab_analysis::curve::{CurvePoint, FloorPoint, CURVE_SCHEMA};
use irqlab_analysis::fit::BaselineUse;
use irqlab_host::rt_limit::RtBandwidth;
use serde::Serialize;

/// One histogram bucket: gaps with `from_ns <= len < to_ns`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Bucket {
    pub from_ns: u64,
    pub to_ns: u64,
    pub count: u64,
}

/// How RT bandwidth control bore on the run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RtThrottling {
    /// The setting before the run.
    pub before: RtBandwidth,
    /// The limit was lifted for the run (and restored after).
    pub lifted: bool,
    /// The probe could lose up to `throttled_ns_per_period` per period to
    /// throttling: long gaps may be the kernel's bandwidth control, not
    /// interrupts.
    pub limited: bool,
    pub throttled_ns_per_period: u64,
    /// Windows (ns) whose maximum load throttling alone could produce
    /// (`min(1, throttled / window)` or less): read them as "not measured",
    /// not as interference. Empty unless `limited`.
    pub throttled_windows_ns: Vec<u64>,
    /// Gaps of at least half the throttled time per period (or of the
    /// 6.12+ fair-class deadline server's 50 ms, which sysctl cannot lift):
    /// the ones bandwidth control may have caused rather than interrupts.
    pub suspect_gaps: u64,
    pub suspect_gap_ns: u64,
    pub note: String,
}

/// The whole measurement.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct InterferenceCurve {
    pub schema: &'static str,
    /// Maximum load over every window of each length (after the baseline
    /// was subtracted, when there is one).
    pub points: Vec<CurvePoint>,
    /// Least load over every window of each length (never changed by a
    /// baseline): what this curve justifies subtracting when it is used as
    /// one.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub floor: Vec<FloorPoint>,
    /// False when stopped early (Ctrl-C) or the gap log filled up.
    pub complete: bool,
    pub cpu: usize,
    pub policy: Policy,
    pub priority: i32,
    pub priority_reason: String,
    pub clock: ClockKind,
    pub clock_note: String,
    /// Calibrated against CLOCK_MONOTONIC over the run (TSC only).
    pub tsc_ticks_per_ns: Option<f64>,
    /// Mean time of one loop round: the probe's resolution.
    pub sampling_period_ns: f64,
    pub threshold_ns: u64,
    pub requested_duration_ns: u64,
    pub duration_ns: u64,
    pub gaps: u64,
    pub total_gap_ns: u64,
    pub max_gap_ns: u64,
    /// Total gap time over the run length.
    pub mean_load: f64,
    /// Gaps above 100 us per second (comparable with oslat's histogram).
    pub gaps_over_100us_per_s: f64,
    pub histogram: Vec<Bucket>,
    /// Windows asked for but longer than the run.
    pub windows_skipped_ns: Vec<u64>,
    pub rt_throttling: RtThrottling,
    pub log_overflow: bool,
    /// Baseline curve subtracted from `points`, and the curve before it.
    /// The kernel and its interference-relevant settings (`irqlab doctor`).
    pub machine: irqlab_host::machine::MachineContext,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub baseline: Option<String>,
    /// What was subtracted for the baseline, and where it was high.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub baseline_use: Option<BaselineUse>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub points_before_baseline: Option<Vec<CurvePoint>>,
    /// Who interfered (issue 43): for each point, what its maximum-load
    /// window's gap time was made of (irq, softirq, thread, unseen), the
    /// sources adding up to that window's busy time. Always written by the
    /// probe (`available: false` with the reason when the BPF monitor was
    /// off or could not run); older documents lack it. The window is the
    /// raw maximum's, before any baseline was subtracted.
    pub sources: super::sources::GapSources,
}

impl InterferenceCurve {
    pub const SCHEMA: &'static str = CURVE_SCHEMA;

    /// The plain curve that `irqlab fit` reads.
    pub fn curve(&self) -> irqlab_analysis::curve::Curve {
        irqlab_analysis::curve::Curve::with_floor(self.points.clone(), self.floor.clone())
    }

    /// Replaces the points by the points minus what `baseline` justifies
    /// (its least load per window: `irqlab_analysis::fit::subtract_baseline_floor`),
    /// and says what that was.
    pub fn subtract_baseline(&mut self, baseline: &irqlab_analysis::curve::Curve, name: &str) -> &BaselineUse {
        let before = self.points.clone();
        let (curve, used) = irqlab_analysis::fit::subtract_baseline_floor(&self.curve(), baseline);
        self.points = curve.points;
        self.points_before_baseline = Some(before);
        self.baseline = Some(name.to_string());
        self.baseline_use.insert(used)
    }
}

/// Power-of-two buckets of gap length from the smallest gap up.
pub fn histogram(gaps: &[Gap]) -> Vec<Bucket> {
    let mut counts = [0u64; 64];
    for g in gaps {
        counts[63 - g.len_ns.max(1).leading_zeros() as usize] += 1;
    }
    counts
        .iter()
        .enumerate()
        .filter(|(_, &c)| c > 0)
        .map(|(k, &count)| Bucket { from_ns: 1 << k, to_ns: 1u64.checked_shl(k as u32 + 1).unwrap_or(u64::MAX), count })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_buckets_by_power_of_two() {
        let g = |len| Gap { start_ns: 0, len_ns: len };
        let h = histogram(&[g(1000), g(1023), g(1024), g(3000), g(1_000_000)]);
        assert_eq!(
            h,
            vec![
                Bucket { from_ns: 512, to_ns: 1024, count: 2 },
                Bucket { from_ns: 1024, to_ns: 2048, count: 1 },
                Bucket { from_ns: 2048, to_ns: 4096, count: 1 },
                Bucket { from_ns: 524_288, to_ns: 1_048_576, count: 1 },
            ]
        );
    }
}
