//! `irqlab measure latency`: timer latency with cyclictest's method.

use crate::error::{CliError, Status};
use crate::flags;
use crate::output;
use irqlab_measure::latency::{self, LatencyReport, LiveThread};
use std::io::{IsTerminal, Write};
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct Args {
    /// CPUs to measure on, one thread each (e.g. `0-1,3`); default: all online
    #[arg(long, visible_alias = "cpus", value_name = "LIST", value_parser = flags::cpu_list)]
    cpu: Option<flags::CpuList>,
    /// The measuring threads' scheduling: fifo:PRIO, fifo (the default:
    /// priority 80) or other
    #[arg(long, value_name = "POLICY", value_parser = flags::policy)]
    policy: Option<flags::Policy>,
    /// The old spelling of --policy fifo:P (0: other; taken, with a note)
    #[arg(long, value_name = "P")]
    priority: Option<u8>,
    /// Time between wake-ups
    #[arg(long, default_value_t = flags::Duration(latency::Config::default().interval_ns), value_name = "I")]
    interval: flags::Duration,
    /// How long to measure
    #[arg(long, default_value_t = flags::Duration(latency::Config::default().duration_ns), value_name = "D")]
    duration: flags::Duration,
    /// Wake at multiples of the interval from the next full second, as
    /// `cyclictest --secaligned` does
    #[arg(long)]
    align: bool,
    /// Print cyclictest's histogram (1 us bins) after the summary
    #[arg(long)]
    histogram: bool,
    /// Write the result as JSON (irqlab/latency/v1) ("-": to stdout,
    /// instead of the summary and the running display)
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
}

pub fn run(args: Args) -> Result<Status, CliError> {
    let (interval_ns, duration_ns) = (args.interval.0, args.duration.0);
    // Without --cpu the library measures every online CPU.
    let cpus = args.cpu.clone().map(|c| c.0);
    let priority = match flags::own_threads(args.policy.as_ref(), args.priority)? {
        None | Some(flags::ThreadPolicy::Fifo(None)) => latency::Config::default().priority,
        Some(flags::ThreadPolicy::Fifo(Some(p))) => p,
        Some(flags::ThreadPolicy::Other) => 0,
    };
    let config = latency::Config { cpus, priority, interval_ns, duration_ns, align_to_second: args.align };
    let stop = crate::signal::stop_flag();
    let live_view = output::text_on_stdout(args.json.as_deref()) && std::io::stdout().is_terminal();
    let mut drawn = 0;
    let report = latency::measure(&config, &stop, |live| {
        if live_view {
            drawn = show_running(live, &config, drawn);
        }
    });
    if drawn > 0 {
        // Clear the running display, whatever the outcome.
        let _ = write!(std::io::stdout(), "\x1b[{drawn}A\x1b[J");
    }
    let flags = [("cpu", "--cpu"), ("priority", "--priority"), ("interval", "--interval"), ("duration", "--duration")];
    let report = report.map_err(|e| super::measure::name_flags(e, &flags))?;

    output::json_or_summary(args.json.as_deref(), &report, |r| summary(r, args.histogram))?;
    Ok(Status::from_ok(report.complete))
}

/// cyclictest's summary lines, then (`--histogram`) its histogram.
fn summary(report: &LatencyReport, histogram: bool) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# /dev/cpu_dma_latency {}",
        if report.cpu_dma_latency_held { "held at 0us" } else { "not available on this kernel" }
    );
    for t in &report.threads {
        let _ = writeln!(out, "{}", t.summary_line(report.priority, report.interval_ns));
    }
    if histogram {
        for t in &report.threads {
            let _ = writeln!(out, "# CPU {} (T:{})", t.cpu, t.index);
            let _ = write!(out, "{}", t.histogram_block());
        }
    }
    if !report.complete {
        let _ = writeln!(out, "# stopped early: partial result");
    }
    out
}

/// cyclictest's running display: the thread lines, redrawn in place over
/// the `drawn` lines of the last call; returns how many it drew.
fn show_running(live: &[LiveThread], config: &latency::Config, drawn: usize) -> usize {
    let mut out = std::io::stdout().lock();
    if drawn > 0 {
        let _ = write!(out, "\x1b[{drawn}A");
    }
    for (i, l) in live.iter().enumerate() {
        let _ = writeln!(out, "{}\x1b[K", l.line(i, config.priority, config.interval_ns));
    }
    let _ = out.flush();
    live.len()
}
