//! What the generator shows while it runs, as the thesis's UI did: one
//! panel per path with running min / avg / max / count and a small
//! histogram on a terminal, one plain line per path otherwise.

use super::generator::{PathCounters, Progress};
use crate::latency::LatencyStats;
use std::sync::atomic::Ordering;

fn us(ns: Option<f64>) -> String {
    match ns {
        Some(v) => format!("{:.1}us", v / 1000.0),
        None => "-".into(),
    }
}

/// Bins of the small histogram: powers of two of a microsecond, from
/// below 1 us up to 16 ms and beyond.
const SPARK_BINS: usize = 16;
const LEVELS: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];

fn sparkline(stats: &LatencyStats) -> String {
    let h = stats.linear_histogram(1_000, 1_000 << (SPARK_BINS - 1));
    let mut bins = [0u64; SPARK_BINS];
    for (us, &count) in h.counts.iter().enumerate() {
        let bin = if us == 0 { 0 } else { (us.ilog2() as usize + 1).min(SPARK_BINS - 1) };
        bins[bin] += count;
    }
    bins[SPARK_BINS - 1] += h.overflow;
    let top = bins.iter().copied().max().unwrap_or(0).max(1);
    bins.iter().map(|&b| if b == 0 { ' ' } else { LEVELS[((b * 7).div_ceil(top) as usize).min(7)] }).collect()
}

fn counts(c: &PathCounters) -> String {
    format!(
        "sent {} late {} overdue {} dup {}",
        c.sent.load(Ordering::Relaxed),
        c.late.load(Ordering::Relaxed),
        c.overdue.load(Ordering::Relaxed),
        c.duplicates.load(Ordering::Relaxed)
    )
}

/// The panels for a terminal: four lines per path.
pub fn panels(p: &Progress) -> Vec<String> {
    let mut lines = Vec::new();
    for (kind, c, s) in &p.paths {
        lines.push(format!("── {} ({}) ── {:.1}s", kind.name(), kind.meaning(), p.elapsed_ns as f64 / 1e9));
        lines.push(format!(
            "   count {:>8}   min {:>9}   avg {:>9}   max {:>9}   p99 {:>9}",
            s.count(),
            us(s.min_ns().map(|v| v as f64)),
            us(s.mean_ns()),
            us(s.max_ns().map(|v| v as f64)),
            us(s.quantile_ns(0.99).map(|v| v as f64))
        ));
        lines.push(format!("   {}", counts(c)));
        lines.push(format!("   <1us |{}| >16ms  (bins double each step)", sparkline(s)));
    }
    lines
}

/// One line per path, for logs and pipes.
pub fn plain_lines(p: &Progress) -> Vec<String> {
    p.paths
        .iter()
        .map(|(kind, c, s)| {
            format!(
                "{:7.1}s {:4} n={} min={} avg={} max={} {}",
                p.elapsed_ns as f64 / 1e9,
                kind.name(),
                s.count(),
                us(s.min_ns().map(|v| v as f64)),
                us(s.mean_ns()),
                us(s.max_ns().map(|v| v as f64)),
                counts(c)
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stimulus::PathKind;

    #[test]
    fn panels_show_the_running_figures() {
        let c = PathCounters::default();
        c.sent.store(3, Ordering::Relaxed);
        let mut s = LatencyStats::new();
        for v in [10_000, 12_000, 50_000] {
            s.record(v);
        }
        let p = Progress { elapsed_ns: 1_500_000_000, paths: vec![(PathKind::Icmp, &c, &s)] };
        let text = panels(&p).join("\n");
        assert!(text.contains("icmp"), "{text}");
        assert!(text.contains("min    10.0us"), "{text}");
        assert!(text.contains("max    50.0us"), "{text}");
        assert!(text.contains("sent 3"), "{text}");
        let line = &plain_lines(&p)[0];
        assert!(line.contains("n=3") && line.contains("avg=24.0us"), "{line}");
        // 10 and 12 us share the 8-16 us bin, 50 us is in 32-64 us.
        let spark = sparkline(&s);
        assert_eq!(spark.chars().filter(|&ch| ch != ' ').count(), 2, "{spark}");
    }
}
