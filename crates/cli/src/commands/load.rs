//! `irqlab load cpu|net|disk|hackbench-like|reads|sends`: load on this machine for
//! "under load" measurements.

use crate::error::{CliError, Status};
use crate::output;
use irqlab_host::testbed::Side;
use irqlab_measure::load::{self, LoadKind, NetLoad};
use std::path::PathBuf;

#[derive(Clone, Copy, clap::ValueEnum)]
enum Kind {
    Cpu,
    Net,
    Disk,
    HackbenchLike,
    Reads,
    Sends,
}

#[derive(clap::Args)]
pub struct Args {
    /// What to load: cpu, net, disk, hackbench-like, reads (O_DIRECT reads
    /// of --file: random, --gap apart, or --sequential) or sends (UDP or
    /// TCP from here to testbed host --to, through its link's egress)
    #[arg(value_enum)]
    kind: Kind,
    /// How long
    #[arg(long, default_value = "10s", value_name = "D", value_parser = crate::flags::duration_ns)]
    duration: u64,
    /// cpu: spin in SCHED_IDLE, taking only time nobody else wants: keeps
    /// the CPUs from halting without loading them (idle=poll on a VM).
    /// Check it on your kernel first: on one VM kernel (6.18 "-fc") a woken
    /// NAPI thread waited up to 11 s behind such a spinner
    #[arg(long)]
    sched_idle: bool,
    /// net: send from testbed host irqlab-a or irqlab-b to the root
    /// namespace (the machine under test) instead of over loopback
    #[arg(long, value_name = "a|b", value_parser = parse_side)]
    testbed: Option<Side>,
    /// net, sends: datagram payload bytes (sends: per TCP write) [default: net 64, sends 1472]
    #[arg(long)]
    size: Option<usize>,
    /// sends: the testbed host to send to (from this namespace, through the
    /// root side of its link)
    #[arg(long, value_name = "a|b", value_parser = parse_side)]
    to: Option<Side>,
    /// sends: the port on that host (something must listen for TCP)
    #[arg(long, default_value_t = 9)]
    port: u16,
    /// sends: TCP instead of UDP
    #[arg(long)]
    tcp: bool,
    /// sends: the socket's send buffer (SO_SNDBUF; k and M suffixes): how
    /// much may wait below the sender [default: the kernel's]
    #[arg(long, value_name = "BYTES", value_parser = parse_bytes)]
    sndbuf: Option<u64>,
    /// net: sending threads (1 to 1024)
    #[arg(long, default_value_t = 1, value_parser = crate::flags::thread_count())]
    threads: usize,
    /// disk: directory for the scratch file
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,
    /// reads: the file to read (it must exist)
    #[arg(long, value_name = "FILE")]
    file: Option<PathBuf>,
    /// reads: bytes per read (a multiple of 4096; k and M suffixes)
    #[arg(long, value_name = "BYTES", default_value = "4k", value_parser = parse_bytes)]
    block: u64,
    /// reads: pause after each read (0: back to back)
    #[arg(long, value_name = "D", default_value = "0", value_parser = crate::flags::duration_ns)]
    gap: u64,
    /// reads: read the file in order instead of at random
    #[arg(long)]
    sequential: bool,
    /// reads, sends: the idletime dissertation's intensity, a fraction in
    /// (0, 1]: in each 100 ms, work back to back for that share, then sleep
    #[arg(long, value_name = "I")]
    intensity: Option<f64>,
    /// hackbench-like: pairs of threads (1 to 1024)
    #[arg(long, default_value_t = 4, value_parser = crate::flags::thread_count())]
    groups: usize,
    /// Write what the load did as JSON (irqlab/load/v1) ("-": to stdout,
    /// instead of the summary)
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
}

fn parse_bytes(text: &str) -> Result<u64, String> {
    let (digits, unit) = match text.char_indices().find(|(_, c)| !c.is_ascii_digit()) {
        Some((i, _)) => text.split_at(i),
        None => (text, ""),
    };
    let n: u64 = digits.parse().map_err(|_| format!("`{text}`: expected a number of bytes (4096, 4k, 1M)"))?;
    let scale = match unit {
        "" => 1,
        "k" | "K" => 1 << 10,
        "M" => 1 << 20,
        _ => return Err(format!("`{text}`: the unit must be k or M")),
    };
    n.checked_mul(scale).ok_or_else(|| format!("`{text}`: too large"))
}

fn parse_side(text: &str) -> Result<Side, String> {
    Side::parse(text).ok_or_else(|| format!("`{text}` is not a testbed host (a or b)"))
}

pub fn run(args: Args) -> Result<Status, CliError> {
    let duration_ns = args.duration;
    let kind = match args.kind {
        Kind::Cpu => LoadKind::Cpu { sched_idle: args.sched_idle },
        Kind::Net => LoadKind::Net(NetLoad {
            via_testbed: args.testbed,
            size: args.size.unwrap_or(NetLoad::loopback().size),
            threads: args.threads,
            ..NetLoad::loopback()
        }),
        Kind::Disk => {
            let dir = args.dir.clone().unwrap_or_else(std::env::temp_dir);
            if !dir.is_dir() {
                return Err(CliError::Usage(format!("--dir {}: not a directory", dir.display())));
            }
            LoadKind::Disk { dir }
        }
        Kind::HackbenchLike => LoadKind::Hackbench { groups: args.groups },
        Kind::Reads => {
            let file = args.file.clone().ok_or_else(|| CliError::Usage("reads: --file FILE is required".into()))?;
            let reads = load::Reads { file, block: args.block, gap_ns: args.gap, sequential: args.sequential, intensity: args.intensity };
            reads.check()?;
            LoadKind::Reads(reads)
        }
        Kind::Sends => {
            let to = args.to.ok_or_else(|| CliError::Usage("sends: --to a|b (the testbed host) is required".into()))?;
            let sends = load::Sends {
                to,
                port: args.port,
                protocol: if args.tcp { load::Protocol::Tcp } else { load::Protocol::Udp },
                size: args.size.unwrap_or(load::UDP_PAYLOAD_MAX),
                intensity: args.intensity,
                sndbuf: args.sndbuf.map(|b| usize::try_from(b).unwrap_or(usize::MAX)),
            };
            sends.check()?;
            LoadKind::Sends(sends)
        }
    };
    let stop = crate::signal::stop_flag();
    let report = load::run(&kind, duration_ns, &stop)?;
    output::json_or_summary(args.json.as_deref(), &report, |r| {
        format!("load {}: {} {} in {:.1}s ({})\n", r.kind, r.work, r.unit, r.elapsed_ns as f64 / 1e9, r.detail)
    })?;
    Ok(Status::from_ok(report.complete))
}
