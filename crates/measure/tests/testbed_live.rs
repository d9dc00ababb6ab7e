//! Live: the testbed comes up with GRO and threaded NAPI on the root side,
//! traffic flows from both hosts to the root namespace, and everything named
//! irqlab-* is gone after the guard drops. Runs only with
//! IRQLAB_LIVE_TESTS=1 (as root).

use irqlab_host::testbed::{Side, Testbed};
use irqlab_measure::traffic::{self, udp_sink, Kind, Plan, Schedule};
use std::net::{Ipv4Addr, SocketAddrV4};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

fn live() -> bool {
    if std::env::var("IRQLAB_LIVE_TESTS").as_deref() == Ok("1") {
        return true;
    }
    eprintln!("skipped: live test (set IRQLAB_LIVE_TESTS=1 and run as root to touch the network)");
    false
}

#[test]
fn testbed_carries_ping_and_udp_and_refuses_outside_targets() {
    if !live() {
        return;
    }
    let bed = Testbed::up().expect("testbed up");
    let layout = bed.layout().unwrap();
    for host in &layout.hosts {
        assert!(host.gro, "GRO off on {}", host.root_device);
        assert!(host.threaded_napi, "threaded NAPI off on {}", host.root_device);
        assert!(!host.napi_threads.is_empty(), "no napi/{}-* thread", host.root_device);
    }
    assert_ne!(bed.root_addr(Side::A), bed.root_addr(Side::B));

    // Ping flood a → root: every request answered (replies exist unless
    // icmp_echo_ignore_all is set, which this test does not touch).
    let stop = Arc::new(AtomicBool::new(false));
    let plan = Plan {
        kind: Kind::PingFlood,
        target: bed.root_addr(Side::A),
        schedule: Schedule::Periodic { interval_ns: 100_000 },
        size: 56,
        duration_ns: 200_000_000,
    };
    let napi = &layout.hosts[0].napi_threads[0];
    let napi_ticks = || -> u64 {
        // Time on CPU in ns, first field of schedstat.
        let stat = std::fs::read_to_string(format!("/proc/{}/schedstat", napi.pid)).unwrap();
        stat.split_whitespace().next().unwrap().parse().unwrap()
    };
    let ticks_before = napi_ticks();
    let ping = traffic::send_from(&bed, Side::A, plan, stop.clone()).unwrap().join().unwrap().unwrap();
    // The root side's NAPI thread did the receiving.
    assert!(napi_ticks() > ticks_before, "{} got no CPU time from the flood", napi.comm);
    assert!(ping.sent >= 1000, "{ping:?}");
    let ignoring = std::fs::read_to_string("/proc/sys/net/ipv4/icmp_echo_ignore_all").unwrap().trim() == "1";
    if ignoring {
        eprintln!("reply ratio not checked: net.ipv4.icmp_echo_ignore_all = 1 on this machine");
    } else {
        assert!(ping.replies as f64 >= 0.9 * ping.sent as f64, "{ping:?}");
    }

    // UDP b → a sink in the root namespace.
    let server = SocketAddrV4::new(bed.root_addr(Side::B), 47_123);
    let sink_stop = Arc::new(AtomicBool::new(false));
    let s = sink_stop.clone();
    let sink = std::thread::spawn(move || udp_sink(server, false, &s));
    std::thread::sleep(std::time::Duration::from_millis(50));
    let plan = Plan {
        kind: Kind::Udp { port: 47_123 },
        target: bed.root_addr(Side::B),
        schedule: Schedule::Periodic { interval_ns: 50_000 },
        size: 64,
        duration_ns: 200_000_000,
    };
    let udp = traffic::send_from(&bed, Side::B, plan, stop).unwrap().join().unwrap().unwrap();
    std::thread::sleep(std::time::Duration::from_millis(50));
    sink_stop.store(true, Ordering::Relaxed);
    let received = sink.join().unwrap().unwrap();
    assert!(udp.sent >= 1000, "{udp:?}");
    assert!(received as f64 >= 0.9 * udp.sent as f64, "sent {} received {received}", udp.sent);

    // Outside the testbed: refused before anything is sent.
    let outside = Plan { target: Ipv4Addr::new(192, 0, 2, 1), ..plan };
    let err = traffic::send_from(&bed, Side::B, outside, Arc::new(AtomicBool::new(false))).unwrap_err();
    assert_eq!(err.exit_code(), 2, "{err}");

    let persistent = layout.persistent;
    drop(bed);
    // Gone, unless it is persistent (`irqlab testbed up`) or another
    // process (a parallel test binary) still holds a guard.
    if !persistent && !irqlab_host::testbed::in_use() {
        assert_eq!(Testbed::status().unwrap(), None);
        assert!(!std::path::Path::new("/run/netns/irqlab-a").exists());
        assert!(!std::path::Path::new("/sys/class/net/irqlab-b").exists());
    } else {
        eprintln!("teardown not checked: the testbed is persistent ({persistent}) or in use by another test binary");
    }
}
