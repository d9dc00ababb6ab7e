//! `irqlab control ...`: change the machine through the control journal,
//! see what irqlab changed, and undo what a killed run left. Wiring only:
//! the control layer is `irqlab_host::journal` (the journal and its
//! objects) and `irqlab_control` (the controllers).
//!
//! As `measure`: this file holds the subcommands' list and what several
//! share (the hold flags, the CPU check, holding a plan and its summary);
//! each subcommand's flags and run are in `control_<name>.rs`.

use super::{control_apply, control_bh_budget, control_export, control_idletime, control_irq, control_napi};
use super::{control_process_aware, control_sched_knobs, control_status, control_threads};
use crate::error::{CliError, Status};
use crate::flags;
use crate::output::json_or_summary;
use irqlab_control::profile;
use irqlab_report::html::Table;
use std::path::PathBuf;

pub use control_status::revert_leftovers;

#[derive(clap::Subcommand)]
pub enum Command {
    /// Put threads under a scheduling policy while this runs (or for good
    /// with --persist); each gets its own setting back at the end
    Threads(control_threads::Args),
    /// List a network device's NAPI instances (id, IRQ, polling thread,
    /// settings), or change their settings while this runs (or for good
    /// with --persist)
    Napi(control_napi::Args),
    /// The BH-threshold paper's adaptive bottom-half budget on a device's
    /// threaded-NAPI kthreads: per period, NAPI time, packets and backlog
    /// into Algorithm 1 (the simulator's code), the threshold enforced
    #[command(name = "bh-budget")]
    BhBudget(control_bh_budget::Args),
    /// The process-aware paper's bottom halves: a device's threaded-NAPI
    /// kthreads run at the priority of the most important process blocked
    /// waiting for its data (the simulator's decision code), at the floor
    /// when none waits
    #[command(name = "process-aware")]
    ProcessAware(control_process_aware::Args),
    /// The idletime dissertation's scheduler on a disk: background processes
    /// are held back (frozen or throttled) until the disk has had no
    /// foreground request for the preemption interval (the simulator's
    /// decision code)
    Idletime(control_idletime::Args),
    /// Switch a scheduler feature of debugfs's sched/features (HRTICK_DL,
    /// HRTICK, any name the kernel lists) on or off while this runs (or for
    /// good with --persist); needs a kernel without lockdown
    #[command(name = "sched-feature")]
    SchedFeature(control_sched_knobs::SchedFeatureArgs),
    /// Set the fair class's deadline server (debugfs
    /// sched/fair_server/cpuN, Linux 6.12+) while this runs (or for good
    /// with --persist): runtime 0 lets real-time tasks take the whole CPU
    #[command(name = "fair-server")]
    FairServer(control_sched_knobs::FairServerArgs),
    /// Steer IRQs (by number, handler name or device; `default` for IRQs
    /// registered later) to CPUs while this runs (or for good with
    /// --persist); each gets its own affinity back at the end
    Irq(control_irq::Args),
    /// Apply a profile (IRQ affinities, thread policies, NAPI and RPS
    /// settings; `irqlab survey` writes one) as one change: all or nothing,
    /// held while this runs (or for good with --persist)
    Apply(control_apply::Args),
    /// Install a profile for every boot: a systemd unit (irqlab-profile.service)
    /// that applies it at boot and holds it, taking threads that start
    /// later and setting back what something else changes; and its [boot]
    /// options for the boot loader. Needs systemd as init
    Install(control_apply::InstallArgs),
    /// Stop the installed profile's unit (its settings go back) and remove
    /// what `control install` wrote
    Uninstall,
    /// Write a profile as a tuned profile, for a machine whose tuning lives
    /// in tuned: tuned.conf (scheduler, irqbalance, sysfs, bootloader) and
    /// script.sh for the IRQ affinities tuned 2.20 has no plugin for
    Export(control_export::Args),
    /// What irqlab changed on this machine: old -> new, when, by which
    /// process, and whether that process is still there to undo it
    Status(control_status::StatusArgs),
    /// Undo changes a killed irqlab run left behind (or persisted ones)
    Revert(control_status::RevertArgs),
}

/// What `control irq` and `control apply` share: how long, and the report.
#[derive(clap::Args)]
pub struct HoldArgs {
    /// Hold it this long, then restore (default: until Ctrl-C or SIGTERM)
    #[arg(long, value_name = "D", conflicts_with = "persist", value_parser = flags::positive_duration_ns)]
    pub(crate) duration: Option<u64>,
    /// Apply, record in the journal as persistent, and exit (undo with `irqlab control revert ID`)
    #[arg(long)]
    pub(crate) persist: bool,
    /// Print each change as old -> new and change nothing
    #[arg(long, conflicts_with_all = ["duration", "persist"])]
    pub(crate) dry_run: bool,
    /// Write the irqlab/control-apply/v1 document ("-": to stdout, instead of the summary)
    #[arg(long, value_name = "FILE")]
    pub(crate) json: Option<PathBuf>,
    /// Move IRQs even where a running irqbalance has no socket to be told
    /// to leave them alone (it moves them back at its next pass)
    #[arg(long)]
    pub(crate) ignore_irqbalance: bool,
}

pub fn run(command: Command) -> Result<Status, CliError> {
    match command {
        Command::Threads(a) => control_threads::run(a),
        Command::Napi(a) => control_napi::run(a),
        Command::BhBudget(a) => control_bh_budget::run(a),
        Command::ProcessAware(a) => control_process_aware::run(a),
        Command::Idletime(a) => control_idletime::run(a),
        Command::SchedFeature(a) => control_sched_knobs::sched_feature(a),
        Command::FairServer(a) => control_sched_knobs::fair_server(a),
        Command::Irq(a) => control_irq::run(a),
        Command::Apply(a) => control_apply::run(a),
        Command::Install(a) => control_apply::install(a),
        Command::Uninstall => control_apply::uninstall(),
        Command::Export(a) => control_export::run(a),
        Command::Status(a) => control_status::status(a),
        Command::Revert(a) => control_status::revert(a),
    }
}

/// A CPU-list flag's CPUs, each online (exit 2 naming the flag and the online CPUs).
pub(crate) fn online(list: Option<&flags::CpuList>, flag: &str) -> Result<Option<Vec<usize>>, CliError> {
    let Some(list) = list else { return Ok(None) };
    for &cpu in &list.0 {
        irqlab_host::rt::require_online(cpu, flag)?;
    }
    Ok(Some(list.0.clone()))
}

/// Says on stderr that a running stalld would take `starved` for starving
/// threads and boost them (issue 54; `daemons::stalld_warning`).
pub(crate) fn warn_of_stalld(starved: &str, breaks: &str) {
    if let Some(warning) = irqlab_host::daemons::stalld_warning(starved, breaks) {
        eprintln!("{warning}");
    }
}

/// [`warn_of_stalld`] for the interference probe (`measure interference`,
/// `survey`): its SCHED_FIFO spin starves what shares its CPU.
pub(crate) fn warn_of_stalld_beside_the_probe() {
    warn_of_stalld(
        "the threads the probe's SCHED_FIFO spin keeps off its CPU",
        "put them on the CPU ahead of the probe, as interference from a SCHED_DEADLINE thread",
    );
}

/// What the controller's own thread cost, one line.
pub(crate) fn overhead_line(o: &irqlab_control::controller_thread::Overhead) -> String {
    format!(
        "controller: {:.0} us of CPU per second of control ({:.2}% of a CPU); its setup (BPF programs loaded, threads found) took {}\n",
        o.controller_us_per_s,
        o.cpu_share * 100.0,
        irqlab_analysis::format_ns(o.setup_cpu_ns)
    )
}

/// Applies (or, with --dry-run, shows) a resolved plan, holds it, reports.
pub(crate) fn hold_plan(
    source: String,
    plan: profile::Plan,
    follow: Option<&dyn Fn() -> Vec<profile::Planned>>,
    args: HoldArgs,
) -> Result<Status, CliError> {
    let config = profile::Config { source, duration_ns: args.duration, persist: args.persist };
    let quiet = args.json.as_deref() == Some(std::path::Path::new("-"));
    let plan = plan.beside_irqbalance(args.ignore_irqbalance)?;
    let report = if args.dry_run {
        profile::dry_run(&config, &plan)?
    } else {
        let stop = crate::signal::stop_flag();
        profile::apply(&config, plan, follow, &stop, |row| {
            if !quiet {
                match row.outcome {
                    "refused" => eprintln!("{}: kept by the kernel ({})", row.object, row.why.as_deref().unwrap_or("")),
                    "drift" => eprintln!("{}: DRIFTED: {}", row.object, row.why.as_deref().unwrap_or("")),
                    "already" => eprintln!("{}: already {}", row.object, row.new),
                    "absent" => eprintln!("{}: nothing to set ({})", row.setting, row.why.as_deref().unwrap_or("")),
                    _ => eprintln!("{}: {} -> {}", row.object, row.old, row.new),
                }
            }
        })?
    };
    json_or_summary(args.json.as_deref(), &report, apply_summary)?;
    Ok(Status::from_ok(report.complete))
}

fn apply_summary(r: &profile::Report) -> String {
    let mut t = Table::new(["SETTING", "OBJECT", "WAS", "SET TO", "AT THE END"]);
    for row in &r.rows {
        let end = match row.outcome {
            "dry-run" => "not changed (dry run)".to_string(),
            "already" => "already so".to_string(),
            "refused" => "kept by the kernel".to_string(),
            "absent" => "nothing matches now".to_string(),
            _ if r.persist => format!("kept (entry {})", row.entry),
            _ if row.restored => "restored".to_string(),
            _ => "gone".to_string(),
        };
        let new = match &row.effective {
            Some(e) if e != row.new.trim_start_matches("CPU ") => format!("{} (kernel delivers to {e})", row.new),
            _ => row.new.clone(),
        };
        t = t.row([row.setting.clone(), row.object.clone(), row.old.clone(), new, end]);
    }
    let head = match &r.ended_by {
        None => format!("{}: dry run, nothing changed:", r.source),
        Some(by) => format!("{}: held {} ({by}):", r.source, irqlab_analysis::format_ns(r.held_ns)),
    };
    let drifts = match r.drifts.len() {
        0 => String::new(),
        n => {
            let again = r.drifts.iter().filter(|d| d.set_back && d.failed.is_none()).count();
            format!("\n{n} value(s) changed by something else while held, {again} set again (see the report's `drifts`)")
        }
    };
    format!("{head}\n{}{drifts}", t.to_text())
}
