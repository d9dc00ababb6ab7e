//! The simulator's document speaks the shared CPU-time vocabulary
//! (`irqlab_analysis::cpu_time`, issue 17 item 5): `irqlab/sim/v2` writes the
//! live accounting's names, and a v1 document (tasks' `cpu_ns`, the CPU's
//! `task_ns`) still reads into the same types.

use irqlab_analysis::cpu_time::{compare, CpuTime, TaskTime};
use irqlab_sim::results::SIM_SCHEMA;
use irqlab_sim::{run_scenario, Scenario};
use serde_json::Value;
use std::sync::atomic::AtomicBool;

/// `irqlab sim scenarios/examples/ping-flood.toml --duration 20ms` as
/// irqlab/sim/v1 wrote it (before the vocabulary was shared).
const V1: &str = include_str!("data/ping-flood-v1.json");

#[test]
fn a_v1_document_reads_into_the_shared_types() {
    let doc: Value = serde_json::from_str(V1).unwrap();
    assert_eq!(doc["schema"], "irqlab/sim/v1");
    let tau1: TaskTime = serde_json::from_value(doc["tasks"][1].clone()).unwrap();
    assert_eq!(tau1, TaskTime::new(4_000_000, 1_634_500, 2_418_000, None));
    assert_eq!(tau1.stolen_ns, 4_052_500);
    let cpu: CpuTime = serde_json::from_value(doc["cpu"].clone()).unwrap();
    assert_eq!(cpu, CpuTime { run_ns: 8_000_000, idle_ns: 1_944_500, hardirq_ns: 4_047_500, softirq_ns: 6_000_000 });
}

#[test]
fn v2_writes_the_live_names_and_reads_back() {
    let sc = Scenario::parse("ping-flood.toml", include_str!("../../../scenarios/examples/ping-flood.toml")).unwrap();
    let p = sc.run_params(None, Some(20_000_000)).unwrap();
    let r = run_scenario(&sc, p, false, &AtomicBool::new(false), |_| {}).unwrap().result;
    let doc = serde_json::to_value(&r).unwrap();
    assert_eq!((SIM_SCHEMA, doc["schema"].as_str()), ("irqlab/sim/v2", Some("irqlab/sim/v2")));
    for (t, v) in r.tasks.iter().zip(doc["tasks"].as_array().unwrap()) {
        assert!(v.get("cpu_ns").is_none() && v.get("served_softirq_ns").is_none(), "{v}");
        assert_eq!(v["run_ns"], t.time.run_ns);
        assert_eq!(serde_json::from_value::<TaskTime>(v.clone()).unwrap(), t.time);
    }
    assert!(doc["cpu"].get("task_ns").is_none());
    assert_eq!(serde_json::from_value::<CpuTime>(doc["cpu"].clone()).unwrap(), r.cpu.time);
    // Against itself, every comparable field differs by nothing.
    let d = compare(&r.tasks[1].time, &r.tasks[1].time);
    assert!(d.iter().all(|f| f.difference_ns.unwrap_or(0) == 0));
}
