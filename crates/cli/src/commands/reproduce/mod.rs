//! `irqlab reproduce <paper>`: run a paper's experiments in simulation and
//! print the paper's numbers beside the simulated ones. One module per
//! paper; each returns an `irqlab/reproduce/v1` document
//! (`irqlab_experiments::Report`) whose rows this module prints. Exit 1
//! when a relation the paper reports does not hold in simulation.

mod bh_threshold;
mod idletime;
mod load_bounds;
mod process_aware;

use crate::error::{CliError, Status};
use crate::output::{file_only, json_or_summary, write_text};
use crate::progress::bar;
use clap::ValueEnum as _;
use irqlab_experiments::{Report, Row};
use std::path::PathBuf;

#[derive(clap::ValueEnum, Clone, Copy, Debug)]
pub enum Paper {
    /// Idletime scheduling for disk and network (dissertation ch. 6, Figs. 6.4-6.16)
    Idletime,
    /// Driver threads under servers and empirical load bounds (load-bounds paper §4-5, Figs. 4-10)
    LoadBounds,
    /// Bottom Half Scheduler (BH-threshold paper, Figs. 4-5, Table 2)
    BhThreshold,
    /// Process-aware interrupt accounting and scheduling (process-aware paper, Figs. 6-8)
    ProcessAware,
}

#[derive(clap::Args)]
pub struct Args {
    /// Which paper to reproduce
    #[arg(value_enum)]
    pub paper: Paper,
    /// Short runs on a coarse grid (seconds instead of minutes)
    #[arg(long)]
    pub quick: bool,
    /// Write the irqlab/reproduce/v1 document here ("-": to stdout, instead
    /// of the summary)
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Write an HTML report with the plots here
    #[arg(long, value_name = "FILE", value_parser = file_only())]
    pub html: Option<PathBuf>,
    /// Write the paper-vs-simulation table as Markdown here
    #[arg(long, value_name = "FILE", value_parser = file_only())]
    pub markdown: Option<PathBuf>,
    /// Seed of every random stream
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Worker threads (default: the available cores; at most 1024)
    #[arg(long, value_parser = crate::flags::thread_count())]
    pub threads: Option<usize>,
    /// Run the experiment on this machine too (root; testbed, BPF), with the
    /// paper's and the simulated numbers beside the live ones (bh-threshold;
    /// process-aware: Fig. 7)
    #[arg(long)]
    pub live: bool,
    /// The CPU of the live experiment (default: the last online CPU)
    #[arg(long, visible_alias = "cpus", value_name = "CPU", requires = "live", value_parser = crate::flags::one_cpu)]
    pub cpu: Option<usize>,
    /// idletime --live: where the data files go, on the disk to measure
    /// (default: the current directory)
    #[arg(long, value_name = "DIR", requires = "live")]
    pub dir: Option<PathBuf>,
    /// idletime --live: only this resource's experiment (default: both)
    #[arg(long, value_name = "disk|net", requires = "live", value_parser = ["disk", "net"])]
    pub resource: Option<String>,
    /// load-bounds --live: switch the scheduler feature HRTICK_DL on for
    /// the run (SCHED_DEADLINE runtimes enforced by an hrtimer, not the
    /// tick; debugfs, through the control journal; exit 3 where the kernel
    /// cannot, e.g. in lockdown)
    #[arg(long, requires = "live")]
    pub hrtick_dl: bool,
    /// process-aware --live: the measured CPU's fair server (6.12+) for the
    /// run: off (runtime 0, through the control journal, restored at the
    /// end; exit 3 where the kernel cannot) or keep (the kernel's own)
    #[arg(long, value_name = "off|keep", requires = "live", value_parser = ["off", "keep"])]
    pub fair_server: Option<String>,
}

pub fn run(args: Args) -> Result<Status, CliError> {
    crate::output::refuse_clashes(
        &[],
        &[("--json", args.json.as_deref()), ("--html", args.html.as_deref()), ("--markdown", args.markdown.as_deref())],
    )?;
    if args.live && !matches!(args.paper, Paper::BhThreshold | Paper::ProcessAware | Paper::LoadBounds | Paper::Idletime) {
        return Err(CliError::Usage(format!(
            "--live: {} has no live reproduction yet (bh-threshold, load-bounds and process-aware have)",
            args.paper.to_possible_value().map_or_else(String::new, |v| v.get_name().to_string())
        )));
    }
    if args.hrtick_dl && !matches!(args.paper, Paper::LoadBounds) {
        return Err(CliError::Usage("--hrtick-dl: only load-bounds --live takes it".into()));
    }
    if args.fair_server.is_some() && !matches!(args.paper, Paper::ProcessAware) {
        return Err(CliError::Usage("--fair-server: only process-aware --live takes it".into()));
    }
    match args.paper {
        Paper::Idletime => idletime::run(&args),
        Paper::LoadBounds => load_bounds::run(&args),
        Paper::BhThreshold => bh_threshold::run(&args),
        Paper::ProcessAware => process_aware::run(&args),
    }
}

/// The debugfs knobs a live reproduction set for its run, for its details.
fn knobs_text(knobs: &[String]) -> String {
    if knobs.is_empty() {
        return "scheduler knobs: the kernel's own (none set for the run)\n".into();
    }
    format!("scheduler knobs set for the run (restored after): {}\n", knobs.join("; "))
}

/// Where a live table was measured: the date, CPUs, kernel and the
/// settings that change what is measured (as `irqlab doctor` reads them).
fn machine_sentence() -> String {
    let m = irqlab_host::machine::MachineContext::read();
    let cpus = irqlab_host::rt::online_cpus().map_or(0, |c| c.len());
    let days = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs() / 86_400);
    let date = civil_date(days as i64);
    let pick = ["virtualised", "tick", "preemption", "kernel lockdown", "IRQ time accounting", "RT throttling"];
    let settings: Vec<String> = pick.iter().filter_map(|k| m.settings.get(*k).map(|v| format!("{k}: {v}"))).collect();
    let guest = crate::output::lab_sentence().map(|s| format!(" {s}")).unwrap_or_default();
    format!(" Measured {date} on this machine: {cpus} CPUs, kernel {}; {}.{guest}", m.kernel, settings.join("; "))
}

/// The proleptic Gregorian date of a day count since 1970-01-01
/// (H. Hinnant's days_from_civil, inverted).
fn civil_date(days: i64) -> String {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}")
}

/// The end every paper shares: the paper's `details` text and the rows on
/// the terminal (or `--json -`), the `--json`, `--html` and `--markdown`
/// files, how many relations missed, and the exit status (1 when a relation
/// does not hold). `title` and `source` head the Markdown table; `html`
/// renders the paper's own page.
pub fn finish<D: serde::Serialize>(
    args: &Args,
    report: &Report<D>,
    details: String,
    title: &str,
    source: &str,
    html: impl FnOnce(&Report<D>) -> Result<String, CliError>,
) -> Result<Status, CliError> {
    json_or_summary(args.json.as_deref(), report, |r| format!("{details}\n{}", rows_text(&r.rows)))?;
    if !report.complete {
        eprintln!("stopped early: the document is marked \"complete\": false, its relations \"not evaluated\"");
    }
    if let Some(path) = &args.html {
        write_text(path, &html(report)?)?;
    }
    if let Some(path) = &args.markdown {
        let md = format!(
            "## {title} (`irqlab reproduce {}{}{}`)\n\nGenerated by the command (seed {}); paper: {source}.{}\n\n{}",
            report.paper,
            if has_live(&report.rows) { " --live" } else { "" },
            if report.quick { " --quick" } else { "" },
            report.seed,
            if has_live(&report.rows) { machine_sentence() } else { String::new() },
            markdown_table(&report.rows)
        );
        write_text(path, &md)?;
    }
    let failed = report.rows.iter().filter(|r| r.holds == Some(false)).count();
    if failed > 0 {
        let place = if has_live(&report.rows) { "on this machine" } else { "in simulation" };
        eprintln!("{failed} relation(s) of the paper do not hold {place} (marked NO)");
    }
    Ok(Status::from_ok(report.all_hold))
}

/// Whether the rows carry live measurements (a live reproduction).
fn has_live(rows: &[Row]) -> bool {
    rows.iter().any(|r| r.live.is_some())
}

/// The simulated value, or "-" for a row that has none.
fn simulated_cell(r: &Row) -> String {
    if r.simulated.is_finite() {
        format!("{:.2}", r.simulated)
    } else {
        "-".into()
    }
}

fn live_cell(r: &Row) -> String {
    r.live.map_or("-".to_string(), |v| format!("{v:.2}"))
}

/// The rows as an aligned table: metric, paper, simulated, (live,) verdict.
fn rows_text(rows: &[Row]) -> String {
    let w = rows.iter().map(|r| r.metric.chars().count()).max().unwrap_or(6).min(90);
    let pw = rows.iter().map(|r| r.paper.chars().count()).max().unwrap_or(5).min(40);
    let live = has_live(rows);
    let live_head = if live { format!("  {:>12}", "live") } else { String::new() };
    let mut out = format!("{:<w$}  {:<pw$}  {:>12}{live_head}  {:<16}  holds\n", "metric", "paper", "simulated", "unit");
    for r in rows {
        let live_col = if live { format!("  {:>12}", live_cell(r)) } else { String::new() };
        out.push_str(&format!("{:<w$}  {:<pw$}  {:>12}{live_col}  {:<16}  {}\n", r.metric, r.paper, simulated_cell(r), r.unit, verdict(r)));
    }
    out
}

/// Worker threads: the flag, else the available cores.
pub fn threads(args: &Args) -> usize {
    args.threads.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get())).max(1)
}

/// Runs a paper's sweep under a progress bar labelled `what` that follows
/// the sweep's (done, total) reports; the bar is cleared when it returns.
pub fn with_progress<T>(what: &str, sweep: impl FnOnce(&(dyn Fn(usize, usize) + Sync)) -> T) -> T {
    let progress = bar(0, what);
    let result = sweep(&|done, total| {
        progress.set_length(total as u64);
        progress.set_position(done as u64);
    });
    progress.finish_and_clear();
    result
}

fn verdict(r: &Row) -> &'static str {
    match r.holds {
        _ if r.not_evaluated => "not evaluated",
        Some(true) => "yes",
        Some(false) => "NO",
        None => "-",
    }
}

/// The rows as a Markdown table (for the generated docs).
pub fn markdown_table(rows: &[Row]) -> String {
    if has_live(rows) {
        let mut s = String::from("| metric | paper | simulated | live | unit | holds (live) |\n|---|---|---|---|---|---|\n");
        for r in rows {
            s.push_str(&format!(
                "| {} | {} | {} | {} | {} | {} |\n",
                r.metric,
                r.paper,
                simulated_cell(r),
                live_cell(r),
                r.unit,
                verdict(r)
            ));
        }
        return s;
    }
    let mut s = String::from("| metric | paper | simulated | unit | holds |\n|---|---|---|---|---|\n");
    for r in rows {
        s.push_str(&format!("| {} | {} | {} | {} | {} |\n", r.metric, r.paper, simulated_cell(r), r.unit, verdict(r)));
    }
    s
}

/// The one-sentence outcome every paper's HTML page opens with.
pub fn verdict_sentence<D: serde::Serialize>(report: &Report<D>) -> &'static str {
    let live = has_live(&report.rows);
    if !report.complete {
        "The run was stopped early; the results are incomplete and the relations not evaluated."
    } else if report.all_hold {
        if live {
            "Every checked relation holds on this machine."
        } else {
            "Every checked relation holds in simulation."
        }
    } else if live {
        "Some relations do not hold on this machine (marked NO below)."
    } else {
        "Some relations do not hold in simulation (marked NO below)."
    }
}

/// The rows as an HTML table.
pub fn html_table(rows: &[Row]) -> irqlab_report::html::Table {
    if has_live(rows) {
        let mut t = irqlab_report::html::Table::new(["metric", "paper", "simulated", "live", "unit", "holds (live)"]);
        for r in rows {
            t.push_row([
                r.metric.clone(),
                r.paper.clone(),
                format!("{:.2}", r.simulated),
                live_cell(r),
                r.unit.clone(),
                verdict(r).to_string(),
            ]);
        }
        return t;
    }
    let mut t = irqlab_report::html::Table::new(["metric", "paper", "simulated", "unit", "holds"]);
    for r in rows {
        t.push_row([r.metric.clone(), r.paper.clone(), format!("{:.2}", r.simulated), r.unit.clone(), verdict(r).to_string()]);
    }
    t
}

#[cfg(test)]
mod tests {
    use super::civil_date;

    #[test]
    fn civil_dates_from_day_counts() {
        assert_eq!(civil_date(0), "1970-01-01");
        assert_eq!(civil_date(11_016), "2000-02-29");
        assert_eq!(civil_date(20_417), "2025-11-25");
    }
}
