//! Timer latency, cyclictest's method: one thread per CPU, pinned, at
//! SCHED_FIFO, memory locked, `/dev/cpu_dma_latency` held at 0; each thread
//! sleeps with `clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME)` until the
//! next multiple of the interval and records how late it woke up.
//!
//! The shape of every live measurement: [`measure`]`(&Config, &stop,
//! on_tick) -> Result<LatencyReport>`.

use super::log_histogram::LogHistogram;
use super::realtime::DmaLatencyHold;
use super::stats::{LatencyStats, StatsSummary};
use irqlab_host::error::{Error, Result};
use irqlab_host::rt::{self, monotonic_ns, sleep_until_ns};
use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Barrier;
use std::time::Duration;

/// The JSON schema of [`LatencyReport`].
pub const SCHEMA: &str = "irqlab/latency/v1";

/// Shortest interval accepted: below this the thread does nothing but
/// measure its own loop, and cyclictest's numbers stop meaning anything.
pub const MIN_INTERVAL_NS: u64 = 10_000;

/// Histogram bins of the JSON output: 1 us, as cyclictest's `-h`.
const BUCKET_NS: u64 = 1_000;
const MAX_BUCKETS: usize = 100_000;

/// What to measure; [`Config::default`] has the defaults of `irqlab
/// measure latency`.
#[derive(Debug, Clone)]
pub struct Config {
    /// One measuring thread per listed CPU; `None`: every online CPU (from
    /// sysfs, not this process's affinity).
    pub cpus: Option<Vec<usize>>,
    /// SCHED_FIFO priority 1..=99; 0 keeps SCHED_OTHER.
    pub priority: u8,
    pub interval_ns: u64,
    pub duration_ns: u64,
    /// First wake-up at the next full second of CLOCK_MONOTONIC plus one
    /// interval, as `cyclictest --secaligned` does, so two tools (or
    /// machines) started close together wake at the same instants.
    pub align_to_second: bool,
}

impl Default for Config {
    /// Every online CPU, SCHED_FIFO 80, 1 ms interval, 10 s, not aligned.
    fn default() -> Config {
        Config { cpus: None, priority: 80, interval_ns: 1_000_000, duration_ns: 10_000_000_000, align_to_second: false }
    }
}

impl Config {
    /// Cycles each thread runs: the duration divided by the interval.
    pub fn cycles(&self) -> u64 {
        self.duration_ns / self.interval_ns.max(1)
    }

    /// The CPUs measured: [`Config::cpus`], each checked to be online (exit
    /// 2 naming `cpu`), or every online CPU.
    pub fn resolve_cpus(&self) -> Result<Vec<usize>> {
        let online = rt::online_cpus()?;
        self.validate(&online)?;
        Ok(self.cpus.clone().unwrap_or(online))
    }

    fn validate(&self, online: &[usize]) -> Result<()> {
        if let Some(cpus) = &self.cpus {
            if cpus.is_empty() {
                return Err(Error::Invalid("cpus: the list is empty".into()));
            }
            if let Some(cpu) = cpus.iter().find(|c| !online.contains(c)) {
                return Err(Error::Invalid(format!("cpu {cpu}: not an online CPU (online: {})", rt::format_cpu_list(online))));
            }
        }
        if self.priority > 99 {
            return Err(Error::Invalid(format!("priority {}: outside SCHED_FIFO's 1..=99", self.priority)));
        }
        if self.interval_ns < MIN_INTERVAL_NS {
            return Err(Error::Invalid(format!(
                "interval {} ns: below the shortest one measured, {} us",
                self.interval_ns,
                MIN_INTERVAL_NS / 1000
            )));
        }
        if self.cycles() == 0 {
            return Err(Error::Invalid(format!("duration {} ns: shorter than one interval", self.duration_ns)));
        }
        Ok(())
    }
}

/// What a measuring thread publishes while it runs, handed to `on_tick`
/// for a live display. Relaxed atomics: a display may see a cycle's fields
/// slightly torn.
#[derive(Debug)]
pub struct LiveThread {
    pub cpu: usize,
    pub tid: AtomicU64,
    pub cycles: AtomicU64,
    pub min_ns: AtomicU64,
    pub act_ns: AtomicU64,
    pub max_ns: AtomicU64,
    pub sum_ns: AtomicU64,
    /// Every latency, in log-scale bins (readable while the thread runs).
    pub histogram: LogHistogram,
}

impl LiveThread {
    pub fn new(cpu: usize) -> Self {
        LiveThread {
            cpu,
            tid: AtomicU64::new(0),
            cycles: AtomicU64::new(0),
            min_ns: AtomicU64::new(u64::MAX),
            act_ns: AtomicU64::new(0),
            max_ns: AtomicU64::new(0),
            sum_ns: AtomicU64::new(0),
            histogram: LogHistogram::default(),
        }
    }

    /// cyclictest's running line for this thread.
    pub fn line(&self, index: usize, priority: u8, interval_ns: u64) -> String {
        let cycles = self.cycles.load(Ordering::Relaxed);
        let avg = self.sum_ns.load(Ordering::Relaxed).checked_div(cycles).unwrap_or(0);
        let min = if cycles > 0 { self.min_ns.load(Ordering::Relaxed) } else { 0 };
        cyclictest_line(
            index,
            self.tid.load(Ordering::Relaxed),
            priority,
            interval_ns,
            cycles,
            [min, self.act_ns.load(Ordering::Relaxed), avg, self.max_ns.load(Ordering::Relaxed)],
        )
    }
}

/// One thread's result.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ThreadResult {
    pub index: usize,
    pub cpu: usize,
    pub tid: u64,
    /// Wake-ups measured.
    pub cycles: u64,
    /// Wake-ups skipped because the thread woke after the next one was due.
    pub overruns: u64,
    /// The last latency measured (cyclictest's `Act`).
    pub act_ns: u64,
    pub latency: StatsSummary,
    /// Every latency in log-scale bins, ten to a decade.
    #[serde(default)]
    pub log_histogram: super::log_histogram::LogBins,
}

impl ThreadResult {
    /// The summary line as cyclictest prints it, in microseconds.
    pub fn summary_line(&self, priority: u8, interval_ns: u64) -> String {
        let l = &self.latency;
        cyclictest_line(
            self.index,
            self.tid,
            priority,
            interval_ns,
            self.cycles,
            [l.min_ns.unwrap_or(0), self.act_ns, l.mean_ns.unwrap_or(0.0).round() as u64, l.max_ns.unwrap_or(0)],
        )
    }

    /// cyclictest's `-h` histogram block: one row per microsecond up to
    /// the largest latency seen, then the totals.
    pub fn histogram_block(&self) -> String {
        let h = &self.latency.histogram;
        let mut out = String::from("# Histogram\n");
        let last = h.counts.iter().rposition(|&c| c > 0).unwrap_or(0);
        for (us, count) in h.counts.iter().enumerate().take(last + 1) {
            out.push_str(&format!("{us:06} {count:06}\n"));
        }
        let us = |ns: Option<u64>| ns.unwrap_or(0) / 1000;
        out.push_str(&format!("# Total: {:09}\n", self.latency.count));
        out.push_str(&format!("# Min Latencies: {:05}\n", us(self.latency.min_ns)));
        out.push_str(&format!("# Avg Latencies: {:05}\n", (self.latency.mean_ns.unwrap_or(0.0) / 1000.0).round() as u64));
        out.push_str(&format!("# Max Latencies: {:05}\n", us(self.latency.max_ns)));
        out.push_str(&format!("# Histogram Overflows: {:05}\n", h.overflow));
        out
    }
}

/// `T: 0 ( 1234) P:80 I:1000 C:  10000 Min:      5 Act:    8 Avg:    7 Max:      43`
/// (the format of rt-tests' cyclictest; values in us; `[min, act, avg, max]`).
fn cyclictest_line(index: usize, tid: u64, priority: u8, interval_ns: u64, cycles: u64, ns: [u64; 4]) -> String {
    let us = |v: u64| (v + 500) / 1000;
    format!(
        "T:{index:2} ({tid:5}) P:{priority:2} I:{} C:{cycles:7} Min:{:7} Act:{:5} Avg:{:5} Max:{:8}",
        interval_ns / 1000,
        us(ns[0]),
        us(ns[1]),
        us(ns[2]),
        us(ns[3])
    )
}

/// `irqlab/latency/v1`: the whole run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LatencyReport {
    pub schema: String,
    /// False when the run was stopped (Ctrl-C) before its duration.
    pub complete: bool,
    pub method: String,
    pub policy: String,
    pub priority: u8,
    pub interval_ns: u64,
    pub duration_ns: u64,
    pub aligned_to_second: bool,
    pub memory_locked: bool,
    /// Whether `/dev/cpu_dma_latency` was held at 0 during the run (false
    /// only on a kernel without it).
    pub cpu_dma_latency_held: bool,
    pub threads: Vec<ThreadResult>,
    /// All threads together.
    pub all: StatsSummary,
    /// The kernel and its interference-relevant settings (`irqlab doctor`).
    #[serde(default)]
    pub machine: irqlab_host::machine::MachineContext,
}

/// How often `on_tick` sees the threads' running figures.
const TICK: Duration = Duration::from_millis(100);

/// Runs the measurement until its duration or until `stop` is set; calls
/// `on_tick` from the calling thread every 100 ms with each measuring
/// thread's running figures (one per CPU measured, in order).
pub fn measure(config: &Config, stop: &AtomicBool, on_tick: impl FnMut(&[LiveThread])) -> Result<LatencyReport> {
    measure_with_spikes(config, stop, on_tick, None)
}

/// A wake-up at least the threshold of [`measure_with_spikes`] late.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Spike {
    pub cpu: usize,
    /// The measuring thread's id.
    pub tid: u32,
    /// The programmed wake-up and the clock read after it
    /// (CLOCK_MONOTONIC ns): the latency is their difference.
    pub due_ns: u64,
    pub woke_ns: u64,
}

/// Where the measuring threads report each wake-up at least `threshold_ns`
/// late: `report` is called on the measuring thread, right after the
/// sample (keep it short: it delays the next sleep, not this sample).
pub struct SpikeReport<'a> {
    pub threshold_ns: u64,
    /// Only a wake-up later than every earlier one of its thread (each
    /// new worst, a handful per run): what `survey` explains, its worst
    /// sample per CPU, without explaining every wake-up past a low line.
    pub worst_only: bool,
    pub report: &'a (dyn Fn(Spike) + Sync),
}

impl SpikeReport<'_> {
    /// Whether a wake-up `latency_ns` late, after a worst of
    /// `worst_before_ns` on its thread (None: the first), is reported.
    pub fn reports(&self, latency_ns: u64, worst_before_ns: Option<u64>) -> bool {
        latency_ns >= self.threshold_ns && !(self.worst_only && worst_before_ns.is_some_and(|w| latency_ns <= w))
    }
}

/// [`measure`], and each wake-up over a threshold handed to `spikes`
/// (`irqlab watch`).
pub fn measure_with_spikes(
    config: &Config,
    stop: &AtomicBool,
    on_tick: impl FnMut(&[LiveThread]),
    spikes: Option<SpikeReport<'_>>,
) -> Result<LatencyReport> {
    let cpus = config.resolve_cpus()?;
    rt::lock_memory()?;
    let result = measure_locked(config, &cpus, stop, on_tick, spikes.as_ref());
    rt::unlock_memory();
    result
}

fn measure_locked(
    config: &Config,
    cpus: &[usize],
    stop: &AtomicBool,
    mut on_tick: impl FnMut(&[LiveThread]),
    spikes: Option<&SpikeReport<'_>>,
) -> Result<LatencyReport> {
    let machine = irqlab_host::machine::MachineContext::read();
    let dma = DmaLatencyHold::zero()?;
    let barrier = Barrier::new(cpus.len());
    let setup_failed = AtomicBool::new(false);
    // The first wake-up is set once every thread is pinned and raised: set
    // before (as it was), a set-up slower than the margin (~30 ms of thread
    // start, pinning and the first touches of memory in an emulated guest)
    // made the first sample of each thread that late, irqlab's maximum
    // 1,000 times cyclictest's there, which starts its timers after its
    // set-up too.
    let start_ns = AtomicU64::new(0);
    let live: Vec<LiveThread> = cpus.iter().map(|&cpu| LiveThread::new(cpu)).collect();

    let outcomes: Vec<Result<Measured>> = std::thread::scope(|scope| {
        let handles: Vec<_> = cpus
            .iter()
            .zip(&live)
            .map(|(&cpu, live)| {
                let barrier = &barrier;
                let setup_failed = &setup_failed;
                let start_ns = &start_ns;
                scope.spawn(move || {
                    let setup = rt::pin_to_cpu(cpu).and_then(|_| rt::set_fifo(config.priority));
                    if setup.is_err() {
                        setup_failed.store(true, Ordering::SeqCst);
                    }
                    // Every thread finishes its set-up before any measures, so
                    // one thread's failure stops all of them before they start;
                    // then one of them sets the common start, which all read
                    // past the second barrier.
                    if barrier.wait().is_leader() {
                        start_ns.store(start_time(config), Ordering::SeqCst);
                    }
                    barrier.wait();
                    setup?;
                    if setup_failed.load(Ordering::SeqCst) {
                        return Ok(Measured::default());
                    }
                    let measured = measure_thread(config, start_ns.load(Ordering::SeqCst), stop, live, spikes);
                    // No thread leaves while another still waits for a
                    // wake-up: a thread's exit frees its stack, whose TLB
                    // flush interrupts every CPU running the process (in an
                    // emulated guest that made each run's last sample its
                    // worst, 150-250 us against cyclictest's 40).
                    barrier.wait();
                    Ok(measured)
                })
            })
            .collect();
        // Polled every 10 ms so the run ends when its threads do.
        let mut next_tick = std::time::Instant::now() + TICK;
        while !handles.iter().all(|h| h.is_finished()) {
            std::thread::sleep(Duration::from_millis(10));
            if std::time::Instant::now() >= next_tick {
                next_tick += TICK;
                on_tick(&live);
            }
        }
        handles.into_iter().map(|h| h.join().unwrap_or_else(|_| Err(Error::Failed("a measuring thread panicked".into())))).collect()
    });

    let mut threads = Vec::new();
    let mut all = LatencyStats::new();
    let mut complete = true;
    for (index, ((outcome, &cpu), live)) in outcomes.into_iter().zip(cpus).zip(&live).enumerate() {
        let m = outcome?;
        complete &= m.stats.count() == config.cycles();
        all.merge(&m.stats);
        threads.push(ThreadResult {
            index,
            cpu,
            tid: m.tid,
            cycles: m.stats.count(),
            overruns: m.overruns,
            act_ns: m.act_ns,
            latency: m.stats.summary(BUCKET_NS, MAX_BUCKETS),
            log_histogram: live.histogram.snapshot(),
        });
    }
    Ok(LatencyReport {
        schema: SCHEMA.into(),
        complete,
        method: "cyclictest's: clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME) per CPU, latency = wake-up time - programmed time".into(),
        policy: if config.priority > 0 { "SCHED_FIFO" } else { "SCHED_OTHER" }.into(),
        priority: config.priority,
        interval_ns: config.interval_ns,
        duration_ns: config.duration_ns,
        aligned_to_second: config.align_to_second,
        memory_locked: true,
        cpu_dma_latency_held: dma.is_some(),
        threads,
        all: all.summary(BUCKET_NS, MAX_BUCKETS),
        machine,
    })
}

/// The first programmed wake-up, minus one interval.
fn start_time(config: &Config) -> u64 {
    let now = monotonic_ns();
    if config.align_to_second {
        // Past 0.9 s into this second the set-up might not be done by the
        // next one, so skip to the second after (as cyclictest does).
        let second = now / 1_000_000_000 + if now % 1_000_000_000 > 900_000_000 { 2 } else { 1 };
        second * 1_000_000_000
    } else {
        // Set up already: leave the threads time to pass the barrier and
        // reach their first sleep (a futex wake-up each, slow in a guest).
        now + 10_000_000
    }
}

#[derive(Default)]
struct Measured {
    tid: u64,
    stats: LatencyStats,
    overruns: u64,
    act_ns: u64,
}

fn measure_thread(config: &Config, start_ns: u64, stop: &AtomicBool, live: &LiveThread, spikes: Option<&SpikeReport<'_>>) -> Measured {
    let tid = nix::unistd::gettid().as_raw() as u64;
    live.tid.store(tid, Ordering::Relaxed);
    let mut m = Measured { tid, ..Measured::default() };
    let interval = config.interval_ns;
    let mut next = start_ns + interval;
    for _ in 0..config.cycles() {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        sleep_until_ns(next);
        let now = monotonic_ns();
        let latency = now.saturating_sub(next);
        let worst_before = m.stats.max_ns();
        m.stats.record(latency);
        m.act_ns = latency;
        live.cycles.fetch_add(1, Ordering::Relaxed);
        live.act_ns.store(latency, Ordering::Relaxed);
        live.sum_ns.fetch_add(latency, Ordering::Relaxed);
        live.min_ns.fetch_min(latency, Ordering::Relaxed);
        live.max_ns.fetch_max(latency, Ordering::Relaxed);
        live.histogram.record(latency);
        if let Some(s) = spikes.filter(|s| s.reports(latency, worst_before)) {
            (s.report)(Spike { cpu: live.cpu, tid: tid as u32, due_ns: next, woke_ns: now });
        }
        next += interval;
        // Woke so late that the next wake-up is already past: skip it, as
        // cyclictest does, rather than firing a burst of catch-up cycles.
        while next <= now {
            next += interval;
            m.overruns += 1;
        }
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> Config {
        Config { cpus: Some(vec![0]), priority: 0, duration_ns: 50_000_000, ..Config::default() }
    }

    #[test]
    fn worst_only_reports_each_new_worst_past_the_threshold() {
        let report = |_: Spike| {};
        let each = SpikeReport { threshold_ns: 10, worst_only: false, report: &report };
        let worst = SpikeReport { threshold_ns: 10, worst_only: true, report: &report };
        // (latency, the thread's worst before it)
        let samples = [(5, None), (12, Some(5)), (11, Some(12)), (12, Some(12)), (30, Some(12))];
        let by = |s: &SpikeReport| samples.iter().map(|&(l, w)| s.reports(l, w)).collect::<Vec<_>>();
        assert_eq!(by(&each), [false, true, true, true, true]);
        assert_eq!(by(&worst), [false, true, false, false, true]);
        assert!(worst.reports(10, None), "the first sample past the line is the worst so far");
    }

    #[test]
    fn validation_rejects_what_cannot_run() {
        let online = vec![0, 1];
        assert!(config().validate(&online).is_ok());
        let bad_cpu = Config { cpus: Some(vec![7]), ..config() };
        assert!(matches!(bad_cpu.validate(&online), Err(Error::Invalid(m)) if m == "cpu 7: not an online CPU (online: 0-1)"));
        let short = Config { interval_ns: 1_000, ..config() };
        assert!(matches!(short.validate(&online), Err(Error::Invalid(m)) if m.starts_with("interval 1000 ns: ")));
        let tiny = Config { duration_ns: 10, ..config() };
        assert!(matches!(tiny.validate(&online), Err(Error::Invalid(m)) if m.starts_with("duration 10 ns: ")));
        let prio = Config { priority: 120, ..config() };
        assert!(matches!(prio.validate(&online), Err(Error::Invalid(m)) if m.starts_with("priority 120: ")));
        let every_online = Config { cpus: None, ..config() };
        assert!(every_online.validate(&online).is_ok());
    }

    #[test]
    fn summary_line_has_cyclictests_layout() {
        let line = cyclictest_line(0, 1234, 80, 1_000_000, 10000, [5_400, 8_000, 7_200, 43_000]);
        assert_eq!(line, "T: 0 ( 1234) P:80 I:1000 C:  10000 Min:      5 Act:    8 Avg:    7 Max:      43");
    }

    #[test]
    fn an_unprivileged_run_measures_real_wakeups() {
        // SCHED_OTHER, no privilege needed beyond mlockall's: if mlockall is
        // refused the error must name CAP_IPC_LOCK.
        let stop = AtomicBool::new(false);
        match measure(&config(), &stop, |_| {}) {
            Ok(report) => {
                assert_eq!(report.schema, SCHEMA);
                assert!(report.complete);
                let t = &report.threads[0];
                assert_eq!(t.cycles, 50);
                assert!(t.latency.min_ns.unwrap() <= t.latency.max_ns.unwrap());
                assert_eq!(t.latency.histogram.counts.iter().sum::<u64>() + t.latency.histogram.overflow, 50);
            }
            Err(e) => assert!(e.to_string().contains("CAP_IPC_LOCK"), "{e}"),
        }
    }

    #[test]
    fn stop_flag_ends_the_run_incomplete() {
        let stop = AtomicBool::new(true);
        match measure(&config(), &stop, |_| {}) {
            Ok(report) => {
                assert!(!report.complete);
                assert_eq!(report.threads[0].cycles, 0);
            }
            // Without the privilege the run refuses before measuring.
            Err(e) => assert!(e.to_string().contains("CAP_IPC_LOCK"), "{e}"),
        }
    }
}
