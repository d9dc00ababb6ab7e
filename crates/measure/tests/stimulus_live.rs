//! The stimulus generator against a real responder (live: needs
//! IRQLAB_LIVE_TESTS=1 and root for the raw ICMP socket and SCHED_FIFO).

use irqlab_measure::stimulus::{generator, responder, GeneratorConfig, PathKind, Pattern, ResponderConfig};
use std::net::{Ipv4Addr, SocketAddrV4};
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

fn config(port: u16, count: u64, interval_ns: u64) -> GeneratorConfig {
    GeneratorConfig {
        target: Ipv4Addr::LOCALHOST,
        udp_port: port,
        paths: vec![PathKind::Icmp, PathKind::Udp],
        pattern: Pattern::periodic(interval_ns),
        count: Some(count),
        duration_ns: None,
        timeout_ns: 1_000_000_000,
        preflight: true,
        sender_priority: 0,
        log: None,
    }
}

#[test]
fn loopback_run_answers_every_stimulus_and_logs_every_record() {
    if !live_tests_enabled("loopback_run_answers_every_stimulus_and_logs_every_record") {
        return;
    }
    let r = responder::bind(&ResponderConfig { bind: SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0), priority: 50, cpu: None }).unwrap();
    let port = r.local_addr().unwrap().port();
    let stop_responder = AtomicBool::new(false);
    let dir = tempfile::tempdir().unwrap();
    let log_path = dir.path().join("records.csv");
    std::thread::scope(|s| {
        let served = s.spawn(|| r.serve(&stop_responder));
        let _stop = StopOnDrop([&stop_responder]);
        let mut calls = 0;
        let config = GeneratorConfig { log: Some(log_path.clone()), ..config(port, 2000, 500_000) };
        let report = generator::measure(&config, &AtomicBool::new(false), |_| calls += 1).unwrap();
        stop_responder.store(true, Ordering::Relaxed);
        let answered_by_responder = served.join().unwrap().unwrap();

        assert!(report.complete);
        assert!(calls >= 1);
        for p in &report.paths {
            eprintln!(
                "{}: sent {} answered {} lost {} late {} min {:?} p50 {:?} max {:?} stamps hw/sw/user {}/{}/{}",
                p.path.name(),
                p.sent,
                p.answered,
                p.lost,
                p.late,
                p.latency.min_ns,
                p.latency.p50_ns,
                p.latency.max_ns,
                p.hardware_stamps,
                p.software_stamps,
                p.user_stamps
            );
            assert_eq!(p.sent, 2000);
            assert_eq!(p.lost, 0, "{}", p.path.name());
            assert_eq!(p.answered + p.late, 2000);
            assert_eq!(p.software_stamps + p.hardware_stamps + p.user_stamps, p.answered);
            // Kernel timestamps on both ends of loopback: the transmit stamp
            // came back for (nearly) every stimulus.
            assert!(p.user_stamps * 100 <= p.answered, "{} user-space stamps", p.user_stamps);
            assert!(p.latency.min_ns.unwrap() > 0);
        }
        // The responder answered the UDP stimuli plus the preflight probe.
        assert!(answered_by_responder >= 2000, "{answered_by_responder}");
        let lines = std::fs::read_to_string(&log_path).unwrap().lines().count() as u64;
        let answered: u64 = report.paths.iter().map(|p| p.answered).sum();
        assert_eq!(lines, answered + 1, "one CSV line per record plus the header");
    });
}

#[test]
fn missing_responder_is_bad_input() {
    if !live_tests_enabled("missing_responder_is_bad_input") {
        return;
    }
    // A port nothing listens on: the kernel answers "port unreachable".
    let free = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let port = free.local_addr().unwrap().port();
    drop(free);
    let cfg = GeneratorConfig { paths: vec![PathKind::Udp], ..config(port, 10, 1_000_000) };
    let err = generator::measure(&cfg, &AtomicBool::new(false), |_| {}).unwrap_err();
    assert_eq!(err.exit_code(), 2, "{err}");
    assert!(err.to_string().contains("stimulus respond"), "{err}");
}

#[test]
fn responder_restart_mid_run_shows_as_lost_replies() {
    if !live_tests_enabled("responder_restart_mid_run_shows_as_lost_replies") {
        return;
    }
    let bind = |port| responder::bind(&ResponderConfig { bind: SocketAddrV4::new(Ipv4Addr::LOCALHOST, port), priority: 0, cpu: None });
    let first = bind(0).unwrap();
    let port = first.local_addr().unwrap().port();
    let stop_first = AtomicBool::new(false);
    let stop_second = AtomicBool::new(false);
    let cfg = GeneratorConfig { paths: vec![PathKind::Udp], ..config(port, 1500, 1_000_000) };
    std::thread::scope(|s| {
        let _stop = StopOnDrop([&stop_first, &stop_second]);
        let h1 = s.spawn(|| first.serve(&stop_first));
        let restarter = s.spawn(|| {
            // Down from 0.4 s to 0.8 s into the 1.5 s run.
            std::thread::sleep(std::time::Duration::from_millis(400));
            stop_first.store(true, Ordering::Relaxed);
            h1.join().unwrap().unwrap();
            std::thread::sleep(std::time::Duration::from_millis(400));
            let second = bind(port).unwrap();
            second.serve(&stop_second).unwrap()
        });
        let report = generator::measure(&cfg, &AtomicBool::new(false), |_| {}).unwrap();
        stop_second.store(true, Ordering::Relaxed);
        restarter.join().unwrap();
        let p = report.path(PathKind::Udp).unwrap();
        eprintln!("sent {} answered {} lost {} late {}", p.sent, p.answered, p.lost, p.late);
        assert_eq!(p.sent, 1500);
        // About 400 stimuli fell in the gap; the rest were answered.
        assert!(p.lost >= 200 && p.lost <= 700, "lost {}", p.lost);
        assert!(p.answered >= 700, "answered {}", p.answered);
        assert_eq!(p.answered + p.late + p.lost, p.sent);
    });
}
