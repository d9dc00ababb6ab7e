//! `control threads` cannot hurt the machine by a wide MATCH: a glob over
//! more than 16 threads or over kernel threads, and PID 1, need
//! `--all-matching` (exit 2 listing what matched); the kernel's per-CPU
//! threads (migration/N, cpuhp/N, rcu*, ...), ksoftirqd by any MATCH but
//! `ksoftirqd:N`, and irqlab's own threads are never taken. Live: as root.

mod common;
use common::live::enabled_as_root;
use common::*;

#[test]
fn wide_matches_need_all_matching_and_never_take_the_kernels_own_threads() {
    if !enabled_as_root("wide_matches_need_all_matching_and_never_take_the_kernels_own_threads") {
        return;
    }
    let every = run(&["control", "threads", "comm:*", "--policy", "foreground", "--duration", "1s"]);
    assert_eq!(every.status.code(), Some(2), "{}", stderr(&every));
    assert!(stderr(&every).contains("--all-matching") && stderr(&every).contains("kthreadd (2)"), "{}", stderr(&every));
    let init = run(&["control", "threads", "pid:1", "--policy", "idle", "--duration", "1s"]);
    assert_eq!(init.status.code(), Some(2), "{}", stderr(&init));
    assert!(stderr(&init).contains("PID 1"), "{}", stderr(&init));
    let stopper = run(&["control", "threads", "comm:migration/*", "--policy", "other", "--all-matching", "--duration", "1s"]);
    assert_eq!(stopper.status.code(), Some(2), "{}", stderr(&stopper));
    assert!(stderr(&stopper).contains("never changes"), "{}", stderr(&stopper));
    let own = run(&["control", "threads", "comm:irqlab", "--policy", "other", "--all-matching", "--duration", "1s"]);
    assert_eq!(own.status.code(), Some(2), "its own threads: {}", stderr(&own));

    // migration/N, ksoftirqd/N, kthreadd, kswapd0, ksmd: with --all-matching
    // only the last three are taken (SCHED_OTHER for a second, restored).
    let out = run(&["control", "threads", "comm:[mk][ist]*", "--policy", "other", "--all-matching", "--duration", "1s", "--json", "-"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let comms: Vec<&str> = doc["threads"].as_array().unwrap().iter().map(|t| t["thread"]["comm"].as_str().unwrap()).collect();
    assert!(comms.contains(&"kthreadd"), "{comms:?}");
    assert!(comms.iter().all(|c| !c.starts_with("migration/") && !c.starts_with("ksoftirqd/")), "{comms:?}");
    assert!(doc["threads"].as_array().unwrap().iter().all(|t| t["restored"] == true), "{doc}");
}
