//! Input that must be refused cleanly (issue 25, items 6, 7, 10, 11): exit
//! 2 naming the flag or file and the bound, never a panic, a hang, an
//! abort or a result of nonsense.

use std::path::Path;
use std::process::Output;
use std::time::{Duration, Instant};

mod common;
use common::{irqlab, path_str, run, stderr, stdout};

/// `irqlab ARGS`, killed after 30 s: a hang fails the test instead of
/// hanging the suite.
fn run_bounded(args: &[&str]) -> Output {
    let mut child = irqlab().args(args).stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::piped()).spawn().unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("irqlab {args:?} still running after 30 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

fn assert_refused(out: &Output, wants: &[&str]) {
    assert_eq!(out.status.code(), Some(2), "{}", stderr(out));
    for want in wants {
        assert!(stderr(out).contains(want), "no `{want}` in: {}", stderr(out));
    }
}

#[test]
fn count_flags_have_bounds() {
    for max_gaps in ["18446744073709551615", "100000000000", "0"] {
        let out = run(&["measure", "interference", "--max-gaps", max_gaps, "--lift-rt-limit", "--duration", "1s"]);
        assert_refused(&out, &["--max-gaps", "1..=1000000000"]);
    }
    let out = run(&["measure", "interference", "--per-decade", "4294967295"]);
    assert_refused(&out, &["--per-decade", "1..=1000"]);
    let out = run(&["load", "net", "--threads", "100000000"]);
    assert_refused(&out, &["--threads", "1..=1024"]);
    let out = run(&["load", "hackbench-like", "--groups", "100000000"]);
    assert_refused(&out, &["--groups", "1..=1024"]);
    // `load sends`: the host, the datagram size, the intensity and the buffer are checked before any testbed.
    let out = run(&["load", "sends", "--duration", "1s"]);
    assert_refused(&out, &["--to a|b"]);
    let out = run(&["load", "sends", "--to", "a", "--size", "2000", "--duration", "1s"]);
    assert_refused(&out, &["--size 2000", "1472"]);
    let out = run(&["load", "sends", "--to", "a", "--intensity", "0", "--duration", "1s"]);
    assert_refused(&out, &["--intensity 0"]);
    let out = run(&["load", "sends", "--to", "a", "--sndbuf", "1", "--duration", "1s"]);
    assert_refused(&out, &["--sndbuf 1"]);
    let out = run(&["load", "sends", "--to", "c", "--duration", "1s"]);
    assert_refused(&out, &["`c` is not a testbed host"]);
    let out = run(&["reproduce", "idletime", "--threads", "0"]);
    assert_refused(&out, &["--threads", "1..=1024"]);
    let out = run(&["bound", "--period", "7ms", "--wcet", "2ms", "--rows", "18446744073709551615"]);
    assert_refused(&out, &["--rows", "10000"]);
    let out = run(&["measure", "latency", "--cpu", "0-18446744073709551615", "--duration", "1s"]);
    assert_refused(&out, &["--cpu", "8191"]);
}

fn curve_file(dir: &Path, longest_load: &str) -> String {
    let path = dir.join(format!("tiny-{longest_load}.json"));
    std::fs::write(
        &path,
        format!(
            r#"{{"schema": "irqlab/curve/v1", "points": [{{"window_ns": 1000, "max_load": 0.5}}, {{"window_ns": 1000000, "max_load": {longest_load}}}]}}"#
        ),
    )
    .unwrap();
    path_str(&path).to_string()
}

#[test]
fn fit_ends_on_a_tiny_utilisation() {
    let dir = tempfile::tempdir().unwrap();
    let out = run_bounded(&["fit", &curve_file(dir.path(), "1e-12")]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    for tiny in ["1e-300", "5e-324"] {
        let out = run_bounded(&["fit", &curve_file(dir.path(), tiny)]);
        assert_refused(&out, &["too small", &format!("tiny-{tiny}.json")]);
        assert!(stderr(&out).contains(tiny), "{}", stderr(&out));
    }
}

#[test]
fn bound_reaches_a_huge_to_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let svg = dir.path().join("b.svg");
    let out = run(&["bound", "--period", "7ms", "--wcet", "2ms", "--to", "10000000000s", "--rows", "9", "--svg", path_str(&svg)]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    let windows: Vec<f64> = text.lines().skip(2).filter_map(|l| l.split_whitespace().next()?.strip_suffix('s')?.parse().ok()).collect();
    assert_eq!(windows.len(), 8, "{text}"); // the first row is in us
    assert!(windows.windows(2).all(|w| w[0] < w[1]), "not increasing: {windows:?}");
    assert_eq!(*windows.last().unwrap(), 1e10, "{text}");
    assert!(std::fs::read_to_string(&svg).unwrap().contains("</svg>"));
}

#[test]
fn implausible_throughput_tables_are_located() {
    let dir = tempfile::tempdir().unwrap();
    for (huge, col) in [("1.8e19", 4), ("1e308", 4)] {
        let table = dir.path().join("t.csv");
        std::fs::write(&table, format!("intensity_pct,throughput\n10,50\n20,{huge}\n")).unwrap();
        let out = run(&["idletime-model", "--resource", path_str(&table)]);
        assert_refused(&out, &["implausible", &format!("t.csv:3:{col}")]);
    }
}

#[test]
fn unreadable_inputs_are_bad_input() {
    let dir = tempfile::tempdir().unwrap();
    let out = run(&["fit", path_str(dir.path())]);
    assert_refused(&out, &["is a directory"]);
    let out = run(&["analyze", path_str(dir.path())]);
    assert_refused(&out, &["is a directory"]);

    let latin1 = dir.path().join("latin1.toml");
    std::fs::write(&latin1, b"# caf\xe9\n[[task]]\n").unwrap();
    let out = run(&["sim", path_str(&latin1)]);
    assert_refused(&out, &["not UTF-8", "latin1.toml:1:6"]);
    let out = run(&["fit", path_str(&latin1)]);
    assert_refused(&out, &["not UTF-8", "latin1.toml:1:6"]);
}

#[test]
fn control_characters_in_comments_get_a_message() {
    let dir = tempfile::tempdir().unwrap();
    for (name, text, code) in [("nul.toml", "# a\0b\n", "U+0000"), ("cr.toml", "# a\rb\n", "U+000D")] {
        let path = dir.path().join(name);
        std::fs::write(&path, format!("{text}[[task]]\nname = \"t\"\nperiod = \"7ms\"\nwcet = \"2ms\"\n")).unwrap();
        for command in ["analyze", "sim"] {
            let out = run(&[command, path_str(&path)]);
            assert_refused(&out, &[code, &format!("{name}:1:4")]);
        }
    }
}

#[test]
fn long_bad_values_are_clipped() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("big.toml");
    let long = "x".repeat(100_000);
    std::fs::write(&path, format!("[[task]]\nname = \"t\"\nperiod = \"{long}\"\nwcet = \"2ms\"\n")).unwrap();
    let out = run(&["analyze", path_str(&path)]);
    assert_refused(&out, &["…", "big.toml:3:10"]);
    assert!(stderr(&out).len() < 500, "{} bytes of error", stderr(&out).len());
    let out = run(&["bound", "--period", &long, "--wcet", "2ms"]);
    assert_refused(&out, &["--period", "…"]);
    assert!(stderr(&out).len() < 500, "{} bytes of error", stderr(&out).len());
}
