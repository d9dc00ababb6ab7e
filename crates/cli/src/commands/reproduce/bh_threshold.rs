//! `irqlab reproduce bh-threshold`: wiring of
//! `irqlab_experiments::bh_threshold` to the terminal, JSON, Markdown
//! and an HTML page with Figs. 4 and 5.

use super::Args;
use crate::error::{CliError, Status};
use crate::signal::stop_flag;
use irqlab_experiments::bh_threshold::live::{self, SetupRun};
use irqlab_experiments::bh_threshold::{reproduce, Details, Options};
use irqlab_experiments::Report;
use irqlab_report::html::{Page, Section};
use irqlab_report::plot::{LinePlot, Series};

pub fn run(args: &Args) -> Result<Status, CliError> {
    if args.live {
        return run_live(args);
    }
    let opts = Options { quick: args.quick, seed: args.seed };
    let stop = stop_flag();
    eprintln!("running 3 simulations (no load, flood vanilla, flood + BH scheduler)...");
    let report = reproduce(&opts, &stop).map_err(CliError::Failed)?;
    let mut details = String::new();
    for r in [&report.details.no_load, &report.details.vanilla, &report.details.scheduler] {
        details.push_str(&format!(
            "{:<32} {:>5} frames, inter-frame mean {:.1} ms max {:.1} ms, BH/ms mean {:.0} us p5-p95 {:.0}-{:.0} us\n",
            r.scenario, r.frames, r.inter_frame_mean_ms, r.inter_frame_max_ms, r.bh_mean_us, r.bh_p5_us, r.bh_p95_us
        ));
    }
    super::finish(args, &report, details, "BH-threshold", "docs/papers.md §1; the paper's Figs. 4-5 and Table 2", html)
}

const SIM_BH: &str = "bottom-half time per ms (us)";

/// Fig. 4: every inter-frame delay, ms.
fn frames_plot(title: &str, inter_frame_ms: &[f64]) -> LinePlot {
    let pts: Vec<(f64, f64)> = inter_frame_ms.iter().enumerate().map(|(i, &d)| (i as f64 + 1.0, d)).collect();
    LinePlot::new(title)
        .x_label("frame")
        .y_label("inter-frame delay (ms)")
        .y_range(0.0..200.0)
        .series(Series::line("inter-frame delay", pts))
}

/// Fig. 5: bottom-half time in each 1 ms (the first 3 s), us.
fn bh_plot(title: &str, bh_us_per_ms: &[f64], y_label: &str) -> LinePlot {
    let pts: Vec<(f64, f64)> = bh_us_per_ms.iter().enumerate().take(3000).map(|(i, &u)| (i as f64, u)).collect();
    LinePlot::new(title).x_label("time (ms)").y_label(y_label).y_range(0.0..1000.0).series(Series::line("BH time per 1 ms", pts))
}

fn svg(p: &LinePlot) -> Result<String, CliError> {
    p.to_svg().map_err(|e| CliError::Failed(e.to_string()))
}

fn html(report: &Report<Details>) -> Result<String, CliError> {
    let d = &report.details;
    let verdict = super::verdict_sentence(report);
    let page = Page::new("irqlab reproduce bh-threshold")
        .intro(format!(
            "The Bottom Half Scheduler (BH-threshold paper) in simulation: Linux 2.4.20 softirqs and the 2.4 epoch scheduler on a 2 GHz P4, \
             mplayer at 25 fps, ttcp UDP flood of 50-byte datagrams on 100 Mb/s. {} run, seed {}. {verdict}",
            if report.quick { "Quick" } else { "Full" },
            report.seed
        ))
        .section(Section::new("Paper vs simulation").table(super::html_table(&report.rows)))
        .section(
            Section::new("Fig. 4: inter-frame delay over frames")
                .svg(svg(&frames_plot("(a) no network load", &d.no_load.inter_frame_ms))?)
                .svg(svg(&frames_plot("(b) flood, without the Bottom Half Scheduler", &d.vanilla.inter_frame_ms))?)
                .svg(svg(&frames_plot("(c) flood, with the Bottom Half Scheduler", &d.scheduler.inter_frame_ms))?),
        )
        .section(
            Section::new("Fig. 5: bottom-half time per 1 ms (first 3 s)")
                .svg(svg(&bh_plot("(a) without the Bottom Half Scheduler", &d.vanilla.bh_us_per_ms, SIM_BH))?)
                .svg(svg(&bh_plot("(b) with the Bottom Half Scheduler", &d.scheduler.bh_us_per_ms, SIM_BH))?),
        );
    page.render().map_err(|e| CliError::Failed(e.to_string()))
}

/// `--live`: the simulated runs for their column, then the three setups on
/// this machine's testbed.
fn run_live(args: &Args) -> Result<Status, CliError> {
    let config = live::Config { quick: args.quick, cpu: args.cpu, seed: args.seed };
    let stop = stop_flag();
    eprintln!("running 3 simulations, then 3 live setups of {} s each on the testbed...", if args.quick { 4 } else { 40 });
    let report = live::reproduce(&config, &stop, |setup| eprintln!("live: {setup}"))?;
    let d = &report.details;
    let mut details = format!(
        "live on CPU {} (sender on {}), {} of {}, player {} frames of 40 ms (decode work 3.5-5.3 ms, spin calibrated at {:.0} iterations/us)\n",
        d.cpu,
        d.sender_cpu.map_or("the same CPU".to_string(), |c| format!("CPU {c}")),
        d.device,
        format_args!("{}-byte UDP datagrams", d.payload_bytes),
        d.player.frames,
        d.calibration.iterations_per_us
    );
    for r in &d.runs {
        details.push_str(&setup_line(r));
    }
    details.push_str(&format!("{}\n", d.default_kernel));
    super::finish(args, &report, details, "BH-threshold, live", "docs/papers.md §1; the paper's Figs. 4-5 and Table 2", html_live)
}

fn setup_line(r: &SetupRun) -> String {
    format!(
        "{:<22} {:>4} frames ({} late), inter-frame mean {:.1} ms max {:.1} ms; BH/ms mean {:.0} us, p5-p95 {:.0}-{:.0} us, range {:.0}-{:.0} us; \
         received {:.0}/s (sent {:.0}/s), NAPI {:.0} packets/s; CPU user {:.1}% system {:.1}%; monitor {:.0} us/s{}{}\n",
        r.setup.name(),
        r.frames,
        r.late_frames,
        r.inter_frame_mean_ms,
        r.inter_frame_max_ms,
        r.bh_mean_us,
        r.bh_p5_us,
        r.bh_p95_us,
        r.bh_min_us,
        r.bh_max_us,
        r.received_per_s,
        r.sent_per_s,
        r.napi_packets_per_s,
        r.user_pct,
        r.system_pct,
        r.controller_us_per_s,
        r.reaction_p99_us.map_or(String::new(), |us| format!("; throttled {} periods, reaction p99 {us:.0} us", r.throttled_periods)),
        if r.complete { "" } else { " [incomplete]" }
    )
}

fn html_live(report: &Report<live::Details>) -> Result<String, CliError> {
    let d = &report.details;
    let verdict = super::verdict_sentence(report);
    let mut frames = Section::new("Fig. 4, live: inter-frame delay over frames");
    let mut bh = Section::new("Fig. 5, live: the NAPI kthread's time per 1 ms (first 3 s of the play)");
    for r in &d.runs {
        frames = frames.svg(svg(&frames_plot(r.setup.name(), &r.inter_frame_ms))?);
        if r.setup != live::Setup::NoFlood {
            bh = bh.svg(svg(&bh_plot(r.setup.name(), &r.bh_us_per_ms, "NAPI kthread time per ms (us)"))?);
        }
    }
    let page = Page::new("irqlab reproduce bh-threshold --live")
        .intro(format!(
            "The Bottom Half Scheduler (BH-threshold paper) on this machine: a player at 25 fps and a UDP receiver on CPU {} with the \
             testbed's NAPI kthread, under a flood of {}-byte datagrams from host b, with the kernel's default and with \
             `irqlab control bh-budget`; the paper's and the simulator's numbers beside. {} run, seed {}. {verdict} {}",
            d.cpu,
            d.payload_bytes,
            if report.quick { "Quick" } else { "Full" },
            report.seed,
            d.default_kernel
        ))
        .section(Section::new("Paper, simulation and this machine").table(super::html_table(&report.rows)))
        .section(frames)
        .section(bh);
    page.render().map_err(|e| CliError::Failed(e.to_string()))
}
