//! Scenario keys that belong nowhere, or to another kind than their
//! table's, are input errors (exit 2) at the key's `file:line:col`,
//! naming the keys valid there (issue 17: a `periodic` task with
//! `frames`, `intensity` and `pattern` used to run with exit 0).

mod common;
use common::{irqlab, repo_file, stderr};

/// Writes the ping-flood example with `from` replaced by `to` (which must
/// occur), runs `irqlab sim` on it and returns the exit code, stderr and
/// the 1-based line of the first line of `to` holding `marker`.
fn sim_with(from: &str, to: &str, marker: &str) -> (Option<i32>, String, usize) {
    let dir = tempfile::tempdir().unwrap();
    let base = std::fs::read_to_string(repo_file("scenarios/examples/ping-flood.toml")).unwrap();
    assert!(base.contains(from), "the example no longer has {from:?}");
    let text = base.replacen(from, to, 1);
    let line = text.lines().position(|l| l.starts_with(marker)).expect("marker in the file") + 1;
    let f = dir.path().join("keys.toml");
    std::fs::write(&f, &text).unwrap();
    let out = irqlab().arg("sim").arg(&f).args(["--duration", "10ms"]).output().unwrap();
    (out.status.code(), stderr(&out), line)
}

fn assert_located(err: &str, line: usize, col: usize) {
    assert!(err.contains(&format!("keys.toml:{line}:{col}")), "expected keys.toml:{line}:{col} in {err}");
}

#[test]
fn an_unknown_task_key_is_located_and_names_the_valid_keys() {
    let (code, err, line) = sim_with("exec = \"2ms\"\n", "exec = \"2ms\"\nexce = \"1ms\"\n", "exce");
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("unknown key `exce`") && err.contains("[[task]] of kind \"periodic\""), "{err}");
    assert_located(&err, line, 1);
    for key in ["exec", "period", "priority", "poll"] {
        assert!(err.contains(&format!(" {key},")) || err.contains(&format!(" {key}\n")), "valid key `{key}` not named: {err}");
    }
}

#[test]
fn a_key_of_another_task_kind_is_an_error() {
    for (key, value) in [("frames", "3"), ("intensity", "0.5"), ("pattern", "\"random\""), ("socket", "\"s\"")] {
        let (code, err, line) = sim_with("exec = \"2ms\"\n", &format!("exec = \"2ms\"\n{key} = {value}\n"), key);
        assert_eq!(code, Some(2), "{key}: {err}");
        assert!(err.contains(&format!("unknown key `{key}` in [[task]] of kind \"periodic\"")), "{err}");
        assert!(err.contains("valid keys:") && err.contains("exec_dist") && err.contains("recv_cost"), "{err}");
        assert!(!err.contains("keep_frames"), "a media-player key offered as valid: {err}");
        assert_located(&err, line, 1);
    }
}

#[test]
fn a_misspelt_section_is_located_and_names_the_sections() {
    for (from, to, marker) in [("[[task]]", "[[tasks]]", "[[tasks]]"), ("[run]", "[rnu]", "[rnu]")] {
        let (code, err, line) = sim_with(from, to, marker);
        assert_eq!(code, Some(2), "{to}: {err}");
        let key = to.trim_matches(['[', ']']);
        assert!(err.contains(&format!("unknown key `{key}`")), "{err}");
        assert!(err.contains("keys.toml:") && err.contains(&format!(":{line}:")), "line {line} expected: {err}");
        for section in ["machine", "task", "traffic", "run", "metric"] {
            assert!(err.contains(&format!(" {section},")) || err.contains(&format!(" {section}\n")), "{section} not named: {err}");
        }
    }
}

#[test]
fn misplaced_keys_in_nested_tables_and_other_kinds() {
    // A sub-table's key, a traffic key of another kind, a server key.
    let cases = [
        ("[nic.costs]\n", "[nic.costs]\nring = 4\n", "ring", "[nic.costs]", "icmp_echo"),
        ("link = \"1Gbit\"", "link = \"1Gbit\"\nburst = 4.0", "burst", "[[traffic]] of kind \"ping-flood\"", "interval"),
        ("seed = 1\n", "seed = 1\nwarmpu = \"1ms\"\n", "warmpu", "[run]", "warmup"),
    ];
    for (from, to, key, place, valid) in cases {
        let (code, err, line) = sim_with(from, to, to.lines().last().unwrap());
        assert_eq!(code, Some(2), "{key}: {err}");
        assert!(err.contains(&format!("unknown key `{key}` in {place}")) && err.contains(valid), "{err}");
        assert_located(&err, line, 1);
    }
}

#[test]
fn every_scenario_of_the_repository_still_loads() {
    for dir in ["examples", "load-bounds", "bh-threshold", "process-aware"] {
        for entry in std::fs::read_dir(repo_file(&format!("scenarios/{dir}"))).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "toml") {
                let out = irqlab().arg("sim").arg(&path).args(["--duration", "1s"]).output().unwrap();
                assert_eq!(out.status.code(), Some(0), "{}: {}", path.display(), stderr(&out));
            }
        }
    }
}
