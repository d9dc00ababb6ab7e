//! The simulator's speed benchmark (issue 3): 100 s of one ping every
//! 10 us at a NAPI NIC (linux-2.6) plus two periodic RT tasks, the
//! scenario of `scenarios/examples/ping-flood.toml` (built in, so that
//! `irqlab bench sim` and the criterion bench run the same thing anywhere).

use crate::{run_scenario, RunError, RunParams, Scenario};
use irqlab_analysis::Nanos;
use serde::Serialize;
use std::sync::atomic::AtomicBool;
use std::time::Instant;

/// The benchmark scenario's text.
pub const PING_FLOOD_TOML: &str = include_str!("../../../scenarios/examples/ping-flood.toml");

/// The benchmark length: 100 simulated seconds.
pub const BENCH_DURATION_NS: Nanos = 100_000_000_000;

pub const BENCH_SCHEMA: &str = "irqlab/bench-sim/v1";

/// The built-in benchmark scenario.
pub fn ping_flood() -> Scenario {
    Scenario::parse("scenarios/examples/ping-flood.toml", PING_FLOOD_TOML).expect("the built-in scenario is valid")
}

/// What one timed run gave.
#[derive(Debug, Clone, Serialize)]
pub struct SpeedReport {
    pub schema: &'static str,
    pub scenario: &'static str,
    /// False when stopped early (the figures then cover the part run).
    pub complete: bool,
    pub simulated_ns: Nanos,
    pub events: u64,
    pub wall_ns: u64,
    pub events_per_second: f64,
    pub simulated_seconds_per_wall_second: f64,
}

/// Runs the benchmark scenario for `duration` of simulated time and times
/// it on the wall clock.
pub fn run_speed(duration: Nanos, stop: &AtomicBool, progress: impl FnMut(Nanos)) -> Result<SpeedReport, RunError> {
    let sc = ping_flood();
    let p: RunParams = sc.run_params(None, Some(duration))?;
    let start = Instant::now();
    let out = run_scenario(&sc, p, false, stop, progress)?;
    let wall = start.elapsed();
    let wall_s = wall.as_secs_f64().max(1e-9);
    // The scenario has no warm-up: the measured span is all that ran.
    let simulated = out.result.measured_ns;
    Ok(SpeedReport {
        schema: BENCH_SCHEMA,
        scenario: "ping-flood",
        complete: out.result.complete,
        simulated_ns: simulated,
        events: out.result.events,
        wall_ns: wall.as_nanos() as u64,
        events_per_second: out.result.events as f64 / wall_s,
        simulated_seconds_per_wall_second: simulated as f64 / 1e9 / wall_s,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_run_counts_events_and_rates() {
        let r = run_speed(10_000_000, &AtomicBool::new(false), |_| {}).unwrap();
        assert!(r.complete);
        assert_eq!(r.simulated_ns, 10_000_000);
        // 1,000 pings in 10 ms, each several events.
        assert!(r.events > 2_000, "{r:?}");
        assert!(r.events_per_second > 0.0 && r.simulated_seconds_per_wall_second > 0.0);
    }
}
