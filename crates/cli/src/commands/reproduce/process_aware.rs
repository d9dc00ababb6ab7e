//! `irqlab reproduce process-aware`: wiring of
//! `irqlab_experiments::process_aware` to the terminal, JSON, Markdown
//! and an HTML page with Figs. 6-8.

use super::{html_table, threads, Args};
use crate::error::{CliError, Status};
use crate::signal::stop_flag;
use irqlab_experiments::process_aware::live;
use irqlab_experiments::process_aware::sim::{reproduce, Details, Mode, Options};
use irqlab_experiments::Report;
use irqlab_report::html::{Page, Section};
use irqlab_report::plot::{LinePlot, Series};

pub fn run(args: &Args) -> Result<Status, CliError> {
    if args.live {
        return run_live(args);
    }
    let opts = Options { quick: args.quick, seed: args.seed, threads: threads(args) };
    let stop = stop_flag();
    eprintln!("running the rate sweeps (vanilla / IA / ISA, then MMPP-2 bursts)...");
    let report = reproduce(&opts, &stop).map_err(CliError::Failed)?;
    let mut details =
        format!("{:<8} {:>10} {:>9} {:>9} {:>8} {:>9} {:>10}\n", "mode", "pkt/s", "t_opt s", "charged", "error %", "server s", "recv %");
    for p in &report.details.accounting {
        details.push_str(&format!(
            "{:<8} {:>10.0} {:>9.2} {:>9.2} {:>8.1} {:>9.2} {:>10.2}\n",
            p.mode,
            p.rate_pps,
            p.t_opt_s,
            p.t_charged_s,
            100.0 * p.error,
            p.server_charged_s,
            100.0 * p.reception_ratio
        ));
    }
    super::finish(args, &report, details, "Process-aware", "docs/papers.md §2; the paper's Figs. 6-8", html)
}

fn acc_series(d: &Details, mode: Mode, f: impl Fn(&irqlab_experiments::process_aware::sim::AccountingPoint) -> f64) -> Series {
    Series::line(mode.name(), d.accounting.iter().filter(|p| p.mode == mode).map(|p| (p.rate_pps, f(p))).collect())
}

fn bursty_series(d: &Details, mode: Mode, f: impl Fn(&irqlab_experiments::process_aware::sim::BurstyPoint) -> f64) -> Series {
    let mut pts: Vec<(f64, f64)> = d.bursty.iter().filter(|p| p.mode == mode).map(|p| (p.rate_pps, f(p))).collect();
    pts.sort_by(|a, b| a.0.total_cmp(&b.0));
    Series::line(mode.name(), pts)
}

fn svg(p: LinePlot) -> Result<String, CliError> {
    p.to_svg().map_err(|e| CliError::Failed(e.to_string()))
}

fn html(report: &Report<Details>) -> Result<String, CliError> {
    let d = &report.details;
    let verdict = super::verdict_sentence(report);
    let x = "UDP packets/s";
    let page = Page::new("irqlab reproduce process-aware")
        .intro(format!(
            "Process-aware interrupt accounting and scheduling in simulation: Linux 2.6.14 softirqs at HZ = 100, 2.4 GHz P4, e1000 with NAPI, \
             CPU-bound SCHED_FIFO 50 ({} s on), SCHED_OTHER UDP server. {} run, seed {}. {verdict}",
            d.active_s,
            if report.quick { "Quick" } else { "Full" },
            report.seed
        ))
        .section(Section::new("Paper vs simulation").table(html_table(&report.rows)))
        .section(
            Section::new("Fig. 6: CPU time accounting accuracy")
                .svg(svg(LinePlot::new("(a) time charged to the CPU-bound process (s)")
                    .x_label(x)
                    .y_label("s")
                    .series(acc_series(d, Mode::Vanilla, |p| p.t_charged_s))
                    .series(acc_series(d, Mode::Ia, |p| p.t_charged_s))
                    .series(Series { name: "Opt".into(), ..acc_series(d, Mode::Vanilla, |p| p.t_opt_s) }))?)
                .svg(svg(LinePlot::new("(b) accounting error (t - t_opt)/t_opt (%)")
                    .x_label(x)
                    .y_label("%")
                    .series(acc_series(d, Mode::Vanilla, |p| 100.0 * p.error))
                    .series(acc_series(d, Mode::Ia, |p| 100.0 * p.error)))?)
                .svg(svg(LinePlot::new("(c) time charged to the UDP server (s)")
                    .x_label(x)
                    .y_label("s")
                    .series(acc_series(d, Mode::Vanilla, |p| p.server_charged_s))
                    .series(acc_series(d, Mode::Ia, |p| p.server_charged_s)))?),
        )
        .section(
            Section::new("Fig. 7: scheduling and accounting (ISA)")
                .svg(svg(LinePlot::new("(a) CPU-bound process: CPU time / active phase (%)")
                    .x_label(x)
                    .y_label("%")
                    .series(acc_series(d, Mode::Vanilla, |p| 100.0 * p.cpu_share_of_active))
                    .series(acc_series(d, Mode::Isa, |p| 100.0 * p.cpu_share_of_active)))?)
                .svg(svg(LinePlot::new("(c) UDP reception ratio (%)")
                    .x_label(x)
                    .y_label("%")
                    .series(acc_series(d, Mode::Vanilla, |p| 100.0 * p.reception_ratio))
                    .series(acc_series(d, Mode::Isa, |p| 100.0 * p.reception_ratio)))?),
        )
        .section(
            Section::new("Fig. 8: MMPP-2 bursts, periodic task 0.95 s / 1 s")
                .svg(svg(LinePlot::new("(a) deadline miss rate (%)")
                    .x_label("mean UDP packets/s")
                    .y_label("%")
                    .series(bursty_series(d, Mode::Vanilla, |p| 100.0 * p.miss_rate))
                    .series(bursty_series(d, Mode::Isa, |p| 100.0 * p.miss_rate)))?)
                .svg(svg(LinePlot::new("(b) bottom-half time (s)")
                    .x_label("mean UDP packets/s")
                    .y_label("s")
                    .series(bursty_series(d, Mode::Vanilla, |p| p.bh_s))
                    .series(bursty_series(d, Mode::Isa, |p| p.bh_s)))?)
                .svg(svg(LinePlot::new("(c) UDP reception ratio (%)")
                    .x_label("mean UDP packets/s")
                    .y_label("%")
                    .series(bursty_series(d, Mode::Vanilla, |p| 100.0 * p.reception_ratio))
                    .series(bursty_series(d, Mode::Isa, |p| 100.0 * p.reception_ratio)))?),
        );
    page.render().map_err(|e| CliError::Failed(e.to_string()))
}

/// `--live`: Fig. 7 on this machine's testbed beside the simulation.
fn run_live(args: &Args) -> Result<Status, CliError> {
    let config =
        live::Config { quick: args.quick, cpu: args.cpu, seed: args.seed, fair_server_off: args.fair_server.as_deref() == Some("off") };
    let stop = stop_flag();
    eprintln!(
        "running the simulated sweeps, then Fig. 7 live (3 kernels x {} rates), then Fig. 8 live (2 kernels x {} burst gaps)...",
        if args.quick { 3 } else { 5 },
        if args.quick { 4 } else { 7 }
    );
    let report = live::reproduce(
        &config,
        &stop,
        |p| {
            eprintln!(
            "live: {:<18} {:>6} pkt/s (sent {:.0}/s): CPU-bound {:.2}% of its run (charged {:.2}%), received {} in the run, {} in the sleep ({:.1}% of the rate's){}{}",
            p.mode.name(),
            p.rate_pps,
            p.achieved_pps,
            100.0 * p.hog_share,
            100.0 * p.hog_charged_share,
            p.received_run,
            p.received_sleep,
            100.0 * p.reception_ratio,
            p.reaction_p99_us.map_or(String::new(), |us| format!("; {} changes, reaction p99 {us:.0} us", p.changes.unwrap_or(0))),
            p.accounting.as_ref().map_or(String::new(), |a| format!(
                "; accounting error kernel {} compensation {} ({} ticks moved)",
                pct(a.kernel_error),
                pct(a.compensation_error),
                a.moved_ticks
            ))
        );
        },
        |b| {
            eprintln!(
            "live: {:<18} bursts every {:>4} ms ({:.0} pkt/s asked, {} sent): {} of {} deadlines missed (worst response {:.1} ms), received {:.1}%",
            b.mode.name(),
            b.gap_ms,
            b.rate_pps,
            b.sent,
            b.misses,
            b.jobs,
            b.worst_response_ms,
            100.0 * b.reception_ratio
        );
        },
    )?;
    let d = &report.details;
    let mut details = format!(
        "live on CPU {} (sender on {}), {} s run / {} s sleep ({}), 512-byte datagrams\n",
        d.cpu,
        d.sender_cpu.map_or("-".to_string(), |c| format!("CPU {c}")),
        d.run_s,
        d.sleep_s,
        d.scale
    );
    details.push_str(&format!(
        "{:<18} {:>8} {:>10} {:>10} {:>12} {:>12} {:>8} {:>11} {:>11}\n",
        "kernel", "pkt/s", "sent/s", "CPU-bound", "recv (run)", "recv (sleep)", "recv %", "err kernel", "err compens"
    ));
    for p in &d.points {
        let (ek, ec) = p.accounting.as_ref().map_or((None, None), |a| (a.kernel_error, a.compensation_error));
        details.push_str(&format!(
            "{:<18} {:>8} {:>10.0} {:>9.2}% {:>12} {:>12} {:>7.1}% {:>11} {:>11}\n",
            p.mode.name(),
            p.rate_pps,
            p.achieved_pps,
            100.0 * p.hog_share,
            p.received_run,
            p.received_sleep,
            100.0 * p.reception_ratio,
            pct(ek),
            pct(ec)
        ));
    }
    for b in &d.bursty {
        details.push_str(&format!(
            "{:<18} bursts every {:>4} ms ({:>6.0} pkt/s): {:>2}/{} deadlines missed, worst response {:.1} ms, received {:.1}%\n",
            b.mode.name(),
            b.gap_ms,
            b.rate_pps,
            b.misses,
            b.jobs,
            b.worst_response_ms,
            100.0 * b.reception_ratio
        ));
    }
    details.push_str(&format!("{}\n", d.kernel_note));
    details.push_str(&super::knobs_text(&d.sched_knobs));
    super::finish(args, &report, details, "Process-aware, live (Figs. 6-8)", "docs/papers.md §2; the paper's Figs. 6-8", html_live)
}

/// An accounting error as a signed percentage, "-" when not measured.
fn pct(e: Option<f64>) -> String {
    e.map_or("-".to_string(), |e| format!("{:+.1}%", 100.0 * e))
}

fn html_live(report: &Report<live::Details>) -> Result<String, CliError> {
    let d = &report.details;
    let series = |f: fn(&live::Point) -> f64| -> Vec<Series> {
        live::Mode::ALL
            .iter()
            .map(|&m| Series::line(m.name(), d.points.iter().filter(|p| p.mode == m).map(|p| (p.rate_pps as f64, f(p))).collect()))
            .collect()
    };
    let mut share = LinePlot::new("Fig. 7a, live: the CPU-bound process's share of its run phase")
        .x_label("UDP packets/s")
        .y_label("% of the run phase");
    for s in series(|p| 100.0 * p.hog_share) {
        share = share.series(s);
    }
    let err = |f: fn(&live::HogAccounting) -> Option<f64>| -> Vec<(f64, f64)> {
        d.points
            .iter()
            .filter(|p| p.mode == live::Mode::Softirq)
            .filter_map(|p| Some((p.rate_pps as f64, 100.0 * f(p.accounting.as_ref()?)?)))
            .collect()
    };
    let fig6 = LinePlot::new("Fig. 6b, live: accounting error of the CPU-bound process under softirqs")
        .x_label("UDP packets/s")
        .y_label("(charged − BPF-measured run) / run, %")
        .series(Series::line("kernel (/proc)", err(|a| a.kernel_error)))
        .series(Series::line("compensation algorithm", err(|a| a.compensation_error)));
    let mut recv = LinePlot::new("Fig. 7c, live: UDP reception").x_label("UDP packets/s").y_label("% of sent received");
    for s in series(|p| 100.0 * p.reception_ratio) {
        recv = recv.series(s);
    }
    let bursty = |f: fn(&live::BurstyPoint) -> f64| -> Vec<Series> {
        [live::Mode::Softirq, live::Mode::ProcessAware]
            .iter()
            .map(|&m| Series::line(m.name(), d.bursty.iter().filter(|p| p.mode == m).map(|p| (p.rate_pps, f(p))).collect()))
            .collect()
    };
    let mut misses =
        LinePlot::new("Fig. 8a, live: deadline misses under bursts").x_label("average UDP packets/s").y_label("% of deadlines missed");
    for s in bursty(|p| 100.0 * p.miss_rate) {
        misses = misses.series(s);
    }
    let mut brecv =
        LinePlot::new("Fig. 8c, live: UDP reception under bursts").x_label("average UDP packets/s").y_label("% of the schedule received");
    for s in bursty(|p| 100.0 * p.reception_ratio) {
        brecv = brecv.series(s);
    }
    let svg = |p: &LinePlot| p.to_svg().map_err(|e| CliError::Failed(e.to_string()));
    let page = Page::new("irqlab reproduce process-aware --live")
        .intro(format!(
            "The process-aware paper's Figs. 6 and 7 on this machine: a SCHED_FIFO 50 CPU-bound process ({} s run, {} s sleep; {}) and a \
             SCHED_OTHER UDP server on CPU {}, 512-byte datagrams from testbed host b; the receive work as softirqs (threaded NAPI off, \
             RPS to the CPU), in the NAPI kthread at the kernel's default, and under `irqlab control process-aware`. {} {}",
            d.run_s,
            d.sleep_s,
            d.scale,
            d.cpu,
            super::verdict_sentence(report),
            d.kernel_note
        ))
        .section(Section::new("Paper, simulation and this machine").table(html_table(&report.rows)))
        .section(Section::new("Fig. 6, live").svg(svg(&fig6)?))
        .section(Section::new("Fig. 7, live").svg(svg(&share)?).svg(svg(&recv)?))
        .section(Section::new("Fig. 8, live").svg(svg(&misses)?).svg(svg(&brecv)?));
    page.render().map_err(|e| CliError::Failed(e.to_string()))
}
