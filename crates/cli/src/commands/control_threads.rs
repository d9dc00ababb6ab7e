//! `irqlab control threads`: threads under a scheduling policy (a sporadic server among them) while this runs.

use super::control::{online, overhead_line};
use crate::error::{CliError, Status};
use crate::flags;
use crate::output::json_or_summary;
use irqlab_control::set_threads;
use irqlab_host::journal::sched;
use irqlab_report::html::Table;
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct Args {
    /// napi:DEV (NAPI kthreads of a device), irq:N or irq:NAME (threaded IRQ
    /// handlers), ksoftirqd:CPU, pid:N, comm:GLOB
    #[arg(value_name = "MATCH")]
    matched: String,
    /// background (SCHED_IDLE), foreground (SCHED_FIFO 99), fifo[:PRIO]
    /// (fifo alone: 50, as the kernel's threaded IRQ handlers), rr[:PRIO],
    /// other[:NICE], idle, deadline:RUNTIME/PERIOD[/DEADLINE],
    /// sporadic:BUDGET/PERIOD[:HIGH/LOW][:max-repl=N]
    #[arg(long, value_name = "POLICY", value_parser = flags::policy)]
    policy: flags::Policy,
    /// Hold it this long, then restore (default: until Ctrl-C, SIGTERM, or
    /// every matched thread exited)
    #[arg(long, value_name = "D", conflicts_with = "persist", value_parser = flags::positive_duration_ns)]
    duration: Option<u64>,
    /// Apply, record in the journal as persistent, and exit (undo with
    /// `irqlab control revert ID`)
    #[arg(long)]
    persist: bool,
    /// Also pin the threads to these CPUs (e.g. 1 or 0-3,6); restored with
    /// the policy
    #[arg(long, visible_alias = "cpus", value_name = "LIST", value_parser = flags::cpu_list)]
    cpu: Option<flags::CpuList>,
    /// Take every thread the MATCH names even when a glob matches more than
    /// 16 threads or kernel threads, or it names PID 1 (the kernel's
    /// per-CPU threads, migration/N, rcu*, ..., and irqlab's own are never taken)
    #[arg(long)]
    all_matching: bool,
    /// Write the irqlab/control/v1 document ("-": to stdout, instead of the summary)
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
}

pub fn run(args: Args) -> Result<Status, CliError> {
    let policy = args.policy.on_other_threads();
    let duration_ns = args.duration;
    let cpus = online(args.cpu.as_ref(), "--cpu")?;
    let config = set_threads::Config {
        matched: args.matched.clone(),
        policy,
        duration_ns,
        persist: args.persist,
        cpus,
        all_matching: args.all_matching,
    };
    if let Ok(m) = irqlab_host::journal::threads::Match::parse(&config.matched) {
        if config.open_hold(&m) && m.resolve(&config.matched).is_err() {
            eprintln!("no thread matches {} yet: holding, and taking matching threads as they appear", config.matched);
        }
    }
    let parks = match &config.policy {
        sched::PolicySpec::Sporadic { .. } => true,
        sched::PolicySpec::Fixed { attr } => matches!(attr, sched::SchedAttr::Idle),
    };
    if parks && !config.persist {
        super::control::warn_of_stalld(
            &format!("the threads of {} this run keeps runnable at a low priority or SCHED_IDLE", config.matched),
            "run them past their budget",
        );
    }
    let stop = crate::signal::stop_flag();
    let report = set_threads::run(&config, &stop, |thread, old, new| {
        eprintln!("{} (tid {}): {old} -> {new}", thread.comm, thread.tid);
    })?;
    json_or_summary(args.json.as_deref(), &report, summary)?;
    Ok(Status::from_ok(report.complete))
}

fn summary(r: &set_threads::Report) -> String {
    let mut t = Table::new(["THREAD", "TID", "WAS", "SET TO", "AT THE END"]);
    for o in &r.threads {
        let end = match (o.exited, o.restored) {
            (true, _) => "exited".to_string(),
            (_, true) => "restored".to_string(),
            _ => format!("kept (entry {})", o.entry),
        };
        t = t.row([o.thread.comm.clone(), o.thread.tid.to_string(), o.old.to_string(), o.new.to_string(), end]);
    }
    let mut text = format!("held {} ({}):\n{}", irqlab_analysis::format_ns(r.held_ns), r.ended_by, t.to_text());
    if let Some(server) = &r.server {
        text.push_str(&server_summary(server));
    }
    text
}

/// The live sporadic server's figures: per thread, exhaustions, the
/// reaction latency and the high-level service per period.
fn server_summary(s: &irqlab_control::sporadic::ServerReport) -> String {
    use irqlab_analysis::format_ns;
    let p = &s.params;
    let ns = |v: Option<u64>| v.map_or("-".to_string(), format_ns);
    let mut t = Table::new(["THREAD", "EXHAUSTED", "REPLENISHED", "REACTION p50/p99/max", "SERVED PER PERIOD p50/p99/max"]);
    for th in &s.threads {
        t = t.row([
            format!("{} ({})", th.comm, th.tid),
            th.exhaustions.to_string(),
            th.replenishments.to_string(),
            format!("{}/{}/{}", ns(th.reaction.p50_ns), ns(th.reaction.p99_ns), ns(th.reaction.max_ns)),
            format!("{}/{}/{}", ns(th.served_per_period.p50_ns), ns(th.served_per_period.p99_ns), ns(th.served_per_period.max_ns)),
        ]);
    }
    let mut text = format!(
        "sporadic server: budget {} per {}, at most {} pending replenishments, {} while budget lasts, {} after:\n{}",
        format_ns(p.budget_ns),
        format_ns(p.period_ns),
        p.max_repl,
        p.high,
        p.low,
        t.to_text()
    );
    text.push_str(&overhead_line(&s.overhead));
    if s.lost_events > 0 {
        text.push_str(&format!("warning: the monitor lost {} events; the figures above are unreliable\n", s.lost_events));
    }
    text
}
