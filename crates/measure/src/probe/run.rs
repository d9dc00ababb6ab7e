//! One probe run with the shape of every live measurement,
//! `measure(&Config, &stop, on_tick) -> Result<InterferenceCurve>`: prepare
//! the thread (CPU, policy, locked memory, through [`irqlab_host::rt`]), spin,
//! then turn the gap log into the curve document.

use super::clock::{self, ClockKind, Monotonic, Ticks, Tsc};
use super::result::{histogram, InterferenceCurve, RtThrottling};
use super::sched::{self, Policy};
use super::sources;
use super::spin::{spin, GapLog, RawGap, SpinOutcome};
use super::window::{Gap, GapIndex};
use irqlab_analysis::curve::{CurvePoint, FloorPoint};
use irqlab_host::error::{Error, Result};
use irqlab_host::privilege::{require, Capability};
use irqlab_host::rt_limit::{LiftedRtLimit, RtBandwidth};
use std::sync::atomic::{AtomicBool, AtomicU32};
use std::time::Duration;

/// What to measure and how; [`Config::default`] has the defaults of
/// `irqlab measure interference`.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// The CPU to measure; `None`: the last online one (from sysfs, not
    /// this process's affinity: the probe thread pins itself there).
    pub cpu: Option<usize>,
    pub policy: Policy,
    /// SCHED_FIFO priority; `None`: just below the driver threads, else 90.
    pub priority: Option<i32>,
    pub duration_ns: u64,
    pub windows_ns: Vec<u64>,
    /// Clock jumps above this are preemptions.
    pub threshold_ns: u64,
    /// What to do with RT throttling (`kernel.sched_rt_runtime_us`).
    pub rt_limit: RtLimit,
    /// Use clock_gettime even where the TSC is usable.
    pub force_clock_gettime: bool,
    /// Capacity of the preallocated gap log, at most [`MAX_GAPS`].
    pub max_gaps: usize,
    /// Run the BPF monitor of the probed CPU and attribute the gaps to
    /// their sources ([`super::sources`]). Off in [`Config::default`] so
    /// that callers running many short probes do not load BPF each time;
    /// `irqlab measure interference` turns it on (`--no-sources` off).
    pub sources: bool,
}

/// RT throttling lets a spinning SCHED_FIFO probe run only
/// `sched_rt_runtime_us` of each period and shows up as up to 50 ms of
/// "interference" per second. By default the probe lifts it for the run
/// where it may (restored on every exit path); where it may not, the run is
/// marked and the windows throttling alone could explain are listed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RtLimit {
    /// Lift it when this process may write the sysctl, else keep and mark.
    LiftIfAllowed,
    /// Lift it or fail (exit 3 naming what is missing).
    Lift,
    /// Leave it as it is; the curve marks what it may have caused.
    Keep,
}

/// The largest gap log a run may ask for: 16 GB at 16 bytes a gap, and
/// far more gaps than a run of hours at the default 1 us threshold logs
/// (a busy machine logs some 10^4 a second). The memory actually
/// available is checked too, before the run touches the machine.
pub const MAX_GAPS: usize = 1_000_000_000;

/// The gap log's size in bytes.
pub const BYTES_PER_GAP: usize = std::mem::size_of::<RawGap>();

impl Default for Config {
    /// The last online CPU, SCHED_FIFO at the default priority, 10 s, 1 us
    /// threshold, windows 10 us .. 1 s at 8 per decade, RT throttling
    /// lifted where allowed, the TSC where usable, 4 M gaps.
    fn default() -> Config {
        Config {
            cpu: None,
            policy: Policy::Fifo,
            priority: None,
            duration_ns: 10_000_000_000,
            windows_ns: super::window::log_windows(10_000, 1_000_000_000, 8),
            threshold_ns: 1_000,
            rt_limit: RtLimit::LiftIfAllowed,
            force_clock_gettime: false,
            max_gaps: 4_000_000,
            sources: false,
        }
    }
}

impl Config {
    /// The CPU the probe measures: [`Config::cpu`], checked to be online
    /// (exit 2 naming `cpu`), or the last online CPU.
    pub fn resolve_cpu(&self) -> Result<usize> {
        match self.cpu {
            Some(cpu) => irqlab_host::rt::require_online(cpu, "cpu").map(|()| cpu),
            None => Ok(*irqlab_host::rt::online_cpus()?.last().expect("the kernel lists at least one online CPU")),
        }
    }
}

/// A look at a run in progress (for a once-a-second display).
#[derive(Debug, Clone, PartialEq)]
pub struct Snapshot {
    pub elapsed_ns: u64,
    pub gaps: usize,
    pub max_gap_ns: u64,
    /// Max load so far at a few windows.
    pub loads: Vec<(u64, f64)>,
}

/// Default runtime of the fair-class deadline server per 1 s period
/// (kernel/sched/deadline.c, `fair_server_init`, Linux 6.12+).
const FAIR_SERVER_RUNTIME_NS: u64 = 50_000_000;

/// Windows shown in the live display.
const LIVE_WINDOWS: [u64; 4] = [100_000, 1_000_000, 10_000_000, 100_000_000];

/// Runs the probe; calls `on_tick` about once a second from the calling
/// thread while the probe spins on its CPU. Stops early when `stop` is set
/// and returns what was measured with `complete: false`.
pub fn measure(config: &Config, stop: &AtomicBool, on_tick: impl FnMut(&Snapshot)) -> Result<InterferenceCurve> {
    measure_with_gaps(config, stop, on_tick).map(|m| m.curve)
}

/// The curve document and the gaps it was computed from (for `--raw`).
#[derive(Debug, Clone, PartialEq)]
pub struct Measurement {
    pub curve: InterferenceCurve,
    pub gaps: Vec<Gap>,
}

impl Measurement {
    /// The gaps as CSV `start_ns,len_ns`.
    pub fn gaps_csv(&self) -> String {
        let mut s = String::with_capacity(24 * self.gaps.len() + 16);
        s.push_str("start_ns,len_ns\n");
        for g in &self.gaps {
            s.push_str(&format!("{},{}\n", g.start_ns, g.len_ns));
        }
        s
    }
}

/// The privileges the probe needs under `policy`, exit 3 naming the first
/// missing one (what `irqlab doctor` reports too).
pub fn check_prerequisites(policy: Policy) -> Result<()> {
    if policy == Policy::Fifo {
        require(&[Capability::SysNice], "run the probe at SCHED_FIFO")?;
    }
    require(&[Capability::IpcLock], "lock the probe's memory (mlockall)")
}

/// Refuses a gap log above [`MAX_GAPS`] or above the memory available
/// (`available` bytes, when known): the log is touched and locked in
/// memory, so too large a one is an OOM kill, which no restore survives.
/// A full log is copied once more into nanoseconds for the curve, hence
/// twice its size.
fn check_max_gaps(max_gaps: usize, available: Option<u64>) -> Result<()> {
    if !(1..=MAX_GAPS).contains(&max_gaps) {
        return Err(Error::Invalid(format!("max_gaps {max_gaps}: outside 1..={MAX_GAPS}")));
    }
    let needed = 2 * (max_gaps * BYTES_PER_GAP) as u64;
    match available {
        Some(free) if needed > free => Err(Error::Invalid(format!(
            "max_gaps {max_gaps}: needs {} MB (the gap log at {BYTES_PER_GAP} bytes a gap, and its copy for the curve), more than the {} MB this machine has available",
            needed >> 20,
            free >> 20
        ))),
        _ => Ok(()),
    }
}

/// MemAvailable from /proc/meminfo, in bytes.
fn mem_available() -> Option<u64> {
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok()?;
    let kb = meminfo.lines().find_map(|l| l.strip_prefix("MemAvailable:"))?.trim().strip_suffix("kB")?.trim().parse::<u64>().ok()?;
    Some(kb * 1024)
}

/// The windows whose maximum load RT throttling alone could produce: it
/// takes up to `throttled_ns` per period in one block, so a window of
/// length Δ can lose min(Δ, throttled) to it, a load of min(1, throttled/Δ).
fn throttling_could_explain(points: &[CurvePoint], throttled_ns: u64) -> Vec<u64> {
    points.iter().filter(|p| p.max_load <= (throttled_ns as f64 / p.window_ns as f64).min(1.0) + 1e-9).map(|p| p.window_ns).collect()
}

/// [`measure`], also returning the gaps.
pub fn measure_with_gaps(config: &Config, stop: &AtomicBool, on_tick: impl FnMut(&Snapshot)) -> Result<Measurement> {
    check_max_gaps(config.max_gaps, mem_available())?;
    let cpu = config.resolve_cpu()?;
    check_prerequisites(config.policy)?;
    // A run that was killed while it had the limit lifted could not
    // restore it: this run does, before it reads the setting. Without the
    // right to write the sysctl it cannot; `irqlab doctor` says so.
    let _ = irqlab_host::rt_limit::repair_abandoned();
    // Before the run: a lifted RT limit is the run's, not the machine's.
    let machine = irqlab_host::machine::MachineContext::read();
    if config.policy == Policy::Fifo {
        if let Some(p) = config.priority {
            if !(1..=99).contains(&p) {
                return Err(Error::Invalid(format!("priority {p}: outside SCHED_FIFO's 1..=99")));
            }
        }
    }
    let (priority, priority_reason) = match (config.policy, config.priority) {
        (Policy::Other, _) => (0, "SCHED_OTHER asked for (the probe competes with every fair task)".to_string()),
        (Policy::Fifo, Some(p)) => (p, "asked for".to_string()),
        (Policy::Fifo, None) => sched::default_priority(&sched::driver_threads()),
    };
    // Lifted whenever asked, even when it reads -1 now: that may be another
    // irqlab run's lift, which this run must join or that run's restore
    // would throttle this one. `before` is the setting from before any lift.
    // Allocated before anything changes on the machine: no allocation
    // failure can then come between a change and its restore.
    let log = GapLog::with_capacity(config.max_gaps)
        .map_err(|e| Error::Invalid(format!("max_gaps {}: cannot allocate the gap log ({e}); lower it", config.max_gaps)))?;
    let current = RtBandwidth::read()?;
    let (lifted, not_lifted_because) = match config.rt_limit {
        RtLimit::Lift => (Some(LiftedRtLimit::lift()?), None),
        RtLimit::Keep => (None, None),
        // Joined even when it reads -1 now (see above); only a limit that
        // could not be lifted leaves a reason.
        RtLimit::LiftIfAllowed if config.policy == Policy::Fifo => match LiftedRtLimit::lift() {
            Ok(l) => (Some(l), None),
            Err(e) => (None, Some(e.to_string())),
        },
        RtLimit::LiftIfAllowed => (None, None),
    };
    let before = match &lifted {
        Some(l) => RtBandwidth { runtime_us: l.previous_us(), ..current },
        None => current,
    };

    let (clock_kind, clock_note) = match (config.force_clock_gettime, clock::tsc_usable()) {
        (false, Ok(())) => (ClockKind::Tsc, "TSC (constant_tsc, nonstop_tsc), calibrated against CLOCK_MONOTONIC over the run".to_string()),
        (true, _) => (ClockKind::ClockGettime, "clock_gettime(CLOCK_MONOTONIC) asked for".to_string()),
        (false, Err(why)) => (ClockKind::ClockGettime, format!("clock_gettime(CLOCK_MONOTONIC): TSC unusable, {why}")),
    };

    // Attached before the probe starts, so its first gap has its sources;
    // a monitor that cannot run leaves the probe running and says why.
    let monitor = sources::Monitor::start_if(config.sources, cpu);
    irqlab_host::rt::lock_memory()?;
    let probe =
        Probe { cpu, policy: config.policy, priority, clock_kind, duration_ns: config.duration_ns, threshold_ns: config.threshold_ns };
    let probe_tid = AtomicU32::new(0);
    let spun = spin_on_cpu(&probe, &log, stop, &probe_tid, on_tick);
    irqlab_host::rt::unlock_memory();
    let collected = monitor.and_then(|m| m.finish().map_err(|e| format!("sources unavailable: {e}")));
    let any_lift = lifted.is_some();
    let was_lifted = any_lift && before.limits();
    drop(lifted);
    let (outcome, start_pair, end_pair) = spun?;

    let rate = match clock_kind {
        ClockKind::Tsc => clock::rate(start_pair, end_pair),
        ClockKind::ClockGettime => 1.0,
    };
    let duration_ns = ((outcome.last - outcome.first) as f64 / rate).round() as u64;
    let gaps = to_ns(log.published(), rate, duration_ns);
    let index = GapIndex::new(&gaps, duration_ns);
    // The run's origin (the loop's first read) on CLOCK_MONOTONIC, the
    // clock of the monitor's segments.
    let origin_mono_ns = (start_pair.1 as f64 + (outcome.first as f64 - start_pair.0 as f64) / rate).round().max(0.0) as u64;
    let tid = probe_tid.load(std::sync::atomic::Ordering::Relaxed);
    let points: Vec<CurvePoint> = index
        .max_loads(&config.windows_ns)
        .into_iter()
        .map(|(window_ns, max_load)| CurvePoint { window_ns, max_load: max_load.clamp(0.0, 1.0) })
        .collect();
    // The least load per window too: what a baseline measured this way
    // can justify subtracting (irqlab_analysis::fit::subtract_baseline_floor).
    let floor: Vec<FloorPoint> = index
        .min_loads(&config.windows_ns)
        .into_iter()
        .map(|(window_ns, min_load)| FloorPoint { window_ns, min_load: min_load.clamp(0.0, 1.0) })
        .collect();
    let windows_skipped_ns = config.windows_ns.iter().copied().filter(|&w| w > duration_ns).collect();
    let total_gap_ns = index.total_gap_ns();
    let throttled = before.throttled_ns_per_period();
    // Bandwidth control hands other classes blocks of up to the throttled
    // time (RT throttling) or the fair server's runtime (50 ms per second by
    // default on 6.12+, not adjustable through sysctl): gaps of at least half
    // that are marked as possibly not interference.
    let suspect_from = throttled.max(FAIR_SERVER_RUNTIME_NS) / 2;
    let suspect: Vec<&Gap> =
        if config.policy == Policy::Fifo { gaps.iter().filter(|g| g.len_ns >= suspect_from).collect() } else { Vec::new() };
    let limited = before.limits() && !any_lift && config.policy == Policy::Fifo;
    let note = if config.policy == Policy::Other {
        "SCHED_OTHER probe: RT bandwidth control does not apply".to_string()
    } else if !before.limits() {
        format!("RT throttling was off (sched_rt_runtime_us = -1); the fair-class deadline server (6.12+) may still give starved fair tasks up to 50 ms/s: {} gap(s) of 25 ms or more look like it", suspect.len())
    } else if any_lift {
        format!("RT throttling lifted for the run (sched_rt_runtime_us was {}, restored); the fair-class deadline server (6.12+) may still give starved fair tasks up to 50 ms/s: {} gap(s) of 25 ms or more look like it", before.runtime_us, suspect.len())
    } else {
        format!(
            "RT throttling active ({} of {} us{}): up to {} ms per period may be throttling, not interference; {} gap(s) look like it, and the windows in throttled_windows_ns could be throttling alone",
            before.runtime_us,
            before.period_us,
            not_lifted_because.as_deref().map(|why| format!("; not lifted: {why}")).unwrap_or_default(),
            throttled / 1_000_000,
            suspect.len()
        )
    };
    let throttled_windows_ns = if limited { throttling_could_explain(&points, throttled) } else { Vec::new() };
    let rounds = outcome.rounds.max(1);
    let windows: Vec<u64> = points.iter().map(|p| p.window_ns).collect();
    let mut sources = sources::assemble(collected, cpu, origin_mono_ns, (tid != 0).then_some(tid), &gaps, duration_ns, &windows);
    sources.name_stalld_boosts(&irqlab_host::daemons::stalld_running(), |tid| {
        irqlab_host::journal::sched::get(tid as i32).ok().map(|attr| attr.policy_number())
    });
    let gaps_over_100us = gaps.iter().filter(|g| g.len_ns > 100_000).count() as f64;
    let curve = InterferenceCurve {
        schema: InterferenceCurve::SCHEMA,
        points,
        floor,
        complete: !outcome.stopped && !outcome.overflow,
        cpu,
        policy: config.policy,
        priority,
        priority_reason,
        clock: clock_kind,
        clock_note,
        tsc_ticks_per_ns: (clock_kind == ClockKind::Tsc).then_some(rate),
        // The loop's own time: what is not gaps, per round.
        sampling_period_ns: duration_ns.saturating_sub(total_gap_ns) as f64 / rounds as f64,
        threshold_ns: config.threshold_ns,
        requested_duration_ns: config.duration_ns,
        duration_ns,
        gaps: gaps.len() as u64,
        total_gap_ns,
        max_gap_ns: gaps.iter().map(|g| g.len_ns).max().unwrap_or(0),
        mean_load: if duration_ns > 0 { total_gap_ns as f64 / duration_ns as f64 } else { 0.0 },
        gaps_over_100us_per_s: if duration_ns > 0 { gaps_over_100us * 1e9 / duration_ns as f64 } else { 0.0 },
        histogram: histogram(&gaps),
        windows_skipped_ns,
        rt_throttling: RtThrottling {
            before,
            lifted: was_lifted,
            limited,
            throttled_ns_per_period: if limited { throttled } else { 0 },
            throttled_windows_ns,
            suspect_gaps: suspect.len() as u64,
            suspect_gap_ns: suspect.iter().map(|g| g.len_ns).sum(),
            note,
        },
        log_overflow: outcome.overflow,
        machine,
        baseline: None,
        baseline_use: None,
        points_before_baseline: None,
        sources,
    };
    Ok(Measurement { curve, gaps })
}

type Spun = Result<(SpinOutcome, (u64, u64), (u64, u64))>;

/// What the probe thread needs to know.
struct Probe {
    cpu: usize,
    policy: Policy,
    priority: i32,
    clock_kind: ClockKind,
    duration_ns: u64,
    threshold_ns: u64,
}

/// Spins on a thread that pins itself to `probe.cpu` and takes its policy
/// (whatever this process's own affinity: root or the same user may set a
/// thread's affinity beyond it), while this thread calls `on_tick` about
/// once a second.
fn spin_on_cpu(probe: &Probe, log: &GapLog, stop: &AtomicBool, tid: &AtomicU32, on_tick: impl FnMut(&Snapshot)) -> Spun {
    // This thread and the window scans it spawns for the display stay off
    // the probed CPU while the probe spins: there they were starved by the
    // probe until the fair-class deadline server ran them, and the gap
    // sources showed this process itself in the 1 ms max-load window
    // (`irqlab/<tid> OTHER`, ~980 us). Best effort: under a cpuset of the
    // probed CPU alone there is nowhere else to go.
    let saved = irqlab_host::rt::affinity(0).ok();
    let _ = irqlab_host::rt::pin_off(probe.cpu);
    let spun = spin_pinned(probe, log, stop, tid, on_tick);
    if let Some(cpus) = saved {
        let _ = irqlab_host::rt::pin_to(&cpus);
    }
    spun
}

fn spin_pinned(probe: &Probe, log: &GapLog, stop: &AtomicBool, tid: &AtomicU32, mut on_tick: impl FnMut(&Snapshot)) -> Spun {
    std::thread::scope(|scope| {
        let handle = std::thread::Builder::new()
            .name("irqlab-probe".into())
            .spawn_scoped(scope, move || -> Spun {
                irqlab_host::rt::pin_to_cpu(probe.cpu)?;
                sched::set_policy(probe.policy, probe.priority)?;
                // The gap-source monitor drops this thread's own segments.
                // SAFETY: gettid has no preconditions.
                tid.store(unsafe { libc::gettid() } as u32, std::sync::atomic::Ordering::Relaxed);
                let out = match probe.clock_kind {
                    ClockKind::Tsc => spin_for(&Tsc, log, probe.threshold_ns, probe.duration_ns, stop),
                    ClockKind::ClockGettime => spin_for(&Monotonic, log, probe.threshold_ns, probe.duration_ns, stop),
                };
                // Leave the real-time class before the thread ends.
                let _ = sched::set_policy(Policy::Other, 0);
                Ok(out)
            })
            .map_err(|e| Error::io("spawning the probe thread", e))?;
        let mut rate_guess = None;
        while !handle.is_finished() {
            std::thread::sleep(Duration::from_millis(100));
            let (elapsed, _) = log.progress();
            let rate = *rate_guess.get_or_insert_with(|| estimate_rate(probe.clock_kind));
            if elapsed > 0 && elapsed_ns(elapsed, rate) / 1_000_000_000 > 0 && tick_due(elapsed_ns(elapsed, rate)) {
                on_tick(&snapshot(log.published(), elapsed_ns(elapsed, rate), rate));
            }
        }
        handle.join().map_err(|_| Error::Failed("the probe thread panicked".into()))?
    })
}

/// Calibrates briefly (to turn ns into ticks for the threshold and the
/// deadline), then spins; returns the outcome and the bracketing
/// (ticks, ns) pairs for the final calibration.
fn spin_for<C: Ticks>(
    clock: &C,
    log: &GapLog,
    threshold_ns: u64,
    duration_ns: u64,
    stop: &AtomicBool,
) -> (SpinOutcome, (u64, u64), (u64, u64)) {
    let a = clock::pair(clock);
    let until = a.1 + 20_000_000;
    while clock::monotonic_ns() < until {
        std::hint::spin_loop();
    }
    let b = clock::pair(clock);
    let rate = clock::rate(a, b);
    let threshold = (threshold_ns as f64 * rate) as u64;
    let start = clock::pair(clock);
    let end = start.0 + (duration_ns as f64 * rate) as u64;
    let outcome = spin(clock, log, threshold, end, stop);
    let finish = clock::pair(clock);
    // Calibrate over the spin itself: the pairs bracket it.
    (outcome, start, finish)
}

fn estimate_rate(kind: ClockKind) -> f64 {
    match kind {
        ClockKind::ClockGettime => 1.0,
        ClockKind::Tsc => {
            let a = clock::pair(&Tsc);
            std::thread::sleep(Duration::from_millis(20));
            clock::rate(a, clock::pair(&Tsc))
        }
    }
}

fn elapsed_ns(ticks: u64, rate: f64) -> u64 {
    (ticks as f64 / rate) as u64
}

/// True once per second of run time (the monitor polls every 100 ms).
fn tick_due(elapsed_ns: u64) -> bool {
    elapsed_ns % 1_000_000_000 < 100_000_000
}

fn snapshot(raw: &[RawGap], elapsed: u64, rate: f64) -> Snapshot {
    let gaps = to_ns(raw, rate, elapsed);
    let index = GapIndex::new(&gaps, elapsed);
    Snapshot {
        elapsed_ns: elapsed,
        gaps: gaps.len(),
        max_gap_ns: gaps.iter().map(|g| g.len_ns).max().unwrap_or(0),
        loads: index.max_loads(&LIVE_WINDOWS),
    }
}

/// Raw tick gaps to ns, keeping them sorted, disjoint and inside the run.
fn to_ns(raw: &[RawGap], rate: f64, total_ns: u64) -> Vec<Gap> {
    let mut out = Vec::with_capacity(raw.len());
    let mut floor = 0u64;
    for g in raw {
        let start = ((g.start as f64 / rate).round() as u64).max(floor).min(total_ns);
        let end = (((g.start + g.len) as f64 / rate).round() as u64).max(start).min(total_ns);
        if end > start {
            out.push(Gap { start_ns: start, len_ns: end - start });
        }
        floor = end;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_throttling_could_explain() {
        let p = |window_ns, max_load| CurvePoint { window_ns, max_load };
        // 50 ms throttled per period: load 1 up to 50 ms, 0.5 at 100 ms.
        let points = [p(10_000_000, 1.0), p(50_000_000, 1.0), p(100_000_000, 0.5), p(200_000_000, 0.3), p(1_000_000_000, 0.05)];
        assert_eq!(throttling_could_explain(&points, 50_000_000), vec![10_000_000, 50_000_000, 100_000_000, 1_000_000_000]);
        assert!(throttling_could_explain(&points, 0).is_empty());
    }

    #[test]
    fn gap_logs_are_bounded_before_the_run() {
        assert!(check_max_gaps(4_000_000, Some(1 << 30)).is_ok());
        assert!(check_max_gaps(4_000_000, None).is_ok());
        for bad in [0, MAX_GAPS + 1, usize::MAX] {
            let e = check_max_gaps(bad, None).unwrap_err().to_string();
            assert!(e.starts_with(&format!("max_gaps {bad}: ")) && e.contains("1..=1000000000"), "{e}");
        }
        let e = check_max_gaps(100_000_000, Some(1 << 30)).unwrap_err().to_string();
        assert!(e.contains("needs 3051 MB") && e.contains("1024 MB"), "{e}");
    }

    #[test]
    fn tick_gaps_convert_to_disjoint_ns_gaps() {
        let raw = [RawGap { start: 10, len: 30 }, RawGap { start: 40, len: 2 }, RawGap { start: 100, len: 50 }];
        let g = to_ns(&raw, 2.0, 70);
        assert_eq!(g, vec![Gap { start_ns: 5, len_ns: 15 }, Gap { start_ns: 20, len_ns: 1 }, Gap { start_ns: 50, len_ns: 20 }]);
    }
}
