//! `irqlab idletime-model` and `irqlab reproduce idletime --quick` against
//! the real binary.

mod common;
use common::irqlab;

#[test]
fn model_grid_json_and_svg() {
    let dir = tempfile::tempdir().unwrap();
    let (svg, json) = (dir.path().join("m.svg"), dir.path().join("m.json"));
    let out = irqlab()
        .args(["idletime-model", "--resource", "disk", "--p", "0..200ms", "--i", "1..100%", "--i-steps", "12"])
        .arg("--svg")
        .arg(&svg)
        .arg("--json")
        .arg(&json)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(std::fs::read_to_string(&svg).unwrap().starts_with("<svg"));
    let doc: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(doc["schema"], "irqlab/idletime-model/v1");
    // p = 20 ms (second row), i = 1% (first column), hand-computed:
    // b = (52.40 - 8.30) * (99 - (20 + 19)) / 99 = 26.727 → 51.0% of r_max; f = r(i) → 100%.
    assert_eq!(doc["intervals_ns"][1], 20_000_000);
    let b = doc["background_norm"][1][0].as_f64().unwrap();
    assert!((b - 44.1 * 60.0 / 99.0 / 52.4).abs() < 1e-9, "{b}");
    assert_eq!(doc["foreground_norm"][1][0].as_f64().unwrap(), 1.0);
    // p = 0 < service: the priority queue, foreground at half its baseline.
    assert!((doc["foreground_norm"][0][5].as_f64().unwrap() - 0.5).abs() < 1e-9);
}

#[test]
fn model_bad_input_exits_2_with_location() {
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("t.csv");
    std::fs::write(&csv, "intensity_pct,throughput\n10,5\n20,oops\n").unwrap();
    let out = irqlab().args(["idletime-model", "--resource"]).arg(&csv).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.starts_with("error: ") && err.contains("t.csv:3:1"), "{err}");
    for args in
        [vec!["--resource", "disk", "--p", "5ms..1ms"], vec!["--resource", "udp", "--i", "0..50%"], vec!["--resource", "/nonexistent.csv"]]
    {
        let out = irqlab().arg("idletime-model").args(&args).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
    }
}

/// Relations that the simulation is known not to reproduce after the
/// mechanisms were modelled as the dissertation describes them, each with
/// the figure --quick measures (None: no swept p reached the criterion) and
/// the reason; docs/idletime.md gives the analysis. A figure that moves
/// fails the test, so the docs are revisited whenever the model changes.
const KNOWN_MISSES: &[(&str, Option<f64>, &str)] = &[
    (
        "gige-tcp-udp: smallest p",
        Some(0.1),
        "simulated TCP is protected from p = 0.1 ms: nothing in BSD TCP's output path is timed by the 1.25 ms RTT estimate (it only sets the RTO, whose floor is 230 ms), so no landmark appears there",
    ),
    (
        "lan100-tcp-udp: smallest p",
        None,
        "ENOBUFS quench gaps (1-12 ms) in the foreground stream let the interval expire and background fills the 128-descriptor FIFO ring below the scheduler; with ALTQ's token bucket regulator the priority queue alone suffices instead",
    ),
    (
        "GigE UDP/UDP: min foreground at p >= 0.5 ms, i > 10%",
        Some(89.4),
        "at 20% intensity the background sender shares the kernel CPU until its 50-packet queue is full: ~50 x 40.6 us of each 20 ms burst, 89.4% instead of > 90%",
    ),
    (
        "GigE UDP/UDP: model MAE, foreground",
        Some(11.9),
        "checked at the dissertation's own < 10% for UDP/UDP (§7.1.1): the model gives the foreground 100% at every p above the service time, the simulation 52% at i = 1% (a 1 ms burst shares the kernel CPU with the background sender for most of its length, the mechanism of the miss above); that one column is 48 of the 11.9 points",
    ),
];

#[test]
fn quick_reproduction_checks_every_relation() {
    let dir = tempfile::tempdir().unwrap();
    let (json, html) = (dir.path().join("r.json"), dir.path().join("r.html"));
    let out = irqlab().args(["reproduce", "idletime", "--quick", "--json"]).arg(&json).arg("--html").arg(&html).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let doc: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(doc["schema"], "irqlab/reproduce/v1");
    assert_eq!(doc["paper"], "idletime");
    assert_eq!(doc["complete"], true);
    let names: Vec<&str> = doc["details"]["experiments"].as_array().unwrap().iter().map(|x| x["spec"]["name"].as_str().unwrap()).collect();
    for want in [
        "disk-random",
        "disk-sequential",
        "gige-udp-udp",
        "gige-udp-tcp",
        "gige-tcp-udp",
        "gige-tcp-tcp",
        "lan100-tcp-udp",
        "wan10ms-tcp-udp",
    ] {
        assert!(names.contains(&want), "{want} missing from {names:?}");
    }
    for x in doc["details"]["experiments"].as_array().unwrap() {
        let (np, ni) = (x["spec"]["intervals_ns"].as_array().unwrap().len(), x["spec"]["intensities"].as_array().unwrap().len());
        let grid = x["grid"].as_array().unwrap();
        assert_eq!(grid.len(), np);
        assert!(grid.iter().all(|r| r.as_array().unwrap().len() == ni));
        // The X[e] counters of the idletime scheduler are reported per point.
        assert!(grid[np - 1][ni - 1]["counters"].as_object().unwrap().keys().any(|k| k.ends_with("[f]")));
    }
    let rows = doc["rows"].as_array().unwrap();
    let checked: Vec<_> = rows.iter().filter(|r| !r["holds"].is_null()).collect();
    assert!(checked.len() >= 15, "only {} checked relations", checked.len());
    let mut misses = Vec::new();
    for r in &checked {
        let metric = r["metric"].as_str().unwrap();
        let holds = r["holds"].as_bool().unwrap();
        match KNOWN_MISSES.iter().find(|(m, _, _)| metric.starts_with(m)) {
            Some((_, figure, why)) => {
                eprintln!("known miss `{metric}`: holds = {holds} (simulated {}): {why}", r["simulated"]);
                // NaN (no p qualified) is written as JSON null.
                let got = r["simulated"].as_f64();
                let same = match (figure, got) {
                    (Some(want), Some(got)) => (got - want).abs() <= 0.05 * want.abs().max(1.0),
                    (None, None) => true,
                    _ => false,
                };
                if !same {
                    misses.push(format!("known miss {metric} moved: pinned {figure:?}, now {got:?}; update docs/idletime.md"));
                }
                if holds {
                    misses.push(format!("known miss {metric} now holds: take it out of KNOWN_MISSES and docs/idletime.md"));
                }
            }
            None => {
                if !holds {
                    misses.push(format!("{metric}: paper {} simulated {} {}", r["paper"], r["simulated"], r["unit"]));
                }
            }
        }
    }
    assert!(misses.is_empty(), "relations that must hold do not:\n{}\n{stdout}", misses.join("\n"));
    for (m, _, _) in KNOWN_MISSES {
        assert!(checked.iter().any(|r| r["metric"].as_str().unwrap().starts_with(m)), "{m} is no longer reported");
    }
    // Exit 1 exactly when some relation fails.
    let all_hold = checked.iter().all(|r| r["holds"] == true);
    assert_eq!(out.status.code(), Some(if all_hold { 0 } else { 1 }), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(doc["all_hold"], all_hold);
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains("<svg") && page.contains("disk-random") && page.contains("|model - sim|"));
}
