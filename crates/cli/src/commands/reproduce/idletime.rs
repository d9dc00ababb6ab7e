//! `irqlab reproduce idletime`: wiring of `irqlab_experiments::idletime`
//! to the terminal, JSON and an HTML page with the contour plots.

use super::{threads, with_progress, Args};
use crate::error::{CliError, Status};
use crate::signal::stop_flag;
use irqlab_analysis::format_ns;
use irqlab_analysis::idletime::BaselineTable;
use irqlab_analysis::Nanos;
use irqlab_experiments::idletime::{reproduce, Details, ExperimentResult, Options, Setup};
use irqlab_experiments::Report;
use irqlab_report::contour::{side_by_side_svg, HeatMap};
use irqlab_report::html::{Page, Section, Table};
use irqlab_sim::idletime::disk_experiment::Pattern;
use irqlab_sim::idletime::net::Proto;

pub fn run(args: &Args) -> Result<Status, CliError> {
    if args.live {
        return run_live(args);
    }
    let opts = Options { quick: args.quick, seed: args.seed, threads: threads(args) };
    let stop = stop_flag();
    let report = with_progress("idletime", |progress| reproduce(&opts, &stop, progress));
    let details: String = report.details.experiments.iter().map(experiment_text).collect();
    super::finish(args, &report, details, "Idletime", "docs/papers.md §4; the dissertation's ch. 6, Figs. 6.4-6.16", html)
}

fn p_label(p: Nanos) -> String {
    if p == 0 {
        "0".into()
    } else {
        format_ns(p)
    }
}

fn experiment_text(x: &ExperimentResult) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "\n== {} (Fig. {}): baseline r_max {:.2} {}, background alone {:.2} {}, mean service {}",
        x.spec.name,
        x.spec.figure,
        x.r_max,
        x.unit,
        x.background_alone,
        x.unit,
        format_ns(x.mean_service_ns.round() as Nanos)
    );
    let _ = write!(out, "{:>10}", "p \\ i");
    for i in &x.spec.intensities {
        let _ = write!(out, " {:>8}", format!("{:.0}%", i * 100.0));
    }
    let _ = writeln!(out, "   (foreground/background throughput, % normalised)");
    let _ = write!(out, "{:>10}", "fifo");
    for c in &x.fifo {
        let _ = write!(out, " {:>8}", format!("{:.0}/{:.0}", c.fg_norm * 100.0, c.bg_norm * 100.0));
    }
    out.push('\n');
    for (pi, &p) in x.spec.intervals_ns.iter().enumerate() {
        let _ = write!(out, "{:>10}", p_label(p));
        for c in &x.grid[pi] {
            let _ = write!(out, " {:>8}", format!("{:.0}/{:.0}", c.fg_norm * 100.0, c.bg_norm * 100.0));
        }
        out.push('\n');
    }
    out
}

/// The dissertation's baseline table for the foreground of an experiment.
fn paper_table(x: &ExperimentResult) -> Option<BaselineTable> {
    match &x.spec.setup {
        Setup::Disk { pattern: Pattern::Random } => Some(BaselineTable::disk_random()),
        Setup::Disk { pattern: Pattern::Sequential } => Some(BaselineTable::disk_sequential()),
        Setup::Net { setup, fg, .. } if setup.name == "gige-lan" => Some(match fg {
            Proto::Udp => BaselineTable::udp_gige(),
            Proto::Tcp => BaselineTable::tcp_gige(),
        }),
        _ => None,
    }
}

/// Row position of a landmark between the swept intervals (for the dashed line).
fn marker_row(intervals: &[Nanos], at: Nanos) -> Option<f64> {
    intervals.windows(2).enumerate().find_map(|(k, w)| {
        let (a, b, v) = (w[0] as f64, w[1] as f64, at as f64);
        (v >= a && v <= b && b > a).then(|| k as f64 + (v - a) / (b - a))
    })
}

fn grids_svg(x: &ExperimentResult, maps: Vec<(&str, Vec<Vec<f64>>, bool)>) -> Result<String, CliError> {
    let xt: Vec<String> = x.spec.intensities.iter().map(|i| format!("{:.0}%", i * 100.0)).collect();
    let yt: Vec<String> = x.spec.intervals_ns.iter().map(|&p| p_label(p)).collect();
    let marker = marker_row(&x.spec.intervals_ns, x.spec.landmark_ns);
    let maps: Vec<HeatMap> = maps
        .into_iter()
        .map(|(title, v, is_error)| {
            let mut m = HeatMap::new(title, xt.clone(), yt.clone(), v).labels("foreground intensity", "preemption interval p");
            if is_error {
                m = m.range(0.0, 0.5, false); // black = 50% difference, as Figs. 7.1/7.2
            }
            if let Some(pos) = marker {
                m = m.marker(pos, x.spec.landmark.clone());
            }
            m
        })
        .collect();
    side_by_side_svg(&maps).map_err(|e| CliError::Failed(e.to_string()))
}

fn html(report: &Report<Details>) -> Result<String, CliError> {
    let verdict = super::verdict_sentence(report);
    let rows = super::html_table(&report.rows);
    let mut page = Page::new("irqlab reproduce idletime")
        .intro(format!(
            "Idletime scheduling with a preemption interval (Eggert's dissertation, ch. 6-7) in simulation: {} sweep, seed {}. {verdict} \
             Shaded grids as in Figs. 6.4-6.16: lighter is better; foreground normalised to its baseline at the same intensity, \
             background to r_max (disk) or to the background protocol alone (network).",
            if report.quick { "quick" } else { "full" },
            report.seed
        ))
        .section(Section::new("Relations and landmarks").table(rows));
    for x in &report.details.experiments {
        let fg: Vec<Vec<f64>> = x.grid.iter().map(|r| r.iter().map(|c| c.fg_norm).collect()).collect();
        let bg: Vec<Vec<f64>> = x.grid.iter().map(|r| r.iter().map(|c| c.bg_norm).collect()).collect();
        let mut section = Section::new(format!("{} (dissertation Fig. {})", x.spec.name, x.spec.figure)).paragraph(format!(
            "Simulated {} s per point. Baseline r_max {:.2} {}, background alone {:.2} {}, mean service time {}.",
            x.spec.duration_ns as f64 / 1e9,
            x.r_max,
            x.unit,
            x.background_alone,
            x.unit,
            format_ns(x.mean_service_ns.round() as Nanos)
        ));
        section = section.svg(grids_svg(
            x,
            vec![("foreground throughput (% of baseline)", fg, false), ("background throughput (% of normaliser)", bg, false)],
        )?);
        let paper = paper_table(x);
        let mut base = Table::new(["intensity", "simulated baseline", "paper r(i)", "FIFO fg %", "FIFO bg %"]);
        for (k, &i) in x.spec.intensities.iter().enumerate() {
            let p = paper.as_ref().map_or("-".to_string(), |t| format!("{:.2}", t.r(i)));
            base.push_row([
                format!("{:.0}%", i * 100.0),
                format!("{:.2} {}", x.baseline[k], x.unit),
                p,
                format!("{:.0}", x.fifo[k].fg_norm * 100.0),
                format!("{:.0}", x.fifo[k].bg_norm * 100.0),
            ]);
        }
        section = section.table(base);
        if let Some(m) = &x.model {
            section = section
                .paragraph(format!(
                    "Model of section 4.4 with the simulated r(i) and service time {} ({}). Errors against the simulation with the interval \
                     restarted at completion (the model's variant): foreground MAE {:.1}%, background MAE {:.1}%; against the prototype's \
                     dispatch variant: {:.1}% / {:.1}%.",
                    format_ns(m.service_ns),
                    m.service_source,
                    m.fg_mae * 100.0,
                    m.bg_mae * 100.0,
                    m.fg_mae_dispatch * 100.0,
                    m.bg_mae_dispatch * 100.0
                ))
                .svg(grids_svg(
                    x,
                    vec![
                        ("model: foreground", m.fg_norm.clone(), false),
                        ("model: background", m.bg_norm.clone(), false),
                    ],
                )?)
                .svg(grids_svg(
                    x,
                    vec![
                        ("|model - sim| foreground", m.fg_error.clone(), true),
                        ("|model - sim| background", m.bg_error.clone(), true),
                    ],
                )?);
        }
        page = page.section(section);
    }
    page.render().map_err(|e| CliError::Failed(e.to_string()))
}

/// `--live`: the random-read disk experiment on this machine's disk and
/// the UDP experiment over a token-bucket link on the testbed.
fn run_live(args: &Args) -> Result<Status, CliError> {
    use irqlab_experiments::idletime::live;
    let exe = std::env::current_exe().map_err(|e| CliError::Failed(format!("finding the irqlab binary: {e}")))?;
    let (disk, net) = match args.resource.as_deref() {
        Some("disk") => (true, false),
        Some("net") => (false, true),
        _ => (true, true),
    };
    let config = live::Config { quick: args.quick, dir: args.dir.clone(), exe, disk, net };
    let stop = stop_flag();
    eprintln!(
        "idletime on this machine's disk, then over a 100 Mbit/s link on the testbed: per resource the foreground alone at {} \
         intensities, the background alone, then {} rounds of the foreground alone and both under {} setups, {} s each...",
        if args.quick { 5 } else { 10 },
        live::rounds(args.quick),
        if args.quick { "6-7" } else { "20-22" },
        if args.quick { 2 } else { 5 }
    );
    let report = live::reproduce(&config, &stop, |what| eprintln!("live: {what}"))?;
    let d = &report.details;
    let mut details =
        format!("disk {} ({}:{}), {} s per run, {} rounds\n", d.disk.name, d.disk.major, d.disk.minor, d.seconds_per_run, d.rounds);
    for part in &d.parts {
        details.push_str(&part_text(part));
    }
    for n in &d.notes {
        details.push_str(&format!("note: {n}\n"));
    }
    super::finish(
        args,
        &report,
        details,
        "Idletime, live (disk and network)",
        "docs/papers.md §4; the dissertation's §6.1.1, §6.2.1.1 and §6.2.2.1, Figs. 6.3-6.4, 6.7-6.9 and 6.11",
        |r| {
            let page = Page::new("irqlab reproduce idletime --live")
                .intro(format!(
                    "The random-read disk experiment on this machine's disk {} and UDP over a 100 Mbit/s link on the testbed. {}",
                    r.details.disk.name,
                    super::verdict_sentence(r)
                ))
                .section(Section::new("Model, this machine").table(super::html_table(&r.rows)));
            page.render().map_err(|e| CliError::Failed(e.to_string()))
        },
    )
}

/// One resource's baseline and points, a line each.
fn part_text(part: &irqlab_experiments::idletime::live::Part) -> String {
    let u = &part.unit;
    let mut text = format!(
        "{}: {}; r(i): {}; r_max {:.1} {u}, service 1/r_max {}{}; background alone {:.1} {u} (mean of {})\n",
        part.name,
        part.setup,
        part.baseline.iter().map(|(i, r)| format!("{:.0}% {:.1}", i * 100.0, r)).collect::<Vec<_>>().join(", "),
        part.r_max,
        format_ns(part.service_ns.round() as Nanos),
        part.tcp_rtt_ns.map_or(String::new(), |rtt| format!(
            ", the TCP foreground's round-trip time {}",
            format_ns((rtt / 1e3).round() as Nanos * 1000)
        )),
        part.background_alone_per_s,
        part.background_alone_runs.iter().map(|r| format!("{r:.1}")).collect::<Vec<_>>().join(", ")
    );
    for (i, runs) in &part.alone {
        let runs: Vec<String> = runs.iter().map(|r| format!("{r:.1}")).collect();
        text.push_str(&format!("{} i={:.0}% the foreground alone (r(i) here is their mean): {}\n", part.name, i * 100.0, runs.join(", ")));
    }
    for p in &part.points {
        let model = match (p.model_foreground_per_s, p.model_background_per_s) {
            (Some(f), Some(b)) => format!(
                " (model {f:.1} / {b:.1}{}; background with measured inputs {})",
                p.model_background_se.map_or(String::new(), |se| format!(" ± {se:.1}")),
                p.measured_model_background_per_s.map_or("-".into(), |m| format!("{m:.1}"))
            ),
            _ => String::new(),
        };
        let p50 = |v: Option<u64>| v.map_or("-".into(), format_ns);
        let gate = p.gate_open_fraction.map_or(String::new(), |g| {
            format!(
                ", gate open {:.0}%, close reaction p50 {}, open lateness p50 {}",
                g * 100.0,
                p50(p.gate_close_reaction_p50_ns),
                p50(p.gate_open_lateness_p50_ns)
            )
        });
        let se = p.foreground_share_se.map_or(String::new(), |se| format!(" ± {:.0}", se * 100.0));
        text.push_str(&format!(
            "{} i={:.0}% {:<22} foreground {:>7.1} {u} ({:.0}%{se} of r(i)), background {:>7.1} {u}{model}{gate}; runs {}\n",
            part.name,
            p.intensity * 100.0,
            p.setup,
            p.foreground_per_s,
            p.foreground_share * 100.0,
            p.background_per_s,
            p.foreground_runs.iter().zip(&p.background_runs).map(|(f, b)| format!("{f:.1}/{b:.1}")).collect::<Vec<_>>().join(", ")
        ));
    }
    text
}
