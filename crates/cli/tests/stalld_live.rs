//! Issue 54: irqlab beside stalld. stalld is packaged neither by Debian
//! (12, 13, sid) nor by Ubuntu (24.04 to 25.10), checked in their archives'
//! package lists on 2026-11-30, so no real stalld runs here: irqlab finds
//! it by its process name, and this test stands one up under that name (a
//! copy of `sleep` called `stalld`). A run that keeps threads runnable
//! without running them (the probe's SCHED_FIFO spin) warns that stalld
//! would boost them and says how to keep it off (its `--ignore_threads`,
//! read only at its start); without a stalld, no warning. `doctor` lists it.

mod common;
use common::*;
use std::process::{Child, Command};

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
