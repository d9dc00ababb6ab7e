//! `irqlab bench sim`: speed figures of the simulator's benchmark scenario.

mod common;
use common::irqlab;

#[test]
fn bench_sim_reports_events_and_speed() {
    let dir = std::env::temp_dir().join(format!("irqlab-bench-sim-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let json = dir.join("bench.json");
    let out = irqlab().args(["bench", "sim", "--duration", "1s", "--json"]).arg(&json).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("M events/s") && stdout.contains("simulated s per wall s"), "{stdout}");
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(v["schema"], "irqlab/bench-sim/v1");
    assert_eq!(v["complete"], true);
    assert_eq!(v["simulated_ns"], 1_000_000_000u64);
    // 100,000 pings in 1 s, each several events (arrival, IRQ, softirq job).
    assert!(v["events"].as_u64().unwrap() > 200_000, "{v}");
    assert!(v["events_per_second"].as_f64().unwrap() > 0.0);
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn bench_sim_rejects_a_bad_duration() {
    let out = irqlab().args(["bench", "sim", "--duration", "ten"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).starts_with("error:"));
}
