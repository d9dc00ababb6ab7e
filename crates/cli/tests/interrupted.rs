//! Runs stopped by SIGINT or SIGTERM (issue 25, item 14): every command
//! writes what it has, marked `"complete": false`, and exits 1 ("the run
//! did not complete"), the convention docs/commands.md states.

use std::process::Child;
use std::time::{Duration, Instant};

mod common;
use common::{irqlab, json, path_str, repo_file};

/// Sends `signal` to `child` once it has run for a second, and waits (at
/// most a minute: a run that ignores the signal fails the test, not hangs).
fn stop_after_a_second(mut child: Child, signal: libc::c_int) -> std::process::ExitStatus {
    std::thread::sleep(Duration::from_secs(1));
    assert!(child.try_wait().unwrap().is_none(), "ended before the signal: make the run longer");
    // SAFETY: kill(2) on our own child's pid.
    assert_eq!(unsafe { libc::kill(child.id() as libc::pid_t, signal) }, 0);
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("still running a minute after the signal");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn an_interrupted_sim_exits_1_with_its_partial_result() {
    let dir = tempfile::tempdir().unwrap();
    let doc = dir.path().join("sim.json");
    let child = irqlab()
        .args(["sim", &repo_file("scenarios/examples/ping-flood.toml"), "--duration", "100000s", "--json", path_str(&doc)])
        .spawn()
        .unwrap();
    let status = stop_after_a_second(child, libc::SIGINT);
    assert_eq!(status.code(), Some(1), "{status:?}");
    assert_eq!(json(&doc)["complete"], false);
}

/// An interrupted reproduction's relations are "not evaluated", not
/// failed: its sweeps are partial (issue 25, item 15).
#[test]
fn an_interrupted_reproduction_evaluates_no_relation() {
    let dir = tempfile::tempdir().unwrap();
    let doc = dir.path().join("r.json");
    let child = irqlab().args(["reproduce", "load-bounds", "--json", path_str(&doc)]).stderr(std::process::Stdio::piped()).spawn().unwrap();
    let status = stop_after_a_second(child, libc::SIGINT);
    assert_eq!(status.code(), Some(1), "{status:?}");
    let d = json(&doc);
    assert_eq!(d["complete"], false);
    let rows = d["rows"].as_array().unwrap();
    assert!(rows.iter().all(|r| r["holds"].is_null()), "a relation was judged on partial sweeps: {rows:?}");
    assert!(rows.iter().any(|r| r["not_evaluated"] == true), "{rows:?}");
}

/// The text summary and the HTML page of an interrupted sim say so too,
/// not only the JSON (issue 25, item 15).
#[test]
fn an_interrupted_sims_text_and_page_say_it_is_incomplete() {
    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("sim.html");
    let child = irqlab()
        .args(["sim", &repo_file("scenarios/examples/ping-flood.toml"), "--duration", "100000s", "--html", path_str(&page)])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut child = child;
    let stdout = child.stdout.take().unwrap();
    let status = stop_after_a_second(child, libc::SIGTERM);
    assert_eq!(status.code(), Some(1), "{status:?}");
    let text = std::io::read_to_string(stdout).unwrap();
    assert!(text.contains("INCOMPLETE: stopped early, the figures cover"), "{text}");
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.contains("INCOMPLETE: stopped early"), "the page does not say it: {}", &html[..html.len().min(600)]);
}

#[test]
fn an_interrupted_bench_exits_1_with_its_partial_result() {
    let dir = tempfile::tempdir().unwrap();
    let doc = dir.path().join("bench.json");
    let child = irqlab().args(["bench", "sim", "--duration", "100000s", "--json", path_str(&doc)]).spawn().unwrap();
    let status = stop_after_a_second(child, libc::SIGTERM);
    assert_eq!(status.code(), Some(1), "{status:?}");
    assert_eq!(json(&doc)["complete"], false);
}
