//! `irqlab control idletime`: the idletime scheduler on a disk or a link.

use super::control::overhead_line;
use crate::error::{CliError, Status};
use crate::flags;
use crate::output::{self, json_or_summary};
use irqlab_control::idletime;
use std::path::PathBuf;

#[derive(clap::Args)]
#[command(
    after_help = "Examples:\n  irqlab control idletime --resource disk --foreground comm:postgres --background pid:4242 --interval 50ms\n  \
irqlab control idletime --resource disk:vda --foreground /sys/fs/cgroup/cpu/db --interval 20ms --background -- rsync -a /src /dst\n  \
irqlab control idletime --resource net:eth0 --foreground comm:nginx --interval 2ms --background -- rsync -a /src host:/dst"
)]
pub struct Args {
    /// The resource: `disk` (the disk under /), `disk:DEV` (vda, nvme0n1;
    /// a partition counts for its disk), `net` (the default route's
    /// device's egress) or `net:DEV`
    #[arg(long, value_name = "disk[:DEV]|net[:DEV]")]
    resource: String,
    /// The foreground processes: a cgroup directory, pid:N (and its
    /// descendants) or comm:GLOB
    #[arg(long, value_name = "SELECTOR")]
    foreground: String,
    /// The background processes: a cgroup directory, pid:N or comm:GLOB; or
    /// no value and the command to start after `--`
    #[arg(long, value_name = "SELECTOR", num_args = 0..=1, default_missing_value = "")]
    background: Option<String>,
    /// The preemption interval p: background waits until the resource has
    /// had no foreground request for this long (0: plain two-class priority)
    #[arg(long, value_name = "P", value_parser = flags::duration_ns)]
    interval: u64,
    /// How the background is held back: freezer (frozen processes: v1 freezer
    /// or v2 cgroup.freeze) or, for a disk, throttle (v1 blkio: 1 request per
    /// second on the disk; v2 io.max: 2, the least it takes)
    #[arg(long, value_name = "freezer|throttle", default_value = "freezer")]
    gate: idletime::gate::Mechanism,
    /// Run this long (default: until Ctrl-C, SIGTERM, or the end of the
    /// background command)
    #[arg(long, value_name = "D", value_parser = flags::positive_duration_ns)]
    duration: Option<u64>,
    /// Write the foreground observations and the gate's steps (for
    /// tests/idletime_decisions.rs)
    #[arg(long, value_name = "FILE", value_parser = output::file_only())]
    record: Option<PathBuf>,
    /// Print every gate step on stderr
    #[arg(long)]
    verbose: bool,
    /// A network device: no background band (by default the background's
    /// packets go to a low-priority class below the device's token bucket,
    /// so that queued background packets do not delay the foreground's)
    #[arg(long)]
    no_band: bool,
    /// Write the irqlab/idletime-control/v1 report ("-": to stdout, instead of the text)
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// The background command to start (after --background and --)
    #[arg(last = true, value_name = "CMD")]
    command: Vec<String>,
}

pub fn run(args: Args) -> Result<Status, CliError> {
    use idletime::selector::Selector;
    output::refuse_clashes(&[], &[("--record", args.record.as_deref()), ("--json", args.json.as_deref())])?;
    let resource = idletime::ResourceSpec::parse(&args.resource)?;
    let background = match (args.background.as_deref(), args.command.is_empty()) {
        (Some(""), false) => Selector::Command(args.command.clone()),
        (Some(""), true) => return Err(CliError::Usage("--background: no SELECTOR and no command after --".into())),
        (Some(text), true) => Selector::parse("--background", text)?,
        (Some(text), false) => {
            return Err(CliError::Usage(format!("--background {text} and a command after --: name the background one way")))
        }
        (None, _) => return Err(CliError::Usage("--background SELECTOR (or --background -- CMD ARGS) is required".into())),
    };
    let config = idletime::Config {
        resource,
        foreground: Selector::parse("--foreground", &args.foreground)?,
        background,
        interval_ns: args.interval,
        mechanism: args.gate,
        duration_ns: args.duration,
        record: args.record.is_some(),
        band: !args.no_band,
    };
    if config.interval_ns == 0 {
        eprintln!("note: --interval 0: a plain two-class priority (background whenever no foreground request is in the device)");
    }
    let stop = crate::signal::stop_flag();
    let verbose = args.verbose;
    let report = idletime::run(&config, &stop, |s| {
        if verbose {
            eprintln!("{:>16} ns  {:?} -> {:?}, gate {}", s.at_ns, s.observed, s.state, if s.open { "open" } else { "closed" });
        }
    })?;
    if let (Some(path), Some(recording)) = (&args.record, &report.recording) {
        output::write_json(path, recording)?;
    }
    json_or_summary(args.json.as_deref(), &report, summary)?;
    Ok(Status::from_ok(report.complete))
}

fn summary(r: &idletime::Report) -> String {
    use irqlab_analysis::format_ns;
    let ns = |s: &Option<irqlab_measure::latency::stats::StatsSummary>,
              pick: fn(&irqlab_measure::latency::stats::StatsSummary) -> Option<u64>| {
        s.as_ref().and_then(pick).map_or("-".to_string(), format_ns)
    };
    let class = |name: &str, c: &idletime::ClassFigures| {
        format!(
            "{name}: {} requests ({} completed{}), {:.2} MB/s, in the device p50/p99 {}/{}\n",
            c.issued,
            c.completed,
            if c.dropped > 0 { format!(", {} dropped", c.dropped) } else { String::new() },
            c.bytes_per_s / 1e6,
            ns(&c.service, |s| s.p50_ns),
            ns(&c.service, |s| s.p99_ns)
        )
    };
    let g = &r.gate;
    let mut text = format!(
        "idletime on {}, p = {}, gate {}; {} ({})\nforeground {} ({} processes), background {} ({} processes)\n",
        r.resource,
        format_ns(r.config.interval_ns),
        r.config.mechanism,
        format_ns(r.held_ns),
        r.ended_by,
        r.config.foreground,
        r.foreground_processes,
        r.config.background,
        r.background_processes
    );
    text.push_str(&class("foreground", &r.foreground));
    text.push_str(&class("background", &r.background));
    text.push_str(&format!(
        "gate: open {:.1}% of the time, {} closes (reaction p50/p99/max {}/{}/{}), {} opens (after the interval's end p50/p99 {}/{}); \
         {} background requests issued while closed\n",
        100.0 * g.open_fraction,
        g.closes,
        ns(&g.close_reaction, |s| s.p50_ns),
        ns(&g.close_reaction, |s| s.p99_ns),
        ns(&g.close_reaction, |s| s.max_ns),
        g.opens,
        ns(&g.open_lateness, |s| s.p50_ns),
        ns(&g.open_lateness, |s| s.p99_ns),
        g.background_issued_while_closed
    ));
    if let Some(b) = &r.band {
        text.push_str(&format!(
            "band below {} on {}: foreground class {} packets ({:.2} MB), background class {} packets ({:.2} MB; {} classified)\n",
            b.parent,
            b.dev,
            b.foreground_packets,
            b.foreground_bytes as f64 / 1e6,
            b.background_packets,
            b.background_bytes as f64 / 1e6,
            b.classified_background
        ));
    }
    let counters: Vec<String> = r.counters.iter().map(|(k, v)| format!("{k} {v}")).collect();
    text.push_str(&format!("X[e]: {}\n", counters.join(", ")));
    text.push_str(&overhead_line(&r.overhead));
    for n in &r.notes {
        text.push_str(&format!("note: {n}\n"));
    }
    text
}
