//! The surveyed machine as simulator scenarios (issue 53): for each CPU
//! and load the survey probed, an `irqlab sim` scenario of the whole
//! machine whose probed CPU carries every source the BPF monitor saw take
//! time from the probe, at the rate and cost it measured.
//!
//! The calibration is by construction, source by source, from
//! `sources.totals` of the curve (never from the curve it is checked
//! against): a source that ran in `g` of the probe's gaps for `ns` in all
//! over a run of `T` arrives every `T / g` and costs `ns / g` each time.
//! What each source becomes in the model:
//!
//! - the local timer (`irq LOC timer`): a periodic `[[irq]]` at its
//!   measured rate (the tick as it was, stopped or not), with the tick's
//!   softirqs (TIMER, RCU, SCHED, HRTIMER) as its bottom half, charged per
//!   tick;
//! - any other hard IRQ or IPI: a Poisson `[[irq]]`;
//! - the reschedule IPI (`irq RES resched IPI`): its time in the gaps
//!   where a thread ran next (`woken_by_resched_ipi`, `resched_ipi_ns` of
//!   that thread's totals: the IPI of its wake-up from another CPU) is a
//!   Poisson `[[irq]]` of that thread's, on the thread's CPU
//!   (`RES resched IPI waking <thread>`), so it moves when a profile
//!   moves the thread; the `[[irq]]` of the RES source keeps the rest,
//!   and the two add up to the RES source's time;
//! - any other softirq: a Poisson `[[irq]]` of no handler time whose
//!   bottom half is the softirq;
//! - a thread: a periodic task with the policy and priority it had, so the
//!   simulated scheduler decides when it may preempt the probe (a fair
//!   thread beside the FIFO probe runs only through 6.12's fair server or
//!   6.1's RT throttling, as on the machine);
//! - `unseen` (the hypervisor stopping the vCPU, entry and exit paths, what
//!   no tracepoint covers): a Poisson `[[irq]]` named `unseen`.
//!
//! A source's cost includes the unseen time of the gaps it was the largest
//! source of (`unseen_ns`: its entry, exit and switch paths), so that time
//! moves with it when a profile moves it. Part of it was the tick's and
//! the host's, which stay: a profile that moves a thread off the probed
//! CPU gives them back there (`Model::restore_hidden`).
//!
//! Arrival shapes (periodic, Poisson) and constant costs are the model's
//! assumptions; the means are the measurement's. The machine's own entry,
//! exit, tick and context-switch costs are zero: the measured sources'
//! times already hold them as the probe saw them.

use crate::doc::{LoadCurve, SourceKind, SourceTotal, Survey};
use crate::run::PROBE_PRIORITY;
use serde::{Deserialize, Serialize};
use std::fmt::Write as _;

/// The schema of `irqlab sim --from-survey`'s document.
pub const DOC_SCHEMA: &str = "irqlab/sim-from-survey/v1";
/// Its file name in the `--out` directory (`DIR/sim/` by default), where
/// `survey --compare DIR` finds a prediction.
pub const DOC_FILE: &str = "from-survey.json";

/// `irqlab sim --from-survey`'s document: each probed CPU and load,
/// measured beside simulated, and beside predicted under a profile.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FromSurvey {
    pub schema: String,
    pub complete: bool,
    pub survey: String,
    pub kernel: String,
    pub preset: String,
    pub seed: Option<u64>,
    /// `--spread-from`: the second survey of the same machine whose
    /// curves' differences from this one's are each check's tolerance.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spread_from: Option<String>,
    /// `--profile`: the profile whose effect `runs[].predicted` is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<String>,
    /// What the profile changed in the model, and what it could not.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub profile_notes: Vec<ProfileNote>,
    pub runs: Vec<Run>,
    /// Curves that could not be made a scenario, and why.
    #[serde(default)]
    pub skipped: Vec<Skipped>,
}

/// One CPU and load: where its scenario is, the probed CPU's mean load
/// (gap time over run time) and each window's maximum load, measured and
/// simulated, and predicted under the profile.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Run {
    pub cpu: usize,
    pub load: String,
    pub scenario: String,
    pub complete: bool,
    pub mean_load: Pair,
    pub windows: Vec<WindowPair>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub predicted: Option<Predicted>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Pair {
    pub measured: f64,
    pub simulated: f64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WindowPair {
    pub window_ns: u64,
    pub measured: f64,
    pub simulated: f64,
    /// simulated - measured.
    pub error: f64,
    /// |measured - the other survey's measured| at this window, when
    /// `--spread-from` gave one: the run-to-run spread of the measurement.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spread: Option<f64>,
    /// |error| <= spread.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub within_spread: Option<bool>,
}

/// The same CPU and load simulated with the profile applied.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Predicted {
    pub scenario: String,
    pub complete: bool,
    pub mean_load: f64,
    /// (window_ns, max load) at the measured curve's windows.
    pub windows: Vec<(u64, f64)>,
}

impl FromSurvey {
    /// The prediction for one CPU and load at the window nearest
    /// `window_ns`: (before as simulated, after as predicted).
    pub fn predicted_at(&self, cpu: usize, load: &str, window_ns: u64) -> Option<(f64, f64)> {
        let run = self.runs.iter().find(|r| r.cpu == cpu && r.load == load)?;
        let p = run.predicted.as_ref()?;
        let (_, after) = p.windows.iter().find(|(w, _)| *w == window_ns)?;
        let before = run.windows.iter().find(|w| w.window_ns == window_ns)?.simulated;
        Some((before, *after))
    }
}

/// One scenario: the machine while `cpu` was probed under `load`.
#[derive(Debug, Clone)]
pub struct SurveyScenario {
    pub cpu: usize,
    /// The load's name (`idle`, `net`, ...).
    pub load: &'static str,
    /// `cpu0-idle.toml`.
    pub file_name: String,
    pub toml: String,
}

/// A curve that cannot be made a scenario, and why.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Skipped {
    pub cpu: usize,
    pub load: String,
    pub why: String,
}

/// The task name of the simulated probe in every scenario.
pub const PROBE_TASK: &str = "probe";

/// The simulator's kernel preset for a surveyed kernel (`uname -v`/`-r` as
/// `doctor` records them, e.g. `6.12.117+deb12-amd64 #1 SMP PREEMPT_RT ...`):
/// `linux-6.1` for 4.9 to 6.4 (softirqs left to a running ksoftirqd, RT
/// throttling), `linux-6.12` from 6.12 (the fair server), each with `-rt`
/// when the kernel is PREEMPT_RT. 6.5 to 6.11 have neither preset's
/// mechanisms (no deferral, no fair server) and are refused by name.
pub fn kernel_preset(kernel: &str) -> Result<String, String> {
    let version = kernel.split_whitespace().next().unwrap_or("");
    let mut parts = version.split(|c: char| !c.is_ascii_digit());
    let major: u32 = parts.next().and_then(|p| p.parse().ok()).ok_or_else(|| format!("no kernel version in `{kernel}`"))?;
    let minor: u32 = parts.next().and_then(|p| p.parse().ok()).ok_or_else(|| format!("no kernel version in `{kernel}`"))?;
    let base = match (major, minor) {
        (4, 9..) | (5, _) | (6, 0..=4) => "linux-6.1",
        (6, 12..) | (7.., _) => "linux-6.12",
        _ => {
            return Err(format!(
                "kernel {major}.{minor}: no simulator preset models it yet (linux-6.1 covers 4.9 to 6.4, linux-6.12 covers 6.12 and later; docs/sim-multicore.md)"
            ))
        }
    };
    let rt = kernel.contains("PREEMPT_RT") || version.contains("-rt");
    Ok(if rt { format!("{base}-rt") } else { base.to_string() })
}

/// The tick rate `doctor` recorded ("250 Hz, stopped when idle"), if any.
fn hz(survey: &Survey) -> Option<u32> {
    let tick = survey.machine.settings.get("tick")?;
    tick.split_whitespace().next()?.parse().ok()
}

/// Softirq vectors the timer tick raises: charged to the tick's line.
const TICK_SOFTIRQS: [&str; 4] = ["TIMER", "RCU", "SCHED", "HRTIMER"];
const LOC: &str = "irq LOC timer";

/// A softirq the tick raises (charged to the LOC line in the model).
fn is_tick_softirq(s: &SourceTotal) -> bool {
    s.kind == SourceKind::Softirq && TICK_SOFTIRQS.contains(&s.label.as_str())
}

/// One measured source placed on a CPU of the model.
#[derive(Debug, Clone)]
struct Placed {
    cpu: usize,
    source: SourceTotal,
    /// The run its totals are over.
    run_ns: u64,
    /// Prepended to its name (`cpu1 `) to keep names apart across CPUs.
    prefix: String,
    /// The tick's softirqs, charged to the LOC line: their total ns, names.
    tick_softirqs: Option<(u64, Vec<String>)>,
    /// A policy a profile gave it (`fifo:50`), replacing the measured one.
    policy: Option<String>,
    /// Why it is where it is, when a profile moved it.
    moved: Option<String>,
    /// A thread's: the reschedule IPIs of its wake-ups, written beside it
    /// on its CPU (so they go where it goes).
    wakes: Option<Wakes>,
    /// The RES source's: the part of it its woken threads carry; its own
    /// entry is the rest.
    woke: Option<Wakes>,
}

/// Reschedule IPI time that woke threads: the gaps, their RES time (with
/// the gaps' unseen time where the IPI led), the most seen in one gap.
#[derive(Debug, Clone, Copy, Default)]
struct Wakes {
    gaps: u64,
    ns: u64,
    max_ns: u64,
}

/// Whether a source is the reschedule IPI, as the monitor names it.
fn is_resched_ipi(s: &SourceTotal) -> bool {
    let res = irqlab_measure::probe::resched_ipi();
    s.kind == res.kind && s.label == res.label && s.pid == res.pid
}

/// The machine while one CPU was probed under one load: every source on
/// the CPU it was measured on, until a profile moves it.
#[derive(Debug, Clone)]
pub struct Model {
    pub cpu: usize,
    pub load: &'static str,
    cores: usize,
    run_ns: u64,
    windows_ns: Vec<u64>,
    placed: Vec<Placed>,
    /// CPUs with nothing on them, and why.
    empty: Vec<(usize, String)>,
    /// The probed CPU's idle run (its totals, its length), when this model
    /// is of another load: what its time-driven sources are with no
    /// thread of the load in their way ([`Model::restore_hidden`]).
    idle_here: Option<(Vec<SourceTotal>, u64)>,
}

/// Every model the survey can give, and the curves it cannot.
pub fn models(survey: &Survey) -> Result<(Vec<Model>, Vec<Skipped>), String> {
    let cores = survey.cpus.iter().map(|c| c.cpu + 1).max().ok_or("the survey probed no CPU")?;
    let mut made = Vec::new();
    let mut skipped = Vec::new();
    for probed in &survey.cpus {
        for curve in &probed.curves {
            let load = curve.load.name();
            let measured = match totals(curve) {
                Err(why) => {
                    skipped.push(Skipped { cpu: probed.cpu, load: load.to_string(), why });
                    continue;
                }
                Ok(t) => t,
            };
            let mut m = Model {
                cpu: probed.cpu,
                load,
                cores,
                run_ns: curve.duration_ns.max(1),
                windows_ns: curve.measured.points.iter().map(|p| p.window_ns).collect(),
                placed: Vec::new(),
                empty: Vec::new(),
                idle_here: None,
            };
            if curve.load != crate::doc::Load::None {
                m.idle_here = idle_curve(survey, probed.cpu).and_then(|c| totals(c).ok().map(|t| (t.to_vec(), c.duration_ns.max(1))));
            }
            m.place(probed.cpu, measured, curve.duration_ns.max(1), "");
            for other in (0..cores).filter(|&c| c != probed.cpu) {
                match idle_curve(survey, other).map(|c| (c, totals(c))) {
                    Some((idle, Ok(t))) => m.place(other, t, idle.duration_ns.max(1), &format!("cpu{other} ")),
                    Some((_, Err(why))) => m.empty.push((other, why)),
                    None => m.empty.push((other, "not surveyed".into())),
                }
            }
            made.push(m);
        }
    }
    Ok((made, skipped))
}

/// A curve's per-source totals, or why it has none.
fn totals(curve: &LoadCurve) -> Result<&[SourceTotal], String> {
    match &curve.sources {
        None => Err("the probe ran without its BPF source monitor".into()),
        Some(s) if !s.available => Err(format!("no gap sources: {}", s.note)),
        Some(s) if s.totals.is_empty() && !s.windows.is_empty() => {
            Err("the survey predates per-source totals (sources.totals); survey again with this irqlab".into())
        }
        Some(s) => Ok(&s.totals),
    }
}

fn quoted(s: &str) -> String {
    toml::Value::String(s.to_string()).to_string()
}

/// The idle curve of `cpu`: what the other CPUs carry in every scenario.
fn idle_curve(survey: &Survey, cpu: usize) -> Option<&LoadCurve> {
    let c = survey.cpus.iter().find(|c| c.cpu == cpu)?;
    c.curves.iter().find(|c| c.load == crate::doc::Load::None)
}

impl Model {
    /// Puts one curve's sources on `cpu`, the tick's softirqs on its LOC
    /// line when it has one, and each woken thread's part of the
    /// reschedule IPI with that thread.
    fn place(&mut self, cpu: usize, totals: &[SourceTotal], run_ns: u64, prefix: &str) {
        let has_loc = totals.iter().any(|s| s.label == LOC);
        let on_loc_line = |s: &SourceTotal| has_loc && is_tick_softirq(s);
        let tick: Vec<&SourceTotal> = totals.iter().filter(|s| on_loc_line(s)).collect();
        // A thread's wake-ups are a part of the RES source's time: without
        // that source (a document edited by hand) there is nothing to part.
        let res = totals.iter().find(|s| is_resched_ipi(s));
        let wakes = |s: &SourceTotal| {
            (res.is_some() && s.kind == SourceKind::Thread && s.woken_by_resched_ipi > 0 && s.resched_ipi_ns > 0).then_some(Wakes {
                gaps: s.woken_by_resched_ipi,
                ns: s.resched_ipi_ns,
                max_ns: s.resched_ipi_max_ns,
            })
        };
        let woke = totals.iter().filter_map(wakes).fold(None, |sum: Option<Wakes>, w| {
            let sum = sum.unwrap_or_default();
            Some(Wakes { gaps: sum.gaps + w.gaps, ns: sum.ns + w.ns, max_ns: sum.max_ns.max(w.max_ns) })
        });
        for s in totals.iter().filter(|s| !on_loc_line(s)) {
            let tick_softirqs = (s.label == LOC && !tick.is_empty())
                .then(|| (tick.iter().map(|x| x.ns).sum(), tick.iter().map(|x| x.label.clone()).collect()));
            self.placed.push(Placed {
                cpu,
                source: s.clone(),
                run_ns,
                prefix: prefix.to_string(),
                tick_softirqs,
                policy: None,
                moved: None,
                wakes: wakes(s),
                woke: if is_resched_ipi(s) { woke } else { None },
            });
        }
    }

    /// The scenario file's text; `variant` is added to the file name
    /// (`-predicted`).
    pub fn scenario(&self, survey: &Survey, survey_path: &str, preset: &str, variant: &str) -> SurveyScenario {
        let (cpu, load) = (self.cpu, self.load);
        let warmup_ns = WARMUP_NS;
        let mut t = String::new();
        let _ = writeln!(t, "# The machine of {survey_path} while CPU {cpu} was probed under load `{load}`,");
        let _ = writeln!(t, "# made by `irqlab sim --from-survey` (crates/survey/src/scenario.rs says how).");
        let _ = writeln!(t, "# Kernel: {}", survey.machine.kernel);
        let _ = writeln!(t, "# Every rate and cost is calibrated from the probe's BPF gap sources");
        let _ = writeln!(t, "# (sources.totals): a source that ran in g gaps for ns in all, with u ns");
        let _ = writeln!(t, "# unseen beside it, over the {} ms run arrives every run/g and costs (ns + u)/g.", self.run_ns / 1_000_000);
        if self.placed.iter().any(|p| p.wakes.is_some()) {
            let _ = writeln!(t, "# A reschedule IPI followed in its gap by a thread woke that thread: it is written with");
            let _ = writeln!(t, "# the thread (`RES resched IPI waking ...`), on its CPU; the RES entry keeps the rest.");
        }
        if self.placed.iter().any(|p| p.moved.is_some()) {
            let _ = writeln!(t, "# With a profile applied: the sources it moves say so (`# moved:`).");
        }
        let _ = writeln!(t, "name = {}", quoted(&format!("survey cpu{cpu} {load}{variant}")));
        let _ = writeln!(t, "\n[machine]\ncores = {}\nkernel = {}", self.cores, quoted(preset));
        match hz(survey) {
            Some(hz) => {
                let _ = writeln!(t, "hz = {hz}                # doctor: tick");
            }
            None => {
                let _ = writeln!(t, "hz = 250                # doctor recorded no tick rate: Debian's default");
            }
        }
        let _ = writeln!(t, "\n[machine.costs]");
        let _ = writeln!(t, "# Zero: the measured sources below hold entry, exit and switch time as the probe saw it.");
        for key in ["irq_entry", "irq_exit", "tick", "context_switch"] {
            let _ = writeln!(t, "{key} = \"0ns\"");
        }
        let windows: Vec<String> = self.windows_ns.iter().map(|w| format!("\"{w}ns\"")).collect();
        let _ = writeln!(
            t,
            "\n[[task]]\nname = \"{PROBE_TASK}\"\nkind = \"probe\"\ncpu = {cpu}\npolicy = \"fifo\"\npriority = {PROBE_PRIORITY}"
        );
        let _ = writeln!(t, "\n[[metric]]\nkind = \"probe\"\ntask = \"{PROBE_TASK}\"\nwindows = [{}]", windows.join(", "));
        for c in 0..self.cores {
            let what = if c == cpu { format!("probed under {load}") } else { "idle (its sources when it was probed)".into() };
            let _ = writeln!(t, "\n# ---- CPU {c}: {what} ----");
            if let Some((_, why)) = self.empty.iter().find(|(e, _)| *e == c) {
                let _ = writeln!(t, "# nothing measured here: {why}");
            }
            for p in self.placed.iter().filter(|p| p.cpu == c) {
                entry(&mut t, p, warmup_ns);
            }
        }
        let _ = writeln!(t, "\n[run]\nduration = \"{}ns\"\nwarmup = \"{warmup_ns}ns\"\nseed = 1", self.run_ns + warmup_ns);
        SurveyScenario { cpu, load, file_name: format!("cpu{cpu}-{load}{variant}.toml"), toml: t }
    }
}

/// What a profile did to the model: a source moved or re-prioritised, or
/// a setting the model cannot follow.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct ProfileNote {
    /// The profile's setting (`irq *`, `threads napi:irqlab-b`, `boot`).
    pub setting: String,
    pub note: String,
}

impl Model {
    /// Applies a profile's run-time settings to the model as the kernel
    /// would: a steered IRQ line, or a thread given CPUs, stays on its CPU
    /// when the new set holds it and otherwise goes to the set's lowest
    /// CPU (the model has no balancer to choose); a thread's policy is
    /// replaced. What the model cannot follow is said, never guessed:
    /// settings for later (`default_irq`: IRQs registered later), for the
    /// next boot (`boot`), and the NAPI and RPS settings, which change a
    /// path the survey's sources do not describe. Only the sources'
    /// places change: their rates and costs stay the measured ones, and
    /// the system vectors (timer, IPIs) cannot be steered.
    pub fn apply_profile(&mut self, profile: &irqlab_control::profile::Profile) -> Vec<ProfileNote> {
        use irqlab_host::journal::threads::{Match, Thread};
        let mut notes = Vec::new();
        let note =
            |notes: &mut Vec<ProfileNote>, setting: &str, note: String| notes.push(ProfileNote { setting: setting.to_string(), note });
        let place =
            |current: usize, cpus: &[usize]| if cpus.contains(&current) { current } else { cpus.iter().copied().min().unwrap_or(current) };
        for rule in &profile.irqs {
            let setting = format!("irq {}", rule.irq.get_ref());
            let cpus = match irqlab_host::rt::parse_cpu_list(rule.cpus.get_ref()) {
                Ok(c) if !c.is_empty() && c.iter().all(|&c| c < self.cores) => c,
                _ => {
                    note(
                        &mut notes,
                        &setting,
                        format!("CPUs `{}` are not CPUs of the surveyed machine: not predicted", rule.cpus.get_ref()),
                    );
                    continue;
                }
            };
            for p in self.placed.iter_mut() {
                let Some((number, name)) = device_irq(&p.source.label) else { continue };
                let wanted = rule.irq.get_ref();
                let hit = wanted == "*" || wanted == &number.to_string() || wanted == name || name.starts_with(&format!("{wanted}-"));
                let to = place(p.cpu, &cpus);
                if hit && to != p.cpu {
                    let why = format!("{} from CPU {} to CPU {to} ({setting})", p.source.label, p.cpu);
                    note(&mut notes, &setting, format!("moves {why}"));
                    p.moved = Some(why);
                    p.cpu = to;
                }
            }
        }
        for rule in &profile.threads {
            let text = rule.matched.get_ref();
            let setting = format!("threads {text}");
            let matcher = match Match::parse(text) {
                Ok(m) => m,
                Err(e) => {
                    note(&mut notes, &setting, format!("not predicted: {e}"));
                    continue;
                }
            };
            let cpus = match rule.cpus.as_ref().map(|c| irqlab_host::rt::parse_cpu_list(c.get_ref())) {
                None => None,
                Some(Ok(c)) if !c.is_empty() && c.iter().all(|&c| c < self.cores) => Some(c),
                Some(_) => {
                    note(&mut notes, &setting, "its CPUs are not CPUs of the surveyed machine: not predicted".into());
                    continue;
                }
            };
            let policy = rule.policy.get_ref();
            let modelled = policy_keys_of(policy).is_some();
            if !modelled {
                note(&mut notes, &setting, format!("policy {policy}: not modelled here, the measured policy is kept"));
            }
            for p in self.placed.iter_mut() {
                let (Some(pid), Some(comm)) = (p.source.pid, thread_comm(&p.source)) else { continue };
                if !matcher.matches(&Thread { tid: pid as i32, comm: comm.to_string(), start_ticks: 0 }) {
                    continue;
                }
                let to = cpus.as_deref().map_or(p.cpu, |c| place(p.cpu, c));
                let mut what = Vec::new();
                if to != p.cpu {
                    // Its wake-ups' reschedule IPIs (`p.wakes`) go with it:
                    // its waker stays where it was, so a wake-up on the new
                    // CPU still comes from another CPU in general. Where the
                    // waker runs on the new CPU the IPI vanishes, which the
                    // survey does not tell: the model keeps it, an upper bound.
                    let ipis = if p.wakes.is_some() { " with its wake-ups' reschedule IPIs" } else { "" };
                    what.push(format!("from CPU {} to CPU {to}{ipis}", p.cpu));
                    p.cpu = to;
                }
                if modelled && p.source.policy.as_deref() != Some(policy) {
                    what.push(format!("policy {} to {policy}", p.source.policy.as_deref().unwrap_or("?")));
                    p.policy = Some(policy.clone());
                }
                if !what.is_empty() {
                    let why = format!("{} {} ({setting})", p.source.label, what.join(", "));
                    note(&mut notes, &setting, format!("moves {why}"));
                    p.moved = Some(why);
                }
            }
        }
        self.restore_hidden(&mut notes);
        if profile.default_irq.is_some() {
            note(&mut notes, "default_irq", "applies to IRQs registered later: nothing measured moves".into());
        }
        for n in &profile.napi {
            note(
                &mut notes,
                &format!("napi {}", n.dev.get_ref()),
                "not predicted: the survey's sources do not describe the device's receive path".into(),
            );
        }
        for r in &profile.rps {
            note(
                &mut notes,
                &format!("rps {}", r.dev.get_ref()),
                "not predicted: the survey's sources do not describe the device's receive path".into(),
            );
        }
        if let Some(b) = &profile.boot {
            note(&mut notes, "boot", format!("`{}` takes effect at a boot: not predicted", b.cmdline.get_ref()));
        }
        notes
    }
}

/// The `setting` of the profile notes [`Model::restore_hidden`] writes.
pub const RESTORED: &str = "(time-driven sources)";

impl Model {
    /// What a thread the profile moved off the probed CPU hid there: the
    /// sources that come with time, the tick (`irq LOC timer`) and the
    /// gaps nothing was seen in (`unseen`: the host stopping the vCPU, the
    /// paths no tracepoint covers), land in the thread's runs as well as
    /// in the probe's. There a gap's unseen time is the thread's (its
    /// largest source's, and moves with it), and a stall is the thread's
    /// time; so under the load these sources measure less than with the
    /// CPU to the probe (on this VM, CPU 1 under the flood: LOC 0.33% and
    /// unseen 0.02% of the run, idle 0.56% and 0.60%). With the thread
    /// gone they come back: each moves from its loaded measure toward the
    /// same CPU's idle run by the share of the loaded CPU's other busy time
    /// the profile moved off it. Where the idle run measured less, nothing
    /// changes (no sign that anything was hidden).
    fn restore_hidden(&mut self, notes: &mut Vec<ProfileNote>) {
        let Some((idle, idle_run)) = self.idle_here.as_ref() else { return };
        let here = self.cpu;
        let time_driven = |s: &SourceTotal| s.label == LOC || s.kind == SourceKind::Unseen;
        // Sources measured on the probed CPU are placed without a prefix.
        let measured_here = |p: &Placed| p.prefix.is_empty();
        let share = |p: &Placed| (p.source.ns + p.source.unseen_ns) as f64 / p.run_ns as f64;
        let busy: f64 = self.placed.iter().filter(|p| measured_here(p) && !time_driven(&p.source)).map(share).sum();
        let left: f64 = self.placed.iter().filter(|p| measured_here(p) && !time_driven(&p.source) && p.cpu != here).map(share).sum();
        if busy <= 0.0 || left <= 0.0 {
            return;
        }
        let f = (left / busy).min(1.0);
        let scale = self.run_ns as f64 / *idle_run as f64;
        let idle_tick = idle.iter().filter(|s| is_tick_softirq(s)).map(|s| s.ns).sum::<u64>() as f64 * scale;
        let toward = |loaded: u64, idle: f64| (loaded as f64 + (idle - loaded as f64) * f).round().max(0.0) as u64;
        for p in self.placed.iter_mut().filter(|p| measured_here(p) && p.cpu == here && time_driven(&p.source)) {
            let Some(i) = idle.iter().find(|i| i.kind == p.source.kind && i.label == p.source.label) else { continue };
            let before = share(p);
            let idle_share = (i.ns + i.unseen_ns) as f64 / *idle_run as f64;
            if idle_share <= before {
                continue;
            }
            let s = &mut p.source;
            s.gaps = toward(s.gaps, i.gaps as f64 * scale).max(1);
            s.ns = toward(s.ns, i.ns as f64 * scale);
            s.unseen_ns = toward(s.unseen_ns, i.unseen_ns as f64 * scale);
            if f >= 0.5 {
                s.max_ns = s.max_ns.max(i.max_ns);
            }
            if let Some((ns, _)) = p.tick_softirqs.as_mut() {
                *ns = toward(*ns, idle_tick);
            }
            let why = format!(
                "{} on CPU {here}: {:.2}% of the run under the load, {:.2}% idle, {:.2}% with {:.0}% of the CPU's other busy time moved off \
                 (what the moved threads' runs hid of it comes back)",
                p.source.label,
                before * 100.0,
                idle_share * 100.0,
                share(p) * 100.0,
                f * 100.0
            );
            notes.push(ProfileNote { setting: RESTORED.into(), note: format!("restores {why}") });
            p.moved = Some(why);
        }
    }
}

/// A numbered IRQ line's number and action name from its source label
/// (`irq 41 virtio3-rx`); `None` for the system vectors (`irq LOC timer`).
fn device_irq(label: &str) -> Option<(u32, &str)> {
    let rest = label.strip_prefix("irq ")?;
    let (number, name) = rest.split_once(' ').unwrap_or((rest, ""));
    Some((number.parse().ok()?, name))
}

/// A thread source's comm: its label is `comm/tid POLICY...` and a comm
/// may hold `/` and spaces, so it is cut at its own tid.
fn thread_comm(s: &SourceTotal) -> Option<&str> {
    let pid = s.pid?;
    let at = s.label.find(&format!("/{pid} "))?;
    Some(&s.label[..at])
}

/// The simulated run's warm-up: the statistics start after it.
const WARMUP_NS: u64 = 100_000_000;

/// One placed source as `[[irq]]` or `[[task]]` entries: its bulk, and
/// its longest burst apart when that is far above its mean.
///
/// A source whose longest burst (`max_ns`) is more than twice its mean
/// is written as two: the rest of its bursts at their own rate and mean
/// cost, and the longest once per run (periodic at the run's length), so
/// that the model keeps both its mean and its worst as measured. Without
/// it a hypervisor's rare 0.7 ms stop, averaged into thousands of 9 us
/// ones, would never fill a 1 ms window as it did.
///
/// The RES source is written less the part its woken threads carry, and
/// each such thread is followed by its part (`RES resched IPI waking
/// <thread>`, on the thread's CPU): the two add up to the RES source's
/// measured time.
fn entry(t: &mut String, p: &Placed, warmup_ns: u64) {
    let s = &p.source;
    let _ = writeln!(
        t,
        "\n# measured: {} gaps, {} ns in all (and {} ns unseen beside it), at most {} ns in one",
        s.gaps, s.ns, s.unseen_ns, s.max_ns
    );
    // Its own time and the unseen time of the gaps it led: the paths into
    // and out of it, which move with it.
    let mut own = Own { gaps: s.gaps, ns: s.ns + s.unseen_ns, mean_ns: s.ns / s.gaps.max(1), max_ns: s.max_ns };
    if let Some(w) = &p.woke {
        // The gaps it woke a thread in are those threads' (one each), as is
        // its time there; its longest burst stays here only when it was not
        // a wake-up's (longer than any of theirs).
        own.gaps = s.gaps.saturating_sub(w.gaps);
        own.ns = own.ns.saturating_sub(w.ns);
        own.mean_ns = own.ns / own.gaps.max(1);
        own.max_ns = if s.max_ns > w.max_ns { s.max_ns } else { 0 };
        let _ = writeln!(
            t,
            "# of which {} gaps and {} ns woke the thread that ran next in the gap: written with each thread \
             (`RES resched IPI waking ...`); here the rest, {} ns in {} gaps{}",
            w.gaps,
            w.ns,
            own.ns,
            own.gaps,
            if own.max_ns > 0 { "" } else { ", at its mean (its longest was a wake-up's)" }
        );
    }
    if let Some(why) = &p.moved {
        let _ = writeln!(t, "# moved: {why}");
    }
    if own.ns > 0 {
        bursts(t, p, &own, warmup_ns);
    } else {
        let _ = writeln!(t, "# nothing left here");
    }
    if let Some(w) = &p.wakes {
        // The thread's wake-ups from another CPU: the reschedule IPI's time
        // in the gaps it ran first after one, on the thread's CPU.
        let ipi = Placed {
            source: SourceTotal {
                label: format!("{} waking {}", irqlab_measure::probe::resched_ipi().label, s.label),
                kind: SourceKind::Irq,
                pid: None,
                policy: None,
                gaps: w.gaps,
                ns: w.ns,
                max_ns: w.max_ns,
                unseen_ns: 0,
                woken_by_resched_ipi: 0,
                resched_ipi_ns: 0,
                resched_ipi_max_ns: 0,
            },
            tick_softirqs: None,
            policy: None,
            wakes: None,
            woke: None,
            ..p.clone()
        };
        let _ = writeln!(
            t,
            "\n# measured: {} gaps in which a reschedule IPI woke {} (it ran first after the IPI), the IPI's {} ns there \
             (with the gap's unseen time where the IPI was its largest source), at most {} ns in one: a part of `irq RES resched IPI`",
            w.gaps, s.label, w.ns, w.max_ns
        );
        if p.moved.is_some() {
            let _ = writeln!(
                t,
                "# moved: with the thread it wakes; a wake-up there still comes from another CPU in general \
                 (where the waker runs on that CPU the IPI vanishes, which the survey does not tell: an upper bound)"
            );
        }
        let own = Own { gaps: w.gaps, ns: w.ns, mean_ns: w.ns / w.gaps.max(1), max_ns: w.max_ns };
        bursts(t, &ipi, &own, warmup_ns);
    }
}

/// What one entry is calibrated from: gaps, time (unseen included), the
/// mean seen time per gap and the longest (0: none kept apart).
struct Own {
    gaps: u64,
    ns: u64,
    mean_ns: u64,
    max_ns: u64,
}

/// A source's bulk, and its longest burst apart when that is more than
/// twice its mean.
fn bursts(t: &mut String, p: &Placed, own: &Own, warmup_ns: u64) {
    let split = own.gaps >= 2 && own.max_ns > 2 * own.mean_ns && own.max_ns <= own.ns;
    let (gaps, bulk) = if split { (own.gaps - 1, own.ns - own.max_ns) } else { (own.gaps.max(1), own.ns) };
    let burst = Burst { every_ns: (p.run_ns / gaps).max(1), cost_ns: bulk / gaps, name_suffix: "", random: true };
    one(t, p, &burst, warmup_ns);
    if split {
        let _ = writeln!(t, "\n# its longest burst, apart: once per run");
        let longest = Burst { every_ns: p.run_ns.max(1), cost_ns: own.max_ns, name_suffix: " (longest)", random: false };
        one(t, p, &longest, warmup_ns);
    }
}

/// How often a source arrives and what each arrival costs.
struct Burst {
    every_ns: u64,
    cost_ns: u64,
    name_suffix: &'static str,
    /// Poisson arrivals (else periodic); the tick is always periodic.
    random: bool,
}

fn one(t: &mut String, p: &Placed, b: &Burst, warmup_ns: u64) {
    let s = &p.source;
    let (every, cost, suffix) = (b.every_ns, b.cost_ns, b.name_suffix);
    match s.kind {
        SourceKind::Irq if s.label == LOC => {
            let _ = writeln!(t, "[[irq]]\nname = {}\ncpu = {}", quoted(&format!("{}LOC timer{suffix}", p.prefix)), p.cpu);
            let _ = writeln!(t, "interval = \"{every}ns\"\nhandler = \"{cost}ns\"");
            if let (Some((ns, names)), "") = (&p.tick_softirqs, suffix) {
                let bh = ns / s.gaps.max(1);
                let _ = writeln!(t, "bottom_half = \"{bh}ns\"      # {} per tick\nvector = \"timer\"", names.join(" + "));
            }
        }
        SourceKind::Irq | SourceKind::Unseen => {
            let name = s.label.strip_prefix("irq ").unwrap_or(&s.label);
            let _ = writeln!(t, "[[irq]]\nname = {}\ncpu = {}", quoted(&format!("{}{name}{suffix}", p.prefix)), p.cpu);
            let _ = writeln!(t, "interval = \"{every}ns\"\npoisson = {}\nhandler = \"{cost}ns\"", b.random);
        }
        SourceKind::Softirq => {
            let vector = match s.label.as_str() {
                "HI" => "hi",
                "BLOCK" => "block",
                "TIMER" | "RCU" | "SCHED" | "HRTIMER" => "timer",
                _ => "tasklet",
            };
            let _ = writeln!(t, "[[irq]]\nname = {}\ncpu = {}", quoted(&format!("{}softirq {}{suffix}", p.prefix, s.label)), p.cpu);
            let _ = writeln!(t, "interval = \"{every}ns\"\npoisson = {}\nhandler = \"0ns\"", b.random);
            let _ = writeln!(t, "bottom_half = \"{cost}ns\"\nvector = \"{vector}\"    # the simulator's vector standing for {}", s.label);
        }
        SourceKind::Thread => {
            let _ = writeln!(
                t,
                "[[task]]\nname = {}\nkind = \"periodic\"\ncpu = {}",
                quoted(&format!("{}{}{suffix}", p.prefix, s.label)),
                p.cpu
            );
            let _ = writeln!(t, "{}", policy_keys(p.policy.as_deref().or(s.policy.as_deref())));
            // First job mid-period after the warm-up, so that a source
            // seen once in the run falls inside the measured part.
            let _ = writeln!(t, "period = \"{every}ns\"\noffset = \"{}ns\"\nexec = \"{}ns\"", warmup_ns + every / 2, cost.max(1));
        }
    }
}

/// The scenario's policy keys for a source's `--policy` spelling
/// (`fifo:50`, `rr:10`, `other`, `other:5`, `idle`); policies it cannot
/// restate (batch, deadline) run as fair tasks, said in a comment.
fn policy_keys(policy: Option<&str>) -> String {
    policy.and_then(policy_keys_of).unwrap_or_else(|| "policy = \"other\"     # batch or deadline when measured: simulated as fair".into())
}

/// The keys of a `--policy` spelling the model has (fifo, rr, other, idle).
fn policy_keys_of(policy: &str) -> Option<String> {
    let (name, value) = policy.split_once(':').map_or((policy, None), |(n, v)| (n, Some(v)));
    match (name, value) {
        ("fifo" | "rr", Some(prio)) if prio.parse::<u32>().is_ok() => Some(format!("policy = \"{name}\"\npriority = {prio}")),
        ("other", Some(nice)) if nice.parse::<i32>().is_ok() => Some(format!("policy = \"other\"\nnice = {nice}")),
        ("other", None) => Some("policy = \"other\"".into()),
        ("idle", None) => Some("policy = \"idle\"".into()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn presets_follow_the_version_and_preempt_rt() {
        assert_eq!(kernel_preset("6.1.0-27-amd64 #1 SMP PREEMPT_DYNAMIC Debian 6.1.115-1").unwrap(), "linux-6.1");
        assert_eq!(kernel_preset("6.1.0-27-rt-amd64 #1 SMP PREEMPT_RT Debian 6.1.115-1").unwrap(), "linux-6.1-rt");
        assert_eq!(kernel_preset("6.12.117+deb12-amd64 #1 SMP PREEMPT_DYNAMIC Debian").unwrap(), "linux-6.12");
        assert_eq!(kernel_preset("6.18.44-fc-v657 #1 SMP PREEMPT_DYNAMIC @0").unwrap(), "linux-6.12");
        assert_eq!(kernel_preset("6.12.117+deb12-rt-amd64 #1 SMP PREEMPT_RT Debian").unwrap(), "linux-6.12-rt");
        let e = kernel_preset("6.8.0-45-generic #45-Ubuntu SMP PREEMPT_DYNAMIC").unwrap_err();
        assert!(e.contains("6.8") && e.contains("linux-6.1 covers 4.9 to 6.4"), "{e}");
        assert!(kernel_preset("").is_err());
    }

    #[test]
    fn policies_are_restated_in_the_scenarios_keys() {
        assert_eq!(policy_keys(Some("fifo:50")), "policy = \"fifo\"\npriority = 50");
        assert_eq!(policy_keys(Some("other:5")), "policy = \"other\"\nnice = 5");
        assert_eq!(policy_keys(Some("other")), "policy = \"other\"");
        assert!(policy_keys(None).contains("simulated as fair"));
    }
}
