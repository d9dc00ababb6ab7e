//! A latency histogram with log-scale bins, ten to a decade from 1 us to
//! 100 s (OSADL's long-run plots read latency on a log axis), held in
//! atomics so the measuring thread records without a lock and a reader
//! (the periodic flush, the live display) copies it at any time. Its size
//! is fixed: a run of days takes the memory of a run of seconds.

use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicU64, Ordering};

/// Bins per decade.
pub const PER_DECADE: u32 = 10;
/// The first bin holds everything up to 1 us.
const FIRST_BOUND_NS: f64 = 1_000.0;
/// Decades from 1 us to 100 s.
const DECADES: u32 = 8;
/// Bins: 0 for <= 1 us, then ten per decade; the last also takes
/// everything above 100 s.
pub const BINS: usize = (PER_DECADE * DECADES) as usize + 1;

/// Upper bound (inclusive) of bin `i`, ns: 1 us x 10^(i/10), rounded.
pub fn upper_bound_ns(i: usize) -> u64 {
    (FIRST_BOUND_NS * 10f64.powf(i as f64 / PER_DECADE as f64)).round() as u64
}

/// The bin of a latency: the first whose upper bound is not below it.
pub fn bin_of(ns: u64) -> usize {
    if ns as f64 <= FIRST_BOUND_NS {
        return 0;
    }
    let guess = ((ns as f64 / FIRST_BOUND_NS).log10() * PER_DECADE as f64).ceil() as usize;
    // The float may land one bin off next to a rounded bound: settle on the
    // integer bounds themselves.
    let mut i = guess.clamp(1, BINS - 1);
    while i > 1 && ns <= upper_bound_ns(i - 1) {
        i -= 1;
    }
    while i < BINS - 1 && ns > upper_bound_ns(i) {
        i += 1;
    }
    i
}

/// Counts per bin, recorded from one thread and read from others.
#[derive(Debug)]
pub struct LogHistogram {
    counts: [AtomicU64; BINS],
}

impl Default for LogHistogram {
    fn default() -> Self {
        LogHistogram { counts: std::array::from_fn(|_| AtomicU64::new(0)) }
    }
}

impl LogHistogram {
    pub fn record(&self, ns: u64) {
        self.counts[bin_of(ns)].fetch_add(1, Ordering::Relaxed);
    }

    /// A copy of the counts now (a concurrent record may or may not be in
    /// it).
    pub fn snapshot(&self) -> LogBins {
        let counts: Vec<u64> = self.counts.iter().map(|c| c.load(Ordering::Relaxed)).collect();
        LogBins::from_counts(&counts)
    }
}

/// A histogram as written: the bins up to the last non-empty one, each
/// with its inclusive upper bound (Prometheus's `le`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogBins {
    pub bins_per_decade: u32,
    pub le_ns: Vec<u64>,
    pub counts: Vec<u64>,
}

impl LogBins {
    fn from_counts(counts: &[u64]) -> LogBins {
        let used = counts.iter().rposition(|&c| c > 0).map_or(0, |i| i + 1);
        LogBins { bins_per_decade: PER_DECADE, le_ns: (0..used).map(upper_bound_ns).collect(), counts: counts[..used].to_vec() }
    }

    pub fn total(&self) -> u64 {
        self.counts.iter().sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn bins_are_ten_to_a_decade_from_one_microsecond() {
        assert_eq!(upper_bound_ns(0), 1_000);
        assert_eq!(upper_bound_ns(10), 10_000);
        assert_eq!(upper_bound_ns(20), 100_000);
        assert_eq!(upper_bound_ns(BINS - 1), 100_000_000_000);
        assert_eq!(bin_of(0), 0);
        assert_eq!(bin_of(1_000), 0);
        assert_eq!(bin_of(1_001), 1);
        assert_eq!(bin_of(10_000), 10);
        assert_eq!(bin_of(10_001), 11);
        assert_eq!(bin_of(u64::MAX), BINS - 1);
    }

    #[test]
    fn a_snapshot_keeps_the_bins_up_to_the_last_used() {
        let h = LogHistogram::default();
        for ns in [500, 900, 20_000, 1_000_000] {
            h.record(ns);
        }
        let s = h.snapshot();
        assert_eq!(s.total(), 4);
        assert_eq!(s.counts.len(), bin_of(1_000_000) + 1);
        assert_eq!((s.counts[0], s.counts[bin_of(20_000)], *s.counts.last().unwrap()), (2, 1, 1));
        assert_eq!(s.le_ns.last(), Some(&1_000_000));
    }

    proptest! {
        /// Every latency lands in the one bin whose bounds hold it.
        #[test]
        fn each_value_lies_within_its_bins_bounds(ns in 0u64..200_000_000_000) {
            let i = bin_of(ns);
            prop_assert!(i == BINS - 1 || ns <= upper_bound_ns(i));
            prop_assert!(i == 0 || ns > upper_bound_ns(i - 1));
        }
    }
}
