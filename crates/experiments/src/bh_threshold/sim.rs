//! The BH-threshold paper's experiments (`docs/papers.md` §1; the paper's
//! §3, Figs. 4-5, Table 2) in simulation: mplayer at 25 fps on a 2 GHz P4
//! under Linux 2.4.20, with no network load, with a ttcp UDP flood and
//! vanilla bottom halves, and with the flood under the Bottom Half
//! Scheduler. The three scenarios are the files in `scenarios/bh-threshold/`
//! (embedded here so the command runs from anywhere); every number in them
//! says where it comes from. Nothing below feeds a paper figure into a run:
//! the runs produce the simulated column, the paper column is only printed
//! beside it and used in the relations the issue asks for.

use crate::report::{Report, Row};
use irqlab_analysis::Nanos;
use irqlab_sim::results::SimResult;
use irqlab_sim::{run_scenario, Scenario};
use serde::Serialize;
use std::sync::atomic::AtomicBool;

pub const NO_LOAD: (&str, &str) = ("scenarios/bh-threshold/no-load.toml", include_str!("../../../../scenarios/bh-threshold/no-load.toml"));
pub const FLOOD_VANILLA: (&str, &str) =
    ("scenarios/bh-threshold/flood-vanilla.toml", include_str!("../../../../scenarios/bh-threshold/flood-vanilla.toml"));
pub const FLOOD_SCHEDULER: (&str, &str) =
    ("scenarios/bh-threshold/flood-bh-scheduler.toml", include_str!("../../../../scenarios/bh-threshold/flood-bh-scheduler.toml"));

/// Start-up phase left out of the Fig. 5 spread (the paper: "highly
/// variable in the starting phase until approximately 300 msec").
pub const STARTUP_NS: Nanos = 300_000_000;

pub struct Options {
    pub quick: bool,
    pub seed: u64,
}

/// What one of the three runs gave.
#[derive(Debug, Clone, Serialize)]
pub struct Run {
    pub scenario: String,
    pub complete: bool,
    pub simulated_ns: Nanos,
    pub frames: u64,
    pub inter_frame_mean_ms: f64,
    pub inter_frame_max_ms: f64,
    /// Every inter-frame delay, ms (Fig. 4).
    pub inter_frame_ms: Vec<f64>,
    /// Bottom-half time in each 1 ms, us (Fig. 5).
    pub bh_us_per_ms: Vec<f64>,
    pub bh_mean_us: f64,
    /// p95 − p5 of the bottom-half time per ms after the start-up phase.
    pub bh_spread_us: f64,
    pub bh_p5_us: f64,
    pub bh_p95_us: f64,
    /// UDP frame bytes per second the receive bottom halves carried to the
    /// socket layer (queued, or dropped there at a full buffer), MB/s.
    pub throughput_mb_s: f64,
    /// Of those, the frame bytes per second queued to ttcp's socket, MB/s.
    pub received_mb_s: f64,
    /// mplayer's time on the CPU per frame, interrupt time stolen from it
    /// included (decode wall time less run-queue waits), ms.
    pub decode_ms_per_frame: f64,
    /// mplayer's system time per frame, ms (the scenario's calibrated
    /// kernel cost, and whatever the kernel charged it besides).
    pub kernel_ms_per_frame: f64,
    pub user_pct: f64,
    pub system_pct: f64,
    pub policy: Option<serde_json::Value>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Details {
    pub no_load: Run,
    pub vanilla: Run,
    pub scheduler: Run,
}

/// The `q` quantile of sorted values (nearest rank), 0 when empty.
pub(super) fn percentile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() - 1) as f64 * q).round() as usize;
    sorted[i]
}

pub(super) fn mean(v: &[f64]) -> f64 {
    if v.is_empty() {
        0.0
    } else {
        v.iter().sum::<f64>() / v.len() as f64
    }
}

/// Runs one embedded scenario and extracts the paper's measures.
pub fn run_one(file: &str, text: &str, opts: &Options, stop: &AtomicBool) -> Result<Run, String> {
    let sc = Scenario::parse(file, text).map_err(|e| e.to_string())?;
    // Quick mode: 6 s of the 42 s (about 150 frames at 40 ms).
    let duration = opts.quick.then_some(6_000_000_000);
    let p = sc.run_params(Some(opts.seed), duration).map_err(|e| e.to_string())?;
    let out = run_scenario(&sc, p, false, stop, |_| {}).map_err(|e| e.to_string())?;
    Ok(extract(&out.result))
}

fn extract(r: &SimResult) -> Run {
    let player = r.tasks.iter().find(|t| t.name == "mplayer");
    let extra = player.and_then(|t| t.extra.clone()).unwrap_or_default();
    let inter_frame_ms: Vec<f64> = extra["inter_frame_delays_ns"]
        .as_array()
        .map(|a| a.iter().filter_map(|v| v.as_u64()).map(|ns| ns as f64 / 1e6).collect())
        .unwrap_or_default();
    let frames = extra["frames_displayed"].as_u64().unwrap_or(0);
    let bh_us_per_ms: Vec<f64> = r.bh_time.as_ref().map(|s| s.values_ns.iter().map(|&ns| ns as f64 / 1e3).collect()).unwrap_or_default();
    let interval = r.bh_time.as_ref().map_or(1_000_000, |s| s.interval_ns.max(1));
    let skip = (STARTUP_NS / interval) as usize;
    // The last bin may be partial: leave it out.
    let settled: Vec<f64> = bh_us_per_ms.iter().skip(skip).take(bh_us_per_ms.len().saturating_sub(skip + 1)).copied().collect();
    let mut sorted = settled.clone();
    sorted.sort_by(|a, b| a.total_cmp(b));
    let (p5, p95) = (percentile(&sorted, 0.05), percentile(&sorted, 0.95));
    let secs = r.measured_ns.max(1) as f64 / 1e9;
    // Datagrams the receive path handled (queued on the socket, or dropped
    // there when ttcp's buffer was full): what the bottom halves carried.
    // The paper's 10.0 MB/s is the line rate of these frames, so it is
    // compared with what the bottom halves carried; what reached ttcp is
    // shown beside it.
    let queued: u64 = r.nics.iter().map(|n| n.stats.packets_received).sum();
    let handled: u64 = queued + r.nics.iter().map(|n| n.stats.dropped_socket_full).sum::<u64>();
    let frame_bytes: u64 = 92; // the scenario's frame size (50-byte UDP payload)
    let total = r.cpu.total().max(1) as f64;
    let user: Nanos = r.tasks.iter().map(|t| t.user_ns).sum();
    let (decode_ms_per_frame, kernel_ms_per_frame) = match player {
        Some(t) if frames > 0 => {
            ((t.time.run_ns + t.time.stolen_ns) as f64 / 1e6 / frames as f64, t.system_ns as f64 / 1e6 / frames as f64)
        }
        _ => (0.0, 0.0),
    };
    Run {
        scenario: r.scenario.clone(),
        complete: r.complete,
        simulated_ns: r.measured_ns,
        frames,
        inter_frame_mean_ms: mean(&inter_frame_ms),
        inter_frame_max_ms: inter_frame_ms.iter().copied().fold(0.0, f64::max),
        inter_frame_ms,
        bh_mean_us: mean(&settled),
        bh_spread_us: p95 - p5,
        bh_p5_us: p5,
        bh_p95_us: p95,
        bh_us_per_ms,
        throughput_mb_s: (handled * frame_bytes) as f64 / secs / 1e6,
        received_mb_s: (queued * frame_bytes) as f64 / secs / 1e6,
        decode_ms_per_frame,
        kernel_ms_per_frame,
        user_pct: 100.0 * user as f64 / total,
        system_pct: 100.0 * (total - user as f64 - r.cpu.time.idle_ns as f64) / total,
        policy: r.bottom_half_policy.clone(),
    }
}

fn rel(a: f64, b: f64) -> f64 {
    if b == 0.0 {
        f64::INFINITY
    } else {
        (a - b).abs() / b.abs()
    }
}

/// Jobs the Pending Queue Controller deferred in a run (0 without the policy).
fn deferrals(r: &Run) -> u64 {
    r.policy.as_ref().and_then(|p| p["deferrals"].as_u64()).unwrap_or(0)
}

/// A relation saying the BH scheduler costs nothing ("within x% of ..."):
/// checked only when the controller deferred at least one job. Otherwise
/// the scheduler run is the vanilla run and the relation would hold by
/// construction, so it is shown as not tested.
fn unharmed(acted: bool, metric: &str, paper: &str, simulated: f64, unit: &str, holds: bool) -> Row {
    if acted {
        Row::check(metric, paper, simulated, unit, holds)
    } else {
        Row::info(format!("{metric} [not tested: the controller deferred no job]"), paper, simulated, unit)
    }
}

/// The rows of the issue, paper beside simulation.
pub fn relations(d: &Details) -> Vec<Row> {
    let (n, v, s) = (&d.no_load, &d.vanilla, &d.scheduler);
    let acted = deferrals(s) > 0;
    let mut rows = vec![
        // The player sleeps until each frame is due, so with nothing else
        // running this echoes the scenario's 40 ms period: shown, not checked.
        Row::info("mean inter-frame delay, no load (Fig. 4a)", "~40", n.inter_frame_mean_ms, "ms"),
        Row::check(
            "mean inter-frame delay, flood, no BH scheduler (Fig. 4b): >= 2x no load",
            "96.2",
            v.inter_frame_mean_ms,
            "ms",
            v.inter_frame_mean_ms >= 2.0 * n.inter_frame_mean_ms,
        ),
        unharmed(
            acted,
            "mean inter-frame delay, flood, BH scheduler (Fig. 4c): within 15% of no load",
            "43.2",
            s.inter_frame_mean_ms,
            "ms",
            rel(s.inter_frame_mean_ms, n.inter_frame_mean_ms) <= 0.15,
        ),
        Row::info("max inter-frame delay, flood, no BH scheduler", "~160", v.inter_frame_max_ms, "ms"),
        Row::check(
            "max inter-frame delay, flood, BH scheduler: reduced",
            "~60",
            s.inter_frame_max_ms,
            "ms",
            s.inter_frame_max_ms < v.inter_frame_max_ms,
        ),
        Row::info("mean BH time per ms, no BH scheduler (Table 2)", "454.5", v.bh_mean_us, "us"),
        unharmed(
            acted,
            "mean BH time per ms, BH scheduler: within 15% of without",
            "497.7",
            s.bh_mean_us,
            "us",
            rel(s.bh_mean_us, v.bh_mean_us) <= 0.15,
        ),
        Row::info("BH time per ms p95-p5, no BH scheduler (Fig. 5a)", "~650 (200-850)", v.bh_spread_us, "us"),
        Row::check(
            "BH time per ms p95-p5 after start-up, BH scheduler (Fig. 5b): >= 3x narrower",
            "~100 (450-550)",
            s.bh_spread_us,
            "us",
            v.bh_spread_us >= 3.0 * s.bh_spread_us,
        ),
        Row::info("network throughput through the bottom halves, no BH scheduler", "10.006", v.throughput_mb_s, "MB/s"),
        unharmed(
            acted,
            "network throughput through the bottom halves, BH scheduler: within 2% of without",
            "10.046",
            s.throughput_mb_s,
            "MB/s",
            rel(s.throughput_mb_s, v.throughput_mb_s) <= 0.02,
        ),
        Row::info("of which queued to ttcp's socket (the rest dropped there, buffer full), no BH scheduler", "-", v.received_mb_s, "MB/s"),
        Row::info("jobs the BH scheduler deferred", "-", deferrals(s) as f64, "jobs"),
        Row::info("decode time per frame on the CPU, no load", "12 s total", n.decode_ms_per_frame, "ms/frame"),
        Row::info(
            "mplayer's kernel time per frame, no load [CALIBRATED from Table 2's 1.3 % system domain, so not a check]",
            "0.52 (1.3 % of 40 ms)",
            n.kernel_ms_per_frame,
            "ms/frame",
        ),
        Row::info(
            "BH scheduler's mean threshold, anchored at the mean BH time (§2.3 \"within the average time\")",
            "-",
            s.policy.as_ref().and_then(|p| p["threshold_mean_ns"].as_f64()).unwrap_or(0.0) / 1e3,
            "us",
        ),
    ];
    let ratio = if s.decode_ms_per_frame > 0.0 { v.decode_ms_per_frame / s.decode_ms_per_frame } else { 0.0 };
    rows.push(Row::check(
        "decode time ratio without/with BH scheduler: > 1 (paper's direction)",
        "2.00 (29.03 s / 14.52 s)",
        ratio,
        "ratio",
        ratio > 1.0,
    ));
    rows.push(Row::info("CPU user %, no load (Table 2)", "10.9", n.user_pct, "%"));
    rows.push(Row::info("CPU user %, no BH scheduler", "7.5", v.user_pct, "%"));
    // Directions, with a point's margin so that a tie is not scored as one.
    rows.push(Row::check(
        "CPU user %, BH scheduler: above without by >= 1 point (direction only)",
        "24.8",
        s.user_pct,
        "%",
        s.user_pct >= v.user_pct + 1.0,
    ));
    rows.push(Row::info("CPU system %, no BH scheduler", "92.4", v.system_pct, "%"));
    rows.push(Row::check(
        "CPU system %, BH scheduler: below without by >= 1 point (direction only)",
        "75.1",
        s.system_pct,
        "%",
        s.system_pct <= v.system_pct - 1.0,
    ));
    rows
}

/// Runs the three experiments (in parallel) and compares.
pub fn reproduce(opts: &Options, stop: &AtomicBool) -> Result<Report<Details>, String> {
    let runs: Vec<Result<Run, String>> = std::thread::scope(|s| {
        let hs: Vec<_> =
            [NO_LOAD, FLOOD_VANILLA, FLOOD_SCHEDULER].into_iter().map(|(f, t)| s.spawn(move || run_one(f, t, opts, stop))).collect();
        hs.into_iter().map(|h| h.join().unwrap_or_else(|_| Err("a run panicked".into()))).collect()
    });
    let mut it = runs.into_iter();
    let mut next = || it.next().expect("three runs");
    let d = Details { no_load: next()?, vanilla: next()?, scheduler: next()? };
    let complete = d.no_load.complete && d.vanilla.complete && d.scheduler.complete;
    let rows = relations(&d);
    Ok(Report::new("bh-threshold", opts.quick, complete, opts.seed, rows, d))
}
