//! The load-bounds paper (`docs/papers.md` §3) in
//! simulation: interference curves measured by the simulated probe (§4,
//! Figs. 4-6) and fitted with the paper's hyperbola; the driver-scheduling
//! configurations of Table 1 plus a SCHED_DEADLINE and a fine-grained
//! sporadic-server variant, with τ2's deadline misses and τ1's heartbeat
//! losses over an e2 sweep (Figs. 7-8); and, per configuration, the
//! analysis prediction (Figs. 9-10): τ1's demand (eq. 4) plus the fitted
//! hyperbola (eq. 10) of the driver as τ2 sees it, through exact
//! fixed-priority response-time analysis, giving the largest e2 that
//! always meets its deadline.
//!
//! Every number comes out of simulation runs of the scenario files in
//! `scenarios/load-bounds/`; only τ2's execution time, the run length and
//! (for the driver curves of the configurations) the probe in τ2's place
//! are changed here.

pub mod live;

use crate::report::{Report, Row};
use irqlab_analysis::curve::{Curve, CurvePoint};
use irqlab_analysis::demand::{hyperbolic_demand, periodic_demand, DemandBound};
use irqlab_analysis::fit::{fit_hyperbola, subtract_baseline, HyperbolaFit};
use irqlab_analysis::fixed_priority::{response_time, Horizon};
use irqlab_analysis::Nanos;
use irqlab_sim::scenario::{LoopSpec, MetricSpec, Scenario, ServerSpec, TrafficKind, Work};
use irqlab_sim::server::Accounting;
use irqlab_sim::task::Policy;
use irqlab_sim::workload::Dist;
use serde::Serialize;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;

const MS: Nanos = 1_000_000;
/// τ1 and τ2: p = d = 10 ms, e1 = 2 ms (§5).
pub(crate) const PERIOD: Nanos = 10 * MS;
const E1: Nanos = 2 * MS;
/// The sporadic server's budget (§5), for the ideal e2 ≤ 10 − e1 − budget.
const SS_BUDGET: Nanos = MS;

/// The kernel a probe curve was measured on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kernel {
    Vanilla,
    Threaded,
}

impl Kernel {
    /// The softirq model's name, as in the scenarios.
    pub fn name(self) -> &'static str {
        match self {
            Kernel::Vanilla => "linux-2.6",
            Kernel::Threaded => "threaded",
        }
    }
}

/// The network traffic during a probe run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Traffic {
    Idle,
    Ping,
    PingNoReply,
}

impl Traffic {
    pub fn name(self) -> &'static str {
        match self {
            Traffic::Idle => "idle",
            Traffic::Ping => "ping",
            Traffic::PingNoReply => "ping-noreply",
        }
    }
}

/// One measured interference curve of Figs. 4-6: a kernel under a traffic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Probe {
    VanillaIdle,
    ThreadedIdle,
    VanillaPing,
    ThreadedPing,
    VanillaPingNoReply,
    ThreadedPingNoReply,
}

impl Probe {
    /// In the order they are run and reported.
    pub const ALL: [Probe; 6] = [
        Probe::VanillaIdle,
        Probe::ThreadedIdle,
        Probe::VanillaPing,
        Probe::ThreadedPing,
        Probe::VanillaPingNoReply,
        Probe::ThreadedPingNoReply,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Probe::VanillaIdle => "vanilla, idle",
            Probe::ThreadedIdle => "threaded, idle",
            Probe::VanillaPing => "vanilla, ping",
            Probe::ThreadedPing => "threaded, ping",
            Probe::VanillaPingNoReply => "vanilla, ping without reply",
            Probe::ThreadedPingNoReply => "threaded, ping without reply",
        }
    }

    pub fn kernel(self) -> Kernel {
        match self {
            Probe::VanillaIdle | Probe::VanillaPing | Probe::VanillaPingNoReply => Kernel::Vanilla,
            Probe::ThreadedIdle | Probe::ThreadedPing | Probe::ThreadedPingNoReply => Kernel::Threaded,
        }
    }

    pub fn traffic(self) -> Traffic {
        match self {
            Probe::VanillaIdle | Probe::ThreadedIdle => Traffic::Idle,
            Probe::VanillaPing | Probe::ThreadedPing => Traffic::Ping,
            Probe::VanillaPingNoReply | Probe::ThreadedPingNoReply => Traffic::PingNoReply,
        }
    }

    /// The paper's figure showing the curve.
    pub fn figure(self) -> &'static str {
        match self.traffic() {
            Traffic::Idle => "4",
            Traffic::Ping => "5",
            Traffic::PingNoReply => "6",
        }
    }

    /// The scenario file, embedded so that the reproduction runs anywhere.
    fn scenario(self) -> &'static str {
        match self {
            Probe::VanillaIdle => include_str!("../../../../scenarios/load-bounds/probe-vanilla-idle.toml"),
            Probe::ThreadedIdle => include_str!("../../../../scenarios/load-bounds/probe-threaded-idle.toml"),
            Probe::VanillaPing => include_str!("../../../../scenarios/load-bounds/probe-vanilla-ping.toml"),
            Probe::ThreadedPing => include_str!("../../../../scenarios/load-bounds/probe-threaded-ping.toml"),
            Probe::VanillaPingNoReply => include_str!("../../../../scenarios/load-bounds/probe-vanilla-ping-noreply.toml"),
            Probe::ThreadedPingNoReply => include_str!("../../../../scenarios/load-bounds/probe-threaded-ping-noreply.toml"),
        }
    }
}

/// One driver-scheduling configuration (Table 1 and two more).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Configuration {
    Traditional,
    Background,
    Foreground,
    Sporadic,
    SporadicFine,
    Deadline,
}

impl Configuration {
    /// In the order they are run and reported.
    pub const ALL: [Configuration; 6] = [
        Configuration::Traditional,
        Configuration::Background,
        Configuration::Foreground,
        Configuration::Sporadic,
        Configuration::SporadicFine,
        Configuration::Deadline,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Configuration::Traditional => "Traditional",
            Configuration::Background => "Background",
            Configuration::Foreground => "Foreground",
            Configuration::Sporadic => "Sporadic",
            Configuration::SporadicFine => "Sporadic (fine-grained)",
            Configuration::Deadline => "SCHED_DEADLINE",
        }
    }

    /// The scenario file, embedded so that the reproduction runs anywhere.
    fn scenario(self) -> &'static str {
        match self {
            Configuration::Traditional => include_str!("../../../../scenarios/load-bounds/traditional.toml"),
            Configuration::Background => include_str!("../../../../scenarios/load-bounds/background.toml"),
            Configuration::Foreground => include_str!("../../../../scenarios/load-bounds/foreground.toml"),
            Configuration::Sporadic => include_str!("../../../../scenarios/load-bounds/sporadic.toml"),
            Configuration::SporadicFine => include_str!("../../../../scenarios/load-bounds/sporadic-fine.toml"),
            Configuration::Deadline => include_str!("../../../../scenarios/load-bounds/deadline.toml"),
        }
    }
}

by_name!(Kernel, Traffic, Probe, Configuration);

/// Options of one reproduction.
#[derive(Debug, Clone, Copy)]
pub struct Options {
    pub quick: bool,
    pub seed: u64,
    pub threads: usize,
}

impl Options {
    fn probe_duration(&self) -> Nanos {
        if self.quick {
            MS * 500
        } else {
            MS * 5_000
        }
    }
    fn sweep_duration(&self) -> Nanos {
        if self.quick {
            MS * 1_000
        } else {
            MS * 5_000
        }
    }
    /// e2 values: 1..9 ms by 1 ms (quick) or by 0.5 ms.
    fn e2_values(&self) -> Vec<Nanos> {
        let step = if self.quick { MS } else { MS / 2 };
        (0..).map(|k| MS + k * step).take_while(|&e| e <= 9 * MS).collect()
    }
}

/// One measured interference curve (Figs. 4-6).
#[derive(Debug, Clone, Serialize)]
pub struct CurveCase {
    pub name: Probe,
    pub kernel: Kernel,
    pub traffic: Traffic,
    pub figure: String,
    pub curve: Curve,
    pub fit: Option<HyperbolaFit>,
    /// The curve minus its kernel's idle baseline (the driver alone), with
    /// its fit; absent for the idle cases.
    pub driver_only: Option<Curve>,
    pub driver_fit: Option<HyperbolaFit>,
    /// Every fitted hyperbola lies on or above every point it was fitted to.
    pub fits_cover: bool,
}

/// One point of the e2 sweep (Figs. 7-8).
#[derive(Debug, Clone, Serialize)]
pub struct SweepPoint {
    pub e2_ns: Nanos,
    pub tau2_jobs: u64,
    pub tau2_misses: u64,
    pub tau2_miss_pct: f64,
    pub heartbeats_received: u64,
    pub heartbeats_missed: u64,
    pub heartbeat_miss_pct: f64,
}

/// One driver-scheduling configuration.
#[derive(Debug, Clone, Serialize)]
pub struct ConfigResult {
    pub name: Configuration,
    pub description: String,
    pub points: Vec<SweepPoint>,
    /// The driver (and kernel) as τ2 sees it: the probe in τ2's place, τ1
    /// absent, everything else as in the configuration.
    pub driver_curve: Curve,
    pub driver_fit: Option<HyperbolaFit>,
    /// The server governing net-rx, if any.
    pub server: Option<ServerBound>,
    /// Largest e2 for which exact RTA gives R2 ≤ d2 (Figs. 9-10) with the
    /// interference of τ1 (eq. 4) + the fitted driver hyperbola (eq. 10);
    /// for a server configuration, with the fitted hyperbola of the curve
    /// measured in τ2's place with τ1 running (it then holds τ1 too).
    pub predicted_max_e2_ns: Nanos,
    /// For a server: τ1 + budget (+ accounting overrun) per period + the
    /// idle baseline, as the sporadic-server theorem would have it
    /// (ignores the IRQ-thread work outside the server). Not checked.
    pub server_predicted_max_e2_ns: Option<Nanos>,
    pub prediction_model: String,
    /// Largest swept e2 at and below which τ2 never missed.
    pub meets_up_to_e2_ns: Option<Nanos>,
    /// Heartbeats missed over the whole sweep.
    pub heartbeats_missed_total: u64,
    /// Swept points where the analysis said schedulable but τ2 missed.
    pub unsafe_points: usize,
}

#[derive(Debug, Clone, Serialize)]
pub struct Details {
    pub probe_duration_ns: Nanos,
    pub sweep_duration_ns: Nanos,
    pub curves: Vec<CurveCase>,
    pub configs: Vec<ConfigResult>,
    /// 10 − e1 − budget: where an ideal sporadic server lets τ2 start missing.
    pub ideal_sporadic_e2_ns: Nanos,
}

/// What went wrong with an embedded scenario (a defect of this crate, not
/// of user input, but reported rather than panicking).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("scenario {0}: {1}")]
    Scenario(String, String),
}

/// One simulation job of the reproduction.
enum Job {
    Probe { idx: usize },
    ConfigProbe { idx: usize },
    Sweep { idx: usize, e2: Nanos },
}

enum Out {
    Curve(Curve),
    Sweep(SweepPoint),
}

/// Runs the whole reproduction. `progress(done, total)` is called after
/// each simulation run; `stop` ends it early (the report is then marked
/// incomplete).
pub fn reproduce(opts: &Options, stop: &AtomicBool, progress: &(dyn Fn(usize, usize) + Sync)) -> Result<Report<Details>, Error> {
    reproduce_adjusted(opts, stop, progress, &|_| Ok(()))
}

/// [`reproduce`] with every embedded scenario changed by `adjust` first
/// (the live reproduction's costs and traffic measured on this machine).
pub fn reproduce_adjusted(
    opts: &Options,
    stop: &AtomicBool,
    progress: &(dyn Fn(usize, usize) + Sync),
    adjust: &dyn Fn(&mut Scenario) -> Result<(), String>,
) -> Result<Report<Details>, Error> {
    let e2s = opts.e2_values();
    let parsed = |name: &str, text: &str| {
        let mut sc = parse(name, text)?;
        adjust(&mut sc).map_err(|e| Error::Scenario(name.into(), e))?;
        Ok::<_, Error>(sc)
    };
    let probes = Probe::ALL.iter().map(|p| parsed(p.name(), p.scenario())).collect::<Result<Vec<_>, _>>()?;
    let configs = Configuration::ALL.iter().map(|c| parsed(c.name(), c.scenario())).collect::<Result<Vec<_>, _>>()?;
    let mut jobs = Vec::new();
    for idx in 0..Probe::ALL.len() {
        jobs.push(Job::Probe { idx });
    }
    for idx in 0..Configuration::ALL.len() {
        jobs.push(Job::ConfigProbe { idx });
        for &e2 in &e2s {
            jobs.push(Job::Sweep { idx, e2 });
        }
    }
    let total = jobs.len();
    let results: Mutex<Vec<Option<Result<Out, Error>>>> = Mutex::new((0..total).map(|_| None).collect());
    let next = AtomicUsize::new(0);
    let done = AtomicUsize::new(0);
    std::thread::scope(|s| {
        for _ in 0..opts.threads.max(1) {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= total || stop.load(Ordering::Relaxed) {
                    break;
                }
                let r = run_job(&jobs[i], &probes, &configs, opts, stop);
                results.lock().expect("no panics while holding the lock")[i] = Some(r);
                progress(done.fetch_add(1, Ordering::Relaxed) + 1, total);
            });
        }
    });
    let results = results.into_inner().expect("workers ended");
    let complete = !stop.load(Ordering::Relaxed) && results.iter().all(Option::is_some);
    let mut outs = Vec::with_capacity(total);
    for r in results {
        outs.push(r.transpose()?);
    }

    // Figs. 4-6: the measured curves, their fits, the driver alone.
    let mut raw_curves: Vec<Option<Curve>> = Vec::new();
    let mut k = 0;
    for _ in 0..Probe::ALL.len() {
        raw_curves.push(match outs[k].take() {
            Some(Out::Curve(c)) => Some(c),
            _ => None,
        });
        k += 1;
    }
    let curves = curve_cases(&raw_curves);

    let mut results = Vec::new();
    for (&name, sc) in Configuration::ALL.iter().zip(&configs) {
        let driver_curve = match outs[k].take() {
            Some(Out::Curve(c)) => c,
            _ => Curve::new(Vec::new()),
        };
        k += 1;
        let mut points: Vec<SweepPoint> = Vec::new();
        for _ in &e2s {
            if let Some(Out::Sweep(p)) = outs[k].take() {
                points.push(p);
            }
            k += 1;
        }
        let description = sc.description().unwrap_or_default().to_string();
        let baseline = curves.iter().find(|c| c.name == Probe::ThreadedIdle).and_then(|c| c.fit);
        let sweep = opts.sweep_duration();
        for p in &mut points {
            complete_counts(p, sc, sweep);
        }
        results.push(config_result(name, sc, baseline, description, driver_curve, points));
    }

    let details = Details {
        probe_duration_ns: opts.probe_duration(),
        sweep_duration_ns: opts.sweep_duration(),
        curves,
        configs: results,
        ideal_sporadic_e2_ns: PERIOD - E1 - SS_BUDGET,
    };
    let rows = relations(&details);
    Ok(Report::new("load-bounds", opts.quick, complete, opts.seed, rows, details))
}

fn run_job(job: &Job, probes: &[Scenario], configs: &[Scenario], opts: &Options, stop: &AtomicBool) -> Result<Out, Error> {
    match *job {
        Job::Probe { idx } => {
            run(&probes[idx], opts, opts.probe_duration(), stop).map(|r| Out::Curve(r.probe.unwrap_or_else(|| Curve::new(Vec::new()))))
        }
        Job::ConfigProbe { idx } => {
            let sc = &configs[idx];
            let sc = probe_in_tau2s_place(sc, server_of(sc).is_some()).map_err(|e| Error::Scenario(sc.name(), e))?;
            run(&sc, opts, opts.probe_duration(), stop).map(|r| Out::Curve(r.probe.unwrap_or_else(|| Curve::new(Vec::new()))))
        }
        Job::Sweep { idx, e2 } => {
            let sc = with_tau2_exec(&configs[idx], e2).map_err(|e| Error::Scenario(configs[idx].name(), e))?;
            let r = run(&sc, opts, opts.sweep_duration(), stop)?;
            Ok(Out::Sweep(sweep_point(&r, e2)))
        }
    }
}

fn parse(name: &str, text: &str) -> Result<Scenario, Error> {
    Scenario::parse(name, text).map_err(|e| Error::Scenario(name.into(), e.to_string()))
}

fn run(sc: &Scenario, opts: &Options, duration: Nanos, stop: &AtomicBool) -> Result<irqlab_sim::SimResult, Error> {
    let p = sc.run_params(Some(opts.seed), Some(duration)).map_err(|e| Error::Scenario(sc.name(), e.to_string()))?;
    irqlab_sim::run_scenario(sc, p, false, stop, |_| {}).map(|o| o.result).map_err(|e| Error::Scenario(sc.name(), e.to_string()))
}

/// The configuration with τ2's execution time set to `e2`.
fn with_tau2_exec(sc: &Scenario, e2: Nanos) -> Result<Scenario, String> {
    let mut sc = sc.clone();
    match sc.spec_mut().task_mut("tau2").map(|t| &mut t.work) {
        Some(Work::Periodic(p)) => p.exec = Dist::Const(e2),
        _ => return Err("no periodic task `tau2`".into()),
    }
    Ok(sc)
}

/// The configuration with the probe (a task that always wants the CPU) in
/// τ2's place, at τ2's priority: the empirical load bound of what preempts
/// τ2 (§4's measurement, taken per configuration). Without `keep_tau1`, τ1
/// is removed, so the curve is the driver's (and kernel's) alone.
fn probe_in_tau2s_place(sc: &Scenario, keep_tau1: bool) -> Result<Scenario, String> {
    let mut sc = sc.clone();
    let spec = sc.spec_mut();
    spec.tasks.retain(|t| keep_tau1 || t.name != "tau1");
    spec.task_mut("tau2").ok_or("no task `tau2`")?.work = Work::Probe(LoopSpec::default());
    // Without τ1 its socket has no reader; the heartbeat only queues there,
    // on purpose: declared, as a scenario would with [[socket]].
    spec.declare_unread_sockets();
    let windows = irqlab_sim::probe::log_windows(10_000, 100 * MS, 31);
    spec.metrics = vec![MetricSpec::Probe { task: "tau2".into(), windows, at: 0..0 }];
    Ok(sc)
}

fn sweep_point(r: &irqlab_sim::SimResult, e2: Nanos) -> SweepPoint {
    let task = |n: &str| r.tasks.iter().find(|t| t.name == n);
    let (jobs, misses) = task("tau2").map_or((0, 0), |t| (t.jobs, t.deadline_misses));
    let polls = |key: &str| task("tau1").and_then(|t| t.extra.as_ref()).and_then(|x| x.get(key)).and_then(|v| v.as_u64()).unwrap_or(0);
    let (ok, empty) = (polls("polls_ok"), polls("polls_empty"));
    SweepPoint {
        e2_ns: e2,
        tau2_jobs: jobs,
        tau2_misses: misses,
        tau2_miss_pct: pct(misses, jobs),
        heartbeats_received: ok,
        heartbeats_missed: empty,
        heartbeat_miss_pct: pct(empty, ok + empty),
    }
}

/// Makes the counts independent of how far τ1 and τ2 got: every release
/// of τ2 whose deadline passed within the run and that did not complete is
/// a miss too (a starved τ2 completes nothing), and heartbeats are counted
/// as sent by host A (arrivals at least one period before the end, so that
/// τ1 had a poll after each) minus those τ1 received.
fn complete_counts(p: &mut SweepPoint, sc: &Scenario, duration: Nanos) {
    let due = duration / PERIOD;
    if due > p.tau2_jobs {
        p.tau2_misses += due - p.tau2_jobs;
        p.tau2_jobs = due;
    }
    p.tau2_miss_pct = pct(p.tau2_misses, p.tau2_jobs);
    let (start, interval) = heartbeat_of(sc).unwrap_or((0, PERIOD));
    let last = duration.saturating_sub(PERIOD);
    let sent = if last >= start { (last - start) / interval + 1 } else { 0 };
    p.heartbeats_missed = sent.saturating_sub(p.heartbeats_received);
    p.heartbeat_miss_pct = pct(p.heartbeats_missed, sent);
}

/// Start and interval of the heartbeat traffic of a configuration.
fn heartbeat_of(sc: &Scenario) -> Option<(Nanos, Nanos)> {
    let hb = sc.spec().traffic.iter().find(|t| t.kind == TrafficKind::Heartbeat)?;
    match hb.arrivals {
        irqlab_sim::net::Arrivals::Constant { interval } => Some((hb.start, interval)),
        _ => None,
    }
}

fn pct(a: u64, b: u64) -> f64 {
    if b == 0 {
        0.0
    } else {
        100.0 * a as f64 / b as f64
    }
}

/// True when `fit` lies on or above every point of `curve`.
pub fn covers(fit: &HyperbolaFit, curve: &Curve) -> bool {
    curve.points.iter().all(|p| fit.load(p.window_ns) >= p.max_load)
}

fn curve_cases(raw: &[Option<Curve>]) -> Vec<CurveCase> {
    let baseline = |kernel: Kernel| -> Option<&Curve> {
        Probe::ALL.iter().zip(raw).find(|(p, _)| p.kernel() == kernel && p.traffic() == Traffic::Idle).and_then(|(_, c)| c.as_ref())
    };
    Probe::ALL
        .iter()
        .zip(raw)
        .filter_map(|(&name, c)| {
            let (kernel, traffic) = (name.kernel(), name.traffic());
            let curve = c.clone()?;
            let fit = fit_hyperbola(&curve.points).ok();
            let (driver_only, driver_fit) = if traffic == Traffic::Idle {
                (None, None)
            } else {
                let d = baseline(kernel).map(|b| subtract_baseline(&curve, b));
                let f = d.as_ref().and_then(|d| fit_hyperbola(&d.points).ok());
                (d, f)
            };
            let fits_cover = fit.as_ref().is_some_and(|f| covers(f, &curve))
                && match (&driver_only, &driver_fit) {
                    (Some(d), Some(f)) => covers(f, d),
                    (Some(_), None) => false,
                    _ => true,
                };
            Some(CurveCase { name, kernel, traffic, figure: name.figure().into(), curve, fit, driver_only, driver_fit, fits_cover })
        })
        .collect()
}

/// τ1's receive of the heartbeat (the scenarios' tau1).
pub(crate) const TAU1_RECEIVE_NS: Nanos = 2_000;

/// Demand of τ1 (eq. 4): its job is the 2 us receive + 2 ms of
/// computation (the scenarios' tau1).
pub(crate) fn tau1_demand(window: Nanos) -> Nanos {
    periodic_demand(DemandBound::Traditional, PERIOD, E1 + TAU1_RECEIVE_NS, window)
}

/// Interference on τ2 by the analysis: τ1 (eq. 4, e1 plus its receive
/// cost) and the driver's fitted hyperbola (eq. 10).
pub fn tau2_interference(fit: &HyperbolaFit, window: Nanos) -> Nanos {
    tau1_demand(window) + hyperbolic_demand(fit.utilization, fit.period_ns, window)
}

/// A bandwidth server governing net-rx in a configuration: budget, period,
/// and how far past its budget the accounting lets it run (the sporadic
/// server's granularity; 0 for exact enforcement; None for tick-sampled
/// accounting, which bounds nothing).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ServerBound {
    pub budget_ns: Nanos,
    pub period_ns: Nanos,
    pub overrun_ns: Option<Nanos>,
    /// SCHED_DEADLINE's constant-bandwidth server.
    pub cbs: bool,
}

/// Driver demand under a server (load-bounds paper §2: a sporadic server
/// interferes no more than a periodic task with wcet = budget; here the
/// budget grows by the accounting overrun; a CBS, whose wake-up rule can
/// hand out a fresh budget right after a spent one, as a deferrable
/// server) plus the kernel's idle baseline (fitted hyperbola).
/// `None` when the server's accounting bounds nothing (tick-sampled).
pub fn server_demand(s: &ServerBound, baseline: &HyperbolaFit, window: Nanos) -> Option<Nanos> {
    let c = s.budget_ns + s.overrun_ns?;
    let server = if s.cbs {
        irqlab_analysis::task::deferrable_server_demand(
            irqlab_analysis::Server { budget_ns: c, period_ns: s.period_ns },
            window,
            DemandBound::Traditional,
        )
    } else {
        periodic_demand(DemandBound::Traditional, s.period_ns, c, window)
    };
    Some(server + hyperbolic_demand(baseline.utilization, baseline.period_ns, window))
}

/// The server of net-rx in a configuration, if any.
fn server_of(sc: &Scenario) -> Option<ServerBound> {
    let rx = sc.spec().threads.net_rx.as_ref()?;
    let (budget_ns, period_ns, overrun_ns) = match rx.server {
        // Exact accounting: budget checks happen at granularity boundaries,
        // so a run may pass its budget by up to one granule. Tick-sampled
        // accounting (irqlab_sim::server::Accounting::TickSampled) charges only
        // the ticks that find the thread running: no overrun bound at all.
        Some(ServerSpec::Sporadic { budget, period, accounting, .. }) => (
            budget,
            period,
            match accounting {
                Accounting::Exact { granularity } => Some(granularity),
                Accounting::TickSampled { .. } => None,
            },
        ),
        Some(ServerSpec::Polling { budget, period } | ServerSpec::Deferrable { budget, period }) => (budget, period, Some(1)),
        None => {
            return match rx.policy {
                Policy::Deadline { runtime, period, .. } => {
                    Some(ServerBound { budget_ns: runtime, period_ns: period, overrun_ns: Some(0), cbs: true })
                }
                _ => None,
            }
        }
    };
    Some(ServerBound { budget_ns, period_ns, overrun_ns, cbs: false })
}

/// Largest e2 (to 10 us) whose worst-case response time under
/// [`tau2_interference`] is within the 10 ms deadline (exact RTA, eq. 3).
pub fn predicted_max_e2(fit: &HyperbolaFit) -> Nanos {
    max_e2(&|t| tau2_interference(fit, t))
}

/// Largest e2 (to 10 us) with R2 ≤ d2 under `interference` (exact RTA).
pub fn max_e2(interference: &dyn Fn(Nanos) -> Nanos) -> Nanos {
    max_e2_executing(&|e2| e2, interference)
}

/// Largest nominal e2 (to 10 us) whose job, taking `execution(e2)` of
/// CPU (non-decreasing in e2), has R2 ≤ d2 under `interference` (exact
/// RTA, eq. 3): for a τ2 whose measured execution time differs from the
/// work asked of it.
pub fn max_e2_executing(execution: &dyn Fn(Nanos) -> Nanos, interference: &dyn Fn(Nanos) -> Nanos) -> Nanos {
    let ok =
        |e2: Nanos| response_time(PERIOD, execution(e2), interference, &Horizon::for_task(PERIOD, PERIOD)).is_some_and(|r| r <= PERIOD);
    let step = 10_000;
    let (mut lo, mut hi) = (0, PERIOD / step); // ok(lo*step) holds; find the last.
    if !ok(step) {
        return 0;
    }
    while hi - lo > 1 {
        let mid = (lo + hi) / 2;
        if ok(mid * step) {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    lo * step
}

fn config_result(
    name: Configuration,
    sc: &Scenario,
    baseline: Option<HyperbolaFit>,
    description: String,
    driver_curve: Curve,
    points: Vec<SweepPoint>,
) -> ConfigResult {
    let driver_fit = fit_hyperbola(&driver_curve.points).ok();
    let server = server_of(sc);
    let (predicted_max_e2_ns, prediction_model) = match (server, driver_fit) {
        // The curve was measured with τ1 running: it holds τ1, the server's
        // budget as τ1 shifts its replenishments, and the IRQ-thread work no
        // server governs.
        (Some(_), Some(f)) => (
            max_e2(&|t| hyperbolic_demand(f.utilization, f.period_ns, t)),
            "fitted curve of everything above tau2, tau1 included".to_string(),
        ),
        (None, Some(f)) => (predicted_max_e2(&f), "tau1 + fitted driver curve".to_string()),
        (_, None) => (0, "no fit".to_string()),
    };
    // What the sporadic-server theorem alone would say (τ1 + a periodic
    // task of budget + overrun + the idle baseline), for comparison.
    let server_predicted_max_e2_ns = match (server, baseline) {
        (Some(s), Some(b)) if s.overrun_ns.is_some() => Some(max_e2(&|t| tau1_demand(t) + server_demand(&s, &b, t).unwrap_or(t))),
        _ => None,
    };
    let mut meets_up_to_e2_ns = None;
    for p in &points {
        if p.tau2_misses > 0 {
            break;
        }
        meets_up_to_e2_ns = Some(p.e2_ns);
    }
    let unsafe_points = points.iter().filter(|p| p.e2_ns <= predicted_max_e2_ns && p.tau2_misses > 0).count();
    ConfigResult {
        name,
        description,
        heartbeats_missed_total: points.iter().map(|p| p.heartbeats_missed).sum(),
        points,
        driver_curve,
        driver_fit,
        server_predicted_max_e2_ns,
        server,
        predicted_max_e2_ns,
        prediction_model,
        meets_up_to_e2_ns,
        unsafe_points,
    }
}

fn ms(ns: Nanos) -> f64 {
    ns as f64 / 1e6
}

/// The largest load of a curve at windows of at least `from`.
fn load_at_or_after(c: &Curve, from: Nanos) -> f64 {
    c.points.iter().filter(|p| p.window_ns >= from).map(|p| p.max_load).fold(0.0, f64::max)
}

fn relations(d: &Details) -> Vec<Row> {
    let mut rows = Vec::new();
    curve_rows(d, &mut rows);
    config_rows(d, &mut rows);
    use Configuration::{Background, Foreground, Sporadic, SporadicFine, Traditional};
    if let [Some(tr), Some(bg), Some(fg), Some(ss)] = [Traditional, Background, Foreground, Sporadic].map(|n| config(d, n)) {
        table1_rows([tr, bg, fg, ss], &mut rows);
    }
    if let (Some(coarse), Some(fine)) = (config(d, Sporadic), config(d, SporadicFine)) {
        let ideal = ms(d.ideal_sporadic_e2_ns);
        rows.push(Row::check(
            "Fine-grained sporadic server: closer to the ideal e2 <= 10 - e1 - budget than the coarse one",
            "paper's SS fell 3 ms short of 7 ms",
            meets(fine),
            "ms",
            (meets(fine) - ideal).abs() < (meets(coarse) - ideal).abs(),
        ));
    }
    let unsafe_total: usize = d.configs.iter().map(|c| c.unsafe_points).sum();
    rows.push(Row::check(
        "every analysis prediction is safe: swept points predicted schedulable where tau2 missed",
        "none",
        unsafe_total as f64,
        "points",
        unsafe_total == 0,
    ));
    rows
}

fn config(d: &Details, name: Configuration) -> Option<&ConfigResult> {
    d.configs.iter().find(|c| c.name == name)
}

/// The largest swept e2 at which τ2 never missed, in ms (0 if none).
fn meets(c: &ConfigResult) -> f64 {
    c.meets_up_to_e2_ns.map_or(0.0, ms)
}

/// Figs. 4-6: the measured curves and their fits.
fn curve_rows(d: &Details, rows: &mut Vec<Row>) {
    use Probe::{ThreadedIdle, ThreadedPing, ThreadedPingNoReply, VanillaIdle, VanillaPing};
    let case = |name: Probe| d.curves.iter().find(|c| c.name == name);

    // Figs. 4-6.
    if let (Some(v), Some(t)) = (case(VanillaIdle), case(ThreadedIdle)) {
        // The paper's vanilla idle curve shows rare long non-preemptible
        // stretches; this model has no such sections, so both kernels see
        // only the timer tick. Shown, not checked.
        let diff = v.curve.points.iter().zip(&t.curve.points).map(|(a, b)| a.max_load - b.max_load).fold(f64::MIN, f64::max);
        rows.push(Row::info(
            "Fig. 4: idle, vanilla minus threaded interference, largest difference (no long non-preemptible kernel sections are modelled)",
            "threaded tighter",
            diff * 100.0,
            "% of window",
        ));
    }
    if let (Some(v), Some(t)) = (case(VanillaPing), case(ThreadedPing)) {
        if let (Some(vf), Some(tf)) = (v.driver_fit, t.driver_fit) {
            rows.push(Row::info("Fig. 5: vanilla driver-only fitted utilisation u", "-", vf.utilization * 100.0, "%"));
            rows.push(Row::check(
                "Fig. 5: threaded driver-only fitted utilisation u (higher than vanilla: context switches)",
                "higher than vanilla",
                tf.utilization * 100.0,
                "%",
                tf.utilization > vf.utilization,
            ));
        }
    }
    if let (Some(r), Some(n)) = (case(ThreadedPing), case(ThreadedPingNoReply)) {
        let (a, b) = (load_at_or_after(&r.curve, 10 * MS), load_at_or_after(&n.curve, 10 * MS));
        rows.push(Row::info(
            "Fig. 6: threaded, load at >= 10 ms without reply / with reply",
            "about half the work is the reply",
            if a > 0.0 { b / a * 100.0 } else { 0.0 },
            "%",
        ));
    }
    // The fit raises its period until it covers every point, so this is
    // shown (a count short of all would be a fitting bug), not checked.
    let covering = d.curves.iter().filter(|c| c.fits_cover).count()
        + d.configs.iter().filter(|c| c.driver_fit.as_ref().is_some_and(|f| covers(f, &c.driver_curve))).count();
    rows.push(Row::info(
        format!("Figs. 4-6, 10: fitted hyperbolas on or above every point of their curve (of {})", d.curves.len() + d.configs.len()),
        "all, by construction of the fit",
        covering as f64,
        "curves",
    ));
}

/// Figs. 7-10, per configuration: what the sweep met and what the
/// analysis predicted.
fn config_rows(d: &Details, rows: &mut Vec<Row>) {
    for c in &d.configs {
        rows.push(Row::info(format!("{}: tau2 meets every deadline up to e2", c.name), "-", meets(c), "ms"));
        rows.push(Row::info(
            format!("{}: analysis ({}) predicts no miss up to e2", c.name, c.prediction_model),
            "-",
            ms(c.predicted_max_e2_ns),
            "ms",
        ));
        if let Some(e) = c.server_predicted_max_e2_ns {
            rows.push(Row::info(
                format!("{}: server theorem alone (tau1 + budget + overrun + idle; not checked)", c.name),
                "-",
                ms(e),
                "ms",
            ));
        }
        rows.push(Row::info(format!("{}: heartbeats missed over the sweep", c.name), "-", c.heartbeats_missed_total as f64, "packets"));
    }
}

/// Figs. 7-10: the four configurations of Table 1 against each other.
fn table1_rows(four: [&ConfigResult; 4], rows: &mut Vec<Row>) {
    let [tr, bg, fg, ss] = four;
    {
        let others_meet = four.iter().filter(|c| c.name != Configuration::Background).map(|c| meets(c)).fold(0.0, f64::max);
        rows.push(Row::check(
            "Background: tau2 meets its deadlines for the largest e2 (Fig. 7)",
            "no miss until e2 > 7 ms (Fig. 9)",
            meets(bg),
            "ms",
            meets(bg) >= others_meet,
        ));
        let most = four.iter().map(|c| c.heartbeats_missed_total).max().unwrap_or(0);
        rows.push(Row::check(
            "Background: loses the most heartbeats (Fig. 8)",
            "worst packet loss",
            bg.heartbeats_missed_total as f64,
            "packets",
            bg.heartbeats_missed_total == most && most > 0,
        ));
        let fewest = four.iter().map(|c| c.heartbeats_missed_total).min().unwrap_or(0);
        rows.push(Row::check(
            "Foreground: loses the fewest heartbeats (Fig. 8)",
            "best heartbeat receipt",
            fg.heartbeats_missed_total as f64,
            "packets",
            fg.heartbeats_missed_total == fewest,
        ));
        // "one would predict that τ2 should not miss any deadlines until its
        // execution time exceeds 1.2 msec ... consistent with Fig. 7".
        // The prediction is computed here (probe curve of the Foreground
        // configuration → fitted hyperbola → τ1 + τD through RTA), but its
        // level is not independent of the paper: the per-ping cost of the
        // scenarios (icmp_echo) was calibrated so that τD loads the CPU by
        // ~0.68 at 10 ms, a figure read back from this very 1.2 ms (10 − 2
        // − 1.2 = 6.8 ms of 10). So it is shown, not checked; what is
        // checked is that the simulated τ2 starts missing just above the
        // analysis' own prediction (safe and within one sweep step).
        let first_miss = fg.points.iter().find(|p| p.tau2_misses > 0).map(|p| p.e2_ns);
        rows.push(Row::info(
            "Foreground: analysis predicts misses from e2 above (Fig. 10; tauD's per-ping cost was calibrated from this 1.2 ms, so not an independent check)",
            "about 1.2 ms",
            ms(fg.predicted_max_e2_ns),
            "ms",
        ));
        let step = opts_step(&fg.points);
        rows.push(Row::check(
            "Foreground: tau2's first simulated miss at e2 just above the analysis prediction (Fig. 7)",
            "just above 1.2 ms",
            first_miss.map_or(f64::NAN, ms),
            "ms",
            first_miss.is_some_and(|m| m > fg.predicted_max_e2_ns && m <= fg.predicted_max_e2_ns + step),
        ));
        rows.push(Row::check(
            "Sporadic: between Foreground and Background in e2 met (Fig. 7)",
            "between",
            meets(ss),
            "ms",
            meets(fg) <= meets(ss) && meets(ss) <= meets(bg),
        ));
        rows.push(Row::check(
            "Sporadic: between Foreground and Background in heartbeats missed (Fig. 8)",
            "between",
            ss.heartbeats_missed_total as f64,
            "packets",
            fg.heartbeats_missed_total <= ss.heartbeats_missed_total && ss.heartbeats_missed_total <= bg.heartbeats_missed_total,
        ));
        // The paper's vanilla kernel did worse than every other
        // configuration on both counts (§5, Figs. 7-8), which it puts down
        // to rare long blocks of preemption (§4, "batching" under NAPI).
        // The model has neither, so its vanilla softirqs at IRQ exit never
        // fall behind: shown, not checked, so that the table says so.
        let others = || four.iter().copied().filter(|c| c.name != Configuration::Traditional);
        let most_lost = others().map(|c| c.heartbeats_missed_total).max().unwrap_or(0);
        let least_met = others().map(meets).fold(f64::INFINITY, f64::min);
        // Scored (issue 53): the paper's ordering is a result the model
        // does not reproduce; a row that says so is still a failed check.
        let verdict = |held: bool| if held { "reproduced" } else { "not reproduced: no long kernel blocks modelled" };
        let lost_most = tr.heartbeats_missed_total > most_lost;
        rows.push(Row::check(
            format!(
                "Traditional: more heartbeats lost than the other configurations (Fig. 8, a direction only; {}; the most of the others: {most_lost})",
                verdict(lost_most)
            ),
            "higher, nearly constant",
            tr.heartbeats_missed_total as f64,
            "packets",
            lost_most,
        ));
        let misses_first = meets(tr) < least_met;
        rows.push(Row::check(
            format!(
                "Traditional: tau2 misses from a lower e2 than the other configurations (Fig. 7, a direction only; {}; the lowest of the others: {least_met:.1} ms)",
                verdict(misses_first)
            ),
            "lowest e2 met",
            meets(tr),
            "ms",
            misses_first,
        ));
    }
}

/// The e2 step of a sweep (1 ms if it has fewer than two points).
fn opts_step(points: &[SweepPoint]) -> Nanos {
    match points {
        [a, b, ..] => b.e2_ns - a.e2_ns,
        _ => MS,
    }
}

/// Load of τ1 (refined bound, eq. 9) at `window`, for the Fig. 9/10 plots.
pub fn tau1_load(window: Nanos) -> f64 {
    irqlab_analysis::demand::periodic_load(DemandBound::Refined, PERIOD, E1, window)
}

/// Load of τ2 with execution time `e2` (eq. 9) at `window`.
pub fn tau2_load(e2: Nanos, window: Nanos) -> f64 {
    irqlab_analysis::demand::periodic_load(DemandBound::Refined, PERIOD, e2, window)
}

/// Keeps curve points for plotting (window in us, load in %).
pub fn plot_points(c: &Curve) -> Vec<(f64, f64)> {
    c.points.iter().map(|p: &CurvePoint| (p.window_ns as f64 / 1e3, p.max_load * 100.0)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embedded_scenarios_parse_and_derive() {
        for p in Probe::ALL {
            Scenario::parse(p.name(), p.scenario()).unwrap();
        }
        for c in Configuration::ALL {
            let (name, sc) = (c.name(), Scenario::parse(c.name(), c.scenario()).unwrap());
            with_tau2_exec(&sc, 3 * MS).unwrap().check().unwrap();
            probe_in_tau2s_place(&sc, false).unwrap().check().unwrap();
            probe_in_tau2s_place(&sc, true).unwrap().check().unwrap();
            assert!(heartbeat_of(&sc).is_some(), "{name}");
        }
    }

    #[test]
    fn prediction_subtracts_tau1_and_the_driver() {
        // No driver: τ2 fits until e2 = 10 − 2.002 ms (to 10 us).
        let none = HyperbolaFit { utilization: 0.0, period_ns: 0 };
        assert_eq!(predicted_max_e2(&none), 7_990_000);
        // A driver taking half the CPU at 10 ms leaves less than 3 ms.
        let half = HyperbolaFit { utilization: 0.5, period_ns: MS };
        let e = predicted_max_e2(&half);
        assert!(e < 3 * MS && e > MS, "{e}");
    }
}
