//! `irqlab control` as a user runs it: bad policies and matches exit 2
//! naming the value, and (live: IRQLAB_LIVE_TESTS=1, as root) the testbed's
//! NAPI kthread under SCHED_DEADLINE while the command runs, back to its
//! own policy after SIGINT, after SIGTERM, and after a real SIGKILL
//! followed by `irqlab control revert --all`, with the leftover named by
//! `control status` and `doctor` in between.

use irqlab_live::control::sched::{self, SchedAttr};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

mod common;
use common::{irqlab, live_tests_enabled};

/// The live tests control the same kthread: one at a time.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

#[test]
fn bad_policies_and_matches_exit_2_naming_the_value() {
    for (args, says) in [
        (vec!["threads", "napi:x", "--policy", "fifo:100"], "--policy fifo:100: priority `100` is outside 1..=99"),
        (vec!["threads", "napi:x", "--policy", "deadline:10ms/1ms"], "runtime <= deadline <= period"),
        (vec!["threads", "napi:x", "--policy", "turbo"], "--policy turbo: unknown policy"),
        (vec!["threads", "nic0", "--policy", "idle"], "MATCH nic0: expected napi:DEV"),
        (vec!["threads", "ksoftirqd:100000", "--policy", "idle"], "ksoftirqd/0"),
        (vec!["threads", "pid:2147483647", "--policy", "idle"], "no thread 2147483647"),
        (vec!["revert", "no-such-entry"], "no control journal entry no-such-entry"),
    ] {
        let out = irqlab().arg("control").args(&args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.starts_with("error: ") && err.contains(says), "{args:?}: {err}");
    }
    let out = irqlab().args(["control", "revert"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "revert needs an ID or --all");
}

#[test]
fn without_cap_sys_nice_it_exits_3_naming_it() {
    if !common::is_root() || !std::path::Path::new("/usr/bin/setpriv").exists() {
        eprintln!("without_cap_sys_nice_it_exits_3_naming_it: NOT CHECKED: needs root and setpriv");
        return;
    }
    let me = std::process::id().to_string();
    let out = Command::new("setpriv")
        .args(["--inh-caps=-all", "--bounding-set=-sys_nice", env!("CARGO_BIN_EXE_irqlab"), "control", "threads"])
        .arg(format!("pid:{me}"))
        .args(["--policy", "fifo:10", "--duration", "1s"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert!(err.contains("CAP_SYS_NICE"), "{err}");
}

/// The testbed's `napi/irqlab-b-*` kthread, with the testbed up (made here
/// if it was not, and then removed by the returned guard).
struct Napi {
    tid: i32,
    made_testbed: bool,
}

impl Napi {
    fn up() -> Napi {
        let made_testbed = !std::path::Path::new("/run/netns/irqlab-b").exists();
        let out = irqlab().args(["testbed", "up"]).output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
        let tid = irqlab_live::testbed::napi_threads("irqlab-b").first().expect("a napi/irqlab-b-* kthread").pid;
        Napi { tid, made_testbed }
    }

    fn attr(&self) -> SchedAttr {
        sched::get(self.tid).unwrap()
    }

    /// Waits until the kthread's policy is `want` (the command applies it
    /// right after it starts).
    fn wait_for(&self, want: impl Fn(SchedAttr) -> bool, what: &str) {
        let start = Instant::now();
        while !want(self.attr()) {
            assert!(start.elapsed() < Duration::from_secs(10), "{what}: still {}", self.attr());
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Napi {
    fn drop(&mut self) {
        if self.made_testbed {
            let _ = irqlab().args(["testbed", "down"]).output();
        }
    }
}

fn is_deadline(a: SchedAttr) -> bool {
    a == SchedAttr::Deadline { runtime_ns: 1_000_000, deadline_ns: 10_000_000, period_ns: 10_000_000 }
}

fn control_deadline() -> Child {
    irqlab()
        .args(["control", "threads", "napi:irqlab-b", "--policy", "deadline:1ms/10ms"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

fn wait_at_most(child: &mut Child, limit: Duration) -> std::process::ExitStatus {
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        assert!(start.elapsed() < limit, "irqlab control did not end within {limit:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn deadline_on_the_napi_thread_is_undone_after_sigint_and_sigterm() {
    if !live_tests_enabled("deadline_on_the_napi_thread_is_undone_after_sigint_and_sigterm") {
        return;
    }
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let napi = Napi::up();
    let original = napi.attr();
    assert!(!is_deadline(original));
    for signal in [libc::SIGINT, libc::SIGTERM] {
        let mut child = control_deadline();
        napi.wait_for(is_deadline, "under control");
        // A second controller of the same thread is refused, naming the first.
        let second = irqlab().args(["control", "threads", "napi:irqlab-b", "--policy", "fifo:10"]).output().unwrap();
        let err = String::from_utf8_lossy(&second.stderr);
        assert_eq!(second.status.code(), Some(2), "{err}");
        assert!(err.contains(&format!("irqlab process {}", child.id())), "{err}");
        // SAFETY: signalling our own child.
        unsafe { libc::kill(child.id() as i32, signal) };
        wait_at_most(&mut child, Duration::from_secs(10));
        assert_eq!(napi.attr(), original, "not restored after signal {signal}");
    }
}

#[test]
fn after_sigkill_the_leftover_is_named_and_reverted() {
    if !live_tests_enabled("after_sigkill_the_leftover_is_named_and_reverted") {
        return;
    }
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let napi = Napi::up();
    let original = napi.attr();
    let mut child = control_deadline();
    napi.wait_for(is_deadline, "under control");
    let owner = child.id();
    // A real kill -9: no handler, no destructor, no exit hook runs.
    let killed = Command::new("kill").args(["-9", &owner.to_string()]).status().unwrap();
    assert!(killed.success());
    wait_at_most(&mut child, Duration::from_secs(5));
    assert!(is_deadline(napi.attr()), "SIGKILL cannot have restored it");

    let status = irqlab().args(["control", "status", "--json", "-"]).output().unwrap();
    let doc: serde_json::Value = serde_json::from_slice(&status.stdout).unwrap();
    let leftover = doc["entries"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["object"]["thread"]["tid"] == napi.tid)
        .unwrap_or_else(|| panic!("no entry for tid {}: {doc}", napi.tid));
    assert_eq!(leftover["state"], "leftover", "{leftover}");
    assert_eq!(leftover["owner"]["pid"], owner);
    assert_eq!(leftover["new"]["attr"]["policy"], "deadline");

    let doctor = common::doctor_report();
    let named = doctor["leftovers"].as_array().unwrap().iter().any(|l| l.as_str().unwrap().contains(&format!("tid {}", napi.tid)));
    assert!(named, "doctor does not name the leftover: {}", doctor["leftovers"]);

    let revert = irqlab().args(["control", "revert", "--all"]).output().unwrap();
    assert_eq!(revert.status.code(), Some(0), "{}", String::from_utf8_lossy(&revert.stderr));
    assert_eq!(napi.attr(), original, "revert --all did not restore it");
    let after = irqlab().args(["control", "status", "--json", "-"]).output().unwrap();
    let doc: serde_json::Value = serde_json::from_slice(&after.stdout).unwrap();
    assert!(doc["entries"].as_array().unwrap().iter().all(|e| e["object"]["thread"]["tid"] != napi.tid), "{doc}");
}

/// A controlled thread that exits ends the hold: reported, not a crash.
#[test]
fn a_thread_that_exits_mid_run_is_reported() {
    if !live_tests_enabled("a_thread_that_exits_mid_run_is_reported") {
        return;
    }
    let mut sleeper = Command::new("sleep").arg("1").spawn().unwrap();
    let out = irqlab()
        .args(["control", "threads", &format!("pid:{}", sleeper.id()), "--policy", "other:10", "--json", "-"])
        .output()
        .unwrap();
    let _ = sleeper.wait();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["schema"], "irqlab/control/v1");
    assert_eq!(doc["ended_by"], "threads exited");
    assert_eq!(doc["threads"][0]["exited"], true);
}
