//! Live: the interference probe against known, injected interference (a
//! SCHED_FIFO thread of higher priority on the same CPU running 1 ms every
//! 10 ms), and against oslat from rt-tests under the same injection. Runs
//! only with IRQLAB_LIVE_TESTS=1 (as root). The tests share one CPU, so
//! they take a lock and run one at a time.

// The checks are written as the conditions they assert (`x >= y` on
// floats), which reads better than clippy's partial_cmp form.
#![allow(clippy::neg_cmp_op_on_partial_ord)]

use irqlab_analysis::demand::{periodic_load, DemandBound};
use irqlab_analysis::fit::{fit_hyperbola, subtract_baseline};
use irqlab_measure::accounting::procfs::cpu_steal_ns;
use irqlab_measure::probe::rt_limit::{LiftedRtLimit, RtBandwidth};
use irqlab_measure::probe::{log_windows, measure, Config, Injector, RtLimit};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn live() -> bool {
    if std::env::var("IRQLAB_LIVE_TESTS").as_deref() == Ok("1") {
        return true;
    }
    eprintln!("skipped: live test (set IRQLAB_LIVE_TESTS=1 and run as root to run SCHED_FIFO threads)");
    false
}

/// The last online CPU: away from CPU 0, where most housekeeping lands.
fn test_cpu() -> usize {
    *irqlab_host::rt::online_cpus().unwrap().last().unwrap()
}

/// A failed check inside an attempt: the attempt returns its reason.
macro_rules! check {
    ($cond:expr, $($why:tt)+) => {
        if !$cond {
            return Err(format!($($why)+));
        }
    };
}

/// Steal above this during an attempt voids it (two of /proc/stat's ticks).
const STEAL_VOIDS_NS: u64 = 20_000_000;

/// This machine is a VM: the hypervisor steals bursts of time that neither
/// the probe nor oslat can tell from the injected load, and they differ
/// from one run to the next. A measurement is therefore tried until three
/// attempts ran without the hypervisor taking more than two ticks from the
/// test CPU (at most ten tries); each failed attempt is printed with its
/// reason and the steal it saw. The test fails when three clean attempts
/// failed. When the hypervisor stole time in every one of the ten tries,
/// nothing could be measured: that is printed as not checked, loudly,
/// rather than blamed on the probe. An attempt that passes counts whatever
/// the steal.
fn within_three_attempts(what: &str, attempt: impl Fn() -> Result<(), String>) {
    let mut reasons = Vec::new();
    let mut clean_failures = 0;
    for n in 1..=10 {
        let stolen_before = cpu_steal_ns(test_cpu());
        let outcome = attempt();
        let stolen = cpu_steal_ns(test_cpu()).saturating_sub(stolen_before);
        match outcome {
            Ok(()) => return,
            Err(why) => {
                let void = stolen > STEAL_VOIDS_NS;
                eprintln!(
                    "{what}: attempt {n} failed: {why} (hypervisor steal on CPU {}: {} ms{})",
                    test_cpu(),
                    stolen / 1_000_000,
                    if void { ", not counted" } else { "" }
                );
                reasons.push(format!("{why} (steal {} ms)", stolen / 1_000_000));
                if !void {
                    clean_failures += 1;
                    if clean_failures == 3 {
                        break;
                    }
                }
            }
        }
    }
    if clean_failures == 0 {
        eprintln!(
            "{what}: NOT CHECKED: the hypervisor stole more than {} ms from CPU {} in each of {} tries: {reasons:?}",
            STEAL_VOIDS_NS / 1_000_000,
            test_cpu(),
            reasons.len()
        );
        return;
    }
    panic!("{what}: every attempt failed: {reasons:?}");
}

const INJECT_RUN_NS: u64 = 1_000_000;
const INJECT_PERIOD_NS: u64 = 10_000_000;
const PROBE_PRIORITY: i32 = 40;
const INJECT_PRIORITY: i32 = 60;

fn config(duration_ns: u64, windows_to_ns: u64) -> Config {
    Config {
        cpu: Some(test_cpu()),
        priority: Some(PROBE_PRIORITY),
        duration_ns,
        windows_ns: log_windows(10_000, windows_to_ns, 8),
        ..Config::default()
    }
}

#[test]
fn injected_interference_gives_the_expected_curve() {
    if !live() {
        return;
    }
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let _lift = LiftedRtLimit::lift().ok();
    within_three_attempts("injected interference", || {
        // The machine's own interference first (the paper's idle baseline),
        // so the fit can isolate the injected load as the paper isolates the
        // driver's (load-bounds paper §4).
        let baseline = measure(&config(800_000_000, 400_000_000), &AtomicBool::new(false), |_| {}).unwrap();
        let injector = Injector::start(test_cpu(), INJECT_PRIORITY, INJECT_RUN_NS, INJECT_PERIOD_NS).unwrap();
        // 0.8 s: shorter than both bandwidth mechanisms' onset (RT throttling
        // after 950 ms of a 1 s period, the fair server's zero-laxity deferral
        // of ~950 ms), so the curve holds only the injected load and the VM's
        // own noise; lifted anyway in case the period boundary falls inside.
        let c = measure(&config(800_000_000, 400_000_000), &AtomicBool::new(false), |_| {}).unwrap();
        let activations = injector.activations();
        drop(injector);
        eprintln!(
            "period {:.1} ns, {} gaps, mean load {:.4}, points {:?}",
            c.sampling_period_ns,
            c.gaps,
            c.mean_load,
            c.points.iter().map(|p| (p.window_ns, (p.max_load * 1000.0).round() / 1000.0)).collect::<Vec<_>>()
        );
        check!(c.complete, "run incomplete");
        check!(activations >= 70, "injector ran {activations} times");
        // Load ≈ 1 for Δ ≤ 1 ms: some window of that length lies inside one
        // injected millisecond.
        for p in c.points.iter().filter(|p| p.window_ns <= 1_000_000) {
            check!(p.max_load >= 0.98, "load {} at {} ns, expected ≈ 1", p.max_load, p.window_ns);
        }
        // ≈ 0.1 + small for long windows (small: the VM's own gaps).
        for p in c.points.iter().filter(|p| p.window_ns >= 100_000_000) {
            check!((0.095..=0.15).contains(&p.max_load), "load {} at {} ns, expected ≈ 0.1", p.max_load, p.window_ns);
        }
        check!((0.095..=0.13).contains(&c.mean_load), "mean load {}", c.mean_load);
        let raw_fit = fit_hyperbola(&c.points).unwrap();
        let isolated = subtract_baseline(&c.curve(), &baseline.curve());
        let fit = fit_hyperbola(&isolated.points).unwrap();
        eprintln!(
            "fit: u = {:.4}, p = {} ns (before subtracting the baseline, mean load {:.4}: u = {:.4})",
            fit.utilization, fit.period_ns, baseline.mean_load, raw_fit.utilization
        );
        check!((fit.utilization - 0.1).abs() <= 0.02, "fitted u = {}", fit.utilization);
        Ok(())
    });
}

/// Issue 25 item 12: the fit of a curve minus an idle baseline must still
/// bound a known interferer (SCHED_FIFO, 300 us every 2 ms) from above at
/// every window, in every one of three rounds (baseline and loaded curve
/// measured anew each time). This VM's idle baseline can hold 1-2.5 ms
/// stalls; subtracting the baseline's maxima then erased the interferer
/// (p = 0, a bound of 16% where it takes 100%) about one run in three.
#[test]
fn the_fit_minus_a_baseline_bounds_a_known_interferer_every_time() {
    if !live() {
        return;
    }
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let _lift = LiftedRtLimit::lift().ok();
    const RUN_NS: u64 = 300_000;
    const PERIOD_NS: u64 = 2_000_000;
    for round in 1..=3 {
        let baseline = measure(&config(800_000_000, 400_000_000), &AtomicBool::new(false), |_| {}).unwrap();
        let injector = Injector::start(test_cpu(), INJECT_PRIORITY, RUN_NS, PERIOD_NS).unwrap();
        let mut c = measure(&config(800_000_000, 400_000_000), &AtomicBool::new(false), |_| {}).unwrap();
        let activations = injector.activations();
        drop(injector);
        assert!(!baseline.floor.is_empty() && c.complete, "round {round}: no floor or incomplete");
        let raw = c.curve();
        let used = c.subtract_baseline(&baseline.curve(), "idle").clone();
        let fit = fit_hyperbola(&c.points).unwrap();
        // The interferer's true load at each window, from the period it
        // actually kept (its sleeps may overshoot).
        let period = (c.duration_ns / activations.max(1)).max(PERIOD_NS);
        let truth = |w: u64| periodic_load(DemandBound::Refined, period, RUN_NS, w);
        let maxima = fit_hyperbola(&subtract_baseline(&raw, &baseline.curve()).points).unwrap();
        eprintln!(
            "round {round}: {activations} activations (period {period} ns); baseline max gap {} ns, high at {:?}; \
             fit minus floor u {:.4} p {} ns; minus maxima (the paper's) u {:.4} p {} ns, at 100 us {:.3} vs truth 1",
            baseline.max_gap_ns,
            used.baseline_high_windows_ns,
            fit.utilization,
            fit.period_ns,
            maxima.utilization,
            maxima.period_ns,
            maxima.load(100_000)
        );
        assert_eq!(used.subtracted, "floor");
        for p in &c.points {
            let (bound, true_load) = (fit.load(p.window_ns), truth(p.window_ns));
            // 0.01: the probe's resolution and the injector's switch costs.
            assert!(
                bound >= true_load - 0.01,
                "round {round}: the fit gives {bound:.4} at {} ns, the interferer takes {true_load:.4}",
                p.window_ns
            );
        }
    }
}

/// oslat's histogram (1 us buckets; the last one holds the overflows):
/// latencies above 100 us per second.
fn oslat_over_100us_per_s(cpu: usize, seconds: u64, priority: i32) -> f64 {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("oslat.json");
    let out = std::process::Command::new("oslat")
        .args(["-c", &cpu.to_string(), "-D", &seconds.to_string(), "-f", &priority.to_string(), "-b", "1024", "-q", "-z"])
        .arg(format!("--json={}", json.display()))
        .output()
        .expect("oslat from rt-tests (scripts/install-deps.sh installs it)");
    assert!(out.status.success(), "oslat failed: {}", String::from_utf8_lossy(&out.stderr));
    let doc: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let thread = &doc["thread"]["0"];
    let over: u64 = thread["histogram"]
        .as_object()
        .unwrap()
        .iter()
        .filter(|(us, _)| us.parse::<u64>().unwrap() > 100)
        .map(|(_, n)| n.as_u64().unwrap())
        .sum();
    over as f64 / thread["duration"].as_f64().unwrap()
}

/// How far two counts of long gaps per second may differ by noise alone:
/// the spread between oslat's two runs, and at least the counting noise of
/// the machine's own stalls (the injected ones are exactly periodic; what
/// comes on top is taken as Poisson: two standard deviations of that count
/// over `seconds`, plus one event for where a run's edges fall).
fn oslat_tolerance_per_s(before: f64, after: f64, injected_per_s: f64, seconds: f64) -> f64 {
    let own_stalls = (before.max(after) - injected_per_s).max(0.0) * seconds;
    let counting = (2.0 * own_stalls.max(1.0).sqrt() + 1.0) / seconds;
    (before - after).abs().max(counting)
}

#[test]
fn oslat_tolerance_comes_from_the_runs() {
    // 100/s injected + 12/s of the VM's own over 3 s: 36 events, sd 6.
    assert!((oslat_tolerance_per_s(112.0, 110.0, 100.0, 3.0) - 13.0 / 3.0).abs() < 1e-9);
    // The two runs disagreeing more than counting noise widens it.
    assert_eq!(oslat_tolerance_per_s(100.0, 140.0, 100.0, 3.0), 40.0);
    // A quiet machine still allows a stall or two.
    assert!((oslat_tolerance_per_s(100.0, 100.0, 100.0, 3.0) - 1.0).abs() < 1e-9);
}

#[test]
fn probe_and_oslat_count_the_same_long_gaps() {
    if !live() {
        return;
    }
    if irqlab_host::privilege::require_program("oslat").is_err() {
        panic!("oslat (rt-tests) is missing: scripts/install-deps.sh installs it");
    }
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let _lift = LiftedRtLimit::lift().ok();
    within_three_attempts("probe vs oslat", || {
        let injector = Injector::start(test_cpu(), INJECT_PRIORITY, INJECT_RUN_NS, INJECT_PERIOD_NS).unwrap();
        // oslat before and after the probe: how far oslat strays from
        // itself on this machine, now, is the tolerance (the VM's own long
        // stalls come and go with the host's load).
        let before = oslat_over_100us_per_s(test_cpu(), 3, PROBE_PRIORITY);
        let c = measure(&config(3_000_000_000, 10_000_000), &AtomicBool::new(false), |_| {}).unwrap();
        let after = oslat_over_100us_per_s(test_cpu(), 3, PROBE_PRIORITY);
        drop(injector);
        let probe = c.gaps_over_100us_per_s;
        let tolerance = oslat_tolerance_per_s(before, after, 1e9 / INJECT_PERIOD_NS as f64, 3.0);
        eprintln!(
            "probe: {probe:.1} gaps > 100 us per s, sampling period {:.1} ns; oslat before {before:.1}, after {after:.1} per s; \
             tolerance {tolerance:.1} per s",
            c.sampling_period_ns
        );
        // The injection alone is 100 per second.
        check!(before.min(after) >= 90.0, "oslat saw {before} and {after} per s");
        let (lo, hi) = (before.min(after) - tolerance, before.max(after) + tolerance);
        check!(
            (lo..=hi).contains(&probe),
            "probe {probe:.1} per s outside oslat's {:.1}..{:.1} per s widened by {tolerance:.1}",
            before.min(after),
            before.max(after)
        );
        check!(c.sampling_period_ns < 100.0, "sampling period {} ns", c.sampling_period_ns);
        Ok(())
    });
}

#[test]
fn lifted_rt_limit_is_restored_and_marked() {
    if !live() {
        return;
    }
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let before = RtBandwidth::read().unwrap();
    // Long enough that the once-a-second progress tick, on which the lifted
    // limit is observed, comes even when the VM stalls the monitor.
    let mut cfg = config(2_500_000_000, 10_000_000);
    cfg.rt_limit = RtLimit::Lift;
    let mut seen_during = None;
    let c = measure(&cfg, &AtomicBool::new(false), |_| {
        seen_during.get_or_insert(RtBandwidth::read().unwrap());
    })
    .unwrap();
    assert_eq!(RtBandwidth::read().unwrap(), before, "sched_rt_runtime_us not restored");
    let during = seen_during.expect("one progress tick per second");
    if !before.limits() {
        eprintln!("lifted_rt_limit_is_restored_and_marked: lifting not checked: this machine has no RT bandwidth limit");
    }
    if before.limits() {
        assert_eq!(during.runtime_us, -1, "limit not lifted during the run");
        assert!(c.rt_throttling.lifted && !c.rt_throttling.limited);
    }
    // Without lifting, an active limit is marked in the document.
    cfg.rt_limit = RtLimit::Keep;
    cfg.duration_ns = 300_000_000;
    let c = measure(&cfg, &AtomicBool::new(false), |_| {}).unwrap();
    assert_eq!(c.rt_throttling.limited, before.limits());
    assert!(!c.rt_throttling.lifted);
    if before.limits() {
        // Marked by its fields (the note says the same in words): a 10 us
        // window can always be all throttle.
        assert!(c.rt_throttling.throttled_windows_ns.contains(&10_000), "{:?}", c.rt_throttling.throttled_windows_ns);
    }
}

/// Lifts nest within a process: the limit comes back with the last guard,
/// and a run inside a test's own lift joins it (the probe tests above lift
/// around their runs) and reports the value from before it.
#[test]
fn nested_lifts_restore_with_the_last_guard() {
    if !live() {
        return;
    }
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let before = RtBandwidth::read().unwrap();
    let outer = LiftedRtLimit::lift().unwrap();
    let inner = LiftedRtLimit::lift().unwrap();
    assert_eq!((outer.previous_us(), inner.previous_us()), (before.runtime_us, before.runtime_us));
    let mut cfg = config(300_000_000, 10_000_000);
    cfg.rt_limit = RtLimit::Lift;
    let c = measure(&cfg, &AtomicBool::new(false), |_| {}).unwrap();
    assert_eq!(c.rt_throttling.before, before, "the run reports the setting from before the lift");
    drop(inner);
    assert_eq!(RtBandwidth::read().unwrap().runtime_us, -1, "restored while the outer guard lives");
    drop(outer);
    assert_eq!(RtBandwidth::read().unwrap(), before, "not restored with the last guard");
}

#[test]
fn stopping_early_keeps_what_was_measured() {
    if !live() {
        return;
    }
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let stop = Arc::new(AtomicBool::new(false));
    let s = stop.clone();
    let stopper = std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_millis(300));
        s.store(true, Ordering::Relaxed);
    });
    let c = measure(&config(20_000_000_000, 10_000_000), &stop, |_| {}).unwrap();
    stopper.join().unwrap();
    assert!(!c.complete);
    // Stopped 300 ms after the call, far short of its 20 s: what it
    // measured until then is kept. The probe's own time starts after its
    // setup (pinning, the RT-limit lift, the BPF monitor: CI, 2026-11-29,
    // 179 ms measured of the 300), so only the end is bounded.
    assert!(c.duration_ns > 0 && c.duration_ns < 5_000_000_000, "ran {} ns", c.duration_ns);
    assert!(!c.points.is_empty());
}
