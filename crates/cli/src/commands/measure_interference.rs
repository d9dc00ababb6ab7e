//! `irqlab measure interference`: the load-bounds paper's probe.

use crate::error::{CliError, Status};
use crate::flags;
use crate::output;
use irqlab_analysis::curve::Curve;
use irqlab_measure::probe::{self, InterferenceCurve, Policy, Snapshot};
use std::fmt::Write;
use std::io::IsTerminal;
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct Args {
    /// CPU to measure (default: the last online one)
    #[arg(long, visible_alias = "cpus", value_name = "CPU", value_parser = flags::one_cpu)]
    cpu: Option<usize>,
    /// The probe's scheduling: fifo:PRIO, fifo (the default: priority just
    /// below the irq/napi threads, else 90) or other
    #[arg(long, value_name = "POLICY", value_parser = flags::policy)]
    policy: Option<flags::Policy>,
    /// The old spelling of --policy fifo:P (taken, with a note)
    #[arg(long, value_name = "P")]
    priority: Option<u8>,
    /// How long to measure
    #[arg(long, default_value_t = flags::Duration(probe::Config::default().duration_ns), value_name = "D", value_parser = flags::positive)]
    duration: flags::Duration,
    /// Window lengths, `FROM..TO` on a log scale
    #[arg(long, default_value = "10us..1s", value_name = "RANGE", value_parser = window_range)]
    windows: (u64, u64),
    /// Window lengths per decade of the range (1 to 1000)
    #[arg(long, default_value_t = 8, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=probe::MAX_PER_DECADE as i64))]
    per_decade: u32,
    /// Clock jumps longer than this count as preemptions
    #[arg(long, default_value_t = flags::Duration(probe::Config::default().threshold_ns), value_name = "NS", value_parser = flags::positive)]
    threshold: flags::Duration,
    /// Require RT throttling off for the run (kernel.sched_rt_runtime_us =
    /// -1, restored on exit): fail (exit 3) where it cannot be lifted. By
    /// default it is lifted where allowed, and marked where not
    #[arg(long, conflicts_with = "keep_rt_limit")]
    lift_rt_limit: bool,
    /// Leave RT throttling as it is; the curve then marks the windows
    /// throttling alone could explain (rt_throttling.throttled_windows_ns)
    #[arg(long)]
    keep_rt_limit: bool,
    /// Read clock_gettime(CLOCK_MONOTONIC) instead of the TSC
    #[arg(long)]
    clock_gettime: bool,
    /// Subtract an idle-system curve (irqlab/curve/v1 JSON or CSV)
    #[arg(long, value_name = "FILE")]
    baseline: Option<PathBuf>,
    /// Write the curve document (irqlab/curve/v1) ("-": to stdout, instead
    /// of the summary)
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// Write every gap as CSV `start_ns,len_ns`
    #[arg(long, value_name = "FILE", value_parser = output::file_only())]
    raw: Option<PathBuf>,
    /// Plot this curve (and any --overlay curves) with their fitted
    /// hyperbolas (load-bounds paper Figs. 4–6)
    #[arg(long, value_name = "FILE", value_parser = output::file_only())]
    svg: Option<PathBuf>,
    /// Name of this measurement in the plot
    #[arg(long, default_value = "measured", value_name = "NAME")]
    label: String,
    /// Earlier curve to draw beside this one, `NAME=FILE` (repeatable)
    #[arg(long, value_name = "NAME=FILE")]
    overlay: Vec<String>,
    /// Capacity of the preallocated gap log (1 to 10^9, 16 bytes a gap;
    /// twice the log must fit in the memory available)
    #[arg(long, default_value_t = probe::Config::default().max_gaps as u64, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=probe::MAX_GAPS as u64))]
    max_gaps: u64,
    /// Do not run the BPF monitor that attributes the gaps to their sources
    /// (hard IRQs, softirqs, threads, and `unseen`: the rest)
    #[arg(long)]
    no_sources: bool,
}

/// Value parser of `--windows FROM..TO` (e.g. 10us..1s), 0 < FROM <= TO.
fn window_range(text: &str) -> Result<(u64, u64), String> {
    let (from, to) = text.split_once("..").ok_or("expected FROM..TO, e.g. 10us..1s")?;
    let (from, to) = (flags::duration_ns(from)?, flags::duration_ns(to)?);
    if from == 0 || to < from {
        return Err("need 0 < FROM <= TO".into());
    }
    Ok((from, to))
}

pub fn run(args: Args) -> Result<Status, CliError> {
    // A threshold of 0 is refused by its parser: every clock read would be
    // a "preemption", the gap log would fill in milliseconds and the curve
    // say load 1 everywhere.
    let (duration_ns, threshold_ns) = (args.duration.0, args.threshold.0);
    let (policy, priority) = match flags::own_threads(args.policy.as_ref(), args.priority)? {
        None | Some(flags::ThreadPolicy::Fifo(None)) => (Policy::Fifo, None),
        Some(flags::ThreadPolicy::Fifo(Some(p))) => (Policy::Fifo, Some(i32::from(p))),
        Some(flags::ThreadPolicy::Other) => (Policy::Other, None),
    };
    let windows_ns = probe::log_windows(args.windows.0, args.windows.1, args.per_decade);
    let overlay_files: Vec<&std::path::Path> =
        args.overlay.iter().filter_map(|o| o.split_once('=')).map(|(_, file)| std::path::Path::new(file)).collect();
    let mut inputs = vec![("--baseline", args.baseline.as_deref())];
    inputs.extend(overlay_files.iter().map(|&f| ("--overlay", Some(f))));
    output::refuse_clashes(&inputs, &[("--json", args.json.as_deref()), ("--raw", args.raw.as_deref()), ("--svg", args.svg.as_deref())])?;
    // Read every input before measuring: a bad file must not cost a run.
    let overlays = args.overlay.iter().map(|o| read_overlay(o)).collect::<Result<Vec<_>, _>>()?;
    let baseline = match &args.baseline {
        Some(path) => {
            let text = output::read_text(path)?;
            Some(Curve::parse(&path.display().to_string(), &text)?)
        }
        None => None,
    };
    // Without --cpu the library takes the last online CPU (not the affinity
    // mask's size: under `taskset -c 0` the probe still pins itself
    // wherever it is told).
    let config = probe::Config {
        cpu: args.cpu,
        policy,
        priority,
        duration_ns,
        windows_ns,
        threshold_ns,
        rt_limit: match (args.lift_rt_limit, args.keep_rt_limit) {
            (true, _) => probe::RtLimit::Lift,
            (_, true) => probe::RtLimit::Keep,
            _ => probe::RtLimit::LiftIfAllowed,
        },
        force_clock_gettime: args.clock_gettime,
        // Within MAX_GAPS by the value parser, so within usize.
        max_gaps: args.max_gaps as usize,
        sources: !args.no_sources,
    };
    if matches!(config.policy, Policy::Fifo) {
        super::control::warn_of_stalld_beside_the_probe();
    }
    let stop = crate::signal::stop_flag();
    let tty = std::io::stderr().is_terminal();
    let measured = probe::measure_with_gaps(&config, &stop, |s| {
        if tty {
            show(s)
        }
    })
    .map_err(|e| super::measure::name_flags(e, &[("cpu", "--cpu"), ("priority", "--priority"), ("max_gaps", "--max-gaps")]))?;
    let mut curve = measured.curve.clone();
    if !args.no_sources && !curve.sources.available {
        eprintln!("note: the probe ran without its gap sources: {}", curve.sources.note);
    }
    if let (Some(base), Some(path)) = (&baseline, &args.baseline) {
        let name = path.display().to_string();
        super::fit::warn_about_baseline(&name, curve.subtract_baseline(base, &name));
    }
    output::json_or_summary(args.json.as_deref(), &curve, summary)?;
    if let Some(path) = &args.raw {
        output::write_text(path, &measured.gaps_csv())?;
    }
    if let Some(path) = &args.svg {
        let mut all = overlays;
        all.push((args.label.clone(), curve.curve()));
        let svg = plot(&all, &curve).map_err(|e| CliError::Failed(e.to_string()))?;
        output::write_text(path, &svg)?;
    }
    Ok(Status::from_ok(curve.complete))
}

fn show(s: &Snapshot) {
    let loads: Vec<String> = s.loads.iter().map(|(w, l)| format!("{}:{:.3}", irqlab_analysis::format_ns(*w), l)).collect();
    eprintln!(
        "{:>5.1}s  gaps {:>8}  max gap {:>10}  max load {}",
        s.elapsed_ns as f64 / 1e9,
        s.gaps,
        irqlab_analysis::format_ns(s.max_gap_ns),
        loads.join("  ")
    );
}

fn summary(c: &InterferenceCurve) -> String {
    let f = irqlab_analysis::format_ns;
    let mut out = String::new();
    let policy = match c.policy {
        Policy::Fifo => format!("SCHED_FIFO {} ({})", c.priority, c.priority_reason),
        Policy::Other => "SCHED_OTHER".to_string(),
    };
    let _ = writeln!(out, "# CPU {}, {policy}", c.cpu);
    let _ = writeln!(out, "# clock: {}", c.clock_note);
    let _ = writeln!(
        out,
        "# {} measured, sampling period {:.1} ns, threshold {}, {} gaps ({:.1} over 100us per s), max gap {}, mean load {:.5}",
        f(c.duration_ns),
        c.sampling_period_ns,
        f(c.threshold_ns),
        c.gaps,
        c.gaps_over_100us_per_s,
        f(c.max_gap_ns),
        c.mean_load
    );
    let hist: Vec<String> = c.histogram.iter().map(|b| format!("{}..{}: {}", f(b.from_ns), f(b.to_ns), b.count)).collect();
    let _ = writeln!(out, "# gap histogram: {}", if hist.is_empty() { "no gaps".to_string() } else { hist.join(", ") });
    let _ = writeln!(out, "# {}", c.rt_throttling.note);
    if let Some(b) = &c.baseline {
        let _ = writeln!(out, "# baseline {b} subtracted");
    }
    if !c.windows_skipped_ns.is_empty() {
        let _ = writeln!(out, "# {} window(s) longer than the run left out", c.windows_skipped_ns.len());
    }
    if c.log_overflow {
        let _ = writeln!(out, "# gap log full: stopped early (raise --max-gaps or --threshold)");
    } else if !c.complete {
        let _ = writeln!(out, "# stopped early: partial result");
    }
    let _ = writeln!(out, "{:>12}  {:>10}", "window", "max_load");
    for p in &c.points {
        let _ = writeln!(out, "{:>12}  {:>10.6}", f(p.window_ns), p.max_load);
    }
    out.push_str(&sources_summary(&c.sources));
    out
}

/// How many sources a line of the summary names before "others".
const TOP_SOURCES: usize = 4;

/// One line per decade of window lengths: the sources of that window's
/// maximum-load window, largest first.
fn sources_summary(s: &probe::GapSources) -> String {
    let f = irqlab_analysis::format_ns;
    let mut out = String::new();
    if !s.available {
        let _ = writeln!(out, "# gap sources: {}", s.note);
        return out;
    }
    let _ = writeln!(out, "# gap sources of the max-load windows ({})", s.note);
    for w in decade_windows(&s.windows) {
        let mut parts: Vec<String> = w.sources.iter().take(TOP_SOURCES).map(|x| format!("{} {}", x.label, f(x.ns))).collect();
        let rest: u64 = w.sources.iter().skip(TOP_SOURCES).map(|x| x.ns).sum();
        if rest > 0 {
            parts.push(format!("{} others {}", w.sources.len() - TOP_SOURCES, f(rest)));
        }
        let what = if parts.is_empty() { "no gaps".to_string() } else { parts.join(", ") };
        let _ = writeln!(out, "{:>8}: busy {}: {what}", f(w.window_ns), f(w.busy_ns));
    }
    out
}

/// The windows nearest each power of ten (within a factor of 1.5), one per
/// decade.
fn decade_windows(windows: &[probe::WindowSources]) -> Vec<&probe::WindowSources> {
    let mut out: Vec<&probe::WindowSources> = Vec::new();
    for exp in 0..=12 {
        let target = 10f64.powi(exp);
        let near = windows
            .iter()
            .map(|w| (w, (w.window_ns as f64 / target).ln().abs()))
            .filter(|(_, d)| *d <= 1.5f64.ln())
            .min_by(|a, b| a.1.total_cmp(&b.1))
            .map(|(w, _)| w);
        if let Some(w) = near {
            if !out.iter().any(|o| o.window_ns == w.window_ns) {
                out.push(w);
            }
        }
    }
    out
}

fn read_overlay(spec: &str) -> Result<(String, Curve), CliError> {
    let (name, file) = spec.split_once('=').ok_or_else(|| CliError::Usage(format!("--overlay `{spec}`: expected NAME=FILE")))?;
    let text = output::read_text(std::path::Path::new(file))?;
    Ok((name.to_string(), Curve::parse(file, &text)?))
}

/// Sources drawn as layers of their own in the plot; the rest are "others".
const PLOTTED_SOURCES: usize = 5;

/// The sources of each max-load window stacked as areas (fractions of the
/// window, so their top is the raw max-load curve): the `PLOTTED_SOURCES`
/// largest over all windows, then the others, `unseen` at the top.
fn source_layers(s: &probe::GapSources) -> Vec<irqlab_report::plot::Series> {
    let in_us =
        s.layers(PLOTTED_SOURCES).into_iter().map(|l| (l.name, l.points.into_iter().map(|(w, y)| (w as f64 / 1e3, y)).collect())).collect();
    irqlab_report::plot::Series::stacked(in_us, 20)
}

/// Every curve's points and its fitted hyperbola (eq. 10 fitted as in §4)
/// on one log-window plot, as the paper's Fig. 6 juxtaposes its cases;
/// under the measured curve, its max-load windows' sources stacked.
fn plot(curves: &[(String, Curve)], measured: &InterferenceCurve) -> Result<String, irqlab_report::plot::PlotError> {
    use irqlab_report::plot::{LinePlot, Series};
    let us = |w: u64| w as f64 / 1e3;
    let mut plot = LinePlot::new("Observed interference and fitted hyperbolic load bounds")
        .x_label("window Δ (us, log scale)")
        .y_label("max load")
        .log_x(true)
        .y_range(0.0..1.05);
    for layer in source_layers(&measured.sources) {
        plot = plot.series(layer);
    }
    for (name, curve) in curves {
        let points: Vec<(f64, f64)> = curve.points.iter().map(|p| (us(p.window_ns), p.max_load)).collect();
        plot = plot.series(Series::points(name.clone(), points));
        let lo = curve.points.iter().map(|p| p.window_ns).min().unwrap_or(1).max(1);
        let hi = curve.points.iter().map(|p| p.window_ns).max().unwrap_or(1).max(lo + 1);
        if let Ok(fit) = irqlab_analysis::fit::fit_hyperbola(&curve.points) {
            let line: Vec<(f64, f64)> = (0..=200)
                .map(|i| {
                    let w = (lo as f64 * (hi as f64 / lo as f64).powf(i as f64 / 200.0)).round() as u64;
                    (us(w), fit.load(w))
                })
                .collect();
            let label = format!("{name}: u = {:.4}, p = {}", fit.utilization, irqlab_analysis::format_ns(fit.period_ns));
            plot = plot.series(Series::line(label, line));
        }
    }
    plot.to_svg()
}

#[cfg(test)]
mod tests {
    use super::*;
    use probe::{GapSources, Source, SourceKind, WindowSources};

    fn window(window_ns: u64, sources: &[(&str, SourceKind, u64)]) -> WindowSources {
        let sources: Vec<Source> =
            sources.iter().map(|&(label, kind, ns)| Source { label: label.into(), kind, pid: None, policy: None, ns }).collect();
        WindowSources { window_ns, start_ns: 0, busy_ns: sources.iter().map(|s| s.ns).sum(), sources }
    }

    fn doc() -> GapSources {
        let inj = ("inject/7 FIFO 95", SourceKind::Thread);
        GapSources {
            available: true,
            note: "test".into(),
            segments: 3,
            lost_segments: 0,
            windows: vec![
                window(10_000, &[(inj.0, inj.1, 9_000), ("unseen", SourceKind::Unseen, 1_000)]),
                window(13_335, &[(inj.0, inj.1, 13_000)]),
                window(
                    1_000_000,
                    &[(inj.0, inj.1, 600_000), ("unseen", SourceKind::Unseen, 88_000), ("NET_RX", SourceKind::Softirq, 30_000)],
                ),
            ],
            totals: Vec::new(),
        }
    }

    #[test]
    fn one_summary_line_per_decade_with_the_largest_first() {
        let text = sources_summary(&doc());
        let lines: Vec<&str> = text.lines().skip(1).collect();
        assert_eq!(lines.len(), 2, "{text}");
        assert!(lines[0].trim_start().starts_with("10us: busy 10us: inject/7 FIFO 95 9us, unseen 1us"), "{text}");
        assert!(lines[1].contains("1ms: busy 718us: inject/7 FIFO 95 600us, unseen 88us, NET_RX 30us"), "{text}");
        assert!(sources_summary(&GapSources::off("sources unavailable: no BTF")).contains("no BTF"));
    }

    #[test]
    fn stacked_layers_top_out_at_the_windows_load() {
        let d = doc();
        let layers = source_layers(&d);
        // Drawn top first: unseen is the top layer, and its line is the
        // whole busy time over the window.
        assert_eq!(layers[0].name, "unseen");
        for (i, w) in d.windows.iter().enumerate() {
            let load = w.busy_ns as f64 / w.window_ns as f64;
            let top = layers.iter().map(|l| l.points[i].1).fold(0.0, f64::max);
            assert!((top - load).abs() < 1e-12, "{top} vs {load}");
        }
    }
}
