//! Same scenario + seed ⇒ byte-identical result JSON; another seed gives
//! another result (the scenario draws Poisson arrivals and uniform
//! execution times).

use irqlab_sim::{run_scenario, Scenario};
use std::sync::atomic::AtomicBool;

fn json(seed: u64) -> String {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scenarios/examples/udp-poisson.toml");
    let text = std::fs::read_to_string(path).unwrap();
    let sc = Scenario::parse(path, &text).unwrap();
    let p = sc.run_params(Some(seed), Some(300_000_000)).unwrap();
    let r = run_scenario(&sc, p, false, &AtomicBool::new(false), |_| {}).unwrap().result;
    serde_json::to_string_pretty(&r).unwrap()
}

#[test]
fn same_seed_same_bytes_other_seed_differs() {
    let a = json(11);
    let b = json(11);
    assert_eq!(a, b);
    let c = json(12);
    assert_ne!(a, c);
}
