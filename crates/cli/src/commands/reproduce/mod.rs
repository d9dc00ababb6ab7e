//! `irqlab reproduce <paper>`: run a paper's experiments in simulation and
//! print the paper's numbers beside the simulated ones. One module per
//! paper; each returns an `irqlab/reproduce/v1` document
//! (`irqlab_sim::reproduce::Report`) whose rows this module prints. Exit 1
//! when a relation the paper reports does not hold in simulation.

mod bh_threshold;
mod idletime;
mod load_bounds;
mod process_aware;

use crate::error::{CliError, Status};
use irqlab_sim::reproduce::Row;
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
    /// Write the irqlab/reproduce/v1 document here
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Write an HTML report with the plots here
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
    /// Write the paper-vs-simulation table as Markdown here (bh-threshold, process-aware)
    #[arg(long, value_name = "FILE")]
    pub markdown: Option<PathBuf>,
    /// Seed of every random stream
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Worker threads (default: the available cores)
    #[arg(long)]
    pub threads: Option<usize>,
}

pub fn run(args: Args) -> Result<Status, CliError> {
    match args.paper {
        Paper::Idletime => idletime::run(&args),
        Paper::LoadBounds => load_bounds::run(&args),
        Paper::BhThreshold => bh_threshold::run(&args),
        Paper::ProcessAware => process_aware::run(&args),
    }
}

/// Prints the rows as an aligned table: metric, paper, simulated, verdict.
pub fn print_rows(rows: &[Row]) {
    let w = rows.iter().map(|r| r.metric.chars().count()).max().unwrap_or(6).min(90);
    let pw = rows.iter().map(|r| r.paper.chars().count()).max().unwrap_or(5).min(40);
    println!("{:<w$}  {:<pw$}  {:>12}  {:<16}  {}", "metric", "paper", "simulated", "unit", "holds");
    for r in rows {
        let verdict = match r.holds {
            Some(true) => "yes",
            Some(false) => "NO",
            None => "-",
        };
        println!("{:<w$}  {:<pw$}  {:>12}  {:<16}  {}", r.metric, r.paper, format!("{:.2}", r.simulated), r.unit, verdict);
    }
}

/// Worker threads: the flag, else the available cores.
pub fn threads(args: &Args) -> usize {
    args.threads.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get())).max(1)
}

fn verdict(r: &Row) -> &'static str {
    match r.holds {
        Some(true) => "yes",
        Some(false) => "NO",
        None => "-",
    }
}

/// The rows as a Markdown table (for the generated docs).
pub fn markdown_table(rows: &[Row]) -> String {
    let mut s = String::from("| metric | paper | simulated | unit | holds |\n|---|---|---|---|---|\n");
    for r in rows {
        s.push_str(&format!("| {} | {} | {:.2} | {} | {} |\n", r.metric, r.paper, r.simulated, r.unit, verdict(r)));
    }
    s
}

/// The rows as an HTML table.
pub fn html_table(rows: &[Row]) -> irqlab_report::html::Table {
    let mut t = irqlab_report::html::Table::new(["metric", "paper", "simulated", "unit", "holds"]);
    for r in rows {
        t.push_row([r.metric.clone(), r.paper.clone(), format!("{:.2}", r.simulated), r.unit.clone(), verdict(r).to_string()]);
    }
    t
}
