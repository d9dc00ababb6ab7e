//! `irqlab idletime-model --resource disk|udp|TABLE.csv --p 0..200ms --i 1..100%`:
//! the idletime dissertation's throughput model (§4.4; `docs/papers.md` §4), the
//! predicted normalised foreground and background throughput over a grid of
//! preemption intervals p and foreground intensities i, as a table, an SVG
//! pair of shaded grids (as Fig. 4.17) and JSON.

use crate::error::{CliError, Status};
use crate::output::{file_only, json_or_summary, read_text, write_text};
use irqlab_analysis::idletime::{predict_grid, BaselineTable, ModelParams, Prediction, Resource, ServiceTime, T_MAX_NS};
use irqlab_analysis::{format_ns, Nanos};
use irqlab_report::contour::{side_by_side_svg, HeatMap};
use serde::Serialize;
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct Args {
    /// disk (random reads, Fig. 6.3 table, 19 ms service), udp (GigE UDP,
    /// Fig. 6.7 table, 0.05 ms service) or a CSV file of
    /// `intensity_pct,throughput` rows (`# unit: X` comment optional)
    #[arg(long)]
    pub resource: String,
    /// Preemption interval range, e.g. "0..200ms" (default: 0..200ms for
    /// disk, 0..5ms for udp, 0..2*t_max otherwise)
    #[arg(long, value_name = "RANGE", value_parser = duration_range)]
    pub p: Option<(Nanos, Nanos)>,
    /// Number of p values in the grid
    #[arg(long, default_value_t = 11, value_parser = clap::value_parser!(u64).range(1..=1000))]
    pub p_steps: u64,
    /// Foreground intensity range in percent, e.g. "1..100%"
    #[arg(long, default_value = "1..100%", value_name = "RANGE", value_parser = percent_range)]
    pub i: (f64, f64),
    /// Number of intensity values in the grid
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=1000))]
    pub i_steps: u64,
    /// Service time of one request (the preemption cost); default: the
    /// dissertation's measured value for disk/udp, 1/r_max for a CSV table
    /// (then its throughput must count requests per second)
    #[arg(long, value_name = "D", value_parser = crate::flags::duration_ns)]
    pub service: Option<Nanos>,
    /// α: foreground efficiency while background work is present (0..1)
    #[arg(long, default_value_t = 1.0, value_parser = fraction)]
    pub alpha: f64,
    /// t_max: the foreground quantum / longest inter-arrival time
    #[arg(long, default_value = "100ms", value_name = "D", value_parser = crate::flags::positive_duration_ns)]
    pub t_max: Nanos,
    /// Write the foreground and background grids as shaded SVG plots
    #[arg(long, value_name = "FILE", value_parser = file_only())]
    pub svg: Option<PathBuf>,
    /// Write the grid as JSON (schema irqlab/idletime-model/v1) ("-": to
    /// stdout, instead of the summary)
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
}

#[derive(Serialize)]
struct ModelDoc<'a> {
    schema: &'static str,
    table: &'a BaselineTable,
    service_ns: f64,
    t_max_ns: Nanos,
    alpha: f64,
    intervals_ns: Vec<Nanos>,
    intensities: Vec<f64>,
    /// [p][i], normalised as in §4.4.1.
    foreground_norm: Vec<Vec<f64>>,
    background_norm: Vec<Vec<f64>>,
}

/// Value parser of "A..B" with a unit on B that A may omit ("0..200ms",
/// "1ms..5ms").
fn duration_range(text: &str) -> Result<(Nanos, Nanos), String> {
    let bad = || "not a range like \"0..200ms\"".to_string();
    let (a, b) = text.split_once("..").ok_or_else(bad)?;
    let hi = crate::flags::duration_ns(b)?;
    let a = a.trim();
    let lo = if !a.is_empty() && a.chars().all(|c| c.is_ascii_digit() || c == '.') && a != "0" {
        let unit: String = b.trim().chars().skip_while(|c| c.is_ascii_digit() || *c == '.').collect();
        crate::flags::duration_ns(&format!("{a}{unit}"))?
    } else {
        crate::flags::duration_ns(a)?
    };
    if hi < lo {
        return Err(bad());
    }
    Ok((lo, hi))
}

/// Value parser of a percentage range: "1..100%" → (0.01, 1.0).
fn percent_range(text: &str) -> Result<(f64, f64), String> {
    let bad = || "not a range of percentages like \"1..100%\"".to_string();
    let t = text.trim().trim_end_matches('%');
    let (a, b) = t.split_once("..").ok_or_else(bad)?;
    let a: f64 = a.trim().trim_end_matches('%').parse().map_err(|_| bad())?;
    let b: f64 = b.trim().parse().map_err(|_| bad())?;
    if !(a > 0.0 && a <= b && b <= 100.0) {
        return Err("need 0 < from <= to <= 100".into());
    }
    Ok((a / 100.0, b / 100.0))
}

/// Value parser of a fraction in 0..=1.
fn fraction(text: &str) -> Result<f64, String> {
    text.trim().parse::<f64>().ok().filter(|a| (0.0..=1.0).contains(a)).ok_or_else(|| "expected a number in 0..1".into())
}

fn steps(lo: f64, hi: f64, n: usize) -> Vec<f64> {
    if n <= 1 || hi <= lo {
        return vec![lo];
    }
    (0..n).map(|k| lo + (hi - lo) * k as f64 / (n - 1) as f64).collect()
}

pub fn run(args: Args) -> Result<Status, CliError> {
    let table_file = Some(std::path::Path::new(&args.resource)).filter(|_| !matches!(args.resource.as_str(), "disk" | "udp"));
    crate::output::refuse_clashes(&[("--resource", table_file)], &[("--svg", args.svg.as_deref()), ("--json", args.json.as_deref())])?;
    let (table, mut params, default_p_hi) = match args.resource.as_str() {
        "disk" => (Resource::Disk.table(), Resource::Disk.params(), Some(200_000_000)),
        "udp" => (Resource::Udp.table(), Resource::Udp.params(), Some(5_000_000)),
        path => {
            let text = read_text(path.as_ref())?;
            let table = BaselineTable::parse_csv(path, path, &text)?;
            let params = ModelParams { service: ServiceTime::InverseRmax, t_max_ns: T_MAX_NS, alpha: 1.0 };
            (table, params, None)
        }
    };
    if let Some(ns) = args.service {
        params.service = ServiceTime::Fixed(ns);
    }
    params.alpha = args.alpha;
    params.t_max_ns = args.t_max;
    let (p_lo, p_hi) = args.p.unwrap_or((0, default_p_hi.unwrap_or(params.t_max_ns * 2)));
    let (i_lo, i_hi) = args.i;
    let intervals: Vec<Nanos> = steps(p_lo as f64, p_hi as f64, args.p_steps as usize).into_iter().map(|p| p.round() as Nanos).collect();
    let intensities = steps(i_lo, i_hi, args.i_steps as usize);
    let service_ns = params.service_ns(&table);
    // Below 1 ns the grid of whole-ns intervals cannot resolve the service
    // time and every cell comes out as nonsense.
    if matches!(params.service, ServiceTime::InverseRmax) && service_ns < 1.0 {
        return Err(CliError::Usage(format!(
            "--resource {}: r_max {:e} per second makes the service time 1/r_max {service_ns:e} ns, below 1 ns; give --service",
            args.resource,
            table.r_max()
        )));
    }

    let grid = predict_grid(&table, &params, &intervals, &intensities);
    let matrix = |cell: fn(&Prediction) -> f64| -> Vec<Vec<f64>> { grid.iter().map(|row| row.iter().map(cell).collect()).collect() };
    let (fg, bg) = (matrix(|c| c.foreground_norm), matrix(|c| c.background_norm));

    if let Some(path) = &args.svg {
        let x: Vec<String> = intensities.iter().map(|i| format!("{:.0}%", i * 100.0)).collect();
        let y: Vec<String> = intervals.iter().map(|&p| format_ns(p)).collect();
        // The service time as a row position, for the dashed landmark line.
        let marker = intervals.windows(2).enumerate().find_map(|(k, w)| {
            let (a, b) = (w[0] as f64, w[1] as f64);
            (service_ns >= a && service_ns <= b && b > a).then(|| k as f64 + (service_ns - a) / (b - a))
        });
        let mk = |title: &str, v: &Vec<Vec<f64>>| {
            let m = HeatMap::new(title, x.clone(), y.clone(), v.clone()).labels("foreground intensity", "preemption interval p");
            match marker {
                Some(pos) => m.marker(pos, "service time"),
                None => m,
            }
        };
        let svg = side_by_side_svg(&[
            mk("predicted foreground throughput (% of r(i))", &fg),
            mk("predicted background throughput (% of r_max)", &bg),
        ])
        .map_err(|e| CliError::Failed(e.to_string()))?;
        write_text(path, &svg)?;
    }
    let doc = ModelDoc {
        schema: "irqlab/idletime-model/v1",
        table: &table,
        service_ns,
        t_max_ns: params.t_max_ns,
        alpha: params.alpha,
        intervals_ns: intervals,
        intensities,
        foreground_norm: fg,
        background_norm: bg,
    };
    json_or_summary(args.json.as_deref(), &doc, summary)?;
    Ok(Status::Success)
}

/// The model's inputs, then the grid: rows p, columns i, "fg/bg" in %.
fn summary(d: &ModelDoc) -> String {
    let t = d.table;
    let mut out = format!(
        "idletime model: {} (r_max {} {}), service {}, t_max {}, alpha {}\n",
        t.name,
        t.r_max(),
        t.unit,
        format_ns(d.service_ns.round() as Nanos),
        format_ns(d.t_max_ns),
        d.alpha
    );
    out.push_str("normalised foreground / background throughput in % (rows p, columns i)\n");
    out.push_str(&format!("{:>10}", "p \\ i"));
    for i in &d.intensities {
        out.push_str(&format!(" {:>9}", format!("{:.0}%", i * 100.0)));
    }
    out.push('\n');
    for (pi, &p) in d.intervals_ns.iter().enumerate() {
        out.push_str(&format!("{:>10}", format_ns(p)));
        for k in 0..d.intensities.len() {
            out.push_str(&format!(" {:>9}", format!("{:.0}/{:.0}", d.foreground_norm[pi][k] * 100.0, d.background_norm[pi][k] * 100.0)));
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_parse() {
        assert_eq!(duration_range("0..200ms").unwrap(), (0, 200_000_000));
        assert_eq!(duration_range("1..5ms").unwrap(), (1_000_000, 5_000_000));
        assert_eq!(duration_range("1us..2ms").unwrap(), (1_000, 2_000_000));
        assert!(duration_range("5ms..1ms").is_err());
        assert!(duration_range("200ms").is_err());
        assert_eq!(percent_range("1..100%").unwrap(), (0.01, 1.0));
        assert!(percent_range("0..100%").is_err());
        assert!(percent_range("1..120").is_err());
    }
}
