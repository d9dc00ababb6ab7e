//! `irqlab measure accounting` as a user runs it: bad flags exit 2, a
//! missing BPF capability exits 3 naming it, and (live) a short run writes
//! the accounting/v1 JSON and a Prometheus file.

use std::process::Command;

mod common;
use common::irqlab;

#[test]
fn bad_duration_is_a_usage_error() {
    let out = irqlab().args(["measure", "accounting", "--duration", "soon"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--duration"));
}

/// Flags of one mode are refused in the other instead of silently ignored.
#[test]
fn flags_of_the_other_mode_are_usage_errors() {
    for (args, named) in [
        (vec!["--fig6", "--top", "5"], "--top"),
        (vec!["--fig6", "--pid", "1"], "--pid"),
        (vec!["--fig6", "--check"], "--check"),
        (vec!["--fig6", "--prometheus", "m.prom"], "--prometheus"),
        (vec!["--rates", "100"], "--fig6"),
        (vec!["--cpu", "1"], "--fig6"),
    ] {
        let out = irqlab().args(["measure", "accounting"]).args(&args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.starts_with("error: ") && err.contains(named), "{args:?}: {err}");
    }
}

#[test]
fn without_cap_bpf_it_exits_3_naming_it() {
    // setpriv drops CAP_BPF and CAP_PERFMON from the bounding set (root can
    // do that; without root the capabilities are missing anyway).
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let euid = status.lines().find_map(|l| l.strip_prefix("Uid:")).and_then(|u| u.split_whitespace().nth(1)).unwrap();
    let root = euid == "0";
    let out = if root && std::path::Path::new("/usr/bin/setpriv").exists() {
        Command::new("setpriv")
            .args([
                "--inh-caps=-all",
                "--bounding-set=-bpf,-perfmon",
                env!("CARGO_BIN_EXE_irqlab"),
                "measure",
                "accounting",
                "--duration",
                "1s",
            ])
            .output()
            .unwrap()
    } else if !root {
        irqlab().args(["measure", "accounting", "--duration", "1s"]).output().unwrap()
    } else {
        eprintln!("skipped: root without setpriv cannot drop CAP_BPF");
        return;
    };
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{err}");
    if std::path::Path::new("/sys/kernel/btf/vmlinux").exists() {
        // BTF is there, so what is missing must be the capability.
        assert!(err.contains("CAP_BPF") || err.contains("CAP_PERFMON"), "{err}");
    } else {
        assert!(err.contains("BTF"), "{err}");
    }
}

#[test]
fn live_run_writes_json_and_prometheus() {
    if std::env::var("IRQLAB_LIVE_TESTS").as_deref() != Ok("1") {
        eprintln!("skipped: live test (set IRQLAB_LIVE_TESTS=1 and run as root)");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (json, prom) = (dir.path().join("a.json"), dir.path().join("a.prom"));
    let out = irqlab()
        .args(["measure", "accounting", "--duration", "1s", "--check", "--json"])
        .arg(&json)
        .arg("--prometheus")
        .arg(&prom)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("STOLEN") && stdout.contains("check: softirq"), "{stdout}");
    let doc: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(doc["schema"], "irqlab/accounting/v1");
    assert_eq!(doc["complete"], true);
    assert!(!doc["tasks"].as_array().unwrap().is_empty());
    common::assert_records_this_machine(&doc);
    for cpu in doc["cpus"].as_array().unwrap() {
        let wall = cpu["wall_ns"].as_i64().unwrap();
        assert!(wall >= 1_000_000_000, "{cpu}");
        assert!(cpu["unaccounted_ns"].as_i64().unwrap().abs() * 100 < wall, "{cpu}");
        // Idle time is the idle task's run time on that CPU, listed per CPU.
        let idle_listed = doc["tasks"].as_array().unwrap().iter().any(|t| t["kind"] == "idle" && t["cpu"] == cpu["cpu"]);
        assert_eq!(idle_listed, cpu["idle_ns"].as_u64().unwrap() > 0, "{cpu}");
    }
    let prom = std::fs::read_to_string(&prom).unwrap();
    assert!(prom.contains("# TYPE irqlab_cpu_seconds gauge") && prom.contains("irqlab_task_run_seconds{"));
}

/// `measure accounting --fig6` killed with SIGKILL leaves its layout in
/// place (RPS steered to the measured CPU, the NAPI thread kept off it):
/// `control status` names both as leftovers and `control revert --all`
/// restores them.
#[test]
fn a_killed_fig6_run_leaves_leftovers_that_revert_restores() {
    if !common::live_tests_enabled("a_killed_fig6_run_leaves_leftovers_that_revert_restores") {
        return;
    }
    let made_testbed = !std::path::Path::new("/run/netns/irqlab-b").exists();
    let up = common::run(&["testbed", "up"]);
    assert_eq!(up.status.code(), Some(0), "{}", common::stderr(&up));
    let rps = "/sys/class/net/irqlab-b/queues/rx-0/rps_cpus";
    let read_rps = || std::fs::read_to_string(rps).unwrap().trim().to_string();
    let napi = irqlab_host::testbed::napi_threads("irqlab-b").first().expect("a napi/irqlab-b-* kthread").pid;
    let (rps_before, cpus_before) = (read_rps(), irqlab_host::rt::affinity(napi).unwrap());

    let mut child = irqlab()
        .args(["measure", "accounting", "--fig6", "--rates", "2000", "--duration", "20s"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let start = std::time::Instant::now();
    while read_rps() == rps_before || irqlab_host::rt::affinity(napi).unwrap() == cpus_before {
        assert!(start.elapsed().as_secs() < 30, "the Fig. 6 layout was not set up");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    // A real kill -9: nothing of irqlab runs after it.
    assert!(std::process::Command::new("kill").args(["-9", &child.id().to_string()]).status().unwrap().success());
    child.wait().unwrap();
    assert_ne!(read_rps(), rps_before, "SIGKILL cannot have restored RPS");

    let status = common::run(&["control", "status", "--json", "-"]);
    let doc: serde_json::Value = serde_json::from_slice(&status.stdout).unwrap();
    let leftover = |kind: &str| doc["entries"].as_array().unwrap().iter().any(|e| e["object"]["kind"] == kind && e["state"] == "leftover");
    assert!(leftover("file") && leftover("thread-affinity"), "{doc}");

    let revert = common::run(&["control", "revert", "--all"]);
    assert_eq!(revert.status.code(), Some(0), "{}", common::stderr(&revert));
    assert_eq!(read_rps(), rps_before);
    assert_eq!(irqlab_host::rt::affinity(napi).unwrap(), cpus_before);
    if made_testbed {
        common::run(&["testbed", "down"]);
    }
}
