//! The survey's steps on the live machine, in order: `doctor`; then one
//! phase per load (idle first: it is every loaded curve's baseline), each
//! with the interference probe on every surveyed CPU, timer latency on all
//! of them, stimulus latency from the testbed, and the BPF accounting
//! running across the whole phase; finally the findings.
//!
//! A step that cannot run here (missing privilege or kernel feature: exit
//! code 3 of its error) is recorded as skipped with the reason and the
//! rest go on; a failing step likewise, as failed. Ctrl-C (`stop`) ends the
//! running measurement with what it has (kept, marked incomplete) and
//! records every later step as interrupted, so the partial survey is still
//! a whole document.

use crate::doc::*;
use crate::findings;
use crate::interrupts;
use crate::loads::{self, RunningLoad};
use irqlab_analysis::curve::Curve;
use irqlab_analysis::fit::{fit_hyperbola, FitDocument};
use irqlab_analysis::taskset::TaskSet;
use irqlab_control::doctor;
use irqlab_host::error::{Error, Result};
use irqlab_host::machine::MachineContext;
use irqlab_host::rt;
use irqlab_host::testbed::{Side, Testbed};
use irqlab_measure::accounting::{self, Report as AccountingReport};
use irqlab_measure::probe::SourceKind;
use irqlab_measure::stimulus::{generator, responder, GeneratorConfig, PathKind, Pattern, ResponderConfig};
use irqlab_measure::{latency, probe, watch};
use std::net::{Ipv4Addr, SocketAddrV4};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The probe's SCHED_FIFO priority in every phase: just below the network
/// load's driver thread (and PREEMPT_RT's interrupt threads, 50), so
/// threaded handlers count as interference, as in the load-bounds paper.
pub const PROBE_PRIORITY: i32 = 49;
/// Timer latency thread priority (cyclictest's usual `-p 80`).
const LATENCY_PRIORITY: u8 = 80;
/// The stimulus responder's UDP port in the root namespace.
const STIMULUS_PORT: u16 = 9763;
/// Tasks shown per accounting list.
const TOP: usize = 5;

/// What to survey; [`Config::new`] has the durations of `--quick` and of
/// the full survey.
#[derive(Debug, Clone)]
pub struct Config {
    /// `None`: every online CPU.
    pub cpus: Option<Vec<usize>>,
    /// Loads besides idle.
    pub loads: Vec<Load>,
    pub taskset: Option<TasksetInput>,
    pub quick: bool,
    pub probe_ns: u64,
    pub latency_ns: u64,
    pub stimulus_ns: u64,
}

impl Config {
    /// Quick: 2 s per probe, latency and stimulus run (a whole survey of two
    /// CPUs under one load in about 20 s); full: 10 s each.
    pub fn new(quick: bool, loads: Vec<Load>) -> Config {
        let each = if quick { 2_000_000_000 } else { 10_000_000_000 };
        Config { cpus: None, loads, taskset: None, quick, probe_ns: each, latency_ns: each, stimulus_ns: each }
    }

    /// Every measurement run the same length (`--duration`).
    pub fn with_duration(mut self, ns: u64) -> Config {
        (self.probe_ns, self.latency_ns, self.stimulus_ns) = (ns, ns, ns);
        self
    }

    /// The CPUs surveyed, each checked to be online (exit 2 naming `cpus`).
    pub fn resolve_cpus(&self) -> Result<Vec<usize>> {
        match &self.cpus {
            None => rt::online_cpus(),
            Some(list) => {
                for &cpu in list {
                    rt::require_online(cpu, "cpus")?;
                }
                Ok(list.clone())
            }
        }
    }

    /// Planned length of the whole survey, for progress.
    pub fn planned_ns(&self, cpus: usize) -> u64 {
        let ramp = loads::RAMP.as_nanos() as u64;
        let phase = |load: Load| {
            let stimulus = if load == Load::Net { 0 } else { self.stimulus_ns };
            cpus as u64 * (self.probe_ns + ramp) + self.latency_ns + ramp + stimulus
        };
        std::iter::once(Load::None).chain(self.loads.iter().copied()).map(phase).sum()
    }
}

/// Where the survey is, for a progress bar.
pub struct Progress<'a> {
    pub step: &'a str,
    /// Planned time of the steps finished so far, and of all steps.
    pub done_ns: u64,
    pub total_ns: u64,
}

/// Runs the survey. Input errors (a CPU that is not online) return `Err`
/// before anything runs; everything later is recorded in the document.
pub fn survey(config: &Config, taskset: Option<&TaskSet>, stop: &AtomicBool, on_progress: impl FnMut(&Progress)) -> Result<Survey> {
    let cpus = config.resolve_cpus()?;
    let started = Instant::now();
    let mut runner = Runner { survey: empty(config, &cpus), stop, on_progress, done_ns: 0, total_ns: config.planned_ns(cpus.len()) };
    if let Some(report) = runner.step("doctor", 0, |_| Ok(doctor::examine())) {
        runner.survey.readiness = report
            .commands
            .iter()
            .map(|r| Readiness { command: r.command.to_string(), missing: r.missing.clone(), note: r.note.clone() })
            .collect();
        runner.survey.leftovers = report.leftovers;
    }
    for load in std::iter::once(Load::None).chain(config.loads.iter().copied()) {
        runner.phase(config, load, &cpus);
    }
    let survey = &mut runner.survey;
    survey.elapsed_ns = started.elapsed().as_nanos() as u64;
    survey.complete = !stop.load(Ordering::SeqCst) && survey.steps.iter().all(|s| s.status != StepStatus::Interrupted);
    survey.thread_names =
        thread_names(survey, &irqlab_host::journal::threads::all_threads(), irqlab_host::journal::threads::is_kernel_thread);
    survey.boot_id = irqlab_control::profile::current_boot_id();
    findings::derive(survey, taskset);
    Ok(runner.survey)
}

/// The threads the curves' sources name, as found among `now` (every
/// thread on the machine after the measurements): their name, and whether
/// it is theirs alone, and whether `is_kernel` says it is a kernel thread.
/// A thread that has exited is left out.
pub fn thread_names(survey: &Survey, now: &[irqlab_host::journal::threads::Thread], is_kernel: impl Fn(i32) -> bool) -> Vec<ThreadName> {
    let pids: std::collections::BTreeSet<u32> = survey
        .cpus
        .iter()
        .flat_map(|c| &c.curves)
        .filter_map(|curve| curve.sources.as_ref())
        .flat_map(|s| &s.windows)
        .flat_map(|w| &w.sources)
        .filter(|s| s.kind == SourceKind::Thread)
        .filter_map(|s| s.pid)
        .collect();
    pids.into_iter()
        .filter_map(|pid| {
            let t = now.iter().find(|t| t.tid == pid as i32)?;
            let unique = now.iter().filter(|o| o.comm == t.comm).count() == 1;
            let kernel = is_kernel(t.tid);
            Some(ThreadName { pid, comm: t.comm.clone(), unique, kernel })
        })
        .collect()
}

fn empty(config: &Config, cpus: &[usize]) -> Survey {
    Survey {
        schema: SCHEMA.into(),
        complete: false,
        started_unix_s: std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0),
        elapsed_ns: 0,
        options: Options {
            cpus: cpus.to_vec(),
            loads: config.loads.clone(),
            taskset: config.taskset.clone(),
            quick: config.quick,
            probe_ns: config.probe_ns,
            latency_ns: config.latency_ns,
            stimulus_ns: config.stimulus_ns,
        },
        compared_with: None,
        prediction: None,
        machine: MachineContext::read(),
        readiness: Vec::new(),
        leftovers: Vec::new(),
        steps: Vec::new(),
        cpus: cpus.iter().map(|&cpu| CpuSurvey { cpu, curves: Vec::new() }).collect(),
        latency: Vec::new(),
        stimulus: Vec::new(),
        accounting: Vec::new(),
        schedulability: Vec::new(),
        findings: Vec::new(),
        recommendations: Vec::new(),
        verdict: Verdict { severity: Severity::Note, headline: String::new() },
        thread_names: Vec::new(),
        boot_id: None,
        profile: None,
    }
}

struct Runner<'a, F> {
    survey: Survey,
    stop: &'a AtomicBool,
    on_progress: F,
    done_ns: u64,
    total_ns: u64,
}

impl<F: FnMut(&Progress)> Runner<'_, F> {
    /// Runs one step and records how it went; its value when it ran.
    fn step<T>(&mut self, name: &str, planned_ns: u64, work: impl FnOnce(&AtomicBool) -> Result<T>) -> Option<T> {
        if self.stop.load(Ordering::SeqCst) {
            self.record(name, StepStatus::Interrupted, Some("not started: the survey was stopped".into()), 0);
            return None;
        }
        (self.on_progress)(&Progress { step: name, done_ns: self.done_ns, total_ns: self.total_ns });
        let started = Instant::now();
        let outcome = work(self.stop);
        let elapsed = started.elapsed().as_nanos() as u64;
        self.done_ns += planned_ns;
        let stopped = self.stop.load(Ordering::SeqCst);
        match outcome {
            Ok(value) => {
                let status = if stopped { StepStatus::Interrupted } else { StepStatus::Done };
                let detail = stopped.then(|| "stopped early; what it measured is kept".to_string());
                self.record(name, status, detail, elapsed);
                Some(value)
            }
            Err(e) => {
                let status = match e.exit_code() {
                    3 => StepStatus::Skipped,
                    _ if stopped => StepStatus::Interrupted,
                    _ => StepStatus::Failed,
                };
                self.record(name, status, Some(e.to_string()), elapsed);
                None
            }
        }
    }

    fn record(&mut self, name: &str, status: StepStatus, detail: Option<String>, elapsed_ns: u64) {
        self.survey.steps.push(Step { name: name.to_string(), status, detail, elapsed_ns });
    }

    /// One load: the probe on each CPU, latency, stimulus, with the
    /// accounting running across all of them.
    fn phase(&mut self, config: &Config, load: Load, cpus: &[usize]) {
        let accounting_stop = Arc::new(AtomicBool::new(false));
        let started = Instant::now();
        let accounting = {
            let stop = accounting_stop.clone();
            std::thread::spawn(move || {
                let config = accounting::Config { duration_ns: u64::MAX / 4, tick_ns: None, reference_softirq_sum: false };
                accounting::measure(&config, &stop, |_| {})
            })
        };
        for &cpu in cpus {
            let name = format!("probe cpu {cpu} {}", load.name());
            let planned = config.probe_ns + loads::RAMP.as_nanos() as u64;
            if let Some(curve) = self.step(&name, planned, |stop| probe_under(load, cpu, config.probe_ns, stop)) {
                self.add_curve(cpu, curve);
            }
        }
        let focus = *cpus.last().expect("at least one CPU");
        let planned = config.latency_ns + loads::RAMP.as_nanos() as u64;
        if let Some(phase) =
            self.step(&format!("latency {}", load.name()), planned, |stop| latency_under(load, cpus, focus, config.latency_ns, stop))
        {
            self.survey.latency.push(phase);
        }
        self.stimulus(config, load, focus);
        accounting_stop.store(true, Ordering::SeqCst);
        let outcome = accounting.join().unwrap_or_else(|_| Err(Error::Failed("the accounting thread panicked".into())));
        let name = format!("accounting {}", load.name());
        let elapsed = started.elapsed().as_nanos() as u64;
        match outcome {
            Ok(report) => {
                let complete = !self.stop.load(Ordering::SeqCst);
                self.survey.accounting.push(summarize_accounting(load, &report, complete));
                let status = if complete { StepStatus::Done } else { StepStatus::Interrupted };
                self.record(&name, status, Some("ran across the phase".into()), elapsed);
            }
            Err(e) => {
                let status = if e.exit_code() == 3 { StepStatus::Skipped } else { StepStatus::Failed };
                self.record(&name, status, Some(e.to_string()), elapsed);
            }
        }
    }

    fn stimulus(&mut self, config: &Config, load: Load, focus: usize) {
        let name = format!("stimulus {}", load.name());
        if load == Load::Net {
            let why = "not under the network load: the stimuli would share the flooded queue, and losing them says nothing of the target";
            self.record(&name, StepStatus::Skipped, Some(why.into()), 0);
            return;
        }
        if let Some(report) = self.step(&name, config.stimulus_ns, |stop| stimulus_under(load, focus, config.stimulus_ns, stop)) {
            self.survey.stimulus.push(StimulusPhase { load, report });
        }
    }

    fn add_curve(&mut self, cpu: usize, mut curve: LoadCurve) {
        let Some(entry) = self.survey.cpus.iter_mut().find(|c| c.cpu == cpu) else { return };
        if curve.load != Load::None {
            let baseline = entry.curves.iter().find(|c| c.load == Load::None).map(|c| c.measured.clone());
            attribute(&mut curve, baseline.as_ref());
        }
        entry.curves.push(curve);
    }
}

/// Subtracts the idle baseline's floor (`irqlab fit --baseline`) and fits
/// the hyperbola to what is left; without a baseline the measured curve
/// is fitted as it is.
fn attribute(curve: &mut LoadCurve, baseline: Option<&Curve>) {
    match FitDocument::fit(&curve.measured, baseline, ("measured", baseline.map(|_| "idle"))) {
        Ok((fit, fitted)) => {
            curve.fit = Some(fit.hyperbola());
            curve.baseline_use = fit.baseline_use;
            curve.attributed = baseline.map(|_| fitted);
            curve.fit_error = None;
        }
        Err(e) => {
            curve.fit = None;
            curve.fit_error = Some(e.to_string());
            curve.attributed = baseline.map(|b| irqlab_analysis::fit::subtract_baseline_floor(&curve.measured, b).0);
        }
    }
}

/// The probe on `cpu` under `load`.
fn probe_under(load: Load, cpu: usize, duration_ns: u64, stop: &AtomicBool) -> Result<LoadCurve> {
    let running = start_and_ramp(load, cpu, stop)?;
    // With its gaps' sources: the findings name who took the worst windows.
    let config = probe::Config { cpu: Some(cpu), priority: Some(PROBE_PRIORITY), duration_ns, sources: true, ..probe::Config::default() };
    let steal_before = irqlab_measure::accounting::procfs::cpu_steal_ns(cpu);
    let sampler = interrupts::Sampler::start(cpu);
    // The probe's first once-a-second report places its spin's start on
    // this clock (the spin's length comes with the result): the interrupt
    // counts are taken inside the spin, not over the setup around it.
    let mut spin_start = None;
    let measured = probe::measure(&config, stop, |tick| {
        if spin_start.is_none() {
            spin_start = Instant::now().checked_sub(Duration::from_nanos(tick.elapsed_ns));
        }
    })?;
    let steal_ns = irqlab_measure::accounting::procfs::cpu_steal_ns(cpu).saturating_sub(steal_before);
    let interrupts = spin_start.and_then(|start| sampler.finish(start, start + Duration::from_nanos(measured.duration_ns)));
    let (driver_threads, driver_match) = running.as_ref().map(|r| (r.driver_threads.clone(), r.driver_match.clone())).unwrap_or_default();
    drop(running);
    let mut curve = LoadCurve {
        load,
        complete: measured.complete,
        duration_ns: measured.duration_ns,
        measured: measured.curve(),
        attributed: None,
        baseline_use: None,
        fit: None,
        fit_error: None,
        max_gap_ns: measured.max_gap_ns,
        rt_throttled: measured.rt_throttling.limited,
        driver_threads,
        driver_match,
        sources: Some(measured.sources.clone()),
        steal_ns: Some(steal_ns),
        interrupts,
    };
    if load == Load::None {
        match fit_hyperbola(&curve.measured.points) {
            Ok(fit) => curve.fit = Some(fit),
            Err(e) => curve.fit_error = Some(e.to_string()),
        }
    }
    Ok(curve)
}

/// Timer latency on every surveyed CPU under `load` (focused on `focus`),
/// with `irqlab watch`'s flight recorder on: each CPU's worst wake-up is
/// explained by what ran in it (each new worst of a thread is a spike,
/// the last one its worst).
fn latency_under(load: Load, cpus: &[usize], focus: usize, duration_ns: u64, stop: &AtomicBool) -> Result<LatencyPhase> {
    let _running = start_and_ramp(load, focus, stop)?;
    let config = watch::Config {
        latency: latency::Config { cpus: Some(cpus.to_vec()), priority: LATENCY_PRIORITY, duration_ns, ..latency::Config::default() },
        open_ended: false,
        threshold_ns: Some(watch::Config::MIN_THRESHOLD_NS),
        on_threshold: watch::OnThreshold::Continue,
        record_ns: watch::Config::DEFAULT_RECORD_NS,
        // Every new worst kept: a few dozen per CPU in a step.
        keep: 64 * cpus.len(),
        recorder: true,
        worst_only: true,
    };
    let (watched, report) = watch::watch_with_latency(&config, stop, |_| {}, None, |_| {})?;
    Ok(LatencyPhase { load, report, worst: worst_per_cpu(&watched), recorder: Some(watched.recorder.note) })
}

/// Each CPU's latest kept spike of a worst-only watch: its worst wake-up.
fn worst_per_cpu(watched: &watch::WatchReport) -> Vec<WorstWakeUp> {
    watched
        .cpus
        .iter()
        .filter_map(|c| {
            let worst = watched.spikes.iter().filter(|s| s.cpu == c.cpu).max_by_key(|s| s.latency_ns)?;
            Some(WorstWakeUp { cpu: c.cpu, latency_ns: worst.latency_ns, cause: worst.cause.clone() })
        })
        .collect()
}

/// Stimulus latency from testbed host b to this machine (the root
/// namespace): the kernel's ICMP echo (softirq path) and a SCHED_FIFO 80
/// UDP responder (task path), 1 kHz periodic.
fn stimulus_under(load: Load, focus: usize, duration_ns: u64, stop: &AtomicBool) -> Result<irqlab_measure::stimulus::StimulusReport> {
    let bed = Testbed::up()?;
    let responder = responder::bind(&ResponderConfig {
        bind: SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, STIMULUS_PORT),
        priority: LATENCY_PRIORITY,
        cpu: None,
    })?;
    let running = start_and_ramp(load, focus, stop)?;
    let config = GeneratorConfig {
        target: bed.root_addr(Side::B),
        udp_port: STIMULUS_PORT,
        paths: vec![PathKind::Icmp, PathKind::Udp],
        pattern: Pattern::periodic(1_000_000),
        count: None,
        duration_ns: Some(duration_ns),
        timeout_ns: 1_000_000_000,
        ..GeneratorConfig::default()
    };
    let responder_stop = AtomicBool::new(false);
    // The generator runs in namespace b on a thread of its own, which needs
    // a stop flag it owns: `mirror` copies Ctrl-C into it.
    let generator_stop = Arc::new(AtomicBool::new(false));
    let finished = AtomicBool::new(false);
    std::thread::scope(|s| {
        let served = s.spawn(|| responder.serve(&responder_stop));
        s.spawn(|| {
            while !finished.load(Ordering::SeqCst) {
                if stop.load(Ordering::SeqCst) {
                    generator_stop.store(true, Ordering::SeqCst);
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        });
        let flag = generator_stop.clone();
        let outcome = bed
            .spawn_in(Side::B, move || generator::measure(&config, &flag, |_| {}))
            .and_then(|t| t.join().map_err(|_| Error::Failed("the stimulus generator panicked".into()))?);
        finished.store(true, Ordering::SeqCst);
        responder_stop.store(true, Ordering::SeqCst);
        let _ = served.join();
        drop(running);
        outcome
    })
}

/// Starts `load` (focused on `focus`) and lets it run [`loads::RAMP`]
/// before a measurement starts (less when stopped).
fn start_and_ramp(load: Load, focus: usize, stop: &AtomicBool) -> Result<Option<RunningLoad>> {
    let running = RunningLoad::start(load, focus)?;
    if running.is_some() {
        sleep_unless_stopped(loads::RAMP, stop);
    }
    Ok(running)
}

fn sleep_unless_stopped(d: Duration, stop: &AtomicBool) {
    let end = Instant::now() + d;
    while Instant::now() < end && !stop.load(Ordering::SeqCst) {
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The accounting report boiled down: top victims and beneficiaries
/// (irqlab's own threads and the idle tasks left out: the probe and the
/// latency threads are victims by construction) and each CPU's split.
pub fn summarize_accounting(load: Load, report: &AccountingReport, complete: bool) -> AccountingPhase {
    let own = std::process::id();
    let candidates = || report.tasks.iter().filter(|t| t.tgid != own && t.kind != accounting::procfs::TaskKind::Idle);
    let figure = |t: &accounting::report::TaskReport, by: &std::collections::BTreeMap<String, u64>| TaskFigure {
        task: format!("{}/{}", t.comm, t.tid),
        run_ns: t.time.run_ns,
        stolen_hardirq_ns: t.time.stolen_hardirq_ns,
        stolen_softirq_ns: t.time.stolen_softirq_ns,
        served_softirq_ns: t.served_softirq_ns(),
        top_vector: by.iter().max_by_key(|(_, &v)| v).map(|(k, _)| k.clone()),
    };
    let mut victims: Vec<_> = candidates().filter(|t| t.time.stolen_ns > 0).collect();
    victims.sort_by_key(|t| std::cmp::Reverse(t.time.stolen_ns));
    let mut served: Vec<_> = candidates().filter(|t| t.served_softirq_ns() > 0).collect();
    served.sort_by_key(|t| std::cmp::Reverse(t.served_softirq_ns()));
    AccountingPhase {
        load,
        complete,
        duration_ns: report.duration_ns,
        top_victims: victims.iter().take(TOP).map(|t| figure(t, &t.stolen_by_softirq_ns)).collect(),
        top_beneficiaries: served.iter().take(TOP).map(|t| figure(t, &t.served_by_softirq_ns)).collect(),
        cpus: report
            .cpus
            .iter()
            .map(|c| CpuFigure {
                cpu: c.cpu,
                wall_ns: c.wall_ns,
                hardirq_ns: c.time.hardirq_ns,
                softirq_ns: c.time.softirq_ns,
                softirq_by_vector_ns: c.softirq_by_vector_ns.clone(),
            })
            .collect(),
    }
}
