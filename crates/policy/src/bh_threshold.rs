//! The BH-threshold paper's Bottom Half Scheduler
//! (the paper's §3; `docs/papers.md` §1) as
//! decision code: the Threshold Time Controller (Algorithm 1,
//! [`ThresholdController`]) and the Processing Time Monitor with the
//! Pending Queue Controller ([`BottomHalfScheduler`]): per sampling period
//! the bottom-half time consumed C(k), jobs processed P(k) and jobs left
//! pending N(k) feed the controller; once the period's bottom-half time
//! reaches the threshold, further jobs are deferred to a later
//! activation. The simulator's `bh-threshold` policy is an adapter over
//! it (it says which jobs are governed and counts the pending ones).

use irqlab_analysis::Nanos;
use std::collections::VecDeque;

/// Algorithm 1 of the BH-threshold paper (`docs/papers.md` §1; our reconstruction of the unreadable listing): the threshold
/// T(k+1) from the consumed time C(k), the processed jobs P(k) and the
/// pending jobs N(k) of period k.
///
/// ```text
/// E(k)  = N(k)·C(k)/P(k)   (P(k) > 0)   else N(k)·default_cost
/// dC(k) = C(k) − mean(C(k−W+1..k))
/// dE(k) = E(k) − mean(E(k−W+1..k))
/// T(k+1) = clamp(A(k) + K·(dE(k) − dC(k)), T_min, period)
/// ```
///
/// The anchor A(k) is the previous threshold T(k) ([`Anchor::Previous`],
/// the listing as reconstructed) or the mean consumed time
/// mean(C(k−W+1..k)) ([`Anchor::Mean`]): the paper's §2.3 says the
/// controller is to "restrict the execution time of the bottom halves
/// within the average time", and §3.3 that it "adjusts the threshold time
/// to the average time of packet processing". Anchored at T(k), a
/// threshold that starts at the period only random-walks by the
/// mean-zero variations and may never bind.
#[derive(Debug, Clone)]
pub struct ThresholdController {
    pub gain: f64,
    pub window: usize,
    pub anchor: Anchor,
    pub default_cost_ns: f64,
    pub t_min_ns: f64,
    pub period_ns: f64,
    threshold: f64,
    c_hist: VecDeque<f64>,
    e_hist: VecDeque<f64>,
}

/// What the threshold's update starts from (see [`ThresholdController`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Anchor {
    /// T(k): the reconstructed listing.
    Previous,
    /// The mean consumed time over the window: the paper's §2.3 text.
    Mean,
}

impl Anchor {
    pub fn name(self) -> &'static str {
        match self {
            Anchor::Previous => "previous",
            Anchor::Mean => "mean",
        }
    }
}

impl ThresholdController {
    pub fn new(gain: f64, window: usize, default_cost_ns: Nanos, t_min_ns: Nanos, period_ns: Nanos, initial_ns: Nanos) -> Self {
        let window = window.max(1);
        ThresholdController {
            gain,
            window,
            anchor: Anchor::Previous,
            default_cost_ns: default_cost_ns as f64,
            t_min_ns: t_min_ns as f64,
            period_ns: period_ns as f64,
            threshold: (initial_ns as f64).clamp(t_min_ns as f64, period_ns as f64),
            c_hist: VecDeque::with_capacity(window),
            e_hist: VecDeque::with_capacity(window),
        }
    }

    /// The same controller with another [`Anchor`].
    pub fn with_anchor(mut self, anchor: Anchor) -> Self {
        self.anchor = anchor;
        self
    }

    /// The threshold for the current period, ns.
    pub fn threshold_ns(&self) -> f64 {
        self.threshold
    }

    /// E(k): the time the pending jobs would take, at this period's cost
    /// per job (the default cost when no job ran).
    pub fn backlog_estimate_ns(&self, consumed_ns: Nanos, processed: u64, pending: u64) -> f64 {
        let c = consumed_ns as f64;
        if processed > 0 {
            pending as f64 * c / processed as f64
        } else {
            pending as f64 * self.default_cost_ns
        }
    }

    /// Ends period k with its measurements and returns T(k+1).
    pub fn update(&mut self, consumed_ns: Nanos, processed: u64, pending: u64) -> f64 {
        let c = consumed_ns as f64;
        let e = self.backlog_estimate_ns(consumed_ns, processed, pending);
        push_window(&mut self.c_hist, c, self.window);
        push_window(&mut self.e_hist, e, self.window);
        let dc = c - mean(&self.c_hist);
        let de = e - mean(&self.e_hist);
        let base = match self.anchor {
            Anchor::Previous => self.threshold,
            Anchor::Mean => mean(&self.c_hist),
        };
        self.threshold = (base + self.gain * (de - dc)).clamp(self.t_min_ns, self.period_ns);
        self.threshold
    }
}

fn push_window(h: &mut VecDeque<f64>, v: f64, w: usize) {
    if h.len() == w {
        h.pop_front();
    }
    h.push_back(v);
}

fn mean(h: &VecDeque<f64>) -> f64 {
    if h.is_empty() {
        0.0
    } else {
        h.iter().sum::<f64>() / h.len() as f64
    }
}

/// The monitor and the pending-queue decision around a
/// [`ThresholdController`], with the statistics a report shows.
#[derive(Debug, Clone)]
pub struct BottomHalfScheduler {
    pub ctrl: ThresholdController,
    pub period_ns: Nanos,
    /// Period being monitored, and its C(k), P(k).
    period: u64,
    consumed_ns: Nanos,
    processed: u64,
    pub periods: u64,
    pub deferrals: u64,
    pub threshold_sum: f64,
    pub threshold_min: f64,
    pub threshold_max: f64,
}

impl BottomHalfScheduler {
    pub fn new(ctrl: ThresholdController, period_ns: Nanos) -> Self {
        BottomHalfScheduler {
            ctrl,
            period_ns,
            period: 0,
            consumed_ns: 0,
            processed: 0,
            periods: 0,
            deferrals: 0,
            threshold_sum: 0.0,
            threshold_min: f64::INFINITY,
            threshold_max: 0.0,
        }
    }

    /// Closes every period that ended before `now` (the monitor's
    /// sampling), feeding each to the controller; `pending` counts the
    /// governed jobs waiting now (asked only when a period ends).
    pub fn roll(&mut self, now: Nanos, pending: impl FnOnce() -> u64) {
        let k = now / self.period_ns;
        if k <= self.period {
            return;
        }
        let pending = pending();
        while self.period < k {
            let t = self.ctrl.update(self.consumed_ns, self.processed, pending);
            self.consumed_ns = 0;
            self.processed = 0;
            self.period += 1;
            self.periods += 1;
            self.threshold_sum += t;
            self.threshold_min = self.threshold_min.min(t);
            self.threshold_max = self.threshold_max.max(t);
        }
    }

    /// The Pending Queue Controller: whether a governed job may run now
    /// (false: it waits at the head of its queue for a later activation).
    pub fn admit(&mut self) -> bool {
        if self.consumed_ns as f64 >= self.ctrl.threshold_ns() {
            self.deferrals += 1;
            return false;
        }
        true
    }

    /// A governed job ran for `cost_ns`.
    pub fn done(&mut self, cost_ns: Nanos) {
        self.consumed_ns += cost_ns;
        self.processed += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctrl(initial: Nanos) -> ThresholdController {
        // Paper values K = 0.25, W = 100, period 1 ms.
        ThresholdController::new(0.25, 100, 5_000, 50_000, 1_000_000, initial)
    }

    #[test]
    fn first_period_follows_the_formula() {
        let mut c = ctrl(500_000);
        // One period: mean of a 1-sample window is the sample, so dC = dE = 0.
        assert_eq!(c.update(400_000, 80, 10), 500_000.0);
        // Second: C = 600 us (mean 500 -> dC = +100 us), E = 20·600/100 = 120 us
        // (E history 50, 120 -> mean 85 -> dE = +35 us); T += 0.25·(35 − 100).
        let t = c.update(600_000, 100, 20);
        assert!((t - (500_000.0 + 0.25 * (35_000.0 - 100_000.0))).abs() < 1e-6, "{t}");
    }

    #[test]
    fn growing_backlog_raises_and_swinging_consumption_lowers_the_threshold() {
        let mut c = ctrl(300_000);
        for _ in 0..10 {
            c.update(300_000, 60, 0);
        }
        let before = c.threshold_ns();
        // Backlog appears at the same consumed time: dE > 0, dC = 0.
        let up = c.update(300_000, 60, 50);
        assert!(up > before, "{up} <= {before}");
        let mut d = ctrl(300_000);
        for _ in 0..10 {
            d.update(300_000, 60, 0);
        }
        // Consumption swings above its mean with no backlog: dC > 0.
        let down = d.update(500_000, 100, 0);
        assert!(down < 300_000.0, "{down}");
    }

    #[test]
    fn no_jobs_uses_the_default_cost_and_clamps() {
        let mut c = ThresholdController::new(0.25, 2, 5_000, 50_000, 1_000_000, 900_000);
        c.update(0, 0, 0);
        // E = 1000 · 5 us = 5 ms, mean over {0, 5 ms} = 2.5 ms: dE = 2.5 ms -> T saturates at the period.
        assert_eq!(c.update(0, 0, 1000), 1_000_000.0);
        // Big consumption swing with no backlog: T drops, never below T_min.
        let mut d = ThresholdController::new(10.0, 2, 5_000, 50_000, 1_000_000, 100_000);
        d.update(0, 0, 0);
        assert_eq!(d.update(1_000_000, 100, 0), 50_000.0);
    }

    #[test]
    fn anchored_at_the_mean_the_threshold_follows_the_consumed_time_not_its_start() {
        // Started at the period, fed a steady 450 us: anchored at T(k) it
        // stays at 1 ms (the variations are zero); anchored at the mean it
        // is 450 us from the first period on.
        let mut previous = ctrl(1_000_000);
        let mut at_mean = ctrl(1_000_000).with_anchor(Anchor::Mean);
        for _ in 0..20 {
            previous.update(450_000, 90, 0);
            at_mean.update(450_000, 90, 0);
        }
        assert_eq!(previous.threshold_ns(), 1_000_000.0);
        assert!((at_mean.threshold_ns() - 450_000.0).abs() < 1e-6, "{}", at_mean.threshold_ns());
        // A period above the mean with no backlog pulls it below the mean.
        let t = at_mean.update(650_000, 130, 0);
        assert!(t < 450_000.0, "{t}");
    }

    #[test]
    fn stationary_input_is_a_fixed_point() {
        let mut c = ctrl(450_000);
        for _ in 0..500 {
            c.update(450_000, 90, 3);
        }
        assert!((c.threshold_ns() - 450_000.0).abs() < 1e-6);
    }

    #[test]
    fn the_period_budget_defers_once_reached_and_resets_each_period() {
        let mut s = BottomHalfScheduler::new(ThresholdController::new(0.25, 100, 5_000, 50_000, 1_000_000, 300_000), 1_000_000);
        assert!(s.admit());
        s.done(200_000);
        assert!(s.admit());
        s.done(150_000);
        // 350 us >= 300 us: deferred until the period ends.
        assert!(!s.admit());
        s.roll(1_000_000, || 7);
        assert_eq!(s.periods, 1);
        assert!(s.admit());
        assert_eq!(s.deferrals, 1);
    }
}
