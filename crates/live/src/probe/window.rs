//! Exact maximum interference over every window position (load-bounds
//! paper §4, the empirical load bound): for a window length Δ, the largest
//! total gap time inside any window `[t, t + Δ]` with `0 ≤ t ≤ T − Δ`.
//!
//! The gap time inside a window is a piecewise-linear function of `t`: it
//! grows while the window's end is inside a gap and shrinks while its start
//! is. It therefore peaks where the end reaches a gap's end (`t = end − Δ`)
//! or the start reaches a gap's start (`t = start`), or at `t = 0` /
//! `t = T − Δ`. Checking exactly those positions with two monotone
//! pointers over a prefix sum gives the exact maximum in O(n) per Δ.

/// A preemption seen by the probe: `[start_ns, start_ns + len_ns)` relative
/// to the start of the run. Sorted by start and non-overlapping.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[repr(C)]
pub struct Gap {
    pub start_ns: u64,
    pub len_ns: u64,
}

/// Gaps with the prefix sums the window scan needs, built once and shared
/// by every Δ.
pub struct GapIndex<'a> {
    gaps: &'a [Gap],
    /// `prefix[k]` = total length of the first k gaps.
    prefix: Vec<u64>,
    total_ns: u64,
}

impl<'a> GapIndex<'a> {
    /// `gaps` sorted by start, non-overlapping, inside `[0, total_ns]`.
    pub fn new(gaps: &'a [Gap], total_ns: u64) -> Self {
        let mut prefix = Vec::with_capacity(gaps.len() + 1);
        let mut sum = 0u64;
        prefix.push(0);
        for g in gaps {
            debug_assert!(g.start_ns + g.len_ns <= total_ns);
            sum += g.len_ns;
            prefix.push(sum);
        }
        GapIndex { gaps, prefix, total_ns }
    }

    pub fn total_gap_ns(&self) -> u64 {
        *self.prefix.last().unwrap_or(&0)
    }

    /// Gap time in `[0, x]`, given `k` = number of gaps starting before `x`.
    #[inline]
    fn cumulative(&self, k: usize, x: u64) -> u64 {
        if k == 0 {
            return 0;
        }
        let g = self.gaps[k - 1];
        self.prefix[k - 1] + g.len_ns.min(x - g.start_ns)
    }

    /// Advances `k` so that it counts the gaps starting before `x`.
    #[inline]
    fn advance(&self, k: &mut usize, x: u64) {
        while *k < self.gaps.len() && self.gaps[*k].start_ns < x {
            *k += 1;
        }
    }

    /// The maximum gap time (ns) inside any window of `window_ns`; `None`
    /// when the run is shorter than the window.
    pub fn max_in_window(&self, window_ns: u64) -> Option<u64> {
        if window_ns == 0 || window_ns > self.total_ns {
            return None;
        }
        let last_start = self.total_ns - window_ns;
        let at = |x: u64| self.cumulative(self.gaps.partition_point(|g| g.start_ns < x), x);
        // The two ends of the range of positions.
        let mut best = at(window_ns).max(at(self.total_ns) - at(last_start));
        // Window starts at a gap start.
        let mut k_end = 0usize;
        for (i, g) in self.gaps.iter().enumerate() {
            let t = g.start_ns;
            if t > last_start {
                break;
            }
            // Gaps before i end before t, so the gap time before t is prefix[i].
            self.advance(&mut k_end, t + window_ns);
            best = best.max(self.cumulative(k_end, t + window_ns) - self.prefix[i]);
        }
        // Window ends at a gap end.
        let mut k_start = 0usize;
        for (j, g) in self.gaps.iter().enumerate() {
            let end = g.start_ns + g.len_ns;
            if end < window_ns {
                continue;
            }
            let t = end - window_ns;
            self.advance(&mut k_start, t);
            // Gaps after j start at or after end, so the gap time up to end is prefix[j + 1].
            best = best.max(self.prefix[j + 1] - self.cumulative(k_start, t));
        }
        Some(best)
    }

    /// Maximum load (fraction of the window) for each window length;
    /// windows longer than the run are left out. Windows are computed in
    /// parallel on the machine's cores.
    pub fn max_loads(&self, windows_ns: &[u64]) -> Vec<(u64, f64)> {
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get()).min(windows_ns.len().max(1));
        let mut results: Vec<Option<(u64, f64)>> = vec![None; windows_ns.len()];
        std::thread::scope(|scope| {
            let chunks: Vec<_> = results.chunks_mut(windows_ns.len().div_ceil(threads).max(1)).collect();
            let mut offset = 0;
            for chunk in chunks {
                let ws = &windows_ns[offset..offset + chunk.len()];
                offset += chunk.len();
                scope.spawn(move || {
                    for (slot, &w) in chunk.iter_mut().zip(ws) {
                        *slot = self.max_in_window(w).map(|m| (w, m as f64 / w as f64));
                    }
                });
            }
        });
        results.into_iter().flatten().collect()
    }
}

/// `count` window lengths spaced evenly on a log scale from `from_ns` to
/// `to_ns` inclusive (rounded to whole ns, duplicates removed).
pub fn log_windows(from_ns: u64, to_ns: u64, per_decade: u32) -> Vec<u64> {
    if from_ns == 0 || to_ns < from_ns {
        return Vec::new();
    }
    let decades = (to_ns as f64 / from_ns as f64).log10();
    let steps = (decades * per_decade as f64).round().max(0.0) as u32;
    let mut out: Vec<u64> = (0..=steps)
        .map(|i| {
            if steps == 0 {
                from_ns
            } else {
                (from_ns as f64 * 10f64.powf(decades * i as f64 / steps as f64)).round() as u64
            }
        })
        .collect();
    out.dedup();
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Brute force over every integer start: exact because every
    /// breakpoint of the overlap function is an integer.
    fn brute(gaps: &[Gap], total: u64, w: u64) -> Option<u64> {
        if w == 0 || w > total {
            return None;
        }
        (0..=total - w)
            .map(|t| {
                gaps.iter()
                    .map(|g| {
                        let (a, b) = (g.start_ns.max(t), (g.start_ns + g.len_ns).min(t + w));
                        b.saturating_sub(a)
                    })
                    .sum()
            })
            .max()
    }

    fn gaps_from(spec: &[(u64, u64)]) -> (Vec<Gap>, u64) {
        // (space before, length) pairs laid end to end, then some tail.
        let mut t = 0;
        let mut gaps = Vec::new();
        for &(space, len) in spec {
            t += space;
            gaps.push(Gap { start_ns: t, len_ns: len });
            t += len;
        }
        (gaps, t + 3)
    }

    #[test]
    fn periodic_interference_hits_one_then_the_utilisation() {
        // 1 ms of every 10 ms over 1 s: Δ ≤ 1 ms fully covered, Δ = 10 ms → 0.1,
        // Δ = 15 ms → 2 ms at most (0.1333...).
        let gaps: Vec<Gap> = (0..100).map(|i| Gap { start_ns: i * 10_000_000 + 5_000_000, len_ns: 1_000_000 }).collect();
        let idx = GapIndex::new(&gaps, 1_000_000_000);
        assert_eq!(idx.max_in_window(500_000), Some(500_000));
        assert_eq!(idx.max_in_window(1_000_000), Some(1_000_000));
        assert_eq!(idx.max_in_window(10_000_000), Some(1_000_000));
        assert_eq!(idx.max_in_window(15_000_000), Some(2_000_000));
        assert_eq!(idx.max_in_window(1_000_000_001), None);
        assert_eq!(idx.total_gap_ns(), 100_000_000);
    }

    #[test]
    fn no_gaps_means_no_load() {
        let idx = GapIndex::new(&[], 1000);
        assert_eq!(idx.max_in_window(10), Some(0));
        assert_eq!(idx.max_loads(&[10, 100, 5000]), vec![(10, 0.0), (100, 0.0)]);
    }

    #[test]
    fn gaps_at_the_edges_of_the_run() {
        let gaps = [Gap { start_ns: 0, len_ns: 5 }, Gap { start_ns: 95, len_ns: 5 }];
        let idx = GapIndex::new(&gaps, 100);
        for w in 1..=100 {
            assert_eq!(idx.max_in_window(w), brute(&gaps, 100, w), "w={w}");
        }
    }

    #[test]
    fn log_windows_span_the_range() {
        let w = log_windows(10_000, 1_000_000_000, 8);
        assert_eq!(w.first(), Some(&10_000));
        assert_eq!(w.last(), Some(&1_000_000_000));
        assert_eq!(w.len(), 41);
        assert!(w.windows(2).all(|p| p[0] < p[1]));
    }

    proptest! {
        #[test]
        fn matches_brute_force(spec in proptest::collection::vec((0u64..40, 1u64..30), 0..12), w in 1u64..300) {
            let (gaps, total) = gaps_from(&spec);
            let idx = GapIndex::new(&gaps, total);
            prop_assert_eq!(idx.max_in_window(w), brute(&gaps, total, w));
        }
    }
}
