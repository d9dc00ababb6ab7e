//! The scheduler's debugfs knobs set for real, where the kernel lets them
//! be (no lockdown: the guest kernels of `irqlab lab`, run by
//! `tests/kernels/smoke.py`'s check_sched_knobs; skipped with the reason on
//! a kernel in lockdown, such as this VM's): HRTICK_DL on for a
//! `--duration` (on while held, as before after, debugfs unmounted again if
//! irqlab mounted it), then held with no duration and killed with SIGKILL:
//! `control status` names the LEFTOVER and `control revert --all` restores
//! NO_HRTICK_DL. The same for `control fair-server --runtime 0` where the
//! kernel has a fair server (6.12+); where it has none (6.1) the command
//! exits 3 naming sched/fair_server. A 6.12 kernel that has forgotten its
//! fair servers' bandwidth refuses the change (exit 3 saying so) and is
//! made to count them again before the hold is tested. Live:
//! IRQLAB_LIVE_TESTS=1, as root.

mod common;
use common::live::{control_entries, start_with_stderr, wait_at_most, wait_for_line};
use common::*;
use std::ffi::OsStr;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

const MOUNT: &str = "/sys/kernel/debug";

fn debugfs_mount() -> Option<PathBuf> {
    let text = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    text.lines().find_map(|line| {
        let (mount, fstype) = line.split_once(" - ")?;
        (fstype.split_whitespace().next() == Some("debugfs")).then(|| PathBuf::from(mount.split_whitespace().nth(4).unwrap()))
    })
}

/// Reads a file of debugfs, mounting it for the read when it is not
/// mounted (irqlab unmounts what it mounted; the test checks the kernel's
/// state, not the mount).
fn debugfs_read(relative: &str) -> Option<String> {
    if let Some(mount) = debugfs_mount() {
        return std::fs::read_to_string(mount.join(relative)).ok();
    }
    let mounted = Command::new("mount").args(["-t", "debugfs", "debugfs", MOUNT]).status().unwrap();
    assert!(mounted.success(), "mount -t debugfs failed");
    let text = std::fs::read_to_string(PathBuf::from(MOUNT).join(relative)).ok();
    assert!(Command::new("umount").arg(MOUNT).status().unwrap().success(), "umount {MOUNT} failed");
    text
}

/// HRTICK_DL's state in sched/features: true when listed as HRTICK_DL.
fn hrtick_dl() -> bool {
    let features = debugfs_read("sched/features").expect("sched/features readable");
    let words: Vec<&str> = features.split_whitespace().collect();
    assert!(words.contains(&"HRTICK_DL") || words.contains(&"NO_HRTICK_DL"), "{features}");
    words.contains(&"HRTICK_DL")
}

fn fair_runtime(cpu: usize) -> u64 {
    debugfs_read(&format!("sched/fair_server/cpu{cpu}/runtime")).expect("fair server runtime").trim().parse().unwrap()
}

fn knob_entries(kind: &str) -> Vec<serde_json::Value> {
    control_entries().into_iter().filter(|e| e["object"]["kind"] == kind).collect()
}

/// Holds `args` with no duration, kills it with SIGKILL once the knob is
/// in force, and checks that status names the leftover, and revert --all
/// restores it and removes debugfs's mount entry too.
fn kill_9_then_revert(args: &[&str], kind: &str) {
    let args: Vec<&OsStr> = args.iter().map(OsStr::new).collect();
    let (mut child, lines) = start_with_stderr(&args);
    wait_for_line(&lines, "->", Duration::from_secs(60));
    child.kill().unwrap();
    wait_at_most(&mut child, Duration::from_secs(10));
    let left = knob_entries(kind);
    assert!(left.iter().any(|e| e["state"] == "leftover"), "{kind}: {left:?}");
    let status = run(&["control", "status"]);
    assert!(stdout(&status).contains("LEFTOVER"), "{}", stdout(&status));
    let revert = run(&["control", "revert", "--all"]);
    assert_eq!(revert.status.code(), Some(0), "{}", stderr(&revert));
    assert!(knob_entries(kind).is_empty(), "{:?}", control_entries());
    assert!(knob_entries("debugfs-mount").is_empty(), "{:?}", control_entries());
}

/// Makes the kernel count its fair servers again once it has forgotten
/// them (`LostServerBandwidth`): a cpuset partition made and removed
/// replaces the root domains, which adds each server back. cgroup v2 only
/// (the guests' hierarchy; a v1 machine in this test is one in lockdown).
fn recount_fair_servers() {
    let root = std::path::Path::new("/sys/fs/cgroup");
    assert!(
        root.join("cgroup.controllers").exists(),
        "the kernel forgot its fair servers' bandwidth; this test recounts it on cgroup v2 only"
    );
    let control = root.join("cgroup.subtree_control");
    let had_cpuset = std::fs::read_to_string(&control).unwrap().split_whitespace().any(|c| c == "cpuset");
    if !had_cpuset {
        std::fs::write(&control, "+cpuset").unwrap();
    }
    let dir = root.join("irqlab-test-recount");
    std::fs::create_dir(&dir).unwrap();
    let cpu = *irqlab_host::rt::online_cpus().unwrap().last().unwrap();
    std::fs::write(dir.join("cpuset.cpus"), cpu.to_string()).unwrap();
    let made = std::fs::write(dir.join("cpuset.cpus.partition"), "root");
    let state = std::fs::read_to_string(dir.join("cpuset.cpus.partition")).unwrap_or_default();
    let _ = std::fs::write(dir.join("cpuset.cpus.partition"), "member");
    std::fs::remove_dir(&dir).unwrap();
    if !had_cpuset {
        let _ = std::fs::write(&control, "-cpuset");
    }
    assert!(made.is_ok() && state.starts_with("root"), "partition of CPU {cpu}: {made:?}, reads `{}`", state.trim());
}

#[test]
fn hrtick_dl_and_the_fair_server_are_held_restored_and_reverted_after_kill_9() {
    let test = "hrtick_dl_and_the_fair_server_are_held_restored_and_reverted_after_kill_9";
    if !live_tests_enabled(test) {
        return;
    }
    if !is_root() {
        eprintln!("{test}: skipped: needs root");
        return;
    }
    // Where the knobs cannot be set the command says why (exit 3): skip.
    let probe = run(&["control", "sched-feature", "HRTICK_DL", "off", "--duration", "10ms"]);
    if probe.status.code() == Some(3) {
        eprintln!("{test}: skipped: the debugfs knobs cannot be set on this kernel: {}", stderr(&probe).trim());
        return;
    }
    assert_eq!(probe.status.code(), Some(0), "{}", stderr(&probe));
    let mounted_before = debugfs_mount();
    let was_on = hrtick_dl();

    // A name the kernel does not list: exit 2 naming those it does.
    let unknown = run(&["control", "sched-feature", "NO_SUCH_FEATURE", "on", "--duration", "1s"]);
    assert_eq!(unknown.status.code(), Some(2), "{}", stderr(&unknown));
    assert!(stderr(&unknown).contains("HRTICK_DL"), "{}", stderr(&unknown));

    // Held for a duration: on during, as before after.
    let doc = tempfile::NamedTempFile::new().unwrap();
    let args = ["control", "sched-feature", "HRTICK_DL", "on", "--duration", "4s", "--json", path_str(doc.path())];
    let (mut child, lines) = start_with_stderr(&args.iter().map(OsStr::new).collect::<Vec<_>>());
    wait_for_line(&lines, "HRTICK_DL", Duration::from_secs(60));
    assert!(hrtick_dl(), "HRTICK_DL not on while held");
    assert_eq!(wait_at_most(&mut child, Duration::from_secs(120)).code(), Some(0));
    assert_eq!(hrtick_dl(), was_on, "HRTICK_DL not restored");
    assert_eq!(debugfs_mount(), mounted_before, "debugfs's mount not as before");
    let report = json(doc.path());
    assert_eq!(report["schema"], "irqlab/control-sched/v1");
    assert_eq!(report["ended_by"], "duration");
    assert!(report["changes"].as_array().unwrap().iter().all(|c| c["restored"] == true), "{report}");

    // Killed: a leftover, reverted to NO_HRTICK_DL.
    if !was_on {
        kill_9_then_revert(&["control", "sched-feature", "HRTICK_DL", "on"], "sched-feature");
        assert!(!hrtick_dl(), "revert --all left HRTICK_DL on");
    }

    // The fair server, where the kernel has one.
    if debugfs_read("sched/fair_server/cpu0/runtime").is_none() {
        let out = run(&["control", "fair-server", "--runtime", "0", "--duration", "1s"]);
        assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
        assert!(stderr(&out).contains("sched/fair_server"), "{}", stderr(&out));
        assert!(knob_entries("debugfs-mount").is_empty(), "{:?}", control_entries());
        eprintln!("{test}: no fair server on this kernel: exit 3 checked");
        return;
    }
    let cpus = irqlab_host::rt::online_cpus().unwrap();
    let old: Vec<u64> = cpus.iter().map(|&c| fair_runtime(c)).collect();

    // A kernel that accounts less than its fair servers' bandwidth (6.12
    // after any read of sched_rt_runtime_us, as earlier runs in this boot
    // may have made, or below zero after a late SCHED_DEADLINE release)
    // refuses a lower runtime: exit 3 saying so, nothing changed.
    // Then the kernel is made to count them again, and the hold is tested.
    if let Some(lost) = irqlab_host::journal::sched_knobs::lost_server_bandwidth(0) {
        eprintln!("{test}: the kernel accounts less than its fair servers' bandwidth: {lost:?}");
        let out = run(&["control", "fair-server", "--runtime", "0", "--duration", "1s"]);
        assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
        assert!(stderr(&out).contains("refuses to lower one"), "{}", stderr(&out));
        assert_eq!(cpus.iter().map(|&c| fair_runtime(c)).collect::<Vec<_>>(), old, "the refused change left a server changed");
        assert!(knob_entries("fair-server").is_empty(), "{:?}", control_entries());
        recount_fair_servers();
        assert_eq!(irqlab_host::journal::sched_knobs::lost_server_bandwidth(0), None, "a partition made and removed did not recount");
    }
    let args = ["control", "fair-server", "--runtime", "0", "--duration", "4s"];
    let (mut child, lines) = start_with_stderr(&args.iter().map(OsStr::new).collect::<Vec<_>>());
    wait_for_line(&lines, "fair server", Duration::from_secs(60));
    assert!(cpus.iter().all(|&c| fair_runtime(c) == 0), "runtime not 0 on every CPU while held");
    assert_eq!(wait_at_most(&mut child, Duration::from_secs(120)).code(), Some(0));
    assert_eq!(cpus.iter().map(|&c| fair_runtime(c)).collect::<Vec<_>>(), old, "fair server not restored");

    kill_9_then_revert(&["control", "fair-server", "--cpu", "0", "--runtime", "0"], "fair-server");
    assert_eq!(fair_runtime(0), old[0], "revert --all left the fair server changed");
}
