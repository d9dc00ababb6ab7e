//! Helpers shared by the simulator's integration tests: build scenarios
//! from TOML text and run them.

use irqlab_sim::{run_scenario, Scenario, SimResult};
use std::sync::atomic::AtomicBool;

/// Runs a scenario given as TOML text and checks the two conservation laws
/// that must hold for every run.
#[allow(dead_code)]
pub fn run(text: &str) -> SimResult {
    let sc = Scenario::parse("test.toml", text).unwrap_or_else(|e| panic!("{e}: {:?}\n{text}", e.location));
    let p = sc.run_params(None, None).unwrap();
    let r = run_scenario(&sc, p, false, &AtomicBool::new(false), |_| {}).expect("run").result;
    assert!(r.conservation.cpu_time_ok, "CPU time not conserved: {:?} vs {}", r.cpu, r.measured_ns);
    assert!(r.conservation.packets_ok, "packets not conserved: {:?}", r.conservation);
    r
}

#[allow(dead_code)]
pub fn task<'a>(r: &'a SimResult, name: &str) -> &'a irqlab_sim::results::TaskResult {
    r.tasks.iter().find(|t| t.name == name).unwrap_or_else(|| panic!("no task {name}"))
}

/// A machine section with the given softirq model and zero costs unless
/// `costs` (`k=v,k=v`) overrides them; other keys (scheduler, ...) go to
/// `[machine]`.
#[allow(dead_code)]
pub fn machine(hz: u32, softirq: &str, costs: &str) -> String {
    let mut c = std::collections::BTreeMap::from([
        ("irq_entry", "0"),
        ("irq_exit", "0"),
        ("tick", "0"),
        ("context_switch", "0"),
        ("irq_primary", "0"),
    ]);
    let mut extra = String::new();
    for kv in costs.split(',').filter(|s| !s.is_empty()) {
        let (k, v) = kv.split_once('=').expect("k=v");
        if c.contains_key(k.trim()) {
            c.insert(k.trim(), v.trim());
        } else {
            let v = v.trim();
            let raw = v == "true" || v == "false" || v.parse::<f64>().is_ok();
            if raw {
                extra.push_str(&format!("{} = {v}\n", k.trim()));
            } else {
                extra.push_str(&format!("{} = \"{v}\"\n", k.trim()));
            }
        }
    }
    // Keys that are not costs belong to [machine] itself.
    let mut s = format!("[machine]\nhz = {hz}\nsoftirq = \"{softirq}\"\n{extra}[machine.costs]\n");
    for (k, v) in c {
        s.push_str(&format!("{k} = \"{v}\"\n"));
    }
    s
}

/// A scenario of the repository (`scenarios/...`), parsed.
#[allow(dead_code)]
pub fn repo_scenario(path: &str) -> irqlab_sim::Scenario {
    let file = format!("{}/../../{path}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&file).unwrap();
    irqlab_sim::Scenario::parse(&file, &text).unwrap_or_else(|e| panic!("{e}"))
}

/// Runs every CPU of `sc`; the machine's books must balance.
#[allow(dead_code)]
pub fn run_machine(sc: &irqlab_sim::Scenario) -> irqlab_sim::machine::MachineResult {
    let p = sc.run_params(None, None).unwrap();
    let r = irqlab_sim::run_machine(sc, p, &Default::default(), |_| {}).unwrap();
    assert!(r.conservation.ok(), "{:?}", r.conservation);
    r
}
