//! `irqlab sim` of a machine of several CPUs (issue 53): the summary per
//! CPU, the `irqlab/sim-machine/v1` document, and the placements the
//! model refuses, each at its `file:line:col` with exit 2.

mod common;
use common::{irqlab, repo_file, stderr, stdout};

/// The RPS example with `from` replaced by `to`, run; exit code, stderr,
/// and the 1-based line holding `marker`.
fn sim_with(from: &str, to: &str, marker: &str) -> (Option<i32>, String, usize) {
    let dir = tempfile::tempdir().unwrap();
    let base = std::fs::read_to_string(repo_file("scenarios/kernels/rps-6.12.toml")).unwrap();
    assert!(base.contains(from), "the example no longer has {from:?}");
    let text = base.replacen(from, to, 1);
    let line = text.lines().position(|l| l.starts_with(marker)).expect("marker in the file") + 1;
    let f = dir.path().join("mc.toml");
    std::fs::write(&f, &text).unwrap();
    let out = irqlab().arg("sim").arg(&f).args(["--duration", "200ms"]).output().unwrap();
    (out.status.code(), stderr(&out), line)
}

#[test]
fn the_machine_document_has_each_cpu_and_the_summary_names_them() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("m.json");
    let out = irqlab()
        .arg("sim")
        .arg(repo_file("scenarios/kernels/rps-6.12.toml"))
        .args(["--duration", "200ms", "--json"])
        .arg(&json)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("CPU 0:") && text.contains("CPU 1:"), "{text}");
    let doc: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(doc["schema"], "irqlab/sim-machine/v1");
    assert_eq!(doc["cores"], 2);
    assert_eq!(doc["kernel"], "linux-6.12");
    assert_eq!(doc["cpus"].as_array().unwrap().len(), 2);
    assert_eq!(doc["cpus"][1]["sim"]["schema"], "irqlab/sim/v2");
    assert!(doc["cpus"][0]["cross_cpu"]["ipis_sent"].as_u64().unwrap() > 0);
    assert_eq!(doc["conservation"]["packets_ok"], true);
}

#[test]
fn a_cpu_outside_the_machine_is_located() {
    let (code, err, line) = sim_with("kind = \"udp-server\"\ncpu = 1\n", "kind = \"udp-server\"\ncpu = 5\n", "cpu = 5");
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("cpu = 5, but the machine has cores = 2"), "{err}");
    assert!(err.contains(&format!("mc.toml:{line}:7")), "{err}");
    let (code, err, _) = sim_with("cores = 2", "cores = 0", "cores");
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("cores must be 1..=64"), "{err}");
}

#[test]
fn a_reader_away_from_its_packets_cpu_is_refused_with_the_cpu_to_use() {
    let (code, err, line) = sim_with("rps_cpu = 1\n", "rps_cpu = 0\n", "rps_cpu");
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("put it on CPU 0"), "{err}");
    assert!(err.contains("mc.toml:") && !err.contains(&format!("mc.toml:{line}:")), "located at the task, not the NIC: {err}");
}

#[test]
fn a_preset_with_a_softirq_model_and_an_unknown_preset_are_located() {
    let (code, err, line) = sim_with("kernel = \"linux-6.12\"", "kernel = \"linux-6.12\"\nsoftirq = \"linux-2.6\"", "softirq");
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("sets the softirq model; leave `softirq` out") && err.contains(&format!("mc.toml:{line}:11")), "{err}");
    let (code, err, line) = sim_with("kernel = \"linux-6.12\"", "kernel = \"linux-5.4\"", "kernel");
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("unknown kernel `linux-5.4` (linux-6.1, linux-6.12, linux-6.1-rt, linux-6.12-rt)")
            && err.contains(&format!("mc.toml:{line}:10")),
        "{err}"
    );
}

#[test]
fn one_cpu_outputs_are_refused_for_a_machine_of_two() {
    let out = irqlab()
        .arg("sim")
        .arg(repo_file("scenarios/kernels/rps-6.12.toml"))
        .args(["--duration", "200ms", "--trace", "/tmp/never.json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("--trace is for one CPU so far"), "{}", stderr(&out));
}
