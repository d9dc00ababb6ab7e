//! `irqlab watch`: timer latency for as long as asked, each wake-up past
//! the threshold explained from the flight recorder.

use crate::error::{CliError, Status};
use crate::flags;
use crate::output;
use irqlab_measure::latency;
use irqlab_measure::watch::{self, OnThreshold, Progress, SpikeRecord, WatchReport};
use std::io::{IsTerminal, Write};
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct Args {
    /// CPUs to watch, one measuring thread and one recorder each (e.g.
    /// `1` or `0-1`); default: all online
    #[arg(long, visible_alias = "cpus", value_name = "LIST", value_parser = flags::cpu_list)]
    cpu: Option<flags::CpuList>,
    /// The measuring threads' scheduling: fifo:PRIO, fifo (the default:
    /// priority 80) or other
    #[arg(long, value_name = "POLICY", value_parser = flags::policy)]
    policy: Option<flags::Policy>,
    /// Time between wake-ups
    #[arg(long, default_value_t = flags::Duration(latency::Config::default().interval_ns), value_name = "I")]
    interval: flags::Duration,
    /// How long to watch; default: until Ctrl-C or SIGTERM (which then end
    /// the run normally)
    #[arg(long, value_name = "D", value_parser = flags::positive)]
    duration: Option<flags::Duration>,
    /// A wake-up at least this late is a spike: counted, and its cause
    /// named from the flight recorder (at least 1us)
    #[arg(long, value_name = "T")]
    threshold: Option<flags::Duration>,
    /// At a spike: continue (the default), stop (end the run, as
    /// `rtla timerlat -a`), or 'exec CMD ARGS' (run CMD, no shell, with
    /// IRQLAB_SPIKE_CPU, _LATENCY_NS, _CAUSE, _CULPRIT, _CULPRIT_PID set)
    #[arg(long, value_name = "ACTION", default_value = "continue", requires = "threshold")]
    on_threshold: String,
    /// The flight recorder's window kept with each spike, up to its wake-up
    #[arg(long, value_name = "D", default_value_t = flags::Duration(watch::Config::DEFAULT_RECORD_NS), value_parser = flags::positive)]
    record: flags::Duration,
    /// Spikes kept in full (the worst); every spike is counted
    #[arg(long, value_name = "N", default_value_t = 100)]
    keep: usize,
    /// No flight recorder: spikes are counted, not explained (a run with
    /// it beside one without measures the recorder's own cost)
    #[arg(long)]
    no_recorder: bool,
    /// Write the JSON document (irqlab/watch/v1) this often while the run
    /// goes on, marked incomplete, so a crash loses at most one period
    /// (needs --json FILE)
    #[arg(long, value_name = "D", default_value_t = flags::Duration(10_000_000_000), value_parser = flags::positive)]
    flush: flags::Duration,
    /// Write the result as JSON (irqlab/watch/v1) ("-": to stdout, instead
    /// of the summary and the running display)
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// Write the kept spikes' recorder windows as a trace (Chrome
    /// trace-event JSON: open it in Perfetto), one process per CPU
    #[arg(long, value_name = "FILE", value_parser = output::file_only())]
    trace: Option<PathBuf>,
    /// Write the result as a page: each CPU's histogram (log-scale bins,
    /// log count), the figures per CPU and the worst spikes with their causes
    #[arg(long, value_name = "FILE", value_parser = output::file_only())]
    html: Option<PathBuf>,
    /// Measure nothing: read a document `watch --json` wrote
    /// (irqlab/watch/v1, a periodic write too) and show it as a run would:
    /// its summary, --json, --trace, --html
    #[arg(
        long,
        value_name = "FILE",
        conflicts_with_all = ["cpu", "policy", "duration", "threshold", "record", "no_recorder"]
    )]
    from: Option<PathBuf>,
}

/// A ceiling for an open-ended run: a century of wake-ups.
const OPEN_ENDED_NS: u64 = 100 * 365 * 24 * 3_600 * 1_000_000_000;

pub fn run(args: Args) -> Result<Status, CliError> {
    if let Some(from) = &args.from {
        output::refuse_clashes(
            &[("--from", Some(from.as_path()))],
            &[("--json", args.json.as_deref()), ("--trace", args.trace.as_deref()), ("--html", args.html.as_deref())],
        )?;
        let file = from.display().to_string();
        let report: WatchReport = irqlab_analysis::input::json_document(&file, &output::read_text(from)?, watch::SCHEMA)?;
        return show(&args, &report);
    }
    let flag_names = [
        ("cpu", "--cpu"),
        ("priority", "--policy"),
        ("interval", "--interval"),
        ("duration", "--duration"),
        ("threshold", "--threshold"),
        ("on-threshold", "--on-threshold"),
        ("keep", "--keep"),
    ];
    let named = |e: irqlab_host::Error| CliError::from(super::measure::name_flags(e, &flag_names));
    let on_threshold = OnThreshold::parse(&args.on_threshold).map_err(named)?;
    let priority = match flags::own_threads(args.policy.as_ref(), None)? {
        None | Some(flags::ThreadPolicy::Fifo(None)) => latency::Config::default().priority,
        Some(flags::ThreadPolicy::Fifo(Some(p))) => p,
        Some(flags::ThreadPolicy::Other) => 0,
    };
    let config = watch::Config {
        latency: latency::Config {
            cpus: args.cpu.clone().map(|c| c.0),
            priority,
            interval_ns: args.interval.0,
            duration_ns: args.duration.map_or(OPEN_ENDED_NS, |d| d.0),
            align_to_second: false,
        },
        open_ended: args.duration.is_none(),
        threshold_ns: args.threshold.map(|t| t.0),
        on_threshold,
        record_ns: args.record.0,
        keep: args.keep,
        recorder: !args.no_recorder,
        worst_only: false,
    };
    config.validate().map_err(named)?;
    output::refuse_clashes(&[], &[("--json", args.json.as_deref()), ("--trace", args.trace.as_deref()), ("--html", args.html.as_deref())])?;
    let flush_to = args.json.clone().filter(|p| p.as_os_str() != "-");
    let stop = crate::signal::stop_flag();
    let live_view = output::text_on_stdout(args.json.as_deref()) && std::io::stdout().is_terminal();
    let mut drawn = 0;
    let mut flush_error = None;
    let report = watch::watch(
        &config,
        &stop,
        |p| {
            if live_view {
                drawn = show_running(p, &config.latency, drawn);
            }
        },
        flush_to.as_ref().map(|_| args.flush.0),
        |doc| {
            if let Some(path) = &flush_to {
                if let Err(e) = output::write_json(path, doc) {
                    flush_error.get_or_insert(e);
                }
            }
        },
    );
    if drawn > 0 {
        let _ = write!(std::io::stdout(), "\x1b[{drawn}A\x1b[J");
    }
    let report = report.map_err(named)?;
    let status = show(&args, &report)?;
    if let Some(e) = flush_error {
        eprintln!("warning: a periodic write of the document failed (the final one succeeded): {e}");
    }
    Ok(status)
}

/// The summary (or --json), --trace and --html of a run's document.
fn show(args: &Args, report: &WatchReport) -> Result<Status, CliError> {
    output::json_or_summary(args.json.as_deref(), report, summary)?;
    if let Some(path) = &args.trace {
        output::write_json(path, &watch::trace::trace_events(report))?;
    }
    if let Some(path) = &args.html {
        output::write_text(path, &super::watch_page::render(report)?)?;
    }
    Ok(Status::from_ok(report.complete))
}

/// cyclictest's summary lines, the spikes and their causes.
fn summary(r: &WatchReport) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let us = |ns: Option<u64>| ns.map_or("-".into(), |v| format!("{:.0}", v as f64 / 1e3));
    for c in &r.cpus {
        let _ = writeln!(
            out,
            "CPU {:2} ({:5}) C:{:9} Min:{:>7} Avg:{:>7} Max:{:>8} p99.9:{:>8} us{}",
            c.cpu,
            c.tid,
            c.cycles,
            us(c.min_ns),
            us(c.mean_ns.map(|m| m.round() as u64)),
            us(c.max_ns),
            us(c.p999_ns),
            if r.threshold_ns.is_some() { format!("  spikes {}", c.spikes) } else { String::new() }
        );
    }
    if let Some(t) = r.threshold_ns {
        let _ = writeln!(out, "# {} wake-ups at least {:.0} us late; the worst {} kept:", r.spikes_total, t as f64 / 1e3, r.spikes.len());
        let mut worst: Vec<&SpikeRecord> = r.spikes.iter().collect();
        worst.sort_by_key(|s| std::cmp::Reverse(s.latency_ns));
        for s in worst.iter().take(10) {
            let _ = writeln!(out, "  {}", spike_line(s));
        }
    }
    if !r.recorder.available || r.recorder.lost_segments > 0 {
        let _ = writeln!(out, "# recorder: {}", r.recorder.note);
    }
    for n in &r.notes {
        let _ = writeln!(out, "# {n}");
    }
    if !r.complete {
        let _ = writeln!(out, "# stopped early: partial result");
    }
    out
}

fn spike_line(s: &SpikeRecord) -> String {
    let why = s.cause.as_ref().map_or("not explained (no flight recorder)", |c| c.verdict.as_str());
    format!("CPU {} {:.0} us late: {why}", s.cpu, s.latency_ns as f64 / 1e3)
}

/// cyclictest's running lines and the last spike, redrawn in place over
/// the `drawn` lines of the last call; returns how many it drew.
fn show_running(p: &Progress, config: &latency::Config, drawn: usize) -> usize {
    let mut out = std::io::stdout().lock();
    if drawn > 0 {
        let _ = write!(out, "\x1b[{drawn}A");
    }
    for (i, l) in p.live.iter().enumerate() {
        let _ = writeln!(out, "{}\x1b[K", l.line(i, config.priority, config.interval_ns));
    }
    let last = p.last.map_or(String::from("no spike yet"), spike_line);
    let _ = writeln!(out, "{:.0} s, {} spikes; last: {last}\x1b[K", p.elapsed_ns as f64 / 1e9, p.spikes_total);
    let _ = out.flush();
    p.live.len() + 1
}
