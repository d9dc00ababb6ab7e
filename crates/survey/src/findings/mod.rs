//! From measured numbers to findings and recommendations. Pure: reads the
//! survey document (and the user's task set), writes its `findings`,
//! `recommendations`, `schedulability` and `verdict`. Every finding shows
//! the number it rests on and states its rule; every recommendation names
//! the finding it answers and, where irqlab can apply it, the exact
//! `irqlab control` command.

mod boot;
pub mod quiet;
pub mod schedulability;

use crate::doc::*;
use irqlab_analysis::{format_ns, Curve, TaskSet};
pub use quiet::movable;
use quiet::{elsewhere, quietest};

/// Loads at or above these, in a 1 ms window, are worth a warning / a problem.
const WARN_LOAD: f64 = 0.10;
const PROBLEM_LOAD: f64 = 0.50;
/// Timer latency maxima at or above these are worth a warning / a problem.
const WARN_LATENCY_NS: u64 = 100_000;
const PROBLEM_LATENCY_NS: u64 = 1_000_000;
const MS: u64 = 1_000_000;

/// Fills in the findings, recommendations, schedulability checks and verdict.
pub fn derive(survey: &mut Survey, taskset: Option<&TaskSet>) {
    let mut out = Out::default();
    leftovers(survey, &mut out);
    interference(survey, &mut out);
    quiet::quietest_cpu(survey, &mut out);
    culprits(survey, &mut out);
    match taskset {
        Some(set) => {
            survey.schedulability = schedulability::checks(survey, set, tick_ns(survey));
            taskset_findings(survey, &mut out);
        }
        None => driver_servers(survey, &mut out),
    }
    timer_latency(survey, &mut out);
    stimulus(survey, &mut out);
    accounting(survey, &mut out);
    settings(survey, &mut out);
    boot::isolation(survey, &mut out);
    skipped(survey, &mut out);
    out.findings.sort_by_key(|f| std::cmp::Reverse(f.severity));
    survey.verdict = verdict(&out.findings, survey.complete);
    survey.findings = out.findings;
    survey.recommendations = out.recommendations;
}

#[derive(Default)]
struct Out {
    findings: Vec<Finding>,
    recommendations: Vec<Recommendation>,
}

impl Out {
    fn find(&mut self, id: String, severity: Severity, cpu: Option<usize>, title: String, measured: String, rule: &str) -> String {
        self.findings.push(Finding::new(id.clone(), severity, cpu, title, measured, rule.to_string()));
        id
    }

    /// The finding just added, to give it its figures.
    fn last_finding(&mut self) -> &mut Finding {
        self.findings.last_mut().expect("a finding was added")
    }

    /// `rec` as the answer to `finding`; the same recommendation (title,
    /// command, setting) already made for another finding answers this one
    /// too instead of being listed twice.
    fn recommend(&mut self, finding: &str, rec: Rec) {
        let same = |r: &&mut Recommendation| r.title == rec.title && r.command == rec.command && r.setting == rec.setting;
        if let Some(r) = self.recommendations.iter_mut().find(same) {
            if !r.findings.iter().any(|f| f == finding) {
                r.findings.push(finding.to_string());
            }
            return;
        }
        // A finding answered by two settings together (nohz_full= and, on
        // PREEMPT_RT, the ktimers raise) has two recommendations: the
        // second and later are numbered.
        let taken = |id: &str| self.recommendations.iter().any(|r| r.id == id);
        let mut id = format!("do-{finding}");
        let mut n = 1;
        while taken(&id) {
            n += 1;
            id = format!("do-{finding}-{n}");
        }
        self.recommendations.push(Recommendation {
            id,
            finding: finding.to_string(),
            findings: vec![finding.to_string()],
            action: Some(rec.action),
            cpu: rec.cpu,
            title: rec.title,
            rule: rec.rule,
            command: rec.command,
            predicted: rec.predicted,
            setting: rec.setting,
        });
    }
}

/// A recommendation being made.
struct Rec {
    action: Action,
    cpu: Option<usize>,
    title: String,
    rule: String,
    command: Option<String>,
    predicted: Option<String>,
    setting: Option<Declared>,
}

impl Rec {
    fn new(action: Action, cpu: Option<usize>, title: String, rule: String) -> Rec {
        Rec { action, cpu, title, rule, command: None, predicted: None, setting: None }
    }

    /// A change irqlab does not apply: a command to run, or a kernel parameter.
    fn command(mut self, command: impl Into<String>) -> Rec {
        self.command = Some(command.into());
        self
    }

    /// A change irqlab applies: its command is the setting's.
    fn setting(mut self, setting: Declared) -> Rec {
        self.command = Some(setting.command());
        self.setting = Some(setting);
        self
    }

    /// The setting when there is one, else no command.
    fn maybe_setting(self, setting: Option<Declared>) -> Rec {
        match setting {
            Some(setting) => self.setting(setting),
            None => self,
        }
    }

    fn predicted(mut self, predicted: String) -> Rec {
        self.predicted = Some(predicted);
        self
    }
}

/// The largest load measured at the window closest to `window_ns` (log scale).
pub fn load_at(curve: &Curve, window_ns: u64) -> Option<f64> {
    let distance = |w: u64| ((w as f64).ln() - (window_ns as f64).ln()).abs();
    curve.points.iter().min_by(|a, b| distance(a.window_ns).total_cmp(&distance(b.window_ns))).map(|p| p.max_load)
}

/// The scheduler tick, from the machine's "tick" setting ("250 Hz, ...");
/// 10 ms (HZ=100, the coarsest) when unknown.
pub fn tick_ns(survey: &Survey) -> u64 {
    let hz = setting(survey, "tick").and_then(|t| t.split_whitespace().next()).and_then(|n| n.parse::<u64>().ok());
    hz.filter(|&hz| hz > 0).map_or(10 * MS, |hz| 1_000_000_000 / hz)
}

/// A duration to three significant digits ("160ms", "68.9us"), for text
/// a person reads; commands keep the exact `format_ns`.
pub fn short_ns(ns: u64) -> String {
    let (value, unit) = match ns {
        n if n >= 1_000_000_000 => (n as f64 / 1e9, "s"),
        n if n >= 1_000_000 => (n as f64 / 1e6, "ms"),
        n if n >= 1_000 => (n as f64 / 1e3, "us"),
        n => (n as f64, "ns"),
    };
    let digits = match value {
        v if v >= 100.0 => 0,
        v if v >= 10.0 => 1,
        _ => 2,
    };
    let text = format!("{value:.digits$}");
    let text = if text.contains('.') { text.trim_end_matches('0').trim_end_matches('.') } else { &text };
    format!("{text}{unit}")
}

fn pct(x: f64) -> String {
    format!("{:.0}%", x * 100.0)
}

fn severity_of_load(load: f64) -> Severity {
    match load {
        l if l >= PROBLEM_LOAD => Severity::Problem,
        l if l >= WARN_LOAD => Severity::Warn,
        _ => Severity::Ok,
    }
}

fn leftovers(survey: &Survey, out: &mut Out) {
    if survey.leftovers.is_empty() {
        return;
    }
    let id = out.find(
        "leftovers".into(),
        Severity::Problem,
        None,
        format!("{} change(s) left behind by killed irqlab runs", survey.leftovers.len()),
        survey.leftovers.join("; "),
        "a journal entry whose owner is gone is a setting nobody will restore",
    );
    let rule = "restores each setting to the value it had before the killed run".to_string();
    out.recommend(&id, Rec::new(Action::Revert, None, "Undo what killed runs left".into(), rule).command("irqlab control revert --all"));
}

/// One finding per measured curve: how much of a 1 ms window it takes.
fn interference(survey: &Survey, out: &mut Out) {
    for cpu in &survey.cpus {
        for curve in &cpu.curves {
            let judged = curve.judged();
            let (Some(at1), Some(at10)) = (load_at(judged, MS), load_at(judged, 10 * MS)) else { continue };
            let what = match curve.load {
                Load::None => "interference on the idle machine".to_string(),
                load => format!("the {} load", load.name()),
            };
            let fit = curve.fit.map(|f| format!("; fitted u = {:.2}, p = {}", f.utilization, short_ns(f.period_ns))).unwrap_or_default();
            let whose = if curve.load == Load::None { "measured" } else { "attributed to the load (idle floor subtracted)" };
            let severity = severity_of_load(at1);
            let window = worst_window(curve);
            let culprit = window.filter(|_| severity > Severity::Ok).and_then(|w| culprit(survey, w));
            let mut measured = format!(
                "max load {} at 1 ms, {} at 10 ms, longest interruption {} ({whose}{fit})",
                pct(at1),
                pct(at10),
                short_ns(curve.max_gap_ns)
            );
            if let Some(w) = window {
                measured.push_str(&format!("; what ran in the worst {} window: {}", short_ns(w.window_ns), composition(w)));
            }
            if let (Some(c), Some(steal)) = (&culprit, curve.steal_ns) {
                if c.source.kind == SourceKind::Unseen {
                    measured.push_str(&format!("; hypervisor steal on CPU {} during the run: {}", cpu.cpu, short_ns(steal)));
                }
            }
            let named = culprit.as_ref().map(|c| format!(", {} {} ({})", c.lead(), c.name(), pct(c.share))).unwrap_or_default();
            out.find(
                format!("load-cpu{}-{}", cpu.cpu, curve.load.name()),
                severity,
                Some(cpu.cpu),
                format!("CPU {}: {what} takes up to {} of a 1 ms window{named}", cpu.cpu, pct(at1)),
                measured,
                "max load in 1 ms windows: ≥ 50% problem, ≥ 10% warning (a task needing 1 ms of CPU in 2 ms can then miss); \
                 what ran: the probe's gaps in the max-load window, by the tracepoint that saw them, the rest unseen",
            );
            let finding = out.last_finding();
            finding.interference = Some(InterferenceFigures {
                load: curve.load,
                max_load_1ms: at1,
                max_load_10ms: at10,
                max_gap_ns: curve.max_gap_ns,
                steal_ns: curve.steal_ns,
            });
            finding.culprit = culprit.zip(window).map(|(c, w)| c.figures(w));
        }
    }
}

/// For each interference finding that warns: a recommendation aimed at
/// what took its worst window (after `quietest_cpu`, which says where to).
fn culprits(survey: &Survey, out: &mut Out) {
    for cpu in &survey.cpus {
        for curve in &cpu.curves {
            let Some(at1) = load_at(curve.judged(), MS) else { continue };
            if severity_of_load(at1) == Severity::Ok {
                continue;
            }
            if let Some(c) = worst_window(curve).and_then(|w| culprit(survey, w)) {
                target_the_culprit(survey, out, &format!("load-cpu{}-{}", cpu.cpu, curve.load.name()), cpu.cpu, curve, &c);
            }
        }
    }
}

/// The composition of a curve's max-load window nearest 1 ms, when the
/// probe recorded its gaps' sources and the window had gaps.
fn worst_window(curve: &LoadCurve) -> Option<&WindowSources> {
    curve.sources.as_ref().filter(|s| s.available).and_then(|s| s.nearest(MS)).filter(|w| w.busy_ns > 0)
}

/// How many sources a finding lists before "others".
const LISTED_SOURCES: usize = 4;

/// "inject/4211 FIFO 95 600us, unseen 88us, NET_RX 30us, 2 others 9us".
fn composition(w: &WindowSources) -> String {
    let mut parts: Vec<String> = w.sources.iter().take(LISTED_SOURCES).map(|s| format!("{} {}", s.label, short_ns(s.ns))).collect();
    if w.sources.len() > LISTED_SOURCES {
        let rest: u64 = w.sources.iter().skip(LISTED_SOURCES).map(|s| s.ns).sum();
        parts.push(format!("{} others {}", w.sources.len() - LISTED_SOURCES, short_ns(rest)));
    }
    parts.join(", ")
}

/// The source that took the largest share of a worst window.
struct Culprit {
    source: Source,
    /// Its share of the window's gap time.
    share: f64,
    virtualised: bool,
}

impl Culprit {
    fn lead(&self) -> &'static str {
        if self.share >= 0.5 {
            "most of it"
        } else {
            "the largest part"
        }
    }

    fn name(&self) -> String {
        match self.source.kind {
            SourceKind::Unseen if self.virtualised => "unseen by the kernel: the hypervisor or firmware".into(),
            SourceKind::Unseen => "unseen by the kernel: firmware (SMIs) or the entry paths around handlers".into(),
            _ => self.source.label.clone(),
        }
    }

    /// As the finding's `culprit` field.
    fn figures(&self, w: &WindowSources) -> FindingSource {
        FindingSource {
            kind: self.source.kind,
            label: self.source.label.clone(),
            pid: self.source.pid,
            policy: self.source.policy.clone(),
            ns: self.source.ns,
            share: self.share,
            window_ns: w.window_ns,
            busy_ns: w.busy_ns,
            movable: movable(&self.source),
        }
    }
}

fn culprit(survey: &Survey, w: &WindowSources) -> Option<Culprit> {
    let top = w.sources.first()?;
    let virtualised = setting(survey, "virtualised").is_some_and(|v| v.starts_with("yes"));
    Some(Culprit { source: top.clone(), share: top.ns as f64 / w.busy_ns as f64, virtualised })
}

/// The comm of a thread source's label (`comm/tid POLICY`; a comm may
/// itself hold a `/`, as `ksoftirqd/1` does).
fn thread_comm(label: &str) -> Option<&str> {
    label.split(' ').next().and_then(|w| w.rsplit_once('/')).map(|(comm, _)| comm)
}

/// The IRQ number of an IRQ source's label (`irq 11 virtio0`); `None`
/// for a system vector (`irq LOC timer`, IPIs), which cannot be steered.
fn irq_number(label: &str) -> Option<u32> {
    label.split_whitespace().nth(1).and_then(|n| n.parse::<u32>().ok())
}

/// Threads never the target of a "move it" recommendation: those no
/// `control threads` MATCH takes (`threads::is_protected`), the softirq and
/// timer threads and workqueue workers, which are per CPU, and irqlab's own.
fn untouchable_thread(comm: &str) -> bool {
    irqlab_host::journal::threads::is_protected(comm) || quiet::per_cpu_thread(comm) || comm.starts_with("irqlab-")
}

/// A recommendation aimed at what took the worst window: a thread is
/// moved, an IRQ steered, receive work put in a thread; time the kernel
/// never saw on a VM is the host's to give back. Work goes where
/// `elsewhere` says: never to the quiet CPU.
fn target_the_culprit(survey: &Survey, out: &mut Out, finding: &str, cpu: usize, curve: &LoadCurve, c: &Culprit) {
    let share = format!("it took {} of CPU {cpu}'s worst 1 ms window", pct(c.share));
    let place = elsewhere(survey, out, cpu);
    match c.source.kind {
        SourceKind::Thread => {
            let label = &c.source.label;
            // The load's own driver thread has its recommendations (driver_servers).
            // The kernel cuts a comm at 15 characters (`napi/irqlab-b-8`
            // for napi/irqlab-b-8196): a prefix of the driver thread's name.
            let comm = thread_comm(label);
            let drives_the_load =
                comm.is_some_and(|c| curve.driver_threads.iter().any(|t| t.split(' ').next().is_some_and(|name| name.starts_with(c))));
            // The idle task (tid 0) has no comm/tid label.
            if drives_the_load || label == "idle" || comm.is_some_and(untouchable_thread) {
                return;
            }
            let setting = match (c.source.pid, &c.source.policy, &place) {
                (Some(pid), Some(policy), Some(place)) => Some(Declared::Threads {
                    matched: survey.thread_selector(pid),
                    policy: policy.clone(),
                    cpus: Some(place.cpus.clone()),
                    kernel_thread: survey.is_kernel_thread(pid),
                }),
                _ => None,
            };
            let fair = c.source.policy.as_deref().is_some_and(|p| p.starts_with("other") || p == "idle");
            // Above a SCHED_FIFO probe a fair thread runs only when the fair
            // class's deadline server (6.12+) or RT throttling lets it.
            let why = if fair {
                format!(
                    " A fair-class thread ran over the SCHED_FIFO probe: the fair server (Linux 6.12+, up to 50 ms/s) or RT throttling let it; `irqlab control fair-server --cpu {cpu} --runtime 0` stops that where debugfs is open."
                )
            } else {
                String::new()
            };
            let moved = format!("Move {label} off CPU {cpu}");
            let (title, whither) = match &place {
                Some(p) => (p.title(label, moved), p.why("the thread keeps its policy and runs")),
                None => (moved, "the thread keeps its policy and runs on the other CPUs".to_string()),
            };
            let rule = format!("{share}; {whither} (or give it a priority below your time-critical task).{why}");
            out.recommend(finding, Rec::new(Action::MoveThread, Some(cpu), title, rule).maybe_setting(setting));
        }
        SourceKind::Irq => {
            let Some(irq) = irq_number(&c.source.label) else {
                // A system vector (the local timer, IPIs): not steerable.
                return;
            };
            let steered = format!("Steer IRQ {irq} away from CPU {cpu}");
            let (title, rule) = match &place {
                Some(p) => (p.title(&format!("IRQ {irq}"), steered), format!("{share}; {}", p.why("its handler then runs"))),
                None => (steered, format!("{share}; its handler then runs on the other CPUs")),
            };
            let setting = place.map(|p| Declared::Irq { irqs: vec![irq.to_string()], cpus: p.cpus });
            out.recommend(finding, Rec::new(Action::SteerIrq, Some(cpu), title, rule).maybe_setting(setting));
        }
        SourceKind::Softirq => {
            if curve.driver_match.is_some() || !c.source.label.starts_with("NET_") {
                return;
            }
            let rule = format!(
                "{share}; in softirq context it runs above every task. Threaded NAPI (irqlab control napi DEV --threaded on) moves it into a kthread that irqlab control threads napi:DEV and irqlab control bh-budget DEV can bound"
            );
            let title = format!("Put {}'s work in a thread of its own", c.source.label);
            out.recommend(finding, Rec::new(Action::ThreadedNapi, Some(cpu), title, rule));
        }
        SourceKind::Unseen if c.virtualised => {
            // One per CPU: the idle and the loaded runs of a CPU ask the
            // same of the host, and `recommend` lists it once for both.
            let rule = format!(
                "time no tracepoint saw took the largest share of CPU {cpu}'s worst 1 ms window (each finding it answers gives the share): \
                 the hypervisor ran something else on this vCPU; nothing in this kernel can remove it"
            );
            let title = format!("Ask the host for a dedicated physical core for CPU {cpu}");
            out.recommend(finding, Rec::new(Action::DedicatedCore, Some(cpu), title, rule));
        }
        SourceKind::Unseen => {}
    }
}

/// `--taskset`: is it schedulable on each CPU, idle and under each load,
/// and what makes it so where it misses.
fn taskset_findings(survey: &Survey, out: &mut Out) {
    for check in &survey.schedulability {
        let responses = check
            .responses_ns
            .iter()
            .map(|(n, r)| format!("{n}: {}", r.map_or("misses".to_string(), short_ns)))
            .collect::<Vec<_>>()
            .join(", ");
        let id = format!("taskset-cpu{}-{}", check.cpu, check.load.name());
        let (under, rule) = match check.load {
            Load::None => ("on the idle machine".to_string(), RULE_TASKSET_IDLE),
            load => (format!("under the {} load", load.name()), RULE_TASKSET),
        };
        let measured = format!("worst responses {responses}");
        if check.schedulable_as_measured {
            let title = format!("CPU {}: your task set is schedulable {under} as measured", check.cpu);
            out.find(id, Severity::Ok, Some(check.cpu), title, measured, rule);
            continue;
        }
        let title = format!("CPU {}: your task set misses deadlines {under}", check.cpu);
        let id = out.find(id, Severity::Problem, Some(check.cpu), title, measured, rule);
        match check.load {
            Load::None => idle_miss(survey, out, &id, check),
            _ => loaded_miss(survey, out, &id, check),
        }
    }
}

const RULE_TASKSET: &str =
    "irqlab analyze (RTA, refined bound) with the load's measured curve (idle floor subtracted) as the most urgent task";
const RULE_TASKSET_IDLE: &str =
    "irqlab analyze (RTA, refined bound) with the idle run's measured curve (the interference with nothing else running) as the most urgent task";

/// The task set misses under a load: a server for the load's driver
/// thread, or the driver moved (never to the quiet CPU).
fn loaded_miss(survey: &Survey, out: &mut Out, id: &str, check: &TasksetCheck) {
    let curve = survey.cpus.iter().find(|c| c.cpu == check.cpu).and_then(|c| c.curves.iter().find(|l| l.load == check.load));
    let driver_match = curve.and_then(|c| c.driver_match.clone());
    match (schedulability::best_server(check), driver_match) {
        (Some(server), Some(matched)) => recommend_server(out, id, check, server, &matched, tick_ns(survey)),
        (None, Some(matched)) => {
            let mut rule = "no SCHED_DEADLINE budget tried (5–80% of the period) leaves the set schedulable on this CPU".to_string();
            let place = elsewhere(survey, out, check.cpu);
            if let Some(q) = place.as_ref().and_then(|p| p.kept_off) {
                rule.push_str(&format!(
                    "; the only other CPU, {q}, is the quiet CPU, kept for the time-critical task: run the task set there rather than move the driver to it"
                ));
            }
            let setting = place.filter(|p| p.kept_off.is_none()).map(|p| Declared::Threads {
                matched,
                policy: "fifo:50".into(),
                cpus: Some(p.cpus),
                kernel_thread: false,
            });
            let title = format!("Move the driver off CPU {}", check.cpu);
            out.recommend(id, Rec::new(Action::MoveDriver, Some(check.cpu), title, rule).maybe_setting(setting));
        }
        _ => {
            let rule = "this load's interrupt work has no thread irqlab can put under a server".to_string();
            let title = format!("Keep the {} load's interrupts off CPU {}", check.load.name(), check.cpu);
            out.recommend(id, Rec::new(Action::KeepInterruptsOff, Some(check.cpu), title, rule));
        }
    }
}

/// The task set misses on an idle CPU: another CPU where it fits idle,
/// the quiet one first. Where none does, the idle run's own finding (and
/// the recommendation aimed at what took its worst window) answers it.
fn idle_miss(survey: &Survey, out: &mut Out, id: &str, check: &TasksetCheck) {
    let fits = |cpu: usize| survey.schedulability.iter().any(|c| c.cpu == cpu && c.load == Load::None && c.schedulable_as_measured);
    let candidates = quietest(out).into_iter().chain(survey.options.cpus.iter().copied());
    let Some(cpu) = candidates.filter(|&c| c != check.cpu).find(|&c| fits(c)) else { return };
    let title = format!("Run your task set on CPU {cpu}");
    let rule = format!(
        "it misses deadlines beside CPU {}'s idle interference as measured and is schedulable beside CPU {cpu}'s; pin its tasks there: taskset -c {cpu} chrt -f PRIO TASK",
        check.cpu
    );
    out.recommend(id, Rec::new(Action::MoveTaskset, Some(cpu), title, rule));
}

fn recommend_server(out: &mut Out, finding: &str, check: &TasksetCheck, server: &ServerCheck, matched: &str, tick_ns: u64) {
    let (q, p) = (format_ns(server.budget_ns), format_ns(server.period_ns));
    let share = server.budget_ns as f64 / server.period_ns as f64;
    let keeps_up = match check.driver_utilization {
        Some(u) if server.keeps_up => format!("it used {} under this load, so it keeps up", pct(u)),
        Some(u) => format!("it used {} under this load: the rest waits, or is dropped", pct(u)),
        None => "its own use could not be fitted".to_string(),
    };
    let (name, command, how) = match server.kind {
        ServerKind::Deadline => (
            format!("SCHED_DEADLINE {q}/{p}"),
            Ok(Declared::Threads { matched: matched.to_string(), policy: format!("deadline:{q}/{p}"), cpus: None, kernel_thread: false }),
            format!("analysed as a deferrable server of Q + one tick ({}): the kernel checks the budget at the tick", format_ns(tick_ns)),
        ),
        ServerKind::Sporadic => (
            format!("a sporadic server {q}/{p} (SCHED_FIFO 50, then 1)"),
            // A sporadic server lives only while its `control threads` runs: no profile setting.
            Err(format!("irqlab control threads {matched} --policy sporadic:{q}/{p}:50/1 --cpu {}", check.cpu)),
            format!(
                "no SCHED_DEADLINE budget fits: the kernel checks it only at the {} tick, so it overruns by up to that; irqlab's sporadic server reacts within {}, and is analysed as a periodic task of Q + that",
                format_ns(tick_ns),
                format_ns(schedulability::SPORADIC_REACTION_NS)
            ),
        ),
    };
    let title = format!("Put {matched} under {name}");
    let rule = format!("the largest budget tried with which the set is schedulable with 20% headroom on every wcet; {how}");
    let predicted = format!(
        "schedulable with {name} on {matched}, not with the driver as measured; the driver gets at most {} of a CPU ({keeps_up})",
        pct(share)
    );
    let rec = Rec::new(Action::BoundDriver, None, title, rule).predicted(predicted);
    match command {
        Ok(setting) => out.recommend(finding, rec.setting(setting)),
        Err(command) => out.recommend(finding, rec.command(command)),
    }
}

/// Without a task set: each driver thread that takes a noticeable share of
/// a CPU, once (its heaviest CPU decides). A driver that needs at most half
/// a CPU gets a SCHED_DEADLINE budget sized to its fitted share; one that
/// needs more cannot be bounded without dropping its traffic, so it gets a
/// CPU of its own, away from the quietest one.
fn driver_servers(survey: &Survey, out: &mut Out) {
    let mut heaviest: Vec<(&str, usize, &LoadCurve)> = Vec::new();
    for cpu in &survey.cpus {
        for curve in cpu.curves.iter().filter(|c| c.load != Load::None && c.fit.is_some()) {
            let Some(matched) = curve.driver_match.as_deref() else { continue };
            if load_at(curve.judged(), MS).is_none_or(|l| l < WARN_LOAD) {
                continue;
            }
            let u = |c: &LoadCurve| c.fit.map_or(0.0, |f| f.utilization);
            match heaviest.iter_mut().find(|(m, _, _)| *m == matched) {
                Some(entry) if u(entry.2) < u(curve) => *entry = (matched, cpu.cpu, curve),
                Some(_) => {}
                None => heaviest.push((matched, cpu.cpu, curve)),
            }
        }
    }
    for (matched, cpu, curve) in heaviest {
        let finding = format!("load-cpu{cpu}-{}", curve.load.name());
        let u = curve.fit.map_or(0.0, |f| f.utilization);
        if u <= 0.5 {
            bound_driver(survey, out, &finding, matched, u, load_at(curve.judged(), MS).unwrap_or(0.0));
        } else {
            own_cpu_for_driver(survey, out, &finding, matched, u);
        }
    }
}

fn bound_driver(survey: &Survey, out: &mut Out, finding: &str, matched: &str, u: f64, at1: f64) {
    let period = 10 * MS;
    // Its fitted long-run share, rounded up to 0.5 ms: it keeps up on average.
    let budget = ((u * period as f64 / 500_000.0).ceil() as u64 * 500_000).clamp(500_000, 5 * MS);
    let server = schedulability::server_model(ServerKind::Deadline, budget, period, tick_ns(survey));
    let bound = |w| server.load(w, irqlab_analysis::DemandBound::Refined);
    let title = format!("Bound {matched} with SCHED_DEADLINE {}/{}", format_ns(budget), format_ns(period));
    let rule = format!(
        "the budget is its fitted long-run share u = {u:.2} of 10 ms, rounded up to 0.5 ms: it keeps up on average; the kernel checks the budget at the {} tick, so a burst can overrun by that",
        format_ns(tick_ns(survey))
    );
    let setting = Declared::Threads {
        matched: matched.to_string(),
        policy: format!("deadline:{}/{}", format_ns(budget), format_ns(period)),
        cpus: None,
        kernel_thread: false,
    };
    let predicted = format!(
        "its interference in 1 ms windows at most {} (measured {}), in 10 ms windows at most {}; give --taskset to check your tasks",
        pct(bound(MS)),
        pct(at1),
        pct(bound(10 * MS))
    );
    out.recommend(finding, Rec::new(Action::BoundDriver, None, title, rule).setting(setting).predicted(predicted));
}

fn own_cpu_for_driver(survey: &Survey, out: &mut Out, finding: &str, matched: &str, u: f64) {
    let quietest = quietest(out);
    let other = survey.options.cpus.iter().copied().find(|&c| Some(c) != quietest);
    let title = format!("Give {matched} a CPU of its own");
    let away = quietest.map(|q| format!(" (CPU {q}, the quiet CPU)")).unwrap_or_default();
    let rule = format!(
        "it needs u = {u:.2} of a CPU under this load: a server small enough to protect tasks beside it would drop its traffic, so keep it away from the CPU your real-time tasks use{away}"
    );
    let setting = match (quietest, other) {
        (Some(_), Some(other)) => Some(Declared::Threads {
            matched: matched.to_string(),
            policy: "fifo:50".into(),
            cpus: Some(other.to_string()),
            kernel_thread: false,
        }),
        _ => None,
    };
    out.recommend(finding, Rec::new(Action::MoveDriver, None, title, rule).maybe_setting(setting));
}

fn timer_latency(survey: &Survey, out: &mut Out) {
    for phase in &survey.latency {
        let all = &phase.report.all;
        let (Some(p99), Some(max)) = (all.p99_ns, all.max_ns) else { continue };
        let worst = phase.report.threads.iter().max_by_key(|t| t.latency.max_ns).map(|t| t.cpu);
        let severity = match max {
            m if m >= PROBLEM_LATENCY_NS => Severity::Problem,
            m if m >= WARN_LATENCY_NS => Severity::Warn,
            _ => Severity::Ok,
        };
        let at = worst.map(|c| format!(" (CPU {c})")).unwrap_or_default();
        out.find(
            format!("latency-{}", phase.load.name()),
            severity,
            worst,
            format!("timer latency {}: max {}{at}", phase_name(phase.load), short_ns(max)),
            format!(
                "p50 {}, p99 {}, max {} over {} wake-ups",
                all.p50_ns.map_or("-".into(), short_ns),
                short_ns(p99),
                short_ns(max),
                all.count
            ),
            "SCHED_FIFO 80 thread woken every 1 ms (cyclictest's method): max ≥ 1 ms problem, ≥ 100 us warning",
        );
    }
    idle_wakeups(survey, out);
}

fn phase_name(load: Load) -> String {
    match load {
        Load::None => "idle".into(),
        load => format!("under the {} load", load.name()),
    }
}

/// Waking an idle CPU can cost more than any interrupt: compare the idle
/// phase's p99 with the CPU load's, where no CPU halts.
fn idle_wakeups(survey: &Survey, out: &mut Out) {
    let p99 = |load| survey.latency.iter().find(|p| p.load == load).and_then(|p| p.report.all.p99_ns);
    let (Some(idle), Some(busy)) = (p99(Load::None), p99(Load::Cpu)) else { return };
    if idle < 20_000 || (idle as f64) < 1.5 * busy as f64 {
        return;
    }
    let id = out.find(
        "idle-wakeup".into(),
        Severity::Warn,
        None,
        format!("Waking an idle CPU costs: timer latency p99 {} idle vs {} with every CPU busy", short_ns(idle), short_ns(busy)),
        format!("p99 idle {}, p99 under the cpu load {}", short_ns(idle), short_ns(busy)),
        "idle p99 ≥ 20 us and ≥ 1.5× the p99 when no CPU halts: the exit from idle (or the hypervisor's wake-up), not interrupts",
    );
    let title = "Keep time-critical CPUs out of deep idle states".to_string();
    let rec = Rec::new(Action::IdleStates, None, title, "a CPU that does not halt wakes at once; costs power".into())
        .command("hold /dev/cpu_dma_latency at 0 while the task runs (as irqlab measure latency does), or boot with idle=poll");
    out.recommend(&id, rec);
}

fn stimulus(survey: &Survey, out: &mut Out) {
    for phase in &survey.stimulus {
        let path = |k| phase.report.paths.iter().find(|p| p.path.name() == k);
        let (Some(irq), Some(task)) = (path("icmp"), path("udp")) else { continue };
        let (Some(i50), Some(t50)) = (irq.latency.p50_ns, task.latency.p50_ns) else { continue };
        let lost = irq.lost + task.lost;
        let sent = (irq.sent + task.sent).max(1);
        let severity = if lost * 100 > sent { Severity::Warn } else { Severity::Note };
        out.find(
            format!("stimulus-{}", phase.load.name()),
            severity,
            None,
            format!(
                "From outside {}: the softirq path answers in {} (p50), a woken task in {}",
                phase_name(phase.load),
                short_ns(i50),
                short_ns(t50)
            ),
            format!(
                "p99 {} / {}; {lost} of {sent} stimuli lost",
                irq.latency.p99_ns.map_or("-".into(), short_ns),
                task.latency.p99_ns.map_or("-".into(), short_ns)
            ),
            "1 kHz stimuli from testbed host b: ICMP echo (answered in softirq) and a SCHED_FIFO 80 UDP responder; > 1% lost is a warning",
        );
    }
}

fn accounting(survey: &Survey, out: &mut Out) {
    for phase in survey.accounting.iter().filter(|p| p.load != Load::None) {
        for cpu in &phase.cpus {
            let share = (cpu.hardirq_ns + cpu.softirq_ns) as f64 / cpu.wall_ns.max(1) as f64;
            if share < 0.05 {
                continue;
            }
            let top = cpu.softirq_by_vector_ns.iter().max_by_key(|(_, &v)| v).map(|(k, _)| k.clone()).unwrap_or_default();
            out.find(
                format!("irq-time-cpu{}-{}", cpu.cpu, phase.load.name()),
                if share >= PROBLEM_LOAD { Severity::Warn } else { Severity::Note },
                Some(cpu.cpu),
                format!("CPU {}: interrupts took {} of its time under the {} load, mostly {top}", cpu.cpu, pct(share), phase.load.name()),
                format!("hard IRQ {}, softirq {} of {}", short_ns(cpu.hardirq_ns), short_ns(cpu.softirq_ns), short_ns(cpu.wall_ns)),
                "BPF accounting over the phase: interrupt time ≥ 5% of a CPU is shown, ≥ 50% warned about",
            );
        }
        if let Some(v) = phase.top_victims.first() {
            let stolen = v.stolen_hardirq_ns + v.stolen_softirq_ns;
            out.find(
                format!("victim-{}", phase.load.name()),
                Severity::Note,
                None,
                format!("Under the {} load, {} lost the most to interrupts: {}", phase.load.name(), v.task, short_ns(stolen)),
                format!("ran {}, of which Linux charged it {} of others' interrupt work", short_ns(v.run_ns + stolen), short_ns(stolen)),
                "BPF accounting: hard IRQ and softirq time that ran while the task was current (irqlab's own threads left out)",
            );
        }
    }
}

fn setting<'a>(survey: &'a Survey, name: &str) -> Option<&'a str> {
    survey.machine.settings.get(name).map(String::as_str)
}

fn settings(survey: &Survey, out: &mut Out) {
    if survey.cpus.iter().flat_map(|c| &c.curves).any(|c| c.rt_throttled) {
        let id = out.find(
            "rt-throttling".into(),
            Severity::Warn,
            None,
            "RT throttling could not be lifted: long windows may show the throttle, not interrupts".into(),
            setting(survey, "RT throttling").unwrap_or("-").to_string(),
            "a probe run marked as limited by kernel.sched_rt_runtime_us",
        );
        let rule = "the probe lifts the limit for its run and restores it".to_string();
        out.recommend(&id, Rec::new(Action::RunAsRoot, None, "Run the survey as root".into(), rule));
    }
    if let Some(g) = setting(survey, "CPU frequency governor") {
        if !g.starts_with("none") && !g.contains("performance") {
            let id = out.find(
                "governor".into(),
                Severity::Warn,
                None,
                format!("CPU frequency governor: {g}"),
                g.to_string(),
                "any governor but performance changes the clock, and with it every handler's cost",
            );
            let rule = "handlers then cost the same every time".to_string();
            let rec =
                Rec::new(Action::Governor, None, "Fix the CPU frequency".into(), rule).command("cpupower frequency-set -g performance");
            out.recommend(&id, rec);
        }
    }
    if let Some(napi) = setting(survey, "threaded NAPI") {
        let off: Vec<&str> =
            napi.split(", ").filter_map(|d| d.strip_suffix(" off")).filter(|d| !d.starts_with("ifb") && !d.starts_with("irqlab")).collect();
        if let Some(dev) = off.first() {
            let id = out.find(
                "napi-softirq".into(),
                Severity::Note,
                None,
                format!("{} receive(s) in softirq context", off.join(", ")),
                format!("threaded NAPI: {napi}"),
                "receive work in NET_RX softirq runs at whoever's expense and cannot be prioritised or bounded by a server",
            );
            let rule = "a napi/ thread can then be given a priority or a SCHED_DEADLINE budget like any thread".to_string();
            let rec = Rec::new(Action::ThreadedNapi, None, format!("Poll {dev} in a kernel thread"), rule);
            out.recommend(&id, rec.setting(Declared::NapiThreaded { dev: dev.to_string() }));
        }
    }
}

fn skipped(survey: &Survey, out: &mut Out) {
    let skipped: Vec<String> = survey
        .steps
        .iter()
        .filter(|s| s.status == StepStatus::Skipped || s.status == StepStatus::Failed)
        .map(|s| format!("{}: {}", s.name, s.detail.as_deref().unwrap_or("-")))
        .collect();
    if !skipped.is_empty() {
        out.find(
            "not-measured".into(),
            Severity::Note,
            None,
            format!("{} step(s) could not run here", skipped.len()),
            skipped.join("; "),
            "a step that lacks a privilege, kernel feature or tool is skipped with its reason; the rest ran",
        );
    }
}

fn verdict(findings: &[Finding], complete: bool) -> Verdict {
    let count = |s| findings.iter().filter(|f| f.severity == s).count();
    let worst = findings.first();
    let severity = worst.map_or(Severity::Ok, |f| f.severity);
    let lead = match severity {
        Severity::Problem | Severity::Warn => {
            format!(
                "{} problem(s), {} warning(s). {}",
                count(Severity::Problem),
                count(Severity::Warn),
                worst.map_or("", |f| f.title.as_str())
            )
        }
        _ => "No interrupt interference worth acting on was measured.".to_string(),
    };
    let headline = if complete { lead } else { format!("INCOMPLETE survey. {lead}") };
    Verdict { severity, headline }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_durations_keep_three_digits() {
        assert_eq!(short_ns(160_098_535), "160ms");
        assert_eq!(short_ns(68_973), "69us");
        assert_eq!(short_ns(10_817_324), "10.8ms");
        assert_eq!(short_ns(4_500_000), "4.5ms");
        assert_eq!(short_ns(2_000_000_000), "2s");
        assert_eq!(short_ns(950), "950ns");
    }
}
