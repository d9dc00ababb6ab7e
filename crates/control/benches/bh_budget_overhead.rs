//! What `irqlab control bh-budget` itself costs (issue 19): the CPU time
//! of its controller thread per second held at 1 ms periods (the monitor's
//! ring and counters read, Algorithm 1, the actuator's calls), and the
//! round trip of each `sched_setattr` that moves the NAPI kthread between
//! its two levels. The BPF programs run in the watched threads' context
//! and are not in the controller's time.
//!
//! Setup: the testbed, a UDP flood of 50-byte datagrams from `irqlab-b`
//! (sender pinned to CPU 0, as fast as it goes) into a receiver on the last
//! CPU, the NAPI kthread pinned there; `IRQLAB_BENCH_ROUNDS` runs (default
//! 5) of `IRQLAB_BENCH_SLOT_MS` (default 4000) each, with medians and
//! ranges over runs. Needs root; prints why and does nothing otherwise.
//!
//! Run: `cargo bench -p irqlab-control --bench bh_budget_overhead`.

use irqlab_control::bh_budget::{self, Config};
use irqlab_host::rt;
use irqlab_host::testbed::{Side, Testbed};
use irqlab_measure::traffic::{self, Kind, Plan, Schedule};
use std::net::SocketAddrV4;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

const PORT: u16 = 9_719;

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn range(v: &[f64]) -> (f64, f64) {
    (v.iter().copied().fold(f64::INFINITY, f64::min), v.iter().copied().fold(0.0, f64::max))
}

fn main() {
    if !nix::unistd::geteuid().is_root() {
        eprintln!("bh_budget_overhead: skipped (needs root: testbed, BPF, sched_setattr on a kthread)");
        return;
    }
    let (rounds, slot_ms) = (env_or("IRQLAB_BENCH_ROUNDS", 5).max(1), env_or("IRQLAB_BENCH_SLOT_MS", 4_000));
    let cpus = rt::online_cpus().expect("online CPUs");
    let focus = *cpus.last().unwrap();
    let bed = Testbed::up().expect("testbed");
    let bind = SocketAddrV4::new(bed.root_addr(Side::B), PORT);
    let sink_stop = Arc::new(AtomicBool::new(false));
    let sink = {
        let stop = sink_stop.clone();
        std::thread::spawn(move || {
            rt::pin_to_cpu(focus)?;
            traffic::udp_sink(bind, false, &stop)
        })
    };
    let flood_stop = Arc::new(AtomicBool::new(false));
    let plan = Plan {
        kind: Kind::Udp { port: PORT },
        target: *bind.ip(),
        schedule: Schedule::Periodic { interval_ns: 1_000 },
        size: 50,
        duration_ns: u64::MAX / 2,
    };
    let sender_cpu = cpus.first().copied().filter(|&c| c != focus);
    let flood = {
        let stop = flood_stop.clone();
        bed.spawn_in(Side::B, move || {
            if let Some(cpu) = sender_cpu {
                rt::pin_to_cpu(cpu)?;
            }
            traffic::send(&plan, &stop)
        })
        .expect("flood")
    };
    std::thread::sleep(std::time::Duration::from_millis(300));
    let (mut cpu_us, mut p50, mut p99, mut max, mut calls) = (Vec::new(), Vec::new(), Vec::new(), Vec::new(), 0u64);
    for round in 0..rounds {
        let config = Config { dev: "irqlab-b".into(), cpu: Some(focus), duration_ns: Some(slot_ms * 1_000_000), ..Config::default() };
        let out = bh_budget::run(&config, &AtomicBool::new(false), |_| {}).expect("bh-budget run");
        let o = &out.report.overhead;
        let us = |v: Option<u64>| v.unwrap_or(0) as f64 / 1e3;
        eprintln!(
            "round {}: {} periods, {:.0} packets/s, controller {:.0} us CPU per s, sched_setattr p50 {:.1} us p99 {:.1} us max {:.1} us ({} calls)",
            round + 1,
            out.report.figures.periods,
            out.report.figures.packets_per_s,
            o.controller.controller_us_per_s,
            us(o.setattr.p50_ns),
            us(o.setattr.p99_ns),
            us(o.setattr.max_ns),
            o.setattr.count
        );
        cpu_us.push(o.controller.controller_us_per_s);
        p50.push(us(o.setattr.p50_ns));
        p99.push(us(o.setattr.p99_ns));
        max.push(us(o.setattr.max_ns));
        calls += o.setattr.count;
    }
    flood_stop.store(true, Ordering::SeqCst);
    let _ = flood.join();
    sink_stop.store(true, Ordering::SeqCst);
    let _ = sink.join();
    let (lo, hi) = range(&cpu_us);
    println!(
        "bh-budget overhead at 1 ms periods, {rounds} runs of {slot_ms} ms under a flood: controller CPU {:.0} us per s (median; {lo:.0}-{hi:.0}), \
         = {:.2}% of a CPU; sched_setattr round trip median of runs p50 {:.1} us, p99 {:.1} us, max {:.1} us ({calls} calls)",
        median(cpu_us.clone()),
        median(cpu_us) / 1e4,
        median(p50),
        median(p99),
        max.iter().copied().fold(0.0, f64::max)
    );
}
