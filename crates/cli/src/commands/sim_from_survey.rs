//! `irqlab sim --from-survey DIR/survey.json [--profile P]`: the surveyed
//! machine as scenarios (one per CPU and load the survey probed, written
//! to `--out`), each simulated, the simulated probe's curve beside the
//! measured one, and with a profile, the curve predicted after it
//! (issue 53). The translation is `irqlab_survey::scenario`; here the
//! runs and the comparison.

use crate::error::{CliError, Status};
use crate::output::{json_or_summary, read_flag_file, write_json, write_text};
use irqlab_control::profile::Profile;
use irqlab_report::html::Table;
use irqlab_sim::{run_machine, RunError, Scenario};
use irqlab_survey::scenario::{self, FromSurvey, Model, Pair, Predicted, Run, SurveyScenario, WindowPair, PROBE_TASK};
use irqlab_survey::Survey;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

/// The window lengths the summary shows (the check: 1 ms, 10 ms);
/// the document has every window of the measured curve.
const SHOWN_WINDOWS_NS: [u64; 2] = [1_000_000, 10_000_000];

/// What `irqlab sim --from-survey` was given.
pub struct Request<'a> {
    pub from: &'a Path,
    pub spread_from: Option<&'a Path>,
    pub profile: Option<&'a Path>,
    pub out: Option<&'a Path>,
    pub seed: Option<u64>,
    pub json: Option<&'a Path>,
}

/// Reads a survey named by a file or its directory; errors name `flag`.
fn read_survey(flag: &str, path: &Path) -> Result<(PathBuf, Survey), CliError> {
    let file = irqlab_survey::survey_file(path);
    let survey = read_flag_file(flag, &file, irqlab_survey::before_after::parse)?;
    Ok((file, survey))
}

pub fn run(req: Request) -> Result<Status, CliError> {
    let (file, survey) = read_survey("--from-survey", req.from)?;
    let shown = file.display().to_string();
    let other = req.spread_from.map(|p| read_survey("--spread-from", p)).transpose()?;
    let profile = req.profile.map(|p| read_flag_file("--profile", p, Profile::parse)).transpose()?;
    let usage = |why: String| CliError::Usage(format!("--from-survey {shown}: {why}"));
    let preset = scenario::kernel_preset(&survey.machine.kernel).map_err(usage)?;
    let (models, skipped) = scenario::models(&survey).map_err(usage)?;
    if models.is_empty() {
        let why: Vec<String> = skipped.iter().map(|s| format!("CPU {} {}: {}", s.cpu, s.load, s.why)).collect();
        return Err(usage(format!("no curve can be simulated ({})", why.join("; "))));
    }
    let out_dir = req.out.map(Path::to_path_buf).unwrap_or_else(|| file.parent().unwrap_or(Path::new(".")).join("sim"));
    std::fs::create_dir_all(&out_dir).map_err(|e| CliError::Usage(format!("--out {}: {e}", out_dir.display())))?;
    let stop = crate::signal::stop_flag();
    let per_model = if profile.is_some() { 2 } else { 1 };
    let bar = crate::progress::bar((models.len() * per_model) as u64, "simulating the survey");
    let mut runs = Vec::new();
    let mut notes = Vec::new();
    for model in &models {
        let s = model.scenario(&survey, &shown, &preset, "");
        bar.set_message(s.file_name.clone());
        let (path, before) = simulate(&s, &out_dir, req.seed, &stop)?;
        bar.inc(1);
        let mut run = compare(model, &survey, path, &before)?;
        if let Some((_, other)) = &other {
            add_spread(&mut run, other);
        }
        if let Some(profile) = &profile {
            let mut after = model.clone();
            notes.extend(after.apply_profile(profile));
            let s = after.scenario(&survey, &shown, &preset, "-predicted");
            bar.set_message(s.file_name.clone());
            let (path, predicted) = simulate(&s, &out_dir, req.seed, &stop)?;
            bar.inc(1);
            run.predicted = Some(Predicted {
                scenario: path.display().to_string(),
                complete: predicted.complete,
                mean_load: predicted.mean_load,
                windows: predicted.windows,
            });
        }
        runs.push(run);
        if stop.load(Ordering::Relaxed) {
            break; // what ran is kept, the document marked incomplete
        }
    }
    bar.finish_and_clear();
    notes.sort();
    notes.dedup();
    let complete = runs.len() == models.len() && runs.iter().all(|r| r.complete && r.predicted.as_ref().is_none_or(|p| p.complete));
    let doc = FromSurvey {
        schema: scenario::DOC_SCHEMA.to_string(),
        complete,
        survey: shown,
        kernel: survey.machine.kernel.clone(),
        preset,
        seed: req.seed,
        spread_from: other.as_ref().map(|(f, _)| f.display().to_string()),
        profile: req.profile.map(|p| p.display().to_string()),
        profile_notes: notes,
        runs,
        skipped,
    };
    // Always beside the scenarios, where `survey --compare` finds it;
    // `--json` puts it somewhere else too (or on stdout).
    write_json(&out_dir.join(scenario::DOC_FILE), &doc)?;
    json_or_summary(req.json, &doc, |d| summary(d, &out_dir))?;
    if !complete {
        eprintln!("stopped early: result marked \"complete\": false");
    }
    Ok(Status::from_ok(complete))
}

/// One simulated probe: its mean load and curve.
struct Simulated {
    complete: bool,
    mean_load: f64,
    windows: Vec<(u64, f64)>,
}

/// Writes a scenario into `out` and runs it; the probed CPU's probe.
fn simulate(s: &SurveyScenario, out: &Path, seed: Option<u64>, stop: &AtomicBool) -> Result<(PathBuf, Simulated), CliError> {
    let path = out.join(&s.file_name);
    write_text(&path, &s.toml)?;
    let shown = path.display().to_string();
    // A scenario this command wrote that the simulator refuses is this
    // command's fault, not the user's: said as a failure, not bad input.
    let ours = |e: String| CliError::Failed(format!("{shown}: the scenario made from the survey does not run: {e}"));
    let sc = Scenario::parse(&shown, &s.toml).map_err(|e| ours(e.to_string()))?;
    let params = sc.run_params(seed, None).map_err(|e| ours(e.to_string()))?;
    let result = run_machine(&sc, params, stop, |_| {}).map_err(|e| match e {
        RunError::Input(e) => ours(e.to_string()),
        RunError::Sim(e) => CliError::Failed(e.to_string()),
    })?;
    let cpu = result.cpus.iter().find(|c| c.cpu == s.cpu).ok_or_else(|| ours(format!("no CPU {} in the result", s.cpu)))?;
    let sim = &cpu.sim;
    let curve = sim.probe.as_ref().ok_or_else(|| ours("no probe curve".into()))?;
    let probe = sim.tasks.iter().find(|t| t.name == PROBE_TASK).ok_or_else(|| ours("no probe task".into()))?;
    Ok((
        path,
        Simulated {
            complete: result.complete,
            mean_load: 1.0 - probe.time.run_ns as f64 / sim.measured_ns.max(1) as f64,
            windows: curve.points.iter().map(|p| (p.window_ns, p.max_load)).collect(),
        },
    ))
}

/// The simulated probe beside the measured one of the same CPU and load.
fn compare(model: &Model, survey: &Survey, scenario: PathBuf, sim: &Simulated) -> Result<Run, CliError> {
    let curve = survey
        .cpus
        .iter()
        .find(|c| c.cpu == model.cpu)
        .and_then(|c| c.curves.iter().find(|c| c.load.name() == model.load))
        .ok_or_else(|| CliError::Failed(format!("CPU {} {}: its curve is not in the survey", model.cpu, model.load)))?;
    let windows = curve
        .measured
        .points
        .iter()
        .filter_map(|m| {
            let (_, simulated) = sim.windows.iter().find(|(w, _)| *w == m.window_ns)?;
            Some(WindowPair {
                window_ns: m.window_ns,
                measured: m.max_load,
                simulated: *simulated,
                error: simulated - m.max_load,
                spread: None,
                within_spread: None,
            })
        })
        .collect();
    Ok(Run {
        cpu: model.cpu,
        load: model.load.to_string(),
        scenario: scenario.display().to_string(),
        complete: sim.complete,
        mean_load: Pair { measured: curve.mean_load().unwrap_or(0.0), simulated: sim.mean_load },
        windows,
        predicted: None,
    })
}

/// The tolerance of each window's check: how far the other survey's
/// measurement of the same CPU, load and window lies from this one's.
fn add_spread(run: &mut Run, other: &Survey) {
    let Some(curve) = other.cpus.iter().find(|c| c.cpu == run.cpu).and_then(|c| c.curves.iter().find(|c| c.load.name() == run.load)) else {
        return;
    };
    for w in &mut run.windows {
        if let Some(p) = curve.measured.points.iter().find(|p| p.window_ns == w.window_ns) {
            let spread = (w.measured - p.max_load).abs();
            w.spread = Some(spread);
            w.within_spread = Some(w.error.abs() <= spread);
        }
    }
}

fn summary(d: &FromSurvey, out: &Path) -> String {
    let pct = |x: f64| format!("{:.1}%", 100.0 * x);
    let signed = |x: f64| format!("{:+.1}", 100.0 * x);
    let predicted = d.profile.is_some();
    let mut head = vec!["CPU".to_string(), "load".into(), "mean load measured".into(), "simulated".into()];
    if predicted {
        head.push("predicted".into());
    }
    for w in SHOWN_WINDOWS_NS {
        let ms = w / 1_000_000;
        head.extend([format!("{ms} ms measured"), "simulated".into(), "error (points)".into()]);
        if d.spread_from.is_some() {
            head.push("spread (points)".into());
        }
        if predicted {
            head.push("predicted".into());
        }
    }
    let mut table = Table::new(head);
    for r in &d.runs {
        let mut row = vec![r.cpu.to_string(), r.load.clone(), pct(r.mean_load.measured), pct(r.mean_load.simulated)];
        if let Some(p) = &r.predicted {
            row.push(pct(p.mean_load));
        }
        for w in SHOWN_WINDOWS_NS {
            let point = r.windows.iter().find(|p| p.window_ns == w);
            match point {
                Some(p) => row.extend([pct(p.measured), pct(p.simulated), signed(p.error)]),
                None => row.extend(["-".into(), "-".into(), "-".into()]),
            }
            if d.spread_from.is_some() {
                let spread = point.and_then(|p| Some((p.spread?, p.within_spread?)));
                row.push(spread.map_or("-".into(), |(s, within)| format!("{:.1}{}", 100.0 * s, if within { " (within)" } else { "" })));
            }
            if predicted {
                let after = r.predicted.as_ref().and_then(|p| p.windows.iter().find(|(x, _)| *x == w));
                row.push(after.map_or("-".into(), |(_, y)| pct(*y)));
            }
        }
        table.push_row(row);
    }
    let mut text = format!(
        "The survey {} simulated as kernel {} ({}): each probed CPU's load, measured beside simulated{}.\n{}",
        d.survey,
        d.preset,
        d.kernel,
        if predicted { ", and predicted with the profile" } else { "" },
        table.to_text()
    );
    for s in &d.skipped {
        text.push_str(&format!("not simulated: CPU {} {}: {}\n", s.cpu, s.load, s.why));
    }
    if let Some(other) = &d.spread_from {
        text.push_str(&format!(
            "spread: how far {other} measured the same point from this survey (an error within it is within the measurement's own run-to-run spread)\n"
        ));
    }
    if let Some(profile) = &d.profile {
        text.push_str(&format!("profile {profile} in the model:\n"));
        for n in &d.profile_notes {
            text.push_str(&format!("  {}: {}\n", n.setting, n.note));
        }
        if d.profile_notes.is_empty() {
            text.push_str("  nothing it sets moves a measured source\n");
        }
    }
    text.push_str(&format!("scenarios and {}: {}\n", scenario::DOC_FILE, out.display()));
    text
}
