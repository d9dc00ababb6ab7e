//! `irqlab reproduce bh-threshold --quick` and `irqlab reproduce
//! process-aware --quick` against the real binary: the documents, the exit
//! code, and every relation row.

use std::process::Command;

/// BH-threshold relations that the simulation does not reproduce (see
/// docs/bh-policies.md, with what was checked in the paper's text): with a line-rate flood at a
/// constant per-packet cost, the 2.4 model's bottom-half time per ms is
/// nearly constant, the controller's threshold never binds, and the
/// "scheduling anomaly" does not appear. The test insists these stay
/// listed here while they fail, and that every other relation holds.
const BH_NOT_REPRODUCED: &[&str] = &[
    "mean inter-frame delay, flood, no BH scheduler (Fig. 4b): >= 2x no load",
    "max inter-frame delay, flood, BH scheduler: reduced",
    "BH time per ms p95-p5 after start-up, BH scheduler (Fig. 5b): >= 3x narrower",
    "decode time ratio without/with BH scheduler: > 1 (paper's direction)",
    "CPU user %, BH scheduler: above without by >= 1 point (direction only)",
    "CPU system %, BH scheduler: below without by >= 1 point (direction only)",
    // With the threshold anchored at the mean (§2.3) the controller defers
    // jobs, which run at the next activation under the constant flood: the
    // player's delays are the vanilla run's, 22% above no load with the
    // calibrated kernel time per frame (docs/bh-policies.md).
    "mean inter-frame delay, flood, BH scheduler (Fig. 4c): within 15% of no load",
];

/// Process-aware relations not reproduced: none since the MMPP-2 client
/// sends its bursts at a user-space sender's pace instead of GigE line
/// rate (docs/bh-policies.md). The list stays so that a relation that
/// starts to fail has to be named here, with its reason, to pass.
const PA_NOT_REPRODUCED: &[&str] = &[];

fn reproduce(paper: &str) -> (Option<i32>, serde_json::Value) {
    let dir = tempfile::tempdir().unwrap();
    let (json, html, md) = (dir.path().join("r.json"), dir.path().join("r.html"), dir.path().join("r.md"));
    let out = Command::new(env!("CARGO_BIN_EXE_irqlab"))
        .args(["reproduce", paper, "--quick", "--threads", "2"])
        .arg("--json")
        .arg(&json)
        .arg("--html")
        .arg(&html)
        .arg("--markdown")
        .arg(&md)
        .output()
        .unwrap();
    let doc: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(doc["schema"], "irqlab/reproduce/v1");
    assert_eq!(doc["quick"], true);
    assert_eq!(doc["complete"], true);
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains("<svg"), "the HTML carries the plots");
    assert!(std::fs::read_to_string(&md).unwrap().contains("| metric | paper | simulated | unit | holds |"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    for r in doc["rows"].as_array().unwrap() {
        assert!(stdout.contains(r["metric"].as_str().unwrap()), "row printed: {}", r["metric"]);
    }
    (out.status.code(), doc)
}

fn checked(doc: &serde_json::Value) -> Vec<(String, bool)> {
    doc["rows"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r["holds"].as_bool().map(|h| (r["metric"].as_str().unwrap().to_string(), h)))
        .collect()
}

#[test]
fn bh_threshold_quick_relations() {
    let (code, doc) = reproduce("bh-threshold");
    let rows = checked(&doc);
    assert!(doc["rows"].as_array().unwrap().len() >= 10, "the issue's relations are all there");
    // "The scheduler costs nothing" is checked only when it acted.
    let deferred = doc["details"]["scheduler"]["policy"]["deferrals"].as_u64().unwrap();
    let untested = doc["rows"].as_array().unwrap().iter().filter(|r| r["metric"].as_str().unwrap().contains("[not tested")).count();
    assert_eq!(untested, if deferred == 0 { 3 } else { 0 });
    for (metric, holds) in &rows {
        let known = BH_NOT_REPRODUCED.contains(&metric.as_str());
        assert_eq!(*holds, !known, "{metric}: holds = {holds}, listed as not reproduced = {known}");
    }
    let all = rows.iter().all(|(_, h)| *h);
    assert_eq!(doc["all_hold"], all);
    assert_eq!(code, Some(if all { 0 } else { 1 }), "exit 1 exactly when a relation fails");
    // The three runs really ran: frames were played, packets processed.
    assert!(doc["details"]["no_load"]["frames"].as_u64().unwrap() > 100);
    assert!(doc["details"]["vanilla"]["bh_mean_us"].as_f64().unwrap() > 100.0);
}

#[test]
fn process_aware_quick_relations() {
    let (code, doc) = reproduce("process-aware");
    let rows = checked(&doc);
    assert!(rows.len() >= 10, "the issue's relations are all there");
    for (metric, holds) in &rows {
        let known = PA_NOT_REPRODUCED.contains(&metric.as_str());
        assert_eq!(*holds, !known, "{metric}: holds = {holds}, listed as not reproduced = {known}");
    }
    let all = rows.iter().all(|(_, h)| *h);
    assert_eq!(doc["all_hold"], all);
    assert_eq!(code, Some(if all { 0 } else { 1 }), "exit 1 exactly when a relation fails");
}

/// `irqlab sim` runs either policy on a scenario that is not one of the
/// reproductions' (the ping-flood example), and rejects bad parameters
/// with a location and exit 2.
#[test]
fn sim_runs_either_policy_on_any_scenario() {
    let base = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../scenarios/examples/ping-flood.toml")).unwrap();
    let dir = tempfile::tempdir().unwrap();
    for (policy, extra, name) in [
        ("bh-threshold", "gain = 0.25\nwindow = 100\nt_min = \"50us\"\n", "bh-threshold"),
        ("process-aware", "mode = \"ISA\"\n", "process-aware-isa"),
    ] {
        let sc = dir.path().join(format!("{policy}.toml"));
        std::fs::write(&sc, format!("{base}\n[policy]\nbottom_half = \"{policy}\"\n{extra}")).unwrap();
        let json = dir.path().join(format!("{policy}.json"));
        let out = Command::new(env!("CARGO_BIN_EXE_irqlab"))
            .args(["sim", "--duration", "200ms"])
            .arg(&sc)
            .arg("--json")
            .arg(&json)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
        let doc: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
        assert_eq!(doc["machine"]["bottom_half_policy"], name);
        assert_eq!(doc["bottom_half_policy"]["name"], name);
    }
    let bad = dir.path().join("bad.toml");
    std::fs::write(&bad, format!("{base}\n[policy]\nbottom_half = \"bh-threshold\"\ngian = 0.25\n")).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_irqlab")).arg("sim").arg(&bad).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("gian") && err.contains("bad.toml:"), "{err}");
}
