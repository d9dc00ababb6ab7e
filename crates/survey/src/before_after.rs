//! `irqlab survey --compare BEFORE`: an earlier survey beside this one, for
//! the loop survey → apply what it recommends → survey again. Pure: two
//! documents in, the comparison out, then its page section and its
//! terminal lines.
//!
//! What is compared:
//! - per CPU and load: the max load in 1 ms and 10 ms windows (the curve
//!   the load is judged by, [`LoadCurve::judged`]) and the timer latency's
//!   p99 and max on that CPU; lower is better for all four, and a change
//!   smaller than [`SAME_SHARE`] of the larger value (or than
//!   [`SAME_LOAD`] / [`SAME_LATENCY_NS`]) reads as about the same;
//! - the findings, matched by their stable id (`load-cpu1-net`: the rule,
//!   the CPU and the load, never the text, which carries the numbers), as
//!   in `irqlab lab compare`'s findings side by side ([`crate::compare`]). A
//!   finding counts while it is above ok (a note, a warning or a problem):
//!   one that counted before and is ok or gone after went away, the other
//!   way round it appeared, counted in both it stayed;
//! - what differs between the runs besides what was applied: the kernel,
//!   the survey's options (CPUs, loads, lengths, quick), the settings
//!   irqlab read (`machine.settings`), said above the table.

use crate::doc::{Finding, Load, LoadCurve, Severity, Survey, SCHEMA};
use crate::findings::load_at;
use crate::page::{self, PageError};
use irqlab_analysis::InputError;
use irqlab_report::html::{Section, Table, Tone};
use irqlab_report::plot::{LinePlot, PlotError, Series};
use std::collections::{BTreeMap, BTreeSet};

const MS: u64 = 1_000_000;
/// A change below this share of the larger value is about the same.
pub const SAME_SHARE: f64 = 0.10;
/// A load change below this (1 point of a window) is about the same.
pub const SAME_LOAD: f64 = 0.01;
/// A latency change below this is about the same.
pub const SAME_LATENCY_NS: f64 = 5_000.0;

/// The earlier survey, and the path it was read from (as shown).
#[derive(Debug, Clone)]
pub struct Baseline {
    pub path: String,
    pub survey: Survey,
}

/// Reads an `irqlab/survey/v1` document; a JSON error is located at its
/// line and column, another kind of document is named by its schema.
pub fn parse(file: &str, text: &str) -> Result<Survey, InputError> {
    irqlab_analysis::input::json_document(file, text, SCHEMA)
}

/// Which way a number went (lower is better for every number compared).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trend {
    Better,
    Worse,
    Same,
    OnlyBefore,
    OnlyAfter,
    /// Measured in neither.
    Neither,
}

/// One number before and after.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Change {
    pub before: Option<f64>,
    pub after: Option<f64>,
}

impl Change {
    /// Better, worse or about the same: a difference of at most `floor`,
    /// or of at most [`SAME_SHARE`] of the larger value, is the same.
    pub fn trend(&self, floor: f64) -> Trend {
        match (self.before, self.after) {
            (Some(b), Some(a)) => {
                let diff = a - b;
                if diff.abs() <= floor.max(SAME_SHARE * a.max(b)) {
                    Trend::Same
                } else if diff < 0.0 {
                    Trend::Better
                } else {
                    Trend::Worse
                }
            }
            (Some(_), None) => Trend::OnlyBefore,
            (None, Some(_)) => Trend::OnlyAfter,
            (None, None) => Trend::Neither,
        }
    }
}

/// One CPU under one load, before and after.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub cpu: usize,
    pub load: Load,
    /// Max load in 1 ms and 10 ms windows (fractions).
    pub load_1ms: Change,
    pub load_10ms: Change,
    /// Timer latency on this CPU under this load, ns.
    pub latency_p99: Change,
    pub latency_max: Change,
}

/// What became of a finding.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Fate {
    WentAway,
    Appeared,
    Stayed,
}

impl Fate {
    pub fn name(self) -> &'static str {
        match self {
            Fate::WentAway => "went away",
            Fate::Appeared => "appeared",
            Fate::Stayed => "stayed",
        }
    }
}

/// One finding, matched by its id across the two surveys.
#[derive(Debug, Clone)]
pub struct FindingChange {
    pub id: String,
    pub fate: Fate,
    pub before: Option<Finding>,
    pub after: Option<Finding>,
}

impl FindingChange {
    /// The finding as shown: one that went away in the words it had
    /// before (what went away), the others in the newest survey's.
    pub fn shown(&self) -> &Finding {
        let (first, second) = match self.fate {
            Fate::WentAway => (&self.before, &self.after),
            Fate::Appeared | Fate::Stayed => (&self.after, &self.before),
        };
        first.as_ref().or(second.as_ref()).expect("a finding change has a finding on one side")
    }
}

/// Everything compared.
#[derive(Debug, Clone)]
pub struct Comparison {
    /// By CPU, then load (idle first).
    pub rows: Vec<Row>,
    /// Went away, appeared, stayed; by id within each.
    pub findings: Vec<FindingChange>,
    /// How the runs differ besides what was applied: kernel, options.
    pub conditions: Vec<String>,
    /// Settings irqlab read that differ: "name: before → after".
    pub settings: Vec<String>,
}

/// Compares `before` (the baseline) with `after` (this survey).
pub fn compare(before: &Survey, after: &Survey) -> Comparison {
    Comparison {
        rows: rows(before, after),
        findings: findings(before, after),
        conditions: conditions(before, after),
        settings: settings(before, after),
    }
}

fn rows(before: &Survey, after: &Survey) -> Vec<Row> {
    let mut rows: BTreeMap<(usize, Load), Row> = BTreeMap::new();
    for (survey, is_after) in [(before, false), (after, true)] {
        for cpu in &survey.cpus {
            for curve in &cpu.curves {
                let entry = rows.entry((cpu.cpu, curve.load)).or_insert_with(|| Row::empty(cpu.cpu, curve.load));
                set(&mut entry.load_1ms, is_after, load_at(curve.judged(), MS));
                set(&mut entry.load_10ms, is_after, load_at(curve.judged(), 10 * MS));
            }
        }
        for phase in &survey.latency {
            for thread in &phase.report.threads {
                let entry = rows.entry((thread.cpu, phase.load)).or_insert_with(|| Row::empty(thread.cpu, phase.load));
                set(&mut entry.latency_p99, is_after, thread.latency.p99_ns.map(|ns| ns as f64));
                set(&mut entry.latency_max, is_after, thread.latency.max_ns.map(|ns| ns as f64));
            }
        }
    }
    rows.into_values().collect()
}

impl Row {
    fn empty(cpu: usize, load: Load) -> Row {
        Row {
            cpu,
            load,
            load_1ms: Change::default(),
            load_10ms: Change::default(),
            latency_p99: Change::default(),
            latency_max: Change::default(),
        }
    }
}

fn set(change: &mut Change, is_after: bool, value: Option<f64>) {
    if is_after {
        change.after = value;
    } else {
        change.before = value;
    }
}

/// A finding counts while it is above ok.
fn counts(f: Option<&Finding>) -> bool {
    f.is_some_and(|f| f.severity > Severity::Ok)
}

fn findings(before: &Survey, after: &Survey) -> Vec<FindingChange> {
    let by_id = |s: &Survey| s.findings.iter().map(|f| (f.id.clone(), f.clone())).collect::<BTreeMap<_, _>>();
    let (was, is) = (by_id(before), by_id(after));
    let ids: BTreeSet<&String> = was.keys().chain(is.keys()).collect();
    let mut changes: Vec<FindingChange> = ids
        .into_iter()
        .filter_map(|id| {
            let (b, a) = (was.get(id), is.get(id));
            let fate = match (counts(b), counts(a)) {
                (true, true) => Fate::Stayed,
                (true, false) => Fate::WentAway,
                (false, true) => Fate::Appeared,
                (false, false) => return None,
            };
            Some(FindingChange { id: id.clone(), fate, before: b.cloned(), after: a.cloned() })
        })
        .collect();
    changes.sort_by(|x, y| x.fate.cmp(&y.fate).then_with(|| x.id.cmp(&y.id)));
    changes
}

fn conditions(before: &Survey, after: &Survey) -> Vec<String> {
    let (b, a) = (&before.options, &after.options);
    let mut out = Vec::new();
    let mut differ = |what: &str, x: String, y: String| {
        if x != y {
            out.push(format!("{what}: {x} → {y}"));
        }
    };
    differ("kernel", before.machine.kernel.trim().to_string(), after.machine.kernel.trim().to_string());
    let list = |cpus: &[usize]| cpus.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ");
    differ("CPUs surveyed", list(&b.cpus), list(&a.cpus));
    let loads =
        |l: &[Load]| std::iter::once("idle").chain(l.iter().filter(|l| **l != Load::None).map(|l| l.name())).collect::<Vec<_>>().join(", ");
    differ("loads", loads(&b.loads), loads(&a.loads));
    let run = |quick: bool| if quick { "quick" } else { "full" }.to_string();
    differ("run", run(b.quick), run(a.quick));
    differ("probe run", page::short_ns(b.probe_ns), page::short_ns(a.probe_ns));
    differ("timer latency run", page::short_ns(b.latency_ns), page::short_ns(a.latency_ns));
    differ("stimulus run", page::short_ns(b.stimulus_ns), page::short_ns(a.stimulus_ns));
    let taskset = |s: &Survey| s.options.taskset.as_ref().map_or("none".to_string(), |t| t.file.clone());
    differ("task set", taskset(before), taskset(after));
    if let (Some(x), Some(y)) = (&b.taskset, &a.taskset) {
        if x.file == y.file && x.text != y.text {
            out.push(format!("task set: {} changed between the runs", y.file));
        }
    }
    for (s, when) in [(before, "before"), (after, "after")] {
        if !s.complete {
            out.push(format!("the survey {when} is incomplete (stopped before its last steps)"));
        }
    }
    out
}

fn settings(before: &Survey, after: &Survey) -> Vec<String> {
    let (b, a) = (&before.machine.settings, &after.machine.settings);
    let names: BTreeSet<&String> = b.keys().chain(a.keys()).collect();
    let shown = |v: Option<&String>| v.map_or("not recorded".to_string(), Clone::clone);
    names.into_iter().filter(|n| b.get(*n) != a.get(*n)).map(|n| format!("{n}: {} → {}", shown(b.get(n)), shown(a.get(n)))).collect()
}

/// How a number reads: loads as percentages, latencies as durations.
#[derive(Clone, Copy)]
enum Unit {
    Load,
    Latency,
}

impl Unit {
    fn show(self, value: Option<f64>) -> String {
        match (self, value) {
            (_, None) => "-".into(),
            (Unit::Load, Some(x)) => page::pct(x),
            (Unit::Latency, Some(ns)) => page::short_ns(ns.round() as u64),
        }
    }

    fn floor(self) -> f64 {
        match self {
            Unit::Load => SAME_LOAD,
            Unit::Latency => SAME_LATENCY_NS,
        }
    }

    /// "36% → 7.2%".
    fn before_after(self, c: &Change, arrow: &str) -> String {
        format!("{} {arrow} {}", self.show(c.before), self.show(c.after))
    }

    /// "-29 points, better".
    fn change(self, c: &Change) -> String {
        let trend = c.trend(self.floor());
        let word = match trend {
            Trend::Better => "better",
            Trend::Worse => "worse",
            Trend::Same => "about the same",
            Trend::OnlyBefore => return "measured before only".into(),
            Trend::OnlyAfter => return "measured after only".into(),
            Trend::Neither => return "-".into(),
        };
        let (Some(b), Some(a)) = (c.before, c.after) else { return word.into() };
        if a == b {
            return "the same".into();
        }
        let sign = if a < b { "-" } else { "+" };
        let by = match self {
            Unit::Load => format!("{sign}{:.1} points", ((a - b) * 100.0).abs()),
            Unit::Latency => format!("{sign}{}", page::short_ns((a - b).abs().round() as u64)),
        };
        format!("{by}, {word}")
    }
}

fn trend_tone(trend: Trend) -> Option<Tone> {
    match trend {
        Trend::Better => Some(Tone::Ok),
        Trend::Worse => Some(Tone::Problem),
        _ => None,
    }
}

/// The four numbers of a row with their units, in the table's order.
fn numbers(row: &Row) -> [(Unit, &Change); 4] {
    [(Unit::Load, &row.load_1ms), (Unit::Load, &row.load_10ms), (Unit::Latency, &row.latency_p99), (Unit::Latency, &row.latency_max)]
}

/// The "Before and after" section of the page: what differs besides what
/// was applied, the numbers per CPU and load, the findings, and both
/// surveys' curves on one plot per CPU.
pub fn section(baseline: &Baseline, after: &Survey) -> Result<Section, PageError> {
    let before = &baseline.survey;
    let c = compare(before, after);
    let mut section = Section::new("Before and after").paragraph(format!(
        "Before: the survey in {}, started {}. After: this survey, started {}. Lower is better for every number; \
         a change under {:.0}% of the larger value (or under 1 point of load, {} of latency) reads as about the same.",
        baseline.path,
        page::utc(before.started_unix_s),
        page::utc(after.started_unix_s),
        SAME_SHARE * 100.0,
        page::short_ns(SAME_LATENCY_NS as u64),
    ));
    if !c.conditions.is_empty() {
        section = section.callout(
            Tone::Warn,
            format!(
                "The two surveys did not run under the same conditions, so part of any change may come from that: {}.",
                c.conditions.join("; ")
            ),
        );
    }
    if !c.settings.is_empty() {
        section = section
            .callout(Tone::Note, format!("Settings irqlab read differ (what was applied, or another machine): {}.", c.settings.join("; ")));
    }
    section =
        section.paragraph(format!("Verdict before: {} After: {}", sentence(&before.verdict.headline), sentence(&after.verdict.headline)));
    section = section.table(numbers_table(&c.rows));
    if let Some(prediction) = &after.prediction {
        section = predicted_part(section, prediction);
    }
    section = findings_part(section, &c.findings);
    for cpu in after.cpus.iter().filter(|c| !c.curves.is_empty()) {
        let Some(old) = before.cpus.iter().find(|b| b.cpu == cpu.cpu && !b.curves.is_empty()) else { continue };
        section = section.figure(
            curves_plot(cpu.cpu, &old.curves, &cpu.curves)?,
            format!(
                "CPU {}: max load per window, before (dashed) and after (solid), each load in its colour; \
                 loaded runs show the load's own share (measured minus that survey's idle floor).",
                cpu.cpu
            ),
        );
    }
    Ok(section)
}

fn sentence(text: &str) -> String {
    let text = text.trim();
    if text.ends_with('.') {
        text.to_string()
    } else {
        format!("{text}.")
    }
}

fn numbers_table(rows: &[Row]) -> Table {
    let mut table = Table::new([
        "CPU",
        "load",
        "max load, 1 ms windows",
        "change",
        "max load, 10 ms windows",
        "change",
        "timer latency p99",
        "change",
        "timer latency max",
        "change",
    ])
    .text_columns([1, 3, 5, 7, 9]);
    for row in rows {
        let mut cells = vec![row.cpu.to_string(), row.load.name().to_string()];
        for (unit, change) in numbers(row) {
            cells.push(unit.before_after(change, "→"));
            cells.push(unit.change(change));
        }
        table.push_row(cells);
        for (i, (unit, change)) in numbers(row).into_iter().enumerate() {
            if let Some(tone) = trend_tone(change.trend(unit.floor())) {
                table.tone_cell(2 + 2 * i, tone);
                table.tone_cell(3 + 2 * i, tone);
            }
        }
    }
    table
}

/// The prediction of the profile beside what was measured after it.
fn predicted_part(section: Section, p: &crate::predicted::PredictionBeside) -> Section {
    let section = section.subheading("Predicted beside measured");
    let pct = |x: Option<f64>| x.map_or("-".to_string(), |x| format!("{:.1}%", 100.0 * x));
    let mut table =
        Table::new(["CPU", "load", "measure", "before", "simulated before", "predicted after", "measured after"]).text_columns([1, 2]);
    for r in &p.rows {
        table.push_row([
            r.cpu.to_string(),
            r.load.clone(),
            r.measure(),
            pct(r.before),
            pct(r.simulated_before),
            pct(r.predicted),
            pct(r.after),
        ]);
    }
    let profile = p.profile.as_deref().unwrap_or("a profile");
    section.table(table).paragraph(format!(
        "irqlab sim --from-survey simulated the before survey's machine ({}) with {profile} applied in the model. \
         All numbers here are the probe's raw maximum and mean loads (no idle floor subtracted), as the simulator gives them; \
         \"simulated before\" is the model of the before survey, the check of its calibration.",
        p.file
    ))
}

fn findings_part(section: Section, changes: &[FindingChange]) -> Section {
    let section = section.subheading("Findings before and after");
    if changes.is_empty() {
        return section.paragraph("No finding above ok in either survey.");
    }
    let mut table = Table::new(["", "CPU", "finding", "before", "after"]).text_columns([0, 2, 3, 4]);
    let side = |f: &Option<Finding>| f.as_ref().map_or("-".to_string(), |f| format!("{}: {}", page::severity_name(f.severity), f.measured));
    for change in changes {
        let f = change.shown();
        let cpu = f.cpu.map(|c| c.to_string()).unwrap_or_default();
        table.push_row([change.fate.name().to_string(), cpu, f.title.clone(), side(&change.before), side(&change.after)]);
        let severity = |f: &Option<Finding>| f.as_ref().map_or(Severity::Ok, |f| f.severity);
        let tone = match change.fate {
            Fate::WentAway => Some(Tone::Ok),
            Fate::Appeared => Some(page::tone(severity(&change.after))),
            Fate::Stayed if severity(&change.after) < severity(&change.before) => Some(Tone::Ok),
            Fate::Stayed if severity(&change.after) > severity(&change.before) => Some(page::tone(severity(&change.after))),
            Fate::Stayed => None,
        };
        if let Some(tone) = tone {
            table.tone_cell(0, tone);
        }
    }
    section.table(table).paragraph(
        "Findings are matched by their rule, CPU and load (their id), not their words; one counts while it is above ok. \
         Went away: it counted before, and after it is ok or not found.",
    )
}

/// Both surveys' judged curves of one CPU, a colour per load.
fn curves_plot(cpu: usize, before: &[LoadCurve], after: &[LoadCurve]) -> Result<String, PlotError> {
    let mut plot = LinePlot::new(format!("CPU {cpu}: before and after"))
        .x_label("window (ms)")
        .y_label("max load (%)")
        .log_x(true)
        .y_range(0.0..100.0)
        .size(page::PLOT_SIZE.0, page::PLOT_SIZE.1);
    let loads: BTreeSet<Load> = before.iter().chain(after).map(|c| c.load).collect();
    let points = |c: &LoadCurve| c.judged().points.iter().map(|p| (p.window_ns as f64 / 1e6, p.max_load * 100.0)).collect();
    for (color, load) in loads.into_iter().enumerate() {
        if let Some(c) = before.iter().find(|c| c.load == load) {
            plot = plot.series(Series::dashed(format!("{} before", load.name()), points(c)).color(color));
        }
        if let Some(c) = after.iter().find(|c| c.load == load) {
            plot = plot.series(Series::line(format!("{} after", load.name()), points(c)).color(color));
        }
    }
    plot.to_svg()
}

/// The terminal's lines: "compared with PATH:", what differs, one line per
/// CPU and load, the findings that went away, appeared or stayed.
pub fn summary(baseline: &Baseline, after: &Survey) -> String {
    use std::fmt::Write;
    let c = compare(&baseline.survey, after);
    let mut s = format!("compared with {} (surveyed {}):\n", baseline.path, page::utc(baseline.survey.started_unix_s));
    if !c.conditions.is_empty() {
        let _ = writeln!(s, "  not the same conditions: {}", c.conditions.join("; ").replace('→', "->"));
    }
    if !c.settings.is_empty() {
        let _ = writeln!(s, "  settings that differ: {}", c.settings.join("; ").replace('→', "->"));
    }
    for row in &c.rows {
        let names = ["at 1 ms", "at 10 ms", "timer p99", "max"];
        let parts: Vec<String> = numbers(row)
            .into_iter()
            .zip(names)
            .filter(|((_, change), _)| change.trend(0.0) != Trend::Neither)
            .map(|((unit, change), name)| {
                let trend = match change.trend(unit.floor()) {
                    Trend::Better => " (better)",
                    Trend::Worse => " (worse)",
                    Trend::OnlyBefore => " (before only)",
                    Trend::OnlyAfter => " (after only)",
                    Trend::Same | Trend::Neither => "",
                };
                format!("{name} {}{trend}", unit.before_after(change, "->"))
            })
            .collect();
        let _ = writeln!(s, "  CPU {} {}: {}", row.cpu, row.load.name(), parts.join(", "));
    }
    if let Some(p) = &after.prediction {
        let pct = |x: Option<f64>| x.map_or("-".to_string(), |x| format!("{:.1}%", 100.0 * x));
        let _ = writeln!(s, "  predicted for {} ({}):", p.profile.as_deref().unwrap_or("the profile"), p.file);
        for r in &p.rows {
            let _ = writeln!(
                s,
                "    CPU {} {} {}: before {}, predicted {}, measured {}",
                r.cpu,
                r.load,
                r.measure(),
                pct(r.before),
                pct(r.predicted),
                pct(r.after)
            );
        }
    }
    for change in &c.findings {
        let severity = |f: &Option<Finding>| f.as_ref().map_or("not found".to_string(), |f| page::severity_name(f.severity).to_string());
        let _ =
            writeln!(s, "  {}: {} ({} -> {})", change.fate.name(), change.shown().title, severity(&change.before), severity(&change.after));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use irqlab_analysis::curve::Curve;

    fn fixture() -> Survey {
        serde_json::from_str(include_str!("../tests/fixtures/survey.json")).expect("the fixture is a survey document")
    }

    fn finding(id: &str, severity: Severity, cpu: Option<usize>, title: &str) -> Finding {
        let (measured, rule) = ("a number".to_string(), "a rule".to_string());
        Finding::new(id.into(), severity, cpu, title.into(), measured, rule)
    }

    fn scaled(curve: &Curve, by: f64) -> Curve {
        let mut c = curve.clone();
        c.points.iter_mut().for_each(|p| p.max_load *= by);
        c
    }

    /// The fixture after the driver was put under a server: CPU 1's net
    /// load a fifth, its task set schedulable, the latency warning gone,
    /// a governor warning new.
    fn after() -> Survey {
        let mut s = fixture();
        s.started_unix_s += 3600;
        let net1 = &mut s.cpus[1].curves[1];
        net1.attributed = net1.attributed.as_ref().map(|c| scaled(c, 0.2));
        s.findings.retain(|f| f.id != "timer-latency-net");
        for f in s.findings.iter_mut().filter(|f| f.id == "taskset-cpu1-net" || f.id == "load-cpu1-net") {
            f.severity = Severity::Ok;
        }
        s.findings.push(finding("governor", Severity::Warn, None, "CPU frequency governor: powersave"));
        s
    }

    #[test]
    fn findings_are_matched_by_id_into_went_away_appeared_and_stayed() {
        let c = compare(&fixture(), &after());
        let fates: Vec<(&str, Fate)> = c.findings.iter().map(|f| (f.id.as_str(), f.fate)).collect();
        assert_eq!(
            fates,
            [
                ("load-cpu1-net", Fate::WentAway),
                ("taskset-cpu1-net", Fate::WentAway),
                ("timer-latency-net", Fate::WentAway),
                ("governor", Fate::Appeared),
                ("quietest-cpu", Fate::Stayed),
            ]
        );
        // Went away to ok: both sides kept; went away for good: none after.
        let load = &c.findings[0];
        assert_eq!((load.before.as_ref().unwrap().severity, load.after.as_ref().unwrap().severity), (Severity::Problem, Severity::Ok));
        assert!(c.findings[2].after.is_none() && c.findings[2].shown().title.starts_with("Timer latency under the net load"));
        // What went away is named in its words before.
        let mut schedulable = after();
        schedulable.findings.iter_mut().find(|f| f.id == "taskset-cpu1-net").unwrap().title = "CPU 1: your task set is schedulable".into();
        let c = compare(&fixture(), &schedulable);
        assert_eq!(c.findings[1].shown().title, "CPU 1: your task set misses deadlines under the net load");
        // Ok in both (CPU 0 idle) is not listed.
        assert!(!c.findings.iter().any(|f| f.id == "load-cpu0-none"));
    }

    #[test]
    fn a_finding_whose_words_changed_is_the_same_finding() {
        let before = fixture();
        let mut later = fixture();
        let f = later.findings.iter_mut().find(|f| f.id == "load-cpu1-net").unwrap();
        f.title = "CPU 1: the net load takes up to 41% of a 1 ms window, most of it napi/irqlab-b-9001".into();
        f.severity = Severity::Warn;
        let c = compare(&before, &later);
        let load: Vec<&FindingChange> = c.findings.iter().filter(|f| f.id == "load-cpu1-net").collect();
        assert_eq!(load.len(), 1);
        assert_eq!(load[0].fate, Fate::Stayed);
        // The one shown is the later one (its severity, not its words, tells).
        assert_eq!(load[0].shown().severity, Severity::Warn);
    }

    #[test]
    fn numbers_per_cpu_and_load_before_and_after() {
        let c = compare(&fixture(), &after());
        let keys: Vec<(usize, Load)> = c.rows.iter().map(|r| (r.cpu, r.load)).collect();
        assert_eq!(keys, [(0, Load::None), (0, Load::Net), (1, Load::None), (1, Load::Net)]);
        let net1 = &c.rows[3];
        let (b, a) = (net1.load_1ms.before.unwrap(), net1.load_1ms.after.unwrap());
        assert!((a - 0.2 * b).abs() < 1e-9 && b > 0.3, "{b} -> {a}");
        assert_eq!(net1.load_1ms.trend(SAME_LOAD), Trend::Better);
        assert_eq!(net1.load_10ms.trend(SAME_LOAD), Trend::Better);
        // Latency was not changed: the same numbers, about the same.
        assert_eq!(net1.latency_max.before, net1.latency_max.after);
        assert_eq!(net1.latency_max.trend(SAME_LATENCY_NS), Trend::Same);
        assert!(net1.latency_p99.before.is_some());
        // Idle CPU 1 untouched.
        assert_eq!(c.rows[2].load_1ms.trend(SAME_LOAD), Trend::Same);
        assert!(c.conditions.is_empty() && c.settings.is_empty(), "{c:?}");
    }

    #[test]
    fn a_cpu_in_only_one_survey_is_a_row_of_its_own() {
        let before = fixture();
        let mut later = fixture();
        // Surveyed CPUs 1 and 2 instead of 0 and 1.
        later.options.cpus = vec![1, 2];
        let mut cpu2 = later.cpus.remove(0);
        cpu2.cpu = 2;
        later.cpus.push(cpu2);
        for phase in &mut later.latency {
            phase.report.threads.retain(|t| t.cpu == 1);
        }
        let c = compare(&before, &later);
        let keys: Vec<(usize, Load)> = c.rows.iter().map(|r| (r.cpu, r.load)).collect();
        assert_eq!(keys, [(0, Load::None), (0, Load::Net), (1, Load::None), (1, Load::Net), (2, Load::None), (2, Load::Net)]);
        let cpu0 = &c.rows[1];
        assert_eq!(cpu0.load_1ms.trend(SAME_LOAD), Trend::OnlyBefore);
        assert_eq!(cpu0.latency_max.trend(SAME_LATENCY_NS), Trend::OnlyBefore);
        let cpu2 = &c.rows[5];
        assert_eq!(cpu2.load_1ms.trend(SAME_LOAD), Trend::OnlyAfter);
        assert_eq!(cpu2.latency_p99.trend(SAME_LATENCY_NS), Trend::Neither);
        assert_eq!(c.conditions, ["CPUs surveyed: 0, 1 → 1, 2"]);
        assert_eq!(Unit::Load.change(&cpu0.load_1ms), "measured before only");
        assert_eq!(Unit::Latency.change(&cpu2.latency_p99), "-");
        let text = summary(&Baseline { path: "b.json".into(), survey: before }, &later);
        assert!(text.contains("\n  CPU 0 net: at 1 ms 7.2% -> - (before only), at 10 ms 5.5% -> - (before only), timer p99 "), "{text}");
        assert!(text.contains("\n  CPU 2 net: at 1 ms - -> 7.2% (after only), at 10 ms - -> 5.5% (after only)\n"), "{text}");
        assert!(text.contains("\n  not the same conditions: CPUs surveyed: 0, 1 -> 1, 2\n"), "{text}");
    }

    #[test]
    fn other_kernels_options_and_settings_are_named() {
        let before = fixture();
        let mut later = fixture();
        later.machine.kernel = "6.12.57+deb13-rt-amd64".into();
        later.options.quick = true;
        later.options.probe_ns = 2_000_000_000;
        later.complete = false;
        later.machine.settings.insert("threadirqs".into(), "on".into());
        later.machine.settings.insert("threaded NAPI".into(), "eth0 on".into());
        let c = compare(&before, &later);
        assert_eq!(c.conditions.len(), 4, "{:?}", c.conditions);
        assert!(c.conditions[0].starts_with("kernel: 6.1.0-27-amd64 #1 SMP PREEMPT_DYNAMIC Debian 6.1.115-1 (2024-11-01) → 6.12.57"));
        assert_eq!(
            c.conditions[1..],
            ["run: full → quick", "probe run: 10s → 2s", "the survey after is incomplete (stopped before its last steps)"]
        );
        assert_eq!(c.settings, ["threaded NAPI: not recorded → eth0 on", "threadirqs: off → on"]);
    }

    #[test]
    fn a_change_within_the_noise_is_the_same() {
        let c = |b: f64, a: f64| Change { before: Some(b), after: Some(a) };
        assert_eq!(c(0.36, 0.072).trend(SAME_LOAD), Trend::Better);
        assert_eq!(c(0.36, 0.34).trend(SAME_LOAD), Trend::Same); // within 10% of 0.36
        assert_eq!(c(0.005, 0.012).trend(SAME_LOAD), Trend::Same); // within a point
        assert_eq!(c(0.05, 0.2).trend(SAME_LOAD), Trend::Worse);
        assert_eq!(c(19_000.0, 22_000.0).trend(SAME_LATENCY_NS), Trend::Same);
        assert_eq!(c(140_000.0, 41_000.0).trend(SAME_LATENCY_NS), Trend::Better);
        assert_eq!(Unit::Load.change(&c(0.36, 0.072)), "-28.8 points, better");
        assert_eq!(Unit::Latency.change(&c(41_000.0, 140_000.0)), "+99us, worse");
        assert_eq!(Unit::Load.before_after(&c(0.36, 0.072), "→"), "36% → 7.2%");
        assert_eq!(Unit::Load.change(&c(0.36, 0.35)), "-1.0 points, about the same");
        assert_eq!(Unit::Latency.change(&c(19_000.0, 19_000.0)), "the same");
    }

    #[test]
    fn a_bad_baseline_is_located() {
        let e = parse("b/survey.json", "{\n  \"schema\": \"irqlab/survey/v1\",\n  \"complete\": nope\n}").unwrap_err();
        assert_eq!(e.location.as_ref().map(|l| (l.line, l.col)), Some((3, 16)), "{e:?}");
        assert!(e.message.starts_with("not an irqlab/survey/v1 document"), "{e}");
        let e = parse("c.json", "{\"points\": [],\n \"schema\": \"irqlab/curve/v1\"}").unwrap_err();
        assert_eq!(e.message, "schema is `irqlab/curve/v1`, expected `irqlab/survey/v1`");
        assert_eq!(e.location.map(|l| (l.line, l.col)), Some((2, 2)));
        let mut wrong = fixture();
        wrong.schema = "irqlab/survey/v9".into();
        let e = parse("w.json", &serde_json::to_string(&wrong).unwrap()).unwrap_err();
        assert!(e.message.starts_with("schema is `irqlab/survey/v9`"), "{e}");
        assert!(parse("s.json", include_str!("../tests/fixtures/survey.json")).is_ok());
    }

    #[test]
    fn an_older_document_without_the_field_parses_and_a_newer_one_keeps_it() {
        let mut s = fixture();
        assert_eq!(s.compared_with, None);
        assert!(!serde_json::to_string(&s).unwrap().contains("compared_with"));
        s.compared_with = Some("/tmp/before/survey.json".into());
        let back: Survey = serde_json::from_str(&serde_json::to_string(&s).unwrap()).unwrap();
        assert_eq!(back.compared_with.as_deref(), Some("/tmp/before/survey.json"));
    }

    #[test]
    fn the_page_puts_before_and_after_below_the_verdict() {
        let baseline = Baseline { path: "before/survey.json".into(), survey: fixture() };
        let html = page::render_compared(&after(), Some(&baseline), &[]).unwrap();
        let at = |h: &str| html.find(&format!("<h2>{h}</h2>")).unwrap_or_else(|| panic!("{h}"));
        assert!(at("Verdict") < at("Before and after") && at("Before and after") < at("What to change"));
        let section = &html[at("Before and after")..at("What to change")];
        assert!(section.contains("Before: the survey in before&#x2f;survey.json, started 2025-11-25 10:00 UTC."), "{section}");
        assert!(section.contains("<td class=\"ok\">36% → 7.1%</td><td class=\"text ok\">-28.4 points, better</td>"), "{section}");
        assert!(
            section.contains("<td class=\"text ok\">went away</td><td>1</td><td class=\"text\">CPU 1: your task set misses"),
            "{section}"
        );
        assert!(section.contains("<td class=\"text warn\">appeared</td>"), "{section}");
        // One plot: both CPUs' curves before and after.
        assert_eq!(section.matches("<svg").count(), 2);
        assert!(section.contains("net before") && section.contains("net after"));
        assert!(!section.contains("did not run under the same conditions"));
        // Without a baseline, no such section.
        assert!(!page::render(&after(), &[]).unwrap().contains("Before and after"));
    }

    #[test]
    fn the_terminal_summary_names_the_numbers_and_findings() {
        let baseline = Baseline { path: "before/survey.json".into(), survey: fixture() };
        let text = summary(&baseline, &after());
        assert!(text.starts_with("compared with before/survey.json (surveyed 2025-11-25 10:00 UTC):\n"), "{text}");
        assert!(text.contains("\n  CPU 1 net: at 1 ms 36% -> 7.1% (better), at 10 ms "), "{text}");
        assert!(text.contains("\n  went away: CPU 1: your task set misses deadlines under the net load (problem -> ok)\n"), "{text}");
        assert!(text.contains("\n  went away: Timer latency under the net load reaches 140us on CPU 1 (warning -> not found)\n"), "{text}");
        assert!(text.contains("\n  appeared: CPU frequency governor: powersave (not found -> warning)\n"), "{text}");
    }
}
