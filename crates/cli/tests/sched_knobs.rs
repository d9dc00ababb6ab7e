//! `control sched-feature`, `control fair-server` and the reproductions'
//! `--hrtick-dl` / `--fair-server` as a user mistypes them (exit 2 naming
//! the flag or value, nothing changed) and, on a kernel in lockdown such as
//! this VM's, refused at once with exit 3 naming the lockdown level, with
//! nothing journalled. Where the knobs can be set, `sched_knobs_live.rs`
//! sets them (inside a guest kernel: `tests/kernels/smoke.py`).

mod common;
use common::live::control_entries;
use common::*;

#[test]
fn bad_values_exit_2_naming_them() {
    for (args, names) in [
        (&["control", "sched-feature", "HRTICK_DL", "maybe"][..], "maybe"),
        (&["control", "sched-feature", "HRTICK_DL"][..], "on|off"),
        (&["control", "sched-feature", "HRTICK_DL", "on", "--duration", "0"][..], "--duration"),
        (&["control", "sched-feature", "HRTICK_DL", "on", "--duration", "1s", "--persist"][..], "--persist"),
        (&["control", "sched-feature", "HRTICK_DL", "on", "--bogus"][..], "--bogus"),
        (&["control", "fair-server"][..], "--runtime"),
        (&["control", "fair-server", "--runtime", "5xs"][..], "5xs"),
        (&["control", "fair-server", "--runtime", "2s", "--period", "1s"][..], "--runtime 2s"),
        (&["control", "fair-server", "--runtime", "0", "--period", "10us"][..], "--period 10us"),
        (&["control", "fair-server", "--runtime", "0", "--period", "10s"][..], "--period 10s"),
        (&["control", "fair-server", "--runtime", "0", "--cpu", "9999"][..], "--cpu"),
        (&["control", "fair-server", "--runtime", "0", "--cpu", "x"][..], "--cpu"),
        (&["reproduce", "load-bounds", "--hrtick-dl"][..], "--live"),
        (&["reproduce", "bh-threshold", "--live", "--hrtick-dl"][..], "--hrtick-dl"),
        (&["reproduce", "load-bounds", "--live", "--fair-server", "off"][..], "--fair-server"),
        (&["reproduce", "process-aware", "--live", "--fair-server", "maybe"][..], "maybe"),
    ] {
        let out = run(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(names), "{args:?} should name {names}: {}", stderr(&out));
        assert!(!stderr(&out).contains("panicked"), "{args:?}: {}", stderr(&out));
    }
}

/// The lockdown level as `irqlab doctor` reads it (securityfs, the kernel
/// log, or what debugfs does), when it shuts debugfs.
fn locked_down() -> Option<String> {
    let out = run(&["doctor", "--json", "-"]);
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).ok()?;
    let lockdown = doctor_setting(&doc, "kernel lockdown");
    (lockdown.starts_with("integrity") || lockdown.starts_with("confidentiality")).then(|| lockdown.to_string())
}

#[test]
fn under_lockdown_the_knobs_and_the_flags_exit_3_naming_it_at_once() {
    let test = "under_lockdown_the_knobs_and_the_flags_exit_3_naming_it_at_once";
    if !is_root() {
        eprintln!("{test}: skipped: needs root (without it CAP_SYS_ADMIN is named first)");
        return;
    }
    let Some(lockdown) = locked_down() else {
        eprintln!("{test}: skipped: this kernel is not locked down (sched_knobs_live.rs sets the knobs here)");
        return;
    };
    let level = lockdown.split_whitespace().next().unwrap().to_string();
    for args in [
        &["control", "sched-feature", "HRTICK_DL", "on"][..],
        &["control", "fair-server", "--runtime", "0", "--duration", "1s"][..],
        // Before the run starts: no testbed, no calibration, no simulation.
        &["reproduce", "load-bounds", "--live", "--quick", "--hrtick-dl"][..],
        &["reproduce", "process-aware", "--live", "--quick", "--fair-server", "off"][..],
    ] {
        let started = std::time::Instant::now();
        let out = run(args);
        assert_eq!(out.status.code(), Some(3), "{args:?}: {}", stderr(&out));
        let err = stderr(&out);
        assert!(err.contains(&format!("locked down (lockdown={level}")), "{args:?} should name lockdown={level}: {err}");
        assert!(started.elapsed() < std::time::Duration::from_secs(20), "{args:?} took {:?}", started.elapsed());
    }
    // Nothing was changed, so nothing was journalled (debugfs not mounted either).
    let after = control_entries();
    assert!(
        after.iter().all(|e| !matches!(e["object"]["kind"].as_str(), Some("sched-feature" | "fair-server" | "debugfs-mount"))),
        "{after:?}"
    );
}
