//! `irqlab analyze TASKSET.toml`: schedulability of a task set (RTA, the
//! load test of eq. 8, or EDF), with drivers and measured curves as tasks.
//! Exit 0 if every task is schedulable, 1 if not, 2 on bad input.

use crate::error::{CliError, Status};
use crate::output::{file_only, json_or_summary, read_text, write_text};
use irqlab_analysis::verdict::{edf_load, load_seen_by};
use irqlab_analysis::{analyze, format_ns, parse_task_set, Analysis, DemandBound, Nanos, TaskSet, Test};
use irqlab_report::html::{Page, Section, Table};
use irqlab_report::plot::{LinePlot, Series};
use std::path::{Path, PathBuf};

#[derive(clap::Args)]
pub struct Args {
    /// Task-set file (TOML, `[[task]]` tables; see examples/)
    pub taskset: PathBuf,
    /// Schedulability test
    #[arg(long, value_enum, default_value = "rta")]
    pub test: TestArg,
    /// Demand bound for periodic tasks and servers (eq. 4, 6 or 7)
    #[arg(long, value_enum, default_value = "refined")]
    pub bound: BoundArg,
    /// Write the result as JSON (schema irqlab/analysis/v1) ("-": to stdout, instead of the summary)
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Write an HTML page with the table and the load each task sees
    #[arg(long, value_name = "FILE", value_parser = file_only())]
    pub html: Option<PathBuf>,
}

#[derive(Clone, Copy, clap::ValueEnum)]
pub enum TestArg {
    /// Exact response-time analysis, fixed priorities
    Rta,
    /// Load test at the deadline (eq. 8), fixed priorities, deadline ≤ period
    Load,
    /// EDF processor-demand test; drivers and servers run above EDF
    Edf,
}

#[derive(Clone, Copy, clap::ValueEnum)]
pub enum BoundArg {
    /// ceil(Δ/p)·e (eq. 4)
    Traditional,
    /// j·e + min(e, Δ - j·p) (eq. 6)
    Refined,
    /// min(Δ, u·(Δ + p - e)) (eq. 7)
    Linear,
}

impl From<TestArg> for Test {
    fn from(t: TestArg) -> Self {
        match t {
            TestArg::Rta => Test::Rta,
            TestArg::Load => Test::Load,
            TestArg::Edf => Test::Edf,
        }
    }
}

impl From<BoundArg> for DemandBound {
    fn from(b: BoundArg) -> Self {
        match b {
            BoundArg::Traditional => DemandBound::Traditional,
            BoundArg::Refined => DemandBound::Refined,
            BoundArg::Linear => DemandBound::Linear,
        }
    }
}

/// Reads and parses a task set; curve files are relative to its directory.
/// Also returns the curve files it read (inputs as much as the set).
pub fn load_task_set(path: &Path) -> Result<(TaskSet, Vec<PathBuf>), CliError> {
    let source = read_text(path)?;
    let dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
    let shown = path.display().to_string();
    let mut curves = Vec::new();
    let mut read_curve = |name: &str| {
        let file = dir.join(name);
        let text = read_text(&file).map_err(|e| e.to_string())?;
        curves.push(file.clone());
        Ok((file.display().to_string(), text))
    };
    let set = parse_task_set(&shown, &source, &mut read_curve)?;
    Ok((set, curves))
}

pub fn run(args: Args) -> Result<Status, CliError> {
    let (set, curves) = load_task_set(&args.taskset)?;
    let mut inputs = vec![("TASKSET", Some(args.taskset.as_path()))];
    inputs.extend(curves.iter().map(|c| ("curve file", Some(c.as_path()))));
    crate::output::refuse_clashes(&inputs, &[("--json", args.json.as_deref()), ("--html", args.html.as_deref())])?;
    let (test, bound) = (Test::from(args.test), DemandBound::from(args.bound));
    let result = analyze(&set, test, bound)?;
    json_or_summary(args.json.as_deref(), &result, |r| summary(&args.taskset, r))?;
    if let Some(path) = &args.html {
        write_text(path, &html_page(&args.taskset, &set, &result)?)?;
    }
    Ok(Status::from_ok(result.schedulable))
}

fn opt_ns(v: Option<Nanos>) -> String {
    v.map_or_else(|| "unbounded".to_string(), format_ns)
}

fn signed_ns(v: Option<i64>) -> String {
    match v {
        None => "-".to_string(),
        Some(s) if s < 0 => format!("-{}", format_ns(s.unsigned_abs())),
        Some(s) => format_ns(s as u64),
    }
}

fn rows(result: &Analysis) -> Table {
    let mut table =
        Table::new(["task", "priority", "period", "wcet", "deadline", "response", "slack", "load at d", "wcet margin", "verdict"]);
    for t in &result.tasks {
        let response = match result.test {
            Test::Edf => "-".to_string(),
            _ => opt_ns(t.response_time_ns),
        };
        table.push_row([
            t.name.clone(),
            t.priority.to_string(),
            format_ns(t.period_ns),
            format_ns(t.wcet_ns),
            format_ns(t.deadline_ns),
            response,
            signed_ns(t.slack_ns),
            format!("{:.3}", t.load_at_deadline),
            // Rounded down: 0.9999 must not read as 1.000 on a missed task.
            format!("{:.3}x", (t.wcet_scale_margin * 1000.0).floor() / 1000.0),
            if t.schedulable { "ok" } else { "MISS" }.to_string(),
        ]);
    }
    table
}

fn summary(path: &Path, result: &Analysis) -> String {
    let mut out = format!("{}: test {}, {} bound\n", path.display(), result.test.name(), result.bound.name());
    out.push_str(&rows(result).to_text());
    for i in &result.interferers {
        out.push_str(&format!("  interferer {} ({}, priority {}, long-run load {:.3})\n", i.name, i.kind, i.priority, i.utilization));
    }
    for note in &result.notes {
        out.push_str(&format!("  note: {note}\n"));
    }
    out.push_str(if result.schedulable { "schedulable\n" } else { "NOT schedulable\n" });
    out
}

fn html_page(path: &Path, set: &TaskSet, result: &Analysis) -> Result<String, CliError> {
    let fail = |e: &dyn std::fmt::Display| CliError::Failed(e.to_string());
    let longest = result.tasks.iter().map(|t| t.deadline_ns).max().unwrap_or(1).max(1);
    let to = longest + longest / 2;
    let windows: Vec<Nanos> = (1..=600u64).map(|i| to * i / 600).filter(|&w| w > 0).collect();
    let ms = |w: Nanos| w as f64 / 1e6;
    let mut plot = LinePlot::new(match result.test {
        Test::Edf => "EDF: (Σ dbf + interference) / Δ",
        _ => "Load each task sees: (e_k + Σ higher-priority demand) / Δ  (eq. 8 as a function of Δ)",
    })
    .x_label("window Δ (ms)")
    .y_label("load")
    .y_range(0.0..2.0);
    match result.test {
        Test::Edf => {
            let pts = windows.iter().map(|&w| (ms(w), edf_load(set, result.bound, w))).collect();
            plot = plot.series(Series::line("all tasks + interferers", pts));
        }
        _ => {
            for (k, task) in set.tasks.iter().enumerate() {
                if task.model.as_periodic().is_none() {
                    continue;
                }
                let pts = windows.iter().filter_map(|&w| load_seen_by(set, k, result.bound, w).map(|l| (ms(w), l.min(2.0)))).collect();
                plot = plot.series(Series::line(task.name.clone(), pts));
            }
        }
    }
    let deadlines = result.tasks.iter().map(|t| (ms(t.deadline_ns), t.load_at_deadline.min(2.0))).collect();
    plot =
        plot.series(Series::points("load at each deadline", deadlines)).series(Series::line("capacity", vec![(0.0, 1.0), (ms(to), 1.0)]));
    let svg = plot.to_svg().map_err(|e| fail(&e))?;
    let mut interferers = Table::new(["interferer", "kind", "priority", "long-run load"]);
    for i in &result.interferers {
        interferers.push_row([i.name.clone(), i.kind.clone(), i.priority.to_string(), format!("{:.3}", i.utilization)]);
    }
    let verdict = if result.schedulable { "schedulable" } else { "NOT schedulable" };
    let mut section = Section::new("Tasks").table(rows(result));
    for note in &result.notes {
        section = section.paragraph(format!("Note: {note}."));
    }
    if !result.interferers.is_empty() {
        section = section.table(interferers);
    }
    let page = Page::new(format!("Analysis of {}", path.display()))
        .intro(format!(
            "Test: {}, demand bound: {} (load-bounds paper eqs. 4/6/7 for periodic tasks and servers). Verdict: {verdict}.",
            result.test.name(),
            result.bound.name()
        ))
        .section(section)
        .section(Section::new("Load").svg(svg).paragraph(
            "A task meets its deadline when its curve is at or below 1 at its deadline (load test) \
             or anywhere before it (response-time analysis).",
        ));
    page.render().map_err(|e| fail(&e))
}
