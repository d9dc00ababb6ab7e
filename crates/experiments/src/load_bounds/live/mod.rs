//! The load-bounds paper's driver-scheduling experiment (`docs/papers.md`
//! §3; the paper's §5, Table 1, Figs. 7-10) live on the testbed, beside the
//! simulated reproduction and the analysis.
//!
//! On the measured CPU: τ1 (SCHED_FIFO, p = d = 10 ms, 2 ms of calibrated
//! CPU work and one non-blocking receive of the heartbeat socket per
//! period), τ2 (SCHED_FIFO below τ1, p = d = 10 ms, e2 swept) and τD, the
//! receive work of testbed link b: its threaded-NAPI kthread pinned there,
//! or (Traditional) the NET_RX softirq, which receive packet steering hands
//! that CPU. Testbed host b sends the heartbeat (a datagram every 10 ms)
//! and a flood of UDP datagrams at the paper's rate (one every 10 us);
//! both come through the one link, as the paper's hosts A and B reached
//! host C through its one NIC, so a flood that fills the link's queue
//! takes heartbeats with it.
//!
//! τD per configuration, applied through the control journal: Traditional
//! (threaded NAPI off), Background (the kthread SCHED_FIFO below τ2),
//! Foreground (above τ1), Sporadic (the live sporadic server of
//! `control threads --policy sporadic`, budget 1 ms per 10 ms, at most 2
//! pending replenishments, above τ1 with budget, below τ2 without) and
//! SCHED_DEADLINE 1 ms / 10 ms (the kernel's own server; the CPU is made a
//! root domain of its own so that the kthread can be pinned there). A
//! sweep with no flood at all comes first: what τ2 misses then is the
//! machine's own (a VM's host stalls), the tolerance the other sweeps are
//! judged with.
//!
//! RT throttling is lifted for the run (as the probe lifts it): with τ1
//! and τ2 filling the CPU it would stop τD with them for 50 ms of each
//! second, which neither the paper's kernel nor the analysis has.
//!
//! The analysis: the probe in τ2's place (τ1 absent) under the flood with
//! the Traditional and Foreground layouts, minus its least load with no
//! flood (the idle baseline), fitted (eq. 10), with τ1 (eq. 4) through
//! exact response-time analysis: the largest e2 that never misses. For
//! Background τ2 sees τ1 alone; for the servers, τ1 and a periodic task of
//! the budget (the sporadic-server theorem; plus the controller's measured
//! reaction) or a deferrable one (SCHED_DEADLINE's CBS). That is the
//! paper's analysis; the one compared with the live limits adds the
//! machine's own interference (the probe's curves as measured, under the
//! flood in the Traditional, Foreground and SCHED_DEADLINE layouts, or
//! idle) and runs τ1 and τ2 at their measured execution times
//! ([`Execution`]).

use super::{max_e2, max_e2_executing, predicted_max_e2, tau1_demand, Configuration, PERIOD, TAU1_RECEIVE_NS};
use crate::report::{Report, Row};
use irqlab_analysis::curve::{Curve, CurvePoint, FloorPoint};
use irqlab_analysis::demand::{hyperbolic_demand, periodic_demand, DemandBound};
use irqlab_analysis::fit::{fit_hyperbola, subtract_baseline_floor, HyperbolaFit};
use irqlab_analysis::Nanos;
use irqlab_control::sporadic::{self, ServerReport, SporadicParams};
use irqlab_host::error::{Error, Result};
use irqlab_host::journal::root_domain::{self, RootDomain};
use irqlab_host::journal::sched::SchedAttr;
use irqlab_host::journal::threads::Thread;
use irqlab_host::journal::{netdev, Applied};
use irqlab_host::rt;
use irqlab_host::run_end::RunEnd;
use irqlab_host::testbed::{self, Side, Testbed};
use irqlab_measure::accounting;
use irqlab_measure::latency::stats::LatencyStats;
use irqlab_measure::player::{self, Calibration};
use irqlab_measure::probe;
use irqlab_measure::traffic::{self, Kind, Plan, Schedule};
use serde::Serialize;
use std::net::{SocketAddrV4, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

mod analysis;
mod judge;
mod rows;

pub use crate::repeats::Spread;
use analysis::*;
pub use analysis::{robust_maxima, Curves, Execution, Prediction};
use judge::*;
pub use judge::{allowed_misses, RepeatSummary, Summary};
pub use rows::relations;
use rows::*;

const MS: Nanos = 1_000_000;
pub const DEVICE: &str = "irqlab-b";
const HEARTBEAT_PORT: u16 = 9_721;
const FLOOD_PORT: u16 = 9_722;
/// The paper's ping flood: one every 10 us (§5), here UDP datagrams with
/// the 56 bytes of data of a default ping.
const FLOOD_INTERVAL_NS: u64 = 10_000;
const FLOOD_PAYLOAD: usize = 56;
const HEARTBEAT_PAYLOAD: usize = 64;
const FLOOD_CLASS: SenderClass = SenderClass::Nice(-20);
const E1: Nanos = 2 * MS;
/// Table 1's priorities: τD high (Foreground, the server's high level),
/// τ1 med, τ2 low, τD lowest (Background, the server's low level).
const TAU_D_HIGH: u32 = 70;
const TAU1_PRIORITY: u8 = 60;
const TAU2_PRIORITY: u8 = 50;
const TAU_D_LOW: u32 = 40;
/// The servers' budget and period (§5), and the sporadic server's
/// pending replenishments.
const BUDGET: Nanos = MS;
const SERVER_PERIOD: Nanos = 10 * MS;
const MAX_REPLENISHMENTS: u32 = 2;
/// Senders and receivers settle before τ1 and τ2 start.
const RAMP: Duration = Duration::from_millis(300);

#[derive(Debug, Clone)]
pub struct Config {
    pub quick: bool,
    pub cpu: Option<usize>,
    pub seed: u64,
    /// Switch the scheduler feature HRTICK_DL on for the run (through the
    /// journal): SCHED_DEADLINE's runtime then ends by an hrtimer, not at
    /// the next tick, which the paper's analysis assumes.
    pub hrtick_dl: bool,
}

impl Config {
    fn point_ns(&self) -> u64 {
        if self.quick {
            1_000 * MS
        } else {
            3_000 * MS
        }
    }
    /// Sweeps per configuration, run in rounds (every configuration once
    /// per round, so that the machine's drifting noise reaches each of
    /// them alike): their spread is the measured noise the relations and
    /// the live limits are judged with.
    pub fn repeats(&self) -> u32 {
        if self.quick {
            2
        } else {
            3
        }
    }
    /// The probe's runs per curve, 1 s each (see [`robust_maxima`]).
    pub fn probe_runs(&self) -> usize {
        if self.quick {
            4
        } else {
            8
        }
    }
    /// Quick: 1.5 ms steps to 7.5 ms (the servers' ideal limit, 7 ms, and
    /// Background's, 8 ms, each within a step); full: 0.5 ms steps to 10 ms.
    pub fn e2_values(&self) -> Vec<Nanos> {
        if self.quick {
            (1..=5).map(|k| k * 3 * MS / 2).collect()
        } else {
            (1..=20).map(|k| k * MS / 2).collect()
        }
    }
}

/// What runs as τD, or no flood at all (the machine's own misses).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Setup {
    NoFlood,
    Config(Configuration),
}

impl Setup {
    /// In the order they are reported (Table 1's).
    pub const ALL: [Setup; 6] = [
        Setup::NoFlood,
        Setup::Config(Configuration::Traditional),
        Setup::Config(Configuration::Background),
        Setup::Config(Configuration::Foreground),
        Setup::Config(Configuration::Sporadic),
        Setup::Config(Configuration::Deadline),
    ];

    /// The order they run in: SCHED_DEADLINE, whose layout changes the
    /// most (cpusets), right after the no-flood sweep.
    pub const RUN_ORDER: [Setup; 6] = [
        Setup::NoFlood,
        Setup::Config(Configuration::Deadline),
        Setup::Config(Configuration::Traditional),
        Setup::Config(Configuration::Background),
        Setup::Config(Configuration::Foreground),
        Setup::Config(Configuration::Sporadic),
    ];

    pub fn name(self) -> &'static str {
        match self {
            Setup::NoFlood => "No flood",
            Setup::Config(c) => c.name(),
        }
    }
}

impl Serialize for Setup {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl std::fmt::Display for Setup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// User-space threads of other processes moved off the measured CPU for
/// the run, and those that stayed (pinned on purpose, or gone meanwhile).
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct Sheltered {
    pub moved: usize,
    pub stayed: usize,
}

/// One configuration at one e2.
#[derive(Debug, Clone, Serialize)]
pub struct Point {
    pub setup: Setup,
    /// Which of the configuration's repeated sweeps (from 0).
    pub repeat: u32,
    pub e2_ns: Nanos,
    pub tau2_jobs: u64,
    pub tau2_misses: u64,
    pub tau2_miss_pct: f64,
    pub tau1_misses: u64,
    /// Heartbeats host b sent over the whole point (ramp included).
    pub heartbeats_sent: u64,
    /// τ1's receives (one per period) and those that found a heartbeat;
    /// the others are the heartbeats missed (the simulation's count).
    pub tau1_polls: u64,
    pub heartbeats_received: u64,
    pub heartbeat_miss_pct: f64,
    pub flood_sent: u64,
    /// Datagrams the UDP layer took in (delivered or dropped at a full
    /// socket: `Udp: InDatagrams + RcvbufErrors`), over all sent: what τD
    /// got through.
    pub processed_pct: f64,
    /// τD's share of the CPU (accounting BPF): NET_RX softirq time there
    /// plus the NAPI kthread's own run time, over the wall time.
    pub tau_d_share: Option<f64>,
    /// The NAPI kthreads' work while τ1 and τ2 ran (threaded
    /// configurations under the flood), and their CPU time over that wall
    /// time: the kernel's charge, interrupt time that landed in them
    /// included, which the BPF share above leaves out.
    pub kthread_run: Option<KthreadRun>,
    pub kthread_share: Option<f64>,
    /// The sporadic server's exhaustions and reaction (drop after an
    /// exhaustion) p99, us.
    pub server_exhaustions: Option<u64>,
    pub server_reaction_p99_us: Option<f64>,
    /// τ1's and τ2's jobs' CPU time (the kernel's charge: the work and the
    /// interrupts that landed in the thread), p99 and max over the
    /// point's jobs, us: what the nominal e1 and e2 took here.
    pub tau1_cpu_us: Option<Quantiles>,
    pub tau2_cpu_us: Option<Quantiles>,
    pub complete: bool,
}

/// A job measure's p50, p99 and max.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Quantiles {
    pub p50: f64,
    pub p99: f64,
    pub max: f64,
}

impl Quantiles {
    /// Of `stats`, in us; `None` when empty.
    fn of(stats: &LatencyStats) -> Option<Quantiles> {
        let us = |ns: Option<u64>| ns.map(|v| v as f64 / 1e3);
        Some(Quantiles { p50: us(stats.quantile_ns(0.5))?, p99: us(stats.quantile_ns(0.99))?, max: us(stats.max_ns())? })
    }
}

/// The NAPI kthreads' CPU time and timeslices (/proc/TID/schedstat), and
/// the datagrams taken in by UDP, over one point's τ1/τ2 run.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct KthreadRun {
    pub exec_ns: u64,
    pub slices: u64,
    pub datagrams: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct Details {
    pub cpu: usize,
    pub sender_cpu: usize,
    pub flood_interval_ns: u64,
    pub flood_payload: usize,
    pub point_s: f64,
    /// Sweeps per configuration ([`Config::repeats`]).
    pub repeats: u32,
    pub e2_values_ns: Vec<Nanos>,
    pub calibration: Calibration,
    /// τ2's miss rate the machine itself causes, % (the no-flood sweep
    /// where τ1 and τ2 leave 1 ms of each period idle; one-sided 95% upper
    /// bound): a point meets its deadlines when its misses are within what
    /// this rate gives at the 95% level ([`allowed_misses`]).
    pub noise_miss_pct: f64,
    /// The run's shield ([`shield`]).
    pub sheltered: Sheltered,
    pub curves: Option<Curves>,
    /// What e1 and e2 took here, the analysis's execution times.
    pub execution: Option<Execution>,
    pub predictions: Vec<Prediction>,
    pub points: Vec<Point>,
    pub summaries: Vec<Summary>,
    /// What this kernel did, said from the numbers.
    pub kernel_note: String,
    /// The scheduler's debugfs knobs set for the run (`--hrtick-dl`), one
    /// line each ("scheduler feature HRTICK_DL ...: `off` -> `on`"); empty:
    /// none, the kernel's own settings.
    pub sched_knobs: Vec<String>,
    /// The simulated column's inputs measured here (`None`: the paper's).
    pub sim_calibration: Option<SimCalibration>,
    pub simulated: Option<super::Details>,
}

pub fn check_prerequisites() -> Result<()> {
    testbed::check_prerequisites()?;
    accounting::check_prerequisites()?;
    probe::check_prerequisites(probe::Policy::Fifo)?;
    root_domain::check_prerequisites().map(drop)
}

/// A configuration's layout in force: journalled changes (restored newest
/// first when dropped) and the NAPI kthreads. Every layout lives inside the
/// run's shield ([`shield`]).
struct Layout {
    changes: Vec<Applied>,
    kthreads: Vec<Thread>,
}

impl Drop for Layout {
    fn drop(&mut self) {
        while let Some(applied) = self.changes.pop() {
            drop(applied);
        }
    }
}

fn layout(setup: Setup, place: &Place) -> Result<Layout> {
    let focus = place.focus;
    let mut l = Layout { changes: Vec::new(), kthreads: Vec::new() };
    if setup == Setup::Config(Configuration::Traditional) {
        l.changes.extend(netdev::softirq_receive_on(DEVICE, focus)?);
        return Ok(l);
    }
    let (on, kthreads) = netdev::threaded_receive(DEVICE)?;
    l.changes.push(on);
    l.kthreads = kthreads;
    if setup == Setup::Config(Configuration::Deadline) {
        let attr = SchedAttr::Deadline { runtime_ns: BUDGET, deadline_ns: SERVER_PERIOD, period_ns: SERVER_PERIOD };
        for t in &l.kthreads {
            l.changes.append(&mut place.shield.deadline_changes(t, attr)?);
        }
        return Ok(l);
    }
    let attr = match setup {
        Setup::Config(Configuration::Background | Configuration::Sporadic) => SchedAttr::Fifo { priority: TAU_D_LOW },
        _ => SchedAttr::Fifo { priority: TAU_D_HIGH },
    };
    for t in &l.kthreads {
        // On cgroup v2 the CPU is the shield's partition's alone.
        l.changes.append(&mut place.shield.admit(t)?);
    }
    l.changes.extend(netdev::hold_kthreads(&l.kthreads, Some(&[focus]), Some(attr))?);
    Ok(l)
}

/// The run's shield: the measured CPU a root domain of its own (which a
/// SCHED_DEADLINE kthread pinned there needs anyway) and every other
/// process's user-space threads moved off it
/// (`RootDomain::shelter_others`), so that no other load reaches it through
/// the fair class's deadline server. Undone when dropped.
fn shield(focus: usize) -> Result<(RootDomain, Sheltered)> {
    let mut domain = root_domain::isolate(focus)?;
    let (moved, stayed) = domain.shelter_others(std::process::id())?;
    Ok((domain, Sheltered { moved, stayed }))
}

/// Where the experiment runs.
struct Place<'a> {
    bed: &'a Testbed,
    shield: &'a RootDomain,
    focus: usize,
    sender_cpu: usize,
    calibration: Calibration,
}

/// A periodic task's run: jobs due, missed, heartbeats received.
#[derive(Default)]
struct Periodic {
    jobs: u64,
    misses: u64,
    received: u64,
    /// Each finished job's CPU time (the kernel's charge to the thread:
    /// its work and what interrupts landed in it), ns.
    cpu_ns: LatencyStats,
}

/// A SCHED_FIFO task on `focus`: jobs of `exec_ns` of calibrated work
/// released every 10 ms from `start_ns` for `duration_ns`, each started
/// when released (or when the previous one ended) and missed when it ends
/// past the period; with `socket`, one non-blocking receive at each job's
/// start. Jobs due but not done by one period after the end are missed.
fn periodic(place: &Place, priority: u8, exec_ns: Nanos, start_ns: u64, duration_ns: u64, socket: Option<&UdpSocket>) -> Result<Periodic> {
    rt::pin_to_cpu(place.focus)?;
    rt::set_fifo(priority)?;
    let work = (place.calibration.iterations_per_us * exec_ns as f64 / 1e3) as u64;
    let cutoff = start_ns + duration_ns + PERIOD;
    let due = duration_ns / PERIOD;
    let mut out = Periodic { jobs: due, ..Periodic::default() };
    let mut buf = [0u8; 2048];
    // Heartbeats queued before the first job are not this run's.
    if let Some(s) = socket {
        while s.recv(&mut buf).is_ok() {}
    }
    let mut done = 0;
    for k in 0..due {
        let release = start_ns + k * PERIOD;
        rt::sleep_until_ns(release);
        if rt::monotonic_ns() >= cutoff {
            break;
        }
        if let Some(s) = socket {
            if s.recv(&mut buf).is_ok() {
                out.received += 1;
            }
        }
        let cpu_start = rt::thread_cpu_ns();
        let mut left = work;
        while left > 0 && rt::monotonic_ns() < cutoff {
            let n = left.min(20_000);
            std::hint::black_box(player::spin(n));
            left -= n;
        }
        if left > 0 {
            break;
        }
        done += 1;
        out.cpu_ns.record(rt::thread_cpu_ns() - cpu_start);
        out.misses += u64::from(rt::monotonic_ns() > release + PERIOD);
    }
    out.misses += due - done;
    Ok(out)
}

/// The threads' CPU time and timeslices so far (/proc/TID/schedstat:
/// time on the CPU, time waiting, slices run), `None` without threads or
/// when one is gone.
fn kthreads_schedstat(threads: &[Thread]) -> Option<(u64, u64)> {
    if threads.is_empty() {
        return None;
    }
    threads.iter().try_fold((0, 0), |(exec, slices), t| {
        let s = irqlab_host::procs::schedstat(t.tid)?;
        Some((exec + s.run_ns, slices + s.slices))
    })
}

/// `Udp: InDatagrams + RcvbufErrors` of this network namespace.
fn udp_taken_in() -> u64 {
    let text = std::fs::read_to_string("/proc/net/snmp").unwrap_or_default();
    let mut udp = text.lines().filter(|l| l.starts_with("Udp: "));
    let (Some(names), Some(values)) = (udp.next(), udp.next()) else { return 0 };
    names
        .split_whitespace()
        .zip(values.split_whitespace())
        .filter(|(n, _)| matches!(*n, "InDatagrams" | "RcvbufErrors"))
        .filter_map(|(_, v)| v.parse::<u64>().ok())
        .sum()
}

/// τD's time on `focus` from an accounting report: NET_RX softirq there
/// plus the NAPI kthreads' own run time.
fn tau_d_ns(report: &accounting::Report, focus: usize) -> u64 {
    let softirq = report.cpus.iter().find(|c| c.cpu == focus).and_then(|c| c.softirq_by_vector_ns.get("NET_RX").copied()).unwrap_or(0);
    let prefix = format!("napi/{DEVICE}-");
    let kthreads: u64 = report.tasks.iter().filter(|t| t.comm.starts_with(&prefix)).map(|t| t.time.run_ns).sum();
    softirq + kthreads
}

fn joined<T>(r: std::thread::Result<Result<T>>, what: &str) -> Result<T> {
    r.unwrap_or_else(|_| Err(Error::Failed(format!("the {what} panicked"))))
}

/// How a sender of host b runs on the senders' CPU.
#[derive(Debug, Clone, Copy)]
enum SenderClass {
    /// SCHED_FIFO at this priority: the heartbeat, which keeps its period.
    Fifo(u8),
    /// SCHED_OTHER at nice -20: the flood, which sends back to back when
    /// behind. At nice 0 it shared the CPU evenly with whatever else ran
    /// there (on this shared machine: other agents' builds, which the
    /// shield moves there) and sustained the paper's rate in only 51 of
    /// 300 points of a full run (20-40k datagrams/s in the others); at
    /// nice -20 it takes most of the CPU while leaving the others runnable.
    Nice(i32),
}

/// Host b's sender of `plan` on the senders' CPU as `class`; `started`
/// gets the time it began.
fn spawn_sender(
    place: &Place,
    plan: Plan,
    class: SenderClass,
    started: Option<Arc<AtomicU64>>,
    stop: &Arc<AtomicBool>,
) -> Result<testbed::NsThread<Result<traffic::Counters>>> {
    let (stop, cpu) = (stop.clone(), place.sender_cpu);
    place.bed.spawn_in(Side::B, move || {
        rt::pin_to_cpu(cpu)?;
        match class {
            SenderClass::Fifo(p) => rt::set_fifo(p)?,
            SenderClass::Nice(n) => {
                // SAFETY: setpriority on the calling thread (who = 0).
                if unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, n) } != 0 {
                    return Err(Error::io(format!("setting the flood sender's nice to {n}"), std::io::Error::last_os_error()));
                }
            }
        }
        if let Some(t) = started {
            t.store(rt::monotonic_ns(), Ordering::SeqCst);
        }
        traffic::send(&plan, &stop)
    })
}

fn flood_plan(target: std::net::Ipv4Addr) -> Plan {
    Plan {
        kind: Kind::Udp { port: FLOOD_PORT },
        target,
        schedule: Schedule::Periodic { interval_ns: FLOOD_INTERVAL_NS },
        size: FLOOD_PAYLOAD,
        duration_ns: u64::MAX / 4,
    }
}

/// One point: with `setup`'s layout in force, the flood (unless NoFlood)
/// and the heartbeat from host b, the accounting and (Sporadic) the
/// server running, τ1 and τ2 for `duration_ns`.
fn run_point(setup: Setup, layout: &Layout, place: &Place, e2: Nanos, duration_ns: u64, stop: &AtomicBool) -> Result<Point> {
    let addr = place.bed.root_addr(Side::B);
    let heartbeat_socket = UdpSocket::bind(SocketAddrV4::new(addr, HEARTBEAT_PORT))
        .map_err(|e| Error::io(format!("binding the heartbeat socket {addr}:{HEARTBEAT_PORT}"), e))?;
    heartbeat_socket.set_nonblocking(true).map_err(|e| Error::io("making the heartbeat socket non-blocking", e))?;
    let flood = setup != Setup::NoFlood;
    let (sink_stop, ctl_stop) = (AtomicBool::new(false), AtomicBool::new(false));
    let senders_stop = Arc::new(AtomicBool::new(false));
    let sunk = AtomicU64::new(0);
    let sporadic = setup == Setup::Config(Configuration::Sporadic);
    // The accounting is loaded and attached here, before any sender starts:
    // started beside them, its thread shared the one other CPU with the
    // flood sender at nice -20 and attached after the point had ended
    // (τD's share read 0).
    let mut storage = accounting::Storage::default();
    let mut accounting = accounting::Session::start(&mut storage, accounting::Options::default())?;
    std::thread::scope(|s| -> Result<Point> {
        let sink = s.spawn(|| {
            rt::pin_off(place.focus)?;
            traffic::udp_sink_counting(SocketAddrV4::new(addr, FLOOD_PORT), false, &sunk, &sink_stop)
        });
        let server = sporadic.then(|| {
            s.spawn(|| -> Result<ServerReport> {
                rt::pin_off(place.focus)?;
                let params = SporadicParams::new(BUDGET, SERVER_PERIOD, TAU_D_HIGH, Some(TAU_D_LOW), MAX_REPLENISHMENTS);
                // Served until the point ends (ctl_stop): its own stop is the run's end.
                Ok(sporadic::serve(&layout.kthreads, params, &RunEnd::start(&ctl_stop, None))?.0)
            })
        });
        let taken_before = udp_taken_in();
        // The heartbeat's sender at SCHED_FIFO, so that it keeps its period
        // beside the flood's (the paper's host A was a machine of its own).
        let heartbeat_start = Arc::new(AtomicU64::new(0));
        let heartbeat_plan = Plan {
            kind: Kind::Udp { port: HEARTBEAT_PORT },
            target: addr,
            schedule: Schedule::Periodic { interval_ns: PERIOD },
            size: HEARTBEAT_PAYLOAD,
            duration_ns: u64::MAX / 4,
        };
        let heartbeat = spawn_sender(place, heartbeat_plan, SenderClass::Fifo(10), Some(heartbeat_start.clone()), &senders_stop)?;
        let flooder = if flood { Some(spawn_sender(place, flood_plan(addr), FLOOD_CLASS, None, &senders_stop)?) } else { None };
        std::thread::sleep(RAMP);
        // Releases half a period after a heartbeat's send time, as in the
        // simulated scenarios (the hosts are not synchronised: mid-period).
        let first = heartbeat_start.load(Ordering::SeqCst) + PERIOD / 2;
        let earliest = rt::monotonic_ns() + 20 * MS;
        let start = first + earliest.saturating_sub(first).div_ceil(PERIOD) * PERIOD;
        let (stat_before, taken_at_start, window_start) = (kthreads_schedstat(&layout.kthreads), udp_taken_in(), rt::monotonic_ns());
        let (tau1, tau2) = if stop.load(Ordering::SeqCst) {
            (Ok(Periodic::default()), Ok(Periodic::default()))
        } else {
            let hb_socket = &heartbeat_socket;
            let t1 = s.spawn(move || periodic(place, TAU1_PRIORITY, E1, start, duration_ns, Some(hb_socket)));
            let t2 = s.spawn(move || periodic(place, TAU2_PRIORITY, e2, start, duration_ns, None));
            (joined(t1.join(), "tau1 thread"), joined(t2.join(), "tau2 thread"))
        };
        let (stat_after, taken_at_end, window_end) = (kthreads_schedstat(&layout.kthreads), udp_taken_in(), rt::monotonic_ns());
        senders_stop.store(true, Ordering::SeqCst);
        let hb = joined(heartbeat.join(), "heartbeat sender");
        let fl = flooder.map(|f| joined(f.join(), "flood sender"));
        // What was in flight arrives within a few ms.
        std::thread::sleep(Duration::from_millis(50));
        let taken_after = udp_taken_in();
        ctl_stop.store(true, Ordering::SeqCst);
        sink_stop.store(true, Ordering::SeqCst);
        let acc = accounting.report(true);
        let served = server.map(|h| joined(h.join(), "sporadic server"));
        joined(sink.join(), "flood sink")?;
        let (tau1, tau2, hb) = (tau1?, tau2?, hb?);
        let fl = fl.transpose()?;
        let acc = acc?;
        let served = served.transpose()?;
        let all_sent = hb.sent + fl.map_or(0, |f| f.sent);
        let tau_d = tau_d_ns(&acc, place.focus) as f64 / acc.duration_ns.max(1) as f64;
        let (exhaustions, reaction) = served.as_ref().map_or((None, None), |r| {
            let ex = r.threads.iter().map(|t| t.exhaustions).sum();
            let p99 = r.threads.iter().filter_map(|t| t.reaction.p99_ns).max().map(|ns| ns as f64 / 1e3);
            (Some(ex), p99)
        });
        let kthread_run = match (stat_before, stat_after) {
            (Some((e0, s0)), Some((e1, s1))) if flood => Some(KthreadRun {
                exec_ns: e1.saturating_sub(e0),
                slices: s1.saturating_sub(s0),
                datagrams: taken_at_end.saturating_sub(taken_at_start),
            }),
            _ => None,
        };
        Ok(Point {
            setup,
            repeat: 0,
            e2_ns: e2,
            tau2_jobs: tau2.jobs,
            tau2_misses: tau2.misses,
            tau2_miss_pct: pct(tau2.misses, tau2.jobs),
            tau1_misses: tau1.misses,
            heartbeats_sent: hb.sent,
            tau1_polls: tau1.jobs,
            heartbeats_received: tau1.received,
            heartbeat_miss_pct: pct(tau1.jobs.saturating_sub(tau1.received), tau1.jobs),
            flood_sent: fl.map_or(0, |f| f.sent),
            processed_pct: if flood { 100.0 * taken_after.saturating_sub(taken_before) as f64 / all_sent.max(1) as f64 } else { f64::NAN },
            tau_d_share: Some(tau_d),
            kthread_share: kthread_run.map(|k| k.exec_ns as f64 / window_end.saturating_sub(window_start).max(1) as f64),
            kthread_run,
            server_exhaustions: exhaustions,
            server_reaction_p99_us: reaction,
            tau1_cpu_us: Quantiles::of(&tau1.cpu_ns),
            tau2_cpu_us: Quantiles::of(&tau2.cpu_ns),
            complete: tau2.jobs > 0 && !stop.load(Ordering::SeqCst),
        })
    })
}

/// Per swept e2, `setup`'s repeated sweeps pooled: e2, τ2's misses and
/// τ1's polls without a heartbeat, % of all jobs and polls at that e2.
pub fn pooled(points: &[Point], setup: Setup) -> Vec<(Nanos, f64, f64)> {
    let mut e2s: Vec<Nanos> = points.iter().filter(|p| p.setup == setup).map(|p| p.e2_ns).collect();
    e2s.sort_unstable();
    e2s.dedup();
    e2s.into_iter()
        .map(|e2| {
            let at: Vec<&Point> = points.iter().filter(|p| p.setup == setup && p.e2_ns == e2).collect();
            let sum = |f: fn(&Point) -> u64| at.iter().map(|p| f(p)).sum::<u64>();
            let polls = sum(|p| p.tau1_polls);
            (e2, pct(sum(|p| p.tau2_misses), sum(|p| p.tau2_jobs)), pct(polls.saturating_sub(sum(|p| p.heartbeats_received)), polls))
        })
        .collect()
}

/// The flood's rate over a point: datagrams sent over the senders' time
/// (the heartbeat's sender ran as long, one datagram per period).
pub fn flood_rate(p: &Point) -> f64 {
    p.flood_sent as f64 / (p.heartbeats_sent.max(1) * PERIOD) as f64 * 1e9
}

fn pct(a: u64, b: u64) -> f64 {
    if b == 0 {
        0.0
    } else {
        100.0 * a as f64 / b as f64
    }
}

/// The probe in τ2's place (τ1 absent) under `setup`'s layout, with the
/// flood or without: `runs` runs of 1 s, combined by [`robust_maxima`].
fn probe_curve(setup: Setup, place: &Place, flood: bool, runs: usize, stop: &AtomicBool) -> Result<Curve> {
    let _layout = layout(setup, place)?;
    let addr = place.bed.root_addr(Side::B);
    let sink_stop = AtomicBool::new(false);
    let flood_stop = Arc::new(AtomicBool::new(false));
    let sunk = AtomicU64::new(0);
    std::thread::scope(|s| -> Result<Curve> {
        let sink = s.spawn(|| {
            rt::pin_off(place.focus)?;
            traffic::udp_sink_counting(SocketAddrV4::new(addr, FLOOD_PORT), false, &sunk, &sink_stop)
        });
        let flooder = if flood { Some(spawn_sender(place, flood_plan(addr), FLOOD_CLASS, None, &flood_stop)?) } else { None };
        std::thread::sleep(RAMP);
        let config = probe::Config {
            cpu: Some(place.focus),
            priority: Some(i32::from(TAU2_PRIORITY)),
            duration_ns: 1_000 * MS,
            windows_ns: probe::log_windows(10_000, 100 * MS, 8),
            ..probe::Config::default()
        };
        let mut curves = Vec::new();
        let mut failed = None;
        for _ in 0..runs {
            if stop.load(Ordering::SeqCst) {
                break;
            }
            match probe::measure(&config, stop, |_| {}) {
                Ok(c) => curves.push(c.curve()),
                Err(e) => {
                    failed = Some(e);
                    break;
                }
            }
        }
        flood_stop.store(true, Ordering::SeqCst);
        let sent = flooder.map(|f| joined(f.join(), "flood sender"));
        sink_stop.store(true, Ordering::SeqCst);
        joined(sink.join(), "flood sink")?;
        if let Some(e) = failed {
            return Err(e);
        }
        sent.transpose()?;
        Ok(robust_maxima(&curves))
    })
}

/// Runs the simulated reproduction for its column, then the probes and
/// every configuration's sweep live. `on_stage` names each step as it
/// starts; `on_point` gets every point.
pub fn reproduce(
    config: &Config,
    stop: &AtomicBool,
    mut on_stage: impl FnMut(&str),
    mut on_point: impl FnMut(&Point),
) -> Result<Report<Details>> {
    let (focus, others) = rt::measured_and_others(config.cpu, "host b's senders need a CPU other than the measured one")?;
    let sender_cpu = others[0];
    // Before anything else: a kernel that cannot have HRTICK_DL (lockdown)
    // ends the run here, exit 3, with nothing measured or changed.
    let knobs = match config.hrtick_dl {
        true => Some(irqlab_host::journal::sched_knobs::apply(&irqlab_host::journal::sched_knobs::Change::SchedFeature {
            name: "HRTICK_DL".into(),
            on: true,
        })?),
        false => None,
    };
    let sched_knobs = knobs.as_ref().map_or_else(Vec::new, |k| k.describe());
    check_prerequisites()?;
    // As for the probe: RT throttling would stop tau_D with tau1 and tau2
    // for 50 ms of each second whenever they fill the CPU, which the
    // paper's kernel and the analysis do not have (restored at the end, on
    // every exit path).
    let rt_lift = irqlab_host::rt_limit::LiftedRtLimit::lift()?;
    on_stage("calibrating the work loop");
    let calibration = player::calibrate_sustained(focus, TAU1_PRIORITY, 500 * MS)?;
    let bed = Testbed::up()?;
    on_stage("shielding the measured CPU: a root domain of its own, other processes' threads moved off it");
    let (domain, sheltered) = shield(focus)?;
    let place = Place { bed: &bed, shield: &domain, focus, sender_cpu, calibration };
    let e2s = config.e2_values();
    let foreground = Setup::Config(Configuration::Foreground);
    let mut curves = None;
    if !stop.load(Ordering::SeqCst) {
        on_stage("probe in tau2's place: idle, then under the flood (Traditional, Foreground, SCHED_DEADLINE)");
        let runs = config.probe_runs();
        let idle = probe_curve(foreground, &place, false, runs, stop)?;
        let traditional = probe_curve(Setup::Config(Configuration::Traditional), &place, true, runs, stop)?;
        let fg = probe_curve(foreground, &place, true, runs, stop)?;
        let deadline = probe_curve(Setup::Config(Configuration::Deadline), &place, true, runs, stop)?;
        let (traditional_driver, _) = subtract_baseline_floor(&traditional, &idle);
        let (foreground_driver, _) = subtract_baseline_floor(&fg, &idle);
        curves = Some(Curves { idle, traditional, foreground: fg, deadline, traditional_driver, foreground_driver });
    }
    let mut points = Vec::new();
    let repeats = config.repeats();
    'rounds: for repeat in 0..repeats {
        for setup in Setup::RUN_ORDER {
            if stop.load(Ordering::SeqCst) {
                break 'rounds;
            }
            on_stage(&format!("{} (sweep {} of {repeats})", setup.name(), repeat + 1));
            // With no flood the layout is Foreground's: heartbeats delivered at once.
            let held = layout(if setup == Setup::NoFlood { foreground } else { setup }, &place)?;
            for &e2 in &e2s {
                if stop.load(Ordering::SeqCst) {
                    break 'rounds;
                }
                let mut p = run_point(setup, &held, &place, e2, config.point_ns(), stop)?;
                p.repeat = repeat;
                on_point(&p);
                points.push(p);
            }
        }
    }
    points.sort_by_key(|p| (Setup::ALL.iter().position(|&s| s == p.setup), p.repeat, p.e2_ns));
    drop(domain);
    drop(bed);
    drop(rt_lift);
    drop(knobs);
    let calibration_used = sim_calibration(&points);
    let simulated = if stop.load(Ordering::SeqCst) {
        None
    } else {
        on_stage(match calibration_used {
            Some(_) => "simulating the configurations with the per-datagram cost and flood measured here",
            None => "simulating the configurations (the paper's costs: nothing measured here to calibrate with)",
        });
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
        let opts = super::Options { quick: config.quick, seed: config.seed, threads };
        let cal = calibration_used.clone();
        let adjust = move |sc: &mut irqlab_sim::scenario::Scenario| cal.as_ref().map_or(Ok(()), |c| calibrate_scenario(sc, c));
        Some(super::reproduce_adjusted(&opts, stop, &|_, _| {}, &adjust).map_err(|e| Error::Failed(e.to_string()))?)
    };
    let noise = noise_rate(&points);
    let execution = Execution::measured(&points);
    let predictions = predictions(curves.as_ref(), execution.as_ref(), &points);
    let summaries = summaries(&points, &predictions, noise);
    let complete = simulated.as_ref().is_some_and(|s| s.complete)
        && curves.is_some()
        && points.len() == Setup::ALL.len() * e2s.len() * repeats as usize
        && points.iter().all(|p| p.complete)
        && !stop.load(Ordering::SeqCst);
    let details = Details {
        cpu: focus,
        sender_cpu,
        flood_interval_ns: FLOOD_INTERVAL_NS,
        flood_payload: FLOOD_PAYLOAD,
        point_s: config.point_ns() as f64 / 1e9,
        repeats,
        e2_values_ns: e2s,
        sheltered,
        calibration,
        noise_miss_pct: 100.0 * noise,
        kernel_note: kernel_note(&points, &summaries, 100.0 * noise, sheltered, config.hrtick_dl),
        sched_knobs,
        curves,
        execution,
        predictions,
        points,
        summaries,
        sim_calibration: calibration_used,
        simulated: simulated.map(|s| s.details),
    };
    let rows = relations(&details);
    Ok(Report::new("load-bounds", config.quick, complete, config.seed, rows, details))
}

/// What the simulated column was run with instead of the paper's setup.
#[derive(Debug, Clone, Serialize)]
pub struct SimCalibration {
    /// Measured here: the NAPI kthread's CPU time per datagram taken in,
    /// median over `points` Foreground points ([`sim_calibration`]): the
    /// simulated NIC's per-datagram UDP receive cost.
    pub udp_cost_ns: Nanos,
    pub points: usize,
    /// As sent here: the flood replaces the paper's ping flood.
    pub flood_interval_ns: Nanos,
    pub flood_frame_bytes: u32,
    /// Kept from the paper's setup (estimates for its 3 GHz Pentium D).
    pub assumed: String,
}

/// The simulated column's calibration: the median over the Foreground
/// points of the NAPI kthreads' CPU time per datagram taken in. There the
/// kthread runs as soon as a datagram comes, as the simulated driver
/// thread does; its time (schedstat) includes its wakeups and the
/// interrupt time this kernel charges to it, which is what τ2 loses to it
/// (the probe's curve agrees). `None` when no Foreground point measured it.
fn sim_calibration(points: &[Point]) -> Option<SimCalibration> {
    let mut costs: Vec<f64> = points
        .iter()
        .filter(|p| p.setup == Setup::Config(Configuration::Foreground))
        .filter_map(|p| p.kthread_run)
        .filter(|k| k.datagrams > 0)
        .map(|k| k.exec_ns as f64 / k.datagrams as f64)
        .collect();
    costs.sort_by(f64::total_cmp);
    let median = *costs.get(costs.len() / 2)?;
    Some(SimCalibration {
        udp_cost_ns: median.round() as Nanos,
        points: costs.len(),
        flood_interval_ns: FLOOD_INTERVAL_NS,
        // UDP payload + UDP, IPv4 and Ethernet headers.
        flood_frame_bytes: (FLOOD_PAYLOAD + 8 + 20 + 14) as u32,
        assumed: "IRQ entry/exit, the driver ISR, tick and context-switch costs (charged on top of the measured cost), the ring \
                  and NAPI weight, tau1's receive cost: the paper-setup estimates of scenarios/load-bounds/*.toml"
            .into(),
    })
}

/// A configuration's scenario as this machine ran it: the ping flood
/// replaced by the UDP flood sent here, the per-datagram UDP cost the one
/// measured here.
fn calibrate_scenario(sc: &mut irqlab_sim::scenario::Scenario, cal: &SimCalibration) -> std::result::Result<(), String> {
    use irqlab_sim::net::Arrivals;
    use irqlab_sim::scenario::{SocketRef, TrafficKind, TrafficProto};
    let spec = sc.spec_mut();
    spec.nic.as_mut().ok_or("no [nic]")?.costs.udp = cal.udp_cost_ns;
    let Some(ping) = spec.traffic.iter().position(|t| t.kind == TrafficKind::PingFlood) else { return Ok(()) };
    let mut flood = spec.traffic[ping].clone();
    flood.kind = TrafficKind::Constant;
    flood.name = "udp-flood".into();
    flood.size = cal.flood_frame_bytes;
    flood.arrivals = Arrivals::Constant { interval: cal.flood_interval_ns };
    flood.proto = TrafficProto::Udp { socket: SocketRef::new("flood") };
    spec.traffic[ping] = flood;
    // The flood's receiver runs on another CPU: a socket nobody here reads.
    spec.declare_unread_sockets();
    Ok(())
}

fn ms(ns: Nanos) -> f64 {
    ns as f64 / 1e6
}

fn mean(v: impl Iterator<Item = f64>) -> f64 {
    let (n, s) = v.filter(|x| x.is_finite()).fold((0usize, 0.0), |(n, s), x| (n + 1, s + x));
    if n == 0 {
        f64::NAN
    } else {
        s / n as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_poisson_upper_bound_of_no_events_is_three() {
        assert!((poisson_upper_95(0) - 2.9957).abs() < 1e-3, "{}", poisson_upper_95(0));
        // Tabulated one-sided 95% upper limits: 4.744 (1), 9.154 (4).
        assert!((poisson_upper_95(1) - 4.744).abs() < 1e-3);
        assert!((poisson_upper_95(4) - 9.154).abs() < 1e-3);
    }

    #[test]
    fn misses_within_the_noise_rate_are_allowed_and_more_are_not() {
        // No noise: not a single miss is explained.
        assert_eq!(allowed_misses(200, 0.0), 0);
        // 3 expected misses in 200 jobs: up to 6 at the 95% level.
        assert_eq!(allowed_misses(200, 0.015), 6);
        let p = |setup, e2_ns, misses| Point {
            setup,
            repeat: 0,
            e2_ns,
            tau2_jobs: 200,
            tau2_misses: misses,
            tau2_miss_pct: pct(misses, 200),
            tau1_misses: 0,
            heartbeats_sent: 0,
            tau1_polls: 200,
            heartbeats_received: 200,
            heartbeat_miss_pct: 0.0,
            flood_sent: 0,
            processed_pct: f64::NAN,
            tau_d_share: None,
            kthread_run: None,
            kthread_share: None,
            server_exhaustions: None,
            server_reaction_p99_us: None,
            tau1_cpu_us: None,
            tau2_cpu_us: None,
            complete: true,
        };
        let fg = Setup::Config(Configuration::Foreground);
        let points = [p(fg, MS, 0), p(fg, 2 * MS, 6), p(fg, 3 * MS, 7), p(fg, 4 * MS, 0)];
        let refs: Vec<&Point> = points.iter().collect();
        assert_eq!(meets_up_to(&refs, 0.015), Some(2 * MS), "the first point past the noise ends the run of met points");
        assert_eq!(meets_up_to(&refs, 0.0), Some(MS));
        // The sustained limit: clean points after 2-3 ms say those misses
        // were not tau2's schedulability ending.
        assert_eq!(sustained_limit(&refs, 0.0), 4 * MS, "the last point met: no misses last to the end");
        let ending = [p(fg, MS, 0), p(fg, 2 * MS, 7), p(fg, 3 * MS, 0), p(fg, 4 * MS, 50), p(fg, 5 * MS, 200)];
        let refs: Vec<&Point> = ending.iter().collect();
        assert_eq!(sustained_limit(&refs, 0.0), 3 * MS);
        assert_eq!(meets_up_to(&refs, 0.0), Some(MS));
        let all_miss = [p(fg, MS, 9), p(fg, 2 * MS, 100)];
        assert_eq!(sustained_limit(&all_miss.iter().collect::<Vec<_>>(), 0.0), 0);
        // The noise rate comes from the no-flood points with 1 ms idle only.
        let quiet = [p(Setup::NoFlood, MS, 0), p(Setup::NoFlood, 7 * MS, 0), p(Setup::NoFlood, 9 * MS, 200)];
        assert!((noise_rate(&quiet) - poisson_upper_95(0) / 400.0).abs() < 1e-12);
    }

    #[test]
    fn measured_execution_times_stretch_e2_between_the_swept_values() {
        let x = Execution { tau1_ns: 2_050_000, tau2_ns: vec![(2 * MS, 2_100_000), (4 * MS, 4_080_000)] };
        assert_eq!(x.tau2(2 * MS), 2_100_000);
        // Halfway: the ratio halfway between 1.05 and 1.02.
        assert_eq!(x.tau2(3 * MS), 3_105_000);
        // Beyond the swept values, the nearest ratio.
        assert_eq!(x.tau2(MS), 1_050_000);
        assert_eq!(x.tau2(8 * MS), 8_160_000);
        assert_eq!(x.tau1_demand(PERIOD), tau1_demand(PERIOD) + 50_000);
        // A longer execution time can only lower the largest e2.
        let (nominal, stretched) = (max_e2(&tau1_demand), max_e2_executing(&|e| x.tau2(e), &|t| x.tau1_demand(t)));
        assert!(stretched < nominal, "{stretched} vs {nominal}");
        // tau1 2.05 ms + its receive, tau2 at 1.02 x e2: e2 <= (10 - 2.052) / 1.02 ms.
        assert!(stretched.abs_diff(7_790_000) <= 10_000, "{stretched}");
    }

    #[test]
    fn an_order_reversed_within_the_repeats_noise_still_holds_and_beyond_it_not() {
        let a = Spread::of(&[110.0, 100.0, 90.0]);
        assert_eq!((a.mean, a.sd, a.n), (100.0, 10.0, 3));
        let b = Spread::of(&[95.0, 85.0, 90.0]);
        // Welch's standard error sqrt(100/3 + 25/3) = 6.45, t(4) = 2.776.
        assert!((a.tolerance(&b) - 2.776 * (125.0f64 / 3.0).sqrt()).abs() < 1e-9);
        assert!(a.at_most(&b), "10 above, within 17.9 of noise");
        let c = Spread::of(&[60.0, 62.0, 58.0]);
        assert!(!a.at_most(&c) && c.at_most(&a));
        // One sweep measures no noise: the order is taken as it is.
        let (one, other) = (Spread::of(&[5.0]), Spread::of(&[4.0]));
        assert_eq!(one.tolerance(&other), 0.0);
        assert!(!one.at_most(&other));
        assert_eq!(median(&[MS, 2 * MS, 4 * MS]), Some(2 * MS));
        assert_eq!(median(&[MS, 2 * MS]), Some(3 * MS / 2));
        assert_eq!(median(&[]), None);
    }

    #[test]
    fn robust_maxima_keep_what_every_run_reached() {
        let c = |loads: [f64; 2]| {
            Curve::with_floor(
                vec![CurvePoint { window_ns: 1_000, max_load: loads[0] }, CurvePoint { window_ns: 10_000, max_load: loads[1] }],
                vec![FloorPoint { window_ns: 10_000, min_load: loads[1] / 2.0 }],
            )
        };
        // A stall put run 2 at 100%: the least over runs drops it.
        let r = robust_maxima(&[c([0.5, 0.2]), c([1.0, 1.0]), c([0.6, 0.3])]);
        assert_eq!(r.points.iter().map(|p| p.max_load).collect::<Vec<_>>(), vec![0.5, 0.2]);
        assert_eq!(r.floor[0].min_load, 0.1);
        assert!(robust_maxima(&[]).points.is_empty());
    }
}
