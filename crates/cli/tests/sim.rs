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
    assert_eq!(v["schema"], "irqlab/sim/v2");
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

/// A misspelt socket name (the issue's `poll = "hearbeat"`) used to create
/// a second, empty socket: every heartbeat lost, exit 0.
#[test]
fn a_socket_nothing_sends_to_is_a_located_error() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("typo.toml");
    let scenario = common::repo_file("scenarios/load-bounds/traditional.toml");
    let text = std::fs::read_to_string(scenario).unwrap().replace("poll = \"heartbeat\"", "poll = \"hearbeat\"");
    std::fs::write(&f, text).unwrap();
    let out = irqlab().arg("sim").arg(&f).args(["--duration", "100ms"]).output().unwrap();
    let err = common::stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("no traffic sends to socket `hearbeat`") && err.contains("heartbeat"), "{err}");
    assert!(err.contains("typo.toml:42:"), "{err}");
}

/// The same typo on the sending side: traffic to a socket no task reads
/// and no [[socket]] declares (issue 25, item 9).
#[test]
fn traffic_to_a_socket_nobody_reads_is_a_located_error() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("typo.toml");
    let mut text = std::fs::read_to_string(common::repo_file("scenarios/load-bounds/traditional.toml")).unwrap();
    let line = text.lines().count() + 5; // the blank line, [[traffic]], kind, interval, then socket
    text.push_str("\n[[traffic]]\nkind = \"constant\"\ninterval = \"10ms\"\nsocket = \"heartbaet\"\n");
    std::fs::write(&f, text).unwrap();
    let out = irqlab().arg("sim").arg(&f).args(["--duration", "100ms"]).output().unwrap();
    let err = common::stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("no task reads socket `heartbaet`") && err.contains("heartbeat"), "{err}");
    assert!(err.contains(&format!("typo.toml:{line}:")), "{err}");
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
        let cpu_ms = format!("{:.3}", t["run_ns"].as_u64().unwrap() as f64 / 1e6);
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

/// Counts that become allocations or loop bounds are bounded at parse time
/// (a 2^32 ring allocated 103 GB and aborted; a 2^32 NAPI weight wrapped to
/// 0 as u32 and hung), and so is the simulated duration.
#[test]
fn absurd_counts_and_durations_exit_2_naming_the_key_and_bound() {
    let dir = tempfile::tempdir().unwrap();
    let base = std::fs::read_to_string(example("probe-threaded.toml")).unwrap();
    for (from, to, key) in [
        ("ring = 256", "ring = 4294967296", "ring = 4294967296: must be 1..=1048576"),
        ("ring = 256", "ring = 256\nweight = 4294967296", "weight = 4294967296: must be 1..=1048576"),
        ("ring = 256", "ring = 0", "ring = 0: must be 1..=1048576"),
    ] {
        assert!(base.contains(from));
        let file = dir.path().join("s.toml");
        std::fs::write(&file, base.replacen(from, to, 1)).unwrap();
        let out = irqlab().arg("sim").arg(&file).args(["--duration", "200ms"]).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{to}: {err}");
        assert!(err.starts_with(&format!("error: {key}\n  at ")), "{to}: {err}");
    }
    let out = irqlab().args(["sim", &example("ping-flood.toml"), "--duration", "9223372036854775808ns"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("at most 1000000s"));
}
