//! Fixed-memory statistics: a log-linear histogram (≤ 1.6 % relative error,
//! exact below 128 ns) so that response times of any number of jobs are
//! summarised without storing them, and time series of per-interval sums.

use irqlab_analysis::Nanos;
use serde::Serialize;

const SUB_BITS: u32 = 6; // 64 sub-buckets per power of two above 128
const EXACT: u64 = 128;

/// A histogram of nanosecond values in fixed memory (allocated on first use).
#[derive(Debug, Clone, Default)]
pub struct Histogram {
    counts: Vec<u64>,
    n: u64,
    sum: u128,
    max: Nanos,
    min: Nanos,
}

fn bucket(v: u64) -> usize {
    if v < EXACT {
        return v as usize;
    }
    let bits = 64 - v.leading_zeros(); // ≥ 8
    let shift = bits - (SUB_BITS + 1);
    let top = (v >> shift) - (1 << SUB_BITS); // 0..64
    EXACT as usize + (shift as usize - 1) * (1 << SUB_BITS) + top as usize
}

/// Upper edge of a bucket (the largest value it holds).
fn bucket_high(i: usize) -> u64 {
    if i < EXACT as usize {
        return i as u64;
    }
    let j = i - EXACT as usize;
    let shift = (j >> SUB_BITS) as u32 + 1;
    let top = (j & ((1 << SUB_BITS) - 1)) as u64 + (1 << SUB_BITS);
    // The last bucket's edge is 2^64 - 1: computed in u128, as 2^64 would
    // overflow (a debug build panicked here; release wrapped to the right value).
    (((top as u128 + 1) << shift) - 1).min(u64::MAX as u128) as u64
}

impl Histogram {
    pub fn record(&mut self, v: Nanos) {
        if self.counts.is_empty() {
            self.counts = vec![0; bucket(u64::MAX) + 1];
            self.min = v;
        }
        self.counts[bucket(v)] += 1;
        self.n += 1;
        self.sum += v as u128;
        self.max = self.max.max(v);
        self.min = self.min.min(v);
    }

    pub fn count(&self) -> u64 {
        self.n
    }

    pub fn max(&self) -> Nanos {
        self.max
    }

    /// The value at quantile `q` (0..=1): the upper edge of the bucket
    /// holding it, never above the exact maximum.
    pub fn quantile(&self, q: f64) -> Nanos {
        if self.n == 0 {
            return 0;
        }
        let rank = ((q * self.n as f64).ceil() as u64).clamp(1, self.n);
        let mut seen = 0;
        for (i, &c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                return bucket_high(i).min(self.max).max(self.min);
            }
        }
        self.max
    }

    pub fn summary(&self) -> Option<Percentiles> {
        (self.n > 0).then(|| Percentiles {
            count: self.n,
            min_ns: self.min,
            mean_ns: (self.sum / self.n as u128) as Nanos,
            p50_ns: self.quantile(0.5),
            p90_ns: self.quantile(0.9),
            p99_ns: self.quantile(0.99),
            p999_ns: self.quantile(0.999),
            max_ns: self.max,
        })
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Percentiles {
    pub count: u64,
    pub min_ns: Nanos,
    pub mean_ns: Nanos,
    pub p50_ns: Nanos,
    pub p90_ns: Nanos,
    pub p99_ns: Nanos,
    pub p999_ns: Nanos,
    pub max_ns: Nanos,
}

/// Sum of some time per fixed interval (e.g. bottom-half time per 1 ms).
/// Grows with the run length by design: only kept when the scenario asks.
#[derive(Debug, Clone, Serialize)]
pub struct Series {
    pub interval_ns: Nanos,
    pub values_ns: Vec<Nanos>,
    #[serde(skip)]
    pub origin: Nanos,
}

impl Series {
    pub fn new(interval_ns: Nanos, origin: Nanos) -> Self {
        Series { interval_ns, values_ns: Vec::new(), origin }
    }

    /// Adds the interval [start, end) to the buckets it overlaps.
    pub fn add(&mut self, start: Nanos, end: Nanos) {
        if end <= start || end <= self.origin {
            return;
        }
        let mut s = start.max(self.origin) - self.origin;
        let e = end - self.origin;
        while s < e {
            let idx = (s / self.interval_ns) as usize;
            let edge = ((idx as u64) + 1) * self.interval_ns;
            let piece = edge.min(e) - s;
            if self.values_ns.len() <= idx {
                self.values_ns.resize(idx + 1, 0);
            }
            self.values_ns[idx] += piece;
            s += piece;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_is_exact_small_and_within_error_large() {
        let mut h = Histogram::default();
        for v in 1..=100u64 {
            h.record(v);
        }
        assert_eq!(h.quantile(0.5), 50);
        assert_eq!(h.max(), 100);
        let mut h = Histogram::default();
        for v in [1_000_000u64, 2_000_000, 3_000_000] {
            h.record(v);
        }
        let p = h.quantile(0.5);
        assert!((2_000_000..=2_000_000 * 65 / 64).contains(&p), "{p}");
        assert_eq!(h.quantile(1.0), 3_000_000);
    }

    #[test]
    fn buckets_are_monotone_and_cover_their_values() {
        let mut last = 0;
        for v in (0..2_000_000u64).step_by(997).chain([u64::MAX / 3, u64::MAX]) {
            let b = bucket(v);
            assert!(b >= last);
            assert!(bucket_high(b) >= v, "{v}");
            last = b;
        }
    }

    #[test]
    fn series_splits_across_intervals() {
        let mut s = Series::new(10, 0);
        s.add(5, 25);
        assert_eq!(s.values_ns, vec![5, 10, 5]);
    }
}
