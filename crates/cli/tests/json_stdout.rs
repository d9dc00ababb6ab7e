//! The `--json FILE|-` convention across commands: "-" puts the document,
//! and nothing else, on stdout (no file named "-"), the same document a
//! file gets; the other document flags refuse "-" with a usage error.

mod common;
use common::{irqlab, repo_file, stderr, stdout};
use std::process::Output;

/// Runs `irqlab ARGS` in a fresh directory and checks it left no file there.
fn run_in_empty_dir(args: &[&str]) -> Output {
    let dir = tempfile::tempdir().unwrap();
    let out = irqlab().args(args).current_dir(dir.path()).output().expect("run irqlab");
    let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert!(left.is_empty(), "{args:?} wrote {left:?} into the working directory");
    out
}

/// `irqlab ARGS --json -`: exit 0 and stdout exactly one JSON document of
/// `schema`.
fn document_on_stdout(args: &[&str], schema: &str) -> serde_json::Value {
    let args: Vec<&str> = args.iter().copied().chain(["--json", "-"]).collect();
    let out = run_in_empty_dir(&args);
    assert_eq!(out.status.code(), Some(0), "{args:?}: {}", stderr(&out));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{args:?}: stdout is not one JSON document ({e}):\n{}", stdout(&out)));
    assert_eq!(doc["schema"], schema, "{args:?}");
    doc
}

/// The document `irqlab ARGS --json FILE` writes, with its stdout.
fn document_in_file(args: &[&str]) -> (serde_json::Value, String) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("doc.json");
    let out = irqlab().args(args).arg("--json").arg(&file).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{args:?}: {}", stderr(&out));
    (common::json(&file), stdout(&out))
}

#[test]
fn analyze_fit_and_idletime_model_put_the_file_document_on_stdout() {
    let taskset = repo_file("examples/section5-background.toml");
    let curve = repo_file("examples/curve-nic.json");
    let cases: [(&[&str], &str); 3] = [
        (&["analyze", &taskset], "irqlab/analysis/v1"),
        (&["fit", &curve], "irqlab/fit/v1"),
        (&["idletime-model", "--resource", "disk"], "irqlab/idletime-model/v1"),
    ];
    for (args, schema) in cases {
        let piped = document_on_stdout(args, schema);
        let (written, summary) = document_in_file(args);
        assert_eq!(piped, written, "{args:?}");
        // With a file, stdout keeps the text summary.
        assert!(!summary.is_empty() && serde_json::from_str::<serde_json::Value>(&summary).is_err(), "{args:?}: {summary}");
    }
}

#[test]
fn bench_and_reproduce_put_their_document_on_stdout() {
    let bench = document_on_stdout(&["bench", "sim", "--duration", "100ms"], "irqlab/bench-sim/v1");
    assert!(bench["events"].as_u64().unwrap() > 0, "{bench}");
    // A reproduction whose every relation holds (exit 0): process-aware's.
    let doc = document_on_stdout(&["reproduce", "process-aware", "--quick"], "irqlab/reproduce/v1");
    assert!(!doc["rows"].as_array().unwrap().is_empty(), "{doc}");
}

#[test]
fn file_only_flags_refuse_dash() {
    let taskset = repo_file("examples/section5-background.toml");
    let curve = repo_file("examples/curve-nic.json");
    let scenario = repo_file("scenarios/examples/ping-flood.toml");
    let cases: [(&[&str], &str); 5] = [
        (&["analyze", &taskset, "--html", "-"], "--html"),
        (&["fit", &curve, "--svg", "-"], "--svg"),
        (&["bound", "--period", "7ms", "--wcet", "2ms", "--svg", "-"], "--svg"),
        (&["sim", &scenario, "--duration", "10ms", "--trace", "-"], "--trace"),
        (&["reproduce", "load-bounds", "--quick", "--markdown", "-"], "--markdown"),
    ];
    for (args, flag) in cases {
        let out = run_in_empty_dir(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        let err = stderr(&out);
        assert!(err.contains(flag) && err.contains("only --json writes to stdout"), "{args:?}: {err}");
        assert!(out.stdout.is_empty(), "{args:?}: {}", stdout(&out));
    }
}
