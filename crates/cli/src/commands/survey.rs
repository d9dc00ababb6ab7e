//! `irqlab survey`: how much interrupts and bottom halves take from tasks on
//! this machine, where, and what to change — one run, one page. Wiring
//! only: the steps and rules are `irqlab_survey`.

use crate::error::{CliError, Status};
use crate::flags;
use crate::output;
use irqlab_survey::before_after::{self, Baseline};
use irqlab_survey::doc::{Load, Survey, TasksetInput};
use irqlab_survey::run::{self, Config};
use std::path::{Path, PathBuf};

#[derive(clap::Args)]
pub struct Args {
    /// CPUs to survey (e.g. 1 or 0-3,6); default: every online CPU
    #[arg(long, visible_alias = "cpus", value_name = "LIST", value_parser = flags::cpu_list)]
    cpu: Option<flags::CpuList>,
    /// Loads to measure under besides idle: none, net, cpu, disk or all
    /// (comma-separated; net: a UDP flood from testbed host b through a
    /// threaded-NAPI kthread at SCHED_FIFO 50 on the measured CPU, or where a profile in force keeps it)
    #[arg(long, value_name = "LOADS", default_value = "net", value_parser = parse_loads)]
    load: LoadList,
    /// Your task set (`irqlab analyze` format): checked against each CPU's
    /// measured driver load, with the server that would make it fit
    #[arg(long, value_name = "FILE")]
    taskset: Option<PathBuf>,
    /// 2 s per measurement instead of 10 s
    #[arg(long, conflicts_with = "duration")]
    quick: bool,
    /// Length of every measurement run (probe, latency, stimulus)
    #[arg(long, value_name = "D", value_parser = crate::flags::positive_duration_ns)]
    duration: Option<u64>,
    /// Directory for survey.json and index.html (created if missing)
    #[arg(long, value_name = "DIR", default_value = "irqlab-survey")]
    out: PathBuf,
    /// Render the page from this survey.json instead of measuring
    #[arg(long, value_name = "FILE", conflicts_with_all = ["cpu", "taskset", "quick", "duration"])]
    from: Option<PathBuf>,
    /// An earlier survey to show beside this one (before and after): its
    /// survey.json, or the directory holding it
    #[arg(long, visible_alias = "baseline", value_name = "FILE")]
    compare: Option<PathBuf>,
    /// With --compare: the prediction of the profile applied since (`irqlab sim --from-survey BEFORE --profile P`
    /// writes it) to show beside the measurement [default: BEFORE's sim/from-survey.json, when it has one]
    #[arg(long, value_name = "FILE", requires = "compare")]
    predicted: Option<PathBuf>,
    /// Link another report at the bottom of the page: TITLE=HREF (repeatable)
    #[arg(long = "link", value_name = "TITLE=HREF", value_parser = parse_link)]
    links: Vec<(String, String)>,
}

#[derive(Clone, Debug)]
pub struct LoadList(Vec<Load>);

fn parse_loads(text: &str) -> Result<LoadList, String> {
    let mut loads = Vec::new();
    for word in text.split(',').map(str::trim) {
        match word {
            "none" => {}
            "net" => loads.push(Load::Net),
            "cpu" => loads.push(Load::Cpu),
            "disk" => loads.push(Load::Disk),
            "all" => loads.extend([Load::Net, Load::Cpu, Load::Disk]),
            other => return Err(format!("`{other}` is not a load (none, net, cpu, disk, all)")),
        }
    }
    loads.sort();
    loads.dedup();
    Ok(LoadList(loads))
}

fn parse_link(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((title, href)) if !title.is_empty() && !href.is_empty() => Ok((title.to_string(), href.to_string())),
        _ => Err(format!("`{text}`: expected TITLE=HREF")),
    }
}

pub fn run(args: Args) -> Result<Status, CliError> {
    // Read before anything runs: a bad baseline is bad input, exit 2.
    let baseline = args.compare.as_deref().map(read_baseline).transpose()?;
    let prediction = read_prediction(args.predicted.as_deref(), baseline.as_ref().map(|(_, file)| file.as_path()))?;
    if let Some(from) = &args.from {
        let mut survey = before_after::parse(&from.display().to_string(), &output::read_text(from)?)?;
        if let Some((file, doc)) = &prediction {
            survey.prediction = Some(irqlab_survey::predicted::beside(doc, file, &survey));
        }
        let baseline = baseline.map(|(b, _)| b).or_else(|| recorded_baseline(&survey));
        write_page(&survey, baseline.as_ref(), &args.out, &args.links)?;
        return Ok(Status::Success);
    }
    if let Some((_, file)) = &baseline {
        output::refuse_clashes(&[("--compare", Some(file))], &[("--out", Some(&args.out.join("survey.json")))]).map_err(|_| {
            CliError::Usage(format!(
                "--out {}: its survey.json is the --compare input {}, which the new survey would overwrite; give --out another directory",
                args.out.display(),
                file.display()
            ))
        })?;
    }
    let mut config = Config::new(args.quick, args.load.0.clone());
    if let Some(ns) = args.duration {
        config = config.with_duration(ns);
    }
    if let Some(list) = &args.cpu {
        config.cpus = Some(list.0.clone());
    }
    let taskset = match &args.taskset {
        Some(path) => {
            let (set, _) = super::analyze::load_task_set(path)?;
            config.taskset = Some(TasksetInput { file: path.display().to_string(), text: output::read_text(path)? });
            Some(set)
        }
        None => None,
    };
    std::fs::create_dir_all(&args.out).map_err(|e| CliError::Usage(format!("--out {}: {e}", args.out.display())))?;
    super::control::warn_of_stalld_beside_the_probe();
    let stop = crate::signal::stop_flag();
    let bar = crate::progress::bar(1000, "survey");
    let result = run::survey(&config, taskset.as_ref(), &stop, |p| {
        bar.set_position(p.done_ns.saturating_mul(1000) / p.total_ns.max(1));
        bar.set_message(p.step.to_string());
    });
    bar.finish_and_clear();
    let mut survey = result.map_err(|e| super::measure::name_flags(e, &[("cpus", "--cpu")]))?;
    let profile = args.out.join(irqlab_survey::profile::FILE);
    survey.profile = Some(profile.display().to_string());
    let baseline = baseline.map(|(b, _)| b);
    survey.compared_with = baseline.as_ref().map(|b| b.path.clone());
    survey.prediction = prediction.map(|(file, doc)| irqlab_survey::predicted::beside(&doc, &file, &survey));
    crate::signal::writing(|| {
        output::write_text(&profile, &irqlab_survey::profile::text(&survey, &args.out))?;
        output::write_json(&args.out.join("survey.json"), &survey)?;
        write_page(&survey, baseline.as_ref(), &args.out, &args.links)
    })?;
    output::print(&summary(&survey, &args.out))?;
    if let Some(baseline) = &baseline {
        output::print(&before_after::summary(baseline, &survey))?;
    }
    Ok(Status::from_ok(survey.complete))
}

/// The prediction to show beside the measurement: `--predicted FILE`
/// (bad input if unreadable), else the one `irqlab sim --from-survey`
/// left beside the baseline with a profile (skipped, said why, if it
/// cannot be read).
fn read_prediction(
    given: Option<&Path>,
    baseline: Option<&Path>,
) -> Result<Option<(String, irqlab_survey::scenario::FromSurvey)>, CliError> {
    use irqlab_survey::predicted;
    if let Some(path) = given {
        let shown = path.display().to_string();
        let doc = output::read_flag_file("--predicted", path, predicted::read)?;
        if doc.profile.is_none() {
            return Err(CliError::Usage(format!("--predicted {shown}: it predicts no profile (made without --profile)")));
        }
        return Ok(Some((shown, doc)));
    }
    let Some(baseline) = baseline else { return Ok(None) };
    let path = predicted::beside_survey(baseline);
    if !path.exists() {
        return Ok(None);
    }
    let shown = path.display().to_string();
    match std::fs::read_to_string(&path).map_err(|e| e.to_string()).and_then(|t| predicted::read(&shown, &t).map_err(|e| e.to_string())) {
        Ok(doc) if doc.profile.is_some() => Ok(Some((shown, doc))),
        Ok(_) => Ok(None),
        Err(why) => {
            eprintln!("note: {shown} cannot be read ({why}): no prediction beside the measurement");
            Ok(None)
        }
    }
}

/// `--compare FILE|DIR`: the earlier survey (DIR/survey.json for a
/// directory), shown by its absolute path, and the file it was read from.
fn read_baseline(path: &Path) -> Result<(Baseline, PathBuf), CliError> {
    let file = irqlab_survey::survey_file(path);
    let survey = output::read_flag_file("--compare", &file, before_after::parse)?;
    let shown = std::path::absolute(&file).unwrap_or_else(|_| file.clone());
    Ok((Baseline { path: shown.display().to_string(), survey }, file))
}

/// `--from` without `--compare`: the baseline the survey recorded, when it
/// can still be read (otherwise the page is drawn without it, and why is
/// said on stderr).
fn recorded_baseline(survey: &Survey) -> Option<Baseline> {
    let path = survey.compared_with.as_ref()?;
    match read_baseline(Path::new(path)) {
        Ok((baseline, _)) => Some(baseline),
        Err(e) => {
            eprintln!("note: the survey was compared with {path}, which cannot be read now ({e}): the page has no before and after");
            None
        }
    }
}

fn write_page(survey: &Survey, baseline: Option<&Baseline>, out: &Path, links: &[(String, String)]) -> Result<(), CliError> {
    let html = irqlab_survey::page::render_compared(survey, baseline, links)
        .map_err(|e| CliError::Failed(format!("rendering the survey page: {e}")))?;
    std::fs::create_dir_all(out).map_err(|e| CliError::Usage(format!("--out {}: {e}", out.display())))?;
    output::write_text(&out.join("index.html"), &html)
}

/// The verdict, the findings that need action, and where the page is.
fn summary(survey: &Survey, out: &Path) -> String {
    use irqlab_survey::doc::Severity;
    use std::fmt::Write;
    let mut s = format!("{}\n", survey.verdict.headline);
    for f in survey.findings.iter().filter(|f| f.severity >= Severity::Warn) {
        let _ = writeln!(s, "  {:?}: {} ({})", f.severity, f.title, f.measured);
    }
    for r in &survey.recommendations {
        let _ = writeln!(s, "  -> {}{}", r.title, r.command.as_ref().map(|c| format!(": {c}")).unwrap_or_default());
    }
    let _ = writeln!(s, "page: {}  document: {}", out.join("index.html").display(), out.join("survey.json").display());
    if let Some(profile) = &survey.profile {
        let settings = survey.recommendations.iter().filter(|r| r.setting.is_some()).count();
        let _ = writeln!(s, "profile: {profile} ({settings} setting(s); apply them at once: irqlab control apply {profile})");
    }
    s
}
