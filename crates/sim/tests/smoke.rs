use irqlab_sim::{run_scenario, Scenario};
use std::sync::atomic::AtomicBool;

#[test]
fn example_ping_flood_runs() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scenarios/examples/ping-flood.toml");
    let text = std::fs::read_to_string(path).unwrap();
    let sc = Scenario::parse(path, &text).unwrap();
    let p = sc.run_params(None, Some(200_000_000)).unwrap();
    let out = run_scenario(&sc, p, false, &AtomicBool::new(false), |_| {}).unwrap();
    println!("{}", serde_json::to_string_pretty(&out.result).unwrap());
    assert!(out.result.conservation.cpu_time_ok);
    assert!(out.result.conservation.packets_ok);
}
