//! `irqlab stimulus` and `irqlab load` against the real binary: bad input
//! and missing privilege exit with the codes of `docs/conventions.md`.

use std::process::{Command, Stdio};

mod common;
use common::{irqlab, live_tests_enabled};

fn run(args: &[&str]) -> (Option<i32>, String) {
    let out = irqlab().args(args).output().unwrap();
    (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn flags_that_make_no_sense_exit_2() {
    for args in [
        vec!["stimulus", "run", "--target", "127.0.0.1", "--rate", "1000000", "--count", "5"],
        vec!["stimulus", "run", "--target", "127.0.0.1", "--rate", "-3", "--count", "5"],
        vec!["stimulus", "run", "--target", "127.0.0.1", "--interval", "1ms", "--duty", "0", "--pattern", "burst"],
        vec!["stimulus", "run", "--target", "127.0.0.1", "--duration", "ten"],
        vec!["stimulus", "run", "--target", "no.such.host.invalid", "--count", "5"],
        vec!["stimulus", "respond", "--bind", "127.0.0.1"],
        vec!["load", "cpu", "--duration", "1"],
        vec!["load", "hackbench-like", "--groups", "0", "--duration", "10ms"],
    ] {
        let (code, err) = run(&args);
        assert_eq!(code, Some(2), "{args:?}: {err}");
        assert!(err.starts_with("error: "), "{args:?}: {err}");
    }
}

#[test]
fn a_port_in_use_exits_2() {
    let taken = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let bind = taken.local_addr().unwrap().to_string();
    let (code, err) = run(&["stimulus", "respond", "--bind", &bind, "--priority", "0"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("in use"), "{err}");
}

#[test]
fn a_target_without_responder_exits_2() {
    if !live_tests_enabled("a_target_without_responder_exits_2") {
        return;
    }
    let free = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let port = free.local_addr().unwrap().port().to_string();
    drop(free);
    let (code, err) = run(&["stimulus", "run", "--target", "127.0.0.1", "--port", &port, "--path", "udp", "--count", "5"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("port unreachable"), "{err}");
}

/// Without CAP_SYS_NICE (an unprivileged user through setpriv), asking for
/// SCHED_FIFO names the missing capability and exits 3; so does the raw
/// ICMP socket without CAP_NET_RAW.
#[test]
fn missing_privilege_exits_3() {
    if !live_tests_enabled("missing_privilege_exits_3") {
        return;
    }
    let as_nobody = |args: &[&str]| {
        let out = Command::new("setpriv")
            .args(["--reuid", "65534", "--regid", "65534", "--clear-groups", "--inh-caps=-all"])
            .arg(env!("CARGO_BIN_EXE_irqlab"))
            .args(args)
            .stdout(Stdio::null())
            .output()
            .unwrap();
        (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned())
    };
    let (code, err) = as_nobody(&["stimulus", "respond", "--bind", "127.0.0.1:0", "--priority", "80"]);
    assert_eq!(code, Some(3), "{err}");
    assert!(err.contains("CAP_SYS_NICE") || err.contains("CAP_IPC_LOCK"), "{err}");
    let (code, err) = as_nobody(&["measure", "latency", "--cpu", "0", "--duration", "10ms", "--priority", "80"]);
    assert_eq!(code, Some(3), "{err}");
    assert!(err.contains("CAP_"), "{err}");
    let (code, err) = as_nobody(&["stimulus", "run", "--target", "127.0.0.1", "--path", "icmp", "--count", "5"]);
    assert_eq!(code, Some(3), "{err}");
    assert!(err.contains("CAP_NET_RAW"), "{err}");
}
