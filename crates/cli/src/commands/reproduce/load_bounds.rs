//! `irqlab reproduce load-bounds`: wiring of
//! `irqlab_experiments::load_bounds` to the terminal, JSON and an HTML
//! page with the plots of Figs. 4-10.

use super::{threads, with_progress, Args};
use crate::error::{CliError, Status};
use crate::signal::stop_flag;
use irqlab_analysis::fit::HyperbolaFit;
use irqlab_analysis::Nanos;
use irqlab_experiments::load_bounds::live;
use irqlab_experiments::load_bounds::{
    plot_points, reproduce, tau1_load, tau2_interference, tau2_load, Configuration, Details, Options, Probe,
};
use irqlab_experiments::Report;
use irqlab_report::html::{Page, Section, Table};
use irqlab_report::plot::{LinePlot, Series};

pub fn run(args: &Args) -> Result<Status, CliError> {
    if args.live {
        return run_live(args);
    }
    let opts = Options { quick: args.quick, seed: args.seed, threads: threads(args) };
    let stop = stop_flag();
    let report = with_progress("load-bounds", |progress| reproduce(&opts, &stop, progress)).map_err(|e| CliError::Failed(e.to_string()))?;
    let details = details_text(&report.details);
    super::finish(args, &report, details, "Load-bounds", "docs/papers.md §3; the paper's §4-5, Figs. 4-10", html)
}

fn ms(ns: Nanos) -> f64 {
    ns as f64 / 1e6
}

fn fit_text(f: &Option<HyperbolaFit>) -> String {
    f.map_or("-".into(), |f| format!("u = {:.1}%, p = {:.0} us", f.utilization * 100.0, f.period_ns as f64 / 1e3))
}

fn details_text(d: &Details) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let _ = writeln!(out, "== Interference curves (Figs. 4-6), probe runs of {} s", d.probe_duration_ns as f64 / 1e9);
    for c in &d.curves {
        let _ = writeln!(
            out,
            "{:<30} fit {:<28} driver only {:<28} covers: {}",
            c.name,
            fit_text(&c.fit),
            fit_text(&c.driver_fit),
            if c.fits_cover { "yes" } else { "NO" }
        );
    }
    let _ = writeln!(out, "\n== Configurations (Table 1; Figs. 7-8), {} s per point", d.sweep_duration_ns as f64 / 1e9);
    for c in &d.configs {
        let _ = writeln!(
            out,
            "\n{}: driver as tau2 sees it: {}; analysis: no miss up to e2 = {:.2} ms",
            c.name,
            fit_text(&c.driver_fit),
            ms(c.predicted_max_e2_ns)
        );
        let _ = writeln!(out, "{:>8} {:>14} {:>20}", "e2 (ms)", "tau2 missed %", "heartbeats missed");
        for p in &c.points {
            let mark = if p.e2_ns <= c.predicted_max_e2_ns { "  (predicted safe)" } else { "" };
            let _ = writeln!(
                out,
                "{:>8.2} {:>14.1} {:>13} of {:>4}{}",
                ms(p.e2_ns),
                p.tau2_miss_pct,
                p.heartbeats_missed,
                p.heartbeats_missed + p.heartbeats_received,
                mark
            );
        }
    }
    out
}

fn plot_err(e: impl std::fmt::Display) -> CliError {
    CliError::Failed(e.to_string())
}

/// Log-spaced windows (us) from 10 us to 100 ms for the analytic curves.
fn windows_us() -> Vec<f64> {
    (0..=60).map(|k| 10f64 * 10f64.powf(k as f64 / 15.0)).collect()
}

fn curve_plot(title: &str, d: &Details, names: &[Probe], driver_only: bool) -> Result<String, CliError> {
    let mut plot = LinePlot::new(title).x_label("window (us)").y_label("max load (%)").log_x(true).y_range(0.0..100.0);
    for c in d.curves.iter().filter(|c| names.contains(&c.name)) {
        let (curve, fit) = if driver_only { (c.driver_only.as_ref(), c.driver_fit) } else { (Some(&c.curve), c.fit) };
        if let Some(curve) = curve {
            plot = plot.series(Series::points(c.name.to_string(), plot_points(curve)));
        }
        if let Some(f) = fit {
            let pts = windows_us().into_iter().map(|w| (w, f.load((w * 1e3) as Nanos) * 100.0)).collect();
            plot = plot.series(Series::line(format!("{} fit", c.name), pts));
        }
    }
    plot.to_svg().map_err(plot_err)
}

fn html(report: &Report<Details>) -> Result<String, CliError> {
    let d = &report.details;
    let verdict = super::verdict_sentence(report);
    let rows = super::html_table(&report.rows);
    let mut page = Page::new("irqlab reproduce load-bounds")
        .intro(format!(
            "Driver threads under servers and empirical load bounds (the load-bounds paper, §4-5) in simulation: {} mode, seed {}. {verdict}",
            if report.quick { "quick" } else { "full" },
            report.seed
        ))
        .section(Section::new("Relations").table(rows));

    let mut figs = Section::new("Interference curves (Figs. 4-6)").paragraph(
        "Maximum fraction of a window taken from the probe (a real-time task just below the network threads), per window length, \
         with the fitted hyperbolic load bound (eq. 10). Fig. 6 shows the driver alone: the curve minus its kernel's idle baseline.",
    );
    figs = figs
        .svg(curve_plot("Fig. 4: no network traffic", d, &[Probe::VanillaIdle, Probe::ThreadedIdle], false)?)
        .svg(curve_plot("Fig. 5: ping every 10 us, with replies", d, &[Probe::VanillaPing, Probe::ThreadedPing], false)?)
        .svg(curve_plot(
            "Fig. 6: driver alone (idle subtracted), with and without replies",
            d,
            &[Probe::VanillaPing, Probe::ThreadedPing, Probe::VanillaPingNoReply, Probe::ThreadedPingNoReply],
            true,
        )?);
    let mut fits = Table::new(["case", "fit", "driver-only fit", "fit covers every point"]);
    for c in &d.curves {
        fits.push_row([c.name.to_string(), fit_text(&c.fit), fit_text(&c.driver_fit), if c.fits_cover { "yes" } else { "NO" }.to_string()]);
    }
    page = page.section(figs.table(fits));

    let mut miss = LinePlot::new("Fig. 7: tau2's deadlines missed").x_label("e2 (ms)").y_label("% deadlines missed").y_range(0.0..100.0);
    let mut hb = LinePlot::new("Fig. 8: heartbeats missed by tau1").x_label("e2 (ms)").y_label("% heartbeats missed").y_range(0.0..100.0);
    let mut table = Table::new([
        "configuration",
        "driver fit (as tau2 sees it)",
        "analysis: no miss up to e2",
        "simulated: no miss up to e2",
        "heartbeats missed",
    ]);
    for c in &d.configs {
        miss = miss.series(Series::line(c.name.to_string(), c.points.iter().map(|p| (ms(p.e2_ns), p.tau2_miss_pct)).collect()));
        hb = hb.series(Series::line(c.name.to_string(), c.points.iter().map(|p| (ms(p.e2_ns), p.heartbeat_miss_pct)).collect()));
        table.push_row([
            c.name.to_string(),
            fit_text(&c.driver_fit),
            format!("{:.2} ms", ms(c.predicted_max_e2_ns)),
            c.meets_up_to_e2_ns.map_or("none".into(), |e| format!("{:.2} ms", ms(e))),
            c.heartbeats_missed_total.to_string(),
        ]);
    }
    page = page.section(
        Section::new("Configurations (Table 1, Figs. 7-8)")
            .paragraph(format!(
                "tau1 2 ms / 10 ms polls for the heartbeat; tau2 10 ms with e2 swept; a heartbeat every 10 ms and a ping every 10 us. \
                 An ideal sporadic server lets tau2 meet every deadline up to e2 = {:.0} ms.",
                ms(d.ideal_sporadic_e2_ns)
            ))
            .svg(miss.to_svg().map_err(plot_err)?)
            .svg(hb.to_svg().map_err(plot_err)?)
            .table(table),
    );

    // Fig. 9: τ1 + τ2 load bounds for three e2; Fig. 10: τ1, τD
    // (Foreground fit) and their sum.
    let ws = windows_us();
    let at = |w: f64| (w * 1e3) as Nanos;
    let mut f9 =
        LinePlot::new("Fig. 9: load bound of tau1 + tau2").x_label("window (us)").y_label("load (%)").log_x(true).y_range(0.0..150.0);
    for e2 in [1_000_000, 5_000_000, 7_000_000] {
        let pts = ws.iter().map(|&w| (w, (tau1_load(at(w)) + tau2_load(e2, at(w))) * 100.0)).collect();
        f9 = f9.series(Series::line(format!("e2 = {} ms", e2 / 1_000_000), pts));
    }
    let mut section = Section::new("Analysis (Figs. 9-10)").svg(f9.to_svg().map_err(plot_err)?);
    if let Some(fg) = d.configs.iter().find(|c| c.name == Configuration::Foreground) {
        if let Some(f) = fg.driver_fit {
            let mut f10 = LinePlot::new("Fig. 10: tau1, tauD (Foreground, fitted) and their sum")
                .x_label("window (us)")
                .y_label("load (%)")
                .log_x(true)
                .y_range(0.0..150.0);
            f10 = f10
                .series(Series::line("tau1", ws.iter().map(|&w| (w, tau1_load(at(w)) * 100.0)).collect()))
                .series(Series::line("tauD fit", ws.iter().map(|&w| (w, f.load(at(w)) * 100.0)).collect()))
                .series(Series::line(
                    "tau1 + tauD",
                    ws.iter().map(|&w| (w, tau2_interference(&f, at(w)) as f64 / at(w).max(1) as f64 * 100.0)).collect(),
                ))
                .series(Series::points("tauD measured", plot_points(&fg.driver_curve)));
            section = section
                .svg(f10.to_svg().map_err(plot_err)?)
                .paragraph(format!(
                    "Where tau1 + tauD stays below 100% - e2/10 ms at the deadline, tau2 meets every deadline: the analysis predicts no miss up to e2 = {:.2} ms (the paper: about 1.2 ms).",
                    ms(fg.predicted_max_e2_ns)
                ));
        }
    }
    page = page.section(section);
    page.render().map_err(|e| CliError::Failed(e.to_string()))
}

/// `--live`: the simulated reproduction for its column, the probes, then
/// every configuration's e2 sweep on this machine's testbed.
fn run_live(args: &Args) -> Result<Status, CliError> {
    let config = live::Config { quick: args.quick, cpu: args.cpu, seed: args.seed, hrtick_dl: args.hrtick_dl };
    let stop = stop_flag();
    let n = config.e2_values().len();
    eprintln!(
        "the probe (idle, then under the flood in 3 layouts, {} runs of 1 s each), {} sweeps of {} live configurations x {n} values \
         of e2 on the testbed, then the simulation with the costs measured (about {} min)...",
        config.probe_runs(),
        config.repeats(),
        live::Setup::ALL.len(),
        if args.quick { 3 } else { 29 }
    );
    let report = live::reproduce(&config, &stop, |stage| eprintln!("live: {stage}"), |p| eprintln!("  {}", point_line(p)))?;
    let d = &report.details;
    let mut details = format!(
        "live on CPU {} (host b's senders on CPU {}): UDP flood of {}-byte datagrams every {} us and a heartbeat every 10 ms from host b; \
         {} s per point, {} sweeps per configuration in rounds; work loop {:.0} iterations/us; the machine's own tau2 miss rate (no \
         flood, 95% bound) {:.2}%\n",
        d.cpu,
        d.sender_cpu,
        d.flood_payload,
        d.flood_interval_ns / 1_000,
        d.point_s,
        d.repeats,
        d.calibration.iterations_per_us,
        d.noise_miss_pct
    );
    match &d.sim_calibration {
        Some(c) => details.push_str(&format!(
            "simulated with the per-datagram cost measured here, {:.2} us (the NAPI kthread's CPU time per datagram taken in, median \
             of {} Foreground points), and the flood sent here (one {}-byte frame every {} us); kept from the paper's setup: {}\n",
            c.udp_cost_ns as f64 / 1e3,
            c.points,
            c.flood_frame_bytes,
            c.flood_interval_ns / 1_000,
            c.assumed
        )),
        None => details.push_str("simulated with the paper's costs (no per-datagram cost was measured here)\n"),
    }
    if let Some(x) = &d.execution {
        let tau2: Vec<String> = x.tau2_ns.iter().map(|(e, c)| format!("{:.1} -> {:.2}", ms(*e), ms(*c))).collect();
        details.push_str(&format!(
            "execution times measured with no flood (most CPU time one job took, ms): tau1 {:.2} for e1 = 2; tau2 {}\n",
            ms(x.tau1_ns),
            tau2.join(", ")
        ));
    }
    for p in &d.predictions {
        details.push_str(&format!("analysis, {}: no miss up to e2 = {:.2} ms ({})", p.setup, ms(p.max_e2_ns), p.model));
        match p.machine_max_e2_ns {
            Some(e) => details.push_str(&format!("; {:.2} ms with {} (compared)\n", ms(e), p.machine_model)),
            None => details.push_str("; no curve for the machine's own interference (compared: the paper's)\n"),
        }
    }
    for s in &d.summaries {
        let limits: Vec<String> = s.repeats.iter().map(|r| format!("{:.1}", ms(r.meets_up_to_e2_ns))).collect();
        let sustained: Vec<String> = s.repeats.iter().map(|r| format!("{:.1}", ms(r.sustained_up_to_e2_ns))).collect();
        details.push_str(&format!(
            "{}: tau2 meets its deadlines at every e2 up to {} ms per sweep, misses from the step after {} ms to the end; tau2 misses \
             per sweep {:.0} (sd {:.0}), polls without a heartbeat per sweep {:.0} (sd {:.0})\n",
            s.setup,
            limits.join(" / "),
            sustained.join(" / "),
            s.tau2_misses_per_sweep.mean,
            s.tau2_misses_per_sweep.sd,
            s.heartbeats_missed_per_sweep.mean,
            s.heartbeats_missed_per_sweep.sd
        ));
    }
    for p in &d.points {
        details.push_str(&point_line(p));
        details.push('\n');
    }
    details.push_str(&format!("{}\n", d.kernel_note));
    details.push_str(&super::knobs_text(&d.sched_knobs));
    super::finish(args, &report, details, "Load-bounds, live", "docs/papers.md §3; the paper's §5, Table 1, Figs. 7-10", html_live)
}

fn point_line(p: &live::Point) -> String {
    format!(
        "{:<16} #{} e2 {:>4.1} ms: tau2 missed {:>5.1}% ({} of {}), tau1 missed {}, heartbeats found in {} of {} polls, tau_D {:>5.1}% of the CPU \
         (kthread {}), {:.0}% of sent taken in, tau2's jobs took {} of CPU{}{}",
        p.setup.name(),
        p.repeat + 1,
        ms(p.e2_ns),
        p.tau2_miss_pct,
        p.tau2_misses,
        p.tau2_jobs,
        p.tau1_misses,
        p.heartbeats_received,
        p.tau1_polls,
        100.0 * p.tau_d_share.unwrap_or(f64::NAN),
        p.kthread_share.map_or("-".to_string(), |k| format!("{:.1}%", 100.0 * k)),
        p.processed_pct,
        p.tau2_cpu_us.map_or("-".to_string(), |q| format!("{:.2}/{:.2}/{:.2} ms (p50/p99/max)", q.p50 / 1e3, q.p99 / 1e3, q.max / 1e3)),
        p.server_exhaustions.map_or(String::new(), |e| format!(", {e} exhaustions, reaction p99 {:.0} us", p.server_reaction_p99_us.unwrap_or(f64::NAN))),
        if p.complete { "" } else { " [incomplete]" }
    )
}

fn html_live(report: &Report<live::Details>) -> Result<String, CliError> {
    let d = &report.details;
    let verdict = super::verdict_sentence(report);
    let mut miss = LinePlot::new("Fig. 7: tau2's deadlines missed (live solid, simulated dashed)")
        .x_label("e2 (ms)")
        .y_label("% deadlines missed")
        .y_range(0.0..100.0);
    let mut hb = LinePlot::new("Fig. 8: tau1's polls without a heartbeat (live solid, simulated dashed)")
        .x_label("e2 (ms)")
        .y_label("% polls without a heartbeat")
        .y_range(0.0..100.0);
    for (i, setup) in live::Setup::ALL.iter().enumerate() {
        let pooled = live::pooled(&d.points, *setup);
        miss = miss.series(Series::line(setup.name(), pooled.iter().map(|p| (ms(p.0), p.1)).collect()).color(i));
        hb = hb.series(Series::line(setup.name(), pooled.iter().map(|p| (ms(p.0), p.2)).collect()).color(i));
        let live::Setup::Config(c) = setup else { continue };
        if let Some(sim) = d.simulated.as_ref().and_then(|s| s.configs.iter().find(|r| r.name == *c)) {
            let name = format!("{} (sim)", c.name());
            miss = miss.series(Series::dashed(name.clone(), sim.points.iter().map(|p| (ms(p.e2_ns), p.tau2_miss_pct)).collect()).color(i));
            hb = hb.series(Series::dashed(name, sim.points.iter().map(|p| (ms(p.e2_ns), p.heartbeat_miss_pct)).collect()).color(i));
        }
        if let Some(pred) = d.predictions.iter().find(|p| p.setup == *setup) {
            let x = ms(pred.max_e2_ns);
            miss = miss.series(Series::dashed(format!("{} analysis limit", c.name()), vec![(x, 0.0), (x, 100.0)]).color(i));
        }
    }
    let mut page = Page::new("irqlab reproduce load-bounds --live")
        .intro(format!(
            "The load-bounds paper's driver-scheduling experiment on this machine: tau1 (2 ms / 10 ms, polls a heartbeat), tau2 (e2 / 10 ms) \
             and the receive work of testbed link b on CPU {}, under a UDP flood from host b, in each configuration of Table 1 plus \
             SCHED_DEADLINE; the simulated sweep (with the per-datagram cost measured here) and the analysis beside. {} run, seed {}. {verdict} {}",
            d.cpu,
            if report.quick { "Quick" } else { "Full" },
            report.seed,
            d.kernel_note
        ))
        .section(Section::new("Paper, simulation and this machine").table(super::html_table(&report.rows)))
        .section(Section::new("Configurations, live (Figs. 7-8; the repeated sweeps pooled per e2)").svg(miss.to_svg().map_err(plot_err)?).svg(hb.to_svg().map_err(plot_err)?));
    if let Some(c) = &d.curves {
        let mut plot = LinePlot::new("tau_D as tau2 sees it: the probe under the flood minus the idle floor, and the fits")
            .x_label("window (us)")
            .y_label("max load (%)")
            .log_x(true)
            .y_range(0.0..100.0);
        for (name, curve) in [("Traditional", &c.traditional_driver), ("Foreground", &c.foreground_driver)] {
            plot = plot.series(Series::points(name, plot_points(curve)));
            if let Some(f) = d.predictions.iter().find(|p| p.setup.name() == name).and_then(|p| p.driver_fit) {
                let pts = windows_us().into_iter().map(|w| (w, f.load((w * 1e3) as Nanos) * 100.0)).collect();
                plot = plot.series(Series::line(format!("{name} fit"), pts));
            }
        }
        plot = plot.series(Series::points("idle", plot_points(&c.idle)));
        page = page.section(Section::new("Interference curves, live (Figs. 5, 10)").svg(plot.to_svg().map_err(plot_err)?));
    }
    page.render().map_err(|e| CliError::Failed(e.to_string()))
}
