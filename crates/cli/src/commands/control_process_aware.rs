//! `irqlab control process-aware`: a device's NAPI kthreads at the priority of the most important waiter.

use super::control::overhead_line;
use crate::error::{CliError, Status};
use crate::flags;
use crate::output::json_or_summary;
use irqlab_control::process_aware;
use irqlab_report::html::Table;
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct Args {
    /// The network device (its NAPI kthreads; threaded NAPI is switched on
    /// for the run when off)
    dev: String,
    /// Pin the NAPI kthreads to this CPU (restored at the end)
    #[arg(long, visible_alias = "cpus", value_name = "CPU", value_parser = flags::one_cpu)]
    cpu: Option<usize>,
    /// The kthreads' scheduling when no receiver waits: other[:NICE],
    /// idle (background), fifo[:PRIO] or rr[:PRIO] (alone: 50, as the
    /// kernel's threaded IRQ handlers)
    #[arg(long, value_name = "POLICY", default_value = "other", value_parser = flags::policy)]
    floor: flags::Policy,
    /// Run this long (default: until Ctrl-C or SIGTERM)
    #[arg(long, value_name = "D", value_parser = flags::positive_duration_ns)]
    duration: Option<u64>,
    /// Do not run the compensation algorithm on the BPF accounting
    #[arg(long)]
    no_accounting: bool,
    /// Account this CPU (default: --cpu, else every CPU; --record keeps
    /// the first accounted CPU's bottom halves and ticks)
    #[arg(long, visible_alias = "account-cpus", value_name = "CPU", value_parser = flags::one_cpu)]
    account_cpu: Option<usize>,
    /// Write what the controller's adapter took (blocks, wakes, bottom
    /// halves, ticks) as a trace for tests/process_aware_decisions.rs
    #[arg(long, value_name = "FILE")]
    record: Option<PathBuf>,
    /// Write the irqlab/process-aware/v1 report ("-": to stdout, instead of the text)
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
}

pub fn run(args: Args) -> Result<Status, CliError> {
    let floor = args.floor.fixed_on_other_threads("--floor")?;
    let config = process_aware::Config {
        dev: args.dev.clone(),
        cpu: args.cpu,
        floor,
        duration_ns: args.duration,
        accounting: !args.no_accounting,
        account_cpus: args.account_cpu.map(|c| vec![c]),
        record: args.record.is_some(),
        ..Default::default()
    };
    super::control::warn_of_stalld(
        &format!("{}'s NAPI threads, kept at the floor while no task waits,", config.dev),
        "run them above the tasks they were kept below",
    );
    let stop = crate::signal::stop_flag();
    let quiet = args.json.as_deref() == Some(std::path::Path::new("-"));
    let report = process_aware::run(&config, &stop, |c| {
        if !quiet {
            let who = c.waiter.map_or("nobody waits".to_string(), |tid| format!("tid {tid} waits"));
            eprintln!("{:>10.3} s  {} -> {}  (reaction {})", c.at_ns as f64 / 1e9, who, c.attr, irqlab_analysis::format_ns(c.reaction_ns));
        }
    })?;
    if let Some(path) = &args.record {
        let trace = serde_json::json!({
            "source": format!("irqlab control process-aware {} (cpu {:?}, floor {}), {} s", args.dev, args.cpu, floor, report.held_ns as f64 / 1e9),
            "tick_ns": process_aware::TICK_NS,
            "floor": floor,
            "observations": report.recorded.iter().map(|(_, o)| o).collect::<Vec<_>>(),
        });
        crate::output::write_json(path, &trace)?;
    }
    json_or_summary(args.json.as_deref(), &report, summary)?;
    Ok(Status::from_ok(report.complete))
}

fn summary(r: &process_aware::Report) -> String {
    use irqlab_analysis::format_ns;
    let ns = |v: Option<u64>| v.map_or("-".to_string(), format_ns);
    let threads: Vec<String> = r.threads.iter().map(|t| format!("{} ({})", t.comm, t.tid)).collect();
    let receivers: Vec<String> = r.candidates.iter().map(|c| format!("{} ({}) {} {}", c.comm, c.pid, c.protocol, c.local)).collect();
    format!(
        "process-aware on {} ({}), floor {}, {} ({})\nreceivers: {}\nwatched threads {}, waits seen {}, priority changes {}; reaction p50/p99/max {}/{}/{}\n{}{}",
        r.config.dev,
        threads.join(", "),
        r.config.floor,
        format_ns(r.held_ns),
        r.ended_by,
        if receivers.is_empty() { "none found".to_string() } else { receivers.join(", ") },
        r.watched_threads,
        r.waits,
        r.change_count,
        ns(r.reaction.p50_ns),
        ns(r.reaction.p99_ns),
        ns(r.reaction.max_ns),
        overhead_line(&r.overhead),
        if r.lost_events > 0 { format!("warning: {} monitor events lost\n", r.lost_events) } else { String::new() }
    ) + &r.accounting.as_ref().map_or(String::new(), accounting_summary)
}

/// The compensation algorithm's charges beside the kernel's and the truth.
fn accounting_summary(a: &process_aware::accounting::Accounted) -> String {
    use irqlab_analysis::format_ns;
    let ns = |v: Option<u64>| v.map_or("-".to_string(), format_ns);
    let pct = |v: Option<f64>| v.map_or("-".to_string(), |e| format!("{:+.1}%", 100.0 * e));
    let mut t = Table::new(["TASK", "TRUTH (BPF)", "KERNEL", "ERR", "COMPENSATION", "ERR", "TICKS MOVED", "SERVED", "IN ITS CONTEXT"]);
    for s in &a.tasks {
        t = t.row([
            format!("{} ({})", s.comm, s.tid),
            format_ns(s.truth_run_ns),
            ns(s.kernel_charged_ns),
            pct(s.kernel_error),
            ns(s.compensation_charged_ns),
            pct(s.compensation_error),
            s.moved_ticks.to_string(),
            format_ns(s.served_softirq_ns),
            format_ns(s.stolen_softirq_ns),
        ]);
    }
    format!(
        "compensation (CPUs {:?}, tick {}, a bottom half = {} of network softirq work; {} ticks, {} late; N(t) {:?}):\n{}",
        a.cpus,
        format_ns(a.tick_ns),
        format_ns(a.quantum_ns),
        a.ticks,
        a.late_ticks,
        a.bh_per_tick.iter().map(|n| n.map(|v| v.round())).collect::<Vec<_>>(),
        t.to_text()
    )
}
