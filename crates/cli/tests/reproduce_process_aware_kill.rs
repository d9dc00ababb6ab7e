//! `irqlab reproduce process-aware --live --quick` killed with SIGKILL
//! (issue 20: restored on every exit path): once in its vanilla softirq
//! point (threaded NAPI off, RPS to the measured CPU) and once under the
//! process-aware controller (threaded NAPI on, the kthread's scheduling
//! and affinity); each time the next `control status` names the changes
//! as leftovers of the killed pid, and `control revert --all` puts the
//! real values back (sysfs files read, the kthread's scheduling and CPUs
//! asked of the kernel). Live: IRQLAB_LIVE_TESTS=1, as root.

mod common;

use common::{irqlab, live_tests_enabled};
use irqlab_host::journal::sched;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const THREADED: &str = "/sys/class/net/irqlab-b/threaded";
const RPS: &str = "/sys/class/net/irqlab-b/queues/rx-0/rps_cpus";

fn entries() -> Vec<serde_json::Value> {
    let out = irqlab().args(["control", "status", "--json", "-"]).output().unwrap();
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    doc["entries"].as_array().cloned().unwrap_or_default()
}

fn read(path: &str) -> String {
    std::fs::read_to_string(path).unwrap().trim().to_string()
}

fn start() -> Child {
    irqlab().args(["reproduce", "process-aware", "--live", "--quick"]).stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap()
}

/// Waits (up to 120 s: the simulated half runs first) until the journal
/// holds an entry `pick` accepts.
fn wait_for_entry(child: &mut Child, what: &str, pick: impl Fn(&serde_json::Value) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(120);
    while !entries().iter().any(&pick) {
        assert!(child.try_wait().unwrap().is_none(), "the run ended before {what}");
        assert!(Instant::now() < deadline, "no {what} within 120 s");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// kill -9, then the leftovers: every non-testbed one is the killed pid's.
fn kill_9(child: &mut Child) -> Vec<serde_json::Value> {
    let owner = child.id();
    assert!(Command::new("kill").args(["-9", &owner.to_string()]).status().unwrap().success());
    let _ = child.wait();
    let left: Vec<_> = entries().into_iter().filter(|e| e["state"] == "leftover").collect();
    assert!(!left.is_empty(), "nothing named after kill -9");
    for e in left.iter().filter(|e| e["object"]["kind"] != "testbed") {
        assert_eq!(e["owner"]["pid"].as_u64(), Some(u64::from(owner)), "{e}");
    }
    left
}

fn names_file(left: &[serde_json::Value], path: &str) -> bool {
    left.iter().any(|e| e["object"]["kind"] == "file" && e["object"]["path"] == path)
}

fn revert_all() {
    let out = irqlab().args(["control", "revert", "--all"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let left: Vec<_> = entries().into_iter().filter(|e| e["state"] != "persistent").collect();
    assert!(left.is_empty(), "entries left after revert --all: {left:?}");
}

fn napi_tid() -> i32 {
    irqlab_host::testbed::napi_threads("irqlab-b").first().expect("a napi/irqlab-b-* kthread").pid
}

#[test]
fn after_kill_9_the_leftovers_are_named_and_revert_all_restores_every_value() {
    if !live_tests_enabled("after_kill_9_the_leftovers_are_named_and_revert_all_restores_every_value") {
        return;
    }
    // The testbed is held here, so it outlives the killed runs and the
    // device's values can be read after the revert.
    let made_testbed = !std::path::Path::new("/run/netns/irqlab-b").exists();
    let up = irqlab().args(["testbed", "up"]).output().unwrap();
    assert_eq!(up.status.code(), Some(0), "{}", String::from_utf8_lossy(&up.stderr));
    let (threaded, rps) = (read(THREADED), read(RPS));

    // 1. In the vanilla softirq point: threaded NAPI off, RPS on.
    let mut child = start();
    wait_for_entry(&mut child, "the rps_cpus change", |e| e["object"]["path"] == RPS);
    let left = kill_9(&mut child);
    assert!(names_file(&left, THREADED) && names_file(&left, RPS), "threaded and rps_cpus named: {left:?}");
    revert_all();
    assert_eq!((read(THREADED), read(RPS)), (threaded.clone(), rps.clone()), "threaded and rps_cpus restored");

    // 2. Under the process-aware controller (the third kernel of the
    // first rate): the kthread's scheduling and CPUs changed. Switching
    // threaded NAPI off and on again in the first two kernels made a new
    // kthread; the kernel starts each with the same setting, which the
    // testbed's had before the run.
    let napi = napi_tid();
    let (attr, cpus) = (sched::get(napi).unwrap(), irqlab_host::rt::affinity(napi).unwrap());
    let mut child = start();
    let is_napi_sched = |e: &serde_json::Value| {
        e["object"]["kind"] == "thread-sched" && e["object"]["thread"]["comm"].as_str().is_some_and(|c| c.starts_with("napi/irqlab-b"))
    };
    wait_for_entry(&mut child, "the controller's change of the kthread", is_napi_sched);
    let left = kill_9(&mut child);
    let kthread = left.iter().find(|e| is_napi_sched(e)).unwrap_or_else(|| panic!("the kthread's scheduling named: {left:?}"));
    let tid = kthread["object"]["thread"]["tid"].as_i64().unwrap() as i32;
    assert!(
        left.iter().any(|e| e["object"]["kind"] == "thread-affinity" && e["object"]["thread"]["tid"] == tid),
        "the kthread's CPUs named: {left:?}"
    );
    assert!(names_file(&left, THREADED), "threaded named: {left:?}");
    // The floor (SCHED_OTHER nice 0) may be the kthread's own setting; its
    // CPUs the controller changed for sure (pinned to the measured CPU).
    assert_ne!(irqlab_host::rt::affinity(tid).unwrap(), cpus, "the controller had pinned it");
    revert_all();
    assert_eq!(read(THREADED), threaded, "threaded restored");
    assert_eq!(napi_tid(), tid, "the same kthread");
    assert_eq!(sched::get(tid).unwrap(), attr, "the kthread's scheduling restored");
    assert_eq!(irqlab_host::rt::affinity(tid).unwrap(), cpus, "the kthread's CPUs restored");
    if made_testbed {
        let _ = irqlab().args(["testbed", "down"]).output();
    }
}
