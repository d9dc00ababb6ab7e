//! `irqlab control sched-feature` and `fair-server`: the scheduler knobs only debugfs holds.

use super::control::online;
use crate::error::{CliError, Status};
use crate::flags;
use crate::output::json_or_summary;
use irqlab_control::sched_knobs;
use irqlab_host::journal::sched_knobs::{check_fair_server, Change};
use irqlab_report::html::Table;
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct SchedFeatureArgs {
    /// The feature, as the kernel lists it in sched/features without NO_
    /// (e.g. HRTICK_DL)
    #[arg(value_name = "NAME")]
    name: String,
    /// Switch it on or off
    #[arg(value_name = "on|off", value_parser = ["on", "off"])]
    state: String,
    /// Hold it this long, then restore (default: until Ctrl-C or SIGTERM)
    #[arg(long, value_name = "D", conflicts_with = "persist", value_parser = flags::positive_duration_ns)]
    duration: Option<u64>,
    /// Apply, record in the journal as persistent, and exit (undo with `irqlab control revert ID`)
    #[arg(long)]
    persist: bool,
    /// Write the irqlab/control-sched/v1 document ("-": to stdout, instead of the summary)
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
}

#[derive(clap::Args)]
pub struct FairServerArgs {
    /// The CPUs whose fair server is set (e.g. 1 or 0-3,6; default: every online CPU)
    #[arg(long, visible_alias = "cpus", value_name = "LIST", value_parser = flags::cpu_list)]
    cpu: Option<flags::CpuList>,
    /// The server's runtime per period, the fair class's guaranteed share
    /// against real-time tasks (e.g. 50ms, the kernel's default; 0: none)
    #[arg(long, value_name = "T", value_parser = flags::duration_ns)]
    runtime: u64,
    /// The server's period (100us..4.19s; default: each CPU keeps its own, 1s by default)
    #[arg(long, value_name = "P", value_parser = flags::positive_duration_ns)]
    period: Option<u64>,
    /// Hold it this long, then restore (default: until Ctrl-C or SIGTERM)
    #[arg(long, value_name = "D", conflicts_with = "persist", value_parser = flags::positive_duration_ns)]
    duration: Option<u64>,
    /// Apply, record in the journal as persistent, and exit (undo with `irqlab control revert ID`)
    #[arg(long)]
    persist: bool,
    /// Write the irqlab/control-sched/v1 document ("-": to stdout, instead of the summary)
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
}

pub fn sched_feature(args: SchedFeatureArgs) -> Result<Status, CliError> {
    let change = Change::SchedFeature { name: args.name.clone(), on: args.state == "on" };
    sched_knobs_run(change, args.duration, args.persist, args.json)
}

pub fn fair_server(args: FairServerArgs) -> Result<Status, CliError> {
    let cpus = online(args.cpu.as_ref(), "--cpu")?;
    // A bad pair is refused before the lockdown check and the mount.
    if let Some(period) = args.period {
        check_fair_server(args.runtime, period)?;
    }
    let change = Change::FairServer { cpus, runtime_ns: args.runtime, period_ns: args.period };
    sched_knobs_run(change, args.duration, args.persist, args.json)
}

/// `control sched-feature` and `control fair-server`: hold, restore or
/// persist, report, as `control napi` does.
fn sched_knobs_run(change: Change, duration_ns: Option<u64>, persist: bool, json: Option<PathBuf>) -> Result<Status, CliError> {
    let config = sched_knobs::Config { change, duration_ns, persist };
    let stop = crate::signal::stop_flag();
    let quiet = json.as_deref() == Some(std::path::Path::new("-"));
    let report = sched_knobs::run(&config, &stop, |object, old, new| {
        if !quiet {
            eprintln!("{object}: {old} -> {new}");
        }
    })?;
    json_or_summary(json.as_deref(), &report, |r| {
        let mut t = Table::new(["SETTING", "WAS", "SET TO", "AT THE END"]);
        for c in &r.changes {
            let end = if c.restored { "restored".to_string() } else { format!("kept (entry {})", c.entry) };
            t = t.row([c.object.clone(), c.old.clone(), c.new.clone(), end]);
        }
        let mounted = if r.mounted_debugfs { ", mounted by irqlab for the run" } else { "" };
        format!(
            "held {} ({}; kernel {}, debugfs at {}{mounted}):\n{}",
            irqlab_analysis::format_ns(r.held_ns),
            r.ended_by,
            r.kernel,
            r.debugfs,
            t.to_text()
        )
    })?;
    Ok(Status::from_ok(report.complete))
}
