//! Live measurements started with an affinity that excludes the CPU they
//! are asked to measure (`taskset -c 0 irqlab measure ... --cpu 1`): the
//! online CPUs come from /sys/devices/system/cpu/online, not from the
//! caller's affinity mask, and each measuring thread pins itself to its
//! CPU (allowed to root and to the same user). Live: IRQLAB_LIVE_TESTS=1,
//! as root; NOT CHECKED on a machine with one CPU.

use std::process::{Command, Output};

mod common;
use common::{live_tests_enabled, stderr};

/// The tests measure the same CPU at real-time priorities: one at a time.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn turn() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner())
}

/// Whether CPU 1 is online (else the test cannot say anything).
fn cpu_1_online(test: &str) -> bool {
    let online = std::fs::read_to_string("/sys/devices/system/cpu/online").unwrap();
    let cpus = irqlab_host::rt::parse_cpu_list(online.trim()).unwrap();
    if !cpus.contains(&1) {
        eprintln!("{test}: NOT CHECKED: CPU 1 is not online ({})", online.trim());
        return false;
    }
    true
}

/// `taskset -c 0 irqlab ARGS`.
fn on_cpu_0(args: &[&str]) -> Output {
    Command::new("taskset").args(["-c", "0"]).arg(env!("CARGO_BIN_EXE_irqlab")).args(args).output().expect("taskset (util-linux)")
}

fn document(out: &Output) -> serde_json::Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("--json -: {e}\n{}", String::from_utf8_lossy(&out.stdout)))
}

#[test]
fn interference_on_a_cpu_outside_the_callers_affinity() {
    let test = "interference_on_a_cpu_outside_the_callers_affinity";
    if !live_tests_enabled(test) || !cpu_1_online(test) {
        return;
    }
    let _turn = turn();
    let out = on_cpu_0(&["measure", "interference", "--cpu", "1", "--duration", "1s", "--json", "-"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let curve = document(&out);
    assert_eq!(curve["schema"], "irqlab/curve/v1");
    assert_eq!(curve["cpu"], 1, "{}", curve["cpu"]);
    assert!(!curve["points"].as_array().unwrap().is_empty());
}

#[test]
fn latency_on_a_cpu_outside_the_callers_affinity() {
    let test = "latency_on_a_cpu_outside_the_callers_affinity";
    if !live_tests_enabled(test) || !cpu_1_online(test) {
        return;
    }
    let _turn = turn();
    let out = on_cpu_0(&["measure", "latency", "--cpu", "1", "--interval", "1ms", "--duration", "200ms", "--json", "-"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let report = document(&out);
    assert_eq!(report["schema"], "irqlab/latency/v1");
    let threads = report["threads"].as_array().unwrap();
    assert_eq!(threads.len(), 1, "{threads:?}");
    assert_eq!(threads[0]["cpu"], 1);
    assert_eq!(threads[0]["cycles"], 200);
}

/// Without --cpu, every online CPU is measured, not just the caller's.
#[test]
fn latency_defaults_to_every_online_cpu_not_the_callers() {
    let test = "latency_defaults_to_every_online_cpu_not_the_callers";
    if !live_tests_enabled(test) || !cpu_1_online(test) {
        return;
    }
    let _turn = turn();
    let online = irqlab_host::rt::online_cpus().unwrap();
    let out = on_cpu_0(&["measure", "latency", "--interval", "1ms", "--duration", "100ms", "--json", "-"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let cpus: Vec<u64> = document(&out)["threads"].as_array().unwrap().iter().map(|t| t["cpu"].as_u64().unwrap()).collect();
    assert_eq!(cpus, online.iter().map(|&c| c as u64).collect::<Vec<_>>());
}
