//! The `irqlab/survey/v1` document: what the survey measured (every
//! sub-measurement embedded, so the file alone rebuilds the page), which
//! steps ran or were skipped and why, and the findings and recommendations
//! derived from the numbers.

use irqlab_analysis::curve::Curve;
use irqlab_analysis::fit::{BaselineUse, HyperbolaFit};
use irqlab_host::machine::MachineContext;
use irqlab_measure::latency::LatencyReport;
pub use irqlab_measure::probe::{GapSources, Source, SourceKind, SourceTotal, WindowSources};
use irqlab_measure::stimulus::StimulusReport;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

pub const SCHEMA: &str = "irqlab/survey/v1";

/// The whole survey.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Survey {
    /// Always [`SCHEMA`].
    pub schema: String,
    /// False when the survey was stopped (Ctrl-C) or a step failed: what is
    /// here was measured, the rest was not.
    pub complete: bool,
    /// Start time, seconds since the Unix epoch.
    pub started_unix_s: u64,
    pub elapsed_ns: u64,
    pub options: Options,
    /// The earlier survey this one was compared with (`--compare FILE`,
    /// or `--baseline`): the path of its `survey.json`, as an absolute
    /// path when it could be made one. Optional: surveys run without
    /// `--compare`, and `irqlab/survey/v1` documents from before the field
    /// existed, have none and still parse (a new field keeps the version,
    /// `docs/conventions.md`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compared_with: Option<String>,
    pub machine: MachineContext,
    /// `irqlab doctor`'s readiness per live command.
    pub readiness: Vec<Readiness>,
    /// Changes killed irqlab runs left on this machine (`irqlab control status`).
    pub leftovers: Vec<String>,
    /// Every step in order, with its outcome.
    pub steps: Vec<Step>,
    /// Per surveyed CPU: the interference curves, idle and under each load.
    pub cpus: Vec<CpuSurvey>,
    /// Timer latency (cyclictest's method) on the surveyed CPUs, idle and
    /// under each load.
    pub latency: Vec<LatencyPhase>,
    /// Stimulus latency on the testbed (softirq and task paths).
    pub stimulus: Vec<StimulusPhase>,
    /// BPF accounting during each load: who was robbed, who was served.
    pub accounting: Vec<AccountingPhase>,
    /// The user's task set checked against each CPU's measured driver load
    /// (only with `--taskset`).
    pub schedulability: Vec<TasksetCheck>,
    pub findings: Vec<Finding>,
    pub recommendations: Vec<Recommendation>,
    pub verdict: Verdict,
    /// The threads the curves' sources name, looked up when the
    /// measurements were done: a thread whose name no other thread shares
    /// is selected by `comm:NAME` in the profile, which finds it again
    /// after a restart or a reboot; the others by `pid:N`, this boot's
    /// (issue 51). Absent in surveys from before it was recorded.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub thread_names: Vec<ThreadName>,
    /// The boot the survey ran in (`/proc/sys/kernel/random/boot_id`): a
    /// `pid:N` in its profile is that boot's. Absent in older surveys.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub boot_id: Option<String>,
    /// Where the recommendations were written as a profile
    /// (`DIR/profile.toml`, `irqlab control apply`). Absent in surveys
    /// written before profiles existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<String>,
    /// With `--compare BEFORE` and a prediction of BEFORE's profile
    /// (`irqlab sim --from-survey BEFORE --profile P`, or `--predicted`):
    /// before, predicted after and measured after per CPU and load.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prediction: Option<crate::predicted::PredictionBeside>,
}

/// A thread a curve names, as /proc showed it after the measurements.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ThreadName {
    pub pid: u32,
    pub comm: String,
    /// No other thread had this name.
    pub unique: bool,
    /// A kernel thread (a `comm:` MATCH takes one only on purpose:
    /// the profile's `all_matching`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub kernel: bool,
}

impl Survey {
    /// How a profile selects thread `pid` on a later boot: `comm:NAME`
    /// when its name was unique here, else `pid:N` (this boot's only).
    pub fn thread_selector(&self, pid: u32) -> String {
        match self.thread_names.iter().find(|t| t.pid == pid && t.unique) {
            Some(t) => format!("comm:{}", glob::Pattern::escape(&t.comm)),
            None => format!("pid:{pid}"),
        }
    }

    /// Whether thread `pid` was a kernel thread.
    pub fn is_kernel_thread(&self, pid: u32) -> bool {
        self.thread_names.iter().any(|t| t.pid == pid && t.kernel)
    }
}

/// What was asked for, with the defaults resolved.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Options {
    pub cpus: Vec<usize>,
    /// The loads measured besides idle, in order.
    pub loads: Vec<Load>,
    /// The task set file given with `--taskset`, and its text.
    pub taskset: Option<TasksetInput>,
    pub quick: bool,
    /// Length of each interference probe run.
    pub probe_ns: u64,
    /// Length of each timer latency run.
    pub latency_ns: u64,
    /// Length of each stimulus run.
    pub stimulus_ns: u64,
}

/// A task set in `irqlab analyze`'s format.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TasksetInput {
    pub file: String,
    pub text: String,
}

/// What runs beside a measurement.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Load {
    /// Nothing: the idle baseline.
    None,
    /// A UDP flood from testbed host b through the root side's threaded-NAPI
    /// kthread, pinned to the measured CPU at SCHED_FIFO 50 (or where and
    /// as a profile in force keeps it).
    Net,
    /// One SCHED_OTHER busy loop per CPU.
    Cpu,
    /// A writer that writes and fdatasyncs a scratch file.
    Disk,
}

impl Load {
    pub fn name(self) -> &'static str {
        match self {
            Load::None => "idle",
            Load::Net => "net",
            Load::Cpu => "cpu",
            Load::Disk => "disk",
        }
    }
}

/// One `irqlab doctor` line.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Readiness {
    pub command: String,
    /// Why it cannot run here; `None`: it can.
    pub missing: Option<String>,
    pub note: Option<String>,
}

/// One step of the survey and how it went.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Step {
    /// e.g. "probe cpu 1 idle", "latency net", "accounting net".
    pub name: String,
    pub status: StepStatus,
    /// Why it was skipped or failed, or what it did.
    pub detail: Option<String>,
    pub elapsed_ns: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StepStatus {
    Done,
    /// Cannot run here (privilege, kernel feature, tool); the rest went on.
    Skipped,
    /// Ran and failed; the rest went on.
    Failed,
    /// Stopped by Ctrl-C; what it measured so far is kept where it can be.
    Interrupted,
}

/// One CPU's interference curves.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CpuSurvey {
    pub cpu: usize,
    /// Idle first, then one per load, in the order measured.
    pub curves: Vec<LoadCurve>,
}

/// The interference probe on one CPU under one load.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LoadCurve {
    pub load: Load,
    pub complete: bool,
    pub duration_ns: u64,
    /// Max (and least) load per window as measured (`irqlab/curve/v1`).
    pub measured: Curve,
    /// Loaded runs: the measured curve minus the idle baseline's floor
    /// (`irqlab fit --baseline`), the load's own share.
    pub attributed: Option<Curve>,
    pub baseline_use: Option<BaselineUse>,
    /// The hyperbola fitted to `attributed` (loaded runs) or to `measured`
    /// (idle), when it could be fitted.
    pub fit: Option<HyperbolaFit>,
    /// Why there is no fit.
    pub fit_error: Option<String>,
    /// Longest single interruption seen.
    pub max_gap_ns: u64,
    /// RT throttling could explain part of the curve (the limit could not
    /// be lifted).
    pub rt_throttled: bool,
    /// The driver threads that carried this load, as set for the run
    /// (e.g. "napi/irqlab-b-8195 FIFO 50 on cpu 1").
    pub driver_threads: Vec<String>,
    /// `irqlab control threads` MATCH for those threads (e.g. "napi:irqlab-b").
    #[serde(default)]
    pub driver_match: Option<String>,
    /// What ran instead of the probe in each window length's max-load
    /// window (of `measured`), or why nothing is known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sources: Option<GapSources>,
    /// Hypervisor steal on the probed CPU during the run (/proc/stat, tick
    /// resolution); `None` in documents from before it was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steal_ns: Option<u64>,
    /// Interrupts the probed CPU took during the run (/proc/interrupts);
    /// `None` in documents from before it was recorded, and when it could
    /// not be (no `LOC:` row, nowhere off the CPU to read it from, a run
    /// too short to hold two samples).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interrupts: Option<InterruptRates>,
}

/// Interrupts per second on one CPU over a probe run, from the counts of
/// /proc/interrupts (`crate::interrupts`). Counts, unlike latencies, mean
/// the same under emulation (TCG) as on hardware.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InterruptRates {
    /// The `LOC:` row, the local timer that carries the scheduler tick:
    /// HZ while the tick runs, about 1/s with `nohz_full` on the CPU and
    /// the probe its only runnable task.
    pub local_timer_per_s: f64,
    /// Every other row with a count per CPU (numbered IRQs, IPIs, NMIs,
    /// ...), together; not ERR and MIS, which are the machine's.
    pub other_per_s: f64,
    /// The rows of `other` that counted anything, per second, by name:
    /// `RES` (rescheduling IPIs), `CAL` (function calls), `IWI` (irq work),
    /// `TLB`, a numbered IRQ as `24 virtio0-input.0`. Absent in older
    /// documents.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub other_by_row: BTreeMap<String, f64>,
    /// The time between the two samples the rates are taken over (inside
    /// the run, so a little shorter than it).
    pub window_ns: u64,
}

impl LoadCurve {
    /// The curve the load is judged by: attributed when there is one.
    pub fn judged(&self) -> &Curve {
        self.attributed.as_ref().unwrap_or(&self.measured)
    }

    /// The probe's mean load: its sources' time (and the unseen beside
    /// them) over the run; `None` without per-source totals.
    pub fn mean_load(&self) -> Option<f64> {
        let s = self.sources.as_ref().filter(|s| s.available && !s.totals.is_empty())?;
        let ns: u64 = s.totals.iter().map(|t| t.ns + t.unseen_ns).sum();
        Some(ns as f64 / self.duration_ns.max(1) as f64)
    }
}

/// Timer latency under one load.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LatencyPhase {
    pub load: Load,
    pub report: LatencyReport,
    /// Each CPU's worst wake-up and what ran in its lateness, from the
    /// flight recorder of `irqlab watch` (issue 52). Absent in surveys
    /// from before it was recorded.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub worst: Vec<WorstWakeUp>,
    /// What the flight recorder ran on, or why it could not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recorder: Option<String>,
}

/// A CPU's worst wake-up of a latency step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorstWakeUp {
    pub cpu: usize,
    pub latency_ns: u64,
    /// What ran between its expiry and its wake-up; None where the
    /// recorder could not run.
    pub cause: Option<irqlab_measure::watch::cause::Cause>,
}

/// Stimulus latency under one load.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StimulusPhase {
    pub load: Load,
    pub report: StimulusReport,
}

/// What the BPF accounting saw during one load (`irqlab measure
/// accounting`), boiled down to what the page shows.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AccountingPhase {
    pub load: Load,
    pub complete: bool,
    pub duration_ns: u64,
    /// Tasks with the most hard-IRQ + softirq time run while they were current.
    pub top_victims: Vec<TaskFigure>,
    /// Tasks with the most softirq time done on their behalf.
    pub top_beneficiaries: Vec<TaskFigure>,
    pub cpus: Vec<CpuFigure>,
}

/// One task's figures over an accounting phase.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TaskFigure {
    /// `comm/tid`.
    pub task: String,
    pub run_ns: u64,
    pub stolen_hardirq_ns: u64,
    pub stolen_softirq_ns: u64,
    pub served_softirq_ns: u64,
    /// The softirq vector that took (or served) the most.
    pub top_vector: Option<String>,
}

/// One CPU's interrupt time over an accounting phase.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CpuFigure {
    pub cpu: usize,
    pub wall_ns: u64,
    pub hardirq_ns: u64,
    pub softirq_ns: u64,
    pub softirq_by_vector_ns: BTreeMap<String, u64>,
}

/// The user's task set on one CPU under one load's measured interference
/// (the idle run's too: `load` is `none` there).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TasksetCheck {
    pub cpu: usize,
    pub load: Load,
    /// With the measured (attributed) curve as the top-priority interferer.
    pub schedulable_as_measured: bool,
    /// Per task: worst response time found by the analysis, or `None` when
    /// it misses.
    pub responses_ns: Vec<(String, Option<u64>)>,
    /// The load's long-run utilisation from the fit (what a server must
    /// give the driver to keep up).
    pub driver_utilization: Option<f64>,
    /// Server budgets tried for the driver thread (see
    /// `findings::schedulability` for how each kind is analysed).
    pub servers: Vec<ServerCheck>,
}

/// One server budget for the driver thread.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ServerCheck {
    #[serde(default)]
    pub kind: ServerKind,
    pub budget_ns: u64,
    pub period_ns: u64,
    /// The task set is schedulable with this server as its top interferer.
    pub schedulable: bool,
    /// budget / period ≥ the driver's fitted utilisation.
    pub keeps_up: bool,
}

/// Which server enforces the driver thread's budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ServerKind {
    /// The kernel's SCHED_DEADLINE (constant-bandwidth server).
    #[default]
    Deadline,
    /// irqlab's live POSIX sporadic server (`irqlab control threads
    /// --policy sporadic:...`): SCHED_FIFO 50 while budget lasts, 1 after.
    Sporadic,
}

/// How bad a finding is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Ok,
    Note,
    Warn,
    Problem,
}

/// One thing the survey found, with the number behind it and the rule.
///
/// `title`, `measured` and `rule` are words for a person; the facts a
/// script (or a test) reads are fields beside them: `interference` and
/// `culprit` for the interference findings, `quiet_cpu` for the quiet-CPU
/// finding. They are optional, so documents written before them still
/// parse (a new field keeps the version, `docs/conventions.md`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Finding {
    /// Stable identifier ("load-cpu1-net", "taskset-cpu1-idle", "quietest-cpu").
    pub id: String,
    pub severity: Severity,
    pub cpu: Option<usize>,
    pub title: String,
    /// The measured number(s), as shown.
    pub measured: String,
    /// The rule that turned the number into this finding.
    pub rule: String,
    /// Interference findings (`load-cpuN-LOAD`): the numbers judged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interference: Option<InterferenceFigures>,
    /// Interference findings that warn, when the probe recorded its gaps'
    /// sources: the source that took the largest share of the worst
    /// window near 1 ms (the one the title names, whatever its share).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub culprit: Option<FindingSource>,
    /// The quiet-CPU finding: every surveyed CPU's score, and which basis
    /// the choice was made on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quiet_cpu: Option<QuietCpu>,
}

impl Finding {
    /// A finding with no structured figures.
    pub fn new(id: String, severity: Severity, cpu: Option<usize>, title: String, measured: String, rule: String) -> Finding {
        Finding { id, severity, cpu, title, measured, rule, interference: None, culprit: None, quiet_cpu: None }
    }
}

/// What an interference finding judged, as numbers (the curve's judged
/// curve: attributed for a loaded run, measured for the idle one).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InterferenceFigures {
    pub load: Load,
    /// Max load in the window nearest 1 ms, 0..=1 (what the severity rule reads).
    pub max_load_1ms: f64,
    /// Max load in the window nearest 10 ms, 0..=1.
    pub max_load_10ms: f64,
    /// The longest single interruption of the run.
    pub max_gap_ns: u64,
    /// Hypervisor steal on the CPU during the run, when it was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steal_ns: Option<u64>,
}

/// The source that took the largest share of a max-load window (one of
/// the curve's `sources` windows), with its share.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FindingSource {
    pub kind: SourceKind,
    /// As in the window's sources: `inject/4211 FIFO 95`, `irq 11 virtio0`,
    /// `NET_RX`, `unseen`.
    pub label: String,
    /// Thread id (threads only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    /// The thread's policy in `irqlab control threads --policy` spelling.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<String>,
    /// Its gap time in the window.
    pub ns: u64,
    /// Its share of the window's gap time (`ns / busy_ns`), 0..=1: "most
    /// of it" in the title from 0.5 on, "the largest part" below.
    pub share: f64,
    /// The window: its length and its gap time (all sources together).
    pub window_ns: u64,
    pub busy_ns: u64,
    /// Whether the survey's recommendations can take it off the CPU (a
    /// thread, a numbered IRQ, device softirq work); unseen time, system
    /// vectors, the local softirqs and per-CPU kernel threads cannot
    /// (`findings::movable`).
    #[serde(default)]
    pub movable: bool,
}

/// How the quiet CPU was chosen, and every CPU's score.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QuietCpu {
    pub basis: QuietBasis,
    /// Per surveyed CPU, best first (the chosen CPU is the first).
    pub cpus: Vec<CpuScore>,
}

/// What a CPU's score counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum QuietBasis {
    /// The part of the worst windows nothing the survey recommends can
    /// move (every curve recorded its gaps' sources).
    Unmovable,
    /// The whole judged load (some curve has no sources: the parts cannot
    /// be told apart).
    Load,
}

/// One CPU's score for the quiet-CPU choice: over every load, the largest
/// share of a window (1 ms, 10 ms, 100 ms; `None` where no curve has that
/// window) that counts under the basis.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CpuScore {
    pub cpu: usize,
    pub at_1ms: f64,
    pub at_10ms: Option<f64>,
    pub at_100ms: Option<f64>,
}

/// What to change, derived from one or more findings.
///
/// The same recommendation (same title, command and setting) made for
/// several findings is listed once: `finding` is the first finding it
/// answers (kept for documents and readers from before `findings`), and
/// `findings` lists all of them, that first one included. Documents from
/// before `findings` have it empty: [`Recommendation::answers`] reads both.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Recommendation {
    pub id: String,
    /// The (first) finding it answers.
    pub finding: String,
    /// Every finding it answers, `finding` first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub findings: Vec<String>,
    /// What kind of change it is, for a script to pick it out without
    /// reading its title.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action: Option<Action>,
    /// The CPU its title names: the one work is taken off, the one a task
    /// should run on, the one to ask the host a core for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<usize>,
    pub title: String,
    /// Why this and not something else.
    pub rule: String,
    /// The exact command that applies it (an `irqlab control ...` line where
    /// irqlab can apply it; a kernel parameter or sysctl otherwise).
    pub command: Option<String>,
    /// What the analysis predicts once it is applied.
    pub predicted: Option<String>,
    /// The setting it declares, when irqlab can apply it as part of a
    /// profile (`DIR/profile.toml`, `irqlab control apply`); `command` is
    /// made from it. Absent in surveys written before it existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub setting: Option<Declared>,
}

impl Recommendation {
    /// Every finding it answers (`findings`, or `finding` in documents
    /// from before that field).
    pub fn answers(&self) -> Vec<&str> {
        if self.findings.is_empty() {
            vec![self.finding.as_str()]
        } else {
            self.findings.iter().map(String::as_str).collect()
        }
    }
}

/// What kind of change a recommendation is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Action {
    /// Undo what killed irqlab runs left (`control revert --all`).
    Revert,
    /// Run the time-critical task on the quiet CPU, interrupts steered off it.
    QuietCpu,
    /// A thread moved off a CPU (or kept off the quiet one), keeping its policy.
    MoveThread,
    /// An IRQ's affinity written away from a CPU.
    SteerIrq,
    /// Receive work polled in a kernel thread (threaded NAPI).
    ThreadedNapi,
    /// Time no tracepoint saw on a VM: the host's to give back.
    DedicatedCore,
    /// The load's driver thread under a server (SCHED_DEADLINE or sporadic).
    BoundDriver,
    /// The load's driver thread on a CPU of its own, away from the quiet one.
    MoveDriver,
    /// A load whose interrupt work has no thread irqlab can bound.
    KeepInterruptsOff,
    /// The task set on another CPU, where it is schedulable.
    MoveTaskset,
    /// Keep time-critical CPUs out of deep idle states.
    IdleStates,
    /// Run the survey as root (RT throttling could not be lifted).
    RunAsRoot,
    /// Fix the CPU frequency.
    Governor,
    /// A kernel command-line option for the next boot (`nohz_full=`, `rcu_nocbs=`).
    BootIsolation,
    /// PREEMPT_RT's timer softirq thread (`ktimers/N`) above the
    /// time-critical task, so the tick can stop under nohz_full.
    RaiseTimerThread,
}

/// A recommendation as a setting: what `irqlab control irq` / `control
/// threads` apply now, and what a profile declares.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Declared {
    /// IRQs (numbers, names, `*`, `default`) steered to `cpus` (a CPU list).
    Irq { irqs: Vec<String>, cpus: String },
    /// A MATCH under a fixed policy, pinned to `cpus` when given;
    /// `kernel_thread` where the MATCH names a kernel thread on purpose
    /// (PREEMPT_RT's `ktimers/N`), which a `comm:` MATCH takes only with
    /// `--all-matching` (the profile's `all_matching`).
    Threads {
        matched: String,
        policy: String,
        cpus: Option<String>,
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        kernel_thread: bool,
    },
    /// A network device's receive polled in a kernel thread (threaded NAPI).
    NapiThreaded { dev: String },
    /// A kernel command-line option (`nohz_full=1`): the profile's `[boot]`,
    /// in force from the next boot.
    Boot { option: String },
}

impl Declared {
    /// The command that applies it while it runs.
    pub fn command(&self) -> String {
        match self {
            Declared::Irq { irqs, cpus } => {
                // `*` quoted for the shell.
                let irqs: Vec<String> = irqs.iter().map(|i| if i == "*" { "'*'".to_string() } else { i.clone() }).collect();
                format!("irqlab control irq {} --cpu {cpus}", irqs.join(" "))
            }
            Declared::Threads { matched, policy, cpus, kernel_thread } => {
                let pin = cpus.as_ref().map(|c| format!(" --cpu {c}")).unwrap_or_default();
                let all = if *kernel_thread { " --all-matching" } else { "" };
                format!("irqlab control threads {matched} --policy {policy}{pin}{all}")
            }
            Declared::NapiThreaded { dev } => format!("irqlab control napi {dev} --threaded on"),
            // Nothing applies it while the machine runs: the option itself,
            // which `control apply PROFILE --boot` writes for the next boot.
            Declared::Boot { option } => option.clone(),
        }
    }
}

/// The one line at the top of the page.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Verdict {
    pub severity: Severity,
    pub headline: String,
}
