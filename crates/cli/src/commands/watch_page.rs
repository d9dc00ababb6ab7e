//! `irqlab watch --html FILE`: the run on one page: each CPU's latency
//! histogram with log-scale bins and a log count (OSADL's latency plot:
//! samples against latency), the figures per CPU as cyclictest prints
//! them, and the worst spikes with the cause the flight recorder named.

use crate::error::CliError;
use irqlab_measure::watch::{SpikeRecord, WatchReport};
use irqlab_report::html::{Page, Section, Table, Tone};
use irqlab_report::plot::{LinePlot, Series};

/// The page of a watch run (its final document, or a partial one).
pub fn render(r: &WatchReport) -> Result<String, CliError> {
    let mut page = Page::new("irqlab watch: timer latency").intro(intro(r));
    page = page.section(figures(r)).section(histograms(r)?);
    if r.threshold_ns.is_some() {
        page = page.section(spikes(r));
    }
    page.render().map_err(|e| CliError::Failed(format!("the watch page: {e:?}")))
}

fn us(ns: u64) -> String {
    irqlab_analysis::format_ns(ns)
}

fn intro(r: &WatchReport) -> String {
    let cpus: Vec<String> = r.cpus.iter().map(|c| c.cpu.to_string()).collect();
    let threshold = r.threshold_ns.map_or("no threshold".to_string(), |t| format!("threshold {}", us(t)));
    let policy = if r.priority == 0 { "SCHED_OTHER".to_string() } else { format!("SCHED_FIFO {}", r.priority) };
    let ended = match (&r.ended_by, r.complete) {
        (Some(by), true) => format!("ended by {by}"),
        (_, false) => "incomplete: stopped early, or the recorder lost segments".to_string(),
        (None, true) => String::new(),
    };
    format!(
        "Timer latency on CPU {} ({policy}, woken every {}), {} watched, {threshold}; {ended}. A wake-up's latency is how late \
         its thread read the clock after the timer was due (cyclictest's method).",
        cpus.join(", "),
        us(r.interval_ns),
        us(r.elapsed_ns),
    )
}

/// cyclictest's columns, one row per CPU.
fn figures(r: &WatchReport) -> Section {
    let mut table = Table::new(["CPU", "wake-ups", "min", "mean", "p99", "p99.9", "max", "spikes"]);
    let cell = |ns: Option<u64>| ns.map_or("-".to_string(), us);
    for c in &r.cpus {
        table.push_row([
            c.cpu.to_string(),
            c.cycles.to_string(),
            cell(c.min_ns),
            cell(c.mean_ns.map(|m| m.round() as u64)),
            cell(c.p99_ns),
            cell(c.p999_ns),
            cell(c.max_ns),
            if r.threshold_ns.is_some() { c.spikes.to_string() } else { "-".to_string() },
        ]);
    }
    Section::new("Latency per CPU").table(table)
}

/// One histogram per CPU: each bin's count at its upper bound, drawn as
/// steps on log axes; an empty bin sits on the axis.
fn histograms(r: &WatchReport) -> Result<Section, CliError> {
    let mut section = Section::new("Histograms (log-scale bins, log count)");
    for c in &r.cpus {
        let h = &c.histogram;
        if h.total() == 0 {
            section = section.paragraph(format!("CPU {}: no wake-up recorded.", c.cpu));
            continue;
        }
        // Each bin drawn over its own span, (upper / 10^(1/bins a decade), upper]:
        // a step starts at its lower bound, and the last one closes at its upper.
        let width = 10f64.powf(1.0 / f64::from(h.bins_per_decade.max(1)));
        let mut points: Vec<(f64, f64)> = h.le_ns.iter().zip(&h.counts).map(|(&le, &n)| (le as f64 / 1e3 / width, n as f64)).collect();
        if let (Some(&le), Some(&n)) = (h.le_ns.last(), h.counts.last()) {
            points.push((le as f64 / 1e3, n as f64));
        }
        let plot = LinePlot::new(format!("CPU {}: {} wake-ups", c.cpu, h.total()))
            .x_label("latency (µs)")
            .y_label("wake-ups")
            .log_x(true)
            .log_y(true)
            .series(Series::steps(format!("CPU {}", c.cpu), points))
            .size(720, 360);
        let svg = plot.to_svg().map_err(|e| CliError::Failed(format!("the watch page's plot: {e:?}")))?;
        section = section.figure(
            svg,
            format!(
                "CPU {}: {} bins a decade from 1 µs; the last bin holds the maximum ({}).",
                c.cpu,
                h.bins_per_decade,
                c.max_ns.map_or("-".into(), us)
            ),
        );
    }
    Ok(section)
}

/// The kept spikes, worst first, each with its cause.
fn spikes(r: &WatchReport) -> Section {
    let threshold = r.threshold_ns.map_or(String::new(), us);
    let mut section = Section::new("The worst spikes and their causes");
    if r.spikes.is_empty() {
        return section.callout(Tone::Ok, format!("No wake-up was {threshold} late or more."));
    }
    let mut worst: Vec<&SpikeRecord> = r.spikes.iter().collect();
    worst.sort_by_key(|s| std::cmp::Reverse(s.latency_ns));
    let start = r.spikes.iter().map(|s| s.due_ns).min().unwrap_or(0);
    let mut table = Table::new(["CPU", "at (s, from the first kept)", "late by", "cause", "what ran (largest first)"]).text_columns([3, 4]);
    for s in worst {
        let (verdict, ran) = match &s.cause {
            Some(c) => {
                (c.verdict.clone(), c.sources.iter().take(4).map(|x| format!("{} {}", x.label, us(x.ns))).collect::<Vec<_>>().join(", "))
            }
            None => ("not explained: no flight recorder".to_string(), "-".to_string()),
        };
        table.push_row([s.cpu.to_string(), format!("{:.3}", (s.due_ns - start) as f64 / 1e9), us(s.latency_ns), verdict, ran]);
    }
    let counted = format!(
        "{} wake-ups were {threshold} late or more; the worst {} are kept (--keep), with the flight recorder's window up to each.",
        r.spikes_total,
        r.spikes.len()
    );
    section = section.paragraph(counted).table(table);
    if !r.recorder.available || r.recorder.lost_segments > 0 {
        section = section.callout(Tone::Warn, format!("Flight recorder: {}", r.recorder.note));
    }
    section
}
