//! `irqlab sim`: real invocations of the binary.

mod common;
use common::irqlab;

fn example(name: &str) -> String {
    common::repo_file(&format!("scenarios/examples/{name}"))
}

#[test]
fn writes_identical_json_for_one_seed_and_html_and_curve() {
    let dir = tempfile::tempdir().unwrap();
    let run = |seed: &str, out: &str| {
        let st = irqlab()
            .args(["sim", &example("udp-poisson.toml"), "--duration", "200ms", "--seed", seed, "--json"])
            .arg(dir.path().join(out))
            .arg("--html")
            .arg(dir.path().join("page.html"))
            .status()
            .unwrap();
        assert!(st.success());
        std::fs::read(dir.path().join(out)).unwrap()
    };
    let a = run("3", "a.json");
    assert_eq!(a, run("3", "b.json"));
    assert_ne!(a, run("4", "c.json"));
    let v: serde_json::Value = serde_json::from_slice(&a).unwrap();
    assert_eq!(v["schema"], "irqlab/sim/v1");
    assert_eq!(v["conservation"]["cpu_time_ok"], true);
    assert!(std::fs::read_to_string(dir.path().join("page.html")).unwrap().contains("<svg"));

    let curve = dir.path().join("curve.json");
    let st = irqlab()
        .args(["sim", &example("probe-threaded.toml"), "--duration", "50ms", "--json"])
        .arg(dir.path().join("p.json"))
        .arg("--curve")
        .arg(&curve)
        .arg("--trace")
        .arg(dir.path().join("trace.json"))
        .status()
        .unwrap();
    assert!(st.success());
    let c: serde_json::Value = serde_json::from_slice(&std::fs::read(&curve).unwrap()).unwrap();
    assert_eq!(c["schema"], "irqlab/curve/v1");
    assert!(!c["points"].as_array().unwrap().is_empty());
    let t: serde_json::Value = serde_json::from_slice(&std::fs::read(dir.path().join("trace.json")).unwrap()).unwrap();
    assert!(t["traceEvents"].as_array().unwrap().len() > 100);
}

#[test]
fn bad_input_exits_2_with_location() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("bad.toml");
    let text = std::fs::read_to_string(example("ping-flood.toml")).unwrap().replace("priority = 90", "priority = 190");
    std::fs::write(&f, text).unwrap();
    let out = irqlab().arg("sim").arg(&f).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("priority must be 1-99"), "{err}");
    assert!(err.contains("bad.toml:"), "{err}");

    let out = irqlab().args(["sim", &example("ping-flood.toml"), "--curve", "x.json"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let out = irqlab().args(["sim", &example("ping-flood.toml"), "--duration", "5 parsecs"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let out = irqlab().args(["sim", "/nonexistent.toml"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn prints_a_summary_and_json_only_when_asked() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let out = irqlab().args(["sim", &example("ping-flood.toml"), "--duration", "100ms", "--json"]).arg(&json).output().unwrap();
    assert!(out.status.success());
    let text = common::stdout(&out);
    let doc = common::json(&json);
    // The summary's figures are the document's: every task with its CPU
    // time in ms, the NIC with what it was offered.
    assert!(text.contains("CPU time") && text.contains("Tasks") && text.contains("Network"), "{text}");
    for t in doc["tasks"].as_array().unwrap() {
        let cpu_ms = format!("{:.3}", t["cpu_ns"].as_u64().unwrap() as f64 / 1e6);
        let line = text.lines().find(|l| l.trim_start().starts_with(t["name"].as_str().unwrap())).unwrap_or_default();
        assert!(line.contains(&cpu_ms), "task line {line:?} lacks {cpu_ms}");
    }
    let offered = doc["nics"][0]["packets_offered"].as_u64().unwrap().to_string();
    assert!(text.lines().any(|l| l.trim_start().starts_with("eth0") && l.contains(&offered)), "{text}");

    // `--json -`: the document on stdout instead of the summary, so a pipe
    // gets JSON only.
    let out = irqlab().args(["sim", &example("ping-flood.toml"), "--duration", "100ms", "--json", "-"]).output().unwrap();
    assert!(out.status.success());
    let piped: serde_json::Value = serde_json::from_slice(&out.stdout).expect("stdout is one JSON document");
    assert_eq!(piped, doc);
}

#[test]
fn summary_lists_each_device_with_its_counters() {
    let out = irqlab().args(["sim", &example("disk-reader.toml"), "--duration", "1s", "--json", "-"]).output().unwrap();
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let out = irqlab().args(["sim", &example("disk-reader.toml"), "--duration", "1s"]).output().unwrap();
    assert!(out.status.success());
    let text = common::stdout(&out);
    let disk = &doc["devices"][0];
    let line = text.lines().find(|l| l.trim_start().starts_with(disk["name"].as_str().unwrap())).expect("a line for the disk");
    let completed = format!("requests_completed {}", disk["requests_completed"].as_u64().unwrap());
    assert!(disk["requests_completed"].as_u64().unwrap() > 0 && line.contains(&completed), "{line}");
    assert!(line.contains("response mean"), "{line}");
}
