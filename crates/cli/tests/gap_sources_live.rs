//! Live (IRQLAB_LIVE_TESTS=1, root): `irqlab measure interference` names
//! what took its gaps (issue 43). A known SCHED_FIFO injector on CPU 1
//! must come out as the top source of the 1 ms max-load window with its
//! busy time, and every window's sources must add up to its busy time.

mod common;
use common::inject::Injector;
use common::{irqlab, json, path_str, stderr};
use serde_json::Value;

/// The injector: busy `RUN_NS` of every `PERIOD_NS` on CPU 1, above the
/// probe's priority.
const RUN_NS: u64 = 600_000;
const PERIOD_NS: u64 = 2_000_000;
const INJECTOR_PRIORITY: i32 = 95;
const WINDOW_1MS: u64 = 1_000_000;

/// Every test here probes CPU 1 at SCHED_FIFO 80: run together (cargo runs
/// a file's tests in parallel) each probe is a gap source of the other's,
/// which made the injector's share of the heaviest window 511 us once.
/// One at a time.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Runs the probe on CPU 1 for 3 s and returns its document.
fn measure(dir: &std::path::Path, name: &str) -> Value {
    let out_file = dir.join(name);
    let out = irqlab()
        .args(["measure", "interference", "--cpu", "1", "--duration", "3s", "--priority", "80", "--json", path_str(&out_file)])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    println!("{}", String::from_utf8_lossy(&out.stdout));
    json(&out_file)
}

/// Conservation: each window's sources add up to its busy time, which is
/// the raw max load times the window (the curve's point, no baseline here).
fn check_conservation(doc: &Value) {
    let points = doc["points"].as_array().unwrap();
    let windows = doc["sources"]["windows"].as_array().unwrap();
    assert_eq!(windows.len(), points.len());
    for (p, w) in points.iter().zip(windows) {
        let window_ns = w["window_ns"].as_u64().unwrap();
        assert_eq!(p["window_ns"].as_u64(), Some(window_ns));
        let busy = w["busy_ns"].as_u64().unwrap();
        let sum: u64 = w["sources"].as_array().unwrap().iter().map(|s| s["ns"].as_u64().unwrap()).sum();
        assert_eq!(sum, busy, "window {window_ns}: sources {sum} ns, busy {busy} ns");
        // max_load is busy / window as f64, clamped to 1 (rounding only).
        let load = p["max_load"].as_f64().unwrap();
        assert!((busy as f64 / window_ns as f64 - load).abs() < 1e-9, "window {window_ns}: busy {busy} vs max_load {load}");
    }
}

fn window(doc: &Value, window_ns: u64) -> &Value {
    doc["sources"]["windows"].as_array().unwrap().iter().find(|w| w["window_ns"].as_u64() == Some(window_ns)).unwrap()
}

/// CPU 1's steal time from /proc/stat, in USER_HZ ticks.
fn steal_ticks() -> u64 {
    let stat = std::fs::read_to_string("/proc/stat").unwrap();
    let line = stat.lines().find(|l| l.starts_with("cpu1 ")).unwrap();
    line.split_whitespace().nth(8).unwrap().parse().unwrap()
}

/// How many runs the injector test may take to see the injector's burst
/// within 10% (see below why a run can miss it on a VM).
const ATTEMPTS: usize = 3;

#[test]
fn the_injector_is_the_top_source_of_the_1ms_window() {
    if !common::live::enabled_as_root("the_injector_is_the_top_source_of_the_1ms_window") {
        return;
    }
    let _one = one_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let mut shares = Vec::new();
    for attempt in 0..ATTEMPTS {
        let injector = Injector::start("irqlab-inject", 1, INJECTOR_PRIORITY, RUN_NS, PERIOD_NS);
        let doc = measure(dir.path(), &format!("inject{attempt}.json"));
        assert!(injector.bursts() > 1000, "the injector ran {} times", injector.bursts());
        drop(injector);
        assert_eq!(doc["sources"]["available"], true, "{}", doc["sources"]["note"]);
        check_conservation(&doc);

        // What the max-load 1 ms window holds: bursts are PERIOD_NS = 2 ms
        // apart and RUN_NS = 600 us long, so any 1 ms window overlaps at
        // most one burst, and the heaviest window holds a whole one plus
        // whatever else was nearby (ticks, a hypervisor stall). The
        // injector's share is then its one burst: 600 us of wall time from
        // its wake-up, less the IRQs that interrupted it (charged to them),
        // plus its wake-up and sleep paths (a few us). Hence at least 90%
        // of RUN_NS in every run, and the injector on top.
        let w = window(&doc, WINDOW_1MS);
        let top = &w["sources"][0];
        let label = top["label"].as_str().unwrap();
        if !label.starts_with("irqlab-inject/") {
            // Two things can take a whole 1 ms window over a SCHED_FIFO 80
            // probe besides the injector: the hypervisor stopping the vCPU
            // (unseen), and the fair class's deadline server (6.12+, up to
            // 50 ms of each second) running a starved fair-class task that
            // was queued on CPU 1 (a CI run: `bash/20540 OTHER`, 968 us of
            // the window). And a stall inside an interrupt handler is
            // charged to it, as one inside the injector's run is to the
            // injector (a CI run: the TIMER softirq with 622 us of the
            // window, where a tick's softirqs take 2-25 us here): an IRQ or
            // softirq source holding a third of the window or more. The
            // monitor named what it saw, and the injector's burst was not
            // the heaviest window: another run.
            let stalled_handler = (top["kind"] == "softirq" || top["kind"] == "irq") && top["ns"].as_u64().unwrap_or(0) >= WINDOW_1MS / 3;
            assert!(
                top["kind"] == "unseen" || fair_class(top) || stalled_handler,
                "top source of the 1 ms window is neither the injector nor what can run over the probe: {top} (all: {})",
                w["sources"]
            );
            eprintln!("attempt {attempt}: the heaviest 1 ms window was {top}, not a burst of the injector");
            shares.push(0);
            continue;
        }
        assert_eq!(top["kind"], "thread", "{top}");
        assert!(label.ends_with(&format!("FIFO {INJECTOR_PRIORITY}")), "{top}");
        let ns = top["ns"].as_u64().unwrap();
        assert!(ns >= RUN_NS - RUN_NS / 10, "injector's share of the 1 ms window: {ns} ns, less than a burst ({RUN_NS} ns) - 10%");
        // Above: a vCPU stall while the injector is on the CPU is invisible
        // to every tracepoint and so charged to the injector, and the
        // max-load window prefers exactly the burst that had one (one run
        // here: 708 us). Such a stall is rare in the few us of the wake-up
        // and sleep paths, so most runs see 600 us within 10%; up to
        // ATTEMPTS runs are made for one that does.
        shares.push(ns);
        if ns.abs_diff(RUN_NS) <= RUN_NS / 10 {
            return;
        }
        eprintln!("attempt {attempt}: injector's share {ns} ns, more than {RUN_NS} ns + 10% (a vCPU stall inside its run?)");
    }
    panic!("injector's share of the 1 ms max-load window in {ATTEMPTS} runs: {shares:?} ns (0: another source was heavier), expected {RUN_NS} within 10%");
}

/// Whether a thread source's label (`comm/tid POLICY ...`) is of the fair
/// class, which runs over a real-time probe only through the fair server.
/// A thread source of the fair class, by its recorded policy (`other:19`;
/// not by its label, whose comm may hold spaces: rustc's `opt cgu.13`).
fn fair_class(source: &serde_json::Value) -> bool {
    source["policy"].as_str().is_some_and(|p| ["other", "batch", "idle"].iter().any(|f| p.split(':').next() == Some(f)))
}

#[test]
fn an_idle_run_names_unseen_time() {
    if !common::live::enabled_as_root("an_idle_run_names_unseen_time") {
        return;
    }
    let _one = one_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let steal_before = steal_ticks();
    let doc = measure(dir.path(), "idle.json");
    let steal = steal_ticks() - steal_before;
    assert_eq!(doc["sources"]["available"], true, "{}", doc["sources"]["note"]);
    check_conservation(&doc);
    // Over the whole run (the longest window), how much of the gap time no
    // tracepoint saw, beside the steal counter's increase. The steal
    // counter moves in whole ticks (USER_HZ, 10 ms) and counts only what
    // the hypervisor reports, so this is printed, not asserted: on this
    // VM the stalls that set the long windows are not always reported as
    // steal (see docs/performance.md).
    let longest = doc["sources"]["windows"].as_array().unwrap().last().unwrap();
    let unseen: u64 =
        longest["sources"].as_array().unwrap().iter().filter(|s| s["kind"] == "unseen").map(|s| s["ns"].as_u64().unwrap()).sum();
    println!(
        "idle CPU 1: window {} ns busy {} ns, unseen {} ns; /proc/stat steal +{} ticks ({} ms)",
        longest["window_ns"],
        longest["busy_ns"],
        unseen,
        steal,
        steal * 10
    );
    // Without load nothing of ours runs on CPU 1: whatever threads took
    // gaps there are the machine's own; the injector's label must not
    // appear.
    for w in doc["sources"]["windows"].as_array().unwrap() {
        for s in w["sources"].as_array().unwrap() {
            assert!(!s["label"].as_str().unwrap().starts_with("irqlab-inject/"), "{s}");
        }
    }
}

#[test]
fn no_sources_turns_the_monitor_off() {
    if !common::live::enabled_as_root("no_sources_turns_the_monitor_off") {
        return;
    }
    let _one = one_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let out_file = dir.path().join("off.json");
    let out = irqlab()
        .args(["measure", "interference", "--cpu", "1", "--duration", "1s", "--no-sources", "--json", path_str(&out_file)])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let doc = json(&out_file);
    assert_eq!(doc["sources"]["available"], false);
    // The note's words are the subject here: it names the flag that turned
    // the monitor off (`available` says only that there are no sources).
    assert!(doc["sources"]["note"].as_str().unwrap().contains("--no-sources"));
}
