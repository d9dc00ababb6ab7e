//! `irqlab control ...`: change the machine through the control journal,
//! see what irqlab changed, and undo what a killed run left. Wiring only:
//! the control layer is `irqlab_host::journal` (the journal and its
//! objects) and `irqlab_control` (the controllers).

use super::control_export;
use crate::error::{CliError, Status};
use crate::flags;
use crate::output::{self, json_or_summary};
use irqlab_control::{bh_budget, boot, idletime, process_aware, profile, set_napi, set_threads};
use irqlab_host::journal::sched_knobs;
use irqlab_host::journal::{self, Entry, Restored, State};
use irqlab_report::html::Table;
use serde::Serialize;
use std::path::PathBuf;

#[derive(clap::Subcommand)]
pub enum Command {
    /// Put threads under a scheduling policy while this runs (or for good
    /// with --persist); each gets its own setting back at the end
    Threads(ThreadsArgs),
    /// List a network device's NAPI instances (id, IRQ, polling thread,
    /// settings), or change their settings while this runs (or for good
    /// with --persist)
    Napi(NapiArgs),
    /// The BH-threshold paper's adaptive bottom-half budget on a device's
    /// threaded-NAPI kthreads: per period, NAPI time, packets and backlog
    /// into Algorithm 1 (the simulator's code), the threshold enforced
    #[command(name = "bh-budget")]
    BhBudget(BhBudgetArgs),
    /// The process-aware paper's bottom halves: a device's threaded-NAPI
    /// kthreads run at the priority of the most important process blocked
    /// waiting for its data (the simulator's decision code), at the floor
    /// when none waits
    #[command(name = "process-aware")]
    ProcessAware(ProcessAwareArgs),
    /// The idletime dissertation's scheduler on a disk: background processes
    /// are held back (frozen or throttled) until the disk has had no
    /// foreground request for the preemption interval (the simulator's
    /// decision code)
    Idletime(IdletimeArgs),
    /// Switch a scheduler feature of debugfs's sched/features (HRTICK_DL,
    /// HRTICK, any name the kernel lists) on or off while this runs (or for
    /// good with --persist); needs a kernel without lockdown
    #[command(name = "sched-feature")]
    SchedFeature(SchedFeatureArgs),
    /// Set the fair class's deadline server (debugfs
    /// sched/fair_server/cpuN, Linux 6.12+) while this runs (or for good
    /// with --persist): runtime 0 lets real-time tasks take the whole CPU
    #[command(name = "fair-server")]
    FairServer(FairServerArgs),
    /// Steer IRQs (by number, handler name or device; `default` for IRQs
    /// registered later) to CPUs while this runs (or for good with
    /// --persist); each gets its own affinity back at the end
    Irq(IrqArgs),
    /// Apply a profile (IRQ affinities, thread policies, NAPI and RPS
    /// settings; `irqlab survey` writes one) as one change: all or nothing,
    /// held while this runs (or for good with --persist)
    Apply(ApplyArgs),
    /// Install a profile for every boot: a systemd unit (irqlab-profile.service)
    /// that applies it at boot and holds it, taking threads that start
    /// later and setting back what something else changes; and its [boot]
    /// options for the boot loader. Needs systemd as init
    Install(InstallArgs),
    /// Stop the installed profile's unit (its settings go back) and remove
    /// what `control install` wrote
    Uninstall,
    /// Write a profile as a tuned profile, for a machine whose tuning lives
    /// in tuned: tuned.conf (scheduler, irqbalance, sysfs, bootloader) and
    /// script.sh for the IRQ affinities tuned 2.20 has no plugin for
    Export(control_export::Args),
    /// What irqlab changed on this machine: old -> new, when, by which
    /// process, and whether that process is still there to undo it
    Status(StatusArgs),
    /// Undo changes a killed irqlab run left behind (or persisted ones)
    Revert(RevertArgs),
}

#[derive(clap::Args)]
pub struct ThreadsArgs {
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

#[derive(clap::Args)]
pub struct NapiArgs {
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

#[derive(clap::Args)]
pub struct BhBudgetArgs {
    /// The network device whose NAPI kthreads are governed (e.g. irqlab-b)
    #[arg(value_name = "DEV")]
    dev: String,
    /// The sampling period (100us..1s)
    #[arg(long, value_name = "D", default_value = "1ms", value_parser = flags::duration_ns)]
    period: u64,
    /// K, the controller's gain, in (0, 1]
    #[arg(long, value_name = "K", default_value_t = bh_budget::Config::default().gain)]
    gain: f64,
    /// W, the window of the means, in periods
    #[arg(long, value_name = "W", default_value_t = bh_budget::Config::default().window)]
    window: usize,
    /// T_min, the smallest threshold
    #[arg(long, value_name = "T", default_value = "50us", value_parser = flags::duration_ns)]
    min: u64,
    /// T(0), the first period's threshold (default: half the period)
    #[arg(long, value_name = "T", value_parser = flags::duration_ns)]
    initial: Option<u64>,
    /// fifo: SCHED_FIFO HIGH until the threshold, SCHED_IDLE after (a user-space
    /// controller); deadline: SCHED_DEADLINE runtime = threshold (tick-enforced
    /// unless HRTICK_DL is on); observe: nothing enforced, the kthreads keep their
    /// own scheduling (what the kernel's default does, and what the controller
    /// would have asked)
    #[arg(long, value_name = "fifo|deadline|observe", default_value = "fifo")]
    enforce: bh_budget::Enforce,
    /// The SCHED_FIFO priority below the threshold (fifo)
    #[arg(long, value_name = "PRIO", default_value_t = bh_budget::Config::default().high)]
    high: u32,
    /// Pin the NAPI kthreads to this CPU (restored at the end; fifo only)
    #[arg(long, visible_alias = "cpus", value_name = "CPU", value_parser = flags::one_cpu)]
    cpu: Option<usize>,
    /// Run this long (default: until Ctrl-C or SIGTERM)
    #[arg(long, value_name = "D", value_parser = flags::positive_duration_ns)]
    duration: Option<u64>,
    /// Write the per-period irqlab/bh-budget-trace/v1 trace: k, C, P, N, E, T, T(k+1)
    #[arg(long, value_name = "FILE", value_parser = output::file_only())]
    trace: Option<PathBuf>,
    /// Write the irqlab/bh-budget/v1 summary ("-": to stdout, instead of the text)
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
}

#[derive(clap::Args)]
pub struct ProcessAwareArgs {
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

#[derive(clap::Args)]
#[command(
    after_help = "Examples:\n  irqlab control idletime --resource disk --foreground comm:postgres --background pid:4242 --interval 50ms\n  \
irqlab control idletime --resource disk:vda --foreground /sys/fs/cgroup/cpu/db --interval 20ms --background -- rsync -a /src /dst\n  \
irqlab control idletime --resource net:eth0 --foreground comm:nginx --interval 2ms --background -- rsync -a /src host:/dst"
)]
pub struct IdletimeArgs {
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

/// What `control irq` and `control apply` share: how long, and the report.
#[derive(clap::Args)]
pub struct HoldArgs {
    /// Hold it this long, then restore (default: until Ctrl-C or SIGTERM)
    #[arg(long, value_name = "D", conflicts_with = "persist", value_parser = flags::positive_duration_ns)]
    duration: Option<u64>,
    /// Apply, record in the journal as persistent, and exit (undo with `irqlab control revert ID`)
    #[arg(long)]
    persist: bool,
    /// Print each change as old -> new and change nothing
    #[arg(long, conflicts_with_all = ["duration", "persist"])]
    dry_run: bool,
    /// Write the irqlab/control-apply/v1 document ("-": to stdout, instead of the summary)
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// Move IRQs even where a running irqbalance has no socket to be told
    /// to leave them alone (it moves them back at its next pass)
    #[arg(long)]
    ignore_irqbalance: bool,
}

#[derive(clap::Args)]
pub struct IrqArgs {
    /// IRQs: a number (38), a handler's name (virtio2-input.0), a device
    /// (virtio2, eth0: all its IRQs), `*` (every IRQ the kernel lets move),
    /// or `default` (/proc/irq/default_smp_affinity)
    #[arg(value_name = "IRQ|DEVICE", required = true)]
    irqs: Vec<String>,
    /// The CPUs to deliver them to (e.g. 0 or 0-3,6)
    #[arg(long, visible_alias = "cpus", value_name = "LIST", value_parser = flags::cpu_list)]
    cpu: flags::CpuList,
    #[command(flatten)]
    hold: HoldArgs,
}

#[derive(clap::Args)]
pub struct ApplyArgs {
    /// The profile (TOML, schema irqlab/profile/v1; `irqlab survey --out DIR` writes DIR/profile.toml)
    #[arg(value_name = "PROFILE")]
    profile: PathBuf,
    /// Apply the settings whose MATCH names no thread now (or more threads
    /// than surveyed) as nothing to set, instead of refusing the profile
    #[arg(long)]
    allow_missing: bool,
    /// Write the profile's [boot] kernel command-line options for the next
    /// boot (a GRUB drop-in, kept in the journal until `control revert`),
    /// instead of applying its run-time settings
    #[arg(long, conflicts_with_all = ["duration", "persist", "json", "follow"])]
    boot: bool,
    /// While holding, check every second for threads that now match the
    /// profile (a service started later) and take them, and set back any
    /// value something else changed (drift), each said as it happens; what
    /// `control install`'s unit runs
    #[arg(long, conflicts_with_all = ["persist", "dry_run"])]
    follow: bool,
    /// First predict what the profile changes on each CPU: the simulator
    /// runs the survey beside PROFILE (its directory's survey.json) with
    /// the profile applied in the model, and keeps the prediction in that
    /// directory's sim/from-survey.json, where `irqlab survey --compare
    /// DIR` shows it beside what is measured after
    #[arg(long, conflicts_with = "boot")]
    predict: bool,
    #[command(flatten)]
    hold: HoldArgs,
}

#[derive(clap::Args)]
pub struct InstallArgs {
    /// The profile (TOML, schema irqlab/profile/v1)
    #[arg(value_name = "PROFILE")]
    profile: PathBuf,
}

#[derive(clap::Args)]
pub struct StatusArgs {
    /// Write the entries as JSON ("-": to stdout, instead of the table)
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
}

#[derive(clap::Args)]
pub struct RevertArgs {
    /// The entry to undo (from `irqlab control status`)
    #[arg(value_name = "ID", required_unless_present = "all", conflicts_with = "all")]
    id: Option<String>,
    /// Undo every leftover of a killed run and every persisted change
    #[arg(long)]
    all: bool,
    /// Also revert a persisted change someone changed since (DRIFTED in
    /// `control status`): its old value goes back over their change
    #[arg(long)]
    force: bool,
}

pub fn run(command: Command) -> Result<Status, CliError> {
    match command {
        Command::Threads(a) => threads(a),
        Command::Napi(a) => napi(a),
        Command::BhBudget(a) => bh_budget_run(a),
        Command::ProcessAware(a) => process_aware_run(a),
        Command::Idletime(a) => idletime_run(a),
        Command::SchedFeature(a) => sched_feature(a),
        Command::FairServer(a) => fair_server(a),
        Command::Irq(a) => irq(a),
        Command::Apply(a) => apply(a),
        Command::Install(a) => install(a),
        Command::Uninstall => uninstall(),
        Command::Export(a) => control_export::run(a),
        Command::Status(a) => status(a),
        Command::Revert(a) => revert(a),
    }
}

/// A CPU-list flag's CPUs, each online (exit 2 naming the flag and the online CPUs).
fn online(list: Option<&flags::CpuList>, flag: &str) -> Result<Option<Vec<usize>>, CliError> {
    let Some(list) = list else { return Ok(None) };
    for &cpu in &list.0 {
        irqlab_host::rt::require_online(cpu, flag)?;
    }
    Ok(Some(list.0.clone()))
}

fn threads(args: ThreadsArgs) -> Result<Status, CliError> {
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

/// What the controller's own thread cost, one line.
fn overhead_line(o: &irqlab_control::controller_thread::Overhead) -> String {
    format!(
        "controller: {:.0} us of CPU per second of control ({:.2}% of a CPU); its setup (BPF programs loaded, threads found) took {}\n",
        o.controller_us_per_s,
        o.cpu_share * 100.0,
        irqlab_analysis::format_ns(o.setup_cpu_ns)
    )
}

fn napi(args: NapiArgs) -> Result<Status, CliError> {
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

fn sched_feature(args: SchedFeatureArgs) -> Result<Status, CliError> {
    let change = sched_knobs::Change::SchedFeature { name: args.name.clone(), on: args.state == "on" };
    sched_knobs_run(change, args.duration, args.persist, args.json)
}

fn fair_server(args: FairServerArgs) -> Result<Status, CliError> {
    let cpus = online(args.cpu.as_ref(), "--cpu")?;
    // A bad pair is refused before the lockdown check and the mount.
    if let Some(period) = args.period {
        sched_knobs::check_fair_server(args.runtime, period)?;
    }
    let change = sched_knobs::Change::FairServer { cpus, runtime_ns: args.runtime, period_ns: args.period };
    sched_knobs_run(change, args.duration, args.persist, args.json)
}

/// `control sched-feature` and `control fair-server`: hold, restore or
/// persist, report, as `control napi` does.
fn sched_knobs_run(
    change: sched_knobs::Change,
    duration_ns: Option<u64>,
    persist: bool,
    json: Option<PathBuf>,
) -> Result<Status, CliError> {
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

fn irq(args: IrqArgs) -> Result<Status, CliError> {
    let cpus = online(Some(&args.cpu), "--cpu")?.unwrap_or_default();
    let irqs = journal::irq::list()?;
    let mut plan = Vec::new();
    for spec in &args.irqs {
        plan.extend(profile::plan_irq(spec, &cpus, None, &irqs)?);
    }
    let source = format!("control irq {} --cpu {}", args.irqs.join(" "), args.cpu);
    hold_plan(source, profile::Plan { changes: profile::last_word(plan), ..Default::default() }, None, args.hold)
}

/// `control apply --predict`: the prediction of the profile from the
/// survey that wrote it, before anything changes.
fn predict(profile: &std::path::Path, json: Option<&std::path::Path>) -> Result<(), CliError> {
    if json.is_some_and(|j| j.as_os_str() == "-") {
        return Err(CliError::Usage("--predict prints its table on stdout, which --json - takes: give --json a file".into()));
    }
    let survey = profile.parent().unwrap_or(std::path::Path::new(".")).join("survey.json");
    if !survey.exists() {
        return Err(CliError::Usage(format!(
            "--predict: no {} beside the profile (the survey that wrote it); predict another way with `irqlab sim --from-survey SURVEY --profile {}`",
            survey.display(),
            profile.display()
        )));
    }
    let request =
        super::sim_from_survey::Request { from: &survey, spread_from: None, profile: Some(profile), out: None, seed: None, json: None };
    match super::sim_from_survey::run(request)? {
        Status::Success => Ok(()),
        _ => Err(CliError::Failed("the prediction did not complete; nothing was applied".into())),
    }
}

fn apply(args: ApplyArgs) -> Result<Status, CliError> {
    let file = args.profile.display().to_string();
    let text = output::read_text(&args.profile)?;
    let profile = profile::Profile::parse(&file, &text)?;
    let plan = profile.plan(&file, &text, args.allow_missing)?;
    if args.boot {
        return apply_boot(&profile, &plan, &file, args.hold.dry_run);
    }
    if args.predict {
        predict(&args.profile, args.hold.json.as_deref())?;
    }
    if !plan.boot.is_empty() {
        let words: Vec<&str> = plan.boot.iter().map(|o| o.text.as_str()).collect();
        eprintln!(
            "note: the profile's [boot] options ({}) take effect only at a boot: `irqlab control apply {file} --boot` writes them \
             for the next one",
            words.join(" ")
        );
    }
    for s in profile.threads.iter().filter(|s| s.this_boot) {
        eprintln!(
            "note: threads {} names a thread by its pid, this boot's only (nothing stable named it when surveyed)",
            s.matched.get_ref()
        );
    }
    if plan.changes.is_empty() && plan.absent.is_empty() && plan.boot.is_empty() {
        eprintln!("{file}: the profile declares no setting: nothing to apply");
    }
    // Followed: the profile resolved again against the threads there are
    // now (a setting that names nothing now is nothing to add).
    let replan = || profile.plan(&file, &text, true).map(|p| p.changes).unwrap_or_default();
    hold_plan(file.clone(), plan, args.follow.then_some(&replan as &dyn Fn() -> Vec<profile::Planned>), args.hold)
}

/// `control install`: the profile checked (its threads may start only
/// later: a MATCH naming nothing now is no error), then handed to systemd,
/// with its `[boot]` options for the boot loader.
fn install(args: InstallArgs) -> Result<Status, CliError> {
    let file = args.profile.display().to_string();
    let text = output::read_text(&args.profile)?;
    let profile = profile::Profile::parse(&file, &text)?;
    let plan = profile.plan(&file, &text, true)?;
    // Both checked before anything is written.
    irqlab_control::install::require_systemd()?;
    if !plan.boot.is_empty() {
        boot::require_grub(&plan.boot)?;
    }
    let irqlab = std::env::current_exe().map_err(|e| CliError::from(irqlab_host::Error::io("finding irqlab's own path", e)))?;
    let installed = irqlab_control::install::install(&text, &irqlab)?;
    for (file, entry) in installed.files.iter().zip(&installed.entries) {
        eprintln!("wrote {file} (journal entry {entry})");
    }
    eprintln!("started {}: it applies {} now and at every boot", installed.service, irqlab_control::install::PROFILE);
    // Written from the installed copy: its header names that copy, which
    // makes the drop-in part of the install (`uninstall` removes it).
    if !plan.boot.is_empty() {
        apply_boot(&profile, &plan, irqlab_control::install::PROFILE, false)?;
    }
    Ok(Status::Success)
}

fn uninstall() -> Result<Status, CliError> {
    for removed in irqlab_control::install::uninstall()? {
        eprintln!("removed {removed}");
    }
    // A drop-in written by `control apply --boot` from another file is not
    // the install's: it stays, and is named.
    if let Some(w) = boot::command_line().written {
        eprintln!("the boot options of {} stay (entry {}): `irqlab control revert {}` removes them", w.file, w.entry, w.entry);
    }
    Ok(Status::Success)
}

/// `control apply --boot`: the `[boot]` options, each beside the running
/// kernel's command line, written for the next boot.
fn apply_boot(profile: &profile::Profile, plan: &profile::Plan, file: &str, dry_run: bool) -> Result<Status, CliError> {
    if plan.boot.is_empty() {
        return Err(CliError::Input(irqlab_analysis::InputError::new(format!(
            "{file}: the profile has no [boot] cmdline: nothing for --boot to write"
        ))));
    }
    let running = boot::running()?;
    let (now, _) = boot::in_force(&plan.boot, &running);
    for o in &plan.boot {
        let state = if now.contains(&o) { "in force now" } else { "not in force now" };
        let why = profile.boot_because(&o.key).or(boot::what_it_does(&o.key)).unwrap_or("");
        eprintln!("{}: {state}; {why}", o.text);
    }
    if dry_run {
        eprintln!("dry run: {} would hold:", boot::GRUB_DROP_IN);
        output::print(&boot::grub_drop_in(&plan.boot, file))?;
        return Ok(Status::Success);
    }
    let written = boot::apply(&plan.boot, file)?;
    eprintln!("wrote {} (journal entry {}: `irqlab control revert {}` removes it)", written.file, written.entry, written.entry);
    if written.grub_updated {
        eprintln!("update-grub ran: the options take effect at the next boot");
    } else {
        eprintln!(
            "no update-grub on this machine: the options take effect at the next boot once the boot loader's configuration is \
             regenerated (grub-mkconfig -o /boot/grub/grub.cfg)"
        );
    }
    Ok(Status::Success)
}

/// Applies (or, with --dry-run, shows) a resolved plan, holds it, reports.
fn hold_plan(
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
        n => format!("\n{n} value(s) changed by something else while held, set again (see the report's `drifts`)"),
    };
    format!("{head}\n{}{drifts}", t.to_text())
}

fn bh_budget_run(args: BhBudgetArgs) -> Result<Status, CliError> {
    output::refuse_clashes(&[], &[("--trace", args.trace.as_deref()), ("--json", args.json.as_deref())])?;
    let config = bh_budget::Config {
        dev: args.dev.clone(),
        period_ns: args.period,
        gain: args.gain,
        window: args.window,
        min_ns: args.min,
        initial_ns: args.initial,
        cpu: args.cpu,
        duration_ns: args.duration,
        enforce: args.enforce,
        high: args.high,
        ..bh_budget::Config::default()
    };
    let stop = crate::signal::stop_flag();
    let outcome = bh_budget::run(&config, &stop, |_| {})?;
    if let Some(path) = &args.trace {
        output::write_json(path, &outcome.trace)?;
    }
    json_or_summary(args.json.as_deref(), &outcome.report, bh_budget_summary)?;
    Ok(Status::from_ok(outcome.report.complete))
}

fn bh_budget_summary(r: &bh_budget::Report) -> String {
    use irqlab_analysis::format_ns;
    let f = &r.figures;
    let ns = |v: Option<u64>| v.map_or("-".to_string(), format_ns);
    let threads: Vec<String> = r.threads.iter().map(|t| format!("{} ({})", t.comm, t.tid)).collect();
    let mut text = format!(
        "bh-budget on {} ({}): {} periods of {} ({}), K {}, W {}, T_min {}, T(0) {}, enforced by {}\n",
        r.config.dev,
        threads.join(", "),
        f.periods,
        format_ns(r.config.period_ns),
        r.ended_by,
        r.config.gain,
        r.config.window,
        format_ns(r.config.min_ns),
        format_ns(r.initial_ns),
        match r.enforce {
            bh_budget::Enforce::Fifo => "SCHED_FIFO until the threshold, SCHED_IDLE after",
            bh_budget::Enforce::Deadline => "SCHED_DEADLINE runtime",
            bh_budget::Enforce::Observe => "nothing (observe only)",
        }
    );
    text.push_str(&format!(
        "BH time per ms: mean {}, range {}..{}, p50 {}, p99 {}\nthreshold: mean {}, range {}..{}\n",
        format_ns(f.bh_per_ms.mean_ns as u64),
        format_ns(f.bh_per_ms.min_ns),
        format_ns(f.bh_per_ms.max_ns),
        ns(f.bh_per_ms.p50_ns),
        ns(f.bh_per_ms.p99_ns),
        format_ns(f.threshold.mean_ns as u64),
        format_ns(f.threshold.min_ns),
        format_ns(f.threshold.max_ns)
    ));
    text.push_str(&format!(
        "throughput: {} packets, {:.0}/s; throttled in {} periods: reaction p50/p99/max {}/{}/{}, then on the CPU for the rest of its poll \
         p50/p99/max {}/{}/{}; beyond threshold + reaction + rest of poll in {} periods ({:.1}%)\n",
        f.packets,
        f.packets_per_s,
        f.throttled,
        ns(f.reaction.p50_ns),
        ns(f.reaction.p99_ns),
        ns(f.reaction.max_ns),
        ns(f.ran_on.p50_ns),
        ns(f.ran_on.p99_ns),
        ns(f.ran_on.max_ns),
        f.beyond_threshold,
        100.0 * f.beyond_fraction
    ));
    for s in &f.load_steps {
        let settled = s.settled_after.map_or("did not settle".to_string(), |n| format!("settled after {n} periods"));
        text.push_str(&format!(
            "load step at period {}: {:.0} -> {:.0} packets per period, threshold {settled}\n",
            s.k, s.p_before, s.p_after
        ));
    }
    text.push_str(&format!(
        "controller overhead: {:.0} us of CPU per second of control (setup {} apart); sched_setattr round trip p50/p99/max {}/{}/{} over {} calls\n",
        r.overhead.controller.controller_us_per_s,
        ns(Some(r.overhead.controller.setup_cpu_ns)),
        ns(r.overhead.setattr.p50_ns),
        ns(r.overhead.setattr.p99_ns),
        ns(r.overhead.setattr.max_ns),
        r.overhead.setattr.count
    ));
    text.push_str(&format!("pending proxy: {}\n", r.pending_proxy));
    if r.enforce == bh_budget::Enforce::Deadline || r.deadline_enforcement.granularity == "tick" {
        text.push_str(&format!("note: {}\n", r.deadline_enforcement.note));
    }
    if r.late_periods > 0 || r.lost_events > 0 || r.deadline_refusals > 0 {
        text.push_str(&format!(
            "warning: {} periods closed a period or more late, {} monitor events lost, {} SCHED_DEADLINE changes refused\n",
            r.late_periods, r.lost_events, r.deadline_refusals
        ));
    }
    text
}

fn process_aware_run(args: ProcessAwareArgs) -> Result<Status, CliError> {
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
    json_or_summary(args.json.as_deref(), &report, process_aware_summary)?;
    Ok(Status::from_ok(report.complete))
}

fn idletime_run(args: IdletimeArgs) -> Result<Status, CliError> {
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
    json_or_summary(args.json.as_deref(), &report, idletime_summary)?;
    Ok(Status::from_ok(report.complete))
}

fn idletime_summary(r: &idletime::Report) -> String {
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

fn process_aware_summary(r: &process_aware::Report) -> String {
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

#[derive(Serialize)]
struct StatusDoc {
    schema: &'static str,
    entries: Vec<StatusEntry>,
    /// Entry files that cannot be read: what they changed is unknown.
    unreadable: Vec<journal::Unreadable>,
}

#[derive(Serialize)]
struct StatusEntry {
    #[serde(flatten)]
    entry: Entry,
    state: State,
    /// What the object holds now: as set, back to old, drifted, gone.
    #[serde(flatten)]
    now: journal::Now,
}

fn status(args: StatusArgs) -> Result<Status, CliError> {
    let entries: Vec<StatusEntry> =
        journal::entries().into_iter().map(|entry| StatusEntry { state: entry.state(), now: entry.now(), entry }).collect();
    let doc = StatusDoc { schema: "irqlab/control-status/v1", entries, unreadable: journal::unreadable() };
    json_or_summary(args.json.as_deref(), &doc, |d| {
        let unreadable: String = d.unreadable.iter().map(|u| format!("UNREADABLE: {u}\n")).collect();
        if d.entries.is_empty() {
            if !unreadable.is_empty() {
                return format!("irqlab's journal has entries it cannot read; what they changed is unknown:\n{unreadable}");
            }
            return "irqlab has changed nothing on this machine\n".to_string();
        }
        let mut t = Table::new(["ID", "OBJECT", "OLD -> NEW", "NOW", "BY", "STATE"]);
        for e in &d.entries {
            let state = match e.state {
                State::Active => "active (its owner restores it)".to_string(),
                State::Persistent => "persistent".to_string(),
                State::Leftover => "LEFTOVER: owner gone; `irqlab control revert --all`".to_string(),
            };
            t = t.row([
                e.entry.id.clone(),
                e.entry.object.to_string(),
                format!("{} -> {}", e.entry.old, e.entry.new),
                e.now.to_string(),
                by(&e.entry.owner),
                state,
            ]);
        }
        t.to_text() + &unreadable
    })?;
    Ok(Status::Success)
}

/// Who made a change: the installed profile's unit by name, others by pid.
fn by(owner: &journal::Owner) -> String {
    if owner.command.contains(irqlab_control::install::PROFILE) {
        format!("{} (pid {})", irqlab_control::install::SERVICE, owner.pid)
    } else if owner.pid > 0 {
        format!("pid {}", owner.pid)
    } else {
        owner.describe()
    }
}

fn revert(args: RevertArgs) -> Result<Status, CliError> {
    let ids: Vec<String> = match &args.id {
        Some(id) => vec![id.clone()],
        // Newest first, the reverse of the order the changes were made in
        // (a thread leaves an irqlab cgroup before the cgroup is removed).
        None => journal::entries().into_iter().rev().filter(|e| e.state() != State::Active).map(|e| e.id).collect(),
    };
    // With --all each entry on its own: one refused (drifted) or failed
    // does not keep the others in place; the run then exits 1 naming it.
    // One ID's error is the command's (a bad ID exits 2).
    let mut text = String::new();
    let mut refused = Vec::new();
    if args.id.is_some() {
        text = revert_ids(&ids, args.force)?.concat();
    } else {
        for id in &ids {
            match revert_ids(std::slice::from_ref(id), args.force) {
                Ok(lines) => text.push_str(&lines.concat()),
                Err(e) => refused.push(e.to_string()),
            }
        }
    }
    let unreadable = journal::unreadable();
    if ids.is_empty() && unreadable.is_empty() {
        text.push_str("nothing to revert\n");
    }
    for u in &unreadable {
        text.push_str(&format!("not reverted: {u}\n"));
    }
    output::print(&text)?;
    if !refused.is_empty() {
        return Err(CliError::Failed(format!("not reverted: {}", refused.join("; "))));
    }
    Ok(Status::Success)
}

/// Undoes what killed runs left (not the persisted changes): `irqlab doctor
/// --repair`. One line per entry, as `control revert` prints them.
pub fn revert_leftovers() -> Result<Vec<String>, CliError> {
    let ids: Vec<String> = journal::entries().into_iter().rev().filter(|e| e.state() == State::Leftover).map(|e| e.id).collect();
    revert_ids(&ids, false)
}

fn revert_ids(ids: &[String], force: bool) -> Result<Vec<String>, CliError> {
    let mut lines = Vec::new();
    for id in ids {
        let (entry, outcome) = journal::revert(id, force)?;
        lines.push(match outcome {
            Restored::Restored => format!("{}: back to {}\n", entry.object, entry.old),
            Restored::Gone => format!("{}: gone, nothing to restore\n", entry.object),
        });
    }
    Ok(lines)
}
