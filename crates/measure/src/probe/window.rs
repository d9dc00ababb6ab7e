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

/// Gap time up to a gap's end, as the scan reads it: `off` = start minus
/// the gap time before the gap, so the gap time in `[0, x]` for
/// `start < x` is `min(end, x) - off`.
#[derive(Debug, Clone, Copy, Default)]
struct Through {
    end: u64,
    off: u64,
}

/// Gaps per block of the window scan: 8192 starts and prefix entries, 192
/// KiB, well inside a core's L2 cache.
const BLOCK: usize = 8192;

/// Starts a pointer step compares at once, and the sentinels after the
/// last start that let it read them without a bounds branch.
const STEP: usize = 4;

/// Gaps with the prefix sums the window scan needs, built once and shared
/// by every Δ. Structure of arrays: a pointer step reads only starts (four
/// to a 32-byte load), the gap time only where the pointer lands.
pub struct GapIndex {
    /// The gaps' starts, then `STEP` sentinels (`u64::MAX`) that no
    /// position passes.
    starts: Vec<u64>,
    /// `through[k]`: gap `k - 1`'s end and offset; `through[0]` is (0, 0),
    /// so "no gap starts before x" needs no branch (`min(0, x) - 0`).
    through: Vec<Through>,
    total_ns: u64,
}

/// One window's scan of [`GapIndex::max_in_windows`].
struct MaxScan {
    window: u64,
    last_start: u64,
    /// Gaps starting before `start_i + window` (window starts at gap i).
    k_end: usize,
    /// Gaps starting before `end_i - window` (window ends at gap i's end).
    k_start: usize,
    best: u64,
}

impl GapIndex {
    /// `gaps` sorted by start, non-overlapping, inside `[0, total_ns]`.
    pub fn new(gaps: &[Gap], total_ns: u64) -> Self {
        let mut before = 0u64;
        let mut starts = Vec::with_capacity(gaps.len() + STEP);
        let mut through = Vec::with_capacity(gaps.len() + 1);
        through.push(Through::default());
        for g in gaps {
            debug_assert!(g.start_ns + g.len_ns <= total_ns);
            debug_assert!(before <= g.start_ns);
            starts.push(g.start_ns);
            through.push(Through { end: g.start_ns + g.len_ns, off: g.start_ns - before });
            before += g.len_ns;
        }
        starts.extend([u64::MAX; STEP]);
        GapIndex { starts, through, total_ns }
    }

    fn len(&self) -> usize {
        self.through.len() - 1
    }

    pub fn total_gap_ns(&self) -> u64 {
        self.through.last().map_or(0, |t| t.end - t.off)
    }

    /// Gap time in `[0, x]`, given `k` = number of gaps starting before `x`.
    #[inline]
    fn cumulative(&self, k: usize, x: u64) -> u64 {
        let t = self.through[k];
        t.end.min(x) - t.off
    }

    /// Advances `k` so that it counts the gaps starting before `x` (`x` is
    /// never past the run, so the sentinels stop it at `len()`).
    #[inline]
    fn advance(&self, k: &mut usize, x: u64) {
        // A pointer usually moves 0, 1 or 2 entries per step, at random.
        // The starts are sorted, so the step is how many of the next four
        // are before `x`: one load and four compares on the pointer's
        // dependency chain instead of a load per entry, and no branch to
        // mispredict; the loop only for the rare longer runs.
        let next = &self.starts[*k..*k + STEP];
        let step: usize = next.iter().map(|&s| usize::from(s < x)).sum();
        *k += step;
        if step == STEP {
            while self.starts[*k] < x {
                *k += 1;
            }
        }
    }

    /// `N` windows' scans over the gaps `range`, side by side in one loop:
    /// each window places itself at each gap's start and ending at each
    /// gap's end. A scan's two pointers are chains of dependent loads (the
    /// next step reads where the last one landed); scanning windows
    /// together gives the core independent chains to overlap.
    #[inline(always)]
    fn scan_max<const N: usize>(&self, scans: &mut [MaxScan], range: std::ops::Range<usize>) {
        // The scans' state in locals: written back at every step it cost a
        // store per pointer.
        let mut window = [0; N];
        let mut last_start = [0; N];
        let (mut k_end, mut k_start, mut best) = ([0; N], [0; N], [0; N]);
        for (j, s) in scans.iter().enumerate() {
            (window[j], last_start[j]) = (s.window, s.last_start);
            (k_end[j], k_start[j], best[j]) = (s.k_end, s.k_start, s.best);
        }
        for (&start, g) in self.starts[range.clone()].iter().zip(&self.through[range.start + 1..=range.end]) {
            // Gap time before gap i, and up to its end.
            let (before, through) = (start - g.off, g.end - g.off);
            for j in 0..N {
                // Window starts at gap i's start.
                if start <= last_start[j] {
                    let x = start + window[j];
                    self.advance(&mut k_end[j], x);
                    best[j] = best[j].max(self.cumulative(k_end[j], x) - before);
                }
                // Window ends at gap i's end (later gaps start after it).
                if g.end >= window[j] {
                    let t = g.end - window[j];
                    self.advance(&mut k_start[j], t);
                    best[j] = best[j].max(through - self.cumulative(k_start[j], t));
                }
            }
        }
        for (j, s) in scans.iter_mut().enumerate() {
            (s.k_end, s.k_start, s.best) = (k_end[j], k_start[j], best[j]);
        }
    }

    /// The maximum gap time (ns) inside any window of `window_ns`; `None`
    /// when the run is shorter than the window.
    pub fn max_in_window(&self, window_ns: u64) -> Option<u64> {
        self.max_in_windows(&[window_ns])[0]
    }

    /// [`GapIndex::max_in_window`] for several windows in one pass over the
    /// gaps: every window's pointers stay within its length of the current
    /// gap, so the data is read from memory once, not once per window.
    pub fn max_in_windows(&self, windows_ns: &[u64]) -> Vec<Option<u64>> {
        let at = |x: u64| self.cumulative(self.starts[..self.len()].partition_point(|&s| s < x), x);
        let n = self.len();
        let mut scans: Vec<MaxScan> = windows_ns
            .iter()
            .filter(|&&w| w > 0 && w <= self.total_ns)
            .map(|&w| {
                let last_start = self.total_ns - w;
                // The two ends of the range of positions.
                let best = at(w).max(at(self.total_ns) - at(last_start));
                MaxScan { window: w, last_start, k_end: 0, k_start: 0, best }
            })
            .collect();
        // Blocks of gaps small enough to stay in the cache while every
        // window scans them in turn: each scan is a tight loop over memory
        // the previous scan just brought in (its pointers run at most one
        // window ahead or behind). The scans are independent, so the order
        // does not change any result.
        for first in (0..n).step_by(BLOCK) {
            let last = (first + BLOCK).min(n);
            for pair in scans.chunks_mut(2) {
                match pair.len() {
                    2 => self.scan_max::<2>(pair, first..last),
                    _ => self.scan_max::<1>(pair, first..last),
                }
            }
        }
        let mut scans = scans.into_iter().peekable();
        windows_ns
            .iter()
            .map(|&w| match scans.peek() {
                Some(s) if s.window == w && w > 0 && w <= self.total_ns => scans.next().map(|s| s.best),
                _ => None,
            })
            .collect()
    }

    /// The least gap time (ns) inside any window of each length (`None`
    /// when the run is shorter than the window): what interference is in
    /// *every* window of that length. The gap time over `[t, t + Δ]` falls
    /// while its start is in a gap and rises while its end is, so it is
    /// least where the start leaves a gap (`t = end`), where the end reaches
    /// one (`t = start − Δ`), or at the ends of the run; two monotone
    /// pointers per window, as for the maximum.
    pub fn min_in_windows(&self, windows_ns: &[u64]) -> Vec<Option<u64>> {
        let at = |x: u64| self.cumulative(self.starts[..self.len()].partition_point(|&s| s < x), x);
        windows_ns
            .iter()
            .map(|&w| {
                if w == 0 || w > self.total_ns {
                    return None;
                }
                let last_start = self.total_ns - w;
                let mut least = at(w).min(at(self.total_ns) - at(last_start));
                let (mut k_end, mut k_start) = (0, 0);
                for (&start, g) in self.starts.iter().zip(&self.through[1..]) {
                    let (before, through) = (start - g.off, g.end - g.off);
                    // Window starts where gap i ends.
                    if g.end <= last_start {
                        let x = g.end + w;
                        self.advance(&mut k_end, x);
                        least = least.min(self.cumulative(k_end, x) - through);
                    }
                    // Window ends where gap i starts.
                    if start >= w {
                        let t = start - w;
                        self.advance(&mut k_start, t);
                        least = least.min(before - self.cumulative(k_start, t));
                    }
                }
                Some(least)
            })
            .collect()
    }

    /// Maximum load (fraction of the window) for each window length;
    /// windows longer than the run are left out. The windows are split
    /// over the machine's cores, each core making one pass.
    pub fn max_loads(&self, windows_ns: &[u64]) -> Vec<(u64, f64)> {
        self.loads(windows_ns, Self::max_in_windows)
    }

    /// Least load (fraction of the window) for each window length, as
    /// [`GapIndex::max_loads`] gives the greatest.
    pub fn min_loads(&self, windows_ns: &[u64]) -> Vec<(u64, f64)> {
        self.loads(windows_ns, Self::min_in_windows)
    }

    fn loads(&self, windows_ns: &[u64], scan: fn(&Self, &[u64]) -> Vec<Option<u64>>) -> Vec<(u64, f64)> {
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get()).min(windows_ns.len().max(1));
        // Interleave so each thread gets short and long windows alike.
        let mut parts: Vec<Vec<u64>> = vec![Vec::new(); threads];
        for (i, &w) in windows_ns.iter().enumerate() {
            parts[i % threads].push(w);
        }
        let results: Vec<Vec<(u64, Option<u64>)>> = std::thread::scope(|scope| {
            let handles: Vec<_> =
                parts.iter().map(|ws| scope.spawn(move || ws.iter().copied().zip(scan(self, ws)).collect::<Vec<_>>())).collect();
            handles.into_iter().map(|h| h.join().expect("window scan")).collect()
        });
        let mut out: Vec<(u64, f64)> = results.into_iter().flatten().filter_map(|(w, m)| m.map(|m| (w, m as f64 / w as f64))).collect();
        out.sort_by_key(|&(w, _)| w);
        out
    }
}

/// The most window lengths per decade [`log_windows`] is asked for by the
/// CLI: at 1000 neighbours differ by 0.23%, finer than the probe's clock
/// tells apart, and the count stays a loop bound, not an allocation of
/// billions.
pub const MAX_PER_DECADE: u32 = 1000;

/// `count` window lengths spaced evenly on a log scale from `from_ns` to
/// `to_ns` inclusive (rounded to whole ns, duplicates removed).
pub fn log_windows(from_ns: u64, to_ns: u64, per_decade: u32) -> Vec<u64> {
    if from_ns == 0 || to_ns < from_ns {
        return Vec::new();
    }
    let decades = (to_ns as f64 / from_ns as f64).log10();
    let steps = (decades * per_decade as f64).round().max(0.0) as u32;
    let mut out: Vec<u64> = (0..=steps)
        .map(|i| if steps == 0 { from_ns } else { (from_ns as f64 * 10f64.powf(decades * i as f64 / steps as f64)).round() as u64 })
        .collect();
    out.dedup();
    out
}

#[cfg(test)]
pub(crate) mod tests {
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

    pub(crate) fn gaps_from(spec: &[(u64, u64)]) -> (Vec<Gap>, u64) {
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

    #[test]
    fn many_windows_in_one_pass_match_one_at_a_time() {
        let (gaps, total) = gaps_from(&[(3, 5), (0, 2), (10, 1), (7, 20), (1, 1), (30, 4)]);
        let idx = GapIndex::new(&gaps, total);
        let windows: Vec<u64> = (0..=total + 2).rev().collect();
        let together = idx.max_in_windows(&windows);
        for (w, m) in windows.iter().zip(together) {
            assert_eq!(m, brute(&gaps, total, *w), "w={w}");
        }
    }

    #[test]
    fn blocks_of_gaps_change_nothing() {
        // More gaps than one block, windows from below one gap spacing to
        // many blocks long, against every candidate position evaluated
        // with binary searches (the peaks lie at a gap's start, at a gap's
        // end minus the window, or at the ends of the run).
        let spec: Vec<(u64, u64)> = (0..3 * BLOCK as u64 + 77).map(|i| (1 + (i * 7919) % 300, 1 + (i * 104_729) % 90)).collect();
        let (gaps, total) = gaps_from(&spec);
        let idx = GapIndex::new(&gaps, total);
        let gap_time_before = |x: u64| -> u64 {
            let k = gaps.partition_point(|g| g.start_ns < x);
            let whole: u64 = gaps[..k.saturating_sub(1)].iter().map(|g| g.len_ns).sum();
            whole + k.checked_sub(1).map_or(0, |j| (gaps[j].start_ns + gaps[j].len_ns).min(x) - gaps[j].start_ns)
        };
        let windows = [1, 50, 333, 4_000, 100_000, 1_000_000, total / 2, total];
        for (w, got) in windows.iter().zip(idx.max_in_windows(&windows)) {
            let starts = gaps.iter().map(|g| g.start_ns).chain(gaps.iter().filter_map(|g| (g.start_ns + g.len_ns).checked_sub(*w)));
            let best = starts.chain([0, total - w]).filter(|&t| t + w <= total).map(|t| gap_time_before(t + w) - gap_time_before(t)).max();
            assert_eq!(got, best, "w={w}");
        }
    }

    /// Brute-force least over every integer start.
    fn brute_min(gaps: &[Gap], total: u64, w: u64) -> Option<u64> {
        if w == 0 || w > total {
            return None;
        }
        (0..=total - w).map(|t| gaps.iter().map(|g| (g.start_ns + g.len_ns).min(t + w).saturating_sub(g.start_ns.max(t))).sum()).min()
    }

    proptest! {
        #[test]
        fn least_matches_brute_force(spec in proptest::collection::vec((0u64..40, 1u64..30), 0..12), w in 1u64..300) {
            let (gaps, total) = gaps_from(&spec);
            let idx = GapIndex::new(&gaps, total);
            prop_assert_eq!(idx.min_in_windows(&[w])[0], brute_min(&gaps, total, w));
        }

        #[test]
        fn matches_brute_force(spec in proptest::collection::vec((0u64..40, 1u64..30), 0..12), w in 1u64..300) {
            let (gaps, total) = gaps_from(&spec);
            let idx = GapIndex::new(&gaps, total);
            prop_assert_eq!(idx.max_in_window(w), brute(&gaps, total, w));
        }
    }
}
