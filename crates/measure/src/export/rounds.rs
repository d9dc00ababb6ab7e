//! The exporter's measuring threads (`--probe CPU`, `--latency CPU`): each
//! runs its measurement in back-to-back rounds of one interval, through the
//! measurement's own `measure`, and folds every completed round into the
//! figures scrapes serve. Rounds rather than one endless run because both
//! measurements return their results only at the end; a round's set-up
//! (calibration, thread start, some 10-30 ms) is not measured.
//!
//! The probe's figures are per round (the last completed round's max load
//! per window) plus the largest since start; the latency figures are a
//! cumulative histogram, as Prometheus histograms must be.

use super::Published;
use crate::latency::{self, StatsSummary};
use crate::probe::{self, Policy};
use irqlab_analysis::curve::CurvePoint;
use irqlab_host::error::Result;
use irqlab_host::stop::StopOnDrop;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric, NoLabelSet};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::MetricType;
use std::sync::atomic::{AtomicBool, Ordering};

/// The windows whose max load the probe serves (those no longer than a
/// round).
pub const PROBE_WINDOWS_NS: [u64; 4] = [100_000, 1_000_000, 10_000_000, 100_000_000];

/// Upper bounds of the latency histogram's buckets (the `le` labels), 5 us
/// to 10 ms; wake-ups beyond the last count only in `+Inf`.
pub const LATENCY_BUCKETS_NS: [u64; 11] =
    [5_000, 10_000, 20_000, 50_000, 100_000, 200_000, 500_000, 1_000_000, 2_000_000, 5_000_000, 10_000_000];

/// The shortest interval a round may last: below it a round would be
/// mostly set-up (the probe alone calibrates its clock for 20 ms).
pub const MIN_ROUND_NS: u64 = 10_000_000;

/// The probe's max load per window on one CPU.
#[derive(Debug, Clone, PartialEq)]
pub struct ProbeFigures {
    pub cpu: usize,
    /// Rounds completed.
    pub rounds: u64,
    pub windows: Vec<WindowLoad>,
}

/// One window's max load (fraction of the window, 0..1).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct WindowLoad {
    pub window_ns: u64,
    /// In the last completed round.
    pub last: f64,
    /// The largest of any round since the exporter started.
    pub max: f64,
}

impl ProbeFigures {
    pub fn new(cpu: usize) -> ProbeFigures {
        ProbeFigures { cpu, rounds: 0, windows: Vec::new() }
    }

    /// Folds in one completed round's curve.
    pub fn record(&mut self, points: &[CurvePoint]) {
        self.rounds += 1;
        for p in points {
            match self.windows.iter_mut().find(|w| w.window_ns == p.window_ns) {
                Some(w) => {
                    w.last = p.max_load;
                    w.max = w.max.max(p.max_load);
                }
                None => self.windows.push(WindowLoad { window_ns: p.window_ns, last: p.max_load, max: p.max_load }),
            }
        }
        self.windows.sort_by_key(|w| w.window_ns);
    }

    pub(super) fn encode(&self, encoder: &mut DescriptorEncoder) -> std::fmt::Result {
        for (name, help, value) in [
            (
                "irqlab_probe_max_load",
                "Largest share (0..1) of any window of this length that interference took from the probe, in its last completed round",
                (|w: &WindowLoad| w.last) as fn(&WindowLoad) -> f64,
            ),
            (
                "irqlab_probe_max_load_since_start",
                "Largest share (0..1) of any window of this length that interference took from the probe, over every round since the exporter started",
                |w: &WindowLoad| w.max,
            ),
        ] {
            let mut family = encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
            for w in &self.windows {
                let labels = [("cpu", self.cpu.to_string()), ("window", irqlab_analysis::units::format_ns(w.window_ns))];
                ConstGauge::new(value(w)).encode(family.encode_family(&labels)?)?;
            }
        }
        let mut family =
            encoder.encode_descriptor("irqlab_probe_rounds", "Probe rounds completed (one interval each)", None, MetricType::Counter)?;
        ConstCounter::new(self.rounds).encode(family.encode_family(&[("cpu", self.cpu.to_string())])?)
    }
}

/// Timer latency on one CPU, cumulative since the exporter started.
#[derive(Debug, Clone, PartialEq)]
pub struct LatencyFigures {
    pub cpu: usize,
    pub count: u64,
    pub sum_s: f64,
    /// Wake-ups per bucket of [`LATENCY_BUCKETS_NS`] (not cumulative); one
    /// more at the end for those beyond the last bound.
    pub per_bucket: Vec<u64>,
}

impl LatencyFigures {
    pub fn new(cpu: usize) -> LatencyFigures {
        LatencyFigures { cpu, count: 0, sum_s: 0.0, per_bucket: vec![0; LATENCY_BUCKETS_NS.len() + 1] }
    }

    /// Adds one round's wake-ups. The round's histogram has 1 us bins
    /// (latencies to 3 significant digits); a bin goes to the first bucket
    /// whose bound is at or above the bin's upper edge, so `le="0.000005"`
    /// counts wake-ups under 5 us.
    pub fn record(&mut self, round: &StatsSummary) {
        self.count += round.count;
        self.sum_s += round.mean_ns.unwrap_or(0.0) * round.count as f64 / 1e9;
        let h = &round.histogram;
        for (bin, &n) in h.counts.iter().enumerate().filter(|(_, &n)| n > 0) {
            let upper_ns = (bin as u64 + 1) * h.bucket_ns;
            let bucket = LATENCY_BUCKETS_NS.iter().position(|&le| upper_ns <= le).unwrap_or(LATENCY_BUCKETS_NS.len());
            self.per_bucket[bucket] += n;
        }
        *self.per_bucket.last_mut().expect("one bucket beyond the bounds") += h.overflow;
    }

    pub(super) fn encode(&self, encoder: &mut DescriptorEncoder) -> std::fmt::Result {
        // (upper bound in seconds, count in that bucket alone): the encoder
        // accumulates them, and f64::MAX is its `+Inf`.
        let buckets: Vec<(f64, u64)> =
            LATENCY_BUCKETS_NS.iter().map(|&ns| ns as f64 / 1e9).chain([f64::MAX]).zip(self.per_bucket.iter().copied()).collect();
        let mut family = encoder.encode_descriptor(
            "irqlab_timer_latency_seconds",
            "How late a SCHED_FIFO thread woke from a 1 ms clock_nanosleep timer (cyclictest's method), since the exporter started",
            None,
            MetricType::Histogram,
        )?;
        family.encode_family(&[("cpu", self.cpu.to_string())])?.encode_histogram::<NoLabelSet>(self.sum_s, self.count, &buckets, None)
    }
}

/// The probe on `cpu` in rounds of `interval_ns` until `halt` (set on the
/// way out, error included, so the exporter stops with it). Returns the
/// rounds completed. RT throttling is lifted for each round where allowed
/// and restored after it (the probe's default).
pub(super) fn probe_rounds(cpu: usize, interval_ns: u64, published: &Published, halt: &AtomicBool) -> Result<u64> {
    let _halt = StopOnDrop([halt]);
    let config = probe::Config {
        cpu: Some(cpu),
        policy: Policy::Fifo,
        duration_ns: interval_ns,
        windows_ns: PROBE_WINDOWS_NS.into_iter().filter(|&w| w <= interval_ns).collect(),
        max_gaps: gap_log_size(interval_ns),
        ..probe::Config::default()
    };
    let mut rounds = 0;
    loop {
        let curve = probe::measure(&config, halt, |_| {})?;
        // A round cut short by the stop is not a completed one.
        if halt.load(Ordering::SeqCst) {
            return Ok(rounds);
        }
        rounds += 1;
        published.update(|f| f.probe.get_or_insert_with(|| ProbeFigures::new(cpu)).record(&curve.points));
    }
}

/// Room for 100,000 gaps per second of round (a busy machine logs some
/// 10^4), at least 100,000 and at most the probe's default: the log is
/// allocated and locked in memory every round.
fn gap_log_size(interval_ns: u64) -> usize {
    let per_second = 100_000u64;
    (interval_ns.saturating_mul(per_second) / 1_000_000_000).clamp(per_second, probe::Config::default().max_gaps as u64) as usize
}

/// The timer latency thread on `cpu` in rounds of `interval_ns` until
/// `halt` (set on the way out, as [`probe_rounds`] does). Returns the
/// rounds completed.
pub(super) fn latency_rounds(cpu: usize, interval_ns: u64, published: &Published, halt: &AtomicBool) -> Result<u64> {
    let _halt = StopOnDrop([halt]);
    let config = latency::Config { cpus: Some(vec![cpu]), duration_ns: interval_ns, ..latency::Config::default() };
    let mut rounds = 0;
    loop {
        let report = latency::measure(&config, halt, |_| {})?;
        if halt.load(Ordering::SeqCst) {
            return Ok(rounds);
        }
        rounds += 1;
        published.update(|f| {
            let figures = f.latency.get_or_insert_with(|| LatencyFigures::new(cpu));
            report.threads.iter().for_each(|t| figures.record(&t.latency));
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::latency::LinearHistogram;

    fn round(counts: Vec<u64>, overflow: u64, mean_ns: f64) -> StatsSummary {
        let count = counts.iter().sum::<u64>() + overflow;
        StatsSummary {
            count,
            min_ns: None,
            mean_ns: Some(mean_ns),
            max_ns: None,
            p50_ns: None,
            p90_ns: None,
            p99_ns: None,
            p999_ns: None,
            histogram: LinearHistogram { bucket_ns: 1_000, counts, overflow },
        }
    }

    #[test]
    fn latency_bins_land_in_the_bucket_that_holds_them_whole() {
        let mut f = LatencyFigures::new(0);
        // 0-1 us, 4-5 us: under 5 us; 5-6 us: the 10 us bucket; 10-11 us: 20 us.
        let mut counts = vec![0; 11];
        counts[0] = 2;
        counts[4] = 1;
        counts[5] = 3;
        counts[10] = 1;
        f.record(&round(counts, 4, 1_000.0));
        assert_eq!(f.per_bucket[..3], [3, 3, 1]);
        assert_eq!(*f.per_bucket.last().unwrap(), 4);
        assert_eq!(f.count, 11);
        f.record(&round(vec![1], 0, 2_000.0));
        assert_eq!(f.count, 12);
        assert_eq!(f.per_bucket[0], 4);
        assert!((f.sum_s - (11.0 * 1e-6 + 2e-6)).abs() < 1e-12);
    }

    #[test]
    fn latency_histogram_encodes_cumulative_buckets() {
        let mut f = LatencyFigures::new(3);
        f.record(&round(vec![1, 0, 0, 0, 0, 2], 1, 1_000.0));
        let text = super::super::Snapshot { latency: Some(f), ..Default::default() }.encode();
        assert!(text.contains("# TYPE irqlab_timer_latency_seconds histogram"), "{text}");
        assert!(text.contains("irqlab_timer_latency_seconds_count{cpu=\"3\"} 4"), "{text}");
        assert!(text.contains("irqlab_timer_latency_seconds_bucket{le=\"+Inf\",cpu=\"3\"} 4"), "{text}");
        let buckets: Vec<u64> = text
            .lines()
            .filter(|l| l.starts_with("irqlab_timer_latency_seconds_bucket"))
            .map(|l| l.rsplit(' ').next().unwrap().parse().unwrap())
            .collect();
        assert_eq!(buckets.len(), LATENCY_BUCKETS_NS.len() + 1);
        assert_eq!(buckets[..2], [1, 3]);
        assert!(buckets.windows(2).all(|w| w[0] <= w[1]), "{buckets:?}");
    }

    #[test]
    fn probe_keeps_the_last_round_and_the_largest() {
        let p = |window_ns, max_load| CurvePoint { window_ns, max_load };
        let mut f = ProbeFigures::new(1);
        f.record(&[p(100_000, 0.5), p(1_000_000, 0.2)]);
        f.record(&[p(100_000, 0.3), p(1_000_000, 0.4)]);
        assert_eq!(f.rounds, 2);
        assert_eq!(f.windows[0], WindowLoad { window_ns: 100_000, last: 0.3, max: 0.5 });
        assert_eq!(f.windows[1], WindowLoad { window_ns: 1_000_000, last: 0.4, max: 0.4 });
        let text = super::super::Snapshot { probe: Some(f), ..Default::default() }.encode();
        assert!(text.contains("irqlab_probe_max_load{cpu=\"1\",window=\"100us\"} 0.3"), "{text}");
        assert!(text.contains("irqlab_probe_max_load_since_start{cpu=\"1\",window=\"1ms\"} 0.4"), "{text}");
        assert!(text.contains("irqlab_probe_rounds_total{cpu=\"1\"} 2"), "{text}");
    }

    #[test]
    fn gap_logs_scale_with_the_round() {
        assert_eq!(gap_log_size(MIN_ROUND_NS), 100_000);
        assert_eq!(gap_log_size(5_000_000_000), 500_000);
        assert_eq!(gap_log_size(u64::MAX), probe::Config::default().max_gaps);
    }
}
