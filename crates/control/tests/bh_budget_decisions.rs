//! One decision code, two worlds: a recorded sequence of per-period
//! observations of a NAPI kthread (C: its on-CPU time, P: packets polled,
//! N: packets left pending) with load steps goes through the simulator's
//! `bh-threshold` policy (`irqlab_sim::policy::bh_threshold::BhThreshold`,
//! driven as the simulated kernel drives it: each packet a job that ran,
//! then the period rolled over with the pending count) and through the live
//! controller's adapter (`irqlab_control::bh_budget::LiveController`,
//! driven as `control bh-budget` drives it: one observation per period).
//! Both must give the same threshold T(k+1) every period.
//!
//! Two sequences: a recorded live trace (`tests/data/bh_budget_live_trace.json`,
//! the first 700 periods of a `control bh-budget` run under a flood, with
//! the thresholds the live controller chose then) and a synthetic one with
//! load steps, idle periods and other parameters.
//!
//! A live period can show C > 0 with P = 0 (the kthread woke and found
//! nothing); the simulator has no job without a packet, so the sequence
//! keeps C = 0 whenever P = 0.

use irqlab_control::bh_budget::{Config, LiveController, Observation};
use irqlab_sim::policy::bh_threshold::BhThreshold;

const US: u64 = 1_000;
const MS: u64 = 1_000_000;

/// Observations per period: quiet, a flood that leaves a growing backlog,
/// a flood held at the ring's size, quiet again, idle periods; with jitter.
fn recorded() -> Vec<Observation> {
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let mut jitter = |spread: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % spread.max(1)
    };
    let mut seq = Vec::new();
    for k in 0..600u64 {
        let (p, n, cost) = match k {
            0..=99 => (15 + jitter(10), 0, 3 * US),
            100..=199 => (90 + jitter(30), (k - 100) * 3 + jitter(20), 4 * US),
            200..=349 => (120 + jitter(15), 256 - jitter(40), 4 * US),
            350..=499 => (10 + jitter(5), jitter(2), 3 * US),
            _ => (0, jitter(3), 0),
        };
        let c = p * cost + if p > 0 { jitter(20 * US) } else { 0 };
        seq.push(Observation { consumed_ns: c, processed: p, pending: n });
    }
    seq
}

fn config() -> Config {
    Config {
        dev: "irqlab-b".into(),
        period_ns: MS,
        gain: 0.25,
        window: 100,
        min_ns: 50 * US,
        initial_ns: Some(500 * US),
        ..Config::default()
    }
}

fn sim_policy(c: &Config) -> BhThreshold {
    let table: toml::Table = toml::from_str(&format!(
        "gain = {}\nwindow = {}\nperiod = \"{}ns\"\nt_min = \"{}ns\"\ninitial = \"{}ns\"\ndefault_job_cost = \"{}ns\"\n",
        c.gain,
        c.window,
        c.period_ns,
        c.min_ns,
        c.initial(),
        c.default_cost_ns
    ))
    .unwrap();
    BhThreshold::from_params(&table).unwrap()
}

/// The simulator's adapter, fed as the simulated kernel feeds it.
fn sim_thresholds(c: &Config, seq: &[Observation]) -> Vec<f64> {
    let mut policy = sim_policy(c);
    let mut out = Vec::new();
    for (k, o) in seq.iter().enumerate() {
        // P jobs whose costs sum to C.
        if let Some(each) = o.consumed_ns.checked_div(o.processed) {
            for j in 0..o.processed {
                let extra = if j == 0 { o.consumed_ns - each * o.processed } else { 0 };
                policy.sched.done(each + extra);
            }
        }
        policy.sched.roll((k as u64 + 1) * c.period_ns, || o.pending);
        out.push(policy.sched.ctrl.threshold_ns());
    }
    assert_eq!(policy.sched.periods, seq.len() as u64);
    out
}

fn live_thresholds(c: &Config, seq: &[Observation]) -> Vec<f64> {
    let mut live = LiveController::new(c);
    seq.iter().map(|&o| live.end_period(o).next_ns).collect()
}

#[test]
fn the_live_adapter_and_the_simulator_decide_the_same_thresholds() {
    let c = config();
    let seq = recorded();
    let (sim, live) = (sim_thresholds(&c, &seq), live_thresholds(&c, &seq));
    for (k, (s, l)) in sim.iter().zip(&live).enumerate() {
        assert_eq!(s.to_bits(), l.to_bits(), "period {k}: simulator T(k+1) = {s}, live {l} ({:?})", seq[k]);
    }
    // The sequence exercises the controller: T moves and reaches both ends.
    let (lo, hi) = live.iter().fold((f64::MAX, 0.0f64), |(lo, hi), &t| (lo.min(t), hi.max(t)));
    assert!(hi - lo > 100.0 * US as f64, "T stayed in {lo}..{hi}");
    assert!(live.iter().all(|&t| (c.min_ns as f64..=c.period_ns as f64).contains(&t)));
}

#[test]
fn other_parameters_agree_too() {
    for c in [
        Config { gain: 1.0, window: 1, ..config() },
        Config { gain: 0.05, window: 20, period_ns: 250 * US, min_ns: 10 * US, initial_ns: None, ..config() },
        Config { default_cost_ns: 50 * US, ..config() },
    ] {
        let seq = recorded();
        assert_eq!(sim_thresholds(&c, &seq), live_thresholds(&c, &seq), "{c:?}");
    }
}

#[test]
fn a_recorded_live_trace_gets_the_same_thresholds_from_both() {
    let text = include_str!("data/bh_budget_live_trace.json");
    let doc: serde_json::Value = serde_json::from_str(text).unwrap();
    let rows = doc["periods"].as_array().unwrap();
    let seq: Vec<Observation> = rows
        .iter()
        .map(|r| Observation { consumed_ns: r[0].as_u64().unwrap(), processed: r[1].as_u64().unwrap(), pending: r[2].as_u64().unwrap() })
        .collect();
    // The run's parameters: the defaults, T(0) half the period.
    let c = Config { dev: "irqlab-b".into(), ..Config::default() };
    let (sim, live) = (sim_thresholds(&c, &seq), live_thresholds(&c, &seq));
    for (k, ((s, l), r)) in sim.iter().zip(&live).zip(rows).enumerate() {
        assert_eq!(s.to_bits(), l.to_bits(), "period {k}: simulator T(k+1) = {s}, live {l}");
        // And what the live controller decided during the run (JSON keeps
        // an f64 to within a unit in the last place).
        let then = r[3].as_f64().unwrap();
        assert!((l - then).abs() <= 1e-6 * then, "period {k}: T(k+1) {l} now, {then} in the run");
    }
    assert_eq!(live.len(), 700);
}
