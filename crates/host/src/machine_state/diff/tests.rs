use super::super::read::{qdiscs_by_device, selected_scheduler};
use super::super::{NapiState, ThreadState, SCHEMA};
use super::*;
use crate::journal::sched::SchedAttr;

fn v(text: &str) -> Reading {
    Read::Value(text.to_string())
}

fn thread(tid: i32, start_ticks: u64, sched: SchedAttr, affinity: &str) -> ThreadState {
    ThreadState { tid, start_ticks, comm: format!("t{tid}"), sched: Read::Value(sched), affinity: v(affinity) }
}

fn device(rps: &str) -> NetDevice {
    NetDevice {
        ifindex: v("2"),
        rps_cpus: [("rx-0".to_string(), v(rps))].into(),
        xps_cpus: BTreeMap::new(),
        settings: [("threaded".to_string(), v("0"))].into(),
        napi: Read::Value(vec![NapiState {
            id: 8193,
            defer_hard_irqs: Some(0),
            gro_flush_timeout_ns: Some(0),
            irq_suspend_timeout_ns: None,
            threaded: None,
        }]),
    }
}

fn state() -> MachineState {
    MachineState {
        schema: SCHEMA.to_string(),
        kernel: "6.18.0".into(),
        boot_id: "b".into(),
        threads: vec![thread(11, 5, SchedAttr::Fifo { priority: 50 }, "0-1"), thread(12, 6, SchedAttr::Other { nice: 0 }, "0-1")],
        default_irq_affinity: v("3"),
        irq_affinity: [(11, v("0-1"))].into(),
        net_devices: [("eth0".to_string(), device("0")), ("irqlab-b".to_string(), device("0"))].into(),
        net_core: [("netdev_budget".to_string(), v("300")), ("rps_default_mask".to_string(), v("0"))].into(),
        qdiscs: Read::Value([("eth0".to_string(), vec!["pfifo_fast 0: parent root {}".to_string()])].into()),
        block_schedulers: [("vda".to_string(), v("mq-deadline"))].into(),
        irqlab_cgroups: vec![],
        sched_rt: [("sched_rt_runtime_us".to_string(), v("950000"))].into(),
        cgroup_roots: [("/sys/fs/cgroup/cpuset/cpuset.sched_load_balance".to_string(), v("1"))].into(),
        debugfs_mounts: vec![],
        sched_debug: [("features".to_string(), v("HRTICK NO_HRTICK_DL"))].into(),
    }
}

fn lines(d: &Diff) -> Vec<String> {
    d.differences.iter().map(ToString::to_string).collect()
}

#[test]
fn the_same_state_has_no_difference() {
    assert_eq!(diff(&state(), &state()), Diff::default());
}

#[test]
fn a_changed_thread_is_named_with_both_values() {
    let mut after = state();
    after.threads[0].sched = Read::Value(SchedAttr::Other { nice: 0 });
    after.threads[1].affinity = v("1");
    assert_eq!(lines(&diff(&state(), &after)), ["thread 11 (t11) policy fifo:50 -> other", "thread 12 (t12) affinity 0-1 -> 1"]);
}

#[test]
fn a_thread_in_one_snapshot_only_is_no_difference() {
    let mut after = state();
    after.threads.remove(0);
    // The same tid, started later: another thread.
    after.threads.push(thread(11, 99, SchedAttr::Rr { priority: 1 }, "1"));
    after.threads.push(thread(13, 7, SchedAttr::Fifo { priority: 99 }, "0"));
    assert_eq!(diff(&state(), &after), Diff::default());
}

#[test]
fn a_changed_irq_affinity_is_a_difference_an_irq_that_came_is_not() {
    let mut after = state();
    after.irq_affinity.insert(11, v("1"));
    after.irq_affinity.insert(12, v("0"));
    assert_eq!(lines(&diff(&state(), &after)), ["IRQ 11 affinity 0-1 -> 1"]);
}

#[test]
fn masks_and_lists_are_compared_by_the_cpus_they_name() {
    let mut after = state();
    after.irq_affinity.insert(11, v("0,1"));
    after.default_irq_affinity = v("00000003");
    after.net_core.insert("rps_default_mask".into(), v("00"));
    after.net_devices.get_mut("eth0").unwrap().rps_cpus.insert("rx-0".into(), v("00000000,00000000"));
    assert_eq!(diff(&state(), &after), Diff::default());
    after.default_irq_affinity = v("1");
    after.net_devices.get_mut("eth0").unwrap().rps_cpus.insert("rx-0".into(), v("2"));
    assert_eq!(lines(&diff(&state(), &after)), ["IRQ default affinity 3 -> 1", "eth0 rx-0 rps_cpus 0 -> 2"]);
}

#[test]
fn a_new_or_vanished_irqlab_cgroup_is_a_difference() {
    let mut after = state();
    after.irqlab_cgroups.push("/sys/fs/cgroup/cpuset/irqlab-dl".into());
    assert_eq!(lines(&diff(&state(), &after)), ["cgroup /sys/fs/cgroup/cpuset/irqlab-dl absent -> present"]);
    assert_eq!(lines(&diff(&after, &state())), ["cgroup /sys/fs/cgroup/cpuset/irqlab-dl present -> absent"]);
}

#[test]
fn the_testbed_coming_or_going_is_a_note_its_settings_are_compared() {
    let mut after = state();
    after.net_devices.remove("irqlab-b");
    let d = diff(&state(), &after);
    assert!(d.differences.is_empty(), "{d:?}");
    assert_eq!(d.notes.len(), 1, "{d:?}");
    let mut after = state();
    after.net_devices.get_mut("irqlab-b").unwrap().settings.insert("threaded".into(), v("1"));
    after.net_devices.remove("eth0");
    assert_eq!(lines(&diff(&state(), &after)), ["network device eth0 present -> absent", "irqlab-b threaded 0 -> 1"]);
}

#[test]
fn napi_settings_sysctls_qdiscs_schedulers_and_rt_throttling_are_compared() {
    let mut after = state();
    if let Read::Value(napis) = &mut after.net_devices.get_mut("eth0").unwrap().napi {
        napis[0].defer_hard_irqs = Some(2);
    }
    after.net_core.insert("netdev_budget".into(), v("600"));
    after.qdiscs = Read::Value([("eth0".to_string(), vec!["tbf auto: parent root {}".to_string()])].into());
    after.block_schedulers.insert("vda".into(), v("none"));
    after.sched_rt.insert("sched_rt_runtime_us".into(), v("-1"));
    assert_eq!(
        lines(&diff(&state(), &after)),
        [
            "eth0 NAPI 8193 defer-hard-irqs 0 -> 2",
            "net.core.netdev_budget 300 -> 600",
            "eth0 qdiscs pfifo_fast 0: parent root {} -> tbf auto: parent root {}",
            "disk vda scheduler mq-deadline -> none",
            "kernel.sched_rt_runtime_us 950000 -> -1",
        ]
    );
}

#[test]
fn unreadable_in_one_snapshot_is_a_difference_in_both_is_not() {
    let mut after = state();
    after.sched_rt.insert("sched_rt_runtime_us".into(), Read::Unreadable("EACCES".into()));
    assert_eq!(lines(&diff(&state(), &after)), ["kernel.sched_rt_runtime_us 950000 -> unreadable (EACCES)"]);
    assert_eq!(diff(&after, &after), Diff::default());
}

#[test]
fn kernel_picked_qdisc_handles_are_not_compared() {
    let tc = |handle: &str| {
        serde_json::json!([
            {"kind": "htb", "handle": handle, "dev": "irqlab-b", "root": true, "refcnt": 2, "options": {"r2q": 10}},
            {"kind": "fq_codel", "handle": "0:", "dev": "eth0", "parent": ":1", "options": {"limit": 10240}},
        ])
    };
    let (a, b) = (qdiscs_by_device(tc("8001:").as_array().unwrap()), qdiscs_by_device(tc("8002:").as_array().unwrap()));
    assert_eq!(a, b);
    assert_eq!(a["irqlab-b"], ["htb auto: parent root {\"r2q\":10}"]);
    assert_eq!(a["eth0"], ["fq_codel 0: parent :1 {\"limit\":10240}"]);
    // A handle someone chose is a setting.
    assert_ne!(a, qdiscs_by_device(tc("1:").as_array().unwrap()));
}

#[test]
fn cpu_masks_and_schedulers_parse() {
    assert_eq!(parse_cpu_mask_hex("3"), Ok(vec![0, 1]));
    assert_eq!(parse_cpu_mask_hex("00000003"), Ok(vec![0, 1]));
    assert_eq!(parse_cpu_mask_hex("2,00000001"), Ok(vec![0, 33]));
    assert_eq!(parse_cpu_mask_hex("0"), Ok(vec![]));
    assert!(parse_cpu_mask_hex("xyz").is_err());
    assert_eq!(selected_scheduler("none [mq-deadline] kyber bfq"), "mq-deadline");
    assert_eq!(selected_scheduler("none"), "none");
}

#[test]
fn the_document_reads_back() {
    let text = serde_json::to_string(&state()).unwrap();
    assert!(text.contains("\"schema\":\"irqlab/machine-state/v1\""));
    let back: MachineState = serde_json::from_str(&text).unwrap();
    assert_eq!(back, state());
}

#[test]
fn cgroup_roots_debugfs_and_its_scheduler_knobs_are_compared() {
    let mut after = state();
    after.cgroup_roots.insert("/sys/fs/cgroup/cpuset/cpuset.sched_load_balance".into(), v("0"));
    after.debugfs_mounts.push("/sys/kernel/debug".into());
    after.sched_debug.insert("features".into(), v("NO_HRTICK_DL HRTICK"));
    after.sched_debug.insert("fair_server/cpu0/runtime".into(), v("0"));
    assert_eq!(
        lines(&diff(&state(), &after)),
        ["/sys/fs/cgroup/cpuset/cpuset.sched_load_balance 1 -> 0", "debugfs at /sys/kernel/debug unmounted -> mounted"]
    );
    after.sched_debug.insert("features".into(), v("HRTICK HRTICK_DL"));
    assert_eq!(lines(&diff(&state(), &after))[2], "sched/features HRTICK NO_HRTICK_DL -> HRTICK HRTICK_DL");
}
