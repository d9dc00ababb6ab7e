//! `irqlab load cpu|net|disk|hackbench-like|reads`: load on this machine for
//! "under load" measurements.

use crate::error::{CliError, Status};
use crate::output;
use irqlab_live::load::{self, LoadKind, NetLoad};
use irqlab_live::testbed::Side;
use std::path::PathBuf;

#[derive(Clone, Copy, clap::ValueEnum)]
enum Kind {
    Cpu,
    Net,
    Disk,
    HackbenchLike,
    Reads,
}

#[derive(clap::Args)]
pub struct Args {
    /// What to load: cpu, net, disk, hackbench-like, or reads (O_DIRECT
    /// reads of --file: random, --gap apart, or --sequential)
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
    /// net: datagram payload bytes
    #[arg(long, default_value_t = 64)]
    size: usize,
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
    /// reads: the idletime dissertation's intensity, a fraction in (0, 1]:
    /// in each 100 ms, read back to back for that share, then sleep
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
        Kind::Net => LoadKind::Net(NetLoad { via_testbed: args.testbed, size: args.size, threads: args.threads, ..NetLoad::loopback() }),
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
    };
    let stop = crate::signal::stop_flag();
    let report = load::run(&kind, duration_ns, &stop)?;
    output::json_or_summary(args.json.as_deref(), &report, |r| {
        format!("load {}: {} {} in {:.1}s ({})\n", r.kind, r.work, r.unit, r.elapsed_ns as f64 / 1e9, r.detail)
    })?;
    Ok(Status::from_ok(report.complete))
}
