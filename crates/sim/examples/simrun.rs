//! Runs a scenario for a given simulated duration and prints the event
//! rate: `cargo run --release -p irqlab-sim --example simrun -- FILE 100s`.
//! Used for profiling and for docs/performance.md's memory figures (peak RSS of a
//! 10 s vs a 100 s run under /usr/bin/time -v).

use irqlab_sim::{run_scenario, Scenario};
use std::sync::atomic::AtomicBool;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (Some(file), Some(dur)) = (args.get(1), args.get(2)) else {
        eprintln!("usage: simrun SCENARIO.toml DURATION");
        std::process::exit(2);
    };
    let text = std::fs::read_to_string(file).expect("readable scenario");
    let sc = Scenario::parse(file, &text).unwrap_or_else(|e| {
        eprintln!("error: {e}");
        std::process::exit(2)
    });
    let d = irqlab_analysis::parse_duration_ns(dur).expect("duration");
    let p = sc.run_params(None, Some(d)).expect("params");
    let t = std::time::Instant::now();
    let out = run_scenario(&sc, p, false, &AtomicBool::new(false), |_| {}).expect("run");
    let wall = t.elapsed().as_secs_f64();
    println!(
        "{} events, {:.3} s wall, {:.2} M events/s, {:.1} simulated s per wall s",
        out.result.events,
        wall,
        out.result.events as f64 / wall / 1e6,
        d as f64 / 1e9 / wall
    );
}
