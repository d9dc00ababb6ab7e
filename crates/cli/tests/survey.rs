//! `irqlab survey` (issue 22): bad input, and live: the recommendation it
//! makes for a flooded driver, applied, makes the task set schedulable as
//! predicted (measured with the probe afterwards); Ctrl-C writes the
//! partial survey and restores the machine; SIGKILL leaves a named
//! leftover that `control revert --all` undoes.

use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

mod common;
use common::{irqlab, json, live_tests_enabled, path_str, run, stderr};

/// The live tests share the testbed, its NAPI thread and the control
/// journal: one at a time (cargo runs a file's tests in parallel).
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// A task set that a flood through CPU 1's NAPI thread at SCHED_FIFO 50
/// breaks (control needs 5 ms of every 10 ms), and that a driver bounded
/// to a few ms per 10 ms leaves schedulable.
const TASKSET: &str = r#"
[[task]]
name = "control"
period = "10ms"
wcet = "5ms"

[[task]]
name = "logger"
period = "100ms"
wcet = "10ms"
"#;

#[test]
fn bad_input_exits_2_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let o = run(&["survey", "--cpus", "4095", "--out", path_str(&out)]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("--cpu 4095"), "{}", stderr(&o));

    let bad = dir.path().join("bad.toml");
    std::fs::write(&bad, "[[task]]\nname = \"x\"\nperiod = \"10ms\"\nwcet = \"soon\"\n").unwrap();
    let o = run(&["survey", "--taskset", path_str(&bad), "--out", path_str(&out)]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("bad.toml:4:"), "no file:line: {}", stderr(&o));

    let o = run(&["survey", "--load", "gpu", "--out", path_str(&out)]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("gpu") && stderr(&o).contains("none, net, cpu, disk, all"), "{}", stderr(&o));

    let not_a_survey = dir.path().join("x.json");
    std::fs::write(&not_a_survey, "{\"schema\": \"irqlab/curve/v1\"}").unwrap();
    let o = run(&["survey", "--from", path_str(&not_a_survey), "--out", path_str(&out)]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("x.json:1:"), "{}", stderr(&o));
}

/// `--compare` (issue 40) reads the earlier survey before anything runs:
/// missing, a directory without survey.json, not JSON, another document,
/// or the file `--out` would overwrite: exit 2 naming the file. Each run
/// also asks for CPU 4095, which would end it (exit 2, naming `--cpu`)
/// before anything live if the baseline were not checked first.
#[test]
fn compare_with_a_missing_or_broken_file_exits_2_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let survey = |baseline: &Path| run(&["survey", "--cpus", "4095", "--compare", path_str(baseline), "--out", path_str(&out)]);
    let missing = dir.path().join("gone.json");
    let o = survey(&missing);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("--compare") && stderr(&o).contains("gone.json"), "{}", stderr(&o));
    assert!(!stderr(&o).contains("--cpu 4095"), "the baseline is read first: {}", stderr(&o));

    // A directory is DIR/survey.json.
    let empty = dir.path().join("before");
    std::fs::create_dir(&empty).unwrap();
    let o = survey(&empty);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("before/survey.json"), "{}", stderr(&o));

    let broken = empty.join("survey.json");
    std::fs::write(&broken, "{\n  \"schema\": \"irqlab/survey/v1\",\n  \"complete\": nope\n}\n").unwrap();
    let o = survey(&empty);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("--compare: not an irqlab/survey/v1 document"), "{}", stderr(&o));
    assert!(stderr(&o).contains("before/survey.json:3:16"), "no file:line:col: {}", stderr(&o));

    let curve = dir.path().join("curve.json");
    std::fs::copy(common::repo_file("examples/curve-nic.json"), &curve).unwrap();
    let o = run(&["survey", "--cpus", "4095", "--baseline", path_str(&curve), "--out", path_str(&out)]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("expected `irqlab/survey/v1`") && stderr(&o).contains("curve.json:"), "{}", stderr(&o));

    // The new survey would overwrite the one it is compared with.
    std::fs::copy(common::repo_file("crates/survey/tests/fixtures/survey.json"), &broken).unwrap();
    let o = run(&["survey", "--cpus", "4095", "--compare", path_str(&empty), "--out", path_str(&empty)]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("--out") && stderr(&o).contains("give --out another directory"), "{}", stderr(&o));
    assert!(std::fs::read_to_string(&broken).unwrap().contains("HAND-MADE FIXTURE"), "the baseline was touched");
}

/// `--from` with `--compare` draws the page with the earlier survey beside
/// it; a survey that recorded its baseline (`compared_with`) is drawn with
/// it again, and without it, said on stderr, when it is gone.
#[test]
fn from_with_compare_draws_before_and_after() {
    let dir = tempfile::tempdir().unwrap();
    let before = dir.path().join("before");
    std::fs::create_dir(&before).unwrap();
    std::fs::copy(common::repo_file("crates/survey/tests/fixtures/survey.json"), before.join("survey.json")).unwrap();
    let after = common::repo_file("crates/survey/tests/fixtures/survey-after.json");
    let out = dir.path().join("page");
    let o = run(&["survey", "--from", &after, "--compare", path_str(&before), "--out", path_str(&out)]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let page = std::fs::read_to_string(out.join("index.html")).unwrap();
    assert!(page.contains("<h2>Before and after</h2>") && page.contains("went away"), "no before and after");

    // Recorded: drawn again from the path in the document.
    let mut doc = json(std::path::Path::new(&after));
    doc["compared_with"] = serde_json::json!(before.join("survey.json"));
    let recorded = dir.path().join("recorded.json");
    std::fs::write(&recorded, doc.to_string()).unwrap();
    let o = run(&["survey", "--from", path_str(&recorded), "--out", path_str(&out)]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(std::fs::read_to_string(out.join("index.html")).unwrap().contains("<h2>Before and after</h2>"));
    std::fs::remove_file(before.join("survey.json")).unwrap();
    let o = run(&["survey", "--from", path_str(&recorded), "--out", path_str(&out)]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stderr(&o).contains("cannot be read now") && stderr(&o).contains("before/survey.json"), "{}", stderr(&o));
    assert!(!std::fs::read_to_string(out.join("index.html")).unwrap().contains("Before and after"));
}

/// Without privileges the survey still runs: every live step is skipped
/// with its reason, the rest (doctor, findings, the page) is there.
#[test]
fn without_privileges_each_step_is_skipped_with_its_reason() {
    let _one = one_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    std::fs::create_dir(&out).unwrap();
    use std::os::unix::fs::PermissionsExt;
    for d in [dir.path(), out.as_path()] {
        std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o777)).unwrap();
    }
    let Some(o) = common::unprivileged(&["survey", "--cpus", "0", "--load", "none", "--quick", "--out", path_str(&out)]) else {
        eprintln!("skipped: no way to drop privileges here (setpriv)");
        return;
    };
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let survey = json(&out.join("survey.json"));
    let steps = survey["steps"].as_array().unwrap();
    let status = |name: &str| steps.iter().find(|s| s["name"] == name).map(|s| (s["status"].clone(), s["detail"].to_string()));
    assert_eq!(status("doctor").unwrap().0, "done");
    for name in ["probe cpu 0 idle", "latency idle", "accounting idle"] {
        let (st, detail) = status(name).unwrap_or_else(|| panic!("no step {name}: {steps:#?}"));
        assert_eq!(st, "skipped", "{name}: {detail}");
        assert!(detail.contains("CAP_") || detail.contains("privilege") || detail.contains("root"), "{name}: no reason: {detail}");
    }
    let page = std::fs::read_to_string(out.join("index.html")).unwrap();
    assert!(page.contains("skipped"), "the page does not show the skipped steps");
}

fn wait_with_deadline(child: &mut Child, limit: Duration) -> std::process::ExitStatus {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("still running after {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The survey's recommendation for CPU 1 under the network load.
fn recommended_command(survey: &serde_json::Value) -> String {
    let finding = "taskset-cpu1-net";
    let rec = survey["recommendations"].as_array().unwrap().iter().find(|r| r["finding"] == finding);
    let rec = rec.unwrap_or_else(|| panic!("no recommendation for {finding}: {:#}", survey["recommendations"]));
    rec["command"].as_str().expect("a command").to_string()
}

/// The curve of `load` on `cpu` at window `w`.
fn load_at(survey: &serde_json::Value, cpu: u64, load: &str, w: u64) -> f64 {
    let c = survey["cpus"].as_array().unwrap().iter().find(|c| c["cpu"] == cpu).unwrap();
    let l = c["curves"].as_array().unwrap().iter().find(|l| l["load"] == load).unwrap();
    let curve = if l["attributed"].is_null() { &l["measured"] } else { &l["attributed"] };
    curve["points"].as_array().unwrap().iter().find(|p| p["window_ns"] == w).unwrap()["max_load"].as_f64().unwrap()
}

#[test]
fn the_recommended_server_makes_the_flooded_task_set_schedulable() {
    if !live_tests_enabled("the_recommended_server_makes_the_flooded_task_set_schedulable") {
        return;
    }
    let _one = one_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let taskset = dir.path().join("tasks.toml");
    std::fs::write(&taskset, TASKSET).unwrap();
    let out = dir.path().join("survey");
    // Kept up across the survey and the check: the NAPI thread the
    // recommendation names is the testbed's.
    let up = run(&["testbed", "up"]);
    assert!(up.status.success(), "{}", stderr(&up));
    let o = run(&["survey", "--cpus", "1", "--load", "net", "--taskset", path_str(&taskset), "--quick", "--out", path_str(&out)]);
    assert!(o.status.code().unwrap_or(9) <= 1, "{}", stderr(&o));
    let survey = json(&out.join("survey.json"));
    assert_eq!(survey["schema"], "irqlab/survey/v1");

    // It names CPU 1's driver load, with the number.
    let findings = survey["findings"].as_array().unwrap();
    let driver = findings.iter().find(|f| f["id"] == "load-cpu1-net").expect("a finding on CPU 1's driver load");
    let at1 = load_at(&survey, 1, "net", 1_000_000);
    eprintln!("driver finding: {} | {}", driver["title"], driver["measured"]);
    assert_eq!(driver["interference"]["max_load_1ms"].as_f64(), Some(at1), "{driver}");
    // Who took it (issue 43): over the longest windows the flood's receive
    // work comes first, in the NAPI thread (or NET_RX, were it not
    // threaded). The longest, not the 1 ms window: this VM's host stops a
    // vCPU for 5-7 ms at times (see `judge`), which fills a 1 ms window
    // alone but is a few percent of 100 ms beside the driver's share.
    let net1 = survey["cpus"].as_array().unwrap().iter().find(|c| c["cpu"] == 1).unwrap()["curves"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["load"] == "net")
        .unwrap()
        .clone();
    assert_eq!(net1["sources"]["available"], true, "{}", net1["sources"]["note"]);
    let longest = net1["sources"]["windows"].as_array().unwrap().last().unwrap();
    let top = longest["sources"][0]["label"].as_str().unwrap();
    eprintln!("what ran in the worst {} ns window: {}", longest["window_ns"], longest["sources"]);
    assert!(
        top.starts_with("napi/irqlab-b") || top == "NET_RX",
        "top source of the longest window under the flood: {}",
        longest["sources"]
    );
    let check =
        survey["schedulability"].as_array().unwrap().iter().find(|c| c["cpu"] == 1 && c["load"] == "net").expect("a task set check");
    assert_eq!(check["schedulable_as_measured"], false, "the flood should break the task set as measured: {check:#}");

    // Apply the recommended command while the same flood runs, and
    // measure CPU 1 with the probe, as the survey did: five runs of 2 s.
    let command = recommended_command(&survey);
    eprintln!("recommended: {command}");
    let args: Vec<&str> = command.split_whitespace().collect();
    assert_eq!(&args[..3], ["irqlab", "control", "threads"], "{command}");
    let control_doc = dir.path().join("control.json");
    let mut control =
        irqlab().args(&args[1..]).args(["--duration", "16s", "--json", path_str(&control_doc)]).stderr(Stdio::piped()).spawn().unwrap();
    std::thread::sleep(Duration::from_millis(500));
    let mut flood = irqlab()
        .args(["traffic", "udp", "--from", "b", "--interval", "2us", "--port", "9", "--cpu", "0", "--duration", "14s"])
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    let runs: Vec<Verification> = (0..5).map(|i| verify(dir.path(), i)).collect();
    wait_with_deadline(&mut flood, Duration::from_secs(30));
    let status = wait_with_deadline(&mut control, Duration::from_secs(30));
    let control_err = std::io::read_to_string(control.stderr.take().unwrap()).unwrap_or_default();
    let _ = run(&["testbed", "down"]);
    assert!(status.success(), "control: {status:?}: {control_err}");
    for r in &runs {
        eprintln!(
            "after applying, run {}: schedulable {}, longest interruption {} ns, host steal {} ticks",
            r.index, r.schedulable, r.max_gap_ns, r.steal_ticks
        );
    }
    judge(&runs, &json(&control_doc), &command);
    assert_restored();
}

/// One probe run on CPU 1 after the recommendation was applied.
struct Verification {
    index: usize,
    schedulable: bool,
    max_gap_ns: u64,
    /// /proc/stat steal of CPU 1 during the run (10 ms ticks).
    steal_ticks: u64,
    /// The probe's curve document (its `sources`: what ran in each
    /// window length's worst window).
    curve: serde_json::Value,
}

fn steal_ticks_cpu1() -> u64 {
    let stat = std::fs::read_to_string("/proc/stat").unwrap();
    let line = stat.lines().find(|l| l.starts_with("cpu1 ")).expect("cpu1 in /proc/stat");
    line.split_whitespace().nth(8).and_then(|v| v.parse().ok()).unwrap_or(0)
}

/// Probes CPU 1 for 2 s and analyses the task set with that curve on top.
fn verify(dir: &Path, index: usize) -> Verification {
    let curve = dir.join(format!("after-{index}.json"));
    let steal = steal_ticks_cpu1();
    let probe = run(&["measure", "interference", "--cpu", "1", "--priority", "49", "--duration", "2s", "--json", path_str(&curve)]);
    assert!(probe.status.success(), "{}", stderr(&probe));
    let steal_ticks = steal_ticks_cpu1() - steal;
    let measured = dir.join(format!("measured-{index}.toml"));
    let file = curve.file_name().unwrap().to_str().unwrap();
    std::fs::write(&measured, format!("[[task]]\nname = \"driver\"\nkind = \"curve\"\nfile = \"{file}\"\n{TASKSET}")).unwrap();
    let analysis = dir.join(format!("analysis-{index}.json"));
    run(&["analyze", path_str(&measured), "--json", path_str(&analysis)]);
    let curve = json(&curve);
    let max_gap_ns = curve["max_gap_ns"].as_u64().unwrap();
    Verification { index, schedulable: json(&analysis)["schedulable"] == true, max_gap_ns, steal_ticks, curve }
}

/// The prediction holds: the served driver takes no more than its server
/// lets it, and the task set is schedulable with what the probe measured.
///
/// The recommendation was analysed with the driver as a sporadic server
/// and nothing else (findings::schedulability): it bounds the driver, not
/// the rest. This VM's host (Firecracker) stops a vCPU for about 1-7 ms at
/// random while both vCPUs are busy: an interruption of the probe with no
/// context switch and no hard IRQ or softirq over 0.5 ms on the CPU
/// (bpftrace on sched_switch and irq/softirq entry/exit, 2026-11-25), in
/// about half of 4 s runs under this flood, rarely counted as steal in
/// /proc/stat; the probe's sources show it as `unseen`. No bound on a
/// guest thread holds through that. So the test checks what the server
/// promises, in every run, from both sides:
/// - the controller's own monitor: the driver never ran more than its
///   budget plus two reactions in a period;
/// - the probe (independent of the controller): in the worst window of
///   every length, the driver's threads took at most what a sporadic
///   server of that budget can serve in it, ceil(w / period) budgets plus
///   two of the controller's longest reactions each;
///
/// and that some run is schedulable. A run that is not is shown with what
/// filled its worst window of one period beside the driver.
fn judge(runs: &[Verification], control: &serde_json::Value, command: &str) {
    assert!(runs.iter().any(|r| r.schedulable), "no run schedulable after applying {command}");
    let Some(server) = control["server"].as_object() else {
        // SCHED_DEADLINE: the kernel enforces it; every run must hold.
        assert!(runs.iter().all(|r| r.schedulable), "a run missed after applying {command}");
        return;
    };
    let budget = server["params"]["budget_ns"].as_u64().unwrap();
    let period = server["params"]["period_ns"].as_u64().unwrap();
    let threads = server["threads"].as_array().unwrap();
    let mut reaction = 0;
    for thread in threads {
        reaction = reaction.max(thread["reaction"]["max_ns"].as_u64().unwrap_or(0));
        let served = thread["served_per_period"]["max_ns"].as_u64().unwrap_or(0);
        let reaction = thread["reaction"]["max_ns"].as_u64().unwrap_or(0);
        eprintln!(
            "{}: served per period at most {served} ns, reaction at most {reaction} ns (budget {budget} ns); {} raises found it running; {} monitor events lost",
            thread["comm"], thread["raised_while_running"], server["lost_events"]
        );
        assert!(served <= budget + 2 * reaction, "the server let {} run {served} ns in a period", thread["comm"]);
    }
    let served_tids: Vec<u64> = threads.iter().filter_map(|t| t["tid"].as_u64()).collect();
    assert!(!served_tids.is_empty(), "no served thread in {control:#}");
    for r in runs {
        let sources = &r.curve["sources"];
        assert_eq!(sources["available"], true, "run {}: no sources: {}", r.index, sources["note"]);
        let windows = sources["windows"].as_array().unwrap();
        for w in windows {
            let window = w["window_ns"].as_u64().unwrap();
            let driver: u64 = w["sources"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|s| s["pid"].as_u64().is_some_and(|pid| served_tids.contains(&pid)))
                .map(|s| s["ns"].as_u64().unwrap())
                .sum();
            let bound = window.div_ceil(period) * (budget + 2 * reaction);
            assert!(
                driver <= bound,
                "run {}: in its worst {window} ns window the served driver ran {driver} ns, more than a server of {budget} ns per {period} ns serves ({bound} ns): {}",
                r.index,
                w["sources"]
            );
        }
        if !r.schedulable {
            let one_period = windows.iter().rfind(|w| w["window_ns"].as_u64().unwrap() <= period);
            let composition = one_period
                .map_or_else(|| "none".to_string(), |w| format!("{} ns busy in {} ns: {}", w["busy_ns"], w["window_ns"], w["sources"]));
            eprintln!("run {} missed, its worst window of one period: {composition}", r.index);
        }
    }
}

/// Nothing of irqlab's is left on the machine.
fn assert_restored() {
    let o = run(&["control", "status", "--json", "-"]);
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(doc["entries"].as_array().map(Vec::len), Some(0), "left behind: {doc:#}");
}

fn spawn_survey(out: &Path) -> Child {
    irqlab()
        .args(["survey", "--cpus", "1", "--load", "net", "--duration", "4s", "--out", path_str(out)])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Waits until the survey's net phase has put the NAPI thread under its
/// journal (at most 60 s).
fn wait_for_journal_entry() {
    let deadline = Instant::now() + Duration::from_secs(60);
    while Instant::now() < deadline {
        let o = run(&["control", "status", "--json", "-"]);
        if serde_json::from_slice::<serde_json::Value>(&o.stdout).ok().and_then(|v| v["entries"].as_array().map(|a| !a.is_empty()))
            == Some(true)
        {
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("the survey never reached its network load");
}

#[test]
fn ctrl_c_writes_the_partial_survey_and_restores_the_machine() {
    if !live_tests_enabled("ctrl_c_writes_the_partial_survey_and_restores_the_machine") {
        return;
    }
    let _one = one_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("survey");
    let mut child = spawn_survey(&out);
    wait_for_journal_entry();
    // SAFETY: kill(2) on our own child.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) };
    let status = wait_with_deadline(&mut child, Duration::from_secs(60));
    assert_eq!(status.code(), Some(1), "{status:?}");
    let survey = json(&out.join("survey.json"));
    assert_eq!(survey["complete"], false);
    let steps = survey["steps"].as_array().unwrap();
    assert!(steps.iter().any(|s| s["status"] == "interrupted"), "{steps:#?}");
    assert!(steps.iter().any(|s| s["name"] == "probe cpu 1 idle" && s["status"] == "done"), "the idle phase is kept: {steps:#?}");
    assert!(out.join("index.html").exists(), "no page for the partial survey");
    assert_restored();
}

#[test]
fn a_killed_survey_leaves_a_named_leftover_that_revert_undoes() {
    if !live_tests_enabled("a_killed_survey_leaves_a_named_leftover_that_revert_undoes") {
        return;
    }
    let _one = one_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let mut child = spawn_survey(&dir.path().join("survey"));
    wait_for_journal_entry();
    child.kill().unwrap(); // SIGKILL: no clean-up runs
    let _ = child.wait();
    let o = run(&["control", "status", "--json", "-"]);
    let entries: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let leftovers: Vec<_> = entries["entries"].as_array().unwrap().iter().filter(|e| e["state"] == "leftover").collect();
    assert!(leftovers.iter().any(|e| e["object"].to_string().contains("napi/irqlab-b")), "{entries:#}");
    let o = run(&["control", "revert", "--all"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_restored();
    let _ = run(&["testbed", "down"]);
}

/// How many surveys the injector test may take (see below why one can
/// name the hypervisor, or a fair-class thread, instead).
const INJECTOR_ATTEMPTS: usize = 3;

/// Issue 51: the survey's profile, applied after the surveyed program was
/// restarted (a new pid), moves the new instance: a new `rt-hog` started
/// on the quiet CPU goes to `to` while `control apply` holds, and back
/// when it ends.
fn the_profile_takes_a_new_instance(profile: &std::path::Path, quiet: usize, to: usize) {
    let injector = common::inject::Injector::start("rt-hog", quiet, 95, 300_000, 2_000_000);
    let tid = injector.tid() as i32;
    // Found again by its name, one thread as when surveyed; the profile's
    // other settings may name threads of this boot that have exited since
    // (a pid): applied as nothing to set.
    let text = std::fs::read_to_string(profile).unwrap();
    let setting = text.split("[[threads]]").find(|s| s.contains("match = \"comm:rt-hog\"")).expect("rt-hog's setting");
    assert!(setting.contains("surveyed = 1") && !setting.contains("this_boot"), "{setting}");
    let mut apply = irqlab()
        .args(["control", "apply", path_str(profile), "--allow-missing", "--duration", "4s"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let start = std::time::Instant::now();
    while irqlab_host::rt::affinity(tid).unwrap() != vec![to] {
        if start.elapsed() > std::time::Duration::from_secs(4) {
            let _ = apply.kill();
            let out = apply.wait_with_output().unwrap();
            panic!("the new rt-hog ({tid}) was not moved to CPU {to}: {}", String::from_utf8_lossy(&out.stderr));
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let out = apply.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(irqlab_host::rt::affinity(tid).unwrap(), vec![quiet], "restored when the hold ended");
    drop(injector);
}

/// What took a worst window in the injector's place that is worth
/// another survey: time no tracepoint saw (the host stopping the vCPU), or
/// a fair-class thread the fair server ran over the SCHED_FIFO probe.
fn displaces_the_injector(culprit: &serde_json::Value) -> bool {
    let fair = culprit["policy"].as_str().is_some_and(|p| p.starts_with("other") || p == "idle");
    culprit["kind"] == "unseen" || (culprit["kind"] == "thread" && fair)
}

/// Issue 43: with a known SCHED_FIFO 95 thread of this test's busy 600 us
/// of every 2 ms on CPU 1 (above the survey's probe), the survey names it
/// as what took CPU 1's worst 1 ms window (its `culprit`: kind, tid,
/// policy, whatever its share), recommends moving it with the command that
/// does, keeping it off the quiet CPU, and its page stacks the sources.
#[test]
fn the_survey_names_a_thread_that_takes_a_cpu_and_recommends_moving_it() {
    if !common::live::enabled_as_root("the_survey_names_a_thread_that_takes_a_cpu_and_recommends_moving_it") {
        return;
    }
    let _one = one_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let mut seen = Vec::new();
    for attempt in 0..INJECTOR_ATTEMPTS {
        let out = dir.path().join(format!("survey{attempt}"));
        let injector = common::inject::Injector::start("rt-hog", 1, 95, 600_000, 2_000_000);
        let o = run(&["survey", "--cpus", "0,1", "--load", "none", "--quick", "--out", path_str(&out)]);
        let bursts = injector.bursts();
        let tid = injector.tid();
        drop(injector);
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        assert!(bursts > 1000, "the injector ran {bursts} times");
        let survey = json(&out.join("survey.json"));
        let idle1 = &survey["cpus"].as_array().unwrap().iter().find(|c| c["cpu"] == 1).unwrap()["curves"][0];
        assert_eq!(idle1["sources"]["available"], true, "{}", idle1["sources"]["note"]);
        let finding =
            survey["findings"].as_array().unwrap().iter().find(|f| f["id"] == "load-cpu1-idle").expect("CPU 1's idle finding").clone();
        // 600 us of a 1 ms window is 60% at least: a problem.
        assert_eq!(finding["severity"], "problem", "{finding}");
        let culprit = &finding["culprit"];
        assert!(culprit.is_object(), "no culprit named: {finding}");
        let page = std::fs::read_to_string(out.join("index.html")).unwrap();
        assert!(page.contains("CPU 1, idle: what ran in the max-load windows"), "the page does not stack CPU 1's sources");
        // The timer-latency step's worst wake-up on each CPU, explained by
        // the flight recorder (issue 52): its sources add up to its
        // lateness. (The injector delays CPU 1's wake-ups only when their
        // phase in the millisecond falls in its burst, which the step does
        // not choose: what took the worst is not asserted.)
        let latency = &survey["latency"][0];
        let worst = |cpu: u64| {
            latency["worst"]
                .as_array()
                .unwrap()
                .iter()
                .find(|w| w["cpu"] == cpu)
                .cloned()
                .unwrap_or_else(|| panic!("no worst wake-up of CPU {cpu}: {latency:#}"))
        };
        let worst1 = worst(1);
        assert!(worst(0)["cause"].is_object(), "CPU 0's worst is not explained: {}", latency["recorder"]);
        let latency_culprit = &worst1["cause"]["culprit"];
        let worst_ns = worst1["latency_ns"].as_u64().unwrap();
        assert_eq!(
            Some(worst_ns),
            latency["report"]["threads"].as_array().unwrap().iter().find(|t| t["cpu"] == 1).unwrap()["latency"]["max_ns"].as_u64(),
            "the worst explained is the step's max"
        );
        let explained: u64 = worst1["cause"]["sources"].as_array().unwrap().iter().map(|s| s["ns"].as_u64().unwrap()).sum();
        assert_eq!(explained, worst_ns, "the sources add up to the lateness: {worst1:#}");
        // The culprit is the largest source that is not the measuring
        // thread's own path; none only where that path took it all (a vCPU
        // stall while it ran is charged to it).
        let thread1 = latency["report"]["threads"].as_array().unwrap().iter().find(|t| t["cpu"] == 1).unwrap();
        let others: Vec<&serde_json::Value> =
            worst1["cause"]["sources"].as_array().unwrap().iter().filter(|s| s["pid"] != thread1["tid"]).collect();
        assert_eq!(others.first().copied(), (!latency_culprit.is_null()).then_some(latency_culprit), "{worst1:#}");
        // As the page's template escapes it.
        let verdict = worst1["cause"]["verdict"]
            .as_str()
            .unwrap()
            .replace('&', "&amp;")
            .replace('<', "&lt;")
            .replace('>', "&gt;")
            .replace('"', "&quot;")
            .replace('\'', "&#x27;")
            .replace('/', "&#x2f;");
        assert!(page.contains(&verdict), "the page names the worst wake-up's cause: {verdict}");
        if culprit["pid"] == tid {
            assert_eq!((&culprit["kind"], &culprit["policy"]), (&serde_json::json!("thread"), &serde_json::json!("fifo:95")), "{culprit}");
            let answers = |r: &&serde_json::Value| {
                r["findings"].as_array().map_or(r["finding"] == "load-cpu1-idle", |f| f.iter().any(|f| f == "load-cpu1-idle"))
            };
            let recommendation = survey["recommendations"]
                .as_array()
                .unwrap()
                .iter()
                .filter(answers)
                .find(|r| r["action"] == "move-thread")
                .expect("a recommendation that moves it");
            // Where it goes: never to the quiet CPU, which either CPU can
            // be (CPU 1 when the hypervisor's time on CPU 0 outweighs what
            // is left on CPU 1 once the injector is moved; CPU 0 otherwise):
            // with two CPUs, the one the quiet CPU is not.
            let quiet = survey["findings"].as_array().unwrap().iter().find(|f| f["id"] == "quietest-cpu").expect("a quiet CPU")["cpu"]
                .as_u64()
                .unwrap();
            let to = 1 - quiet;
            // The injector's name was its own: the profile names it so
            // (issue 51), and finds it again under another pid.
            let names = survey["thread_names"].as_array().unwrap();
            assert!(names.iter().any(|n| n["pid"] == tid && n["comm"] == "rt-hog" && n["unique"] == true), "{names:?}");
            let setting = serde_json::json!({"kind": "threads", "matched": "comm:rt-hog", "policy": "fifo:95", "cpus": to.to_string()});
            assert_eq!(recommendation["setting"], setting, "{recommendation}");
            let command = format!("irqlab control threads comm:rt-hog --policy fifo:95 --cpu {to}");
            assert_eq!(recommendation["command"].as_str(), Some(command.as_str()), "{recommendation}");
            assert!(page.contains(&command), "the page shows the command");
            the_profile_takes_a_new_instance(&out.join("profile.toml"), quiet as usize, to as usize);
            return;
        }
        // Not the injector: the worst 1 ms window's top source took more of
        // it than the injector did. Retried only when that source is one
        // that can run over the SCHED_FIFO 95 injector: time no tracepoint
        // saw (this VM's host stops a vCPU for several ms at times, see
        // `judge` above: seen in one CI run of 2 recently, 434 us of the
        // 1 ms window unseen), or a fair-class thread the fair server
        // (6.12+) ran over the probe (seen in CI for the probe alone:
        // `bash/20540 OTHER`, 968 us of a 1 ms window). Both are rare
        // within one survey's 2 s probe, so a few surveys are made.
        let window = idle1["sources"]["windows"].as_array().unwrap().iter().find(|w| w["window_ns"] == culprit["window_ns"]).unwrap();
        let injector_ns = window["sources"].as_array().unwrap().iter().find(|s| s["pid"] == tid).map_or(0, |s| s["ns"].as_u64().unwrap());
        assert!(culprit["ns"].as_u64().unwrap() >= injector_ns, "the culprit is the window's top source: {culprit} vs {window}");
        assert!(displaces_the_injector(culprit), "neither the injector nor what can run over it named: {finding}");
        eprintln!("attempt {attempt}: {culprit} took the worst window (the injector {injector_ns} ns)");
        seen.push(culprit.clone());
    }
    panic!("in {INJECTOR_ATTEMPTS} surveys the injector was never named: {seen:#?}");
}
