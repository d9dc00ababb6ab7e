//! `irqlab measure accounting`: per-task interrupt accounting with BPF
//! (issue 7; the process-aware paper, `docs/papers.md` §2). Wiring only: the
//! measurement, report and text forms live in `irqlab_measure::accounting`.

use crate::error::{CliError, Status};
use crate::flags;
use crate::output;
use irqlab_experiments::process_aware::fig6;
use irqlab_measure::accounting::{self, render, Report};
use std::io::{IsTerminal, Write};
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct Args {
    /// How long to measure (with --fig6: each rate)
    #[arg(long, default_value_t = flags::Duration(accounting::Config::default().duration_ns), value_name = "D", value_parser = flags::positive)]
    duration: flags::Duration,
    /// Refresh period of the live view on a terminal
    #[arg(long, default_value = "1s", value_name = "I", value_parser = flags::positive_duration_ns)]
    interval: u64,
    /// Only show these tasks (thread or process ids)
    #[arg(long = "pid", value_name = "PID", num_args = 1..)]
    pids: Vec<u32>,
    /// Rows in the task table
    #[arg(long, default_value_t = 20, value_name = "N")]
    top: usize,
    /// Write the irqlab/accounting/v1 document (with --fig6, its result)
    /// ("-": to stdout, instead of the tables and the live view)
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// Write a Prometheus text-format file (node_exporter textfile collector)
    #[arg(long, value_name = "FILE", value_parser = output::file_only())]
    prometheus: Option<PathBuf>,
    /// Also run a plain softirq_entry/exit sum and print how the totals compare
    /// (in total and by vector).
    ///
    /// Both hang programs on the same tracepoints, and each sees the other's
    /// run time: the one attached second measures each softirq shorter by
    /// the first one's entry cost minus its exit cost. Under load that is
    /// noise (0.2% in the live test); on an idle machine, where a softirq
    /// often runs on a CPU just woken with cold caches, the first entry
    /// costs most and the accounting comes out 2-7% lower on the SCHED and
    /// TIMER vectors (a few tens of us per second).
    #[arg(long)]
    check: bool,
    /// Run the process-aware paper's Fig. 6 experiment on the testbed instead
    /// (SCHED_FIFO CPU hog + UDP flood to a SCHED_OTHER server on one CPU)
    #[arg(long, conflicts_with_all = ["pids", "top", "check", "prometheus", "interval"])]
    fig6: bool,
    /// Fig. 6: UDP sending rates in packets per second
    #[arg(long, requires = "fig6", value_delimiter = ',', default_values_t = fig6::Config::default().rates_pps, value_name = "PPS,...")]
    rates: Vec<u64>,
    /// Fig. 6: the CPU shared by the hog and the server (default: the last one)
    #[arg(long, visible_alias = "cpus", requires = "fig6", value_name = "CPU", value_parser = flags::one_cpu)]
    cpu: Option<usize>,
    /// Fig. 6: run the whole rate sequence this many times, interleaved; the
    /// growth verdict takes each rate's least stolen time (a busy host only
    /// adds time)
    #[arg(long, requires = "fig6", default_value_t = 1, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=100))]
    rounds: u16,
}

pub fn run(args: Args) -> Result<Status, CliError> {
    let (duration_ns, interval_ns) = (args.duration.0, args.interval);
    output::refuse_clashes(&[], &[("--json", args.json.as_deref()), ("--prometheus", args.prometheus.as_deref())])?;
    if args.fig6 {
        return run_fig6(&args, duration_ns);
    }
    accounting::check_prerequisites()?;
    for tp in accounting::missing_optional_tracepoints()? {
        eprintln!("note: tracepoint {tp} is missing on this kernel; its part is not measured");
    }
    let stop = crate::signal::stop_flag();
    let live_view = output::text_on_stdout(args.json.as_deref()) && std::io::stdout().is_terminal();
    let config = accounting::Config { duration_ns, tick_ns: live_view.then_some(interval_ns), reference_softirq_sum: args.check };
    let report = accounting::measure(&config, &stop, |report| {
        let mut out = std::io::stdout().lock();
        let _ = write!(out, "\x1b[H\x1b[2J{}", render::table(report, &args.pids, args.top));
        let _ = out.flush();
    })?;
    if live_view {
        output::print("\x1b[H\x1b[2J")?;
    }
    // The table and the check are of the whole report; the document keeps
    // only the --pid tasks (a copy only then).
    let doc = if args.pids.is_empty() {
        std::borrow::Cow::Borrowed(&report)
    } else {
        let mut doc = report.clone();
        doc.tasks.retain(|t| args.pids.contains(&t.tid) || args.pids.contains(&t.tgid));
        std::borrow::Cow::Owned(doc)
    };
    output::json_or_summary(args.json.as_deref(), &doc, |_| summary(&args, &report))?;
    if let Some(path) = &args.prometheus {
        output::write_text(path, &render::prometheus(&report, &args.pids))?;
    }
    Ok(Status::Success)
}

/// The task table, then with --check how the totals compare with the plain
/// softirq_entry/exit sum.
fn summary(args: &Args, report: &Report) -> String {
    let mut out = render::table(report, &args.pids, args.top);
    if args.check {
        let reference = report.totals.reference_softirq_ns.unwrap_or(0);
        let nested: u64 = report.cpus.iter().map(|c| c.hardirq_in_softirq_ns).sum();
        out.push_str(&format!(
            "check: softirq {} ns (+{} ns nested hard IRQ) vs plain entry/exit sum {} ns; per-CPU unaccounted: {}\n",
            report.totals.time.softirq_ns,
            nested,
            reference,
            report.cpus.iter().map(|c| format!("cpu{} {} ns", c.cpu, c.unaccounted_ns)).collect::<Vec<_>>().join(", ")
        ));
        if let Some(reference) = &report.totals.reference_softirq_by_vector_ns {
            let by_vector: Vec<String> = reference
                .iter()
                .map(|(vector, ns)| format!("{vector} {} vs {ns}", report.totals.softirq_by_vector_ns.get(vector).copied().unwrap_or(0)))
                .collect();
            out.push_str(&format!("check by vector (ns, accounting vs plain sum): {}\n", by_vector.join(", ")));
        }
    }
    out
}

fn run_fig6(args: &Args, duration_ns: u64) -> Result<Status, CliError> {
    if args.rates.is_empty() || args.rates.contains(&0) {
        return Err(CliError::Usage("--rates: give one or more rates above 0 packets/s".into()));
    }
    let stop = crate::signal::stop_flag();
    let config =
        fig6::Config { rates_pps: args.rates.clone(), duration_ns, cpu: args.cpu, rounds: args.rounds.into(), ..Default::default() };
    let tty = std::io::stderr().is_terminal();
    let result = fig6::measure(&config, &stop, |p| {
        if tty {
            eprintln!(
                "{} pps asked, {:.0} achieved: {:.1} ms stolen from the CPU-bound task",
                p.rate_pps,
                p.achieved_pps,
                p.hog_stolen_ns as f64 / 1e6
            );
        }
    })
    .map_err(|e| super::measure::name_flags(e, &[("cpu", "--cpu")]))?;
    output::json_or_summary(args.json.as_deref(), &result, fig6::table)?;
    Ok(Status::from_ok(result.complete))
}
