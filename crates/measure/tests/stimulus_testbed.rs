//! The "must show" on the testbed: the generator in namespace
//! irqlab-b, the target the root namespace (kernel ICMP echo + SCHED_FIFO
//! responder). Live: IRQLAB_LIVE_TESTS=1, as root. About 35 s.

use irqlab_host::testbed::{Side, Testbed};
use irqlab_measure::load::{self, LoadKind, NetLoad};
use irqlab_measure::stimulus::{generator, responder, GeneratorConfig, PathKind, Pattern, ResponderConfig, StimulusReport};
use std::net::{Ipv4Addr, SocketAddrV4};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};

mod common;
use common::StopOnDrop;

fn live_tests_enabled(test: &str) -> bool {
    if std::env::var("IRQLAB_LIVE_TESTS").as_deref() == Ok("1") {
        return true;
    }
    eprintln!("{test}: skipped: live test (set IRQLAB_LIVE_TESTS=1 and run as root)");
    false
}

/// `count` stimuli at 1 kHz on both paths, sent from irqlab-b; records
/// go to `log` (JSON lines) when given. `preflight`: probe the target
/// first. Only runs without a flood do: under one the probes share the
/// flooded queue and may all be dropped, which says nothing about the
/// target (a CI run failed on exactly that).
fn run_from_b(bed: &Testbed, port: u16, count: u64, log: Option<PathBuf>, preflight: bool) -> Result<StimulusReport, String> {
    let config = GeneratorConfig {
        target: bed.root_addr(Side::B),
        udp_port: port,
        paths: vec![PathKind::Icmp, PathKind::Udp],
        pattern: Pattern::periodic(1_000_000),
        count: Some(count),
        duration_ns: None,
        timeout_ns: 1_000_000_000,
        preflight,
        sender_priority: 0,
        log,
    };
    bed.spawn_in(Side::B, move || generator::measure(&config, &AtomicBool::new(false), |_| {}))
        .unwrap()
        .join()
        .unwrap()
        .map_err(|e| format!("generator: {e}"))
}

/// Latencies of `kind` in the JSON-lines logs `paths`, sorted.
fn latencies(paths: &[PathBuf], kind: &str) -> Vec<u64> {
    let mut v: Vec<u64> = paths
        .iter()
        .flat_map(|p| std::fs::read_to_string(p).unwrap().lines().map(String::from).collect::<Vec<_>>())
        .map(|l| serde_json::from_str::<serde_json::Value>(&l).unwrap())
        .filter(|r| r["path"] == kind)
        .map(|r| r["latency_ns"].as_u64().unwrap())
        .collect();
    v.sort_unstable();
    v
}

/// UDP latency minus ICMP latency of the stimuli sent in the same period
/// (same sequence number), sorted.
fn paired_differences(log: &std::path::Path) -> Vec<i64> {
    let mut by_seq: std::collections::BTreeMap<u64, [Option<i64>; 2]> = std::collections::BTreeMap::new();
    for line in std::fs::read_to_string(log).unwrap().lines() {
        let r: serde_json::Value = serde_json::from_str(line).unwrap();
        let slot = if r["path"] == "icmp" { 0 } else { 1 };
        by_seq.entry(r["seq"].as_u64().unwrap()).or_default()[slot] = r["latency_ns"].as_i64();
    }
    let mut d: Vec<i64> = by_seq.values().filter_map(|[i, u]| Some((*u)? - (*i)?)).collect();
    d.sort_unstable();
    d
}

fn p99(sorted: &[u64]) -> u64 {
    sorted[(sorted.len() * 99 / 100).min(sorted.len() - 1)]
}

fn show(label: &str, r: &StimulusReport) {
    for p in &r.paths {
        let l = &p.latency;
        eprintln!(
            "{label} {}: sent {} answered {} lost {} late {} | min {:?} p50 {:?} p99 {:?} p99.9 {:?} max {:?} ns",
            p.path.name(),
            p.sent,
            p.answered,
            p.lost,
            p.late,
            l.min_ns,
            l.p50_ns,
            l.p99_ns,
            l.p999_ns,
            l.max_ns
        );
    }
}

#[test]
fn task_path_is_slower_than_softirq_path_and_load_grows_the_tail() {
    if !live_tests_enabled("task_path_is_slower_than_softirq_path_and_load_grows_the_tail") {
        return;
    }
    let bed = Testbed::up().unwrap();
    let r = responder::bind(&ResponderConfig { bind: SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 9761), priority: 80, cpu: None }).unwrap();
    let stop_responder = AtomicBool::new(false);
    let stop_load = AtomicBool::new(false);
    std::thread::scope(|s| {
        let served = s.spawn(|| r.serve(&stop_responder));
        // No CPU hogs run beside the measurement, not even SCHED_IDLE
        // spinners to keep the vCPUs out of HLT. On this VM kind (kernel
        // 6.18 "-fc") a woken task can wait seconds behind a CPU-bound one
        // of *any* class: the root side's NAPI thread was seen runnable
        // with no context switch for 11 s while a nice-19 (or SCHED_IDLE)
        // spinner ran on its CPU, irqlab-b's veth queue stopped, and every
        // stimulus on both paths was lost until it ran again.
        let _stop_all = StopOnDrop([&stop_responder, &stop_load]);

        // A VM stall of a few hundred ms loses every stimulus in flight on
        // both paths alike: up to three attempts, each printed.
        let dir = tempfile::tempdir().unwrap();
        let quiet_log = dir.path().join("quiet.jsonl");
        let mut quiet = run_from_b(&bed, 9761, 10_000, Some(quiet_log.clone()), true).unwrap();
        show("quiet", &quiet);
        for _ in 1..3 {
            if quiet.paths.iter().all(|p| p.lost == 0) {
                break;
            }
            eprintln!("replies lost (a stall?): measuring the quiet run again");
            quiet = run_from_b(&bed, 9761, 10_000, Some(quiet_log.clone()), true).unwrap();
            show("quiet", &quiet);
        }
        let paired = paired_differences(&quiet_log);
        eprintln!(
            "quiet, udp minus icmp of the same period: {} pairs, p10/p50/p90 {}/{}/{} ns",
            paired.len(),
            paired[paired.len() / 10],
            paired[paired.len() / 2],
            paired[paired.len() * 9 / 10]
        );
        let icmp = quiet.path(PathKind::Icmp).unwrap();
        let udp = quiet.path(PathKind::Udp).unwrap();
        for p in [icmp, udp] {
            assert_eq!(p.sent, 10_000, "{}", p.path.name());
            assert_eq!(p.lost, 0, "{}: lost replies", p.path.name());
        }
        // The task path adds a wake-up and two system calls to the same
        // softirq work, so the UDP stimulus of a period comes back later
        // than the ICMP one of the same period more often than not. Paired
        // by period, the noise both share (the receiving vCPU's wake-up,
        // the host) cancels; a sign test says whether "more often" is more
        // than chance: with no difference the excess of later UDP replies
        // would be within 3 sigma (sqrt of the pairs) of zero 99.7% of the
        // time. (The two medians alone came out 16 ns apart once in CI.)
        let later = paired.iter().filter(|&&d| d > 0).count() as f64;
        let earlier = paired.iter().filter(|&&d| d < 0).count() as f64;
        assert!(
            later - earlier > 3.0 * (later + earlier).sqrt(),
            "udp later than icmp in {later} pairs, earlier in {earlier}: no difference beyond chance (medians udp {:?}, icmp {:?})",
            udp.latency.p50_ns,
            icmp.latency.p50_ns
        );

        // The same 10,000 stimuli with a UDP flood from irqlab-b into the
        // root namespace over the stimuli's own link (what `irqlab load net
        // --testbed b --threads 2` does), against 10,000 without: in
        // alternating blocks of 1,000 so that whatever else the machine
        // does (other builds on a shared VM) falls on both alike.
        // A VM can stall for a good part of a second (hypervisor), losing a
        // block's replies or bending its tail: up to three attempts, each
        // failure printed, the test failing only if none meets every check.
        let attempt = || -> Result<(), String> {
            let dir = tempfile::tempdir().unwrap();
            let (mut quiet_logs, mut loaded_logs) = (Vec::new(), Vec::new());
            for block in 0..20 {
                let log = dir.path().join(format!("block{block}.jsonl"));
                let report = if block % 2 == 0 {
                    run_from_b(&bed, 9761, 1000, Some(log.clone()), true)?
                } else {
                    stop_load.store(false, Ordering::Relaxed);
                    let loader = s.spawn(|| {
                        let net = NetLoad { via_testbed: Some(Side::B), threads: 2, ..NetLoad::loopback() };
                        load::run(&LoadKind::Net(net), 60_000_000_000, &stop_load)
                    });
                    std::thread::sleep(std::time::Duration::from_millis(100));
                    let report = run_from_b(&bed, 9761, 1000, Some(log.clone()), false);
                    stop_load.store(true, Ordering::Relaxed);
                    let load = loader.join().unwrap().unwrap();
                    assert!(load.work > 10_000, "the flood hardly ran: {load:?}");
                    // Let the flood's queues drain, or the next quiet
                    // block's first stimuli wait behind its last packets.
                    std::thread::sleep(std::time::Duration::from_millis(300));
                    report?
                };
                assert!(report.paths.iter().all(|p| p.sent == 1000));
                if block % 2 == 0 {
                    quiet_logs.push(log)
                } else {
                    loaded_logs.push(log)
                }
            }
            // The tail (99th percentile) grows on both paths.
            for kind in ["icmp", "udp"] {
                let (q, l) = (latencies(&quiet_logs, kind), latencies(&loaded_logs, kind));
                // Quiet: (nearly) nothing lost. Loaded: the flood may drop
                // stimuli in the queues it fills (that is its effect, not a
                // fault); enough must remain for a 99th percentile.
                if !(q.len() >= 9_900 && l.len() >= 5_000) {
                    return Err(format!("{kind}: {} quiet, {} loaded records", q.len(), l.len()));
                }
                eprintln!(
                    "{kind}: quiet p50 {} p99 {} ns | under net load p50 {} p99 {} ns",
                    q[q.len() / 2],
                    p99(&q),
                    l[l.len() / 2],
                    p99(&l)
                );
                if p99(&l) <= p99(&q) {
                    return Err(format!("{kind}: p99 under load {} ns <= quiet {} ns", p99(&l), p99(&q)));
                }
            }
            Ok(())
        };
        let mut failures = Vec::new();
        for n in 1..=3 {
            match attempt() {
                Ok(()) => break,
                Err(e) => {
                    eprintln!("attempt {n}: {e}");
                    failures.push(e);
                }
            }
        }
        let passed = failures.len() < 3;
        stop_responder.store(true, Ordering::Relaxed);
        served.join().unwrap().unwrap();

        assert!(passed, "no attempt met every check: {failures:?}");
    });
    drop(bed);
}
