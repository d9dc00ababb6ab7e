//! Speed of the simulator on the benchmark: 100 s of a ping every
//! 10 us (NAPI, linux-2.6) with two periodic RT tasks
//! (scenarios/examples/ping-flood.toml). Prints events per second and
//! simulated seconds per wall second besides criterion's timing.

use criterion::{criterion_group, criterion_main, Criterion};
use irqlab_sim::{run_scenario, Scenario};
use std::sync::atomic::AtomicBool;
use std::time::Instant;

const SIM_NS: u64 = 100_000_000_000;

/// The same built-in scenario as `irqlab bench sim`.
fn scenario() -> Scenario {
    irqlab_sim::bench::ping_flood()
}

fn bench(c: &mut Criterion) {
    let sc = scenario();
    let p = sc.run_params(None, Some(SIM_NS)).expect("params");
    let stop = AtomicBool::new(false);
    // One timed run for the figures in docs/performance.md.
    let start = Instant::now();
    let out = run_scenario(&sc, p, false, &stop, |_| {}).expect("run");
    let wall = start.elapsed().as_secs_f64();
    let events = out.result.events as f64;
    println!(
        "ping-flood 100 s: {:.0} events in {:.2} s wall = {:.1} M events/s, {:.1} simulated s per wall s",
        events,
        wall,
        events / wall / 1e6,
        SIM_NS as f64 / 1e9 / wall
    );
    let mut g = c.benchmark_group("sim");
    g.sample_size(10);
    g.bench_function("ping_flood_100s", |b| b.iter(|| run_scenario(&sc, p, false, &stop, |_| {}).expect("run").result.events));
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
