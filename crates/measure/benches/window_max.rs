//! Window-max computation of the interference probe: 10 million gaps, 40
//! window lengths (10 us .. 1 s at 8 per decade), every window position.
//! The figure is quoted in docs/performance.md.

use criterion::{criterion_group, criterion_main, Criterion};
use irqlab_measure::probe::{log_windows, Gap, GapIndex};
use rand::{Rng, SeedableRng};

/// A gap log like a long busy run: gaps of 1–50 us every 1–200 us
/// (seeded, so every run measures the same input).
fn gaps(n: usize) -> (Vec<Gap>, u64) {
    let mut rng = rand_pcg::Pcg64::seed_from_u64(4);
    let mut t = 0u64;
    let gaps = (0..n)
        .map(|_| {
            t += rng.gen_range(1_000..200_000);
            let len = rng.gen_range(1_000..50_000);
            let g = Gap { start_ns: t, len_ns: len };
            t += len;
            g
        })
        .collect();
    (gaps, t + 1_000)
}

fn bench(c: &mut Criterion) {
    let (gaps, total) = gaps(10_000_000);
    let windows = log_windows(10_000, 1_000_000_000, 8);
    let windows = &windows[..40];
    let mut group = c.benchmark_group("probe_window_max");
    group.sample_size(10);
    group.bench_function("10M gaps x 40 windows", |b| {
        b.iter(|| {
            let index = GapIndex::new(&gaps, total);
            std::hint::black_box(index.max_loads(windows))
        })
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
