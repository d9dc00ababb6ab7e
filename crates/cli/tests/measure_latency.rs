//! `irqlab measure latency` against the real binary, and side by side with
//! rt-tests' cyclictest (live: IRQLAB_LIVE_TESTS=1, as root).

use std::process::{Command, Stdio};

mod common;
use common::{irqlab, live_tests_enabled};

#[test]
fn bad_flags_exit_2_with_a_message() {
    for args in [
        vec!["--interval", "1"],
        vec!["--interval", "1us"],
        vec!["--cpu", "9999"],
        vec!["--cpu", "1-0"],
        vec!["--duration", "soon"],
    ] {
        let out = irqlab().args(["measure", "latency"]).args(&args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.starts_with("error: "), "{args:?}: {err}");
    }
}

#[test]
fn writes_latency_v1_json() {
    if !live_tests_enabled("writes_latency_v1_json") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("lat.json");
    let out = irqlab()
        .args(["measure", "latency", "--cpu", "0", "--interval", "1ms", "--duration", "200ms", "--histogram", "--json"])
        .arg(&json)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("T: 0 ("), "{stdout}");
    assert!(stdout.contains("# Histogram"), "{stdout}");
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(v["schema"], "irqlab/latency/v1");
    assert_eq!(v["complete"], true);
    assert_eq!(v["policy"], "SCHED_FIFO");
    common::assert_records_this_machine(&v);
    assert_eq!(v["threads"][0]["cycles"], 200);
    let lat = &v["threads"][0]["latency"];
    let hist: u64 = lat["histogram"]["counts"].as_array().unwrap().iter().map(|c| c.as_u64().unwrap()).sum();
    assert_eq!(hist + lat["histogram"]["overflow"].as_u64().unwrap(), 200);
    assert!(lat["min_ns"].as_u64().unwrap() <= lat["p50_ns"].as_u64().unwrap());
    assert!(lat["p50_ns"].as_u64().unwrap() <= lat["max_ns"].as_u64().unwrap());
}

#[test]
fn json_dash_puts_only_the_document_on_stdout() {
    if !live_tests_enabled("json_dash_puts_only_the_document_on_stdout") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let out = irqlab()
        .args(["measure", "latency", "--cpu", "0", "--interval", "1ms", "--duration", "100ms", "--histogram", "--json", "-"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("stdout is not one JSON document ({e}): {}", String::from_utf8_lossy(&out.stdout)));
    assert_eq!(v["schema"], "irqlab/latency/v1");
    assert_eq!(v["threads"][0]["cycles"], 100);
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0, "a file was written into the working directory");
}

/// cyclictest's `-q -N` summary: (min, avg, max) in ns.
fn parse_cyclictest(text: &str) -> (f64, f64, f64) {
    let line = text.lines().find(|l| l.starts_with("T:")).unwrap_or_else(|| panic!("no summary in {text}"));
    let field = |name: &str| -> f64 {
        let rest = &line[line.find(name).unwrap_or_else(|| panic!("{name} in {line}")) + name.len()..];
        rest.split_whitespace().next().unwrap().parse().unwrap()
    };
    (field("Min:"), field("Avg:"), field("Max:"))
}

fn agrees(ours: f64, theirs: f64) -> bool {
    (ours - theirs).abs() <= (0.2 * theirs).max(10_000.0)
}

/// Both tools on the same CPU, same priority, interval and duration, at the
/// same time with wake-ups aligned to the same instants (`--align` /
/// `--secaligned`): whatever delays one wake-up (another helper's build, an
/// interrupt, the hypervisor) delays the other's, so even the maximum is
/// comparable on a busy 2-core VM (up to the constant shift of being served
/// second, see `compare_once`). Running one after the other instead
/// compares two different samples of a rare-event statistic.
#[test]
fn agrees_with_cyclictest_on_the_same_cpu() {
    if !live_tests_enabled("agrees_with_cyclictest_on_the_same_cpu") {
        return;
    }
    assert!(
        Command::new("cyclictest").arg("--help").stdout(Stdio::null()).stderr(Stdio::null()).status().is_ok(),
        "cyclictest not installed: scripts/install-deps.sh installs rt-tests"
    );
    let online = std::fs::read_to_string("/sys/devices/system/cpu/online").unwrap();
    let cpu = online.trim().rsplit(['-', ',']).next().unwrap().to_string();
    // The maximum is a rare-event statistic: even run side by side, one
    // hypervisor stall can land in only one tool's sample. Up to three
    // attempts, each failure printed; the test fails only if none agrees.
    let mut failures = Vec::new();
    for attempt in 1..=3 {
        match compare_once(&cpu) {
            Ok(()) => return,
            Err(e) => {
                eprintln!("attempt {attempt}: {e}");
                failures.push(e);
            }
        }
    }
    panic!("irqlab and cyclictest disagreed in every attempt: {failures:?}");
}

/// One side-by-side run; Err says which statistic disagreed.
fn compare_once(cpu: &str) -> Result<(), String> {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("lat.json");
    let ours = irqlab()
        .args(["measure", "latency", "--cpu", cpu, "--priority", "80", "--interval", "1ms", "--duration", "5s", "--align", "--json"])
        .arg(&json)
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let theirs = Command::new("cyclictest")
        .args(["-q", "-m", "-p80", &format!("-a{cpu}"), "-t1", "-i1000", "-D5", "-N", "--secaligned"])
        .output()
        .unwrap();
    let ours = ours.wait_with_output().unwrap();
    assert!(ours.status.success(), "irqlab: {}", String::from_utf8_lossy(&ours.stderr));
    let (ct_min, ct_avg, ct_max) = parse_cyclictest(&String::from_utf8_lossy(&theirs.stdout));
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let lat = &v["threads"][0]["latency"];
    let (min, avg, max) =
        (lat["min_ns"].as_f64().unwrap(), lat["mean_ns"].as_f64().unwrap(), lat["max_ns"].as_f64().unwrap());
    eprintln!("cpu {cpu}: irqlab min/avg/max {min}/{avg:.0}/{max} ns, cyclictest {ct_min}/{ct_avg}/{ct_max} ns");
    // Woken at the same instant on one CPU, the two threads run one after
    // the other, and the one served second (the same every cycle: it also
    // re-arms its timer second) has the other's wake-up, bookkeeping and
    // switch added to every sample: ~6 us on this VM, which alone took the
    // maxima 11-14 us apart. So the means must agree as measured (which
    // bounds that shift), the minima and maxima once it is taken out.
    let shift = avg - ct_avg;
    for (what, a, b) in [("min", min - shift, ct_min), ("avg", avg, ct_avg), ("max", max - shift, ct_max)] {
        if !agrees(a, b) {
            return Err(format!("{what}: irqlab {a:.0} ns vs cyclictest {b} ns (mean shift {shift:.0} ns taken out of min and max)"));
        }
    }
    Ok(())
}
