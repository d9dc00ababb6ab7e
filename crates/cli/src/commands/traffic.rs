//! `irqlab traffic ...`: paced senders between the testbed's hosts and the
//! machine under test.

use crate::error::{CliError, Status};
use crate::flags;
use crate::output;
use irqlab_host::testbed::{Side, Testbed};
use irqlab_measure::traffic::{self, Counters, Kind, Plan, Schedule};
use std::net::Ipv4Addr;
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct Args {
    /// What to send
    #[arg(value_enum)]
    kind: KindArg,
    /// The testbed host that sends: a or b
    #[arg(long, value_name = "a|b")]
    from: String,
    /// Target: `root` (this machine, on the sender's link), `a`, `b`, or an
    /// address of the testbed or loopback
    #[arg(long, default_value = "root", value_name = "HOST")]
    to: String,
    /// Time between sends (default: ping-flood 10us, udp 100us, heartbeat
    /// 10ms, mmpp 10us while bursting)
    #[arg(long, value_name = "I", conflicts_with = "rate", value_parser = flags::positive_duration_ns)]
    interval: Option<u64>,
    /// Sends per second instead of --interval (e.g. 50000, 100k, 1M)
    #[arg(long, value_name = "R", value_parser = flags::rate_as_interval)]
    rate: Option<u64>,
    /// Payload bytes
    #[arg(long, default_value_t = 56, value_name = "B")]
    size: usize,
    /// How long to send
    #[arg(long, default_value = "10s", value_name = "D", value_parser = flags::duration_ns)]
    duration: u64,
    /// UDP destination port
    #[arg(long, default_value_t = 9000)]
    port: u16,
    /// mmpp: mean burst (ON) length
    #[arg(long, default_value = "1ms", value_name = "D", value_parser = flags::duration_ns)]
    burst: u64,
    /// mmpp: mean pause (OFF) length
    #[arg(long, default_value = "9ms", value_name = "D", value_parser = flags::duration_ns)]
    idle: u64,
    /// mmpp: random seed
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Pin the sender to this CPU
    #[arg(long, visible_alias = "cpus", value_name = "CPU", value_parser = flags::one_cpu)]
    cpu: Option<usize>,
    /// Write the counters as JSON (irqlab/traffic/v1) ("-": to stdout,
    /// instead of the summary)
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
}

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum KindArg {
    /// Raw ICMP echo requests, replies counted
    PingFlood,
    /// UDP datagrams at a fixed rate
    Udp,
    /// One UDP datagram per period
    Heartbeat,
    /// Two-state Markov-modulated bursts of UDP datagrams
    Mmpp,
}

fn target(bed: &Testbed, from: Side, to: &str) -> Result<Ipv4Addr, CliError> {
    let ip = match to {
        "root" => bed.root_addr(from),
        other => match Side::parse(other) {
            Some(side) => bed.host_addr(side),
            None => other
                .parse::<Ipv4Addr>()
                .map_err(|_| CliError::Usage(format!("--to `{other}`: expected root, a, b or an IPv4 address of the testbed")))?,
        },
    };
    if !bed.allows_target(ip) {
        return Err(CliError::Usage(format!(
            "--to {ip}: outside the testbed ({}/24) and loopback; irqlab only sends traffic to its own namespaces",
            bed.subnet()
        )));
    }
    Ok(ip)
}

pub fn run(args: Args) -> Result<Status, CliError> {
    let from = Side::parse(&args.from).ok_or_else(|| CliError::Usage(format!("--from `{}`: expected a or b", args.from)))?;
    let duration_ns = args.duration;
    let default_interval_ns = match args.kind {
        KindArg::PingFlood | KindArg::Mmpp => 10_000,
        KindArg::Udp => 100_000,
        KindArg::Heartbeat => 10_000_000,
    };
    let interval_ns = match (args.interval, args.rate) {
        (_, Some(rate_interval_ns)) => rate_interval_ns,
        (Some(i), None) => i,
        (None, None) => default_interval_ns,
    };
    let schedule = match args.kind {
        KindArg::Mmpp => Schedule::Mmpp { interval_ns, mean_on_ns: args.burst.max(1), mean_off_ns: args.idle.max(1), seed: args.seed },
        _ => Schedule::Periodic { interval_ns },
    };
    let kind = match args.kind {
        KindArg::PingFlood => Kind::PingFlood,
        _ => Kind::Udp { port: args.port },
    };
    if let Some(cpu) = args.cpu {
        irqlab_host::rt::require_online(cpu, "--cpu")?;
    }
    // Ctrl-C handling first: a Ctrl-C while the testbed is being made must
    // still remove it (default SIGINT would kill us without cleanup).
    let stop = crate::signal::stop_flag();
    // Joins the testbed if it is up, else makes one that goes away with us.
    let bed = Testbed::up()?;
    let plan = Plan { kind, target: target(&bed, from, &args.to)?, schedule, size: args.size, duration_ns };
    let cpu = args.cpu;
    let counters = if cpu.is_none() {
        traffic::send_from(&bed, from, plan, stop)?.join()
    } else {
        if kind == Kind::PingFlood {
            irqlab_host::privilege::require(&[irqlab_host::privilege::Capability::NetRaw], "open a raw ICMP socket for the ping flood")?;
        }
        bed.spawn_in(from, move || -> irqlab_host::Result<Counters> {
            if let Some(cpu) = cpu {
                irqlab_host::rt::pin_to_cpu(cpu)?;
            }
            traffic::send(&plan, &stop)
        })?
        .join()
    }
    .map_err(|_| CliError::Failed("the sender thread panicked".into()))??;
    let shortfall = if counters.behind_ns > interval_ns {
        format!(
            " (fell short: {:.0}/s reached of {:.0}/s, {} of {} scheduled sends, {:.3} s behind)",
            counters.rate_per_s(),
            1e9 / interval_ns as f64,
            counters.sent,
            counters.scheduled,
            counters.behind_ns as f64 / 1e9
        )
    } else {
        String::new()
    };
    let summary = format!(
        "{} {} -> {}: sent {} failed {} replies {} late {} in {:.3} s{}{shortfall}\n",
        from.netns(),
        match args.kind {
            KindArg::PingFlood => "ping-flood",
            KindArg::Udp => "udp",
            KindArg::Heartbeat => "heartbeat",
            KindArg::Mmpp => "mmpp",
        },
        plan.target,
        counters.sent,
        counters.failed,
        counters.replies,
        counters.late,
        counters.elapsed_ns as f64 / 1e9,
        if counters.complete || !shortfall.is_empty() { "" } else { " (stopped early)" }
    );
    let complete = counters.complete;
    let mut doc = serde_json::to_value(counters).map_err(|e| CliError::Failed(format!("serialising the counters: {e}")))?;
    doc["schema"] = "irqlab/traffic/v1".into();
    doc["from"] = from.netns().into();
    doc["to"] = plan.target.to_string().into();
    doc["interval_ns"] = interval_ns.into();
    doc["rate_per_s"] = counters.rate_per_s().into();
    output::json_or_summary(args.json.as_deref(), &doc, |_| summary)?;
    Ok(Status::from_ok(complete))
}
