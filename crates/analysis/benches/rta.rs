//! RTA of 1,000 periodic tasks below five tabulated (measured-style)
//! interference curves: the figure in docs/performance.md.
//!
//! The set is synthetic and deterministic: curves sampled from periodic
//! sources at 40 log-spaced windows (10 us .. 100 ms), total long-run load
//! 0.25; 1,000 tasks with periods log-uniform in 10 ms .. 1 s, rate-monotonic
//! priorities, total utilisation 0.5.

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use irqlab_analysis::demand::periodic_load;
use irqlab_analysis::taskset::{Origin, Task, TaskSet};
use irqlab_analysis::{response_times, CurvePoint, DemandBound, DemandEnvelope, Model, PeriodicTask};

fn curve(period: u64, wcet: u64) -> DemandEnvelope {
    let points: Vec<CurvePoint> = (0..40)
        .map(|i| {
            let window_ns = (10_000.0 * 10_000f64.powf(i as f64 / 39.0)) as u64;
            CurvePoint { window_ns, max_load: periodic_load(DemandBound::Refined, period, wcet, window_ns) }
        })
        .collect();
    DemandEnvelope::from_points(&points)
}

fn task_set() -> TaskSet {
    let mut tasks = Vec::new();
    // Five interferers, u = 0.05 each.
    for (i, p) in [100_000u64, 250_000, 1_000_000, 4_000_000, 10_000_000].into_iter().enumerate() {
        tasks.push(Task {
            name: format!("curve{i}"),
            priority: i as i64,
            model: Model::Curve(curve(p, p / 20)),
            origin: Origin::default(),
        });
    }
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let mut next = || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        (seed >> 11) as f64 / (1u64 << 53) as f64
    };
    let mut periodic: Vec<PeriodicTask> = (0..1000)
        .map(|_| {
            let period_ns = (10_000_000.0 * 100f64.powf(next())) as u64;
            let wcet_ns = ((period_ns as f64) * 0.0005 * (0.5 + next())).max(1.0) as u64;
            PeriodicTask { period_ns, wcet_ns, deadline_ns: period_ns }
        })
        .collect();
    periodic.sort_by_key(|t| t.period_ns);
    for (i, t) in periodic.into_iter().enumerate() {
        tasks.push(Task { name: format!("t{i}"), priority: 10 + i as i64, model: Model::Periodic(t), origin: Origin::default() });
    }
    TaskSet { tasks }
}

fn bench(c: &mut Criterion) {
    let set = task_set();
    let times = response_times(&set, DemandBound::Refined);
    let bounded = times.iter().flatten().count();
    assert_eq!(bounded, 1000, "every periodic task should have a bounded response time");
    let mut group = c.benchmark_group("rta");
    group.sample_size(10);
    group.bench_function("1000 tasks + 5 curves, refined", |b| b.iter(|| response_times(black_box(&set), DemandBound::Refined)));
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
