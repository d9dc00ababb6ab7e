//! Load on the target for "under load" runs (the thesis loaded its target
//! with kernel builds, network copies and media playback), without other
//! tools: CPU spinners, a UDP flood through the network stack, a disk
//! writer, and a hackbench-like storm of wake-ups.

mod cpu;
mod disk;
mod hackbench;
mod net;
mod reads;
mod sends;

pub use net::NetLoad;
pub use reads::{write_data_file, Reads};
pub use sends::{Protocol, Sends, UDP_PAYLOAD_MAX};

use irqlab_host::error::Result;
use serde::{Deserialize, Serialize};
use std::sync::atomic::AtomicBool;

pub const SCHEMA: &str = "irqlab/load/v1";

#[derive(Debug, Clone, PartialEq)]
pub enum LoadKind {
    /// One busy loop per online CPU. With `sched_idle` the loops run in
    /// SCHED_IDLE: they use only time no other task wants, so they load
    /// nothing but keep the CPUs from halting (a stand-in for `idle=poll`
    /// on a VM without a cpuidle driver, where waking a halted vCPU costs
    /// tens of microseconds that /dev/cpu_dma_latency cannot remove).
    Cpu { sched_idle: bool },
    /// UDP datagrams as fast as they go, through the receive softirq.
    Net(NetLoad),
    /// Write and fdatasync a scratch file in `dir` over and over.
    Disk { dir: std::path::PathBuf },
    /// `groups` pairs of threads passing small messages over Unix sockets.
    Hackbench { groups: usize },
    /// O_DIRECT reads of a file: random with a gap (a foreground of some
    /// intensity) or sequential back to back (a greedy background).
    Reads(Reads),
    /// UDP or TCP from this namespace to a testbed host, at an intensity
    /// (a foreground) or back to back (a greedy background).
    Sends(Sends),
}

impl LoadKind {
    pub fn name(&self) -> &'static str {
        match self {
            LoadKind::Cpu { .. } => "cpu",
            LoadKind::Net(_) => "net",
            LoadKind::Disk { .. } => "disk",
            LoadKind::Hackbench { .. } => "hackbench-like",
            LoadKind::Reads(_) => "reads",
            LoadKind::Sends(_) => "sends",
        }
    }
}

/// `irqlab/load/v1`: what the load did.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LoadReport {
    pub schema: String,
    pub kind: String,
    pub complete: bool,
    pub duration_ns: u64,
    pub elapsed_ns: u64,
    /// Units of work done, counted in `unit`.
    pub work: u64,
    pub unit: String,
    pub detail: String,
    /// `sends --tcp`: the connection's mean smoothed round-trip time at the
    /// bursts' ends (TCP_INFO), in microseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tcp_rtt_us: Option<f64>,
}

/// What one load did: the report's fields that differ by kind.
struct Done {
    work: u64,
    unit: &'static str,
    detail: String,
    tcp_rtt_us: Option<f64>,
}

impl Done {
    /// `work` units of `unit` done, `detail` saying how; no RTT.
    fn new(work: u64, unit: &'static str, detail: String) -> Done {
        Done { work, unit, detail, tcp_rtt_us: None }
    }
}

/// Runs the load for `duration_ns` or until `stop`.
pub fn run(kind: &LoadKind, duration_ns: u64, stop: &AtomicBool) -> Result<LoadReport> {
    let start = std::time::Instant::now();
    let Done { work, unit, detail, tcp_rtt_us } = match kind {
        LoadKind::Cpu { sched_idle } => cpu::run(*sched_idle, duration_ns, stop)?,
        LoadKind::Net(n) => n.run(duration_ns, stop)?,
        LoadKind::Disk { dir } => disk::run(dir, duration_ns, stop)?,
        LoadKind::Hackbench { groups } => hackbench::run(*groups, duration_ns, stop)?,
        LoadKind::Reads(r) => r.run(duration_ns, stop)?,
        LoadKind::Sends(s) => s.run(duration_ns, stop)?,
    };
    let elapsed_ns = start.elapsed().as_nanos() as u64;
    Ok(LoadReport {
        schema: SCHEMA.into(),
        kind: kind.name().into(),
        complete: !stop.load(std::sync::atomic::Ordering::Relaxed),
        duration_ns,
        elapsed_ns,
        work,
        unit: unit.into(),
        detail,
        tcp_rtt_us,
    })
}

/// The idletime dissertation's foreground intensity i (§6): in each CPU
/// quantum t_max (100 ms, §4.4.1) a process works back to back for
/// i × t_max, then sleeps the rest.
#[derive(Debug, Clone, Copy)]
struct Intensity {
    share: f64,
    start: std::time::Instant,
}

impl Intensity {
    /// Checks `--intensity` (a fraction in (0, 1]; exit 2 naming it).
    fn check(share: Option<f64>) -> irqlab_host::error::Result<()> {
        match share {
            Some(i) if !(i > 0.0 && i <= 1.0) => Err(irqlab_host::error::Error::Invalid(format!("--intensity {i}: a fraction in (0, 1]"))),
            _ => Ok(()),
        }
    }

    fn starting_now(share: f64) -> Intensity {
        Intensity { share, start: std::time::Instant::now() }
    }

    /// After a unit of work: past the busy part of this quantum, sleep to the next one.
    fn pace(&self) {
        self.pace_then(|| {});
    }

    /// `pace`, calling `burst_over` when this quantum's busy part is over,
    /// before the sleep.
    fn pace_then(&self, burst_over: impl FnOnce()) {
        let quantum = irqlab_analysis::idletime::T_MAX_NS;
        let into = self.start.elapsed().as_nanos() as u64 % quantum;
        if into as f64 >= self.share * quantum as f64 {
            burst_over();
            std::thread::sleep(std::time::Duration::from_nanos(quantum - into));
        }
    }
}

/// Whether a worker should keep going.
fn running(deadline: std::time::Instant, stop: &AtomicBool) -> bool {
    !stop.load(std::sync::atomic::Ordering::Relaxed) && std::time::Instant::now() < deadline
}

fn deadline(duration_ns: u64) -> std::time::Instant {
    std::time::Instant::now() + std::time::Duration::from_nanos(duration_ns)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_unprivileged_load_does_work_and_stops() {
        let dir = tempfile::tempdir().unwrap();
        let stop = AtomicBool::new(false);
        let kinds = [
            LoadKind::Cpu { sched_idle: false },
            LoadKind::Cpu { sched_idle: true },
            LoadKind::Disk { dir: dir.path().into() },
            LoadKind::Hackbench { groups: 2 },
        ];
        for kind in kinds {
            let r = run(&kind, 100_000_000, &stop).unwrap();
            // SCHED_IDLE spinners get only time nobody else wants: with the
            // other tests running beside this one there may be none.
            if kind != (LoadKind::Cpu { sched_idle: true }) {
                assert!(r.work > 0, "{}: no work", r.kind);
            }
            assert!(r.complete);
            // Upper bound: one fdatasync on a busy disk can take seconds.
            assert!(r.elapsed_ns >= 100_000_000 && r.elapsed_ns < 20_000_000_000, "{}: {} ns", r.kind, r.elapsed_ns);
        }
        // The disk load removes its scratch file.
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    #[test]
    fn loopback_net_load_sends() {
        let stop = AtomicBool::new(false);
        let r = run(&LoadKind::Net(NetLoad::loopback()), 100_000_000, &stop).unwrap();
        assert!(r.work > 100, "{r:?}");
    }
}
