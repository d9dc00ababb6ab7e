//! `irqlab analyze`, `bound` and `fit` run as a user runs them: the real
//! binary, real files, exit codes and error locations.

use std::path::PathBuf;

mod common;
use common::{json, run as irqlab, stderr, stdout};

fn example(name: &str) -> String {
    common::repo_file(&format!("examples/{name}"))
}

#[test]
fn p7_e2_example_refined_vs_traditional() {
    let set = example("p7-e2.toml");
    let rta = irqlab(&["analyze", &set]);
    assert_eq!(rta.status.code(), Some(0), "{}", stderr(&rta));
    assert!(stdout(&rta).contains("7ms"), "{}", stdout(&rta)); // R2 = 7 ms
                                                               // Eq. 8 at d2 = 8 ms: 5 + 4 > 8 with eq. 4, 5 + 3 ≤ 8 with eq. 6.
    let trad = irqlab(&["analyze", &set, "--test", "load", "--bound", "traditional"]);
    assert_eq!(trad.status.code(), Some(1));
    assert!(stdout(&trad).contains("MISS"));
    let refined = irqlab(&["analyze", &set, "--test", "load", "--bound", "refined"]);
    assert_eq!(refined.status.code(), Some(0));
}

#[test]
fn section5_orders_json_and_html() {
    let dir = tempfile::tempdir().unwrap();
    let fg_json = dir.path().join("fg.json");
    let fg = irqlab(&["analyze", &example("section5-foreground.toml"), "--json", fg_json.to_str().unwrap()]);
    assert_eq!(fg.status.code(), Some(1), "{}", stderr(&fg));
    let doc = json(&fg_json);
    assert_eq!(doc["schema"], "irqlab/analysis/v1");
    assert_eq!(doc["test"], "rta");
    assert_eq!(doc["schedulable"], false);
    let tau2 = doc["tasks"].as_array().unwrap().iter().find(|t| t["name"] == "tau2").unwrap();
    assert_eq!(tau2["schedulable"], false);
    assert!(tau2["response_time_ns"].is_null()); // utilisation 1.2: unbounded
                                                 // The paper's prediction: tau2 fits until e2 exceeds 1.2 ms = 0.24 × 5 ms.
    let margin = tau2["wcet_scale_margin"].as_f64().unwrap();
    assert!((margin - 0.24).abs() < 1e-6, "{margin}");

    let bg_json = dir.path().join("bg.json");
    let bg_html = dir.path().join("bg.html");
    let bg = irqlab(&[
        "analyze",
        &example("section5-background.toml"),
        "--json",
        bg_json.to_str().unwrap(),
        "--html",
        bg_html.to_str().unwrap(),
    ]);
    assert_eq!(bg.status.code(), Some(0), "{}", stderr(&bg));
    let doc = json(&bg_json);
    let tau2 = &doc["tasks"][1];
    assert_eq!(tau2["name"], "tau2");
    assert_eq!(tau2["response_time_ns"], 7_000_000);
    assert_eq!(tau2["slack_ns"], 3_000_000);
    assert_eq!(doc["interferers"][0]["name"], "tauD");
    let html = std::fs::read_to_string(&bg_html).unwrap();
    assert!(html.contains("<svg") && html.contains("tau2"));

    let ss = irqlab(&["analyze", &example("section5-sporadic.toml"), "--json", bg_json.to_str().unwrap()]);
    assert_eq!(ss.status.code(), Some(0));
    // Ideal sporadic server: e2 up to 10 - e1 - budget = 7 ms = 1.4 × 5 ms.
    assert_eq!(json(&bg_json)["tasks"][1]["wcet_scale_margin"], 1.4);
}

#[test]
fn servers_and_deadline_beyond_period() {
    let dir = tempfile::tempdir().unwrap();
    let out_json = dir.path().join("s.json");
    let set = example("servers.toml");
    let out = irqlab(&["analyze", &set, "--json", out_json.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let doc = json(&out_json);
    let logger = doc["tasks"].as_array().unwrap().iter().find(|t| t["name"] == "logger").unwrap();
    // First job done at 23 ms, after the second release at 20 ms.
    assert_eq!(logger["response_time_ns"], 23_000_000);
    assert_eq!(doc["interferers"].as_array().unwrap().len(), 2);
    // The load test (eq. 8) does not apply to deadline > period: exit 2 at the deadline.
    let load = irqlab(&["analyze", &set, "--test", "load"]);
    assert_eq!(load.status.code(), Some(2));
    let text = std::fs::read_to_string(&set).unwrap();
    let line = text.lines().position(|l| l.starts_with("deadline = \"25ms\"")).unwrap() + 1;
    assert!(stderr(&load).contains(&format!("  at {set}:{line}:12\n")), "{}", stderr(&load));
}

#[test]
fn curve_task_and_edf() {
    let out = irqlab(&["analyze", &example("curve-nic.toml"), "--test", "edf"]);
    // Demand over load at each deadline stays below 1 (0.56 and 0.78 with
    // the NIC's measured curve): schedulable, exit 0.
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("nic (curve") && text.lines().last() == Some("schedulable"), "{text}");
}

/// Writes `src` to a task-set file and expects exit 2 with `error:` and the
/// location `file:line:col` of the bad value.
fn expect_input_error(src: &str, message: &str, line_col: &str, extra: &[&str]) {
    let dir = tempfile::tempdir().unwrap();
    let path: PathBuf = dir.path().join("set.toml");
    std::fs::write(&path, src).unwrap();
    let p = path.to_str().unwrap();
    let mut args = vec!["analyze", p];
    args.extend_from_slice(extra);
    let out = irqlab(&args);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{src:?}: {err}");
    assert!(err.starts_with("error: ") && err.contains(message), "{src:?}: {err}");
    assert!(err.contains(&format!("  at {p}:{line_col}\n")), "{src:?}: expected {line_col} in {err}");
    assert!(!err.contains("panicked"));
}

#[test]
fn bad_task_sets_are_located() {
    let ok = "[[task]]\nname = \"a\"\nperiod = \"10ms\"\nwcet = \"1ms\"\n";
    expect_input_error("[[task]]\nname = \"a\"\nperiod = \"10ms\"\n", "missing the field `wcet`", "1:1", &[]);
    expect_input_error("[[task]]\nname = \"a\"\nperiod = \"1ms\"\nwcet = \"2ms\"\n", "longer than the period", "4:8", &[]);
    expect_input_error("[[task]]\nname = \"a\"\nperiod = \"10ms\"\nwcet = \"-1ms\"\n", "negative", "4:8", &[]);
    expect_input_error("[[task]]\nname = \"a\"\nperiod = \"10\"\nwcet = \"1ms\"\n", "no unit", "3:10", &[]);
    expect_input_error("[[task]]\nname = \"a\"\nperiod = 10\nwcet = \"1ms\"\n", "no unit", "3:10", &[]);
    expect_input_error("[[task]]\nname = \"a\"\nkind = \"driver\"\n", "unknown task kind `driver`", "3:8", &[]);
    expect_input_error(&format!("{ok}{ok}"), "duplicate task name `a`", "6:8", &[]);
    expect_input_error("[[task]]\nname = \"a\"\nperiod = \"1ms\"\nwcet = \"1ms\"\n[task", "invalid table header", "5:6", &[]);
    // The load test (eq. 8) needs d ≤ p: the deadline is pointed at.
    expect_input_error(
        "[[task]]\nname = \"a\"\nperiod = \"10ms\"\nwcet = \"1ms\"\ndeadline = \"20ms\"\n",
        "deadline ≤ period",
        "5:12",
        &["--test", "load"],
    );
    expect_input_error("[[task]]\nname = \"c\"\nkind = \"curve\"\nfile = \"missing.csv\"\n", "cannot read curve file", "4:8", &[]);
}

#[test]
fn missing_file_and_bad_flags_exit_2() {
    let out = irqlab(&["analyze", "/nonexistent/set.toml"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).starts_with("error: "));
    let out = irqlab(&["analyze", &example("p7-e2.toml"), "--test", "nope"]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn bound_prints_the_papers_check_values_and_plots() {
    let dir = tempfile::tempdir().unwrap();
    let svg = dir.path().join("b.svg");
    let out = irqlab(&[
        "bound",
        "--period",
        "7ns",
        "--wcet",
        "2ns",
        "--from",
        "8ns",
        "--to",
        "9ns",
        "--rows",
        "2",
        "--svg",
        svg.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    let row8: Vec<&str> = text.lines().find(|l| l.trim_start().starts_with("8ns")).expect("row for 8ns").split_whitespace().collect();
    // window, traditional (eq. 4), refined (eq. 6), linear (eq. 7)
    assert_eq!(&row8[..4], ["8ns", "4ns", "3ns", "4ns"]);
    let svg = std::fs::read_to_string(&svg).unwrap();
    assert!(svg.contains("refined (eq. 6)") && svg.contains("hyperbolic (eq. 10)"));

    for bad in [["--wcet", "2"], ["--wcet", "5weeks"]] {
        let out = irqlab(&["bound", "--period", "7ms", bad[0], bad[1]]);
        assert_eq!(out.status.code(), Some(2), "{bad:?}");
        assert!(stderr(&out).starts_with("error: invalid value") && stderr(&out).contains("'--wcet <WCET>'"), "{}", stderr(&out));
    }
    let out = irqlab(&["bound", "--period", "7ms", "--wcet", "8ms"]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn fit_writes_u_and_p_that_cover_the_curve() {
    let dir = tempfile::tempdir().unwrap();
    let out_json = dir.path().join("fit.json");
    let out_svg = dir.path().join("fit.svg");
    let curve = example("curve-nic.json");
    let out = irqlab(&[
        "fit",
        &curve,
        "--baseline",
        &example("curve-baseline.csv"),
        "--json",
        out_json.to_str().unwrap(),
        "--svg",
        out_svg.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let doc = json(&out_json);
    assert_eq!(doc["schema"], "irqlab/fit/v1");
    let u = doc["utilization"].as_f64().unwrap();
    let p = doc["period_ns"].as_u64().unwrap();
    assert!(u > 0.0 && u < 1.0 && p > 0, "{doc}");
    assert!(std::fs::read_to_string(&out_svg).unwrap().contains("fitted hyperbola"));

    // Without the baseline the fit must lie on or above every raw point.
    let raw = irqlab(&["fit", &curve, "--json", out_json.to_str().unwrap()]);
    assert_eq!(raw.status.code(), Some(0));
    let doc = json(&out_json);
    let (u, p) = (doc["utilization"].as_f64().unwrap(), doc["period_ns"].as_u64().unwrap() as f64);
    let points: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&curve).unwrap()).unwrap();
    for pt in points["points"].as_array().unwrap() {
        let w = pt["window_ns"].as_f64().unwrap();
        let hyper = (u + u * (1.0 - u) * p / w).min(1.0);
        assert!(hyper >= pt["max_load"].as_f64().unwrap() - 1e-12, "{pt}");
    }
}

#[test]
fn bad_curves_are_located() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.csv");
    std::fs::write(&path, "window_ns,max_load\n1000,0.5\n2000,lots\n").unwrap();
    let out = irqlab(&["fit", path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains(&format!("  at {}:3:6", path.display())), "{}", stderr(&out));
    std::fs::write(&path, "window_ns,max_load\n1000,0.5\n2000,0\n").unwrap();
    let out = irqlab(&["fit", path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("load at the longest window is 0"));
}

#[test]
fn top_level_help_says_what_the_tool_is_for() {
    let help = irqlab(&["--help"]);
    assert_eq!(help.status.code(), Some(0));
    let first = stdout(&help).lines().next().unwrap_or_default().to_string();
    // The user's first line, not the crate's internal role.
    assert!(first.contains("interrupts steal"), "first help line: {first}");
}
