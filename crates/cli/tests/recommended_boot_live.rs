//! Issue 51, "verified in guests": the survey's boot recommendation is
//! checked by booting it. `lab compare --recommended-boot` surveys a
//! kernel, boots it again with the `[boot]` options its survey's profile
//! recommends, and surveys again; this test reads both surveys:
//!
//! - the first measured the tick on a CPU running the probe alone and
//!   recommended `nohz_full=` for it (never for CPU 0);
//! - the second guest's kernel has the CPU in `nohz_full` (the options
//!   reached its command line);
//! - on PREEMPT_RT the first survey also recommended raising `ktimers/N`
//!   above the task, for the same finding (nohz_full= alone leaves the
//!   tick on there: docs/lab.md), and the second guest applied that
//!   run-time setting before its survey (its column is `+profile`);
//! - the prediction: the local timer on that CPU falls under the tickless
//!   threshold (10/s), and the second survey finds no kept tick.
//!
//! Two guests, about four minutes under emulation: `scripts/test-kernels.sh`
//! runs it on the host with `IRQLAB_LAB_KERNEL` set (`make test-kernels`).

mod common;
use common::live::enabled_as_root;
use common::*;

/// The survey's rule (crates/survey/src/findings/boot.rs): at or above
/// this the CPU's tick runs.
const TICKING_PER_S: f64 = 10.0;

fn local_timer_per_s(survey: &serde_json::Value, cpu: u64) -> Option<f64> {
    let probed = survey["cpus"].as_array()?.iter().find(|c| c["cpu"] == cpu)?;
    let idle = probed["curves"].as_array()?.iter().find(|c| c["load"] == "none")?;
    idle["interrupts"]["local_timer_per_s"].as_f64()
}

#[test]
fn the_recommended_nohz_full_is_booted_and_its_prediction_checked() {
    let test = "the_recommended_nohz_full_is_booted_and_its_prediction_checked";
    if !enabled_as_root(test) {
        return;
    }
    let Some(kernel) = std::env::var("IRQLAB_LAB_KERNEL").ok().filter(|k| !k.is_empty()) else {
        eprintln!("{test}: skipped: it boots two guests; scripts/test-kernels.sh runs it with IRQLAB_LAB_KERNEL set");
        return;
    };
    let out_dir = tempfile::tempdir().unwrap();
    let out = irqlab()
        .args(["lab", "compare", "--recommended-boot", "--stall", "5min", "--kernel", &kernel, "--out", path_str(out_dir.path())])
        .args(["--", "survey", "--quick", "--load", "none"])
        .output()
        .unwrap();
    eprintln!("{}", stderr(&out));
    assert_eq!(out.status.code(), Some(0), "lab compare --recommended-boot failed");

    let slug = kernel.replace([':', '/', ' ', ','], "-");
    let first = json(&out_dir.path().join(&slug).join("survey.json"));
    let nohz: Vec<&serde_json::Value> = first["recommendations"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["setting"]["kind"] == "boot" && r["setting"]["option"].as_str().is_some_and(|o| o.starts_with("nohz_full=")))
        .collect();
    assert_eq!(nohz.len(), 1, "one nohz_full recommendation: {:#}", first["recommendations"]);
    let cpu = nohz[0]["cpu"].as_u64().expect("the recommendation names its CPU");
    assert_ne!(cpu, 0, "CPU 0 is the housekeeping CPU");
    let before = local_timer_per_s(&first, cpu).expect("the first survey counted the tick");
    assert!(before >= TICKING_PER_S, "recommended for a CPU whose tick did not run: {before}/s");

    let rt = first["machine"]["settings"]["preemption"].as_str().is_some_and(|p| p.starts_with("PREEMPT_RT"));
    let ktimers = format!("comm:ktimers/{cpu}");
    let tick = format!("tick-cpu{cpu}");
    let raise = first["recommendations"].as_array().unwrap().iter().find(|r| r["setting"]["matched"] == ktimers.as_str());
    match (rt, raise) {
        (true, Some(r)) => assert!(r["findings"].as_array().unwrap().iter().any(|f| f == tick.as_str()), "{r:#}"),
        (true, None) => panic!("PREEMPT_RT: no recommendation to raise {ktimers} beside nohz_full: {:#}", first["recommendations"]),
        (false, Some(r)) => panic!("not PREEMPT_RT, yet a ktimers raise: {r:#}"),
        (false, None) => {}
    }

    let second_dir = std::fs::read_dir(out_dir.path())
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.is_dir() && p.file_name().is_some_and(|n| n.to_string_lossy().contains("nohz_full=")))
        .expect("a column booted with the recommended options");
    let second_name = second_dir.file_name().unwrap().to_string_lossy().to_string();
    if rt {
        assert!(second_name.ends_with("+profile"), "the ktimers raise was not applied before the second survey: {second_name}");
    }
    let second = json(&second_dir.join("survey.json"));
    let isolated = second["machine"]["settings"]["isolated CPUs"].as_str().unwrap_or_default().to_string();
    assert!(isolated.contains(&format!("nohz_full {cpu}")), "the option did not reach the kernel: {isolated}");
    let after = local_timer_per_s(&second, cpu).expect("the second survey counted the tick");
    eprintln!("{kernel}: CPU {cpu}'s local timer {before:.1}/s without the profile, {after:.1}/s with it ({second_name})");
    let kept = second["findings"].as_array().unwrap().iter().any(|f| f["id"] == format!("tick-kept-cpu{cpu}"));
    assert!(after < TICKING_PER_S, "the prediction missed: CPU {cpu}'s tick {before:.1}/s -> {after:.1}/s with the profile");
    assert!(!kept, "a tick-kept finding for a CPU whose tick stopped");
}
