//! The simulated interference probe: the load-bounds paper's τ2 (§4), a
//! task that would read the clock in a tight loop and see every preemption
//! as a gap. Here the gaps are known exactly: every interval in which the
//! probe task did not execute. For each window length Δ the probe keeps
//! the largest fraction of any window of length Δ covered by gaps — the
//! empirical load bound load_max(Δ) — and emits the same curve/v1 document
//! as the live probe.
//!
//! The maximum of a window's gap coverage over all window positions is
//! reached with the window's right edge at a gap's end or its left edge at
//! a gap's start, so only those positions are evaluated. Memory holds only
//! the gaps of the last Δ_max.

use irqlab_analysis::curve::{Curve, CurvePoint};
use irqlab_analysis::Nanos;
use std::collections::VecDeque;

pub struct Probe {
    pub task: usize,
    pub windows: Vec<Nanos>,
    /// Max gap time seen in a window of each length.
    worst: Vec<Nanos>,
    /// Recent gaps (start, end) and the running total of gap time before
    /// each, indexed from `base`.
    gaps: VecDeque<(Nanos, Nanos, u128)>,
    base: u64,
    total: u128,
    /// Per window: absolute index of the next gap whose start-anchored
    /// window has not been evaluated yet.
    next_start: Vec<u64>,
    last_end: Option<Nanos>,
    origin: Nanos,
    pub gaps_seen: u64,
}

impl Probe {
    pub fn new(task: usize, mut windows: Vec<Nanos>, origin: Nanos) -> Self {
        windows.sort_unstable();
        windows.dedup();
        let k = windows.len();
        Probe {
            task,
            windows,
            worst: vec![0; k],
            gaps: VecDeque::new(),
            base: 0,
            total: 0,
            next_start: vec![0; k],
            last_end: Some(origin),
            origin,
            gaps_seen: 0,
        }
    }

    pub fn reset(&mut self, now: Nanos) {
        *self = Probe::new(self.task, std::mem::take(&mut self.windows), now);
    }

    /// The probe executed during [start, end).
    pub fn ran(&mut self, start: Nanos, end: Nanos) {
        if let Some(last) = self.last_end {
            if start > last {
                self.gap(last.max(self.origin), start);
            }
        }
        self.last_end = Some(end);
    }

    fn gap(&mut self, s: Nanos, e: Nanos) {
        self.gaps_seen += 1;
        self.gaps.push_back((s, e, self.total));
        self.total += (e - s) as u128;
        for k in 0..self.windows.len() {
            let w = self.windows[k];
            let by_end = self.covered(e.saturating_sub(w), e);
            self.worst[k] = self.worst[k].max(by_end);
            // Windows anchored at earlier gap starts that now lie wholly
            // in the past.
            while self.next_start[k] < self.base + self.gaps.len() as u64 {
                let (gs, _, _) = self.gaps[(self.next_start[k] - self.base) as usize];
                if gs + w > e {
                    break;
                }
                let c = self.covered(gs, gs + w);
                self.worst[k] = self.worst[k].max(c);
                self.next_start[k] += 1;
            }
        }
        self.prune(e);
    }

    /// Gap time inside [a, b).
    fn covered(&self, a: Nanos, b: Nanos) -> Nanos {
        // First gap ending after a.
        let i = self.gaps.partition_point(|g| g.1 <= a);
        let j = self.gaps.partition_point(|g| g.0 < b);
        if i >= j {
            return 0;
        }
        let before_i = self.gaps[i].2;
        let through_j = self.gaps[j - 1].2 + (self.gaps[j - 1].1 - self.gaps[j - 1].0) as u128;
        let mut sum = through_j - before_i;
        let (s_i, _, _) = self.gaps[i];
        if s_i < a {
            sum -= (a - s_i) as u128;
        }
        let (_, e_j, _) = self.gaps[j - 1];
        if e_j > b {
            sum -= (e_j - b) as u128;
        }
        sum as Nanos
    }

    fn prune(&mut self, now: Nanos) {
        let wmax = self.windows.last().copied().unwrap_or(0);
        let min_next = self.next_start.iter().copied().min().unwrap_or(u64::MAX);
        while let Some(&(_, e, _)) = self.gaps.front() {
            if e + wmax < now && self.base < min_next {
                self.gaps.pop_front();
                self.base += 1;
            } else {
                break;
            }
        }
    }

    /// Closes the measurement at `end` and returns the curve: for each Δ
    /// that fits in the run, max gap fraction of any window of length Δ.
    pub fn finish(&mut self, end: Nanos) -> Curve {
        if let Some(last) = self.last_end {
            if end > last {
                self.gap(last, end);
            }
            self.last_end = Some(end);
        }
        // Start-anchored windows that run past the end are clipped to it.
        for k in 0..self.windows.len() {
            let w = self.windows[k];
            while self.next_start[k] < self.base + self.gaps.len() as u64 {
                let (gs, _, _) = self.gaps[(self.next_start[k] - self.base) as usize];
                let c = self.covered(gs, gs + w);
                self.worst[k] = self.worst[k].max(c);
                self.next_start[k] += 1;
            }
        }
        let span = end.saturating_sub(self.origin);
        let points = self
            .windows
            .iter()
            .zip(&self.worst)
            .filter(|(w, _)| **w <= span)
            .map(|(&w, &c)| CurvePoint { window_ns: w, max_load: c as f64 / w as f64 })
            .collect();
        Curve::new(points)
    }
}

/// `n` window lengths spaced evenly in log scale from `from` to `to`.
pub fn log_windows(from: Nanos, to: Nanos, n: usize) -> Vec<Nanos> {
    if n <= 1 || to <= from {
        return vec![from];
    }
    let (a, b) = ((from as f64).ln(), (to as f64).ln());
    (0..n).map(|i| (a + (b - a) * i as f64 / (n - 1) as f64).exp().round() as Nanos).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Brute force over every integer window start.
    fn brute(gaps: &[(Nanos, Nanos)], w: Nanos, end: Nanos) -> Nanos {
        (0..=end.saturating_sub(w)).map(|a| gaps.iter().map(|&(s, e)| e.min(a + w).saturating_sub(s.max(a))).sum()).max().unwrap_or(0)
    }

    #[test]
    fn matches_brute_force_on_a_gap_pattern() {
        let gaps = [(3, 5), (9, 10), (11, 15), (30, 31), (33, 40), (41, 42)];
        let mut p = Probe::new(0, vec![1, 2, 4, 7, 10, 20], 0);
        let mut t = 0;
        for &(s, e) in &gaps {
            p.ran(t, s);
            t = e;
        }
        p.ran(t, 60);
        let c = p.finish(60);
        for pt in &c.points {
            let b = brute(&gaps, pt.window_ns, 60);
            assert_eq!((pt.max_load * pt.window_ns as f64).round() as Nanos, b, "window {}", pt.window_ns);
        }
    }

    #[test]
    fn log_windows_span_the_range() {
        let w = log_windows(10_000, 100_000_000, 5);
        assert_eq!(w.first(), Some(&10_000));
        assert_eq!(w.last(), Some(&100_000_000));
        assert_eq!(w.len(), 5);
    }
}
