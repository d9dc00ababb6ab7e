//! The survey's one page (`out/index.html` of `make demo`): what a user
//! reads after `irqlab survey`, in the order they ask: the verdict, what to
//! change, where the interference is (a small plot per CPU), how late
//! timers and packets are, who lost time, whether their task set fits, and
//! which steps ran.
//!
//! One self-contained file: plots are inline SVG, the CSS is inline, and
//! the page's Content-Security-Policy forbids anything else (see
//! `irqlab_report::html`). Everything from the document is escaped. A
//! section never shows an empty heading: without data it says why, taken
//! from the steps that should have measured it.

use crate::before_after::Baseline;
use crate::doc::{
    AccountingPhase, CpuFigure, CpuSurvey, Declared, LatencyPhase, Load, LoadCurve, Severity, StepStatus, StimulusPhase, Survey,
    TaskFigure, TasksetCheck,
};
use crate::findings::load_at;
use irqlab_analysis::curve::Curve;
use irqlab_analysis::units::format_ns;
use irqlab_measure::latency::{LinearHistogram, StatsSummary};
use irqlab_report::html::{HtmlError, Page, Section, Table, Tone};
use irqlab_report::plot::{LinePlot, PlotError, Series};
use std::path::{Path, PathBuf};

const MS: u64 = 1_000_000;
/// Plot size: small enough for two side by side.
pub(crate) const PLOT_SIZE: (u32, u32) = (480, 260);
/// A latency histogram is re-binned to at most this many bins.
const HISTOGRAM_BINS: u64 = 120;

/// Why the page could not be made.
#[derive(Debug, thiserror::Error)]
pub enum PageError {
    #[error(transparent)]
    Plot(#[from] PlotError),
    #[error(transparent)]
    Html(#[from] HtmlError),
    #[error("{}: {source}", path.display())]
    Write { path: PathBuf, source: std::io::Error },
}

/// Renders the survey as one self-contained HTML page; `links` are
/// (title, relative href) pairs listed at the bottom (other reports).
pub fn render(survey: &Survey, links: &[(String, String)]) -> Result<String, PageError> {
    render_compared(survey, None, links)
}

/// [`render`], with an earlier survey beside this one (`--compare`): its
/// "Before and after" section right below the verdict.
pub fn render_compared(survey: &Survey, baseline: Option<&Baseline>, links: &[(String, String)]) -> Result<String, PageError> {
    let mut page = Page::new("irqlab survey").section(verdict(survey));
    if let Some(baseline) = baseline {
        page = page.section(crate::before_after::section(baseline, survey)?);
    }
    page = page
        .section(recommendations(survey))
        .section(findings(survey))
        .section(interference(survey)?)
        .section(timer_latency(survey)?)
        .section(stimulus_latency(survey)?)
        .section(accounting(survey));
    if !survey.schedulability.is_empty() {
        page = page.section(taskset(survey));
    }
    page = page.section(steps(survey));
    if !links.is_empty() {
        page = page.section(Section::new("Other reports").links(links));
    }
    Ok(page.render()?)
}

/// Renders the page and writes it to `path` atomically.
pub fn write(survey: &Survey, links: &[(String, String)], path: &Path) -> Result<(), PageError> {
    let html = render(survey, links)?;
    irqlab_report::write_atomic(path, html.as_bytes()).map_err(|source| PageError::Write { path: path.to_path_buf(), source })
}

pub(crate) fn tone(severity: Severity) -> Tone {
    match severity {
        Severity::Ok => Tone::Ok,
        Severity::Note => Tone::Note,
        Severity::Warn => Tone::Warn,
        Severity::Problem => Tone::Problem,
    }
}

pub(crate) fn severity_name(severity: Severity) -> &'static str {
    match severity {
        Severity::Ok => "ok",
        Severity::Note => "note",
        Severity::Warn => "warning",
        Severity::Problem => "problem",
    }
}

fn status_name(status: StepStatus) -> &'static str {
    match status {
        StepStatus::Done => "done",
        StepStatus::Skipped => "skipped",
        StepStatus::Failed => "failed",
        StepStatus::Interrupted => "interrupted",
    }
}

/// The verdict, one line on the machine and the run, and the banner of an
/// incomplete survey.
fn verdict(survey: &Survey) -> Section {
    let mut section =
        Section::new("Verdict").callout(tone(survey.verdict.severity), &survey.verdict.headline).paragraph(machine_line(survey));
    if !survey.complete {
        let unfinished: Vec<String> =
            survey.steps.iter().filter(|s| !matches!(s.status, StepStatus::Done | StepStatus::Skipped)).map(step_reason).collect();
        let which = if unfinished.is_empty() { "it was stopped before its last steps".to_string() } else { unfinished.join("; ") };
        section =
            section.callout(Tone::Problem, format!("INCOMPLETE: what is below was measured, the rest was not. Not finished: {which}."));
    }
    section
}

fn machine_line(survey: &Survey) -> String {
    let o = &survey.options;
    let cpus: Vec<String> = o.cpus.iter().map(ToString::to_string).collect();
    let loads: Vec<&str> = std::iter::once("idle").chain(o.loads.iter().filter(|l| **l != Load::None).map(|l| l.name())).collect();
    format!(
        "Kernel {}. CPUs surveyed: {}. Loads: {}. {} run (probe {}, timer latency {}, stimulus {} per load), started {}, took {}.",
        survey.machine.kernel.trim(),
        cpus.join(", "),
        loads.join(", "),
        if o.quick { "Quick" } else { "Full" },
        short_ns(o.probe_ns),
        short_ns(o.latency_ns),
        short_ns(o.stimulus_ns),
        utc(survey.started_unix_s),
        short_ns(survey.elapsed_ns)
    )
}

/// "name: status (detail)".
fn step_reason(step: &crate::doc::Step) -> String {
    let detail = step.detail.as_ref().map(|d| format!(" ({d})")).unwrap_or_default();
    format!("{}: {}{detail}", step.name, status_name(step.status))
}

/// Why a part of the page has no data: the steps named `prefix...` that
/// did not finish, or that none ran.
fn why_missing(survey: &Survey, prefix: &str, what: &str) -> String {
    let reasons: Vec<String> =
        survey.steps.iter().filter(|s| s.name.starts_with(prefix) && s.status != StepStatus::Done).map(step_reason).collect();
    if reasons.is_empty() {
        format!("No {what}: no step of this survey measured it.")
    } else {
        format!("No {what}. {}.", reasons.join("; "))
    }
}

fn recommendations(survey: &Survey) -> Section {
    let mut section = Section::new("What to change");
    if survey.recommendations.is_empty() {
        return section.paragraph("No recommendation: nothing measured called for a change (the findings below say what was measured).");
    }
    for r in &survey.recommendations {
        section = section.subheading(&r.title).paragraph(format!("Why: {}.", r.rule));
        // One recommendation made for several findings is shown once, with them all.
        let answers = r.answers();
        if answers.len() > 1 {
            let title = |id: &str| survey.findings.iter().find(|f| f.id == id).map_or(id.to_string(), |f| f.title.clone());
            section = section.paragraph(format!("For: {}.", answers.iter().map(|id| title(id)).collect::<Vec<_>>().join("; ")));
        }
        if let Some(command) = &r.command {
            section = section.code(command);
        }
        if let Some(Declared::Threads { matched, .. }) = &r.setting {
            if matched.starts_with("pid:") {
                section = section.paragraph(format!(
                    "{matched} is this boot's only: no name but its pid told the thread apart here, so the profile marks it \
                     this_boot and `control apply` on a later boot reports it as missing."
                ));
            }
        }
        if let Some(predicted) = &r.predicted {
            section = section.paragraph(format!("Predicted: {predicted}."));
        }
    }
    let applied = survey.recommendations.iter().filter(|r| r.setting.is_some()).count();
    if let (Some(profile), true) = (&survey.profile, applied > 0) {
        section = section
            .subheading("All of them at once")
            .paragraph(format!(
                "The {applied} setting(s) above are declared in {profile}: applied as one change (all or nothing), held until Ctrl-C; \
                 --persist keeps them (undo: irqlab control revert --all), --dry-run shows old -> new. Then survey again with \
                 --compare to see what changed."
            ))
            .code(format!("irqlab control apply {profile}"));
    }
    section
}

pub(crate) fn findings(survey: &Survey) -> Section {
    let section = Section::new("Findings");
    if survey.findings.is_empty() {
        return section.paragraph("No findings: no rule found anything to report in what was measured (the steps below say what ran).");
    }
    let mut sorted: Vec<_> = survey.findings.iter().collect();
    sorted.sort_by_key(|f| std::cmp::Reverse(f.severity));
    let mut table = Table::new(["severity", "CPU", "finding", "measured", "rule"]).text_columns([2, 3, 4]);
    for f in sorted {
        let cpu = f.cpu.map(|c| c.to_string()).unwrap_or_default();
        table.push_row([severity_name(f.severity).to_string(), cpu, f.title.clone(), f.measured.clone(), f.rule.clone()]);
    }
    section.table(table)
}

/// One small plot per CPU: max load per window, each load with its fit.
pub(crate) fn interference(survey: &Survey) -> Result<Section, PageError> {
    let mut section = Section::new("Interference per CPU");
    if survey.cpus.iter().all(|c| c.curves.is_empty()) {
        return Ok(section.paragraph(why_missing(survey, "probe", "interference curves")));
    }
    for cpu in &survey.cpus {
        if cpu.curves.is_empty() {
            section = section.paragraph(why_missing(survey, &format!("probe cpu {} ", cpu.cpu), &format!("curve on CPU {}", cpu.cpu)));
            continue;
        }
        section = section.figure(cpu_plot(cpu)?, cpu_caption(cpu));
        for curve in &cpu.curves {
            if let Some(plot) = sources_plot(cpu.cpu, curve)? {
                section = section.figure(plot, sources_caption(cpu.cpu, curve));
            }
        }
        for note in cpu.curves.iter().filter_map(|c| curve_note(cpu.cpu, c)) {
            section = section.paragraph(note);
        }
    }
    if let Some(table) = interrupt_table(survey) {
        section = section.subheading("Interrupts during the probe").table(table).paragraph(
            "Per second on the probed CPU while the probe spun (/proc/interrupts): the local timer (LOC, which carries \
             the scheduler tick: HZ while the tick runs, about 1/s with nohz_full on the CPU and the probe alone on it), \
             and every other interrupt together, with the kinds that came most often (/proc/interrupts' rows: RES \
             rescheduling IPIs, CAL function calls, IWI irq work, a numbered IRQ by its handler). Counts: they hold \
             under emulation too.",
        );
    }
    Ok(section)
}

/// One row per probe run that recorded its CPU's interrupt counts; `None`
/// when none did (surveys from before they were recorded).
fn interrupt_table(survey: &Survey) -> Option<Table> {
    let mut table = Table::new(["CPU", "load", "local timer /s", "other IRQs /s", "the others, most first", "over"]).text_columns([1, 4]);
    let mut any = false;
    for cpu in &survey.cpus {
        for curve in &cpu.curves {
            let Some(r) = &curve.interrupts else { continue };
            any = true;
            table.push_row([
                cpu.cpu.to_string(),
                curve.load.name().to_string(),
                per_s(r.local_timer_per_s),
                per_s(r.other_per_s),
                top_rows(r, 3),
                short_ns(r.window_ns),
            ]);
        }
    }
    any.then_some(table)
}

/// The `n` kinds of other interrupts that came most often (`RES 60/s,
/// IWI 40/s`); `-` when none was recorded.
pub fn top_rows(rates: &crate::doc::InterruptRates, n: usize) -> String {
    let mut rows: Vec<(&String, &f64)> = rates.other_by_row.iter().collect();
    rows.sort_by(|a, b| b.1.total_cmp(a.1).then(a.0.cmp(b.0)));
    let top: Vec<String> = rows.iter().take(n).map(|(name, rate)| format!("{name} {}/s", per_s(**rate))).collect();
    if top.is_empty() {
        "-".to_string()
    } else {
        top.join(", ")
    }
}

fn cpu_plot(cpu: &CpuSurvey) -> Result<String, PlotError> {
    let mut plot = LinePlot::new(format!("CPU {}: max load per window", cpu.cpu))
        .x_label("window (ms)")
        .y_label("max load (%)")
        .log_x(true)
        .y_range(0.0..100.0)
        .size(PLOT_SIZE.0, PLOT_SIZE.1);
    for (i, curve) in cpu.curves.iter().enumerate() {
        let judged = curve.judged();
        let points = judged.points.iter().map(|p| (p.window_ns as f64 / 1e6, p.max_load * 100.0)).collect();
        plot = plot.series(Series::points(curve.load.name(), points).color(i));
        if let Some(fit) = curve.fit {
            let windows = log_windows(judged);
            let line = windows.into_iter().map(|w| (w as f64 / 1e6, fit.load(w) * 100.0)).collect();
            plot = plot.series(Series::dashed(format!("{} fit", curve.load.name()), line).color(i));
        }
    }
    plot.to_svg()
}

/// Sources drawn as layers of their own; the rest are "others".
const PLOTTED_SOURCES: usize = 4;

/// What ran in each window length's max-load window, stacked (the top is
/// the measured max-load curve); `None` without sources or gaps.
fn sources_plot(cpu: usize, curve: &LoadCurve) -> Result<Option<String>, PlotError> {
    let Some(sources) = curve.sources.as_ref() else { return Ok(None) };
    let layers = sources.layers(PLOTTED_SOURCES);
    if layers.is_empty() {
        return Ok(None);
    }
    let mut plot = LinePlot::new(format!("CPU {cpu}, {}: what ran in the max-load windows", curve.load.name()))
        .x_label("window (ms)")
        .y_label("max load (%)")
        .log_x(true)
        .y_range(0.0..100.0)
        .size(PLOT_SIZE.0, PLOT_SIZE.1);
    let in_ms =
        layers.into_iter().map(|l| (l.name, l.points.into_iter().map(|(w, top)| (w as f64 / 1e6, top * 100.0)).collect())).collect();
    for series in Series::stacked(in_ms, 20) {
        plot = plot.series(series);
    }
    plot.to_svg().map(Some)
}

fn sources_caption(cpu: usize, curve: &LoadCurve) -> String {
    let mut caption = format!(
        "CPU {cpu}, {}: for each window length, who ran instead of the probe in the window with the most interference (raw, idle floor included), by the tracepoint that saw it; unseen: time no tracepoint saw.",
        curve.load.name()
    );
    if let Some(steal) = curve.steal_ns.filter(|&s| s > 0) {
        caption.push_str(&format!(" Hypervisor steal on this CPU during the run: {}.", short_ns(steal)));
    }
    if let Some(s) = &curve.sources {
        if s.lost_segments > 0 {
            caption.push_str(&format!(" {} segments lost (counted as unseen).", s.lost_segments));
        }
    }
    caption
}

/// 40 log-spaced windows across the curve's range, for a fit's line.
fn log_windows(curve: &Curve) -> Vec<u64> {
    let lo = curve.points.iter().map(|p| p.window_ns).min().unwrap_or(10_000).max(1) as f64;
    let hi = curve.points.iter().map(|p| p.window_ns).max().unwrap_or(100 * MS).max(2) as f64;
    (0..40).map(|k| (lo * (hi / lo).powf(f64::from(k) / 39.0)).round() as u64).collect()
}

fn cpu_caption(cpu: &CpuSurvey) -> String {
    let at = |window| {
        let loads: Vec<String> =
            cpu.curves.iter().map(|c| format!("{} {}", c.load.name(), load_at(c.judged(), window).map_or("-".into(), pct))).collect();
        loads.join(", ")
    };
    let mut caption = format!("Largest load in 1 ms windows: {}; in 10 ms: {}.", at(MS), at(10 * MS));
    if cpu.curves.iter().any(|c| c.attributed.is_some()) {
        caption.push_str(" Loaded runs show the load's own share (measured minus the idle floor).");
    }
    if cpu.curves.iter().any(|c| c.fit.is_some()) {
        caption.push_str(" Dashed: the fitted hyperbola.");
    }
    caption
}

/// What the reader must know about one curve beyond its points.
fn curve_note(cpu: usize, curve: &LoadCurve) -> Option<String> {
    let mut notes = Vec::new();
    if !curve.complete {
        notes.push("the run was stopped early".to_string());
    }
    if curve.rt_throttled {
        notes.push("RT throttling could not be lifted and may explain part of the curve".to_string());
    }
    if let Some(e) = &curve.fit_error {
        notes.push(format!("no fit: {e}"));
    }
    if !curve.driver_threads.is_empty() {
        notes.push(format!("carried by {}", curve.driver_threads.join(", ")));
    }
    (!notes.is_empty()).then(|| format!("CPU {cpu}, {}: {}.", curve.load.name(), notes.join("; ")))
}

fn timer_latency(survey: &Survey) -> Result<Section, PageError> {
    let section = Section::new("Timer latency");
    let Some(first) = survey.latency.first() else {
        return Ok(section.paragraph(why_missing(survey, "latency", "timer latency")));
    };
    let histograms: Vec<(String, &StatsSummary)> = survey.latency.iter().map(|p| (p.load.name().to_string(), &p.report.all)).collect();
    let r = &first.report;
    let caption = format!(
        "Wake-ups per latency bin, every surveyed CPU together (cyclictest's method: {} at priority {}, every {}).{}",
        r.policy,
        r.priority,
        short_ns(r.interval_ns),
        overflow_note(&histograms)
    );
    let mut table = Table::new(["load", "CPU", "wake-ups", "p50", "p99", "max", "what ran in the worst (flight recorder)"]);
    for phase in &survey.latency {
        latency_rows(&mut table, phase);
    }
    Ok(section.figure(histogram_plot("Timer latency", &histograms)?, caption).table(table))
}

fn latency_rows(table: &mut Table, phase: &LatencyPhase) {
    let incomplete = if phase.report.complete { "" } else { " (stopped early)" };
    for t in &phase.report.threads {
        let l = &t.latency;
        let worst = phase.worst.iter().find(|w| w.cpu == t.cpu);
        let cause = match (worst.and_then(|w| w.cause.as_ref()), &phase.recorder) {
            (Some(c), _) => c.verdict.clone(),
            (None, Some(note)) if worst.is_some() => format!("not explained: {note}"),
            _ => "-".to_string(),
        };
        table.push_row([
            format!("{}{incomplete}", phase.load.name()),
            t.cpu.to_string(),
            l.count.to_string(),
            opt_ns(l.p50_ns),
            opt_ns(l.p99_ns),
            opt_ns(l.max_ns),
            cause,
        ]);
    }
}

fn stimulus_latency(survey: &Survey) -> Result<Section, PageError> {
    let section = Section::new("Stimulus latency");
    if survey.stimulus.is_empty() {
        return Ok(section.paragraph(why_missing(survey, "stimulus", "stimulus latency")));
    }
    let mut histograms = Vec::new();
    let mut table = Table::new(["load", "path", "answered", "lost", "p50", "p99", "max"]);
    for phase in &survey.stimulus {
        stimulus_rows(&mut table, &mut histograms, phase);
    }
    let stamps: Vec<&str> = survey.stimulus.iter().map(|p| p.report.timestamps.as_str()).collect();
    let caption = format!(
        "Round trips from the testbed's other end per latency bin: the softirq path is a kernel ICMP echo, the task path a UDP responder woken to answer ({} timestamps).{}",
        stamps.join("/"),
        overflow_note(&histograms)
    );
    let mut section = section.figure(histogram_plot("Stimulus latency", &histograms)?, caption).table(table);
    let skipped: Vec<String> =
        survey.steps.iter().filter(|s| s.name.starts_with("stimulus") && s.status != StepStatus::Done).map(step_reason).collect();
    if !skipped.is_empty() {
        section = section.paragraph(format!("Not measured: {}.", skipped.join("; ")));
    }
    Ok(section)
}

fn stimulus_rows<'a>(table: &mut Table, histograms: &mut Vec<(String, &'a StatsSummary)>, phase: &'a StimulusPhase) {
    for p in &phase.report.paths {
        let path = match p.path.name() {
            "icmp" => "softirq (icmp)",
            "udp" => "task (udp)",
            other => other,
        };
        histograms.push((format!("{} {path}", phase.load.name()), &p.latency));
        let l = &p.latency;
        table.push_row([
            phase.load.name().to_string(),
            path.to_string(),
            p.answered.to_string(),
            p.lost.to_string(),
            opt_ns(l.p50_ns),
            opt_ns(l.p99_ns),
            opt_ns(l.max_ns),
        ]);
    }
}

/// Latency histograms drawn as outlines on one plot, in % of each one's
/// samples (log scale, so the rare long ones show), on common bins.
fn histogram_plot(title: &str, histograms: &[(String, &StatsSummary)]) -> Result<String, PlotError> {
    let width = common_bin_ns(histograms.iter().map(|(_, s)| &s.histogram));
    let mut plot = LinePlot::new(title).x_label("latency (µs)").y_label("samples (%)").log_y(true).size(PLOT_SIZE.0, PLOT_SIZE.1);
    for (name, stats) in histograms {
        plot = plot.series(Series::steps(name.clone(), histogram_points(&stats.histogram, width)));
    }
    plot.to_svg()
}

/// A bin width that is a multiple of the widest bin and gives at most
/// [`HISTOGRAM_BINS`] bins over the longest histogram.
fn common_bin_ns<'a>(histograms: impl Iterator<Item = &'a LinearHistogram> + Clone) -> u64 {
    let bucket = histograms.clone().map(|h| h.bucket_ns).max().unwrap_or(1_000).max(1);
    let span = histograms.map(|h| h.bucket_ns * h.counts.len() as u64).max().unwrap_or(bucket);
    bucket * span.div_ceil(bucket * HISTOGRAM_BINS).max(1)
}

/// Left edges (µs) and each bin's share of the samples (%), re-binned to
/// `width_ns`, then the last bin's right edge at 0.
fn histogram_points(h: &LinearHistogram, width_ns: u64) -> Vec<(f64, f64)> {
    let total = (h.counts.iter().sum::<u64>() + h.overflow).max(1) as f64;
    let bins = (h.bucket_ns * h.counts.len() as u64).div_ceil(width_ns) as usize;
    let mut merged = vec![0u64; bins];
    for (i, count) in h.counts.iter().enumerate() {
        merged[(i as u64 * h.bucket_ns / width_ns) as usize] += count;
    }
    let us = |bin: usize| (bin as u64 * width_ns) as f64 / 1e3;
    let mut points: Vec<(f64, f64)> = merged.iter().enumerate().map(|(i, &c)| (us(i), c as f64 / total * 100.0)).collect();
    points.push((us(bins), 0.0));
    points
}

fn overflow_note(histograms: &[(String, &StatsSummary)]) -> String {
    let over: Vec<String> =
        histograms.iter().filter(|(_, s)| s.histogram.overflow > 0).map(|(n, s)| format!("{n}: {}", s.histogram.overflow)).collect();
    if over.is_empty() {
        String::new()
    } else {
        format!(" Beyond the last bin: {}.", over.join(", "))
    }
}

fn accounting(survey: &Survey) -> Section {
    let mut section = Section::new("Who lost time to interrupts");
    if survey.accounting.is_empty() {
        return section.paragraph(why_missing(survey, "accounting", "accounting"));
    }
    section = section.paragraph(
        "BPF accounting during each load: hard-IRQ and softirq time that ran while a task was current (taken from it), \
         and softirq time done on a task's behalf (given to it).",
    );
    for phase in &survey.accounting {
        section = accounting_phase(section, phase);
    }
    section
}

fn accounting_phase(section: Section, phase: &AccountingPhase) -> Section {
    let incomplete = if phase.complete { "" } else { ", stopped early" };
    let during = if phase.load == Load::None { "Idle".to_string() } else { format!("Under the {} load", phase.load.name()) };
    let mut section = section.subheading(format!("{during} ({}{incomplete})", short_ns(phase.duration_ns)));
    if phase.top_victims.is_empty() {
        section = section.paragraph("No task lost time to interrupts.");
    } else {
        let mut victims =
            Table::new(["task", "ran", "hard IRQ while current", "softirq while current", "taken", "mostly"]).text_columns([5]);
        for t in &phase.top_victims {
            victims.push_row(victim_row(t));
        }
        section = section.table(victims);
    }
    if !phase.top_beneficiaries.is_empty() {
        let mut served = Table::new(["task served", "softirq on its behalf", "mostly"]).text_columns([2]);
        for t in &phase.top_beneficiaries {
            served.push_row([t.task.clone(), short_ns(t.served_softirq_ns), t.top_vector.clone().unwrap_or_default()]);
        }
        section = section.table(served);
    }
    if phase.cpus.is_empty() {
        section
    } else {
        section.table(cpu_split(&phase.cpus))
    }
}

fn victim_row(t: &TaskFigure) -> [String; 6] {
    let taken = t.stolen_hardirq_ns + t.stolen_softirq_ns;
    let share = if t.run_ns > 0 { pct(taken as f64 / (t.run_ns + taken) as f64) } else { "-".into() };
    [
        t.task.clone(),
        short_ns(t.run_ns),
        short_ns(t.stolen_hardirq_ns),
        short_ns(t.stolen_softirq_ns),
        share,
        t.top_vector.clone().unwrap_or_default(),
    ]
}

/// Per CPU: hard-IRQ and softirq time as a share of the wall time, the
/// softirq split by vector (largest first).
fn cpu_split(cpus: &[CpuFigure]) -> Table {
    let mut vectors: Vec<(&String, u64)> = Vec::new();
    for (name, ns) in cpus.iter().flat_map(|c| &c.softirq_by_vector_ns) {
        match vectors.iter_mut().find(|(n, _)| *n == name) {
            Some(entry) => entry.1 += ns,
            None => vectors.push((name, *ns)),
        }
    }
    vectors.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    let headers = ["CPU", "hard IRQ", "softirq"].into_iter().map(String::from).chain(vectors.iter().map(|(n, _)| (*n).clone()));
    let mut table = Table::new(headers);
    for c in cpus {
        let share = |ns: u64| if c.wall_ns > 0 { pct(ns as f64 / c.wall_ns as f64) } else { "-".into() };
        let split = vectors.iter().map(|(n, _)| c.softirq_by_vector_ns.get(*n).map_or("-".into(), |&ns| share(ns)));
        table.push_row([c.cpu.to_string(), share(c.hardirq_ns), share(c.softirq_ns)].into_iter().chain(split));
    }
    table
}

fn taskset(survey: &Survey) -> Section {
    let file = survey.options.taskset.as_ref().map_or("the task set", |t| t.file.as_str());
    let mut section = Section::new("Your task set").paragraph(format!(
        "{file} checked with the idle run's measured curve, and with each load's (idle floor subtracted), as the most urgent task, \
         then with the driver thread under each SCHED_DEADLINE budget tried (analysed as a deferrable server)."
    ));
    for check in &survey.schedulability {
        section = taskset_check(section, check);
    }
    section
}

fn taskset_check(section: Section, check: &TasksetCheck) -> Section {
    let verdict = if check.schedulable_as_measured { "schedulable as measured" } else { "not schedulable as measured" };
    let driver = check.driver_utilization.map(|u| format!(", driver uses {}", pct(u))).unwrap_or_default();
    let mut responses = Table::new(["task", "worst response"]);
    for (task, response) in &check.responses_ns {
        responses.push_row([task.clone(), response.map_or("misses its deadline".into(), short_ns)]);
    }
    let under = match check.load {
        Load::None => "on the idle machine".to_string(),
        load => format!("under the {} load", load.name()),
    };
    let mut section = section.subheading(format!("CPU {} {under}: {verdict}{driver}", check.cpu)).table(responses);
    if !check.servers.is_empty() {
        let mut servers = Table::new(["server budget / period", "share", "keeps up", "task set schedulable"]).text_columns([2, 3]);
        for s in &check.servers {
            let share = pct(s.budget_ns as f64 / s.period_ns.max(1) as f64);
            servers.push_row([
                format!("{} / {}", short_ns(s.budget_ns), short_ns(s.period_ns)),
                share,
                yes_no(s.keeps_up),
                yes_no(s.schedulable),
            ]);
        }
        section = section.table(servers);
    }
    section
}

fn steps(survey: &Survey) -> Section {
    let section = Section::new("Steps");
    if survey.steps.is_empty() {
        return section.paragraph("No step ran.");
    }
    let mut table = Table::new(["step", "status", "took", "detail"]).text_columns([1, 3]);
    for s in &survey.steps {
        let took = if s.elapsed_ns == 0 && s.status != StepStatus::Done { "-".to_string() } else { short_ns(s.elapsed_ns) };
        table.push_row([s.name.clone(), status_name(s.status).to_string(), took, s.detail.clone().unwrap_or_default()]);
    }
    section.table(table)
}

fn yes_no(b: bool) -> String {
    if b { "yes" } else { "no" }.to_string()
}

/// A fraction as a percentage: one decimal below 10%.
pub(crate) fn pct(x: f64) -> String {
    let p = x * 100.0;
    if p < 10.0 {
        format!("{p:.1}%")
    } else {
        format!("{p:.0}%")
    }
}

/// A rate per second: whole numbers from 10 on, one decimal below (a
/// stopped tick's 1/s shows as 1.0, not as 1 beside 250).
pub(crate) fn per_s(x: f64) -> String {
    if x >= 10.0 {
        format!("{x:.0}")
    } else {
        format!("{x:.1}")
    }
}

fn opt_ns(ns: Option<u64>) -> String {
    ns.map_or("-".into(), short_ns)
}

/// Nanoseconds to three significant digits with a unit ("65.5us").
pub(crate) fn short_ns(ns: u64) -> String {
    let digits = ns.checked_ilog10().unwrap_or(0) + 1;
    let rounded = if digits > 3 {
        let unit = 10u64.pow(digits - 3);
        (ns / unit + u64::from(ns % unit >= unit / 2)).saturating_mul(unit)
    } else {
        ns
    };
    format_ns(rounded)
}

/// Seconds since the epoch as "YYYY-MM-DD HH:MM UTC" (the civil calendar
/// from days, H. Hinnant's algorithm).
pub(crate) fn utc(unix_s: u64) -> String {
    let days = (unix_s / 86_400) as i64 + 719_468;
    let era = days.div_euclid(146_097);
    let doe = days.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    let secs = unix_s % 86_400;
    format!("{year:04}-{month:02}-{day:02} {:02}:{:02} UTC", secs / 3600, secs % 3600 / 60)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::doc::InterruptRates;

    fn fixture() -> Survey {
        let text = include_str!("../tests/fixtures/survey.json");
        serde_json::from_str(text).expect("the fixture is a survey document")
    }

    fn section<'a>(html: &'a str, heading: &str) -> &'a str {
        let start = html.find(&format!("<h2>{heading}</h2>")).unwrap_or_else(|| panic!("no section {heading}"));
        let end = html[start..].find("</section>").map_or(html.len(), |e| start + e);
        &html[start..end]
    }

    #[test]
    fn renders_the_fixture_in_order() {
        let links = [("reproduce load-bounds".to_string(), "load-bounds/index.html".to_string())];
        let html = render(&fixture(), &links).unwrap();
        assert!(html.contains("<p class=\"callout problem\">Under network load the driver takes up to 36% of CPU 1"), "{html}");
        let order = ["Verdict", "What to change", "Findings", "Interference per CPU", "Timer latency", "Stimulus latency"];
        let order = order.iter().chain(&["Who lost time to interrupts", "Your task set", "Steps", "Other reports"]);
        let positions: Vec<usize> = order.map(|h| html.find(&format!("<h2>{h}</h2>")).unwrap_or_else(|| panic!("{h}"))).collect();
        assert!(positions.windows(2).all(|w| w[0] < w[1]), "{positions:?}");
        assert!(html.contains("Kernel 6.1.0-27-amd64") && html.contains("started 2025-11-25 10:00 UTC, took 157s"), "{html}");
        assert!(!html.contains("INCOMPLETE"));
        assert!(html.contains("<a href=\"load-bounds&#x2f;index.html\">reproduce load-bounds</a>"));
    }

    #[test]
    fn one_plot_per_cpu_and_per_latency_kind() {
        let html = render(&fixture(), &[]).unwrap();
        // A curve plot per CPU, and CPU 1's two runs' sources stacked.
        assert_eq!(section(&html, "Interference per CPU").matches("<svg").count(), 4);
        assert!(section(&html, "Interference per CPU").contains("CPU 1, net: what ran in the max-load windows"));
        assert!(html.contains("CPU 0: max load per window") && html.contains("CPU 1: max load per window"));
        assert!(html.contains("Largest load in 1 ms windows: idle 0.5%, net 36%; in 10 ms: idle 0.5%, net 32%."), "{html}");
        assert_eq!(section(&html, "Timer latency").matches("<svg").count(), 1);
        assert_eq!(section(&html, "Stimulus latency").matches("<svg").count(), 1);
        assert_eq!(html.matches("<svg").count(), 6);
        assert!(!html.contains("Other reports"));
    }

    #[test]
    fn the_probe_runs_interrupt_rates_are_a_table() {
        let mut survey = fixture();
        // The fixture is from before the rates were recorded: no table.
        assert!(!render(&survey, &[]).unwrap().contains("Interrupts during the probe"));
        let rates = |loc, other| {
            Some(InterruptRates { local_timer_per_s: loc, other_per_s: other, other_by_row: Default::default(), window_ns: 1_900_000_000 })
        };
        survey.cpus[0].curves[0].interrupts = rates(250.0, 31.6);
        let by_row = &mut survey.cpus[0].curves[0].interrupts.as_mut().unwrap().other_by_row;
        by_row.extend([("RES".to_string(), 30.0), ("IWI".to_string(), 1.6)]);
        survey.cpus[1].curves[0].interrupts = rates(1.0, 4.0);
        let html = render(&survey, &[]).unwrap();
        let interference = section(&html, "Interference per CPU");
        assert!(interference.contains("<tr><td>0</td><td class=\"text\">idle</td><td>250</td><td>32</td><td class=\"text\">RES 30&#x2f;s, IWI 1.6&#x2f;s</td><td>1.9s</td></tr>"), "{interference}");
        assert!(interference
            .contains("<tr><td>1</td><td class=\"text\">idle</td><td>1.0</td><td>4.0</td><td class=\"text\">-</td><td>1.9s</td></tr>"));
    }

    #[test]
    fn recommendation_commands_are_code_blocks() {
        let html = render(&fixture(), &[]).unwrap();
        let change = section(&html, "What to change");
        assert!(
            change.contains("<pre><code>irqlab control threads napi:irqlab-b --policy deadline:4ms&#x2f;10ms</code></pre>"),
            "{change}"
        );
        assert!(change.contains("<h3>Put napi:irqlab-b under SCHED_DEADLINE 4ms&#x2f;10ms</h3>"));
        assert!(change.contains("Predicted: schedulable with SCHED_DEADLINE"));
    }

    #[test]
    fn a_hostile_task_name_is_text() {
        let html = render(&fixture(), &[]).unwrap();
        assert!(!html.contains("<script"), "raw script tag");
        assert!(section(&html, "Who lost time to interrupts").contains("<td>&lt;script&gt;alert(1)&lt;&#x2f;script&gt;&#x2f;4242</td>"));
    }

    #[test]
    fn an_incomplete_survey_has_a_banner_naming_what_did_not_finish() {
        let mut survey = fixture();
        survey.complete = false;
        let step = survey.steps.iter_mut().find(|s| s.name == "latency net").unwrap();
        step.status = StepStatus::Interrupted;
        step.detail = Some("stopped by Ctrl-C".into());
        let html = render(&survey, &[]).unwrap();
        let verdict = section(&html, "Verdict");
        assert!(verdict.contains("<p class=\"callout problem\">INCOMPLETE: "), "{verdict}");
        assert!(verdict.contains("latency net: interrupted (stopped by Ctrl-C)"));
    }

    #[test]
    fn a_section_without_data_says_why() {
        let mut survey = fixture();
        survey.accounting.clear();
        survey.stimulus.clear();
        for step in survey.steps.iter_mut().filter(|s| s.name.starts_with("accounting")) {
            step.status = StepStatus::Skipped;
            step.detail = Some("needs CAP_BPF".into());
        }
        survey.schedulability.clear();
        let html = render(&survey, &[]).unwrap();
        let accounting = section(&html, "Who lost time to interrupts");
        assert!(
            accounting.contains("No accounting. accounting idle: skipped (needs CAP_BPF); accounting net: skipped (needs CAP_BPF)."),
            "{accounting}"
        );
        let stimulus = section(&html, "Stimulus latency");
        assert!(stimulus.contains("No stimulus latency. stimulus net: skipped (not under the network load"), "{stimulus}");
        assert!(!html.contains("Your task set"));
        // The stimulus histogram is gone; the interference plots are not.
        assert_eq!(html.matches("<svg").count(), 5);
    }

    #[test]
    fn nothing_measured_still_fills_every_section() {
        let mut survey = fixture();
        survey.cpus.iter_mut().for_each(|c| c.curves.clear());
        (survey.latency, survey.stimulus, survey.accounting) = (vec![], vec![], vec![]);
        (survey.findings, survey.recommendations, survey.steps) = (vec![], vec![], vec![]);
        let html = render(&survey, &[]).unwrap();
        assert_eq!(html.matches("<svg").count(), 0);
        for heading in ["What to change", "Findings", "Interference per CPU", "Timer latency", "Stimulus latency", "Steps"] {
            let body = section(&html, heading);
            assert!(body.contains("<p>"), "{heading}: {body}");
        }
    }

    #[test]
    fn histograms_are_rebinned_to_common_bins_in_percent() {
        let h = LinearHistogram { bucket_ns: 1_000, counts: vec![0; 300], overflow: 0 };
        let short = LinearHistogram { bucket_ns: 1_000, counts: vec![1, 3], overflow: 4 };
        let width = common_bin_ns([&h, &short].into_iter());
        assert_eq!(width, 3_000);
        assert_eq!(histogram_points(&short, width), vec![(0.0, 50.0), (3.0, 0.0)]);
        assert_eq!(common_bin_ns([&short].into_iter()), 1_000);
    }

    #[test]
    fn numbers_read_short() {
        assert_eq!(short_ns(65_458), "65.5us");
        assert_eq!(short_ns(157_300_000_000), "157s");
        assert_eq!(short_ns(999), "999ns");
        assert_eq!(short_ns(0), "0");
        assert_eq!((pct(0.00546), pct(0.355)), ("0.5%".to_string(), "36%".to_string()));
        assert_eq!(utc(0), "1970-01-01 00:00 UTC");
        assert_eq!(utc(1_709_210_096), "2024-02-29 12:34 UTC");
    }
}
