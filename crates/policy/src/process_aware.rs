//! Process-aware interrupts (the paper's §3; `docs/papers.md` §2) as decision code: the compensation algorithm's
//! accounting (§3.1, [`Compensation`], with N(t) from [`BhPerTick`]) and
//! the scheduling decision (§3.2, [`predicted_priority`],
//! [`bottom_halves_win`]). The simulator's `process-aware` policy is an
//! adapter: it finds the registered processes, the contenders and the
//! charged task, and moves the ticks.

use irqlab_analysis::Nanos;

/// The compensation algorithm's bookkeeping, in bottom-half counts.
#[derive(Debug, Clone, Default)]
pub struct Compensation {
    /// m(t): bottom halves processed (in softirq context) since the last tick.
    pub m: i64,
    /// x_k(t): unaccounted bottom halves of process k.
    pub x: Vec<i64>,
    /// Bottom halves with no owning process.
    pub orphans: u64,
}

impl Compensation {
    /// A bottom half finished in softirq context; `owner` is the process it
    /// turned out to be for.
    pub fn bh_done(&mut self, owner: Option<usize>) {
        self.m += 1;
        match owner {
            Some(k) => {
                if self.x.len() <= k {
                    self.x.resize(k + 1, 0);
                }
                self.x[k] += 1;
            }
            None => self.orphans += 1,
        }
    }

    /// The tick charged to process `i`, with N(t) = `n` bottom halves per
    /// tick: returns the signed number of ticks to move onto `i`'s system
    /// time (negative: off it). x_i moves toward zero by N per tick moved
    /// (the worked example's reading; the listing writes `x_i −= N`).
    pub fn tick(&mut self, i: usize, n: i64) -> i64 {
        if self.x.len() <= i {
            self.x.resize(i + 1, 0);
        }
        let n = n.max(1);
        let x = &mut self.x[i];
        *x -= self.m;
        self.m = 0;
        let sign = x.signum();
        let mut moved = 0;
        while x.abs() >= n {
            moved += sign;
            *x -= n * sign;
        }
        moved
    }
}

/// The EWMA estimate of N(t), eq. (1): N(t) = (1−γ)·N(t−1) + γ·N_inst(t).
#[derive(Debug, Clone)]
pub struct BhPerTick {
    pub gamma: f64,
    pub value: Option<f64>,
}

impl BhPerTick {
    /// Folds in one tick's measurement: `tick_ns` over the mean cost of the
    /// bottom halves seen in it (`cost_ns` total over `count`).
    pub fn observe(&mut self, tick_ns: Nanos, cost_ns: Nanos, count: u64) {
        if count == 0 || cost_ns == 0 {
            return;
        }
        let inst = tick_ns as f64 * count as f64 / cost_ns as f64;
        self.value = Some(match self.value {
            None => inst,
            Some(v) => (1.0 - self.gamma) * v + self.gamma * inst,
        });
    }

    /// N(t) rounded to the nearest integer (the paper's footnote 2), ≥ 1.
    pub fn rounded(&self) -> Option<i64> {
        self.value.map(|v| (v.round() as i64).max(1))
    }
}
/// §3.2: the predicted bottom-half priority, the highest priority
/// (scheduler rank: higher runs first) among the processes registered with
/// the device (socket owners, and those blocked in recv on it); `orphan`
/// when there are none.
pub fn predicted_priority(registered: impl IntoIterator<Item = i32>, orphan: i32) -> i32 {
    registered.into_iter().max().unwrap_or(orphan)
}

/// §3.2: raised bottom halves run now only when their predicted priority
/// is at least that of the most important task wanting the CPU
/// (`contender`; none: they run).
pub fn bottom_halves_win(predicted: impl FnOnce() -> i32, contender: Option<i32>) -> bool {
    match contender {
        None => true,
        Some(c) => predicted() >= c,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const P1: usize = 1;
    const P2: usize = 2;

    /// Fig. 3 of the paper: at t = 1, 3 bottom halves ran under P1, 2 of
    /// them for P1 (x1 = −1); until t = 7 four more for P1 ran while P2 was
    /// charged; in the tick before t = 7, two that were not P1's ran under
    /// P1: x1(7) = −2 + 4 − 1 = 1. With N = 3 no whole tick is moved.
    #[test]
    fn worked_example_of_figure_3() {
        let mut c = Compensation::default();
        let n = 3;
        c.bh_done(Some(P1));
        c.bh_done(Some(P1));
        c.bh_done(Some(P2));
        assert_eq!(c.tick(P1, n), 0);
        assert_eq!(c.x[P1], -1);
        for _ in 0..4 {
            c.bh_done(Some(P1));
        }
        for _ in 2..7 {
            c.tick(P2, n);
        }
        c.bh_done(Some(P2));
        c.bh_done(None);
        assert_eq!(c.tick(P1, n), 0);
        assert_eq!(c.x[P1], 1, "x1(7)");
        assert_eq!(c.orphans, 1);
    }

    #[test]
    fn whole_ticks_move_and_x_goes_toward_zero() {
        let mut c = Compensation::default();
        // Seven foreign bottom halves ran under P1 in one tick, N = 3:
        // two ticks come off P1, x1 = −1 is left.
        for _ in 0..7 {
            c.bh_done(Some(P2));
        }
        assert_eq!(c.tick(P1, 3), -2);
        assert_eq!(c.x[P1], -1);
        assert_eq!(c.m, 0);
        // Later P2 is charged with nothing run under it: it owes 7 -> +2 ticks.
        assert_eq!(c.tick(P2, 3), 2);
        assert_eq!(c.x[P2], 1);
    }

    #[test]
    fn ewma_of_bottom_halves_per_tick() {
        let mut n = BhPerTick { gamma: 0.3, value: None };
        n.observe(10_000_000, 100_000, 10); // 10 us each: 1000 per 10 ms tick
        assert_eq!(n.rounded(), Some(1000));
        n.observe(10_000_000, 200_000, 10); // 20 us: 500
        assert!((n.value.unwrap() - (0.7 * 1000.0 + 0.3 * 500.0)).abs() < 1e-9);
        n.observe(10_000_000, 0, 0); // nothing ran: unchanged
        assert_eq!(n.rounded(), Some(850));
    }

    #[test]
    fn bottom_halves_wait_for_a_more_important_contender() {
        assert_eq!(predicted_priority([3, 9, 5], 0), 9);
        assert_eq!(predicted_priority([], -1), -1);
        assert!(bottom_halves_win(|| 5, None));
        assert!(bottom_halves_win(|| 5, Some(5)));
        assert!(!bottom_halves_win(|| 5, Some(6)));
    }
}
