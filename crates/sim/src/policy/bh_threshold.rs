//! The Bottom Half Scheduler of the BH-threshold paper
//! (the paper's §3; `docs/papers.md` §1): three
//! modules between the ISRs and the bottom halves.
//!
//! - **Processing Time Monitor**: per sampling period (1 ms) the bottom-half
//!   time consumed C(k), the jobs processed P(k), and the jobs left pending
//!   N(k) when the period ends.
//! - **Threshold Time Controller**: Algorithm 1 (as reconstructed in `docs/papers.md` §1),
//!   [`ThresholdController`].
//!
//! The decision code (controller, monitor, pending-queue decision) is
//! `irqlab_policy::bh_threshold`, shared with live controllers; this module
//! is the simulator's adapter: which jobs are governed, how many wait.
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
pub use irqlab_policy::bh_threshold::{Anchor, BottomHalfScheduler, ThresholdController};
use serde_json::json;

/// The Bottom Half Scheduler as a [`BottomHalfPolicy`].
#[derive(Debug)]
pub struct BhThreshold {
    pub sched: BottomHalfScheduler,
    /// Bit mask of the governed softirq vectors.
    vectors: u32,
}

impl BhThreshold {
    /// Builds the policy from the `[policy]` table: `gain` (K, paper
    /// 0.25), `window` (W, paper 100), `period` (paper 1 ms),
    /// `default_job_cost`, `t_min`, `initial` (T(0), default the period),
    /// `anchor` (`previous`, the default and the live `control
    /// bh-budget`'s: the listing's T(k); `mean`: the threshold follows the
    /// mean consumed time as the paper's §2.3 says, what the reproduction
    /// sets), `vectors` (default `["net_rx"]`).
    pub fn from_params(params: &toml::Table) -> Result<Self, String> {
        let mut gain = 0.25;
        let mut window = 100usize;
        let mut period = 1_000_000;
        let mut default_cost = 5_000;
        let mut t_min = 50_000;
        let mut initial = None;
        let mut anchor = Anchor::Previous;
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
                "anchor" => {
                    anchor = match v.as_str() {
                        Some("mean") => Anchor::Mean,
                        Some("previous") => Anchor::Previous,
                        _ => return Err("`anchor` must be \"mean\" or \"previous\"".into()),
                    }
                }
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
                        "unknown bh-threshold parameter `{other}` (gain, window, period, default_job_cost, t_min, initial, anchor, vectors)"
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
        let ctrl = ThresholdController::new(gain, window, default_cost, t_min, period, initial.unwrap_or(period)).with_anchor(anchor);
        Ok(BhThreshold { sched: BottomHalfScheduler::new(ctrl, period), vectors })
    }

    /// Closes the periods that ended before `sim.now`.
    fn roll(&mut self, sim: &Sim) {
        let vectors = self.vectors;
        self.sched.roll(sim.now, || pending_jobs(vectors, sim));
    }

    fn governs(&self, job: &Job) -> bool {
        self.vectors & (1 << job.vector) != 0
    }
}

/// Jobs of the governed vectors waiting now: packets on the polled
/// devices and queued jobs.
fn pending_jobs(vectors: u32, sim: &Sim) -> u64 {
    let mut n = 0u64;
    if vectors & (1 << softirq::NET_RX) != 0 {
        n += sim.backlog.len() as u64;
        n += sim.nics.iter().filter(|c| c.napi && c.napi_scheduled).map(|c| c.ring.len() as u64).sum::<u64>();
    }
    for v in 0..softirq::NR_VECTORS {
        if vectors & (1 << v) != 0 {
            n += sim.bh_queues[v].len() as u64;
        }
    }
    n
}

impl BottomHalfPolicy for BhThreshold {
    fn name(&self) -> &'static str {
        "bh-threshold"
    }

    fn admit(&mut self, sim: &Sim, _loc: Loc, job: &Job) -> Admit {
        self.roll(sim);
        if self.governs(job) && !self.sched.admit() {
            // Left at the head of the queue for the next activation.
            return Admit::Defer { wake_ksoftirqd: false };
        }
        Admit::Run
    }

    fn job_done(&mut self, sim: &Sim, _loc: Loc, job: &Job) {
        self.roll(sim);
        if self.governs(job) {
            self.sched.done(job.cost);
        }
    }

    fn on_tick(&mut self, sim: &mut Sim) {
        self.roll(sim);
    }

    fn report(&self) -> Option<serde_json::Value> {
        let s = &self.sched;
        let n = s.periods.max(1) as f64;
        Some(json!({
            "name": "bh-threshold",
            "gain": s.ctrl.gain,
            "window": s.ctrl.window,
            "anchor": s.ctrl.anchor.name(),
            "period_ns": s.period_ns,
            "t_min_ns": s.ctrl.t_min_ns,
            "periods": s.periods,
            "deferrals": s.deferrals,
            "threshold_mean_ns": s.threshold_sum / n,
            "threshold_min_ns": if s.periods > 0 { s.threshold_min } else { 0.0 },
            "threshold_max_ns": s.threshold_max,
            "threshold_last_ns": s.ctrl.threshold_ns(),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn params_are_checked() {
        let t: toml::Table = toml::from_str("gain = 0.5\nwindow = 10\nt_min = \"100us\"").unwrap();
        let p = BhThreshold::from_params(&t).unwrap();
        assert_eq!(p.sched.ctrl.window, 10);
        assert_eq!(p.sched.ctrl.t_min_ns, 100_000.0);
        let bad: toml::Table = toml::from_str("gian = 0.5").unwrap();
        assert!(BhThreshold::from_params(&bad).unwrap_err().contains("gian"));
        let bad: toml::Table = toml::from_str("t_min = \"2ms\"").unwrap();
        assert!(BhThreshold::from_params(&bad).is_err());
        let bad: toml::Table = toml::from_str("vectors = [\"nope\"]").unwrap();
        assert!(BhThreshold::from_params(&bad).is_err());
    }
}
