//! `irqlab sim SCENARIO.toml`: runs a simulation scenario and writes the
//! `irqlab/sim/v2` document (and optionally a Chrome trace, the probe's
//! curve and an HTML page); a scenario of several CPUs (`cores = N`)
//! writes `irqlab/sim-machine/v1`, each CPU's document with what crossed
//! between them.

use crate::error::{CliError, Status};
use crate::output::{file_only, json_or_summary, read_text, write_json, write_text};
use irqlab_analysis::{format_ns, InputError, Nanos};
use irqlab_report::html::{Page, Section, Table};
use irqlab_report::plot::{LinePlot, Series};
use irqlab_sim::machine::MachineResult;
use irqlab_sim::{run_machine, run_scenario, RunError, Scenario, SimResult};
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct Args {
    /// The scenario file (TOML)
    #[arg(required_unless_present = "from_survey")]
    pub scenario: Option<PathBuf>,
    /// Simulate the machine a survey measured instead: one scenario per CPU and load it probed, calibrated from its gap sources, each probe curve simulated beside the measured one (survey.json, or the directory holding it)
    #[arg(long, value_name = "FILE|DIR", conflicts_with_all = ["scenario", "duration", "trace", "curve", "html"])]
    pub from_survey: Option<PathBuf>,
    /// With --from-survey: a second survey of the same machine; how far its curves lie from the first's is each check's tolerance
    #[arg(long, value_name = "FILE|DIR", requires = "from_survey")]
    pub spread_from: Option<PathBuf>,
    /// With --from-survey: a profile (`irqlab survey` writes one) applied in the model, each CPU's curve predicted after it
    #[arg(long, value_name = "FILE", requires = "from_survey")]
    pub profile: Option<PathBuf>,
    /// With --from-survey: where the scenarios and from-survey.json go [default: sim/ beside the survey.json]
    #[arg(long, value_name = "DIR", requires = "from_survey")]
    pub out: Option<PathBuf>,
    /// Seed of every random stream (overrides [run] seed)
    #[arg(long)]
    pub seed: Option<u64>,
    /// Simulated duration, e.g. "10s" (overrides [run] duration; at most 1000000s)
    #[arg(long, value_name = "D", value_parser = sim_duration)]
    pub duration: Option<Nanos>,
    /// Write the result document (irqlab/sim/v2) here ("-": to stdout, instead of the summary)
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Write a Chrome trace-event file (opens in Perfetto)
    #[arg(long, value_name = "FILE", value_parser = file_only())]
    pub trace: Option<PathBuf>,
    /// Write the simulated interference probe's curve (irqlab/curve/v1)
    #[arg(long, value_name = "FILE", value_parser = file_only())]
    pub curve: Option<PathBuf>,
    /// Write an HTML page with the results
    #[arg(long, value_name = "FILE", value_parser = file_only())]
    pub html: Option<PathBuf>,
}

/// Value parser of `--duration`: positive and at most
/// [`irqlab_sim::scenario::MAX_DURATION_NS`] (11.6 days simulated).
fn sim_duration(text: &str) -> Result<Nanos, String> {
    match crate::flags::positive_duration_ns(text)? {
        d if d > irqlab_sim::scenario::MAX_DURATION_NS => Err("at most 1000000s (11.6 days simulated)".into()),
        d => Ok(d),
    }
}

pub fn run(args: Args) -> Result<Status, CliError> {
    let scenario = match (&args.from_survey, &args.scenario) {
        (Some(from), _) => {
            return super::sim_from_survey::run(super::sim_from_survey::Request {
                from,
                spread_from: args.spread_from.as_deref(),
                profile: args.profile.as_deref(),
                out: args.out.as_deref(),
                seed: args.seed,
                json: args.json.as_deref(),
            })
        }
        (None, Some(scenario)) => scenario.clone(),
        (None, None) => return Err(CliError::Usage("give a SCENARIO file or --from-survey".into())),
    };
    crate::output::refuse_clashes(
        &[("SCENARIO", Some(&scenario))],
        &[
            ("--json", args.json.as_deref()),
            ("--trace", args.trace.as_deref()),
            ("--curve", args.curve.as_deref()),
            ("--html", args.html.as_deref()),
        ],
    )?;
    let file = scenario.display().to_string();
    let text = read_text(&scenario)?;
    let sc = Scenario::parse(&file, &text)?;
    let duration = args.duration;
    let params = sc.run_params(args.seed, duration).map_err(CliError::Input)?;
    if args.curve.is_some() && !sc.has_probe() {
        return Err(CliError::Input(InputError::new(format!("--curve needs a probe task or a [[metric]] kind = \"probe\" in {file}"))));
    }
    let stop = crate::signal::stop_flag();
    let bar = crate::progress::bar(params.duration / 1_000_000, "simulating");
    let started = std::time::Instant::now();
    let progress = |now: Nanos| {
        // Only worth drawing for runs longer than a couple of seconds.
        if started.elapsed().as_millis() > 1500 {
            bar.set_position(now / 1_000_000);
        }
    };
    let run_error = |e: RunError| match e {
        RunError::Input(e) => CliError::Input(e),
        RunError::Sim(e) => CliError::Failed(e.to_string()),
    };
    if sc.cores() > 1 {
        let one_cpu_only = [("--trace", args.trace.is_some()), ("--curve", args.curve.is_some()), ("--html", args.html.is_some())];
        if let Some((flag, _)) = one_cpu_only.iter().find(|(_, given)| *given) {
            return Err(CliError::Usage(format!(
                "{flag} is for one CPU so far; {file} has cores = {} (its JSON has each CPU's figures)",
                sc.cores()
            )));
        }
        let result = run_machine(&sc, params, &stop, progress).map_err(run_error)?;
        bar.finish_and_clear();
        return machine_outputs(args.json.as_deref(), &result);
    }
    let out = run_scenario(&sc, params, args.trace.is_some(), &stop, progress).map_err(run_error)?;
    bar.finish_and_clear();
    let result = out.result;
    json_or_summary(args.json.as_deref(), &result, summary)?;
    if let (Some(path), Some(trace)) = (&args.trace, &out.trace) {
        write_json(path, trace)?;
    }
    if let Some(path) = &args.curve {
        match &result.probe {
            Some(curve) => write_json(path, curve)?,
            None => return Err(CliError::Failed("the scenario produced no probe curve".into())),
        }
    }
    if let Some(path) = &args.html {
        write_text(path, &html_page(&result)?)?;
    }
    let c = &result.conservation;
    if !c.cpu_time_ok || !c.packets_ok || !c.devices_ok {
        return Err(CliError::Failed("conservation check failed (see \"conservation\" in the result)".into()));
    }
    if !result.complete {
        eprintln!("stopped early: result marked \"complete\": false");
    }
    Ok(Status::Success)
}

/// The document of a machine of several CPUs, or its summary: each CPU's
/// tables under its number, with what crossed between them.
fn machine_outputs(json: Option<&std::path::Path>, result: &MachineResult) -> Result<Status, CliError> {
    json_or_summary(json, result, |m| {
        let mut out = String::new();
        for c in &m.cpus {
            let x = &c.cross_cpu;
            out.push_str(&format!(
                "CPU {}: RPS packets sent {}, received {}; IPIs sent {}, received {}\n",
                c.cpu, x.rps_packets_sent, x.rps_packets_received, x.ipis_sent, x.ipis_received
            ));
            out.push_str(&summary(&c.sim));
        }
        out
    })?;
    if !result.conservation.ok() {
        return Err(CliError::Failed("conservation check failed (see \"conservation\" in the result)".into()));
    }
    if !result.complete {
        eprintln!("stopped early: result marked \"complete\": false");
    }
    Ok(Status::Success)
}

/// One line on what was simulated: models, seed, length, events.
fn run_line(r: &SimResult) -> String {
    let kernel = r.machine.kernel.map(|k| format!("kernel {k}, ")).unwrap_or_default();
    let line = format!(
        "{kernel}{} softirq model, {} scheduler, HZ={}, seed {}, {} simulated ({} events).",
        r.machine.softirq_model,
        r.machine.scheduler,
        r.machine.hz,
        r.seed,
        format_ns(r.measured_ns),
        r.events
    );
    if r.complete {
        return line;
    }
    // Said where the figures are (text and page), not only in the JSON.
    let asked = r.duration_ns.saturating_sub(r.warmup_ns);
    format!("INCOMPLETE: stopped early, the figures cover {} of the {} asked for. {line}", format_ns(r.measured_ns), format_ns(asked))
}

/// What a user at a terminal wants first: where the CPU went, what each
/// task got and lost, what the NICs dropped. The JSON has the rest.
fn summary(r: &SimResult) -> String {
    let mut out = format!("{}: {}\n", r.scenario, run_line(r));
    for (heading, table) in [("CPU time", cpu_table(r)), ("Tasks", task_table(r)), ("Network", nic_table(r))] {
        if !table.rows.is_empty() {
            out.push_str(&format!("{heading}\n{}", table.to_text()));
        }
    }
    if !r.devices.is_empty() {
        out.push_str("Devices\n");
        for d in &r.devices {
            out.push_str(&format!("  {}\n", device_line(d)));
        }
    }
    out
}

/// A device's report (its own fields per kind: disk, NIC transmit, IRQ
/// source) on one line: counters as they are, `_ns` fields as durations,
/// latency histograms as mean and max.
fn device_line(d: &serde_json::Value) -> String {
    let name = d["name"].as_str().unwrap_or("?");
    let kind = d["kind"].as_str().unwrap_or("device");
    let Some(fields) = d.as_object() else { return format!("{name} ({kind})") };
    let parts: Vec<String> = fields
        .iter()
        .filter_map(|(key, v)| match v {
            serde_json::Value::Number(n) => {
                let n = n.as_u64()?;
                Some(match key.strip_suffix("_ns") {
                    Some(what) => format!("{what} {}", format_ns(n)),
                    None => format!("{key} {n}"),
                })
            }
            serde_json::Value::Object(h) => {
                let (mean, max) = (h.get("mean_ns")?.as_u64()?, h.get("max_ns")?.as_u64()?);
                Some(format!("{key} mean {} max {}", format_ns(mean), format_ns(max)))
            }
            _ => None,
        })
        .collect();
    format!("{name} ({kind}): {}", parts.join(", "))
}

fn ms(ns: Nanos) -> String {
    format!("{:.3}", ns as f64 / 1e6)
}

fn cpu_table(r: &SimResult) -> Table {
    let pct = |ns: Nanos| format!("{:.2}%", 100.0 * ns as f64 / r.measured_ns.max(1) as f64);
    let c = &r.cpu.time;
    Table::new(["context", "time (ms)", "share"])
        .row(["hard IRQ".into(), ms(c.hardirq_ns), pct(c.hardirq_ns)])
        .row(["softirq".into(), ms(c.softirq_ns), pct(c.softirq_ns)])
        .row(["tasks".into(), ms(c.run_ns), pct(c.run_ns)])
        .row(["context switch".into(), ms(r.cpu.context_switch_ns), pct(r.cpu.context_switch_ns)])
        .row(["idle".to_string(), ms(c.idle_ns), pct(c.idle_ns)])
}

fn task_table(r: &SimResult) -> Table {
    let mut tasks = Table::new(["task", "policy", "cpu (ms)", "stolen (ms)", "utime (ms)", "stime (ms)", "jobs", "misses", "max response"]);
    for t in &r.tasks {
        tasks.push_row([
            t.name.clone(),
            t.policy.clone(),
            ms(t.time.run_ns),
            ms(t.time.stolen_ns),
            ms(t.charged_utime_ns),
            ms(t.charged_stime_ns),
            t.jobs.to_string(),
            t.deadline_misses.to_string(),
            t.response.as_ref().map_or("-".into(), |p| format_ns(p.max_ns)),
        ]);
    }
    tasks
}

fn nic_table(r: &SimResult) -> Table {
    let mut nics = Table::new(["nic", "offered", "received", "ring drops", "backlog drops", "socket drops", "IRQs"]);
    for n in &r.nics {
        let s = &n.stats;
        nics.push_row([
            n.name.clone(),
            s.packets_offered.to_string(),
            s.packets_received.to_string(),
            s.dropped_ring_full.to_string(),
            s.dropped_backlog_full.to_string(),
            s.dropped_socket_full.to_string(),
            s.hardirqs.to_string(),
        ]);
    }
    nics
}

/// The HTML page of a run: CPU time split, tasks, NIC, and the plots the
/// scenario asked for (bottom-half time per interval, probe curve).
fn html_page(r: &SimResult) -> Result<String, CliError> {
    let mut page = Page::new(format!("Simulation: {}", r.scenario))
        .intro(run_line(r))
        .section(Section::new("CPU time").table(cpu_table(r)))
        .section(Section::new("Tasks").table(task_table(r)))
        .section(Section::new("Network").table(nic_table(r)));
    let plot_err = |e: irqlab_report::plot::PlotError| CliError::Failed(e.to_string());
    if let Some(series) = &r.bh_time {
        let pts = series.values_ns.iter().enumerate().map(|(i, v)| (i as f64 * series.interval_ns as f64 / 1e6, *v as f64 / 1e3)).collect();
        let svg = LinePlot::new("Bottom-half time per interval")
            .x_label("time (ms)")
            .y_label(format!("bottom-half time per {} (us)", format_ns(series.interval_ns)))
            .series(Series::line("bottom halves", pts))
            .to_svg()
            .map_err(plot_err)?;
        page = page.section(Section::new("Bottom-half time").svg(svg));
    }
    if let Some(curve) = &r.probe {
        let pts = curve.points.iter().map(|p| (p.window_ns as f64 / 1e3, p.max_load)).collect();
        let svg = LinePlot::new("Simulated interference probe")
            .x_label("window (us)")
            .y_label("max load")
            .log_x(true)
            .series(Series::points("observed", pts))
            .to_svg()
            .map_err(plot_err)?;
        page = page.section(Section::new("Interference (probe)").svg(svg));
    }
    page.render().map_err(|e| CliError::Failed(e.to_string()))
}
