//! `irqlab control bh-budget DEV`: the BH-threshold paper's Bottom Half
//! Scheduler (`docs/papers.md` §1) on a live threaded-NAPI device. The live
//! policy pattern: a monitor → the shared decision code → an actuator.
//!
//! - **Monitor** (tracepoints only; this kernel has no kprobes). Per
//!   sampling period k: C(k), the NAPI kthreads' on-CPU time in the period
//!   (`monitor::thread::ThreadWatch::ran_ns`, the scheduler's runtime
//!   clock); P(k), the packets their polls processed (`napi:napi_poll`'s
//!   `work`, `monitor::napi`); N(k), the packets left pending, by a proxy
//!   (below).
//! - **Decision**: [`LiveController`] feeds (C, P, N) to Algorithm 1,
//!   `irqlab_policy::bh_threshold::ThresholdController`, the code the
//!   simulator's `bh-threshold` policy runs, and gets T(k+1).
//! - **Actuator** ([`Enforce`]): the kthreads may run T(k+1) in period
//!   k+1; the rest stays in the ring, polled first next period (the paper's
//!   pending-queue controller).
//!   - `fifo` (default): the controller thread (SCHED_FIFO 99, off the
//!     kthreads' CPU, woken by the thread watch's program at the end of
//!     the first NAPI poll after which they have run T(k+1), and at the
//!     period's end, see `hold_period`) keeps the kthreads at SCHED_FIFO
//!     `high` until they have run T(k+1) in the period, then drops them to
//!     SCHED_IDLE until it ends (Linux cannot suspend a kthread; SCHED_IDLE
//!     runs it only where nothing else wants the CPU, as the sporadic
//!     server's default low level). How long they ran past the threshold
//!     before the drop took effect is the reaction latency, per period; a
//!     poll runs with bottom halves off, so the poll in progress then runs
//!     to its end (`ran_on_ns`) before the kthread leaves the CPU.
//!   - `deadline`: SCHED_DEADLINE, runtime = T(k+1), deadline = period =
//!     the sampling period, changed in place each period (`sched_setattr`;
//!     the journal restores the kthread's own setting at the end). The
//!     kernel enforces a runtime at the scheduler tick unless the
//!     HRTICK_DL scheduler feature is on (settable only in debugfs); on
//!     this machine (HZ=250, kernel locked down in integrity mode, so
//!     debugfs refuses every read and write and HRTICK_DL stays off) a few
//!     hundred microseconds per 1 ms period are *not* enforced (a
//!     `deadline:2ms/10ms` NAPI thread under a flood let a 3.9 ms run
//!     through). The report says which ([`DeadlineEnforcement`]);
//!     that is why `fifo` is the default.
//!
//! The pending proxy N(k), read at the end of each period: on veth, the
//! packets left in the receive ring (`ptr_ring` producer − consumer_head)
//! right after the kthreads' last poll of the period; arrivals after that
//! poll are not counted (at most rate × `n_age_ns`, the age the trace
//! records per period), and a ring exactly full reads as empty unless that
//! poll used its whole budget (then it counts as the budget). Elsewhere:
//! the budget when the last poll used its whole budget (the NAPI stays
//! scheduled: at least one more packet, usually a full budget, waits), 0
//! otherwise; a lower bound whose error is the ring's real occupancy. The
//! device's rx counters cannot serve: veth counts a packet as received when
//! it is polled, not when it is queued.
//!
//! Devices without threaded NAPI get it switched on through the journal;
//! a device with no NAPI instance is exit 2, a kernel without threaded NAPI
//! (no `threaded` sysfs file, or a driver that refuses it) exit 3. The
//! issue's `netdev_budget_usecs` fallback is not implemented: it would be
//! a global, per-softirq-run limit, not a per-period budget.

use crate::controller_thread;
use crate::monitor::napi::{NapiWatch, Polls};
use crate::monitor::thread::ThreadWatch;
use irqlab_analysis::format_ns;
use irqlab_host::error::{Error, Result};
use irqlab_host::journal::sched::{self, SchedAttr};
use irqlab_host::journal::threads::Thread;
use irqlab_host::machine::{Debugfs, Machine, MachineContext};
use irqlab_host::privilege::{self, Capability};
use irqlab_host::rt::monotonic_ns;
use irqlab_host::run_end::{EndedBy, RunEnd};
use irqlab_measure::latency::stats::{LatencyStats, StatsSummary};
use irqlab_policy::bh_threshold::ThresholdController;
use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicBool, Ordering};

pub const SCHEMA: &str = "irqlab/bh-budget/v1";
pub const TRACE_SCHEMA: &str = "irqlab/bh-budget-trace/v1";

const MIN_PERIOD_NS: u64 = 100_000;
const MAX_PERIOD_NS: u64 = 1_000_000_000;
/// SCHED_DEADLINE's smallest runtime.
const MIN_DL_RUNTIME_NS: u64 = 1_024;
/// Histogram bucket of the summaries.
const BUCKET_NS: u64 = 1_000;
const MAX_BUCKETS: usize = 20_000;

/// How the threshold is enforced.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Enforce {
    /// SCHED_FIFO `high` until the threshold, SCHED_IDLE after (user space).
    Fifo,
    /// SCHED_DEADLINE runtime = threshold (the kernel; tick-enforced here).
    Deadline,
    /// Nothing enforced: the kthreads keep their own scheduling and the
    /// controller only watches and decides (what the kernel's default does
    /// per period, and what the controller would have asked of it).
    Observe,
}

impl std::str::FromStr for Enforce {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s {
            "fifo" => Ok(Enforce::Fifo),
            "deadline" => Ok(Enforce::Deadline),
            "observe" => Ok(Enforce::Observe),
            other => Err(format!("`{other}`: expected fifo, deadline or observe")),
        }
    }
}

/// What to run, with [`Config::default`]'s defaults (the paper's values).
#[derive(Debug, Clone, Serialize)]
pub struct Config {
    pub dev: String,
    /// The sampling period (paper: 1 ms); 100 us ..= 1 s.
    pub period_ns: u64,
    /// K (paper: 0.25); (0, 1].
    pub gain: f64,
    /// W, periods (paper: 100).
    pub window: usize,
    /// T_min.
    pub min_ns: u64,
    /// T(0) (the simulator's `initial`; default half the period).
    pub initial_ns: Option<u64>,
    /// The cost per packet E(k) assumes when none was processed.
    pub default_cost_ns: u64,
    /// Pin the NAPI kthreads to this CPU (fifo only).
    pub cpu: Option<usize>,
    pub duration_ns: Option<u64>,
    pub enforce: Enforce,
    /// SCHED_FIFO priority below the threshold (fifo).
    pub high: u32,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            dev: String::new(),
            period_ns: 1_000_000,
            gain: 0.25,
            window: 100,
            min_ns: 50_000,
            initial_ns: None,
            default_cost_ns: 5_000,
            cpu: None,
            duration_ns: None,
            enforce: Enforce::Fifo,
            high: 50,
        }
    }
}

impl Config {
    /// T(0): `initial_ns`, or half the period, within [min, period].
    pub fn initial(&self) -> u64 {
        self.initial_ns.unwrap_or(self.period_ns / 2).clamp(self.min_ns, self.period_ns)
    }

    /// Checks the parameters; errors name the flag (exit 2).
    pub fn check(&self) -> Result<()> {
        let bad = |msg: String| Err(Error::Invalid(msg));
        if !(MIN_PERIOD_NS..=MAX_PERIOD_NS).contains(&self.period_ns) {
            return bad(format!("--period {}: must be between 100us and 1s", format_ns(self.period_ns)));
        }
        if !(self.gain.is_finite() && self.gain > 0.0 && self.gain <= 1.0) {
            return bad(format!("--gain {}: must be in (0, 1]", self.gain));
        }
        if self.window == 0 {
            return bad("--window 0: must be at least 1 period".into());
        }
        if self.min_ns < MIN_DL_RUNTIME_NS || self.min_ns > self.period_ns {
            return bad(format!(
                "--min {}: must be between 1.024us and the period ({})",
                format_ns(self.min_ns),
                format_ns(self.period_ns)
            ));
        }
        if let Some(i) = self.initial_ns {
            if i < self.min_ns || i > self.period_ns {
                return bad(format!("--initial {}: must be between --min and --period", format_ns(i)));
            }
        }
        if !(1..=99).contains(&self.high) {
            return bad(format!("--high {}: must be a SCHED_FIFO priority 1..=99", self.high));
        }
        if self.enforce == Enforce::Deadline && self.cpu.is_some() {
            return bad("--cpu with --enforce deadline: a SCHED_DEADLINE thread must be allowed on every CPU of its root domain".into());
        }
        Ok(())
    }
}

/// The observations of one period.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Observation {
    /// C(k), ns.
    pub consumed_ns: u64,
    /// P(k), packets.
    pub processed: u64,
    /// N(k), packets (the proxy).
    pub pending: u64,
}

/// The live adapter: a period's observations in, T(k+1) out. Pure: the
/// shared controller and a period counter.
#[derive(Debug, Clone)]
pub struct LiveController {
    ctrl: ThresholdController,
    k: u64,
}

/// What the adapter decided at the end of a period.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Decision {
    pub k: u64,
    /// T(k), the threshold period k ran under, ns.
    pub threshold_ns: f64,
    /// E(k), ns.
    pub backlog_ns: f64,
    /// T(k+1), ns.
    pub next_ns: f64,
}

impl LiveController {
    pub fn new(config: &Config) -> Self {
        let ctrl =
            ThresholdController::new(config.gain, config.window, config.default_cost_ns, config.min_ns, config.period_ns, config.initial());
        LiveController { ctrl, k: 0 }
    }

    /// The threshold of the current period, ns.
    pub fn threshold_ns(&self) -> f64 {
        self.ctrl.threshold_ns()
    }

    /// Ends the current period with its observations.
    pub fn end_period(&mut self, o: Observation) -> Decision {
        let threshold_ns = self.ctrl.threshold_ns();
        let backlog_ns = self.ctrl.backlog_estimate_ns(o.consumed_ns, o.processed, o.pending);
        let next_ns = self.ctrl.update(o.consumed_ns, o.processed, o.pending);
        let d = Decision { k: self.k, threshold_ns, backlog_ns, next_ns };
        self.k += 1;
        d
    }
}

/// N(k) from the NAPI-poll counters (the module doc's proxy).
pub fn pending_proxy(p: &Polls) -> u64 {
    let budget = if p.last_full { u64::from(p.last_budget) } else { 0 };
    match p.ring_left {
        Some(n) => n.max(budget),
        None => budget,
    }
}

/// One period of the trace.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct PeriodRow {
    pub k: u64,
    /// Start, ns since the run began.
    pub start_ns: u64,
    /// C(k), P(k), N(k).
    pub c_ns: u64,
    pub p: u64,
    pub n: u64,
    /// E(k), T(k), T(k+1), ns.
    pub e_ns: f64,
    pub t_ns: f64,
    pub t_next_ns: f64,
    /// Whether the kthreads were dropped to their low level (fifo).
    pub throttled: bool,
    /// Their time in the period by the controller's count at the drop: at
    /// least T(k). `c_ns`, read at the period's end, can be lower when the
    /// monitor had extrapolated a run whose end it saw late (fifo).
    #[serde(default)]
    pub counted_at_drop_ns: Option<u64>,
    /// How long they ran past T(k) before the drop took effect (fifo).
    pub reaction_ns: Option<u64>,
    /// How long they stayed on the CPU after the drop: the rest of the poll
    /// in progress, which runs with bottom halves off (fifo).
    #[serde(default)]
    pub ran_on_ns: Option<u64>,
    /// How old the pending proxy was at the period's end (since the last poll).
    pub n_age_ns: u64,
    /// How late the controller closed the period.
    pub late_ns: u64,
}

impl PeriodRow {
    /// BH time beyond the threshold, the reaction latency and the rest of
    /// the poll in progress at the drop (ran at the low level, on a CPU
    /// nothing else wanted, or an enforcement miss).
    pub fn beyond_ns(&self) -> u64 {
        self.c_ns.saturating_sub(self.t_ns as u64 + self.reaction_ns.unwrap_or(0) + self.ran_on_ns.unwrap_or(0))
    }
}

/// The `irqlab/bh-budget-trace/v1` document.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Trace {
    pub schema: String,
    pub dev: String,
    pub period_ns: u64,
    pub gain: f64,
    pub window: usize,
    pub min_ns: u64,
    pub enforce: Enforce,
    pub pending_proxy: String,
    pub complete: bool,
    pub periods: Vec<PeriodRow>,
}

/// How SCHED_DEADLINE enforces a runtime here.
#[derive(Debug, Clone, Serialize)]
pub struct DeadlineEnforcement {
    /// CONFIG_HZ, when the kernel's configuration is readable.
    pub hz: Option<u64>,
    /// Whether HRTICK_DL is on (None: debugfs's sched/features not read,
    /// `note` says why: not mounted, or locked down).
    pub hrtick_dl: Option<bool>,
    /// "hrtick" or "tick".
    pub granularity: &'static str,
    pub note: String,
}

impl DeadlineEnforcement {
    /// On `machine`, its debugfs's sched/features read now.
    pub fn of(machine: &Machine) -> Self {
        let hz = machine.hz();
        let lockdown = machine.lockdown();
        let features = match &lockdown.debugfs {
            Debugfs::Readable { mount } => std::fs::read_to_string(std::path::Path::new(mount).join("sched/features")).ok(),
            _ => None,
        };
        let hrtick_dl = features.map(|f| f.split_whitespace().any(|w| w == "HRTICK_DL"));
        let tick =
            hz.map_or("the scheduler tick".to_string(), |hz| format!("the scheduler tick ({} at HZ={hz})", format_ns(1_000_000_000 / hz)));
        let (granularity, note) = if hrtick_dl == Some(true) {
            ("hrtick", "SCHED_DEADLINE runtimes are enforced by a high-resolution timer (HRTICK_DL on)".to_string())
        } else {
            (
                "tick",
                format!(
                    "SCHED_DEADLINE runtimes are enforced only at {tick}: HRTICK_DL is {}; a runtime shorter than a tick is not held",
                    match hrtick_dl {
                        Some(_) => "off".to_string(),
                        None => match lockdown.shuts_debugfs() {
                            Some(true) => format!("off, the default: {} and only debugfs switches it on", lockdown.debugfs_unread()),
                            _ => format!("not read ({}), taken as off (the default)", lockdown.debugfs_unread()),
                        },
                    }
                ),
            )
        };
        DeadlineEnforcement { hz, hrtick_dl, granularity, note }
    }
}

/// How long after a load step the threshold settled.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct LoadStep {
    /// The period the load changed at.
    pub k: u64,
    /// Packets per period before and after (means over `STEP_SPAN`).
    pub p_before: f64,
    pub p_after: f64,
    /// Periods until T stayed within 5% (of the period) of its value at the
    /// end of the stretch; None: it never did.
    pub settled_after: Option<u64>,
}

/// Periods on each side of a load step.
const STEP_SPAN: usize = 50;

/// Mean P over `STEP_SPAN` periods before and from `k`.
fn around(rows: &[PeriodRow], k: usize) -> (f64, f64) {
    let mean_p = |r: &[PeriodRow]| r.iter().map(|r| r.p as f64).sum::<f64>() / r.len().max(1) as f64;
    (mean_p(&rows[k - STEP_SPAN..k]), mean_p(&rows[k..k + STEP_SPAN]))
}

/// A change of half or more (and of at least 5 packets per period).
fn is_step((before, after): (f64, f64)) -> bool {
    (after - before).abs() >= 0.5 * before.max(after) && (after - before).abs() >= 5.0
}

/// The first load step at or after `from`: where the change between the
/// two windows peaks.
fn next_step(rows: &[PeriodRow], from: usize) -> Option<usize> {
    let last = rows.len().checked_sub(STEP_SPAN)?;
    let first = (from.max(STEP_SPAN)..=last).find(|&k| is_step(around(rows, k)))?;
    let change = |k: usize| {
        let (b, a) = around(rows, k);
        (a - b).abs()
    };
    (first..=last.min(first + STEP_SPAN)).max_by(|&x, &y| change(x).total_cmp(&change(y)).then(y.cmp(&x)))
}

/// Load steps in the trace (the mean of P over `STEP_SPAN` periods changes
/// by half or more) and how long T took to settle after each.
pub fn load_steps(rows: &[PeriodRow], period_ns: u64) -> Vec<LoadStep> {
    let mut steps = Vec::new();
    let mut from = STEP_SPAN;
    while let Some(k) = next_step(rows, from) {
        let (p_before, p_after) = around(rows, k);
        // The stretch lasts until the next step or the end.
        let end = next_step(rows, k + STEP_SPAN).unwrap_or(rows.len());
        let stretch = &rows[k..end];
        let last = stretch.last().map_or(0.0, |r| r.t_next_ns);
        let band = 0.05 * period_ns as f64;
        let settled_after = (0..stretch.len()).find(|&i| stretch[i..].iter().all(|r| (r.t_next_ns - last).abs() <= band)).map(|i| i as u64);
        steps.push(LoadStep { k: rows[k].k, p_before, p_after, settled_after });
        from = k + STEP_SPAN;
    }
    steps
}

/// Mean, range and percentiles of a per-period figure.
#[derive(Debug, Clone, Serialize)]
pub struct Spread {
    pub mean_ns: f64,
    pub min_ns: u64,
    pub max_ns: u64,
    pub p50_ns: Option<u64>,
    pub p99_ns: Option<u64>,
}

fn spread(values: impl Iterator<Item = u64>) -> Spread {
    let mut s = LatencyStats::new();
    let (mut sum, mut n, mut min, mut max) = (0u128, 0u64, u64::MAX, 0u64);
    for v in values {
        s.record(v);
        sum += u128::from(v);
        n += 1;
        min = min.min(v);
        max = max.max(v);
    }
    Spread {
        mean_ns: if n > 0 { sum as f64 / n as f64 } else { 0.0 },
        min_ns: if n > 0 { min } else { 0 },
        max_ns: max,
        p50_ns: s.quantile_ns(0.5),
        p99_ns: s.quantile_ns(0.99),
    }
}

/// The figures of a trace.
#[derive(Debug, Clone, Serialize)]
pub struct Figures {
    pub periods: u64,
    /// BH (NAPI kthread) time per millisecond.
    pub bh_per_ms: Spread,
    pub threshold: Spread,
    pub packets: u64,
    pub packets_per_s: f64,
    /// Periods whose BH time exceeded T(k) by more than that period's
    /// reaction latency and ran-on time ([`PeriodRow::beyond_ns`]) by more
    /// than 1 us, and their fraction.
    pub beyond_threshold: u64,
    pub beyond_fraction: f64,
    pub throttled: u64,
    /// How long the kthreads ran past the threshold before a drop (fifo).
    pub reaction: StatsSummary,
    /// How long they stayed on the CPU after a drop (the poll in progress).
    pub ran_on: StatsSummary,
    pub load_steps: Vec<LoadStep>,
}

impl Figures {
    pub fn of(rows: &[PeriodRow], period_ns: u64) -> Figures {
        let per_ms = |ns: u64| (u128::from(ns) * 1_000_000 / u128::from(period_ns.max(1))) as u64;
        let (mut reaction, mut ran_on) = (LatencyStats::new(), LatencyStats::new());
        for r in rows {
            if let Some(v) = r.reaction_ns {
                reaction.record(v);
            }
            if let Some(v) = r.ran_on_ns {
                ran_on.record(v);
            }
        }
        let packets: u64 = rows.iter().map(|r| r.p).sum();
        let span_s = rows.len() as f64 * period_ns as f64 / 1e9;
        // More than the figures' 1 us resolution (the drop's and the
        // switch's timestamps come from two clocks' reads).
        let beyond = rows.iter().filter(|r| r.beyond_ns() > BUCKET_NS).count() as u64;
        Figures {
            periods: rows.len() as u64,
            bh_per_ms: spread(rows.iter().map(|r| per_ms(r.c_ns))),
            threshold: spread(rows.iter().map(|r| r.t_ns as u64)),
            packets,
            packets_per_s: if span_s > 0.0 { packets as f64 / span_s } else { 0.0 },
            beyond_threshold: beyond,
            beyond_fraction: if rows.is_empty() { 0.0 } else { beyond as f64 / rows.len() as f64 },
            throttled: rows.iter().filter(|r| r.throttled).count() as u64,
            reaction: reaction.summary(BUCKET_NS, MAX_BUCKETS),
            ran_on: ran_on.summary(BUCKET_NS, MAX_BUCKETS),
            load_steps: load_steps(rows, period_ns),
        }
    }
}

/// The `irqlab/bh-budget/v1` summary.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub schema: &'static str,
    pub config: Config,
    pub initial_ns: u64,
    pub threads: Vec<Thread>,
    pub enforce: Enforce,
    pub deadline_enforcement: DeadlineEnforcement,
    pub pending_proxy: String,
    /// Threaded NAPI was off and was switched on for the run.
    pub switched_threaded_on: bool,
    pub figures: Figures,
    /// SCHED_DEADLINE changes the kernel refused (admission control).
    pub deadline_refusals: u64,
    /// Periods the controller closed a whole period or more late (vCPU stalls).
    pub late_periods: u64,
    pub lost_events: u64,
    pub held_ns: u64,
    /// What the controller itself cost.
    pub overhead: Overhead,
    pub ended_by: EndedBy,
    pub complete: bool,
    pub machine: MachineContext,
}

/// The controller's own cost: the CPU time of its thread (the monitor's
/// ring and counters read, Algorithm 1, the actuator's calls; the BPF
/// programs themselves run in the watched threads' context and are not in
/// it), per second held, and each `sched_setattr` round trip.
#[derive(Debug, Clone, Serialize)]
pub struct Overhead {
    /// The controller thread's CPU time (`controller_cpu_ns`,
    /// `controller_us_per_s`, `cpu_share`).
    #[serde(flatten)]
    pub controller: controller_thread::Overhead,
    pub setattr: StatsSummary,
    /// How many times the controller woke per closed period (its timer
    /// looks at the kthreads' time and the period's end): each wake-up is
    /// an hrtimer, a VM exit in a guest, and most of its cost when idle.
    pub wakeups_per_period: f64,
}

/// The summary and the per-period trace of a run.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub report: Report,
    pub trace: Trace,
}

/// What `control bh-budget` needs before it touches anything: CAP_SYS_NICE
/// for the kthreads' scheduling and the BPF prerequisites of its monitors.
pub fn check_prerequisites() -> Result<()> {
    privilege::require(&[Capability::SysNice], "change the NAPI kthreads' scheduling (sched_setattr)")?;
    privilege::require_bpf("watch the NAPI kthreads (sched_switch, napi_poll)")
}

/// Doctor's note: how `--enforce deadline` would be enforced on `machine`.
pub fn readiness_note(machine: &Machine) -> Option<String> {
    let d = DeadlineEnforcement::of(machine);
    (d.granularity == "tick").then(|| format!("--enforce deadline is tick-enforced here ({}); the default, fifo, is not", d.note))
}

/// Runs the controller on `config.dev` until `stop`, `--duration`, or the
/// kthreads exit; `on_period` sees each period's row. Every change goes
/// through the journal and is restored on return (and at exit).
pub fn run(config: &Config, stop: &AtomicBool, on_period: impl FnMut(&PeriodRow) + Send) -> Result<Outcome> {
    config.check()?;
    let start_attr = match config.enforce {
        Enforce::Fifo => Some(SchedAttr::Fifo { priority: config.high }),
        Enforce::Deadline => Some(deadline_attr(config.initial() as f64, config.period_ns)),
        Enforce::Observe => None,
    };
    let machine = Machine::read();
    let context = MachineContext::of(&machine);
    let crate::napi_layout::HeldRun { result: looped, cost, threads, held_ns, switched_threaded_on } =
        crate::napi_layout::control("bh-budget", &config.dev, config.cpu, start_attr, check_prerequisites, |threads| {
            control_loop(config, threads, stop, on_period)
        })?;
    let figures = Figures::of(&looped.rows, config.period_ns);
    // The one rule (`irqlab_host::run_end`); the trace says so too.
    let complete = looped.ended_by.complete(config.duration_ns, looped.lost_events);
    let proxy = proxy_name(looped.veth);
    let wakeups_per_period = looped.wakeups as f64 / looped.rows.len().max(1) as f64;
    let trace = Trace {
        schema: TRACE_SCHEMA.into(),
        dev: config.dev.clone(),
        period_ns: config.period_ns,
        gain: config.gain,
        window: config.window,
        min_ns: config.min_ns,
        enforce: config.enforce,
        pending_proxy: proxy.clone(),
        complete,
        periods: looped.rows,
    };
    let report = Report {
        schema: SCHEMA,
        config: config.clone(),
        initial_ns: config.initial(),
        threads,
        enforce: config.enforce,
        deadline_enforcement: DeadlineEnforcement::of(&machine),
        pending_proxy: proxy,
        switched_threaded_on,
        figures,
        deadline_refusals: looped.deadline_refusals,
        late_periods: looped.late_periods,
        lost_events: looped.lost_events,
        held_ns,
        overhead: Overhead { controller: controller_thread::Overhead::of(cost), setattr: looped.setattr.clone(), wakeups_per_period },
        ended_by: looped.ended_by,
        complete,
        machine: context,
    };
    Ok(Outcome { report, trace })
}

fn proxy_name(veth: bool) -> String {
    if veth {
        "veth ring occupancy after the last poll of the period (arrivals since not counted), at least the budget when that poll was full"
            .into()
    } else {
        "the poll budget when the last poll of the period used it whole, else 0 (a lower bound)".into()
    }
}

/// SCHED_DEADLINE with runtime `t` (at least the kernel's minimum).
fn deadline_attr(t: f64, period_ns: u64) -> SchedAttr {
    let runtime_ns = (t as u64).clamp(MIN_DL_RUNTIME_NS, period_ns);
    SchedAttr::Deadline { runtime_ns, deadline_ns: period_ns, period_ns }
}

struct Looped {
    rows: Vec<PeriodRow>,
    ended_by: EndedBy,
    veth: bool,
    deadline_refusals: u64,
    late_periods: u64,
    lost_events: u64,
    setattr: StatsSummary,
    wakeups: u64,
}

/// The kthreads' state as the controller sees and sets it.
struct Kthreads<'a> {
    threads: &'a [Thread],
    tids: Vec<u32>,
    at_high: bool,
    /// How long each `sched_setattr` took.
    setattr: LatencyStats,
    /// How many times the controller's timer woke it.
    wakeups: u64,
}

impl Kthreads<'_> {
    fn ran(&self, watch: &ThreadWatch, now: u64) -> Result<u64> {
        let mut sum = 0;
        for &tid in &self.tids {
            sum += watch.ran_ns(tid, now)?.unwrap_or(0);
        }
        Ok(sum)
    }

    /// How long after the watch's mark `since` they all had left the CPU
    /// once (each its first switch out after it); None while one has not.
    fn left_after_mark(&self, watch: &ThreadWatch, since: u64) -> Result<Option<u64>> {
        let mut last = 0;
        for &tid in &self.tids {
            match watch.left_after_mark(tid)? {
                Some(at) => last = last.max(at.saturating_sub(since)),
                None if watch.running(tid)? => return Ok(None),
                None => {}
            }
        }
        Ok(Some(last))
    }

    fn any_running(&self, watch: &ThreadWatch) -> Result<bool> {
        for &tid in &self.tids {
            if watch.running(tid)? {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Sets every live kthread to `attr`; false when none is left.
    fn set(&mut self, attr: SchedAttr) -> Result<bool> {
        let mut any = false;
        for t in self.threads {
            let t0 = monotonic_ns();
            let done = sched::set(t.tid, attr);
            self.setattr.record(monotonic_ns() - t0);
            match done {
                Ok(()) => any = true,
                Err(_) if !t.alive() => {}
                Err(e) => return Err(e),
            }
        }
        Ok(any)
    }
}

/// What the controller did within a period (fifo).
#[derive(Debug, Default)]
struct Throttle {
    /// The kthreads' time in the period by the controller's count when it
    /// dropped them (at least T(k): the rule).
    counted_ns: Option<u64>,
    /// How long the kthreads ran past T(k) until the drop took effect.
    reaction_ns: Option<u64>,
    /// How long they stayed on the CPU after the drop (the rest of a poll:
    /// a threaded NAPI poll runs with bottom halves off, not preemptible).
    ran_on_ns: Option<u64>,
}

/// How many periods pass between two looks whether the kthreads still
/// exist (a device removed mid-run ends the run at the next look).
const LIVENESS_PERIODS: usize = 64;

/// Waits out one period, dropping the kthreads to SCHED_IDLE once they ran
/// `t` in it (fifo); returns the time it ended (early when stopped).
///
/// Woken by the kernel, not a timer: the thread watch's program compares
/// the kthreads' time with `base_ran + t` at the end of each of their NAPI
/// polls and wakes the controller once it is reached (`signal_at`); a poll
/// runs with bottom halves off, so its end is the first moment a drop can
/// take effect. The controller wakes once for that and once at the
/// period's end: the timer-driven controller before it slept (T − used) /
/// kthreads and looked again, several wake-ups a period, most of its cost
/// (issue 42; docs/performance.md). After a drop it sleeps to the period's
/// end: the kernel keeps when each kthread first left the CPU after the
/// drop (the watch's mark).
fn hold_period(
    config: &Config,
    k: &mut Kthreads,
    watch: &mut ThreadWatch,
    stop: &AtomicBool,
    base_ran: u64,
    t: f64,
    end: u64,
) -> Result<(u64, Throttle)> {
    let mut th = Throttle::default();
    let mut dropped_at = None;
    let enforcing = config.enforce == Enforce::Fifo && k.at_high;
    watch.signal_at(if enforcing { base_ran + t.ceil() as u64 } else { 0 });
    let mut now = monotonic_ns();
    while now < end && !stop.load(Ordering::SeqCst) {
        if config.enforce == Enforce::Fifo && k.at_high {
            let used = k.ran(watch, now)?.saturating_sub(base_ran);
            if used as f64 >= t {
                th.counted_ns = Some(used);
                k.set(SchedAttr::Idle)?;
                k.at_high = false;
                let after = monotonic_ns();
                // The poll in progress at the drop runs on with bottom
                // halves off: the kernel notes when each kthread leaves.
                watch.mark(after);
                th.reaction_ns = Some(k.ran(watch, after)?.saturating_sub(base_ran).saturating_sub(t as u64));
                if k.any_running(watch)? {
                    dropped_at = Some(after);
                } else {
                    th.ran_on_ns = Some(0);
                }
                now = after;
                continue;
            }
            // Until the kernel says the sum was reached, or the period ends.
            crate::monitor::wait_readable(watch.ring_epoll_fd(), end - now)?;
            watch.drain()?;
        } else {
            irqlab_host::rt::sleep_until_ns(end);
        }
        k.wakeups += 1;
        now = monotonic_ns();
    }
    // Still on the CPU at the period's end: nothing else wanted it.
    if let (Some(d), None) = (dropped_at, th.ran_on_ns) {
        th.ran_on_ns = Some(k.left_after_mark(watch, d)?.unwrap_or_else(|| now.min(end).saturating_sub(d)));
    }
    Ok((now, th))
}

/// Per period: enforce T(k), then close the period and ask the controller.
fn control_loop(config: &Config, threads: &[Thread], stop: &AtomicBool, mut on_period: impl FnMut(&PeriodRow)) -> Result<Looped> {
    let tids: Vec<u32> = threads.iter().map(|t| t.tid as u32).collect();
    let mut tw_storage = crate::monitor::thread::Storage::default();
    let mut watch = ThreadWatch::start(&mut tw_storage, &tids)?;
    // Only the totals and the budget signal are read: no event may wake
    // the controller for every switch of a kthread the flood wakes
    // thousands of times a second.
    watch.silence();
    let mut nw_storage = crate::monitor::napi::Storage::default();
    let napi = NapiWatch::start(&mut nw_storage, &tids)?;
    let mut k = Kthreads { threads, tids, at_high: true, setattr: LatencyStats::new(), wakeups: 0 };
    let mut ctl = LiveController::new(config);
    let period = config.period_ns;
    let run = RunEnd::start(stop, config.duration_ns);
    let run_start = run.started_ns();
    let mut start = run_start;
    let mut base_ran = k.ran(&watch, start)?;
    let mut base_work = napi.totals()?.work;
    let mut out = Looped {
        rows: Vec::new(),
        ended_by: EndedBy::Stopped, // the loop's end sets it
        veth: false,
        deadline_refusals: 0,
        late_periods: 0,
        lost_events: 0,
        setattr: LatencyStats::new().summary(BUCKET_NS / 10, MAX_BUCKETS),
        wakeups: 0,
    };
    let mut applied_dl = config.initial();
    controller_thread::control_starts();
    loop {
        let end = start + period;
        let t = ctl.threshold_ns();
        if config.enforce == Enforce::Deadline {
            let want = deadline_attr(t, period);
            if let SchedAttr::Deadline { runtime_ns, .. } = want {
                if runtime_ns.abs_diff(applied_dl) >= 1_000 {
                    match k.set(want) {
                        Ok(_) => applied_dl = runtime_ns,
                        Err(Error::Invalid(_)) => out.deadline_refusals += 1,
                        Err(e) => return Err(e),
                    }
                }
            }
        } else if config.enforce == Enforce::Fifo && !k.at_high {
            k.set(SchedAttr::Fifo { priority: config.high })?;
            k.at_high = true;
        }
        let (now, throttle) = hold_period(config, &mut k, &mut watch, stop, base_ran, t, end)?;
        // Stopped mid-period, the partial period is not a sample.
        if now >= end {
            let polls = napi.totals()?;
            let ran = k.ran(&watch, now)?;
            out.veth |= polls.ring_left.is_some();
            let obs = Observation {
                consumed_ns: ran.saturating_sub(base_ran),
                processed: polls.work.saturating_sub(base_work),
                pending: pending_proxy(&polls),
            };
            let d = ctl.end_period(obs);
            let late_ns = now - end;
            let row = PeriodRow {
                k: d.k,
                start_ns: start - run_start,
                c_ns: obs.consumed_ns,
                p: obs.processed,
                n: obs.pending,
                e_ns: d.backlog_ns,
                t_ns: d.threshold_ns,
                t_next_ns: d.next_ns,
                throttled: throttle.reaction_ns.is_some(),
                counted_at_drop_ns: throttle.counted_ns,
                reaction_ns: throttle.reaction_ns,
                ran_on_ns: throttle.ran_on_ns,
                n_age_ns: if polls.last_ts_ns > 0 { now.saturating_sub(polls.last_ts_ns) } else { 0 },
                late_ns,
            };
            on_period(&row);
            out.rows.push(row);
            (base_ran, base_work) = (ran, polls.work);
            // A stall of a whole period or more: start the grid again from now.
            start = if late_ns >= period {
                out.late_periods += 1;
                now
            } else {
                end
            };
        }
        // Reading /proc for each kthread every period was about 2% of a CPU
        // at 1 ms periods (an idle run: 8.0% -> 6.0%, setup counted in;
        // issue 42): look every LIVENESS_PERIODS.
        let look = out.rows.len().is_multiple_of(LIVENESS_PERIODS);
        if let Some(why) = run.ended(|| (look && threads.iter().all(|t| !t.alive())).then_some(EndedBy::ThreadsExited)) {
            out.ended_by = why;
            break;
        }
    }
    out.lost_events = watch.lost_events();
    out.setattr = k.setattr.summary(BUCKET_NS / 10, MAX_BUCKETS);
    out.wakeups = k.wakeups;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const US: u64 = 1_000;
    const MS: u64 = 1_000_000;

    fn config() -> Config {
        Config { dev: "x".into(), ..Config::default() }
    }

    #[test]
    fn bad_parameters_name_their_flag() {
        for (c, says) in [
            (Config { period_ns: 50 * US, ..config() }, "--period 50us: must be between 100us and 1s"),
            (Config { period_ns: 2_000 * MS, ..config() }, "--period 2s"),
            (Config { gain: 0.0, ..config() }, "--gain 0: must be in (0, 1]"),
            (Config { gain: 1.5, ..config() }, "--gain 1.5"),
            (Config { gain: f64::NAN, ..config() }, "--gain NaN"),
            (Config { window: 0, ..config() }, "--window 0"),
            (Config { min_ns: 2 * MS, ..config() }, "--min 2ms"),
            (Config { initial_ns: Some(10 * US), ..config() }, "--initial 10us"),
            (Config { high: 0, ..config() }, "--high 0"),
            (Config { enforce: Enforce::Deadline, cpu: Some(1), ..config() }, "--cpu with --enforce deadline"),
        ] {
            let e = c.check().unwrap_err();
            assert_eq!(e.exit_code(), 2, "{says}");
            assert!(e.to_string().starts_with(says), "{e} (wanted {says})");
        }
        assert!(config().check().is_ok());
        assert!(Config { period_ns: 100 * US, min_ns: 100 * US, ..config() }.check().is_ok());
        assert!(Config { period_ns: 1_000 * MS, gain: 1.0, ..config() }.check().is_ok());
        assert_eq!(config().initial(), 500 * US);
    }

    #[test]
    fn a_period_row_follows_algorithm_1() {
        let mut c = LiveController::new(&config());
        // First period: a one-sample window gives dC = dE = 0: T stays.
        let d = c.end_period(Observation { consumed_ns: 400 * US, processed: 80, pending: 10 });
        assert_eq!((d.k, d.threshold_ns, d.next_ns), (0, 500_000.0, 500_000.0));
        assert!((d.backlog_ns - 50_000.0).abs() < 1e-9, "E = 10·400us/80 = 50us: {}", d.backlog_ns);
        // Second: C 600 us (dC +100 us), E = 20·600/100 = 120 us (dE +35 us).
        let d = c.end_period(Observation { consumed_ns: 600 * US, processed: 100, pending: 20 });
        assert_eq!(d.k, 1);
        assert!((d.next_ns - (500_000.0 + 0.25 * (35_000.0 - 100_000.0))).abs() < 1e-6, "{}", d.next_ns);
        assert_eq!(c.threshold_ns(), d.next_ns);
        // No packet processed: E uses the default cost (5 us).
        let d = c.end_period(Observation { consumed_ns: 0, processed: 0, pending: 4 });
        assert!((d.backlog_ns - 20_000.0).abs() < 1e-9);
    }

    #[test]
    fn the_pending_proxy_prefers_the_ring() {
        let p = Polls { last_full: true, last_budget: 64, ..Polls::default() };
        assert_eq!(pending_proxy(&p), 64);
        assert_eq!(pending_proxy(&Polls { ring_left: Some(200), ..p }), 200);
        // A full ring reads as empty: the full poll says otherwise.
        assert_eq!(pending_proxy(&Polls { ring_left: Some(0), ..p }), 64);
        assert_eq!(pending_proxy(&Polls { last_full: false, ..p }), 0);
    }

    fn row(k: u64, c: u64, p: u64, t: f64, reaction: Option<u64>) -> PeriodRow {
        PeriodRow {
            k,
            start_ns: k * MS,
            c_ns: c,
            p,
            n: 0,
            e_ns: 0.0,
            t_ns: t,
            t_next_ns: t,
            throttled: reaction.is_some(),
            counted_at_drop_ns: reaction.map(|_| c),
            reaction_ns: reaction,
            ran_on_ns: reaction.map(|_| 0),
            n_age_ns: 0,
            late_ns: 0,
        }
    }

    #[test]
    fn figures_per_ms_throughput_and_beyond_the_reaction() {
        let rows = [
            row(0, 400 * US, 100, 500_000.0, None),
            row(1, 520 * US, 130, 500_000.0, Some(20 * US)),
            row(2, 560 * US, 140, 500_000.0, Some(20 * US)),
            row(3, 300 * US, 50, 500_000.0, None),
        ];
        let f = Figures::of(&rows, MS);
        assert_eq!(f.periods, 4);
        assert_eq!((f.bh_per_ms.min_ns, f.bh_per_ms.max_ns), (300 * US, 560 * US));
        assert!((f.bh_per_ms.mean_ns - 445_000.0).abs() < 1e-6);
        assert_eq!(f.packets, 420);
        assert!((f.packets_per_s - 105_000.0).abs() < 1e-6, "420 packets in 4 ms");
        // Only period 2 ran beyond T + its reaction (560 > 520).
        assert_eq!((f.beyond_threshold, f.throttled), (1, 2));
        assert_eq!(rows[2].beyond_ns(), 40 * US);
        // A 0.5 ms period: BH time is scaled to per-ms.
        assert_eq!(Figures::of(&rows[..1], 500 * US).bh_per_ms.max_ns, 800 * US);
    }

    #[test]
    fn a_load_step_and_the_settling_time() {
        let mut rows = Vec::new();
        for k in 0..300u64 {
            let (p, t) = if k < 100 {
                (20, 200_000.0)
            } else {
                // The load triples at k = 100; T climbs for 30 periods, then holds.
                (60, 200_000.0 + 10_000.0 * (k - 99).min(30) as f64)
            };
            rows.push(PeriodRow { t_next_ns: t, ..row(k, 100 * US, p, t, None) });
        }
        let steps = load_steps(&rows, MS);
        assert_eq!(steps.len(), 1, "{steps:?}");
        assert_eq!(steps[0].k, 100);
        assert_eq!((steps[0].p_before, steps[0].p_after), (20.0, 60.0));
        // Within 50 us of the final 500 us from T = 450 us on: k = 124.
        assert_eq!(steps[0].settled_after, Some(24));
        assert!(load_steps(&rows[..100], MS).is_empty());
    }

    #[test]
    fn the_trace_round_trips() {
        let t = Trace {
            schema: TRACE_SCHEMA.into(),
            dev: "irqlab-b".into(),
            period_ns: MS,
            gain: 0.25,
            window: 100,
            min_ns: 50 * US,
            enforce: Enforce::Fifo,
            pending_proxy: proxy_name(true),
            complete: false,
            periods: vec![row(0, 1, 2, 3.0, Some(4))],
        };
        let text = serde_json::to_string(&t).unwrap();
        assert!(text.contains("\"schema\":\"irqlab/bh-budget-trace/v1\"") && text.contains("\"enforce\":\"fifo\""), "{text}");
        let back: Trace = serde_json::from_str(&text).unwrap();
        assert_eq!(back.periods, t.periods);
    }
}
