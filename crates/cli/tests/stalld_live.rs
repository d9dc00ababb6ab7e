//! Issue 54: irqlab beside stalld. stalld is packaged neither by Debian
//! (12, 13, sid) nor by Ubuntu (24.04 to 25.10), checked in their archives'
//! package lists on 2026-11-30, so no real stalld runs here: irqlab finds
//! it by its process name, and this test stands one up under that name (a
//! copy of `sleep` called `stalld`). A run that keeps threads runnable
//! without running them (the probe's SCHED_FIFO spin) warns that stalld
//! would boost them and says how to keep it off (its `--ignore_threads`,
//! read only at its start); without a stalld, no warning. `doctor` lists it.
//! A thread boosted to SCHED_DEADLINE and set back during the probe's run,
//! as stalld boosts, is named stalld's boost in the gap sources.

mod common;
use common::*;
use irqlab_host::journal::sched::{self, SchedAttr};
use std::process::{Child, Command};
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// One test at a time: each stands up its own stalld, and the first
/// asserts on a machine with none.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// A process whose name is `stalld`, killed when dropped.
struct FakeStalld {
    child: Child,
    _dir: tempfile::TempDir,
}

impl FakeStalld {
    fn start() -> FakeStalld {
        let dir = tempfile::tempdir().unwrap();
        let program = dir.path().join("stalld");
        std::fs::copy("/bin/sleep", &program).unwrap();
        let child = Command::new(&program).arg("120").spawn().unwrap();
        FakeStalld { child, _dir: dir }
    }
}

impl Drop for FakeStalld {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn probe_stderr() -> String {
    let out_dir = tempfile::tempdir().unwrap();
    let json = out_dir.path().join("curve.json");
    let out = run(&["measure", "interference", "--duration", "1s", "--json", path_str(&json)]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    stderr(&out)
}

#[test]
fn a_probe_beside_stalld_warns_that_it_would_boost_the_starved_threads() {
    if !live::enabled_as_root("a_probe_beside_stalld_warns_that_it_would_boost_the_starved_threads") {
        return;
    }
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let quiet = probe_stderr();
    assert!(!quiet.contains("stalld"), "no stalld runs, yet: {quiet}");

    let stalld = FakeStalld::start();
    let pid = stalld.child.id();
    let warned = probe_stderr();
    assert!(warned.contains(&format!("warning: stalld (pid {pid}) runs")), "{warned}");
    assert!(warned.contains("--ignore_threads"), "the warning says how to keep stalld off: {warned}");

    let doctor = run(&["doctor", "--json", "-"]);
    let doc: serde_json::Value = serde_json::from_slice(&doctor.stdout).unwrap();
    let found = doc["other_tools"].as_array().unwrap().iter().find(|t| t["name"] == "stalld").cloned();
    let found = found.unwrap_or_else(|| panic!("doctor lists no stalld: {:#}", doc["other_tools"]));
    assert!(found["running"].as_array().unwrap().iter().any(|p| p == pid), "{found:#}");
}

/// A thread running `body` (given `stop`) until `stop` is set; its tid.
fn thread_until(stop: &Arc<AtomicBool>, body: impl FnOnce(&AtomicBool) + Send + 'static) -> (std::thread::JoinHandle<()>, i32) {
    let tid = Arc::new(AtomicI32::new(0));
    let (told, stop) = (tid.clone(), stop.clone());
    let handle = std::thread::spawn(move || {
        told.store(nix::unistd::gettid().as_raw(), Ordering::SeqCst);
        body(&stop);
    });
    while tid.load(Ordering::SeqCst) == 0 {
        std::thread::sleep(Duration::from_millis(1));
    }
    (handle, tid.load(Ordering::SeqCst))
}

/// A thread spinning at SCHED_OTHER on `cpu` until `stop`; its tid.
fn spinner(cpu: usize, stop: &Arc<AtomicBool>) -> (std::thread::JoinHandle<()>, i32) {
    thread_until(stop, move |stop| {
        let mut only = nix::sched::CpuSet::new();
        only.set(cpu).unwrap();
        nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(0), &only).unwrap();
        while !stop.load(Ordering::Relaxed) {
            std::hint::spin_loop();
        }
    })
}

/// stalld's boost, done as stalld does it (sched_setattr to
/// SCHED_DEADLINE, then the thread's own policy back; its defaults: 20 us
/// every 1 s for 3 s) but denser and shorter, to be seen in a short run:
/// 50 us every 10 ms for 1.5 s, on a thread the probe's SCHED_FIFO spin
/// starves. A second thread set to SCHED_DEADLINE the same way stays
/// there past the run: a deadline thread of its own, not a boost. A
/// pinned thread may take SCHED_DEADLINE only while RT throttling is off
/// (the probe lifts it for its run; stalld turns it off itself), so the
/// boosts wait for that.
#[test]
fn a_thread_boosted_to_deadline_beside_stalld_is_named_as_stallds_boost() {
    if !live::enabled_as_root("a_thread_boosted_to_deadline_beside_stalld_is_named_as_stallds_boost") {
        return;
    }
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let _stalld = FakeStalld::start();
    let cpu = std::thread::available_parallelism().map_or(1, |n| n.get()) - 1;
    let stop = Arc::new(AtomicBool::new(false));
    let (boosted_thread, boosted) = spinner(cpu, &stop);
    let (kept_thread, kept) = spinner(cpu, &stop);
    let out_dir = tempfile::tempdir().unwrap();
    let json_path = out_dir.path().join("curve.json");
    let cpu_arg = cpu.to_string();
    let probe = irqlab()
        .args(["measure", "interference", "--cpu", &cpu_arg, "--duration", "5s", "--json", path_str(&json_path)])
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let lifted = Instant::now();
    while std::fs::read_to_string("/proc/sys/kernel/sched_rt_runtime_us").unwrap().trim() != "-1" {
        assert!(lifted.elapsed() < Duration::from_secs(20), "the probe never lifted RT throttling");
        std::thread::sleep(Duration::from_millis(5));
    }
    std::thread::sleep(Duration::from_millis(500));
    let boost = SchedAttr::Deadline { runtime_ns: 50_000, deadline_ns: 10_000_000, period_ns: 10_000_000 };
    sched::set(boosted, boost).expect("boost");
    sched::set(kept, boost).expect("a deadline thread");
    std::thread::sleep(Duration::from_millis(1500));
    sched::set(boosted, SchedAttr::Other { nice: 0 }).expect("the boost ends");
    let out = probe.wait_with_output().unwrap();
    sched::set(kept, SchedAttr::Other { nice: 0 }).unwrap();
    stop.store(true, Ordering::Relaxed);
    boosted_thread.join().unwrap();
    kept_thread.join().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));

    let doc = json(&json_path);
    let totals = doc["sources"]["totals"].as_array().unwrap();
    // A thread is a source per policy it ran at: the one at SCHED_DEADLINE.
    let label = |tid: i32| {
        totals
            .iter()
            .filter(|t| t["pid"] == tid)
            .map(|t| t["label"].as_str().unwrap().to_string())
            .find(|l| l.contains(" DEADLINE"))
            .unwrap_or_else(|| panic!("thread {tid} is no gap source at SCHED_DEADLINE: {totals:#?}"))
    };
    assert!(label(boosted).ends_with("DEADLINE (stalld's boost)"), "{}", label(boosted));
    assert!(label(kept).ends_with(" DEADLINE"), "still at SCHED_DEADLINE after the run: {}", label(kept));
    assert!(doc["sources"]["note"].as_str().unwrap().contains("stalld's boosts"), "{}", doc["sources"]["note"]);
}

/// A persisted thread policy that stalld then boosts (its thread, at
/// SCHED_DEADLINE, set here as stalld sets it) is shown drifted in
/// `control status`, by stalld.
#[test]
fn a_persisted_policy_stalld_boosted_is_shown_drifted_by_stalld() {
    if !live::enabled_as_root("a_persisted_policy_stalld_boosted_is_shown_drifted_by_stalld") {
        return;
    }
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let stalld = FakeStalld::start();
    let stop = Arc::new(AtomicBool::new(false));
    let (sleeper, tid) = thread_until(&stop, |stop| {
        while !stop.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_millis(1));
        }
    });
    let set = run(&["control", "threads", &format!("pid:{tid}"), "--policy", "other:5", "--persist"]);
    assert_eq!(set.status.code(), Some(0), "{}", stderr(&set));
    let boosted = sched::set(tid, SchedAttr::Deadline { runtime_ns: 50_000, deadline_ns: 10_000_000, period_ns: 10_000_000 });
    let status = run(&["control", "status", "--json", "-"]);
    let doc: serde_json::Value = serde_json::from_slice(&status.stdout).unwrap();
    let entry = doc["entries"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["object"]["kind"] == "thread-sched" && e["object"]["thread"]["tid"] == tid)
        .cloned();
    let _ = sched::set(tid, SchedAttr::Other { nice: 0 });
    stop.store(true, Ordering::Relaxed);
    sleeper.join().unwrap();
    if let Some(id) = entry.as_ref().and_then(|e| e["id"].as_str()) {
        let revert = run(&["control", "revert", id]);
        assert_eq!(revert.status.code(), Some(0), "{}", stderr(&revert));
    }
    boosted.expect("the boost");
    let entry = entry.unwrap_or_else(|| panic!("no journal entry for thread {tid}: {doc:#}"));
    assert_eq!(entry["now"], "drifted", "{entry:#}");
    let by = &entry["by"];
    assert_eq!(by["tool"], "stalld", "{entry:#}");
    assert!(by["pids"].as_array().unwrap().iter().any(|p| *p == stalld.child.id()), "{entry:#}");
}
