//! The process-aware paper's Fig. 7 (`docs/papers.md` §2; the paper's §5)
//! live on the testbed: a CPU-bound SCHED_FIFO 50 process that runs, then
//! sleeps, and a SCHED_OTHER UDP server on the same CPU, receiving
//! 512-byte datagrams sent from testbed host b at a swept rate. Three
//! kernels' ways of doing the receive work on that CPU:
//! - **vanilla, softirq**: threaded NAPI off; the veth poll runs on the
//!   sender's CPU and receive packet steering hands the packets to the
//!   measured CPU, whose NET_RX softirq does the IP and UDP work in whatever
//!   runs there (the paper's vanilla kernel);
//! - **vanilla, threaded**: threaded NAPI on, the NAPI kthread at the
//!   kernel's default (SCHED_OTHER) on the measured CPU;
//! - **process-aware**: the same kthread under `control process-aware`
//!   (the priority of the waiting receiver, floor SCHED_OTHER nice 0).
//!
//! Fig. 8 the same way, vanilla (softirq) against process-aware: MMPP-2
//! bursts (5000 datagrams 10 us apart on average, exponential gaps of the
//! simulated reproduction's means) against a SCHED_FIFO 50 task busy 950 ms
//! of CPU time in every 1 s period (deadline: the period's end), 10 periods
//! per point (30 in full mode): its deadline misses and the reception.
//!
//! Scaled in time: the paper's 100 s run / 10 s sleep becomes 10 s / 1 s
//! (full) or 2 s / 0.2 s (quick); the rates are the simulated
//! reproduction's. Per point: the CPU-bound process's share of its run
//! phase, from its progress (iterations of the work loop of
//! `irqlab_measure::player`, against its sustained speed measured first on the
//! same CPU with no traffic: the median 100 ms window of 500 ms), not from
//! its CPU clock, which on a kernel
//! without IRQ time accounting also counts the softirq work run in its
//! context (that charge is kept beside it); and the datagrams the server
//! received in the run phase, in the sleep phase, and over the rate's count.
//! The periodic task of Fig. 8 does the calibrated work of 950 ms per job.

use super::sim;
use crate::report::{Report, Row};
use irqlab_control::process_aware::{self, accounting, accounting::Accounted};
use irqlab_host::error::{Error, Result};
use irqlab_host::journal::{netdev, Applied};
use irqlab_host::rt;
use irqlab_host::testbed::{self, Side, Testbed};
use irqlab_measure::player::{self, Calibration};
use irqlab_measure::traffic::{self, Kind, Plan, Schedule};
use serde::Serialize;
use std::net::SocketAddrV4;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

pub const DEVICE: &str = "irqlab-b";
const PORT: u16 = 9_718;
/// The paper's datagrams (§5).
pub const PAYLOAD: usize = 512;
const HOG_PRIORITY: u8 = 50;

#[derive(Debug, Clone)]
pub struct Config {
    pub quick: bool,
    pub cpu: Option<usize>,
    pub seed: u64,
    /// Set the measured CPU's fair server to runtime 0 for the run (through
    /// the journal): on 6.12+ it otherwise gives fair-class work (the
    /// threaded NAPI kthread) up to 50 ms of each second over the SCHED_FIFO
    /// CPU-bound process, which the paper's kernel did not.
    pub fair_server_off: bool,
}

/// How the receive work is done.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Softirq,
    Threaded,
    ProcessAware,
}

impl Mode {
    pub const ALL: [Mode; 3] = [Mode::Softirq, Mode::Threaded, Mode::ProcessAware];

    pub fn name(self) -> &'static str {
        match self {
            Mode::Softirq => "vanilla, softirq",
            Mode::Threaded => "vanilla, threaded",
            Mode::ProcessAware => "process-aware",
        }
    }
}

by_name!(Mode);

/// One mode at one rate.
#[derive(Debug, Clone, Serialize)]
pub struct Point {
    pub mode: Mode,
    pub rate_pps: u64,
    pub sent: u64,
    pub achieved_pps: f64,
    /// The CPU-bound process's share of its run phase: its progress (work
    /// loop iterations) over what the calibrated speed does in that wall time.
    pub hog_share: f64,
    /// Its thread CPU clock over the run's wall time: what the kernel
    /// charged it, softirq work run in its context included.
    pub hog_charged_share: f64,
    pub run_ns: u64,
    pub received_run: u64,
    pub received_sleep: u64,
    /// Received over the datagrams the rate called for (the sender may be
    /// slowed: veth stops its queue while the receive ring is full).
    pub reception_ratio: f64,
    pub received_per_s: f64,
    /// Fig. 6 live: the CPU-bound thread's charges over its run and
    /// sleep, from the BPF accounting on its CPU (`irqlab_control::process_aware::accounting`).
    pub accounting: Option<HogAccounting>,
    /// Process-aware: priority changes and their reaction p99, us.
    pub changes: Option<u64>,
    pub reaction_p99_us: Option<f64>,
    pub complete: bool,
}

/// Fig. 6 live: what the kernel (/proc), the compensation algorithm and
/// the BPF-measured truth say the CPU-bound thread ran.
#[derive(Debug, Clone, Serialize)]
pub struct HogAccounting {
    pub truth_ns: u64,
    pub kernel_ns: Option<u64>,
    pub compensation_ns: Option<u64>,
    pub moved_ticks: i64,
    /// Network softirq work done in its context.
    pub in_its_context_ns: u64,
    /// (charge − truth) / truth.
    pub kernel_error: Option<f64>,
    pub compensation_error: Option<f64>,
    /// Ticks the accounting read more than a tick late.
    pub late_ticks: u64,
}

/// Fig. 8: one kernel at one mean gap between bursts.
#[derive(Debug, Clone, Serialize)]
pub struct BurstyPoint {
    pub mode: Mode,
    pub gap_ms: u64,
    /// The bursts' average rate asked (burst packets over burst + gap).
    pub rate_pps: f64,
    pub sent: u64,
    pub scheduled: u64,
    pub jobs: u64,
    pub misses: u64,
    pub miss_rate: f64,
    /// The latest job's completion past its release, ms.
    pub worst_response_ms: f64,
    pub received: u64,
    /// Received over the datagrams the schedule called for.
    pub reception_ratio: f64,
    pub complete: bool,
}

/// Fig. 8's setup (the simulated scenario's): bursts of 5000 datagrams
/// 10 us apart (50 ms on average, exponential), the CPU-bound task busy
/// 950 ms of CPU time in every 1 s period, its deadline the period's end.
const BURST_SPACING_NS: u64 = 10_000;
const BURST_ON_NS: u64 = 50_000_000;
const PERIOD_NS: u64 = 1_000_000_000;
const EXEC_NS: u64 = 950_000_000;

#[derive(Debug, Clone, Serialize)]
pub struct Details {
    pub cpu: usize,
    pub sender_cpu: Option<usize>,
    pub run_s: f64,
    pub sleep_s: f64,
    pub calibration: Calibration,
    /// The same calibration again after the Fig. 7 runs: how far this
    /// machine's speed moved while they ran (a VM's host changes it; a
    /// share of a little over 1 by as much is that drift, not the kernel).
    /// None when the run was stopped before.
    pub calibration_after: Option<Calibration>,
    pub scale: String,
    pub points: Vec<Point>,
    /// Fig. 8: MMPP-2 bursts against a periodic CPU-bound task.
    pub bursty: Vec<BurstyPoint>,
    pub bursty_periods: u64,
    /// What this kernel did, said from the numbers.
    pub kernel_note: String,
    /// The scheduler's debugfs knobs set for the run (`--fair-server off`),
    /// one line each; empty: none, the kernel's own settings.
    pub sched_knobs: Vec<String>,
    pub simulated: Option<sim::Details>,
}

/// The shares each kernel gave the CPU-bound process, and why they are
/// close on a modern kernel, from the numbers.
/// `fair_server_off`: the measured CPU's fair server was set to runtime 0
/// for the run (`--fair-server off`).
fn kernel_note(points: &[Point], bursty: &[BurstyPoint], fair_server_off: bool) -> String {
    let range = |m: Mode, f: fn(&Point) -> f64| {
        let v: Vec<f64> = points.iter().filter(|p| p.mode == m).map(|p| 100.0 * f(p)).collect();
        (v.iter().copied().fold(f64::INFINITY, f64::min), v.iter().copied().fold(0.0, f64::max))
    };
    let changes: u64 = points.iter().filter_map(|p| p.changes).sum();
    let (sl, sh) = range(Mode::Softirq, |p| p.hog_share);
    let (cl, ch) = range(Mode::Softirq, |p| p.hog_charged_share);
    let (tl, th) = range(Mode::Threaded, |p| p.hog_share);
    let (pl, ph) = range(Mode::ProcessAware, |p| p.hog_share);
    let mut text = format!(
        "Measured by its progress, the CPU-bound process kept {sl:.1}-{sh:.1}% of its run phase under softirqs (the kernel charged it \
         {cl:.1}-{ch:.1}%: the softirq work run in its context counted as its own), {tl:.1}-{th:.1}% with the threaded kthread at its \
         default and {pl:.1}-{ph:.1}% under process-aware ({changes} priority changes). Threaded NAPI takes the receive work out of its \
         context into a fair-class kthread, and what fair-class work takes from a SCHED_FIFO task is bounded by the deadline fair \
         server (Linux 6.12+): up to its runtime per period (50 ms of each second by default) while such work waits{}. With the \
         server at SCHED_OTHER nice 0, the controller's floor, process-aware runs the kthread as the threaded kernel does.",
        if fair_server_off {
            "; here it was set to runtime 0 on the measured CPU for the run (--fair-server off), so the server ran no fair-class \
             work ahead of the SCHED_FIFO process"
        } else {
            "; so no threaded kernel with the server at its default leaves it 99% (--fair-server off sets its runtime to 0 for the run)"
        }
    );
    let errors = |f: fn(&HogAccounting) -> Option<f64>| -> Vec<f64> {
        points.iter().filter(|p| p.mode == Mode::Softirq).filter_map(|p| p.accounting.as_ref().and_then(f)).map(|e| 100.0 * e).collect()
    };
    let (ek, ec) = (errors(|a| a.kernel_error), errors(|a| a.compensation_error));
    if !ek.is_empty() {
        let span = |v: &[f64]| (v.iter().copied().fold(f64::INFINITY, f64::min), v.iter().copied().fold(f64::NEG_INFINITY, f64::max));
        let ((kl, kh), (cl, ch)) = (span(&ek), span(&ec));
        text.push_str(&format!(
            " Fig. 6: under softirqs the kernel's /proc charge of the CPU-bound thread was {kl:+.1} to {kh:+.1}% off its BPF-measured run \
             (no IRQ time accounting: the softirq work in its context counts as its own); the compensation algorithm, fed that work by \
             the thread it served every 10 ms tick, left {cl:+.1} to {ch:+.1}%."
        ));
        // What the accounting saw taken against what the progress lost.
        let seen: Vec<(f64, f64)> = points
            .iter()
            .filter(|p| p.mode == Mode::Softirq && p.run_ns > 0)
            .filter_map(|p| Some((100.0 * p.accounting.as_ref()?.in_its_context_ns as f64 / p.run_ns as f64, 100.0 * (1.0 - p.hog_share))))
            .collect();
        if let Some(&(s, l)) = seen.last() {
            text.push_str(&format!(
                " The truth is the BPF accounting's, which at the top rate saw {s:.1}% of the run phase as softirq work in its context \
                 while its progress lost {l:.1}%: the rest is time the guest's tracepoints do not see (the vCPU stalled by the IPIs RPS \
                 sends, cache and TLB refills), which no charge here includes."
            ));
        }
    }
    if !bursty.is_empty() {
        let misses = |m: Mode| bursty.iter().filter(|p| p.mode == m).map(|p| p.misses).sum::<u64>();
        let jobs = |m: Mode| bursty.iter().filter(|p| p.mode == m).map(|p| p.jobs).sum::<u64>();
        let worst = |f: fn(f64, f64) -> f64, init: f64| bursty.iter().map(|p| p.worst_response_ms).fold(init, f);
        text.push_str(&format!(
            " Under bursts (Fig. 8) the periodic task missed {} of {} deadlines with softirqs and {} of {} under process-aware; \
             its worst responses were {:.1}-{:.1} ms against its 1000 ms deadline. Each job is 950 ms of work at the calibrated speed, \
             and besides softirq work in its context the fair server may take up to 50 ms of each second whenever fair-class work \
             waits, which leaves no room under process-aware either.",
            misses(Mode::Softirq),
            jobs(Mode::Softirq),
            misses(Mode::ProcessAware),
            jobs(Mode::ProcessAware),
            worst(f64::min, f64::INFINITY),
            worst(f64::max, 0.0)
        ));
    }
    text
}

pub fn check_prerequisites() -> Result<()> {
    testbed::check_prerequisites()?;
    process_aware::check_prerequisites()
}

/// What one point needs to run: the journalled layout of its mode.
fn layout(mode: Mode, focus: usize) -> Result<Vec<Applied>> {
    let mut changes = Vec::new();
    match mode {
        Mode::Softirq => changes.extend(netdev::softirq_receive_on(DEVICE, focus)?),
        Mode::Threaded | Mode::ProcessAware => {
            let (on, kthreads) = netdev::threaded_receive(DEVICE)?;
            changes.push(on);
            // Under process-aware the controller pins the kthreads itself.
            if mode == Mode::ProcessAware {
                return Ok(changes);
            }
            changes.extend(netdev::hold_kthreads(&kthreads, Some(&[focus]), None)?);
        }
    }
    Ok(changes)
}

/// Work per step of the CPU-bound loops (~30 us at the calibrated speed).
const CHUNK: u64 = 20_000;

/// What the CPU-bound process's run phase gave.
struct Cycle {
    /// Its progress over what the calibrated speed does in the run's wall
    /// time (the true share), and its thread CPU clock over that wall time
    /// (what the kernel charged it, softirq work in its context included).
    true_share: f64,
    charged_share: f64,
    run_wall: u64,
    /// The server's count at run start, at run end, at sleep end.
    received: [u64; 3],
    tid: i32,
}

/// The CPU-bound process's phases: calibrated work for `run_ns` (no system
/// calls), then sleep `sleep_ns`.
fn hog_cycle(focus: usize, cal: &Calibration, run_ns: u64, sleep_ns: u64, received: &AtomicU64) -> Result<Cycle> {
    std::thread::scope(|s| {
        s.spawn(|| {
            rt::pin_to_cpu(focus)?;
            rt::set_fifo(HOG_PRIORITY)?;
            let tid = nix::unistd::gettid().as_raw();
            let start = rt::monotonic_ns();
            let (c0, r0) = (rt::thread_cpu_ns(), received.load(Ordering::SeqCst));
            let mut done = 0u64;
            while rt::monotonic_ns() - start < run_ns {
                std::hint::black_box(player::spin(CHUNK));
                done += CHUNK;
            }
            let end = rt::monotonic_ns();
            let (c1, r1) = (rt::thread_cpu_ns(), received.load(Ordering::SeqCst));
            rt::sleep_until_ns(end + sleep_ns);
            let r2 = received.load(Ordering::SeqCst);
            let wall = (end - start).max(1);
            Ok(Cycle {
                true_share: done as f64 / (cal.iterations_per_us * wall as f64 / 1e3),
                charged_share: (c1 - c0) as f64 / wall as f64,
                run_wall: wall,
                received: [r0, r1, r2],
                tid,
            })
        })
        .join()
        .unwrap_or_else(|_| Err(Error::Failed("the CPU-bound thread panicked".into())))
    })
}

/// The periodic CPU-bound task: each period the work the calibrated speed
/// does in `EXEC_NS` (interference stretches its wall time), then sleep to
/// the next release; a job that ends past its period's end misses.
/// Returns (jobs, misses, worst response ns).
fn periodic_hog(focus: usize, cal: &Calibration, periods: u64, stop: &AtomicBool) -> Result<(u64, u64, u64)> {
    let work = (cal.iterations_per_us * EXEC_NS as f64 / 1e3) as u64;
    std::thread::scope(|s| {
        s.spawn(|| {
            rt::pin_to_cpu(focus)?;
            rt::set_fifo(HOG_PRIORITY)?;
            let start = rt::monotonic_ns() + 10_000_000;
            let (mut jobs, mut misses, mut worst) = (0, 0, 0);
            for k in 0..periods {
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                let release = start + k * PERIOD_NS;
                rt::sleep_until_ns(release);
                let mut left = work;
                while left > 0 {
                    let n = left.min(CHUNK);
                    std::hint::black_box(player::spin(n));
                    left -= n;
                }
                let response = rt::monotonic_ns().saturating_sub(release);
                jobs += 1;
                misses += u64::from(response > PERIOD_NS);
                worst = worst.max(response);
            }
            Ok((jobs, misses, worst))
        })
        .join()
        .unwrap_or_else(|_| Err(Error::Failed("the periodic task panicked".into())))
    })
}

/// Where the experiment runs: the testbed, the measured CPU, the others.
struct Place<'a> {
    bed: &'a Testbed,
    focus: usize,
    others: Vec<usize>,
    /// The work loop's speed on `focus`, measured before the runs.
    calibration: Calibration,
}

/// What a task run under traffic gave besides its own result.
struct UnderTraffic<T> {
    task: T,
    sent: traffic::Counters,
    /// The server's count when the task started, and after the sender
    /// stopped and what was in flight arrived.
    received_before: u64,
    received_after: u64,
    /// The controller's report (process-aware).
    controller: Option<process_aware::Report>,
    /// The compensation on the measured CPU (the controller's under
    /// process-aware, else its own run).
    accounted: Option<Accounted>,
}

/// Runs `task` (the CPU-bound process) under `mode`'s layout, with the UDP
/// server on the measured CPU and, under process-aware, the controller,
/// while host b sends `schedule` for `duration_ns`; `task` gets the
/// server's count. Everything is stopped and restored before it returns.
fn under_traffic<T: Send>(
    mode: Mode,
    place: &Place,
    schedule: Schedule,
    duration_ns: u64,
    task: impl FnOnce(&AtomicU64) -> T + Send,
) -> Result<UnderTraffic<T>> {
    let (bed, focus) = (place.bed, place.focus);
    let _layout = layout(mode, focus)?;
    let bind = SocketAddrV4::new(bed.root_addr(Side::B), PORT);
    let received = AtomicU64::new(0);
    let (server_stop, ctl_stop) = (AtomicBool::new(false), AtomicBool::new(false));
    let flood_stop = Arc::new(AtomicBool::new(false));
    let sender_cpu = place.others.first().copied();
    std::thread::scope(|s| {
        let server = s.spawn(|| {
            rt::pin_to_cpu(focus)?;
            traffic::udp_sink_counting(bind, false, &received, &server_stop)
        });
        let controller = (mode == Mode::ProcessAware).then(|| {
            s.spawn(|| {
                let config = process_aware::Config { dev: DEVICE.into(), cpu: Some(focus), ..process_aware::Config::default() };
                process_aware::run(&config, &ctl_stop, |_| {})
            })
        });
        // The other kernels: the same accounting without a controller,
        // off the measured CPU, ticking on time.
        let accountant = (mode != Mode::ProcessAware).then(|| {
            s.spawn(|| {
                rt::pin_off(focus)?;
                rt::set_fifo(98)?;
                accounting::run(&[focus], process_aware::TICK_NS, false, &ctl_stop)
            })
        });
        // The server binds and the controller finds it before the flood.
        std::thread::sleep(Duration::from_millis(500));
        let plan = Plan { kind: Kind::Udp { port: PORT }, target: *bind.ip(), schedule, size: PAYLOAD, duration_ns };
        let flood = {
            let flood_stop = flood_stop.clone();
            bed.spawn_in(Side::B, move || {
                if let Some(cpu) = sender_cpu {
                    rt::pin_to_cpu(cpu)?;
                }
                traffic::send(&plan, &flood_stop)
            })?
        };
        let received_before = received.load(Ordering::SeqCst);
        let task = task(&received);
        flood_stop.store(true, Ordering::SeqCst);
        let sent = flood.join().unwrap_or_else(|_| Err(Error::Failed("the sender panicked".into())));
        // Datagrams still in flight reach the server within a few ms.
        std::thread::sleep(Duration::from_millis(50));
        let received_after = received.load(Ordering::SeqCst);
        ctl_stop.store(true, Ordering::SeqCst);
        let report = controller.map(|c| c.join().unwrap_or_else(|_| Err(Error::Failed("the controller panicked".into()))));
        server_stop.store(true, Ordering::SeqCst);
        let served = server.join().unwrap_or_else(|_| Err(Error::Failed("the UDP server panicked".into())));
        let own = accountant.map(|a| a.join().unwrap_or_else(|_| Err(Error::Failed("the accounting panicked".into()))));
        let controller = report.transpose()?;
        let own = own.transpose()?;
        served?;
        let accounted = own.or_else(|| controller.as_ref().and_then(|c| c.accounting.clone()));
        Ok(UnderTraffic { task, sent: sent?, received_before, received_after, controller, accounted })
    })
}

fn run_bursty(mode: Mode, gap_ms: u64, periods: u64, place: &Place, seed: u64, stop: &AtomicBool) -> Result<BurstyPoint> {
    let schedule = Schedule::Mmpp { interval_ns: BURST_SPACING_NS, mean_on_ns: BURST_ON_NS, mean_off_ns: gap_ms * 1_000_000, seed };
    let run = under_traffic(mode, place, schedule, periods * PERIOD_NS, |_| periodic_hog(place.focus, &place.calibration, periods, stop))?;
    let (sent, got) = (run.sent, run.received_after - run.received_before);
    let (jobs, misses, worst) = run.task?;
    Ok(BurstyPoint {
        mode,
        gap_ms,
        rate_pps: (BURST_ON_NS / BURST_SPACING_NS) as f64 / ((BURST_ON_NS + gap_ms * 1_000_000) as f64 / 1e9),
        sent: sent.sent,
        scheduled: sent.scheduled,
        jobs,
        misses,
        miss_rate: if jobs > 0 { misses as f64 / jobs as f64 } else { 0.0 },
        worst_response_ms: worst as f64 / 1e6,
        received: got,
        reception_ratio: if sent.scheduled > 0 { got as f64 / sent.scheduled as f64 } else { 0.0 },
        complete: jobs == periods && !stop.load(Ordering::SeqCst),
    })
}

fn run_point(mode: Mode, rate: u64, place: &Place, run_ns: u64, sleep_ns: u64, stop: &AtomicBool) -> Result<Point> {
    let schedule = Schedule::Periodic { interval_ns: 1_000_000_000 / rate };
    let run = under_traffic(mode, place, schedule, run_ns + sleep_ns, |received| {
        (!stop.load(Ordering::SeqCst)).then(|| hog_cycle(place.focus, &place.calibration, run_ns, sleep_ns, received))
    })?;
    let sent = run.sent;
    let c = match run.task {
        Some(c) => c?,
        None => Cycle { true_share: 0.0, charged_share: 0.0, run_wall: 0, received: [0; 3], tid: 0 },
    };
    let accounting = run.accounted.as_ref().and_then(|a| {
        let t = a.tasks.iter().find(|t| t.tid == c.tid)?;
        Some(HogAccounting {
            truth_ns: t.truth_run_ns,
            kernel_ns: t.kernel_charged_ns,
            compensation_ns: t.compensation_charged_ns,
            moved_ticks: t.moved_ticks,
            in_its_context_ns: t.stolen_softirq_ns,
            kernel_error: t.kernel_error,
            compensation_error: t.compensation_error,
            late_ticks: a.late_ticks,
        })
    });
    let (run_wall, [r0, r1, r2]) = (c.run_wall, c.received);
    let report = run.controller;
    Ok(Point {
        mode,
        rate_pps: rate,
        sent: sent.sent,
        achieved_pps: sent.rate_per_s(),
        hog_share: c.true_share,
        hog_charged_share: c.charged_share,
        accounting,
        run_ns: run_wall,
        received_run: r1 - r0,
        received_sleep: r2 - r1,
        reception_ratio: if sent.scheduled > 0 { (r2 - r0) as f64 / sent.scheduled as f64 } else { 0.0 },
        received_per_s: (r2 - r0) as f64 / ((run_wall + sleep_ns) as f64 / 1e9).max(1e-9),
        changes: report.as_ref().map(|r| r.change_count),
        reaction_p99_us: report.as_ref().and_then(|r| r.reaction.p99_ns).map(|ns| ns as f64 / 1e3),
        complete: cycle_complete(run_wall, run_ns) && !stop.load(Ordering::SeqCst),
    })
}

fn cycle_complete(run_wall: u64, run_ns: u64) -> bool {
    run_wall >= run_ns
}

/// The rows: per rate the three modes' shares and receptions beside the
/// simulated vanilla and ISA, and the paper's relations judged live.
pub fn relations(d: &Details) -> Vec<Row> {
    let find = |m: Mode, rate: u64| d.points.iter().find(|p| p.mode == m && p.rate_pps == rate);
    let sim_point = |m: sim::Mode, rate: u64| {
        d.simulated.as_ref().and_then(|s| s.accounting.iter().find(|p| p.mode == m && p.rate_pps as u64 == rate).cloned())
    };
    let mut rates: Vec<u64> = d.points.iter().map(|p| p.rate_pps).collect();
    rates.dedup();
    let mut rows = Vec::new();
    for &rate in &rates {
        for (mode, sim_mode) in
            [(Mode::Softirq, sim::Mode::Vanilla), (Mode::Threaded, sim::Mode::Vanilla), (Mode::ProcessAware, sim::Mode::Isa)]
        {
            let Some(p) = find(mode, rate) else { continue };
            let s = sim_point(sim_mode, rate);
            rows.push(
                Row::info(
                    format!("Fig. 7a CPU-bound share of its run phase, {mode}, {rate} pkt/s"),
                    if mode == Mode::ProcessAware { "~100" } else { "falls with rate" },
                    s.as_ref().map_or(f64::NAN, |s| 100.0 * s.cpu_share_of_active),
                    "%",
                )
                .with_live(100.0 * p.hog_share),
            );
            rows.push(
                Row::info(
                    format!("Fig. 7c UDP reception, {mode}, {rate} pkt/s"),
                    "close across kernels",
                    s.as_ref().map_or(f64::NAN, |s| 100.0 * s.reception_ratio),
                    "% of the rate's",
                )
                .with_live(100.0 * p.reception_ratio),
            );
        }
    }
    let pa: Vec<&Point> = d.points.iter().filter(|p| p.mode == Mode::ProcessAware).collect();
    let pa_min = pa.iter().map(|p| p.hog_share).fold(f64::INFINITY, f64::min);
    let sim_isa_min = d.simulated.as_ref().map_or(f64::NAN, |s| {
        s.accounting.iter().filter(|p| p.mode == sim::Mode::Isa).map(|p| p.cpu_share_of_active).fold(f64::INFINITY, f64::min)
    });
    rows.push(
        Row::check(
            "Fig. 7a process-aware: CPU-bound keeps >= 99% of its run phase, every rate (min)",
            "~100",
            100.0 * sim_isa_min,
            "%",
            !pa.is_empty() && pa_min >= 0.99,
        )
        .with_live(100.0 * pa_min),
    );
    if let Some(&top) = rates.last() {
        if let (Some(v), Some(p)) = (find(Mode::Softirq, top), find(Mode::ProcessAware, top)) {
            let sim_gap = match (sim_point(sim::Mode::Isa, top), sim_point(sim::Mode::Vanilla, top)) {
                (Some(i), Some(v)) => 100.0 * (i.cpu_share_of_active - v.cpu_share_of_active),
                _ => f64::NAN,
            };
            rows.push(
                Row::check(
                    "Fig. 7a vanilla (softirq) loses more of the run phase than process-aware at the top rate (points, > 1)",
                    "yes",
                    sim_gap,
                    "points",
                    100.0 * (p.hog_share - v.hog_share) > 1.0,
                )
                .with_live(100.0 * (p.hog_share - v.hog_share)),
            );
        }
    }
    let worst = rates
        .iter()
        .filter_map(|&r| Some((find(Mode::ProcessAware, r)?.reception_ratio, find(Mode::Softirq, r)?.reception_ratio)))
        .map(|(p, v)| if v > 0.0 { (p - v).abs() / v } else { f64::INFINITY })
        .fold(0.0, f64::max);
    rows.extend(fig6_relations(d, &rates));
    rows.extend(bursty_relations(d));
    rows.push(
        Row::check(
            "Fig. 7c UDP reception, process-aware within 10% of vanilla (softirq), every rate (largest difference)",
            "close",
            f64::NAN,
            "%",
            !pa.is_empty() && worst <= 0.10,
        )
        .with_live(100.0 * worst),
    );
    rows
}

/// Fig. 6's rows: the CPU-bound thread's accounting error under softirqs
/// per rate, the kernel's (/proc) beside the simulated vanilla and the
/// compensation algorithm's beside the simulated IA, both against the
/// BPF-measured truth.
fn fig6_relations(d: &Details, rates: &[u64]) -> Vec<Row> {
    let sim_error = |m: sim::Mode, rate: u64| {
        d.simulated
            .as_ref()
            .and_then(|s| s.accounting.iter().find(|p| p.mode == m && p.rate_pps as u64 == rate).map(|p| p.error))
            .unwrap_or(f64::NAN)
    };
    let mut rows = Vec::new();
    let mut worst: Option<f64> = None;
    let mut sim_worst = 0.0f64;
    for &rate in rates {
        let Some(a) = d.points.iter().find(|p| p.mode == Mode::Softirq && p.rate_pps == rate).and_then(|p| p.accounting.as_ref()) else {
            continue;
        };
        let pct = |e: Option<f64>| 100.0 * e.unwrap_or(f64::NAN);
        rows.push(
            Row::info(
                format!("Fig. 6b accounting error of the CPU-bound process, kernel (/proc), softirq, {rate} pkt/s"),
                "rises to ~60%",
                100.0 * sim_error(sim::Mode::Vanilla, rate),
                "%",
            )
            .with_live(pct(a.kernel_error)),
        );
        rows.push(
            Row::info(
                format!("Fig. 6b accounting error of the CPU-bound process, compensation, softirq, {rate} pkt/s"),
                "< 20, mostly < 5",
                100.0 * sim_error(sim::Mode::Ia, rate),
                "%",
            )
            .with_live(pct(a.compensation_error)),
        );
        sim_worst = sim_worst.max(sim_error(sim::Mode::Ia, rate).abs());
        if let Some(e) = a.compensation_error {
            worst = Some(worst.map_or(e.abs(), |w: f64| w.max(e.abs())));
        }
    }
    if !rows.is_empty() {
        rows.push(
            Row::check(
                "Fig. 6b compensation |error| below 20% at every rate, softirq (max)",
                "< 20",
                100.0 * sim_worst,
                "% (max)",
                worst.is_some_and(|w| w < 0.2),
            )
            .with_live(100.0 * worst.unwrap_or(f64::NAN)),
        );
    }
    rows
}

/// Fig. 8's rows: misses and reception per gap, vanilla (softirq) and
/// process-aware beside the simulated vanilla and ISA (matched by mean gap).
fn bursty_relations(d: &Details) -> Vec<Row> {
    let find = |m: Mode, gap: u64| d.bursty.iter().find(|p| p.mode == m && p.gap_ms == gap);
    let sim = |m: sim::Mode, rate: f64| {
        d.simulated.as_ref().and_then(|s| {
            s.bursty.iter().filter(|p| p.mode == m).min_by(|a, b| (a.rate_pps - rate).abs().total_cmp(&(b.rate_pps - rate).abs())).cloned()
        })
    };
    let mut gaps: Vec<u64> = d.bursty.iter().map(|p| p.gap_ms).collect();
    gaps.sort_unstable_by(|a, b| b.cmp(a));
    gaps.dedup();
    let mut rows = Vec::new();
    for &gap in &gaps {
        for (mode, sim_mode) in [(Mode::Softirq, sim::Mode::Vanilla), (Mode::ProcessAware, sim::Mode::Isa)] {
            let Some(p) = find(mode, gap) else { continue };
            let s = sim(sim_mode, p.rate_pps);
            rows.push(
                Row::info(
                    format!("Fig. 8a deadline miss rate, {mode}, bursts every {gap} ms ({:.0} pkt/s)", p.rate_pps),
                    if mode == Mode::ProcessAware { "0" } else { "rises" },
                    s.as_ref().map_or(f64::NAN, |s| 100.0 * s.miss_rate),
                    "%",
                )
                .with_live(100.0 * p.miss_rate),
            );
            rows.push(
                Row::info(
                    format!("Fig. 8c UDP reception, {mode}, bursts every {gap} ms"),
                    if mode == Mode::ProcessAware { "level" } else { "falls" },
                    s.as_ref().map_or(f64::NAN, |s| 100.0 * s.reception_ratio),
                    "% of the schedule's",
                )
                .with_live(100.0 * p.reception_ratio),
            );
        }
    }
    let pa: Vec<&BurstyPoint> = gaps.iter().filter_map(|&g| find(Mode::ProcessAware, g)).collect();
    let van: Vec<&BurstyPoint> = gaps.iter().filter_map(|&g| find(Mode::Softirq, g)).collect();
    if pa.is_empty() || van.is_empty() {
        return rows;
    }
    let pa_misses: u64 = pa.iter().map(|p| p.misses).sum();
    let sim_isa: f64 =
        d.simulated.as_ref().map_or(f64::NAN, |s| s.bursty.iter().filter(|p| p.mode == sim::Mode::Isa).map(|p| p.misses as f64).sum());
    rows.push(
        Row::check("Fig. 8a process-aware: no deadline miss at any rate", "0", sim_isa, "misses", pa_misses == 0)
            .with_live(pa_misses as f64),
    );
    let (first, last) = (van.first().map_or(0.0, |p| p.miss_rate), van.last().map_or(0.0, |p| p.miss_rate));
    let rising = van.windows(2).all(|w| w[1].miss_rate >= w[0].miss_rate) && last > first;
    rows.push(
        Row::check("Fig. 8a vanilla (softirq): miss rate rises with the rate (top rate)", "rises", f64::NAN, "%", rising)
            .with_live(100.0 * last),
    );
    rows
}

/// The simulated reproduction for its column, then every mode at every
/// rate live.
pub fn reproduce(
    config: &Config,
    stop: &AtomicBool,
    mut on_point: impl FnMut(&Point),
    mut on_bursty: impl FnMut(&BurstyPoint),
) -> Result<Report<Details>> {
    let (focus, others) = rt::measured_and_others(config.cpu, "the sender needs a CPU other than the measured one")?;
    // Before anything else: a kernel that cannot turn the fair server off
    // (lockdown, or none before 6.12) ends the run here, exit 3.
    let knobs = match config.fair_server_off {
        true => Some(irqlab_host::journal::sched_knobs::apply(&irqlab_host::journal::sched_knobs::Change::FairServer {
            cpus: Some(vec![focus]),
            runtime_ns: 0,
            period_ns: None,
        })?),
        false => None,
    };
    let sched_knobs = knobs.as_ref().map_or_else(Vec::new, |k| k.describe());
    check_prerequisites()?;
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let simulated = sim::reproduce(&sim::Options { quick: config.quick, seed: config.seed, threads }, stop).map_err(Error::Failed)?;
    let (rates, run_ns, sleep_ns, scale): (&[u64], u64, u64, &str) = if config.quick {
        (&[10_000, 30_000, 60_000], 2_000_000_000, 200_000_000, "1/50 of the paper's 100 s run / 10 s sleep")
    } else {
        (&[5_000, 10_000, 20_000, 40_000, 60_000], 10_000_000_000, 1_000_000_000, "1/10 of the paper's 100 s run / 10 s sleep")
    };
    // The paper's t_opt baseline: the work loop's speed on the CPU at the
    // CPU-bound tasks' priority with no traffic.
    let calibration = player::calibrate_sustained(focus, HOG_PRIORITY, 500_000_000)?;
    let bed = Testbed::up()?;
    let place = Place { bed: &bed, focus, others: others.clone(), calibration };
    let mut points = Vec::new();
    'sweep: for &rate in rates {
        for mode in Mode::ALL {
            if stop.load(Ordering::SeqCst) {
                break 'sweep;
            }
            let p = run_point(mode, rate, &place, run_ns, sleep_ns, stop)?;
            on_point(&p);
            points.push(p);
        }
    }
    let calibration_after = match stop.load(Ordering::SeqCst) {
        true => None,
        false => Some(player::calibrate_sustained(focus, HOG_PRIORITY, 500_000_000)?),
    };
    // Fig. 8: the simulated reproduction's mean gaps between bursts.
    let (gaps, periods): (&[u64], u64) =
        if config.quick { (&[2000, 800, 400, 250], 10) } else { (&[2500, 1250, 833, 625, 416, 250, 125], 30) };
    let mut bursty = Vec::new();
    'bursts: for &gap in gaps {
        for mode in [Mode::Softirq, Mode::ProcessAware] {
            if stop.load(Ordering::SeqCst) {
                break 'bursts;
            }
            let p = run_bursty(mode, gap, periods, &place, config.seed, stop)?;
            on_bursty(&p);
            bursty.push(p);
        }
    }
    drop(place);
    drop(bed);
    drop(knobs);
    let complete = simulated.complete
        && points.len() == rates.len() * Mode::ALL.len()
        && points.iter().all(|p| p.complete)
        && bursty.len() == gaps.len() * 2
        && bursty.iter().all(|p| p.complete);
    let details = Details {
        cpu: focus,
        sender_cpu: others.first().copied(),
        run_s: run_ns as f64 / 1e9,
        calibration,
        calibration_after,
        sleep_s: sleep_ns as f64 / 1e9,
        scale: scale.into(),
        kernel_note: kernel_note(&points, &bursty, config.fair_server_off),
        sched_knobs,
        points,
        bursty,
        bursty_periods: periods,
        simulated: Some(simulated.details),
    };
    let rows = relations(&details);
    Ok(Report::new("process-aware", config.quick, complete, config.seed, rows, details))
}
