//! `irqlab doctor --snapshot` / `--diff`: the machine's controllable state
//! written down and compared, as `make test` uses it around the live
//! suites. The live part changes a sleeper's policy by hand (`chrt`), as a
//! test that forgot to restore one would.

mod common;

use common::{run, stderr, stdout};
use std::process::{Child, Command};
use std::sync::Mutex;

/// Each test compares the whole machine: the live one's change must not
/// show in another's diff.
static MACHINE: Mutex<()> = Mutex::new(());

fn machine() -> std::sync::MutexGuard<'static, ()> {
    MACHINE.lock().unwrap_or_else(|e| e.into_inner())
}

fn snapshot(dir: &std::path::Path) -> String {
    let path = dir.join("before.json").to_string_lossy().into_owned();
    let out = run(&["doctor", "--snapshot", &path]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    path
}

#[test]
fn a_diff_right_after_a_snapshot_finds_no_difference() {
    let _machine = machine();
    let dir = tempfile::tempdir().unwrap();
    let path = snapshot(dir.path());
    assert_eq!(common::json(std::path::Path::new(&path))["schema"], "irqlab/machine-state/v1");
    let out = run(&["doctor", "--diff", &path]);
    assert_eq!(out.status.code(), Some(0), "{}{}", stdout(&out), stderr(&out));
    assert!(stdout(&out).contains("no difference"), "{}", stdout(&out));
    let json = run(&["doctor", "--diff", &path, "--json", "-"]);
    let doc: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(doc["schema"], "irqlab/machine-state-diff/v1");
    assert_eq!(doc["differences"], serde_json::json!([]));
}

#[test]
fn the_tests_helper_sees_what_a_command_left_changed() {
    let _machine = machine();
    // A command that changes nothing: `doctor` itself.
    let changed = common::live::left_changed(|| assert_eq!(run(&["doctor"]).status.code(), Some(0)));
    assert!(changed.is_empty(), "{changed:#?}");
}

#[test]
fn a_setting_changed_since_the_snapshot_is_named_with_both_values() {
    let _machine = machine();
    let dir = tempfile::tempdir().unwrap();
    let out = run(&["doctor", "--snapshot", "-"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let mut doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    // As if RT throttling's period had been 123 us when the snapshot was taken.
    let now = doc["sched_rt"]["sched_rt_period_us"]["value"].as_str().expect("sched_rt_period_us readable").to_string();
    doc["sched_rt"]["sched_rt_period_us"] = serde_json::json!({"value": "123"});
    let path = dir.path().join("edited.json");
    std::fs::write(&path, doc.to_string()).unwrap();
    let out = run(&["doctor", "--diff", path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}{}", stdout(&out), stderr(&out));
    assert!(stdout(&out).contains(&format!("kernel.sched_rt_period_us 123 -> {now}")), "{}", stdout(&out));
}

#[test]
fn a_file_that_is_not_a_snapshot_is_bad_input_named() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.json");
    let out = run(&["doctor", "--diff", missing.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("missing.json"), "{}", stderr(&out));
    let other = dir.path().join("doctor.json");
    std::fs::write(&other, r#"{"schema": "irqlab/doctor/v1"}"#).unwrap();
    let out = run(&["doctor", "--diff", other.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("doctor.json: not an irqlab/machine-state/v1 document"), "{}", stderr(&out));
    std::fs::write(&other, "{").unwrap();
    assert_eq!(run(&["doctor", "--diff", other.to_str().unwrap()]).status.code(), Some(2));
}

/// A `sleep` killed (and reaped) on every path out of the test.
struct Sleeper(Child);

impl Drop for Sleeper {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn chrt(args: &[&str]) {
    let out = Command::new("chrt").args(args).output().expect("run chrt");
    assert!(out.status.success(), "chrt {args:?}: {}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn a_thread_left_at_another_policy_is_a_difference_until_restored() {
    if !common::live::enabled_as_root("a_thread_left_at_another_policy_is_a_difference_until_restored") {
        return;
    }
    let _machine = machine();
    let sleeper = Sleeper(Command::new("sleep").arg("60").spawn().expect("start sleep"));
    let pid = sleeper.0.id().to_string();
    let dir = tempfile::tempdir().unwrap();
    let path = snapshot(dir.path());
    chrt(&["-f", "-p", "10", &pid]);
    let out = run(&["doctor", "--diff", &path]);
    assert_eq!(out.status.code(), Some(1), "{}{}", stdout(&out), stderr(&out));
    let named = format!("thread {pid} (sleep) policy other -> fifo:10");
    assert!(stdout(&out).contains(&named), "no `{named}` in:\n{}", stdout(&out));
    chrt(&["-o", "-p", "0", &pid]);
    let out = run(&["doctor", "--diff", &path]);
    assert_eq!(out.status.code(), Some(0), "{}{}", stdout(&out), stderr(&out));
    // The tests' helper sees the same.
    let changed = common::live::left_changed(|| chrt(&["-f", "-p", "10", &pid]));
    chrt(&["-o", "-p", "0", &pid]);
    assert_eq!(changed, [format!("thread {pid} (sleep) policy other -> fifo:10")]);
    drop(sleeper);
}
