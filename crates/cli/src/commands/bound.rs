//! `irqlab bound --period P --wcet E`: the demand bounds (eqs. 4, 6, 7) and
//! load bounds (eqs. 9, 10) of one periodic task over a window range, as
//! the load-bounds paper's Figs. 1 and 2.

use crate::error::{CliError, Status};
use crate::output::{file_only, write_text};
use irqlab_analysis::demand::{hyperbolic_load, periodic_demand, periodic_load, DemandBound};
use irqlab_analysis::edf::edf_demand;
use irqlab_analysis::{format_ns, Nanos, PeriodicTask};
use irqlab_report::plot::{stacked_svg, LinePlot, Series};
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct Args {
    /// Period (minimum separation), e.g. "7ms"
    #[arg(long, value_parser = crate::flags::duration_ns)]
    pub period: u64,
    /// Worst-case execution time, e.g. "2ms"
    #[arg(long, value_parser = crate::flags::duration_ns)]
    pub wcet: u64,
    /// Relative deadline (adds the EDF demand bound column); default: none
    #[arg(long, value_parser = crate::flags::duration_ns)]
    pub deadline: Option<u64>,
    /// Shortest window shown (default: the wcet / 4)
    #[arg(long, value_parser = crate::flags::duration_ns)]
    pub from: Option<u64>,
    /// Longest window shown (default: 8 periods)
    #[arg(long, value_parser = crate::flags::duration_ns)]
    pub to: Option<u64>,
    /// Rows in the printed table (at most 10000)
    #[arg(long, default_value_t = 17, value_parser = clap::value_parser!(u64).range(..=MAX_ROWS))]
    pub rows: u64,
    /// Write both plots (demand above, load below) to this SVG file
    #[arg(long, value_name = "FILE", value_parser = file_only())]
    pub svg: Option<PathBuf>,
}

const BOUNDS: [DemandBound; 3] = [DemandBound::Traditional, DemandBound::Refined, DemandBound::Linear];

/// More rows than any terminal or file reader wants; the cap keeps a typo
/// from printing for hours.
const MAX_ROWS: u64 = 10_000;

/// The `i`-th of `n` evenly spaced windows from `from` to `to` (both
/// included), in 128 bits: `(to - from) * i` overflows 64 bits for windows
/// of years, which made the column run backwards.
fn spaced(from: Nanos, to: Nanos, i: u64, n: u64) -> Nanos {
    let step = (to - from) as u128 * i as u128 / (n - 1).max(1) as u128;
    from + step as Nanos
}

pub fn run(args: Args) -> Result<Status, CliError> {
    let (period, wcet, deadline) = (args.period, args.wcet, args.deadline);
    if period == 0 || wcet == 0 {
        return Err(CliError::Usage("--period and --wcet must be longer than 0".into()));
    }
    if wcet > period {
        return Err(CliError::Usage(format!("--wcet {} is longer than --period {}", format_ns(wcet), format_ns(period))));
    }
    let from = args.from.unwrap_or((wcet / 4).max(1)).max(1);
    let to = args.to.unwrap_or(period.saturating_mul(8));
    if to <= from {
        return Err(CliError::Usage(format!("--to ({}) must be longer than --from ({})", format_ns(to), format_ns(from))));
    }
    let u = wcet as f64 / period as f64;
    let task = deadline.map(|d| PeriodicTask { period_ns: period, wcet_ns: wcet, deadline_ns: d });

    crate::output::print(&table(period, wcet, task, u, from, to, args.rows.max(2)))?;

    if let Some(path) = &args.svg {
        let svg = plots(period, wcet, task, from, to).map_err(|e| CliError::Failed(e.to_string()))?;
        write_text(path, &svg)?;
    }
    Ok(Status::Success)
}

/// The bounds at `rows` windows from `from` to `to`, with a header.
fn table(period: Nanos, wcet: Nanos, task: Option<PeriodicTask>, u: f64, from: Nanos, to: Nanos, rows: u64) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let deadline = task.map_or(String::new(), |t| format!(", d = {}", format_ns(t.deadline_ns)));
    let _ = writeln!(out, "task p = {}, e = {}, u = {u:.4}{deadline}", format_ns(period), format_ns(wcet));
    let _ = write!(out, "  {:>10}  {:>11}  {:>11}  {:>11}", "window", "trad (eq4)", "refd (eq6)", "lin (eq7)");
    if task.is_some() {
        let _ = write!(out, "  {:>11}", "edf dbf");
    }
    let _ = writeln!(out, "  {:>10}  {:>10}  {:>10}", "load eq9", "load eq10", "trad load");
    for i in 0..rows {
        let w = spaced(from, to, i, rows);
        let _ = write!(out, "  {:>10}", format_ns(w));
        for b in BOUNDS {
            let _ = write!(out, "  {:>11}", format_ns(periodic_demand(b, period, wcet, w)));
        }
        if let Some(t) = &task {
            let _ = write!(out, "  {:>11}", format_ns(edf_demand(t, w)));
        }
        let _ = writeln!(
            out,
            "  {:>10.4}  {:>10.4}  {:>10.4}",
            periodic_load(DemandBound::Refined, period, wcet, w),
            hyperbolic_load(u, period, w),
            periodic_load(DemandBound::Traditional, period, wcet, w)
        );
    }
    let _ = writeln!(out, "  every load bound tends to u = {u:.4} as the window grows");
    out
}

/// Windows where the bounds bend or jump (j·p, j·p + e, just after j·p),
/// plus an even grid for the curved load bounds; capped for huge ranges.
fn windows(period: Nanos, wcet: Nanos, from: Nanos, to: Nanos) -> Vec<Nanos> {
    let mut w: Vec<Nanos> = (0..=800u64).map(|i| spaced(from, to, i, 801)).collect();
    let periods = to / period;
    if periods <= 2_000 {
        for j in from / period..=periods {
            let start = j * period;
            for x in [start, start.saturating_add(1), start.saturating_add(wcet)] {
                if (from..=to).contains(&x) {
                    w.push(x);
                }
            }
        }
    }
    w.sort_unstable();
    w.dedup();
    w
}

fn plots(period: Nanos, wcet: Nanos, task: Option<PeriodicTask>, from: Nanos, to: Nanos) -> Result<String, irqlab_report::plot::PlotError> {
    // Axis unit: the largest unit in which the period is at least 1.
    let (scale, unit) = match period {
        p if p >= 1_000_000_000 => (1e9, "s"),
        p if p >= 1_000_000 => (1e6, "ms"),
        p if p >= 1_000 => (1e3, "us"),
        _ => (1.0, "ns"),
    };
    let x = |w: Nanos| w as f64 / scale;
    let ws = windows(period, wcet, from, to);
    let u = wcet as f64 / period as f64;
    let mut demand = LinePlot::new(format!("Demand bounds, p = {}, e = {} (load-bounds paper Fig. 1)", format_ns(period), format_ns(wcet)))
        .x_label(format!("window Δ ({unit})"))
        .y_label(format!("demand ({unit})"));
    let names = ["traditional (eq. 4)", "refined (eq. 6)", "linear (eq. 7)"];
    for (b, name) in BOUNDS.iter().zip(names) {
        let pts = ws
            .iter()
            .map(|&w| {
                let demand = match b {
                    // Plot eq. 7 exactly; the analysis rounds it up to whole ns.
                    DemandBound::Linear => (w as f64).min(u * (w as f64 + (period - wcet) as f64)),
                    _ => periodic_demand(*b, period, wcet, w) as f64,
                };
                (x(w), demand / scale)
            })
            .collect();
        demand = demand.series(Series::line(name, pts));
    }
    if let Some(t) = &task {
        let pts = ws.iter().map(|&w| (x(w), edf_demand(t, w) as f64 / scale)).collect();
        demand = demand.series(Series::line("EDF dbf (deadline)", pts));
    }
    let load_of = |b: DemandBound| -> Vec<(f64, f64)> { ws.iter().map(|&w| (x(w), periodic_load(b, period, wcet, w).min(1.5))).collect() };
    let load = LinePlot::new("Load bounds (load-bounds paper Fig. 2)")
        .x_label(format!("window Δ ({unit})"))
        .y_label("load")
        .y_range(0.0..1.2)
        .series(Series::line("traditional load", load_of(DemandBound::Traditional)))
        .series(Series::line("refined load (eq. 9)", load_of(DemandBound::Refined)))
        .series(Series::line("hyperbolic (eq. 10)", ws.iter().map(|&w| (x(w), hyperbolic_load(u, period, w))).collect()))
        .series(Series::line(format!("u = {u:.3}"), vec![(x(from), u), (x(to), u)]));
    stacked_svg(&[demand, load])
}
