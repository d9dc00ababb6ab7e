//! `irqlab reproduce bh-threshold --live --quick` against the real binary on
//! the testbed (issue 19): the three setups played in full beside the
//! paper's and the simulated numbers, the controller acting, every change
//! restored; Ctrl-C writes the partial document; after kill -9 the leftover
//! is named and `control revert --all` undoes it. Whether the paper's
//! relations hold is this machine's result (docs/performance.md), not asserted here:
//! the test holds the mechanism. Live: IRQLAB_LIVE_TESTS=1, as root.

mod common;

use common::live::{self, control_entries, start_with_stderr, wait_at_most};
use common::{irqlab, json, live_tests_enabled};
use std::process::{Child, Command};
use std::sync::mpsc;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The tests share the testbed and its NAPI kthread.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn assert_journal_clean(after: &str) {
    // A restored change leaves the journal; only kept ones (--persist) stay.
    let left: Vec<_> = control_entries().into_iter().filter(|e| e["state"] != "persistent").collect();
    assert!(left.is_empty(), "after {after}: journal entries not restored: {left:?}");
}

/// Starts the live reproduction; its stderr lines arrive on the channel.
fn start(json_path: &std::path::Path) -> (Child, mpsc::Receiver<String>) {
    let args = ["reproduce", "bh-threshold", "--live", "--quick", "--json"];
    let mut all: Vec<&std::ffi::OsStr> = args.iter().map(std::ffi::OsStr::new).collect();
    all.push(json_path.as_os_str());
    start_with_stderr(&all)
}

fn wait_for_line(rx: &mpsc::Receiver<String>, wanted: &str) {
    live::wait_for_line(rx, wanted, Duration::from_secs(180));
}

#[test]
fn live_reproduction_plays_three_setups_beside_paper_and_simulation() {
    if !live_tests_enabled("live_reproduction_plays_three_setups_beside_paper_and_simulation") {
        return;
    }
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let (json_path, html, md) = (dir.path().join("r.json"), dir.path().join("r.html"), dir.path().join("r.md"));
    let out = irqlab()
        .args(["reproduce", "bh-threshold", "--live", "--quick", "--json"])
        .arg(&json_path)
        .arg("--html")
        .arg(&html)
        .arg("--markdown")
        .arg(&md)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let stdout = String::from_utf8_lossy(&out.stdout);
    eprintln!("{stdout}{stderr}");
    // 0: every relation holds here; 1: one does not (this machine's result).
    assert!(matches!(out.status.code(), Some(0 | 1)), "exit {:?}", out.status.code());
    let doc = json(&json_path);
    assert_eq!((doc["schema"].as_str(), doc["complete"].as_bool()), (Some("irqlab/reproduce/v1"), Some(true)));
    assert_eq!(doc["all_hold"].as_bool(), Some(out.status.code() == Some(0)));
    let runs = doc["details"]["runs"].as_array().unwrap();
    let names: Vec<&str> = runs.iter().map(|r| r["setup"].as_str().unwrap()).collect();
    assert_eq!(names, ["no flood", "flood, kernel default", "flood, bh-budget"]);
    for r in runs {
        assert_eq!((r["complete"].as_bool(), r["frames"].as_u64()), (Some(true), Some(100)), "{}", r["setup"]);
        assert_eq!(r["inter_frame_ms"].as_array().unwrap().len(), 99);
        // The work is real: a frame's decode takes at least its 3.5 ms of CPU.
        assert!(r["decode_cpu_ms"].as_f64().unwrap() >= 3.0, "{}: {}", r["setup"], r["decode_cpu_ms"]);
        assert!(!r["bh_us_per_ms"].as_array().unwrap().is_empty(), "{}: no BH series", r["setup"]);
    }
    let rate = |i: usize, key: &str| runs[i][key].as_f64().unwrap();
    assert_eq!(rate(0, "received_per_s"), 0.0, "no flood, nothing received");
    for i in [1, 2] {
        assert!(rate(i, "received_per_s") > 1_000.0 && rate(i, "napi_packets_per_s") > 1_000.0, "{}: the flood did not arrive", names[i]);
    }
    // The kernel default is only watched; the controller acts.
    assert_eq!(runs[1]["throttled_periods"].as_u64(), Some(0));
    assert!(runs[2]["throttled_periods"].as_u64().unwrap() > 0, "bh-budget never throttled the kthread under the flood");
    // Every row has the three columns, checks are judged, all printed.
    let rows = doc["rows"].as_array().unwrap();
    assert!(rows.len() >= 20);
    for row in rows {
        assert!(row["live"].is_number() && row["simulated"].is_number(), "{row}");
        assert!(stdout.contains(row["metric"].as_str().unwrap()));
    }
    assert_eq!(rows.iter().filter(|r| r["holds"].is_boolean()).count(), 3);
    assert!(doc["details"]["default_kernel"].as_str().unwrap().contains("Under the flood with the kernel's default"));
    assert!(std::fs::read_to_string(&md).unwrap().contains("| metric | paper | simulated | live | unit | holds (live) |"));
    assert!(std::fs::read_to_string(&html).unwrap().matches("<svg").count() >= 5, "Fig. 4 x3 and Fig. 5 x2");
    assert_journal_clean("a full run");
}

#[test]
fn ctrl_c_writes_the_partial_document_and_restores() {
    if !live_tests_enabled("ctrl_c_writes_the_partial_document_and_restores") {
        return;
    }
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let json_path = dir.path().join("r.json");
    let (mut child, rx) = start(&json_path);
    wait_for_line(&rx, "live: flood, kernel default");
    std::thread::sleep(Duration::from_millis(1_500));
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let status = wait_at_most(&mut child, Duration::from_secs(20));
    assert_eq!(status.code(), Some(1), "a stopped run exits 1");
    let doc = json(&json_path);
    assert_eq!(doc["complete"], false);
    let runs = doc["details"]["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 2, "no flood done, kernel default stopped");
    assert_eq!((runs[0]["complete"].as_bool(), runs[1]["complete"].as_bool()), (Some(true), Some(false)));
    assert!(runs[1]["frames"].as_u64().unwrap() < 100);
    assert_journal_clean("Ctrl-C");
}

#[test]
fn after_kill_9_the_leftover_is_named_and_reverted() {
    if !live_tests_enabled("after_kill_9_the_leftover_is_named_and_reverted") {
        return;
    }
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let (mut child, rx) = start(&dir.path().join("r.json"));
    wait_for_line(&rx, "live: flood, bh-budget");
    // The controller journals its changes within a second of starting.
    let deadline = Instant::now() + Duration::from_secs(10);
    while !control_entries().iter().any(|e| e["object"]["kind"] == "thread-sched") {
        assert!(Instant::now() < deadline, "bh-budget made no journalled change");
        std::thread::sleep(Duration::from_millis(100));
    }
    let owner = child.id();
    assert!(Command::new("kill").args(["-9", &owner.to_string()]).status().unwrap().success());
    wait_at_most(&mut child, Duration::from_secs(5));
    let leftovers: Vec<_> = control_entries().into_iter().filter(|e| e["state"] == "leftover").collect();
    assert!(!leftovers.is_empty(), "nothing named after kill -9");
    // The changes the killed run made are its own; the testbed it held is
    // named too (abandoned, no owner).
    let (bed, changes): (Vec<_>, Vec<_>) = leftovers.iter().partition(|e| e["object"]["kind"] == "testbed");
    assert!(!changes.is_empty() && changes.iter().all(|e| e["owner"]["pid"] == owner), "{leftovers:?}");
    assert!(bed.len() <= 1, "{bed:?}");
    let revert = irqlab().args(["control", "revert", "--all"]).output().unwrap();
    assert_eq!(revert.status.code(), Some(0), "{}", String::from_utf8_lossy(&revert.stderr));
    assert_journal_clean("kill -9 and revert --all");
}
