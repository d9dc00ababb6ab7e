//! `irqlab fit CURVE [--baseline CURVE]`: the load-bounds paper's hyperbola
//! (eq. 10, fitted as in §4) for a measured interference curve.

use crate::error::{CliError, Status};
use crate::output::{file_only, json_or_summary, read_text, write_text};
use irqlab_analysis::fit::{staircase, BaselineUse, FitDocument, HyperbolaFit};
use irqlab_analysis::{format_ns, Curve, InputError, Location};
use irqlab_report::plot::{LinePlot, Series};
use std::path::{Path, PathBuf};

#[derive(clap::Args)]
pub struct Args {
    /// Curve file: JSON (schema irqlab/curve/v1) or CSV `window_ns,max_load`
    pub curve: PathBuf,
    /// Idle-system curve to subtract first (same formats)
    #[arg(long, value_name = "CURVE")]
    pub baseline: Option<PathBuf>,
    /// Write {"schema": "irqlab/fit/v1", "utilization", "period_ns", ...}
    /// ("-": to stdout, instead of the summary)
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Plot the data, the staircase and the hyperbola (log window axis)
    #[arg(long, value_name = "FILE", value_parser = file_only())]
    pub svg: Option<PathBuf>,
}

fn read_curve(path: &Path) -> Result<Curve, CliError> {
    let text = read_text(path)?;
    warn_if_throttled(path, &text);
    Ok(Curve::parse(&path.display().to_string(), &text)?)
}

/// A probe curve measured with RT throttling active says so
/// (`rt_throttling.limited`, and the windows throttling alone could
/// explain): the fit would take the throttle for interference, so say it.
fn warn_if_throttled(path: &Path, text: &str) {
    let Ok(doc) = serde_json::from_str::<serde_json::Value>(text) else { return };
    let t = &doc["rt_throttling"];
    if t["limited"] != true {
        return;
    }
    let windows: Vec<String> =
        t["throttled_windows_ns"].as_array().map(|w| w.iter().filter_map(|v| v.as_u64()).map(format_ns).collect()).unwrap_or_default();
    eprintln!(
        "warning: {} was measured with RT throttling active ({} ms per period): {}; the fit counts them as interference (measure again without --keep-rt-limit)",
        path.display(),
        t["throttled_ns_per_period"].as_u64().unwrap_or(0) / 1_000_000,
        if windows.is_empty() {
            "long gaps may be the throttle".to_string()
        } else {
            format!("throttling alone could explain the windows {}", windows.join(", "))
        }
    );
}

pub fn run(args: Args) -> Result<Status, CliError> {
    crate::output::refuse_clashes(
        &[("CURVE", Some(&args.curve)), ("--baseline", args.baseline.as_deref())],
        &[("--json", args.json.as_deref()), ("--svg", args.svg.as_deref())],
    )?;
    let measured = read_curve(&args.curve)?;
    let baseline = args.baseline.as_deref().map(read_curve).transpose()?;
    let names = (args.curve.display().to_string(), args.baseline.as_ref().map(|b| b.display().to_string()));
    let (doc, curve) = FitDocument::fit(&measured, baseline.as_ref(), (&names.0, names.1.as_deref()))
        .map_err(|e| CliError::Input(InputError::at(e.to_string(), Location::file_only(&names.0))))?;
    let fit = doc.hyperbola();
    if let (Some(used), Some(base)) = (&doc.baseline_use, &names.1) {
        warn_about_baseline(base, used);
    }
    json_or_summary(args.json.as_deref(), &doc, summary)?;
    if let Some(path) = &args.svg {
        let svg = plot(&args.curve, &measured, baseline.as_ref(), &curve, &fit).map_err(|e| CliError::Failed(e.to_string()))?;
        write_text(path, &svg)?;
    }
    Ok(Status::Success)
}

/// A baseline that could not be subtracted, or that is itself high at
/// some windows, is said on stderr: the fit is sound either way (it only
/// subtracts what the baseline justifies), but it is not what the user
/// asked for.
pub(crate) fn warn_about_baseline(name: &str, used: &BaselineUse) {
    if used.subtracted == "nothing" {
        eprintln!(
            "warning: {name} has no per-window minima (a CSV curve or a document from an older irqlab), so nothing was subtracted: \
             a baseline's maxima cannot be subtracted soundly; measure it again with `irqlab measure interference`"
        );
    }
    if let (Some(first), Some(last)) = (used.baseline_high_windows_ns.first(), used.baseline_high_windows_ns.last()) {
        eprintln!(
            "warning: {name} alone reaches 50% or more of the windows {}..{} (host stalls or RT throttling on the idle machine): \
             the measured curve cannot tell the driver from them there",
            format_ns(*first),
            format_ns(*last)
        );
    }
}

fn summary(d: &FitDocument) -> String {
    format!(
        "{}: {} points{}\n\
         utilization u = {:.6}\n\
         period      p = {} ({} ns); e = u·p = {}\n\
         as a task:  kind = \"hyperbolic\", utilization = {:.6}, period = \"{}\"\n",
        d.curve,
        d.points,
        match &d.baseline_use {
            Some(u) if u.subtracted == "floor" => ", minus the baseline's least load per window",
            Some(_) => ", baseline given but nothing subtracted (it has no per-window minima)",
            None => "",
        },
        d.utilization,
        format_ns(d.period_ns),
        d.period_ns,
        format_ns(d.wcet_ns),
        d.utilization,
        format_ns(d.period_ns)
    )
}

fn plot(
    name: &Path,
    measured: &Curve,
    baseline: Option<&Curve>,
    curve: &Curve,
    fit: &HyperbolaFit,
) -> Result<String, irqlab_report::plot::PlotError> {
    let us = |w: u64| w as f64 / 1e3;
    let points = |c: &Curve| c.points.iter().map(|p| (us(p.window_ns), p.max_load)).collect::<Vec<_>>();
    let lo = curve.points.iter().map(|p| p.window_ns).min().unwrap_or(1).max(1);
    let hi = curve.points.iter().map(|p| p.window_ns).max().unwrap_or(1).max(lo + 1);
    // Log-spaced samples of the hyperbola over the data's range.
    let samples: Vec<(f64, f64)> = (0..=300)
        .map(|i| {
            let w = (lo as f64 * (hi as f64 / lo as f64).powf(i as f64 / 300.0)).round() as u64;
            (us(w), fit.load(w))
        })
        .collect();
    let stairs: Vec<(f64, f64)> = staircase(&curve.points).iter().map(|p| (us(p.window_ns), p.max_load)).collect();
    let mut plot = LinePlot::new(format!(
        "{}: u = {:.4}, p = {} (eq. 10 fitted as in §4)",
        name.file_name().map_or_else(|| name.display().to_string(), |n| n.to_string_lossy().into_owned()),
        fit.utilization,
        format_ns(fit.period_ns)
    ))
    .x_label("window Δ (us, log scale)")
    .y_label("max load")
    .log_x(true)
    .y_range(0.0..1.05);
    if let Some(b) = baseline {
        plot = plot.series(Series::points("measured (before subtraction)", points(measured)));
        plot = plot.series(Series::points("baseline", points(b)));
    }
    plot = plot
        .series(Series::points(if baseline.is_some() { "driver = measured - baseline" } else { "measured" }, points(curve)))
        .series(Series::line("staircase", stairs))
        .series(Series::line("fitted hyperbola", samples));
    plot.to_svg()
}
