//! `irqlab sim --from-survey` (issue 53): a measured survey made into
//! scenarios of the machine, each simulated beside its measurement; with a
//! profile, the curves predicted after it; `survey --compare` showing the
//! prediction beside what was measured after; and the bad inputs.

mod common;
use common::{irqlab, repo_file, stderr, stdout};
use std::path::Path;

const FIXTURE: &str = "crates/survey/tests/fixtures/survey-with-sources.json";

/// The survey's profile, as `irqlab survey` wrote it for this machine:
/// the NAPI thread to CPU 0 beside settings the model cannot follow.
const PROFILE: &str = r#"schema = "irqlab/profile/v1"

[default_irq]
cpus = "0"

[[irq]]
irq = "*"
cpus = "0"

[[threads]]
match = "napi:irqlab-b"
policy = "fifo:50"
cpus = "0"

[[napi]]
dev = "eth0"
threaded = true

[boot]
cmdline = "nohz_full=1"
"#;

fn from_survey(dir: &Path, extra: &[&str]) -> serde_json::Value {
    let out =
        irqlab().args(["sim", "--from-survey", &repo_file(FIXTURE), "--out"]).arg(dir).args(extra).args(["--json", "-"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    serde_json::from_str(&stdout(&out)).expect("the document on stdout")
}

fn runs(doc: &serde_json::Value) -> &Vec<serde_json::Value> {
    doc["runs"].as_array().unwrap()
}

fn run<'a>(doc: &'a serde_json::Value, cpu: u64, load: &str) -> &'a serde_json::Value {
    runs(doc).iter().find(|r| r["cpu"] == cpu && r["load"] == load).unwrap_or_else(|| panic!("no run of CPU {cpu} {load}"))
}

#[test]
fn each_cpu_and_load_becomes_a_scenario_whose_mean_load_is_the_measured_one() {
    let dir = tempfile::tempdir().unwrap();
    let doc = from_survey(dir.path(), &[]);
    assert_eq!(doc["schema"], "irqlab/sim-from-survey/v1");
    assert_eq!(doc["complete"], true);
    // Kernel 6.18, PREEMPT_DYNAMIC: today's mainline preset.
    assert_eq!(doc["preset"], "linux-6.12");
    assert_eq!(runs(&doc).len(), 4, "2 CPUs x (idle, net)");
    for r in runs(&doc) {
        // Each source's rate x cost is its measured total, so the probed
        // CPU's simulated mean load gives back the measured one unless the
        // simulated scheduler kept a source from running (a fair thread
        // beside the FIFO probe runs through the fair server): within 1
        // point plus 5% of it.
        let (m, s) = (r["mean_load"]["measured"].as_f64().unwrap(), r["mean_load"]["simulated"].as_f64().unwrap());
        assert!(m > 0.0 && (s - m).abs() <= 0.01 + 0.05 * m, "CPU {} {}: mean load measured {m}, simulated {s}", r["cpu"], r["load"]);
        let windows: Vec<u64> = r["windows"].as_array().unwrap().iter().map(|w| w["window_ns"].as_u64().unwrap()).collect();
        assert!(windows.contains(&1_000_000) && windows.contains(&10_000_000), "{windows:?}");
        // The scenario is a file of its own that `irqlab sim` runs.
        let scenario = r["scenario"].as_str().unwrap();
        assert!(Path::new(scenario).starts_with(dir.path()), "{scenario}");
        let alone = irqlab().args(["sim", scenario, "--json", "-"]).output().unwrap();
        assert_eq!(alone.status.code(), Some(0), "{scenario}: {}", stderr(&alone));
    }
    // The flood's driver thread dominates the loaded CPUs, measured and simulated.
    assert!(run(&doc, 1, "net")["mean_load"]["simulated"].as_f64().unwrap() > 0.5);
    let text = std::fs::read_to_string(dir.path().join("cpu1-net.toml")).unwrap();
    assert!(text.contains("name = \"napi/irqlab-b-1/") && text.contains("policy = \"fifo\"\npriority = 50"), "{text}");
    assert!(text.contains("kernel = \"linux-6.12\""), "{text}");
    // The summary (without --json -) names the checked windows and where the files went.
    let out = irqlab().args(["sim", "--from-survey", &repo_file(FIXTURE), "--out"]).arg(dir.path()).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let summary = stdout(&out);
    assert!(summary.contains("1 ms measured") && summary.contains("10 ms measured") && summary.contains("from-survey.json"), "{summary}");
    assert!(dir.path().join("from-survey.json").exists());
}

#[test]
fn a_profile_moving_the_driver_thread_predicts_its_cpu_quiet_and_says_what_it_cannot_follow() {
    let dir = tempfile::tempdir().unwrap();
    let profile = dir.path().join("profile.toml");
    std::fs::write(&profile, PROFILE).unwrap();
    let doc = from_survey(&dir.path().join("sim"), &["--profile", profile.to_str().unwrap()]);
    let moved = run(&doc, 1, "net");
    let (before, after) = (moved["mean_load"]["simulated"].as_f64().unwrap(), moved["predicted"]["mean_load"].as_f64().unwrap());
    assert!(before > 0.5 && after < 0.1, "CPU 1 under the flood: simulated {before} before, predicted {after}");
    // CPU 0 kept its thread: its prediction is its own simulation.
    let kept = run(&doc, 0, "net");
    let (b0, a0) = (kept["mean_load"]["simulated"].as_f64().unwrap(), kept["predicted"]["mean_load"].as_f64().unwrap());
    assert!((b0 - a0).abs() < 0.01, "CPU 0: {b0} before, {a0} predicted");
    let notes: Vec<String> = doc["profile_notes"].as_array().unwrap().iter().map(|n| format!("{}: {}", n["setting"], n["note"])).collect();
    let has = |setting: &str, words: &str| notes.iter().any(|n| n.contains(setting) && n.contains(words));
    assert!(has("threads napi:irqlab-b", "from CPU 1 to CPU 0"), "{notes:?}");
    assert!(has("boot", "not predicted") && has("napi eth0", "not predicted") && has("default_irq", "later"), "{notes:?}");
    let predicted = std::fs::read_to_string(dir.path().join("sim/cpu1-net-predicted.toml")).unwrap();
    assert!(predicted.contains("# moved: napi/irqlab-b-1/"), "{predicted}");
}

#[test]
fn a_moved_threads_wake_up_ipis_move_with_it_and_the_mean_load_still_comes_back() {
    // The fixture as a survey with wake-ups writes it: on CPU 1 under the
    // flood the NAPI thread ran first after all but 100 of the reschedule
    // IPIs and took all but 50 us of their time (numbers for the test).
    let dir = tempfile::tempdir().unwrap();
    let mut survey: serde_json::Value = common::json(Path::new(&repo_file(FIXTURE)));
    let curve = survey["cpus"].as_array_mut().unwrap().iter_mut().find(|c| c["cpu"] == 1).unwrap()["curves"]
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .find(|c| c["load"] == "net")
        .unwrap();
    let duration = curve["duration_ns"].as_f64().unwrap();
    let totals = curve["sources"]["totals"].as_array_mut().unwrap();
    let res = totals.iter().find(|t| t["label"] == "irq RES resched IPI").unwrap().clone();
    let res_ns = res["ns"].as_u64().unwrap() + res["unseen_ns"].as_u64().unwrap();
    let napi = totals.iter_mut().find(|t| t["label"].as_str().unwrap().starts_with("napi/irqlab-b-1/")).unwrap();
    napi["woken_by_resched_ipi"] = (res["gaps"].as_u64().unwrap() - 100).into();
    napi["resched_ipi_ns"] = (res_ns - 50_000).into();
    napi["resched_ipi_max_ns"] = 16_000.into();
    let file = dir.path().join("survey.json");
    std::fs::write(&file, survey.to_string()).unwrap();
    let profile = dir.path().join("profile.toml");
    std::fs::write(&profile, PROFILE).unwrap();
    let predict = |survey: &str, out: &str| {
        let o = irqlab()
            .args(["sim", "--from-survey", survey, "--profile", profile.to_str().unwrap(), "--out"])
            .arg(dir.path().join(out))
            .args(["--json", "-"])
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        serde_json::from_str::<serde_json::Value>(&stdout(&o)).unwrap()
    };
    let with = predict(file.to_str().unwrap(), "with");
    let without = predict(&repo_file(FIXTURE), "without");
    for r in runs(&with) {
        let (m, s) = (r["mean_load"]["measured"].as_f64().unwrap(), r["mean_load"]["simulated"].as_f64().unwrap());
        assert!((s - m).abs() <= 0.01 + 0.05 * m, "CPU {} {}: mean load measured {m}, simulated {s}", r["cpu"], r["load"]);
    }
    // CPU 1 under the flood loses the thread's wake-up IPIs with it: its
    // predicted mean load falls by about their share of the run (0.8 of a
    // point), which the prediction without them leaves there.
    let predicted = |doc: &serde_json::Value| run(doc, 1, "net")["predicted"]["mean_load"].as_f64().unwrap();
    let share = (res_ns - 50_000) as f64 / duration;
    let fell = predicted(&without) - predicted(&with);
    assert!(
        (fell - share).abs() < 0.25 * share,
        "predicted {} without, {} with: fell {fell}, the IPIs' share {share}",
        predicted(&without),
        predicted(&with)
    );
}

#[test]
fn a_survey_compared_with_a_predicted_one_shows_the_prediction_beside_the_measurement() {
    let dir = tempfile::tempdir().unwrap();
    let before = dir.path().join("before");
    std::fs::create_dir_all(&before).unwrap();
    std::fs::copy(repo_file(FIXTURE), before.join("survey.json")).unwrap();
    std::fs::write(before.join("profile.toml"), PROFILE).unwrap();
    // The default place: BEFORE/sim/from-survey.json, found by --compare BEFORE.
    from_survey(&before.join("sim"), &["--profile", before.join("profile.toml").to_str().unwrap()]);
    let page_dir = dir.path().join("page");
    let out =
        irqlab().args(["survey", "--from", &repo_file(FIXTURE), "--compare"]).arg(&before).arg("--out").arg(&page_dir).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let page = std::fs::read_to_string(page_dir.join("index.html")).unwrap();
    assert!(page.contains("Predicted beside measured") && page.contains("predicted after"), "no prediction on the page");
    // --predicted names a file; a file that is not a prediction is exit 2 naming the flag.
    let bogus = dir.path().join("bogus.json");
    std::fs::write(&bogus, "{\"schema\": \"irqlab/curve/v1\"}").unwrap();
    let out = irqlab()
        .args(["survey", "--from", &repo_file(FIXTURE), "--compare"])
        .arg(&before)
        .arg("--predicted")
        .arg(&bogus)
        .arg("--out")
        .arg(&page_dir)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("--predicted") && stderr(&out).contains("irqlab/sim-from-survey/v1"), "{}", stderr(&out));
}

#[test]
fn bad_inputs_are_exit_2_naming_the_flag() {
    let dir = tempfile::tempdir().unwrap();
    let cases: Vec<(Vec<String>, &str)> = vec![
        // A survey from before per-source totals existed.
        (vec!["--from-survey".into(), repo_file("crates/survey/tests/fixtures/survey.json")], "predates per-source totals"),
        (vec!["--from-survey".into(), "/nonexistent/survey.json".into()], "--from-survey"),
        (vec!["--from-survey".into(), repo_file(FIXTURE), "--spread-from".into(), "/nonexistent".into()], "--spread-from"),
        (vec!["--spread-from".into(), repo_file(FIXTURE)], "--from-survey"),
        (vec![repo_file("scenarios/kernels/rps-6.12.toml"), "--from-survey".into(), repo_file(FIXTURE)], "cannot be used with"),
    ];
    for (args, words) in cases {
        let out = irqlab().arg("sim").args(&args).arg("--out").arg(dir.path()).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(words), "{args:?}: {}", stderr(&out));
    }
    // A broken profile: its file, line and column.
    let profile = dir.path().join("p.toml");
    std::fs::write(&profile, "schema = \"irqlab/profile/v1\"\n[[threads]]\nmatch = 3\n").unwrap();
    let out = irqlab()
        .args(["sim", "--from-survey", &repo_file(FIXTURE), "--profile"])
        .arg(&profile)
        .arg("--out")
        .arg(dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("--profile") && err.contains("p.toml:3:"), "{err}");
}
