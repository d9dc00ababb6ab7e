//! `irqlab control napi`: a device's NAPI instances listed, or their settings changed while this runs.

use crate::error::{CliError, Status};
use crate::flags;
use crate::output::json_or_summary;
use irqlab_control::set_napi;
use irqlab_report::html::Table;
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct Args {
    /// The network device (e.g. irqlab-b, eth0)
    #[arg(value_name = "DEV")]
    dev: String,
    /// Poll in a kernel thread (on) or in softirq context (off)
    #[arg(long, value_name = "on|off", value_parser = ["on", "off"])]
    threaded: Option<String>,
    /// Polls that find no work before the hard IRQ is unmasked again (0: at once)
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(0..=i32::MAX as u64))]
    defer_hard_irqs: Option<u64>,
    /// How long GRO holds packets and, with --defer-hard-irqs, the IRQ stays masked (e.g. 20us; 0: off)
    #[arg(long, value_name = "D", value_parser = flags::duration_ns)]
    gro_flush_timeout: Option<u64>,
    /// How long a busy-polling application may keep the IRQ suspended (e.g. 10ms; 0: off)
    #[arg(long, value_name = "D", value_parser = flags::duration_ns)]
    irq_suspend_timeout: Option<u64>,
    /// net.core.netdev_budget: packets per NET_RX softirq run, all devices
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    budget: Option<u64>,
    /// net.core.netdev_budget_usecs: microseconds per NET_RX softirq run, all devices
    #[arg(long, value_name = "US", value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    budget_usecs: Option<u64>,
    /// Hold the settings this long, then restore (default: until Ctrl-C or SIGTERM)
    #[arg(long, value_name = "D", conflicts_with = "persist", value_parser = flags::positive_duration_ns)]
    duration: Option<u64>,
    /// Apply, record in the journal as persistent, and exit (undo with `irqlab control revert ID`)
    #[arg(long)]
    persist: bool,
    /// Write the irqlab/control-napi/v1 document, or the listing ("-": to stdout, instead of the summary)
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
}

pub fn run(args: Args) -> Result<Status, CliError> {
    let settings = set_napi::Settings {
        threaded: args.threaded.as_deref().map(|t| t == "on"),
        defer_hard_irqs: args.defer_hard_irqs,
        gro_flush_timeout_ns: args.gro_flush_timeout,
        irq_suspend_timeout_ns: args.irq_suspend_timeout,
        budget: args.budget,
        budget_usecs: args.budget_usecs,
    };
    if settings.is_empty() {
        if args.duration.is_some() || args.persist {
            return Err(CliError::Usage("--duration and --persist need a setting to hold (e.g. --threaded on)".into()));
        }
        let listing = set_napi::list(&args.dev)?;
        json_or_summary(args.json.as_deref(), &listing, listing_text)?;
        return Ok(Status::Success);
    }
    let duration_ns = args.duration;
    let config = set_napi::Config { dev: args.dev.clone(), settings, duration_ns, persist: args.persist };
    let stop = crate::signal::stop_flag();
    let report = set_napi::run(&config, &stop)?;
    json_or_summary(args.json.as_deref(), &report, |r| {
        let mut t = Table::new(["SETTING", "WAS", "SET TO", "AT THE END"]);
        for c in &r.changes {
            let end = if c.restored { "restored".to_string() } else { format!("kept (entry {})", c.entry) };
            t = t.row([c.object.clone(), c.old.clone(), c.new.clone(), end]);
        }
        format!(
            "held {} ({}, via {}):\n{}while held:\n{}",
            irqlab_analysis::format_ns(r.held_ns),
            r.ended_by,
            r.via,
            t.to_text(),
            listing_text(&r.during)
        )
    })?;
    Ok(Status::from_ok(report.complete))
}

fn listing_text(l: &set_napi::Listing) -> String {
    use irqlab_analysis::format_ns;
    let opt = |v: Option<u64>, f: fn(u64) -> String| v.map_or("-".to_string(), f);
    let mut text = String::new();
    if let Some(why) = &l.napis_unavailable {
        text.push_str(&format!("{} (ifindex {}): no per-NAPI view: {why}\n", l.dev, l.ifindex));
    } else {
        let mut t = Table::new(["NAPI", "IRQ", "THREAD", "THREADED", "DEFER HARD IRQS", "GRO FLUSH", "IRQ SUSPEND"]);
        for n in &l.napis {
            let thread = n.pid.map_or("-".to_string(), |pid| {
                let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
                format!("{} ({pid})", comm.trim())
            });
            t = t.row([
                n.id.to_string(),
                opt(n.irq.map(u64::from), |v| v.to_string()),
                thread,
                n.threaded.map_or("-".to_string(), |t| if t { "on" } else { "off" }.to_string()),
                opt(n.defer_hard_irqs, |v| v.to_string()),
                opt(n.gro_flush_timeout_ns, format_ns),
                opt(n.irq_suspend_timeout_ns, format_ns),
            ]);
        }
        text.push_str(&format!("{} (ifindex {}): {} NAPI instance(s)\n{}", l.dev, l.ifindex, l.napis.len(), t.to_text()));
    }
    for (name, value) in &l.device {
        text.push_str(&format!("  {name} = {value}\n"));
    }
    text
}
