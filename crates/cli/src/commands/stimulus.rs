//! `irqlab stimulus respond|run`: external stimulus/response latency.

use crate::error::{CliError, Status};
use crate::flags;
use crate::output;
use irqlab_measure::stimulus::{
    display, generator, responder, GeneratorConfig, PathKind, Pattern, PatternKind, ResponderConfig, StimulusReport,
};
use std::io::{IsTerminal, Write};
use std::net::{Ipv4Addr, SocketAddrV4};
use std::path::PathBuf;

#[derive(clap::Subcommand)]
pub enum Command {
    /// Target side: answer each UDP stimulus at once (SCHED_FIFO, memory
    /// locked, no clock reads, no logging); the kernel answers ICMP itself
    Respond(RespondArgs),
    /// Generator side: send stimuli and time the responses
    Run(Box<RunArgs>),
}

#[derive(clap::Args)]
pub struct RespondArgs {
    /// Address and UDP port to answer on
    #[arg(long, default_value_t = SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, responder::DEFAULT_PORT), value_name = "ADDR:PORT")]
    bind: SocketAddrV4,
    /// The responder's scheduling: fifo:PRIO, fifo (the default: priority 80) or other
    #[arg(long, value_name = "POLICY", value_parser = flags::policy)]
    policy: Option<flags::Policy>,
    /// The old spelling of --policy fifo:P (0: other; taken, with a note)
    #[arg(long, value_name = "P")]
    priority: Option<u8>,
    /// Pin the responder to this CPU
    #[arg(long, visible_alias = "cpus", value_name = "CPU", value_parser = flags::one_cpu)]
    cpu: Option<usize>,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum PathArg {
    Icmp,
    Udp,
    Both,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum PatternArg {
    Periodic,
    Poisson,
    Burst,
    Mmpp,
}

#[derive(clap::Args)]
pub struct RunArgs {
    /// The target: an IPv4 address or host name
    #[arg(long, value_name = "HOST")]
    target: String,
    /// The responder's UDP port on the target
    #[arg(long, default_value_t = responder::DEFAULT_PORT)]
    port: u16,
    /// icmp: the kernel's echo (softirq path); udp: the responder task
    /// (task path); both: side by side
    #[arg(long, value_enum, default_value = "both")]
    path: PathArg,
    /// When stimuli are sent
    #[arg(long, value_enum, default_value = "periodic")]
    pattern: PatternArg,
    /// Mean stimuli per second (e.g. 1000, 10k)
    #[arg(long, value_name = "HZ", conflicts_with = "interval", value_parser = flags::rate_as_interval)]
    rate: Option<u64>,
    /// Mean time between stimuli (instead of --rate)
    #[arg(long, value_name = "I", value_parser = flags::duration_ns)]
    interval: Option<u64>,
    /// burst/mmpp: fraction of each ON/OFF cycle that is ON, in (0, 1]
    #[arg(long, default_value_t = 0.5)]
    duty: f64,
    /// burst/mmpp: length of one ON/OFF cycle
    #[arg(long, default_value = "100ms", value_name = "D", value_parser = flags::duration_ns)]
    cycle: u64,
    /// poisson/mmpp: random seed
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Stop after this many stimuli
    #[arg(long, value_name = "N")]
    count: Option<u64>,
    /// Stop after this long (default 10s when no --count)
    #[arg(long, value_name = "D", value_parser = flags::duration_ns)]
    duration: Option<u64>,
    /// A reply later than this is late; none after this long is lost
    #[arg(long, default_value = "1s", value_name = "D", value_parser = flags::duration_ns)]
    timeout: u64,
    /// The sending threads' scheduling: other (the default), fifo:PRIO (the
    /// receiving ones run one above it) or fifo (priority 50)
    #[arg(long, value_name = "POLICY", value_parser = flags::policy)]
    policy: Option<flags::Policy>,
    /// The old spelling of --policy fifo:P (0: other; taken, with a note)
    #[arg(long, value_name = "P")]
    priority: Option<u8>,
    /// Stream raw records here: CSV if the name ends in .csv, else JSON lines
    #[arg(long, value_name = "FILE", value_parser = output::file_only())]
    log: Option<PathBuf>,
    /// Write the result as JSON (irqlab/stimulus/v1) ("-": to stdout,
    /// instead of the summary and the live panels)
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
}

pub fn run(command: Command) -> Result<Status, CliError> {
    match command {
        Command::Respond(a) => respond(a),
        Command::Run(a) => generate(*a),
    }
}

fn respond(args: RespondArgs) -> Result<Status, CliError> {
    let priority = fifo_priority(flags::own_threads(args.policy.as_ref(), args.priority)?, Some(80), 80);
    let r = responder::bind(&ResponderConfig { bind: args.bind, priority, cpu: args.cpu })?;
    let addr = r.local_addr()?;
    eprintln!("answering stimuli on udp {addr} (priority {priority}); Ctrl-C to stop");
    let stop = crate::signal::stop_flag();
    let answered = r.serve(&stop)?;
    eprintln!("answered {answered} stimuli");
    Ok(Status::Success)
}

fn generator_config(args: &RunArgs) -> Result<GeneratorConfig, CliError> {
    let sender_priority = fifo_priority(flags::own_threads(args.policy.as_ref(), args.priority)?, None, 50);
    let target = irqlab_measure::stimulus::socket::resolve_ipv4(&args.target).map_err(|e| CliError::Usage(format!("--target: {e}")))?;
    let interval_ns = match (args.interval, args.rate) {
        (Some(i), _) => i,
        (None, Some(rate_interval_ns)) => rate_interval_ns,
        (None, None) => 1_000_000,
    };
    let kind = match args.pattern {
        PatternArg::Periodic => PatternKind::Periodic,
        PatternArg::Poisson => PatternKind::Poisson,
        PatternArg::Burst => PatternKind::Burst,
        PatternArg::Mmpp => PatternKind::Mmpp,
    };
    let pattern = Pattern { kind, interval_ns, duty: args.duty, cycle_ns: args.cycle, seed: args.seed };
    let duration_ns = match (args.duration, args.count) {
        (Some(d), _) => Some(d),
        (None, Some(_)) => None,
        (None, None) => Some(10_000_000_000),
    };
    Ok(GeneratorConfig {
        target,
        udp_port: args.port,
        paths: match args.path {
            PathArg::Icmp => vec![PathKind::Icmp],
            PathArg::Udp => vec![PathKind::Udp],
            PathArg::Both => vec![PathKind::Icmp, PathKind::Udp],
        },
        pattern,
        count: args.count,
        duration_ns,
        timeout_ns: args.timeout,
        preflight: true,
        sender_priority,
        log: args.log.clone(),
    })
}

fn generate(args: RunArgs) -> Result<Status, CliError> {
    let config = generator_config(&args)?;
    output::refuse_clashes(&[], &[("--log", args.log.as_deref()), ("--json", args.json.as_deref())])?;
    let stop = crate::signal::stop_flag();
    let text = output::text_on_stdout(args.json.as_deref());
    let tty = std::io::stdout().is_terminal();
    let mut drawn = 0usize;
    let mut last_plain = std::time::Instant::now();
    let report = generator::measure(&config, &stop, |p| {
        if !text {
            return;
        }
        let mut out = std::io::stdout().lock();
        if tty {
            if drawn > 0 {
                let _ = write!(out, "\x1b[{drawn}A");
            }
            let lines = display::panels(p);
            for l in &lines {
                let _ = writeln!(out, "{l}\x1b[K");
            }
            drawn = lines.len();
            let _ = out.flush();
        } else if last_plain.elapsed() >= std::time::Duration::from_secs(1) {
            last_plain = std::time::Instant::now();
            for l in display::plain_lines(p) {
                let _ = writeln!(out, "{l}");
            }
        }
    })?;

    output::json_or_summary(args.json.as_deref(), &report, summary)?;
    Ok(Status::from_ok(report.complete))
}

fn summary(report: &StimulusReport) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "target {} ({} pattern), timestamps: {} — {}",
        report.target,
        report.pattern.kind.name(),
        report.timestamps,
        report.timestamps_note
    );
    for p in &report.paths {
        let l = &p.latency;
        let us = |v: Option<u64>| v.map_or("-".to_string(), |v| format!("{:.1}", v as f64 / 1000.0));
        let _ = writeln!(
            out,
            "{:4} ({}): sent {} answered {} lost {} late {}  min {} mean {} p50 {} p99 {} max {} us",
            p.path.name(),
            p.meaning,
            p.sent,
            p.answered,
            p.lost,
            p.late,
            us(l.min_ns),
            l.mean_ns.map_or("-".to_string(), |v| format!("{:.1}", v / 1000.0)),
            us(l.p50_ns),
            us(l.p99_ns),
            us(l.max_ns)
        );
    }
    if report.late_sends > 0 {
        let _ = writeln!(
            out,
            "note: {} stimuli left more than one interval late (max lag {:.1} us)",
            report.late_sends,
            report.max_send_lag_ns as f64 / 1000.0
        );
    }
    if report.behind_ns > report.pattern.min_gap_ns() {
        let sent = report.paths.first().map_or(0, |p| p.sent);
        let _ = writeln!(
            out,
            "fell short: {} of {} scheduled stimuli per path ({:.0}/s), {:.3} s behind the pattern when the duration ended",
            sent,
            report.scheduled,
            sent as f64 * 1e9 / report.elapsed_ns.max(1) as f64,
            report.behind_ns as f64 / 1e9
        );
    } else if !report.complete {
        let _ = writeln!(out, "stopped early: partial result");
    }
    out
}

/// A `--policy` as the SCHED_FIFO priority the library takes (0:
/// SCHED_OTHER): `default` when none was given, `fifo` alone `fifo_default`.
fn fifo_priority(policy: Option<flags::ThreadPolicy>, default: Option<u8>, fifo_default: u8) -> u8 {
    match policy {
        None => default.unwrap_or(0),
        Some(flags::ThreadPolicy::Fifo(p)) => p.unwrap_or(fifo_default),
        Some(flags::ThreadPolicy::Other) => 0,
    }
}
