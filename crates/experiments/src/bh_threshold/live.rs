//! The BH-threshold paper's experiment (`docs/papers.md` §1; the paper's
//! §3, Figs. 4-5, Table 2) live on the testbed: a player at 25 fps and a
//! ttcp-like UDP receiver share one CPU with the bottom halves of a UDP
//! flood of 50-byte datagrams from testbed host b, received by the root
//! side's threaded-NAPI kthread pinned to that CPU.
//!
//! Three setups, each a full play of the same frames (same seed):
//! - **no flood**: the player and the (idle) receiver alone;
//! - **flood, kernel default**: the NAPI kthread at the scheduling the kernel
//!   gave it (SCHED_OTHER, nice 0), watched by `control bh-budget --enforce
//!   observe` (the same monitor as below; nothing is enforced);
//! - **flood, bh-budget**: `control bh-budget` with the paper's K = 0.25,
//!   W = 100, 1 ms periods (SCHED_FIFO until the threshold, SCHED_IDLE after).
//!
//! What the paper ran on one CPU (a 2 GHz P4, uniprocessor) runs here on the
//! measured CPU; only the sender runs elsewhere, so its own cost is not
//! measured as the receiver's bottom halves. The player's decode work per
//! frame is the simulated scenario's (uniform 3.5-5.3 ms, from the paper's
//! 12 s of CPU for the clip, Table 2) as calibrated CPU work, not sleeps.
//! The flood is as fast as one sender goes on this machine (the paper's was
//! the 100 Mb/s line rate, ~108k datagrams/s); the rate reached is reported.
//! "BH time" is the NAPI kthread's run time in each 1 ms: with threaded
//! NAPI it does the receive path's work up to the socket.

use super::sim::{self, mean, percentile};
use crate::report::{Report, Row};
use irqlab_control::bh_budget::{self, Enforce, PeriodRow};
use irqlab_host::error::{Error, Result};
use irqlab_host::machine::{cpu_time_ns, CpuTime};
use irqlab_host::rt;
use irqlab_host::testbed::{self, Side, Testbed};
use irqlab_measure::player::{self, Calibration};
use irqlab_measure::traffic::{self, Kind, Plan, Schedule};
use serde::Serialize;
use std::net::SocketAddrV4;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

/// The testbed device whose NAPI kthread does the receive work.
pub const DEVICE: &str = "irqlab-b";
/// The receiver's port.
const PORT: u16 = 5001; // ttcp's default port
/// UDP payload (the paper: 50-byte datagrams) and the Ethernet frame it
/// makes (14 + 20 + 8 + 50), the unit of the paper's MB/s.
pub const PAYLOAD: usize = 50;
pub const FRAME_BYTES: u64 = 92;
/// Asked of the sender: far more than it manages, so it goes as fast as it can.
const FLOOD_INTERVAL_NS: u64 = 1_000;
/// The flood runs this long before the controller starts.
const RAMP: Duration = Duration::from_millis(300);
/// Frames per setup: the simulated full run's 1000 (40 s), 100 quick (4 s).
const FRAMES_FULL: u64 = 1000;
const FRAMES_QUICK: u64 = 100;

#[derive(Debug, Clone)]
pub struct Config {
    pub quick: bool,
    /// The CPU of the experiment (default: the last online one).
    pub cpu: Option<usize>,
    pub seed: u64,
}

/// The three setups.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Setup {
    NoFlood,
    KernelDefault,
    BhBudget,
}

impl Setup {
    pub const ALL: [Setup; 3] = [Setup::NoFlood, Setup::KernelDefault, Setup::BhBudget];

    pub fn name(self) -> &'static str {
        match self {
            Setup::NoFlood => "no flood",
            Setup::KernelDefault => "flood, kernel default",
            Setup::BhBudget => "flood, bh-budget",
        }
    }

    fn flood(self) -> bool {
        self != Setup::NoFlood
    }

    fn enforce(self) -> Enforce {
        match self {
            Setup::BhBudget => Enforce::Fifo,
            Setup::NoFlood | Setup::KernelDefault => Enforce::Observe,
        }
    }
}

by_name!(Setup);

/// What one setup gave, over the player's frames.
#[derive(Debug, Clone, Serialize)]
pub struct SetupRun {
    pub setup: Setup,
    pub complete: bool,
    pub frames: u64,
    pub late_frames: u64,
    pub inter_frame_mean_ms: f64,
    pub inter_frame_max_ms: f64,
    /// Every inter-frame delay, ms (Fig. 4).
    pub inter_frame_ms: Vec<f64>,
    /// Per frame, means: the decode's wall time, and the player thread's
    /// CPU time as the kernel charged it (softirq time run in its context
    /// included).
    pub decode_wall_ms: f64,
    pub decode_cpu_ms: f64,
    /// The NAPI kthread's time in each 1 ms period while the player played, us (Fig. 5).
    pub bh_us_per_ms: Vec<f64>,
    pub bh_mean_us: f64,
    pub bh_min_us: f64,
    pub bh_max_us: f64,
    pub bh_p5_us: f64,
    pub bh_p95_us: f64,
    /// p95 − p5 (the band Fig. 5 shows).
    pub bh_spread_us: f64,
    /// Packets the NAPI polls processed per second.
    pub napi_packets_per_s: f64,
    /// Datagrams the receiver got per second, and as the paper's MB/s of
    /// 92-byte frames.
    pub received_per_s: f64,
    pub received_mb_s: f64,
    /// Datagrams the sender sent per second over its whole run.
    pub sent_per_s: f64,
    /// The CPU's time while the player played (/proc/stat): user + nice,
    /// system + irq + softirq (kthreads' time is system), idle + iowait.
    pub user_pct: f64,
    pub system_pct: f64,
    pub idle_pct: f64,
    /// Periods the controller throttled the kthread, and its reaction p99, us.
    pub throttled_periods: u64,
    pub reaction_p99_us: Option<f64>,
    pub threshold_mean_us: f64,
    /// The 1 ms periods the controller closed a period or more late (vCPU stalls).
    pub late_periods: u64,
    /// The controller thread's CPU time per second (it runs on another CPU).
    pub controller_us_per_s: f64,
}

/// The live half's details.
#[derive(Debug, Clone, Serialize)]
pub struct Details {
    pub cpu: usize,
    pub sender_cpu: Option<usize>,
    pub device: &'static str,
    pub calibration: Calibration,
    pub player: player::Config,
    pub payload_bytes: usize,
    pub runs: Vec<SetupRun>,
    /// What the default kernel did to the player, in a sentence from the numbers.
    pub default_kernel: String,
    /// The simulated runs the `simulated` column comes from.
    pub simulated: Option<sim::Details>,
}

/// What the experiment needs before it changes anything.
pub fn check_prerequisites() -> Result<()> {
    testbed::check_prerequisites()?;
    bh_budget::check_prerequisites()
}

/// The CPU's /proc/stat columns at one moment: (user, system, idle, total), ns.
fn cpu_times(cpu: usize) -> [u64; 4] {
    use CpuTime::*;
    let user = cpu_time_ns(Some(cpu), &[User, Nice]);
    let system = cpu_time_ns(Some(cpu), &[System, Irq, Softirq]);
    let idle = cpu_time_ns(Some(cpu), &[Idle, Iowait]);
    let steal = cpu_time_ns(Some(cpu), &[Steal]);
    [user, system, idle, user + system + idle + steal]
}

/// What the player's start and end saw.
#[derive(Default)]
struct Span {
    cpu: [u64; 4],
    received: u64,
    at_ns: u64,
}

/// Runs one setup: receiver, flood (if any), the controller (observing or
/// enforcing), then the player; everything stopped and restored before it returns.
fn run_setup(
    setup: Setup,
    bed: &Testbed,
    config: &player::Config,
    cal: &Calibration,
    focus: usize,
    sender_cpu: Option<usize>,
    stop: &AtomicBool,
) -> Result<SetupRun> {
    let bind = SocketAddrV4::new(bed.root_addr(Side::B), PORT);
    let received = AtomicU64::new(0);
    let (sink_stop, flood_stop, ctl_stop) = (AtomicBool::new(false), std::sync::Arc::new(AtomicBool::new(false)), AtomicBool::new(false));
    let playing = AtomicBool::new(false);
    let controller_ready = AtomicBool::new(false);
    let series: Mutex<Vec<PeriodRow>> = Mutex::new(Vec::new());
    let (start, end) = (Mutex::new(Span::default()), Mutex::new(Span::default()));
    let ctl_config = bh_budget::Config { dev: DEVICE.into(), cpu: Some(focus), enforce: setup.enforce(), ..bh_budget::Config::default() };
    let (outcome, played, sent) = std::thread::scope(|s| -> Result<_> {
        let sink = s.spawn(|| {
            rt::pin_to_cpu(focus)?;
            traffic::udp_sink_counting(bind, false, &received, &sink_stop)
        });
        let flood = if setup.flood() {
            let plan = Plan {
                kind: Kind::Udp { port: PORT },
                target: bind.ip().to_owned(),
                schedule: Schedule::Periodic { interval_ns: FLOOD_INTERVAL_NS },
                size: PAYLOAD,
                duration_ns: u64::MAX / 2,
            };
            let flood_stop = flood_stop.clone();
            Some(bed.spawn_in(Side::B, move || {
                if let Some(cpu) = sender_cpu {
                    rt::pin_to_cpu(cpu)?;
                }
                traffic::send(&plan, &flood_stop)
            })?)
        } else {
            None
        };
        std::thread::sleep(RAMP);
        let controller = s.spawn(|| {
            bh_budget::run(&ctl_config, &ctl_stop, |row| {
                controller_ready.store(true, Ordering::SeqCst);
                if playing.load(Ordering::SeqCst) {
                    series.lock().unwrap_or_else(|p| p.into_inner()).push(*row);
                }
            })
        });
        // The player starts once the controller closed its first period.
        while !controller_ready.load(Ordering::SeqCst) && !controller.is_finished() && !stop.load(Ordering::SeqCst) {
            std::thread::sleep(Duration::from_millis(5));
        }
        let played = if controller_ready.load(Ordering::SeqCst) {
            Some(player::play(config, cal, stop, || {
                *start.lock().unwrap_or_else(|p| p.into_inner()) =
                    Span { cpu: cpu_times(focus), received: received.load(Ordering::SeqCst), at_ns: rt::monotonic_ns() };
                playing.store(true, Ordering::SeqCst);
            }))
        } else {
            None
        };
        playing.store(false, Ordering::SeqCst);
        *end.lock().unwrap_or_else(|p| p.into_inner()) =
            Span { cpu: cpu_times(focus), received: received.load(Ordering::SeqCst), at_ns: rt::monotonic_ns() };
        ctl_stop.store(true, Ordering::SeqCst);
        let outcome = controller.join().unwrap_or_else(|_| Err(Error::Failed("the bh-budget controller panicked".into())));
        flood_stop.store(true, Ordering::SeqCst);
        let sent = flood.map(|f| f.join().unwrap_or_else(|_| Err(Error::Failed("the flood sender panicked".into()))));
        sink_stop.store(true, Ordering::SeqCst);
        let sunk = sink.join().unwrap_or_else(|_| Err(Error::Failed("the receiver panicked".into())));
        // Errors in the order they matter: the controller's first (it says why the player never started).
        let outcome = outcome?;
        let played = match played {
            Some(p) => p?,
            None => player::Run::default(),
        };
        let sent = sent.transpose()?;
        sunk?;
        Ok((outcome, played, sent))
    })?;
    let series = series.into_inner().unwrap_or_else(|p| p.into_inner());
    let (start, end) = (start.into_inner().unwrap_or_default(), end.into_inner().unwrap_or_default());
    Ok(summarize(setup, &played, &series, &start, &end, sent, &outcome.report))
}

fn summarize(
    setup: Setup,
    played: &player::Run,
    series: &[PeriodRow],
    start: &Span,
    end: &Span,
    sent: Option<traffic::Counters>,
    report: &bh_budget::Report,
) -> SetupRun {
    let inter_frame_ms: Vec<f64> = played.inter_frame_ns.iter().map(|&ns| ns as f64 / 1e6).collect();
    let ms_mean = |v: &[u64]| mean(&v.iter().map(|&ns| ns as f64 / 1e6).collect::<Vec<_>>());
    let period_ns = report.config.period_ns.max(1) as f64;
    let bh_us_per_ms: Vec<f64> = series.iter().map(|r| r.c_ns as f64 / 1e3 * 1e6 / period_ns).collect();
    let mut sorted = bh_us_per_ms.clone();
    sorted.sort_by(|a, b| a.total_cmp(b));
    let (p5, p95) = (percentile(&sorted, 0.05), percentile(&sorted, 0.95));
    let span_s = (series.len() as f64 * period_ns / 1e9).max(1e-9);
    let play_s = (end.at_ns.saturating_sub(start.at_ns) as f64 / 1e9).max(1e-9);
    let received_per_s = end.received.saturating_sub(start.received) as f64 / play_s;
    let d: Vec<u64> = (0..4).map(|i| end.cpu[i].saturating_sub(start.cpu[i])).collect();
    let pct = |v: u64| if d[3] == 0 { 0.0 } else { 100.0 * v as f64 / d[3] as f64 };
    let f = &report.figures;
    SetupRun {
        setup,
        complete: played.complete && report.ended_by != irqlab_host::run_end::EndedBy::ThreadsExited,
        frames: played.frames,
        late_frames: played.late_frames,
        inter_frame_mean_ms: mean(&inter_frame_ms),
        inter_frame_max_ms: inter_frame_ms.iter().copied().fold(0.0, f64::max),
        inter_frame_ms,
        decode_wall_ms: ms_mean(&played.decode_wall_ns),
        decode_cpu_ms: ms_mean(&played.decode_cpu_ns),
        bh_mean_us: mean(&bh_us_per_ms),
        bh_min_us: sorted.first().copied().unwrap_or(0.0),
        bh_max_us: sorted.last().copied().unwrap_or(0.0),
        bh_p5_us: p5,
        bh_p95_us: p95,
        bh_spread_us: p95 - p5,
        bh_us_per_ms,
        napi_packets_per_s: series.iter().map(|r| r.p).sum::<u64>() as f64 / span_s,
        received_per_s,
        received_mb_s: received_per_s * FRAME_BYTES as f64 / 1e6,
        sent_per_s: sent.map_or(0.0, |c| c.rate_per_s()),
        user_pct: pct(d[0]),
        system_pct: pct(d[1]),
        idle_pct: pct(d[2]),
        throttled_periods: series.iter().filter(|r| r.throttled).count() as u64,
        reaction_p99_us: (setup == Setup::BhBudget).then(|| f.reaction.p99_ns.map(|ns| ns as f64 / 1e3)).flatten(),
        threshold_mean_us: mean(&series.iter().map(|r| r.t_ns / 1e3).collect::<Vec<_>>()),
        late_periods: report.late_periods,
        controller_us_per_s: report.overhead.controller.controller_us_per_s,
    }
}

/// What the default kernel did to the player, said from the numbers.
fn default_kernel_sentence(none: &SetupRun, default: &SetupRun) -> String {
    let ratio = if none.inter_frame_mean_ms > 0.0 { default.inter_frame_mean_ms / none.inter_frame_mean_ms } else { 0.0 };
    let what = if ratio >= 2.0 {
        format!("the paper's anomaly appears: the player's mean inter-frame delay is {ratio:.2}x the no-flood value")
    } else {
        format!(
            "the paper's anomaly (96 ms instead of 40 ms) does not appear: the mean inter-frame delay is {ratio:.2}x the no-flood value \
             ({:.1} against {:.1} ms), {} of {} frames late",
            default.inter_frame_mean_ms, none.inter_frame_mean_ms, default.late_frames, default.frames
        )
    };
    format!(
        "Under the flood with the kernel's default, {what}. The NAPI kthread took {:.0} us of each ms on average (p5-p95 {:.0}-{:.0} us) \
         while the player's {:.1} ms of decode work per frame took {:.1} ms of wall time. On this kernel the bottom halves of the flood run \
         in a SCHED_OTHER kthread that the fair scheduler shares with the player, which wakes with little used time and runs soon; in \
         Linux 2.4.20 they ran as softirqs before any process, at every interrupt exit, and the player got what they left.",
        default.bh_mean_us, default.bh_p5_us, default.bh_p95_us, none.decode_wall_ms, default.decode_wall_ms
    )
}

fn rel(a: f64, b: f64) -> f64 {
    if b == 0.0 {
        f64::INFINITY
    } else {
        (a - b).abs() / b.abs()
    }
}

/// The paper's table, paper beside simulation beside this machine; the
/// checks judge the live numbers (the relations).
pub fn relations(d: &Details) -> Vec<Row> {
    let run = |s: Setup| d.runs.iter().find(|r| r.setup == s);
    let (Some(n), Some(k), Some(b)) = (run(Setup::NoFlood), run(Setup::KernelDefault), run(Setup::BhBudget)) else {
        return Vec::new();
    };
    let sim = d.simulated.as_ref();
    let s = |f: fn(&sim::Details) -> f64| sim.map_or(f64::NAN, f);
    vec![
        Row::info("mean inter-frame delay, no flood (Fig. 4a)", "~40", s(|x| x.no_load.inter_frame_mean_ms), "ms")
            .with_live(n.inter_frame_mean_ms),
        Row::info("mean inter-frame delay, flood, kernel default (Fig. 4b)", "96.2", s(|x| x.vanilla.inter_frame_mean_ms), "ms")
            .with_live(k.inter_frame_mean_ms),
        Row::check(
            "mean inter-frame delay, flood, bh-budget (Fig. 4c): within 10% of no flood",
            "43.2",
            s(|x| x.scheduler.inter_frame_mean_ms),
            "ms",
            rel(b.inter_frame_mean_ms, n.inter_frame_mean_ms) <= 0.10,
        )
        .with_live(b.inter_frame_mean_ms),
        Row::info("max inter-frame delay, no flood", "-", s(|x| x.no_load.inter_frame_max_ms), "ms").with_live(n.inter_frame_max_ms),
        Row::info("max inter-frame delay, flood, kernel default", "~160", s(|x| x.vanilla.inter_frame_max_ms), "ms")
            .with_live(k.inter_frame_max_ms),
        Row::info("max inter-frame delay, flood, bh-budget", "~60", s(|x| x.scheduler.inter_frame_max_ms), "ms")
            .with_live(b.inter_frame_max_ms),
        Row::info("decode time per frame (player CPU time), no flood", "12 s total", s(|x| x.no_load.decode_ms_per_frame), "ms/frame")
            .with_live(n.decode_cpu_ms),
        Row::info("decode time per frame, flood, kernel default", "29.03 s total", s(|x| x.vanilla.decode_ms_per_frame), "ms/frame")
            .with_live(k.decode_cpu_ms),
        Row::info("decode time per frame, flood, bh-budget", "14.52 s total", s(|x| x.scheduler.decode_ms_per_frame), "ms/frame")
            .with_live(b.decode_cpu_ms),
        Row::info("mean BH time per ms, flood, kernel default (Table 2)", "454.5", s(|x| x.vanilla.bh_mean_us), "us")
            .with_live(k.bh_mean_us),
        Row::info("mean BH time per ms, flood, bh-budget", "497.7", s(|x| x.scheduler.bh_mean_us), "us").with_live(b.bh_mean_us),
        Row::info("BH time per ms p95-p5, flood, kernel default (Fig. 5a)", "~650 (200-850)", s(|x| x.vanilla.bh_spread_us), "us")
            .with_live(k.bh_spread_us),
        Row::check(
            "BH time per ms p95-p5, flood, bh-budget (Fig. 5b): narrower than the kernel default's",
            "~100 (450-550)",
            s(|x| x.scheduler.bh_spread_us),
            "us",
            b.bh_spread_us < k.bh_spread_us,
        )
        .with_live(b.bh_spread_us),
        Row::info("network throughput, flood, kernel default (received)", "10.006", s(|x| x.vanilla.received_mb_s), "MB/s")
            .with_live(k.received_mb_s),
        Row::check(
            "network throughput, flood, bh-budget (received): within 10% of the kernel default's",
            "10.046",
            s(|x| x.scheduler.received_mb_s),
            "MB/s",
            rel(b.received_mb_s, k.received_mb_s) <= 0.10,
        )
        .with_live(b.received_mb_s),
        Row::info(
            "packets through the bottom halves, flood, kernel default",
            "~108 per ms",
            s(|x| x.vanilla.throughput_mb_s * 1e6 / FRAME_BYTES as f64),
            "/s",
        )
        .with_live(k.napi_packets_per_s),
        Row::info(
            "packets through the bottom halves, flood, bh-budget",
            "-",
            s(|x| x.scheduler.throughput_mb_s * 1e6 / FRAME_BYTES as f64),
            "/s",
        )
        .with_live(b.napi_packets_per_s),
        Row::info("CPU user %, no flood (Table 2)", "10.9", s(|x| x.no_load.user_pct), "%").with_live(n.user_pct),
        Row::info("CPU user %, flood, kernel default", "7.5", s(|x| x.vanilla.user_pct), "%").with_live(k.user_pct),
        Row::info("CPU user %, flood, bh-budget", "24.8", s(|x| x.scheduler.user_pct), "%").with_live(b.user_pct),
        Row::info("CPU system %, flood, kernel default", "92.4", s(|x| x.vanilla.system_pct), "%").with_live(k.system_pct),
        Row::info("CPU system %, flood, bh-budget", "75.1", s(|x| x.scheduler.system_pct), "%").with_live(b.system_pct),
    ]
}

/// Runs the simulated reproduction (for its column), then the three setups
/// live, one after the other.
pub fn reproduce(config: &Config, stop: &AtomicBool, mut on_setup: impl FnMut(Setup)) -> Result<Report<Details>> {
    let focus = match config.cpu {
        Some(cpu) => {
            rt::require_online(cpu, "cpu")?;
            cpu
        }
        None => *rt::online_cpus()?.last().ok_or_else(|| Error::Failed("no online CPU".into()))?,
    };
    check_prerequisites()?;
    let simulated = sim::reproduce(&sim::Options { quick: config.quick, seed: config.seed }, stop).map_err(Error::Failed)?;
    let sim_complete = simulated.complete;
    let sender_cpu = rt::online_cpus()?.into_iter().find(|&c| c != focus);
    let calibration = player::calibrate(Some(focus), 50)?;
    let player_config = player::Config {
        period_ns: 40_000_000,
        decode_min_ns: 3_500_000,
        decode_max_ns: 5_300_000,
        frames: if config.quick { FRAMES_QUICK } else { FRAMES_FULL },
        cpu: Some(focus),
        seed: config.seed,
    };
    let bed = Testbed::up()?;
    let mut runs = Vec::new();
    for setup in Setup::ALL {
        if stop.load(Ordering::SeqCst) {
            break;
        }
        on_setup(setup);
        runs.push(run_setup(setup, &bed, &player_config, &calibration, focus, sender_cpu, stop)?);
    }
    drop(bed);
    let complete = sim_complete && runs.len() == Setup::ALL.len() && runs.iter().all(|r| r.complete) && !stop.load(Ordering::SeqCst);
    let default_kernel = match (runs.first(), runs.get(1)) {
        (Some(n), Some(k)) => default_kernel_sentence(n, k),
        _ => "not measured (the run was stopped)".into(),
    };
    let details = Details {
        cpu: focus,
        sender_cpu,
        device: DEVICE,
        calibration,
        player: player_config,
        payload_bytes: PAYLOAD,
        runs,
        default_kernel,
        simulated: Some(simulated.details),
    };
    let rows = relations(&details);
    Ok(Report::new("bh-threshold", config.quick, complete, config.seed, rows, details))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(setup: Setup, inter_frame_ms: f64, spread_us: f64, mb_s: f64) -> SetupRun {
        SetupRun {
            setup,
            complete: true,
            frames: 100,
            late_frames: 0,
            inter_frame_mean_ms: inter_frame_ms,
            inter_frame_max_ms: inter_frame_ms,
            inter_frame_ms: vec![inter_frame_ms; 99],
            decode_wall_ms: 4.4,
            decode_cpu_ms: 4.4,
            bh_us_per_ms: Vec::new(),
            bh_mean_us: 500.0,
            bh_min_us: 0.0,
            bh_max_us: 1000.0,
            bh_p5_us: 500.0 - spread_us / 2.0,
            bh_p95_us: 500.0 + spread_us / 2.0,
            bh_spread_us: spread_us,
            napi_packets_per_s: mb_s * 1e6 / FRAME_BYTES as f64,
            received_per_s: mb_s * 1e6 / FRAME_BYTES as f64,
            received_mb_s: mb_s,
            sent_per_s: 0.0,
            user_pct: 10.0,
            system_pct: 50.0,
            idle_pct: 40.0,
            throttled_periods: 0,
            reaction_p99_us: None,
            threshold_mean_us: 500.0,
            late_periods: 0,
            controller_us_per_s: 0.0,
        }
    }

    fn details(runs: Vec<SetupRun>) -> Details {
        Details {
            cpu: 1,
            sender_cpu: Some(0),
            device: DEVICE,
            calibration: Calibration { cpu: Some(1), iterations_per_us: 600.0, trials: 1 },
            player: player::Config { period_ns: 40_000_000, decode_min_ns: 0, decode_max_ns: 0, frames: 100, cpu: Some(1), seed: 1 },
            payload_bytes: PAYLOAD,
            runs,
            default_kernel: String::new(),
            simulated: None,
        }
    }

    fn checks(d: &Details) -> Vec<(String, Option<bool>)> {
        relations(d).into_iter().filter(|r| r.holds.is_some()).map(|r| (r.metric, r.holds)).collect()
    }

    #[test]
    fn the_checks_judge_the_live_numbers() {
        let good = details(vec![
            run(Setup::NoFlood, 40.0, 0.0, 0.0),
            run(Setup::KernelDefault, 40.0, 800.0, 16.0),
            run(Setup::BhBudget, 43.9, 150.0, 14.5),
        ]);
        let c = checks(&good);
        assert_eq!(c.len(), 3);
        assert!(c.iter().all(|(_, h)| *h == Some(true)), "{c:?}");
        // Every row shows the live number.
        assert!(relations(&good).iter().all(|r| r.live.is_some()));
        // 10% slower frames, a band as wide as the default's, 11% less throughput: each fails.
        let bad = details(vec![
            run(Setup::NoFlood, 40.0, 0.0, 0.0),
            run(Setup::KernelDefault, 40.0, 150.0, 16.0),
            run(Setup::BhBudget, 44.1, 150.0, 14.2),
        ]);
        assert!(checks(&bad).iter().all(|(_, h)| *h == Some(false)), "{:?}", checks(&bad));
        // A setup missing (stopped): no rows rather than rows about nothing.
        assert!(relations(&details(vec![run(Setup::NoFlood, 40.0, 0.0, 0.0)])).is_empty());
    }

    #[test]
    fn the_default_kernel_sentence_says_whether_the_anomaly_appears() {
        let none = run(Setup::NoFlood, 40.0, 0.0, 0.0);
        assert!(default_kernel_sentence(&none, &run(Setup::KernelDefault, 40.4, 800.0, 16.0))
            .contains("does not appear: the mean inter-frame delay is 1.01x"));
        assert!(default_kernel_sentence(&none, &run(Setup::KernelDefault, 96.0, 800.0, 16.0)).contains("the paper's anomaly appears"));
    }
}
