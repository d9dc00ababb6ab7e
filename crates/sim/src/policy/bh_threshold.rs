//! The Bottom Half Scheduler of the BH-threshold paper
//! (`shared/seeds/bh-threshold-scheduler.txt`, §3; SEEDS.md §1): three
//! modules between the ISRs and the bottom halves.
//!
//! - **Processing Time Monitor**: per sampling period (1 ms) the bottom-half
//!   time consumed C(k), the jobs processed P(k), and the jobs left pending
//!   N(k) when the period ends.
//! - **Threshold Time Controller**: Algorithm 1 (as rebuilt in SEEDS.md),
//!   [`ThresholdController`].
//! - **Pending Queue Controller**: once the period's bottom-half time
//!   reaches the threshold, the next job is put back at the head of its
//!   queue and the vector stays pending; it runs at the next activation
//!   (the next IRQ exit, or ksoftirqd) in a later period. Nothing is
//!   dropped by the policy (the queues keep their own limits).
//!
//! The policy governs the vectors named in `vectors` (default: net_rx);
//! the hook ([`BottomHalfPolicy`]) sees every job, so any bottom half can
//! be governed.

use crate::kernel::Sim;
use crate::softirq::{self, Admit, BottomHalfPolicy, Job, Loc};
use irqlab_analysis::{parse_duration_ns, Nanos};
use serde_json::json;
use std::collections::VecDeque;

/// Algorithm 1 of the BH-threshold paper (SEEDS.md §1): the threshold
/// T(k+1) from the consumed time C(k), the processed jobs P(k) and the
/// pending jobs N(k) of period k.
///
/// ```text
/// E(k)  = N(k)·C(k)/P(k)   (P(k) > 0)   else N(k)·default_cost
/// dC(k) = C(k) − mean(C(k−W+1..k))
/// dE(k) = E(k) − mean(E(k−W+1..k))
/// T(k+1) = clamp(T(k) + K·(dE(k) − dC(k)), T_min, period)
/// ```
#[derive(Debug, Clone)]
pub struct ThresholdController {
    pub gain: f64,
    pub window: usize,
    pub default_cost_ns: f64,
    pub t_min_ns: f64,
    pub period_ns: f64,
    threshold: f64,
    c_hist: VecDeque<f64>,
    e_hist: VecDeque<f64>,
}

impl ThresholdController {
    pub fn new(gain: f64, window: usize, default_cost_ns: Nanos, t_min_ns: Nanos, period_ns: Nanos, initial_ns: Nanos) -> Self {
        let window = window.max(1);
        ThresholdController {
            gain,
            window,
            default_cost_ns: default_cost_ns as f64,
            t_min_ns: t_min_ns as f64,
            period_ns: period_ns as f64,
            threshold: (initial_ns as f64).clamp(t_min_ns as f64, period_ns as f64),
            c_hist: VecDeque::with_capacity(window),
            e_hist: VecDeque::with_capacity(window),
        }
    }

    /// The threshold for the current period, ns.
    pub fn threshold_ns(&self) -> f64 {
        self.threshold
    }

    /// Ends period k with its measurements and returns T(k+1).
    pub fn update(&mut self, consumed_ns: Nanos, processed: u64, pending: u64) -> f64 {
        let c = consumed_ns as f64;
        let e = if processed > 0 {
            pending as f64 * c / processed as f64
        } else {
            pending as f64 * self.default_cost_ns
        };
        push_window(&mut self.c_hist, c, self.window);
        push_window(&mut self.e_hist, e, self.window);
        let dc = c - mean(&self.c_hist);
        let de = e - mean(&self.e_hist);
        self.threshold = (self.threshold + self.gain * (de - dc)).clamp(self.t_min_ns, self.period_ns);
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

/// The Bottom Half Scheduler as a [`BottomHalfPolicy`].
#[derive(Debug)]
pub struct BhThreshold {
    pub ctrl: ThresholdController,
    period_ns: Nanos,
    /// Bit mask of the governed softirq vectors.
    vectors: u32,
    /// Period being monitored, and its C(k), P(k).
    period: u64,
    consumed_ns: Nanos,
    processed: u64,
    // Statistics for the report.
    periods: u64,
    deferrals: u64,
    threshold_sum: f64,
    threshold_min: f64,
    threshold_max: f64,
}

impl BhThreshold {
    /// Builds the policy from the `[policy]` table: `gain` (K, paper
    /// 0.25), `window` (W, paper 100), `period` (paper 1 ms),
    /// `default_job_cost`, `t_min`, `initial` (T(0), default the period),
    /// `vectors` (default `["net_rx"]`).
    pub fn from_params(params: &toml::Table) -> Result<Self, String> {
        let mut gain = 0.25;
        let mut window = 100usize;
        let mut period = 1_000_000;
        let mut default_cost = 5_000;
        let mut t_min = 50_000;
        let mut initial = None;
        let mut vectors = 1u32 << softirq::NET_RX;
        for (key, v) in params {
            let dur = |v: &toml::Value| -> Result<Nanos, String> {
                let s = v.as_str().ok_or_else(|| format!("`{key}` must be a duration string such as \"20us\""))?;
                parse_duration_ns(s).map_err(|e| format!("`{key}`: {e}"))
            };
            match key.as_str() {
                "gain" => {
                    gain = v.as_float().or_else(|| v.as_integer().map(|i| i as f64)).ok_or("`gain` must be a number")?;
                    if !(gain.is_finite() && gain > 0.0) {
                        return Err("`gain` must be > 0".into());
                    }
                }
                "window" => {
                    window = v.as_integer().filter(|w| *w >= 1).ok_or("`window` must be an integer >= 1")? as usize;
                }
                "period" => period = dur(v)?,
                "default_job_cost" => default_cost = dur(v)?,
                "t_min" => t_min = dur(v)?,
                "initial" => initial = Some(dur(v)?),
                "vectors" => {
                    let arr = v.as_array().ok_or("`vectors` must be an array of softirq names")?;
                    vectors = 0;
                    for name in arr {
                        let n = name.as_str().ok_or("`vectors` must hold strings")?;
                        let bit = (0..softirq::NR_VECTORS as u32)
                            .find(|&b| softirq::vector_name(b) == n && n != "other")
                            .ok_or_else(|| format!("unknown softirq vector `{n}` (hi, timer, net_tx, net_rx, block, tasklet)"))?;
                        vectors |= 1 << bit;
                    }
                }
                other => {
                    return Err(format!(
                        "unknown bh-threshold parameter `{other}` (gain, window, period, default_job_cost, t_min, initial, vectors)"
                    ))
                }
            }
        }
        if period == 0 {
            return Err("`period` must be > 0".into());
        }
        if t_min > period {
            return Err("`t_min` must not exceed `period`".into());
        }
        let ctrl = ThresholdController::new(gain, window, default_cost, t_min, period, initial.unwrap_or(period));
        Ok(BhThreshold {
            ctrl,
            period_ns: period,
            vectors,
            period: 0,
            consumed_ns: 0,
            processed: 0,
            periods: 0,
            deferrals: 0,
            threshold_sum: 0.0,
            threshold_min: f64::INFINITY,
            threshold_max: 0.0,
        })
    }

    /// Jobs of the governed vectors waiting now: packets on the polled
    /// devices and queued jobs.
    fn pending_jobs(&self, sim: &Sim) -> u64 {
        let mut n = 0u64;
        if self.vectors & (1 << softirq::NET_RX) != 0 {
            n += sim.backlog.len() as u64;
            n += sim.nics.iter().filter(|c| c.napi && c.napi_scheduled).map(|c| c.ring.len() as u64).sum::<u64>();
        }
        for v in 0..softirq::NR_VECTORS {
            if self.vectors & (1 << v) != 0 {
                n += sim.bh_queues[v].len() as u64;
            }
        }
        n
    }

    /// Closes every period that ended before `sim.now` (the monitor's
    /// sampling), feeding each to the controller.
    fn roll(&mut self, sim: &Sim) {
        let k = sim.now / self.period_ns;
        if k <= self.period {
            return;
        }
        let pending = self.pending_jobs(sim);
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

    fn governs(&self, job: &Job) -> bool {
        self.vectors & (1 << job.vector) != 0
    }
}

impl BottomHalfPolicy for BhThreshold {
    fn name(&self) -> &'static str {
        "bh-threshold"
    }

    fn admit(&mut self, sim: &Sim, _loc: Loc, job: &Job) -> Admit {
        self.roll(sim);
        if self.governs(job) && self.consumed_ns as f64 >= self.ctrl.threshold_ns() {
            self.deferrals += 1;
            // Left at the head of the queue for the next activation.
            return Admit::Defer { wake_ksoftirqd: false };
        }
        Admit::Run
    }

    fn job_done(&mut self, sim: &Sim, _loc: Loc, job: &Job) {
        self.roll(sim);
        if self.governs(job) {
            self.consumed_ns += job.cost;
            self.processed += 1;
        }
    }

    fn on_tick(&mut self, sim: &mut Sim) {
        self.roll(sim);
    }

    fn report(&self) -> Option<serde_json::Value> {
        let n = self.periods.max(1) as f64;
        Some(json!({
            "name": "bh-threshold",
            "gain": self.ctrl.gain,
            "window": self.ctrl.window,
            "period_ns": self.period_ns,
            "t_min_ns": self.ctrl.t_min_ns,
            "periods": self.periods,
            "deferrals": self.deferrals,
            "threshold_mean_ns": self.threshold_sum / n,
            "threshold_min_ns": if self.periods > 0 { self.threshold_min } else { 0.0 },
            "threshold_max_ns": self.threshold_max,
            "threshold_last_ns": self.ctrl.threshold_ns(),
        }))
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
    fn stationary_input_is_a_fixed_point() {
        let mut c = ctrl(450_000);
        for _ in 0..500 {
            c.update(450_000, 90, 3);
        }
        assert!((c.threshold_ns() - 450_000.0).abs() < 1e-6);
    }

    #[test]
    fn params_are_checked() {
        let t: toml::Table = toml::from_str("gain = 0.5\nwindow = 10\nt_min = \"100us\"").unwrap();
        let p = BhThreshold::from_params(&t).unwrap();
        assert_eq!(p.ctrl.window, 10);
        assert_eq!(p.ctrl.t_min_ns, 100_000.0);
        let bad: toml::Table = toml::from_str("gian = 0.5").unwrap();
        assert!(BhThreshold::from_params(&bad).unwrap_err().contains("gian"));
        let bad: toml::Table = toml::from_str("t_min = \"2ms\"").unwrap();
        assert!(BhThreshold::from_params(&bad).is_err());
        let bad: toml::Table = toml::from_str("vectors = [\"nope\"]").unwrap();
        assert!(BhThreshold::from_params(&bad).is_err());
    }
}
