//! Predict, apply, measure (issue 53), live on this machine: survey under
//! the testbed's flood twice (the second gives the measurement's own
//! run-to-run spread), predict the first survey's own profile with the
//! simulator (`control apply --predict`, which also applies it), survey
//! again with the profile in force and compare. The profile moves the
//! flood's NAPI thread off the quiet CPU, so that CPU's load under the
//! flood must fall as predicted.
//!
//! The check is on changes (predicted after minus simulated before,
//! measured after minus measured before) on the CPU the profile moves the
//! thread off, under the flood; the tolerance is the larger of that CPU's
//! two loads' run-to-run spreads at that measure (the CPU after the move
//! looks like the idle one). The mean load, which the model holds source
//! by source, must agree in size within twice that spread (the measured
//! change is two single runs, each off by up to it) plus the model's own
//! error on the before state and the rescheduling IPIs measured there
//! that woke no thread in their gap (the prediction moves a moved
//! thread's wake-up IPIs with it, and can place no other); the 10 ms maximum load must fall in both,
//! beyond the spread. The 1 ms maximum load, where a millisecond's
//! hypervisor stall lands at random on this VM, and every other row are
//! printed: what this
//! VM's hypervisor stalls and the flood's varying rate do to them from
//! run to run exceeds what one pair of surveys shows as spread
//! (docs/sim-multicore.md has the numbers). Needs IRQLAB_LIVE_TESTS=1 and root.

mod common;
use common::live::{start_with_stderr, wait_at_most};
use common::{irqlab, stderr};
use std::path::Path;
use std::time::{Duration, Instant};

/// The holding `control apply`: ended (SIGTERM, its clean exit) when the
/// test ends, passed or not.
struct Held(std::process::Child);

impl Drop for Held {
    fn drop(&mut self) {
        if self.0.try_wait().ok().flatten().is_none() {
            unsafe {
                libc::kill(self.0.id() as i32, libc::SIGTERM);
            }
            let _ = self.0.wait();
        }
    }
}

fn survey(out: &Path, extra: &[&str]) -> serde_json::Value {
    let o = irqlab().args(["survey", "--quick", "--load", "net", "--out"]).arg(out).args(extra).output().unwrap();
    assert!(o.status.code() == Some(0) || o.status.code() == Some(1), "survey {}: {}", out.display(), stderr(&o));
    common::json(&out.join("survey.json"))
}

/// The shares of the run the rescheduling IPIs (`irq RES`) took on `cpu`
/// under `load`: all of them, and those without a thread run after them
/// in their gap: IPIs whose
/// wakee the survey does not name, which the prediction leaves on the CPU
/// they were measured on. (Those followed by a thread are that thread's,
/// `resched_ipi_ns`, and move with it; docs/sim-multicore.md, "Not
/// modelled in the prediction".)
fn resched_ipi_shares(doc: &serde_json::Value, cpu: u64, load: &str) -> (f64, f64) {
    let curve = doc["cpus"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["cpu"] == cpu)
        .and_then(|c| c["curves"].as_array().unwrap().iter().find(|c| c["load"] == if load == "idle" { "none" } else { load }));
    let Some(curve) = curve else { return (0.0, 0.0) };
    let totals = curve["sources"]["totals"].as_array().map(Vec::as_slice).unwrap_or_default();
    let ns: u64 = totals
        .iter()
        .filter(|t| t["label"].as_str().is_some_and(|l| l.starts_with("irq RES")))
        .map(|t| t["ns"].as_u64().unwrap_or(0) + t["unseen_ns"].as_u64().unwrap_or(0))
        .sum();
    let woke: u64 = totals.iter().map(|t| t["resched_ipi_ns"].as_u64().unwrap_or(0)).sum();
    let run = curve["duration_ns"].as_f64().unwrap_or(f64::INFINITY);
    (ns as f64 / run, ns.saturating_sub(woke) as f64 / run)
}

/// The raw measures the prediction is lined up at: mean load, 1 ms, 10 ms.
fn measures(doc: &serde_json::Value, cpu: u64, load: &str) -> [f64; 3] {
    let curve = doc["cpus"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["cpu"] == cpu)
        // The survey document spells the idle load `none`; the prediction `idle`.
        .and_then(|c| c["curves"].as_array().unwrap().iter().find(|c| c["load"] == if load == "idle" { "none" } else { load }))
        .unwrap_or_else(|| panic!("no curve of CPU {cpu} {load}"));
    let totals = curve["sources"]["totals"].as_array().expect("per-source totals");
    let gap: u64 = totals.iter().map(|t| t["ns"].as_u64().unwrap() + t["unseen_ns"].as_u64().unwrap_or(0)).sum();
    let at = |w: u64| {
        curve["measured"]["points"].as_array().unwrap().iter().find(|p| p["window_ns"] == w).and_then(|p| p["max_load"].as_f64()).unwrap()
    };
    [gap as f64 / curve["duration_ns"].as_f64().unwrap(), at(1_000_000), at(10_000_000)]
}

#[test]
fn a_predicted_profile_changes_each_cpu_under_the_flood_as_measured_after_applying_it() {
    if !common::live::enabled_as_root("a_predicted_profile_changes_each_cpu_under_the_flood_as_measured_after_applying_it") {
        return;
    }
    let was_up = irqlab().args(["testbed", "status"]).output().unwrap().status.success();
    // Up for the whole test (and its NAPI threads with it), so that the
    // profile can hold the thread the surveys' flood goes through.
    let up = irqlab().args(["testbed", "up"]).output().unwrap();
    assert!(up.status.success(), "testbed up: {}", stderr(&up));
    let dir = tempfile::tempdir().unwrap();
    let (a1, a2, b) = (dir.path().join("a1"), dir.path().join("a2"), dir.path().join("b"));
    let first = survey(&a1, &[]);
    let second = survey(&a2, &[]);
    let profile = a1.join("profile.toml");
    let text = std::fs::read_to_string(&profile).unwrap();
    assert!(text.contains("match = \"napi:irqlab-b\""), "the survey no longer recommends moving the flood's thread:\n{text}");

    // Predict and apply in one step; held until SIGTERM (open-ended, so
    // that SIGTERM ends it complete), and ended so if the test panics.
    let (apply, _lines) =
        start_with_stderr(&["control".as_ref(), "apply".as_ref(), profile.as_os_str(), "--predict".as_ref(), "--allow-missing".as_ref()]);
    let mut apply = Held(apply);
    let apply = &mut apply.0;
    let deadline = Instant::now() + Duration::from_secs(120);
    while !common::live::control_entries().iter().any(|e| e["object"].to_string().contains("napi/irqlab-b")) {
        assert!(Instant::now() < deadline, "control apply never held the NAPI thread");
        assert!(apply.try_wait().unwrap().is_none(), "control apply ended early");
        std::thread::sleep(Duration::from_millis(200));
    }
    let prediction_file = a1.join("sim/from-survey.json");
    let after = survey(&b, &["--compare", a1.to_str().unwrap()]);
    unsafe {
        libc::kill(apply.id() as i32, libc::SIGTERM);
    }
    let status = wait_at_most(apply, Duration::from_secs(30));
    // A run a signal stopped exits 1 (DESIGN.md's exit codes), its changes undone.
    assert_eq!(status.code(), Some(1), "control apply: {status}");
    if !was_up {
        let _ = irqlab().args(["testbed", "down"]).output();
    }
    assert!(common::live::control_entries().is_empty(), "irqlab left changes behind");

    // The after survey carries the prediction beside its measurement.
    assert!(after["prediction"]["rows"].as_array().is_some_and(|r| !r.is_empty()), "no prediction in the after survey");
    let prediction = common::json(&prediction_file);
    let names = ["mean load", "max load 1 ms", "max load 10 ms"];
    let mut rows = Vec::new();
    for run in prediction["runs"].as_array().unwrap() {
        let (cpu, load) = (run["cpu"].as_u64().unwrap(), run["load"].as_str().unwrap().to_string());
        let window =
            |w: u64| run["windows"].as_array().unwrap().iter().find(|x| x["window_ns"] == w).unwrap()["simulated"].as_f64().unwrap();
        let simulated = [run["mean_load"]["simulated"].as_f64().unwrap(), window(1_000_000), window(10_000_000)];
        let p = &run["predicted"];
        let at = |w: u64| p["windows"].as_array().unwrap().iter().find(|x| x[0] == w).unwrap()[1].as_f64().unwrap();
        let predicted = [p["mean_load"].as_f64().unwrap(), at(1_000_000), at(10_000_000)];
        let (before, again) = (measures(&first, cpu, &load), measures(&second, cpu, &load));
        let measured_after = measures(&after, cpu, &load);
        let other = if load == "idle" { "net" } else { "idle" };
        let (o1, o2) = (measures(&first, cpu, other), measures(&second, cpu, other));
        for k in 0..3 {
            let tolerance = (before[k] - again[k]).abs().max((o1[k] - o2[k]).abs());
            let (predicted_change, measured_change) = (predicted[k] - simulated[k], measured_after[k] - before[k]);
            eprintln!(
                "CPU {cpu} {load} {}: before {:.3} (again {:.3}), simulated {:.3}, predicted {:.3} (change {:+.3}), measured after {:.3} (change {:+.3}), tolerance {:.3}",
                names[k], before[k], again[k], simulated[k], predicted[k], predicted_change, measured_after[k], measured_change, tolerance
            );
            // The model's own error on the before state of this CPU and
            // load, and for the mean load what it knowingly leaves behind:
            // the rescheduling IPIs measured there that no thread followed
            // in their gap (a moved thread's go with it).
            let (all, ipis) = if k == 0 { resched_ipi_shares(&first, cpu, &load) } else { (0.0, 0.0) };
            let calibration = (simulated[k] - before[k]).abs() + ipis;
            if k == 0 {
                eprintln!(
                    "CPU {cpu} {load}: rescheduling IPIs took {all:.4} of the before run, {ipis:.4} of it with no thread after them (the prediction leaves that there)"
                );
            }
            rows.push((cpu, load.clone(), k, predicted_change, measured_change, tolerance, calibration));
        }
    }
    // The CPU the profile moved the flood's thread off: its predicted mean load falls by more than half.
    let moved_off = rows.iter().find(|r| r.1 == "net" && r.2 == 0 && r.3 < -0.5).map(|r| r.0);
    let Some(moved) = moved_off else { panic!("the prediction moved the flood's thread off no CPU") };
    let mut failures = Vec::new();
    for (cpu, load, k, predicted_change, measured_change, tolerance, calibration) in rows.iter().filter(|r| r.0 == moved && r.1 == "net") {
        let what = names[*k];
        match k {
            // Size: the mean load, which the model holds source by source;
            // within the model's own error on the before state plus the
            // noise of the measured change. That change is after - before,
            // two single runs each off by up to the run-to-run spread: twice
            // the spread (one spread alone failed a CI run by 0.004 of a
            // CPU, its two before-runs 0.007 apart).
            0 if (predicted_change - measured_change).abs() > calibration + 2.0 * tolerance => failures.push(format!(
                "CPU {cpu} {load} {what}: predicted change {predicted_change:+.3}, measured {measured_change:+.3}, tolerance {:.3}",
                calibration + 2.0 * tolerance
            )),
            // Direction at 10 ms: both fall by more than the spread.
            2 if !(*predicted_change < -tolerance && *measured_change < -tolerance) => failures.push(format!(
                "CPU {cpu} {load} {what}: not both falling: predicted {predicted_change:+.3}, measured {measured_change:+.3}, spread {tolerance:.3}"
            )),
            // 1 ms: printed only; a hypervisor stall of a millisecond fills
            // a 1 ms window at random on this VM, before or after.
            _ => {}
        }
    }
    assert!(failures.is_empty(), "prediction and measurement differ beyond the run-to-run spread: {failures:#?}");
}
