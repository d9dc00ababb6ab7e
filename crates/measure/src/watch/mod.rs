//! `irqlab watch`: timer latency for as long as asked, with a flight
//! recorder of what ran on each measured CPU, so that a wake-up past a
//! threshold is explained by what took its time (issue 52).
//!
//! The latency threads are `measure latency`'s (cyclictest's method); each
//! wake-up at least the threshold late is handed over as a [`Spike`]. The
//! gap-source monitor runs per measured CPU in its streaming mode: its
//! segments go into that CPU's [`recorder::Recorder`], which keeps a fixed
//! span of the timeline. Once the recorder has heard past a spike's
//! wake-up, [`cause::explain`] names what ran between the programmed expiry
//! and the wake-up. Memory stays flat: histograms are fixed bins, the
//! recorder a fixed span, and only the worst `keep` spikes are kept in full
//! (all are counted).

pub mod cause;
pub mod recorder;
pub mod trace;

use crate::latency::{self, LatencyReport, LiveThread, LogBins, Spike};
use crate::probe::sources::{self, RawSegment};
use cause::Cause;
use irqlab_host::error::{Error, Result};
use irqlab_host::rt::monotonic_ns;
use irqlab_host::run_end::{EndedBy, RunEnd};
use recorder::Recorder;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};

/// The JSON schema of [`WatchReport`].
pub const SCHEMA: &str = "irqlab/watch/v1";

/// How long after a spike's wake-up its cause is decided at the latest,
/// when the recorder has heard nothing past it (the monitor reads its ring
/// every 20 ms; a CPU that went idle sends no segment until it wakes).
const SETTLE_NS: u64 = 200_000_000;

/// What to do at a wake-up over the threshold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OnThreshold {
    /// Explain it and go on (the default).
    Continue,
    /// Explain it and end the run (rtla's `timerlat -a`).
    Stop,
    /// Explain it, then run this program (argv, no shell) with the spike's
    /// facts in its environment (`IRQLAB_SPIKE_*`), without waiting for it.
    Exec(Vec<String>),
}

impl OnThreshold {
    /// `stop`, `continue` or `exec CMD ARGS...`; an `exec` whose program
    /// cannot be found is refused here, before anything is measured.
    pub fn parse(text: &str) -> Result<OnThreshold> {
        let text = text.trim();
        match text {
            "continue" => return Ok(OnThreshold::Continue),
            "stop" => return Ok(OnThreshold::Stop),
            _ => {}
        }
        let Some(command) = text.strip_prefix("exec").filter(|rest| rest.starts_with(char::is_whitespace)) else {
            return Err(Error::Invalid(format!("on-threshold {text:?}: not one of stop, continue, exec CMD")));
        };
        let argv: Vec<String> = command.split_whitespace().map(String::from).collect();
        let Some(program) = argv.first() else {
            return Err(Error::Invalid("on-threshold exec: no command given".into()));
        };
        if find_program(program).is_none() {
            return Err(Error::Invalid(format!("on-threshold exec {program}: no such executable (searched PATH)")));
        }
        Ok(OnThreshold::Exec(argv))
    }
}

/// `program` as exec would find it: a path with a slash as given, else
/// the first executable of that name on PATH.
fn find_program(program: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    if !program.contains('/') {
        return irqlab_host::privilege::on_path(program);
    }
    let p = PathBuf::from(program);
    p.metadata().is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0).then_some(p)
}

/// What to watch.
#[derive(Debug, Clone)]
pub struct Config {
    /// CPUs, policy, interval and duration as `measure latency` takes them.
    /// `open_ended`: the duration is only a ceiling and the run ends at
    /// Ctrl-C or SIGTERM, which then ends it normally.
    pub latency: latency::Config,
    pub open_ended: bool,
    /// Wake-ups at least this late are spikes, explained and counted.
    pub threshold_ns: Option<u64>,
    pub on_threshold: OnThreshold,
    /// The recorder's window kept with each spike, up to its wake-up.
    pub record_ns: u64,
    /// Spikes kept in full (the worst); all are counted.
    pub keep: usize,
    /// Run the flight recorder (false: spikes are counted, not explained;
    /// a run without it beside one with it measures its cost).
    pub recorder: bool,
    /// Only each new worst wake-up of a thread past the threshold is a
    /// spike (`survey`: its worst sample per CPU explained).
    pub worst_only: bool,
}

impl Config {
    /// The shortest threshold that means something: the wake-up interval's
    /// resolution is the measuring loop's own, 1 us (the histograms' first
    /// bin); below it every wake-up is a spike.
    pub const MIN_THRESHOLD_NS: u64 = 1_000;

    /// The recorder's window kept with each spike unless asked otherwise:
    /// 20 ms, longer than any tick or wake-up path it explains.
    pub const DEFAULT_RECORD_NS: u64 = 20_000_000;

    /// Refuses what cannot run, naming the value (exit 2).
    pub fn validate(&self) -> Result<()> {
        if let Some(t) = self.threshold_ns {
            if t < Self::MIN_THRESHOLD_NS {
                return Err(Error::Invalid(format!(
                    "threshold {t} ns: below the measurement's resolution, {} us (every wake-up would be a spike)",
                    Self::MIN_THRESHOLD_NS / 1_000
                )));
            }
        }
        if self.keep == 0 {
            return Err(Error::Invalid("keep 0: at least one spike must be kept".into()));
        }
        Ok(())
    }
}

/// One spike as kept: when, how late, and why.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SpikeRecord {
    pub cpu: usize,
    pub tid: u32,
    /// Programmed expiry and clock read, CLOCK_MONOTONIC ns.
    pub due_ns: u64,
    pub woke_ns: u64,
    pub latency_ns: u64,
    /// None when the recorder could not run (see [`Recorder`]'s note).
    pub cause: Option<Cause>,
    /// The recorder's window up to the wake-up: what ran, in order.
    pub window: Vec<WindowSegment>,
}

/// One segment of a kept window.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WindowSegment {
    pub start_ns: u64,
    pub end_ns: u64,
    pub source: String,
}

/// One measured CPU's figures.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CpuWatch {
    pub cpu: usize,
    pub tid: u64,
    pub cycles: u64,
    pub min_ns: Option<u64>,
    pub mean_ns: Option<f64>,
    pub max_ns: Option<u64>,
    /// 99th and 99.9th percentiles (the final document only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p99_ns: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p999_ns: Option<u64>,
    /// Wake-ups at least the threshold late.
    pub spikes: u64,
    pub histogram: LogBins,
}

/// The flight recorder's state for the report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecorderInfo {
    pub available: bool,
    /// What it ran on, or why it could not.
    pub note: String,
    /// The span of timeline it keeps per CPU.
    pub keep_ns: u64,
    /// Segments lost (ring buffer full): their time reads as unseen.
    pub lost_segments: u64,
}

/// `irqlab/watch/v1`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WatchReport {
    pub schema: String,
    /// The one rule of `run_end`: false for a periodic flush, for a run
    /// stopped before its `--duration`, and when the recorder lost
    /// segments (some causes then miss what ran); an open-ended run's
    /// Ctrl-C is its normal end.
    pub complete: bool,
    /// `duration`, `stopped` (Ctrl-C, SIGTERM), `threshold`
    /// (`--on-threshold stop`); null in a periodic flush.
    pub ended_by: Option<EndedBy>,
    pub interval_ns: u64,
    pub priority: u8,
    /// The asked duration (None: until Ctrl-C).
    pub duration_ns: Option<u64>,
    pub elapsed_ns: u64,
    pub threshold_ns: Option<u64>,
    pub cpus: Vec<CpuWatch>,
    /// Every spike seen, kept or not.
    pub spikes_total: u64,
    /// The worst spikes (at most `keep`), in time order.
    pub spikes: Vec<SpikeRecord>,
    pub recorder: RecorderInfo,
    /// Programs `--on-threshold exec` could not start, and such.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

/// What the caller sees every 100 ms.
pub struct Progress<'a> {
    pub live: &'a [LiveThread],
    pub spikes_total: u64,
    /// The latest spike explained.
    pub last: Option<&'a SpikeRecord>,
    pub elapsed_ns: u64,
}

/// The per-CPU recorders, fed by the streaming monitors.
struct Recorders {
    cpus: Vec<usize>,
    rings: Vec<Arc<Mutex<Recorder>>>,
    monitors: Vec<sources::Monitor>,
    info: RecorderInfo,
}

impl Recorders {
    fn start(cpus: &[usize], keep_ns: u64, wanted: bool) -> Recorders {
        let rings: Vec<Arc<Mutex<Recorder>>> = cpus.iter().map(|_| Arc::new(Mutex::new(Recorder::new(keep_ns)))).collect();
        let mut monitors = Vec::new();
        let mut failure = (!wanted).then(|| "no flight recorder: not asked for (--no-recorder)".to_string());
        for (&cpu, ring) in cpus.iter().zip(&rings).take_while(|_| wanted) {
            let ring = ring.clone();
            let sink: sources::SegmentSink = Box::new(move |batch: Vec<RawSegment>| {
                ring.lock().unwrap_or_else(|p| p.into_inner()).push(batch);
            });
            match sources::Monitor::stream(cpu, sink) {
                Ok(m) => monitors.push(m),
                Err(e) => {
                    failure = Some(format!("no flight recorder (spikes are counted, not explained): {e}"));
                    break;
                }
            }
        }
        let available = failure.is_none();
        if !available {
            monitors.clear();
        }
        let note = failure.unwrap_or_else(|| format!("gap-source monitor on CPU {} (streaming)", irqlab_host::rt::format_cpu_list(cpus)));
        Recorders { cpus: cpus.to_vec(), rings, monitors, info: RecorderInfo { available, note, keep_ns, lost_segments: 0 } }
    }

    fn ring(&self, cpu: usize) -> Option<&Arc<Mutex<Recorder>>> {
        self.cpus.iter().position(|&c| c == cpu).map(|i| &self.rings[i])
    }

    /// Whether `spike`'s cause can be decided now: the recorder heard past
    /// its wake-up, or it waited long enough.
    fn settled(&self, spike: &Spike, now: u64) -> bool {
        now >= spike.woke_ns + SETTLE_NS
            || self.ring(spike.cpu).is_some_and(|r| r.lock().unwrap_or_else(|p| p.into_inner()).heard_until_ns() > spike.woke_ns)
    }

    fn explain(&self, spike: &Spike, record_ns: u64) -> SpikeRecord {
        let latency_ns = spike.woke_ns.saturating_sub(spike.due_ns);
        let (cause, window) = match (self.info.available, self.ring(spike.cpu)) {
            (true, Some(ring)) => {
                let ring = ring.lock().unwrap_or_else(|p| p.into_inner());
                let from = spike.woke_ns.saturating_sub(record_ns).min(spike.due_ns);
                let segments = ring.between(from, spike.woke_ns);
                let mut cause = cause::explain(&segments, spike.due_ns, spike.woke_ns, spike.tid);
                // The recorder forgot part of the span (a spike longer than
                // what it keeps): that part is unseen, and said to be.
                cause.recorder_gap |= spike.due_ns + self.info.keep_ns < ring.heard_until_ns();
                let window = segments
                    .iter()
                    .map(|s| WindowSegment { start_ns: s.start_ns, end_ns: s.end_ns, source: sources::source_id(&s.source).label })
                    .collect();
                (Some(cause), window)
            }
            _ => (None, Vec::new()),
        };
        SpikeRecord { cpu: spike.cpu, tid: spike.tid, due_ns: spike.due_ns, woke_ns: spike.woke_ns, latency_ns, cause, window }
    }

    fn finish(self) -> RecorderInfo {
        let mut info = self.info;
        for m in self.monitors {
            match m.finish() {
                Ok(c) => info.lost_segments += c.lost,
                Err(e) => info.note.push_str(&format!("; a monitor failed at the end: {e}")),
            }
        }
        if info.lost_segments > 0 {
            info.note.push_str(&format!("; {} segments lost (ring buffer full): their time reads as unseen", info.lost_segments));
        }
        info
    }
}

/// The worst `keep` spikes and the count of all.
struct Kept {
    keep: usize,
    per_cpu: Vec<(usize, u64)>,
    worst: Vec<SpikeRecord>,
}

impl Kept {
    fn add(&mut self, s: SpikeRecord) {
        match self.per_cpu.iter_mut().find(|(c, _)| *c == s.cpu) {
            Some((_, n)) => *n += 1,
            None => self.per_cpu.push((s.cpu, 1)),
        }
        self.worst.push(s);
        if self.worst.len() > self.keep {
            if let Some(i) = self.worst.iter().enumerate().min_by_key(|(_, s)| s.latency_ns).map(|(i, _)| i) {
                self.worst.remove(i);
            }
        }
    }

    fn total(&self) -> u64 {
        self.per_cpu.iter().map(|&(_, n)| n).sum()
    }

    fn on(&self, cpu: usize) -> u64 {
        self.per_cpu.iter().find(|(c, _)| *c == cpu).map_or(0, |&(_, n)| n)
    }

    fn in_time_order(&self) -> Vec<SpikeRecord> {
        let mut v = self.worst.clone();
        v.sort_by_key(|s| s.woke_ns);
        v
    }
}

/// The spikes the measuring threads reported, from waiting for the
/// recorder to being kept, and what `--on-threshold` did with them.
struct Spikes<'a> {
    config: &'a Config,
    pending: Vec<Spike>,
    kept: Kept,
    /// The latest spike explained (for the live display).
    last: Option<SpikeRecord>,
    children: Vec<std::process::Child>,
    notes: Vec<String>,
    stopped_by_threshold: bool,
}

impl<'a> Spikes<'a> {
    fn new(config: &'a Config) -> Self {
        Spikes {
            config,
            pending: Vec::new(),
            kept: Kept { keep: config.keep, per_cpu: Vec::new(), worst: Vec::new() },
            last: None,
            children: Vec::new(),
            notes: Vec::new(),
            stopped_by_threshold: false,
        }
    }

    /// Explains the pending spikes the recorder has heard past (all of
    /// them with `force`), runs `--on-threshold` for each, keeps them.
    fn settle(&mut self, recorders: &Recorders, now: u64, force: bool) {
        let (ready, wait): (Vec<Spike>, Vec<Spike>) = self.pending.drain(..).partition(|s| force || recorders.settled(s, now));
        self.pending = wait;
        for s in ready {
            let record = recorders.explain(&s, self.config.record_ns);
            match &self.config.on_threshold {
                OnThreshold::Continue => {}
                OnThreshold::Stop => self.stopped_by_threshold = true,
                OnThreshold::Exec(argv) => match run_exec(argv, &record) {
                    Ok(child) => self.children.push(child),
                    Err(e) => self.notes.push(e),
                },
            }
            self.children.retain_mut(|c| !matches!(c.try_wait(), Ok(Some(_))));
            self.last = Some(record.clone());
            self.kept.add(record);
        }
    }

    /// The document with these spikes and `cpus`' figures.
    fn document(&self, cpus: Vec<CpuWatch>, recorder: RecorderInfo, ended_by: Option<EndedBy>, elapsed_ns: u64) -> WatchReport {
        let config = self.config;
        let asked = (!config.open_ended).then_some(config.latency.duration_ns);
        WatchReport {
            schema: SCHEMA.into(),
            // The one rule of `run_end`; a run still going is not complete.
            complete: ended_by.as_ref().is_some_and(|e| e.complete(asked, recorder.lost_segments)),
            ended_by,
            interval_ns: config.latency.interval_ns,
            priority: config.latency.priority,
            duration_ns: asked,
            elapsed_ns,
            threshold_ns: config.threshold_ns,
            cpus,
            spikes_total: self.kept.total(),
            spikes: self.kept.in_time_order(),
            recorder,
            notes: self.notes.clone(),
        }
    }
}

/// Runs the watch until its duration, `stop` (Ctrl-C), or the first spike
/// with [`OnThreshold::Stop`]. `on_tick` sees the running figures every
/// 100 ms; `on_flush` gets a document of the run so far every
/// `flush_every_ns` (marked incomplete, `ended_by` null), so that a
/// crash loses at most one period.
pub fn watch(
    config: &Config,
    stop: &AtomicBool,
    on_tick: impl FnMut(&Progress),
    flush_every_ns: Option<u64>,
    on_flush: impl FnMut(&WatchReport),
) -> Result<WatchReport> {
    watch_with_latency(config, stop, on_tick, flush_every_ns, on_flush).map(|(report, _)| report)
}

/// [`watch`], and the run's `measure latency` report beside it (the
/// survey keeps both).
pub fn watch_with_latency(
    config: &Config,
    stop: &AtomicBool,
    mut on_tick: impl FnMut(&Progress),
    flush_every_ns: Option<u64>,
    mut on_flush: impl FnMut(&WatchReport),
) -> Result<(WatchReport, LatencyReport)> {
    config.validate()?;
    let cpus = config.latency.resolve_cpus()?;
    let run = RunEnd::start(stop, (!config.open_ended).then_some(config.latency.duration_ns));
    let started = run.started_ns();
    let recorders = Recorders::start(&cpus, config.record_ns + SETTLE_NS, config.recorder);
    let (tx, rx) = mpsc::channel::<Spike>();
    let tx = Mutex::new(tx);
    let report_spike = move |s: Spike| {
        let _ = tx.lock().unwrap_or_else(|p| p.into_inner()).send(s);
    };
    let reported = config.threshold_ns.map(|threshold_ns| latency::timer::SpikeReport {
        threshold_ns,
        worst_only: config.worst_only,
        report: &report_spike,
    });
    let halt = AtomicBool::new(false);
    let mut spikes = Spikes::new(config);
    let mut next_flush = flush_every_ns.map(|f| started + f);

    let result = latency::measure_with_spikes(
        &config.latency,
        &halt,
        |live| {
            let now = monotonic_ns();
            spikes.pending.extend(rx.try_iter());
            spikes.settle(&recorders, now, false);
            // `--on-threshold stop` stops at the first spike seen, before
            // it is explained: the recorder keeps what explains it.
            let threshold_met = config.on_threshold == OnThreshold::Stop && spikes.kept.total() + spikes.pending.len() as u64 > 0;
            if stop.load(Ordering::SeqCst) || threshold_met {
                halt.store(true, Ordering::SeqCst);
            }
            let spikes_total = spikes.kept.total() + spikes.pending.len() as u64;
            on_tick(&Progress { live, spikes_total, last: spikes.last.as_ref(), elapsed_ns: now - started });
            if let Some(at) = next_flush.filter(|&at| now >= at) {
                next_flush = flush_every_ns.map(|f| at + f);
                let cpus = live.iter().map(|l| running_cpu(l, spikes.kept.on(l.cpu))).collect();
                on_flush(&spikes.document(cpus, recorders.info.clone(), None, now - started));
            }
        },
        reported,
    );
    // The last spikes: wait (at most SETTLE_NS) until the recorder has heard
    // past each, then explain them all.
    spikes.pending.extend(rx.try_iter());
    let deadline = monotonic_ns() + SETTLE_NS;
    while !spikes.pending.is_empty() && monotonic_ns() < deadline {
        spikes.settle(&recorders, monotonic_ns(), false);
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    spikes.settle(&recorders, monotonic_ns(), true);
    for c in &mut spikes.children {
        let _ = c.wait();
    }
    let info = recorders.finish();
    let report: LatencyReport = result?;
    // The engine ran its cycles to the end unless stopped or halted at
    // the threshold.
    let ended_by = run.ended(|| spikes.stopped_by_threshold.then_some(EndedBy::Threshold)).unwrap_or(EndedBy::Duration);
    let cpus = report
        .threads
        .iter()
        .map(|t| CpuWatch {
            cpu: t.cpu,
            tid: t.tid,
            cycles: t.cycles,
            min_ns: t.latency.min_ns,
            mean_ns: t.latency.mean_ns,
            max_ns: t.latency.max_ns,
            p99_ns: t.latency.p99_ns,
            p999_ns: t.latency.p999_ns,
            spikes: spikes.kept.on(t.cpu),
            histogram: t.log_histogram.clone(),
        })
        .collect();
    Ok((spikes.document(cpus, info, Some(ended_by), monotonic_ns() - started), report))
}

/// A CPU's figures while the run goes on, from its thread's live state.
fn running_cpu(l: &LiveThread, spikes: u64) -> CpuWatch {
    let cycles = l.cycles.load(Ordering::Relaxed);
    let some = |v: u64| (cycles > 0).then_some(v);
    CpuWatch {
        cpu: l.cpu,
        tid: l.tid.load(Ordering::Relaxed),
        cycles,
        min_ns: some(l.min_ns.load(Ordering::Relaxed)),
        mean_ns: (cycles > 0).then(|| l.sum_ns.load(Ordering::Relaxed) as f64 / cycles as f64),
        max_ns: some(l.max_ns.load(Ordering::Relaxed)),
        p99_ns: None,
        p999_ns: None,
        spikes,
        histogram: l.histogram.snapshot(),
    }
}

/// Starts `--on-threshold exec`'s program with the spike in its
/// environment; an error names the program.
fn run_exec(argv: &[String], s: &SpikeRecord) -> std::result::Result<std::process::Child, String> {
    let culprit = s.cause.as_ref().and_then(|c| c.culprit.as_ref());
    std::process::Command::new(&argv[0])
        .args(&argv[1..])
        .env("IRQLAB_SPIKE_CPU", s.cpu.to_string())
        .env("IRQLAB_SPIKE_LATENCY_NS", s.latency_ns.to_string())
        .env("IRQLAB_SPIKE_DUE_NS", s.due_ns.to_string())
        .env("IRQLAB_SPIKE_WOKE_NS", s.woke_ns.to_string())
        .env("IRQLAB_SPIKE_CAUSE", s.cause.as_ref().map_or("no flight recorder", |c| c.verdict.as_str()))
        .env("IRQLAB_SPIKE_CULPRIT", culprit.map_or("", |c| c.label.as_str()))
        .env("IRQLAB_SPIKE_CULPRIT_PID", culprit.and_then(|c| c.pid).map_or(String::new(), |p| p.to_string()))
        .stdin(std::process::Stdio::null())
        .spawn()
        .map_err(|e| format!("on-threshold exec {}: {e}", argv[0]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn on_threshold_words_and_a_missing_program() {
        assert_eq!(OnThreshold::parse("stop").unwrap(), OnThreshold::Stop);
        assert_eq!(OnThreshold::parse("continue").unwrap(), OnThreshold::Continue);
        assert_eq!(OnThreshold::parse("exec true --x").unwrap(), OnThreshold::Exec(vec!["true".into(), "--x".into()]));
        let missing = OnThreshold::parse("exec irqlab-no-such-program-here").unwrap_err();
        assert_eq!(missing.exit_code(), 2);
        assert!(missing.to_string().contains("irqlab-no-such-program-here: no such executable"), "{missing}");
        assert_eq!(OnThreshold::parse("exec").unwrap_err().exit_code(), 2);
        assert_eq!(OnThreshold::parse("halt").unwrap_err().exit_code(), 2);
    }

    #[test]
    fn a_threshold_below_the_resolution_is_refused() {
        let config = |threshold_ns| Config {
            latency: latency::Config::default(),
            open_ended: false,
            threshold_ns,
            on_threshold: OnThreshold::Continue,
            record_ns: 20_000_000,
            keep: 10,
            recorder: true,
            worst_only: false,
        };
        assert!(config(Some(500_000)).validate().is_ok());
        assert!(config(None).validate().is_ok());
        for t in [0, 999] {
            let e = config(Some(t)).validate().unwrap_err();
            assert_eq!(e.exit_code(), 2);
            assert!(e.to_string().starts_with(&format!("threshold {t} ns: below")), "{e}");
        }
    }

    #[test]
    fn only_the_worst_spikes_are_kept_and_all_are_counted() {
        let mut kept = Kept { keep: 2, per_cpu: Vec::new(), worst: Vec::new() };
        for (i, latency_ns) in [5, 9, 1, 7].into_iter().enumerate() {
            kept.add(SpikeRecord {
                cpu: i % 2,
                tid: 1,
                due_ns: i as u64 * 100,
                woke_ns: i as u64 * 100 + latency_ns,
                latency_ns,
                cause: None,
                window: Vec::new(),
            });
        }
        assert_eq!((kept.total(), kept.on(0), kept.on(1)), (4, 2, 2));
        let order: Vec<u64> = kept.in_time_order().iter().map(|s| s.latency_ns).collect();
        assert_eq!(order, vec![9, 7]);
    }
}
