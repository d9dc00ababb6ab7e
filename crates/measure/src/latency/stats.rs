//! Latency statistics shared by the timer test and the stimulus generator:
//! exact min / mean / max, percentiles from an HDR histogram (3 significant
//! digits, so a percentile is within 0.1% of the recorded value), and a
//! linear histogram for display and JSON.

use serde::{Deserialize, Serialize};

/// Largest latency the histogram tracks exactly (100 s); larger values are
/// clamped to it for the percentiles but still count in min/mean/max.
const HIGHEST_TRACKED_NS: u64 = 100_000_000_000;

/// Running statistics of one stream of latency samples (ns).
#[derive(Clone)]
pub struct LatencyStats {
    count: u64,
    min_ns: u64,
    max_ns: u64,
    sum_ns: u128,
    hist: hdrhistogram::Histogram<u64>,
}

impl Default for LatencyStats {
    fn default() -> Self {
        Self::new()
    }
}

impl LatencyStats {
    pub fn new() -> Self {
        LatencyStats {
            count: 0,
            min_ns: u64::MAX,
            max_ns: 0,
            sum_ns: 0,
            hist: hdrhistogram::Histogram::new_with_bounds(1, HIGHEST_TRACKED_NS, 3).expect("static histogram bounds are valid"),
        }
    }

    pub fn record(&mut self, ns: u64) {
        self.count += 1;
        self.min_ns = self.min_ns.min(ns);
        self.max_ns = self.max_ns.max(ns);
        self.sum_ns += ns as u128;
        self.hist.saturating_record(ns.clamp(1, HIGHEST_TRACKED_NS));
    }

    pub fn merge(&mut self, other: &LatencyStats) {
        if other.count == 0 {
            return;
        }
        self.count += other.count;
        self.min_ns = self.min_ns.min(other.min_ns);
        self.max_ns = self.max_ns.max(other.max_ns);
        self.sum_ns += other.sum_ns;
        // Same bounds on both sides, so adding cannot fail.
        let _ = self.hist.add(&other.hist);
    }

    pub fn count(&self) -> u64 {
        self.count
    }

    pub fn min_ns(&self) -> Option<u64> {
        (self.count > 0).then_some(self.min_ns)
    }

    pub fn max_ns(&self) -> Option<u64> {
        (self.count > 0).then_some(self.max_ns)
    }

    pub fn mean_ns(&self) -> Option<f64> {
        (self.count > 0).then(|| self.sum_ns as f64 / self.count as f64)
    }

    /// The value at quantile `q` (0..=1), to 3 significant digits.
    pub fn quantile_ns(&self, q: f64) -> Option<u64> {
        (self.count > 0).then(|| self.hist.value_at_quantile(q).clamp(self.min_ns, self.max_ns))
    }

    /// Counts in buckets of `bucket_ns` from 0 up to `limit_ns`, plus the
    /// number of samples at or above `limit_ns`.
    pub fn linear_histogram(&self, bucket_ns: u64, limit_ns: u64) -> LinearHistogram {
        let bucket_ns = bucket_ns.max(1);
        let buckets = limit_ns.div_ceil(bucket_ns).max(1) as usize;
        let mut counts = vec![0u64; buckets];
        let mut overflow = 0;
        for v in self.hist.iter_recorded() {
            // A value stands for its HDR bucket; place it by its lowest
            // equivalent value so a 1 us sample never lands in the 2 us bin.
            let value = self.hist.lowest_equivalent(v.value_iterated_to());
            let idx = (value / bucket_ns) as usize;
            if idx < buckets {
                counts[idx] += v.count_at_value();
            } else {
                overflow += v.count_at_value();
            }
        }
        LinearHistogram { bucket_ns, counts, overflow }
    }

    /// The summary written to JSON, with a histogram of `bucket_ns` bins up
    /// to the maximum (at most `max_buckets` of them).
    pub fn summary(&self, bucket_ns: u64, max_buckets: usize) -> StatsSummary {
        let limit = if self.count == 0 { bucket_ns } else { (self.max_ns + 1).min(bucket_ns.saturating_mul(max_buckets as u64)) };
        StatsSummary {
            count: self.count,
            min_ns: self.min_ns(),
            mean_ns: self.mean_ns(),
            max_ns: self.max_ns(),
            p50_ns: self.quantile_ns(0.50),
            p90_ns: self.quantile_ns(0.90),
            p99_ns: self.quantile_ns(0.99),
            p999_ns: self.quantile_ns(0.999),
            histogram: self.linear_histogram(bucket_ns, limit),
        }
    }
}

/// Equal-width bins from 0, and how many samples fell beyond the last.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LinearHistogram {
    pub bucket_ns: u64,
    pub counts: Vec<u64>,
    pub overflow: u64,
}

/// Min / mean / max / percentiles / histogram of one stream, as JSON.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StatsSummary {
    pub count: u64,
    pub min_ns: Option<u64>,
    pub mean_ns: Option<f64>,
    pub max_ns: Option<u64>,
    pub p50_ns: Option<u64>,
    pub p90_ns: Option<u64>,
    pub p99_ns: Option<u64>,
    pub p999_ns: Option<u64>,
    pub histogram: LinearHistogram,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_moments_and_close_percentiles() {
        let mut s = LatencyStats::new();
        for v in 1..=1000u64 {
            s.record(v * 1000);
        }
        assert_eq!(s.count(), 1000);
        assert_eq!(s.min_ns(), Some(1000));
        assert_eq!(s.max_ns(), Some(1_000_000));
        assert_eq!(s.mean_ns(), Some(500_500.0));
        let p50 = s.quantile_ns(0.5).unwrap() as f64;
        assert!((p50 - 500_000.0).abs() / 500_000.0 < 0.002, "p50 {p50}");
        let p99 = s.quantile_ns(0.99).unwrap() as f64;
        assert!((p99 - 990_000.0).abs() / 990_000.0 < 0.002, "p99 {p99}");
    }

    #[test]
    fn empty_stats_have_no_values() {
        let s = LatencyStats::new();
        assert_eq!(s.min_ns(), None);
        assert_eq!(s.quantile_ns(0.5), None);
        let sum = s.summary(1000, 10);
        assert_eq!(sum.count, 0);
        assert_eq!(sum.histogram.counts.iter().sum::<u64>(), 0);
    }

    #[test]
    fn linear_histogram_bins_by_value() {
        let mut s = LatencyStats::new();
        for v in [500, 999, 1000, 1500, 2999, 5000, 7000] {
            s.record(v);
        }
        let h = s.linear_histogram(1000, 3000);
        assert_eq!(h.counts, vec![2, 2, 1]);
        assert_eq!(h.overflow, 2);
    }

    #[test]
    fn merge_adds_both_streams() {
        let mut a = LatencyStats::new();
        let mut b = LatencyStats::new();
        a.record(10);
        b.record(30);
        b.record(20);
        a.merge(&b);
        assert_eq!(a.count(), 3);
        assert_eq!(a.min_ns(), Some(10));
        assert_eq!(a.max_ns(), Some(30));
        assert_eq!(a.mean_ns(), Some(20.0));
    }
}
