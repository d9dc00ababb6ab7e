//! Runs the probe once and prints the summary: `probe_once CPU SECONDS [lift] [inject]`.
use irqlab_measure::probe::{measure_with_gaps, Config, Injector, RtLimit};
use std::sync::atomic::AtomicBool;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let cpu: usize = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(1);
    let secs: u64 = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(2);
    let config = Config {
        cpu: Some(cpu),
        duration_ns: secs * 1_000_000_000,
        rt_limit: if args.iter().any(|a| a == "keep") { RtLimit::Keep } else { RtLimit::LiftIfAllowed },
        priority: Some(50),
        ..Config::default()
    };
    let _inj = args.iter().any(|a| a == "inject").then(|| Injector::start(cpu, 60, 1_000_000, 10_000_000).unwrap());
    let m = measure_with_gaps(&config, &AtomicBool::new(false), |_| {}).unwrap();
    let c = &m.curve;
    println!(
        "period {:.1}ns gaps {} max {} mean {:.5} >100us/s {:.1} | {}",
        c.sampling_period_ns, c.gaps, c.max_gap_ns, c.mean_load, c.gaps_over_100us_per_s, c.rt_throttling.note
    );
    for p in &c.points {
        print!("{}:{:.3} ", p.window_ns, p.max_load);
    }
    println!();
    let mut big: Vec<_> = m.gaps.iter().filter(|g| g.len_ns > 300_000).collect();
    big.sort_by_key(|g| std::cmp::Reverse(g.len_ns));
    for g in big.iter().take(8) {
        print!("[{}ms {}us] ", g.start_ns / 1_000_000, g.len_ns / 1000);
    }
    println!();
    let mut h = std::collections::BTreeMap::new();
    for g in m.gaps.iter().filter(|g| g.len_ns > 100_000) {
        *h.entry(g.len_ns / 100_000).or_insert(0u32) += 1;
    }
    println!("probe >100us by 100us bucket: {h:?}");
    if args.iter().any(|a| a == "oslat") {
        let out = std::process::Command::new("oslat")
            .args(["-c", &cpu.to_string(), "-D", &secs.to_string(), "-f", "50", "-b", "1024", "-q", "-z", "--json=/tmp/oslat-x.json"])
            .output()
            .unwrap();
        let doc: serde_json::Value = serde_json::from_str(&std::fs::read_to_string("/tmp/oslat-x.json").unwrap()).unwrap();
        let t = &doc["thread"]["0"];
        let mut h = std::collections::BTreeMap::new();
        for (k, v) in t["histogram"].as_object().unwrap() {
            let k: u64 = k.parse().unwrap();
            if k > 100 {
                *h.entry(k / 100).or_insert(0u64) += v.as_u64().unwrap();
            }
        }
        println!("oslat duration {} >100us by 100us bucket: {h:?} {}", t["duration"], out.status);
    }
}
