//! `journal::root_domain` on this machine's cgroup hierarchy (issue 38):
//! one CPU split off as a root domain of its own (cgroup v1: exclusive
//! cpusets, load balancing off in the root; cgroup v2: a cpuset partition),
//! a SCHED_DEADLINE process pinned there, everything undone on return,
//! and after kill -9 the leftovers named by `irqlab control status` and
//! undone by `irqlab control revert --all`. The full experiment that uses
//! it is `reproduce_load_bounds_live.rs` (a testbed and minutes); this
//! runs in seconds, so also in a guest. Live: IRQLAB_LIVE_TESTS=1, as root.

mod common;

use common::irqlab;
use common::live::{enabled_as_root, entries_of, wait_at_most};
use irqlab_host::journal::cgroup;
use irqlab_host::journal::root_domain;
use irqlab_host::journal::sched::{self, SchedAttr};
use irqlab_host::journal::threads::Thread;
use std::io::BufRead;
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::Duration;

/// The tests share the cpuset layout.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// Set in the child the kill -9 test starts: it splits the CPU off, gives
/// the process named here SCHED_DEADLINE, says `held` and waits.
const HOLD: &str = "IRQLAB_TEST_HOLD_ROOT_DOMAIN";

const DEADLINE: SchedAttr = SchedAttr::Deadline { runtime_ns: 1_000_000, deadline_ns: 10_000_000, period_ns: 10_000_000 };

fn measured_cpu() -> usize {
    *irqlab_host::rt::online_cpus().unwrap().last().unwrap()
}

/// A process that keeps running: the kernel checks a SCHED_DEADLINE
/// request against the root domain of the CPU the task last ran on, and a
/// sleeping task moved into the CPU's cpuset stays on its old CPU until
/// it wakes (a `sleep` was refused for 30 s in a 6.1-rt guest).
fn sleeper() -> Child {
    Command::new("sh").args(["-c", "while :; do :; done"]).spawn().unwrap()
}

/// The split's cgroups left anywhere (v1 cpuset hierarchy or v2 root).
fn split_cgroups() -> Vec<String> {
    let root = cgroup::hierarchy("cpuset").unwrap();
    std::fs::read_dir(root.root())
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n == "irqlab-dl" || n == "irqlab-rest")
        .collect()
}

/// The cgroup `pid` is in, where the split moves it.
fn cgroup_of(pid: i32) -> String {
    match cgroup::hierarchy("cpuset").unwrap() {
        cgroup::Hierarchy::V1(_) => cgroup::of_thread(pid, "cpuset").unwrap(),
        cgroup::Hierarchy::V2(_) => cgroup::of_process_v2(pid).unwrap(),
    }
}

fn ours() -> Vec<serde_json::Value> {
    entries_of("root_domain_live")
}

#[test]
fn a_cpu_split_off_takes_a_deadline_process_and_everything_is_undone() {
    if std::env::var(HOLD).is_ok() || !enabled_as_root("a_cpu_split_off_takes_a_deadline_process_and_everything_is_undone") {
        return;
    }
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let cpu = measured_cpu();
    let mut child = sleeper();
    let pid = child.id() as i32;
    let (home, before) = (cgroup_of(pid), sched::get(pid).unwrap());
    let mut domain = root_domain::isolate(cpu).unwrap();
    eprintln!("{}", root_domain::describe(&domain.hierarchy));
    domain.run_deadline(&Thread::of(pid).unwrap(), DEADLINE).unwrap();
    assert_eq!(sched::get(pid).unwrap(), DEADLINE);
    assert_eq!(irqlab_host::rt::affinity(pid).unwrap(), vec![cpu], "pinned by its cpuset");
    assert_eq!(cgroup_of(pid), "/irqlab-dl");
    if domain.hierarchy.is_v2() {
        let root = domain.hierarchy.root().to_path_buf();
        let partition = std::fs::read_to_string(root.join("irqlab-dl/cpuset.cpus.partition")).unwrap();
        assert_eq!(partition.trim(), "root");
        // The partition took the CPU from every process outside it.
        let outside = std::fs::read_to_string(root.join("cpuset.cpus.effective")).unwrap();
        assert!(!irqlab_host::rt::parse_cpu_list(outside.trim()).unwrap().contains(&cpu), "root's effective CPUs: {outside}");
        let kinds: Vec<String> = ours().iter().map(|e| e["object"]["kind"].as_str().unwrap().to_string()).collect();
        assert!(kinds.contains(&"cgroup2-thread".to_string()) && kinds.contains(&"cgroup".to_string()), "{kinds:?}");
    }
    domain.restore().unwrap();
    assert_eq!(sched::get(pid).unwrap(), before);
    assert_eq!(cgroup_of(pid), home);
    assert!(split_cgroups().is_empty(), "{:?}", split_cgroups());
    assert!(ours().is_empty(), "{:?}", ours());
    let _ = child.kill();
    let _ = child.wait();
}

#[test]
fn after_kill_9_the_split_is_named_and_reverted() {
    if let Ok(pid) = std::env::var(HOLD) {
        // The child: hold the split until killed.
        let pid: i32 = pid.parse().unwrap();
        let mut domain = root_domain::isolate(measured_cpu()).unwrap();
        domain.run_deadline(&Thread::of(pid).unwrap(), DEADLINE).unwrap();
        println!("held");
        std::thread::sleep(Duration::from_secs(120));
        return;
    }
    if !enabled_as_root("after_kill_9_the_split_is_named_and_reverted") {
        return;
    }
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let mut target = sleeper();
    let pid = target.id() as i32;
    let (home, before) = (cgroup_of(pid), sched::get(pid).unwrap());
    let mut holder = Command::new(std::env::current_exe().unwrap())
        .args(["after_kill_9_the_split_is_named_and_reverted", "--exact", "--nocapture", "--test-threads=1"])
        .env(HOLD, pid.to_string())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let out = std::io::BufReader::new(holder.stdout.take().unwrap());
    assert!(out.lines().map_while(Result::ok).any(|l| l.contains("held")), "the holder never held the split");
    assert_eq!(sched::get(pid).unwrap(), DEADLINE);
    holder.kill().unwrap();
    wait_at_most(&mut holder, Duration::from_secs(5));

    let left = ours();
    assert!(!left.is_empty() && left.iter().all(|e| e["state"] == "leftover"), "{left:?}");
    let kinds: Vec<&str> = left.iter().filter_map(|e| e["object"]["kind"].as_str()).collect();
    let member = if cgroup::hierarchy("cpuset").unwrap().is_v2() { "cgroup2-thread" } else { "cgroup-member" };
    for kind in ["cgroup", "file", "thread-sched", member] {
        assert!(kinds.contains(&kind), "no {kind} leftover named after kill -9: {kinds:?}");
    }
    let status = irqlab().args(["control", "status"]).output().unwrap();
    let text = String::from_utf8_lossy(&status.stdout);
    assert!(text.contains("LEFTOVER") && text.contains("irqlab-dl"), "{text}");
    let revert = irqlab().args(["control", "revert", "--all"]).output().unwrap();
    assert_eq!(revert.status.code(), Some(0), "{}", String::from_utf8_lossy(&revert.stderr));
    assert!(ours().is_empty(), "{:?}", ours());
    assert!(split_cgroups().is_empty(), "{:?}", split_cgroups());
    assert_eq!(sched::get(pid).unwrap(), before);
    assert_eq!(cgroup_of(pid), home);
    let _ = target.kill();
    let _ = target.wait();
}
