//! The report's rows: each configuration's live figures beside the
//! simulation's and the analysis's, the paper's relations judged on the
//! live numbers, and what this kernel did, said from the numbers.

use super::*;

/// What this kernel did, from the numbers.
/// `hrtick_dl`: HRTICK_DL was switched on for the run (`--hrtick-dl`).
pub(super) fn kernel_note(points: &[Point], summaries: &[Summary], noise_pct: f64, sheltered: Sheltered, hrtick_dl: bool) -> String {
    let share = |c: Configuration| 100.0 * mean(points.iter().filter(|p| p.setup == Setup::Config(c)).filter_map(|p| p.tau_d_share));
    let processed = |c: Configuration| mean(points.iter().filter(|p| p.setup == Setup::Config(c)).map(|p| p.processed_pct));
    let hb = |c: Configuration| summaries.iter().find(|s| s.setup == Setup::Config(c)).map_or(0, |s| s.heartbeats_missed);
    use Configuration::{Background, Deadline, Foreground, Sporadic, Traditional};
    let mut text = format!(
        "The measured CPU was shielded for the run (a root domain of its own; {} user-space threads of other processes moved off \
         it, {} stayed). With no flood, where tau1 and tau2 leave 1 ms of each period idle, tau2's misses put the machine's own miss rate at \
         {noise_pct:.2}% at most (95% bound; a VM whose host may stop a vCPU for milliseconds): a point meets its deadlines when \
         its misses are within what that rate gives. The live limit compared with the analysis is the e2 before the misses that \
         last to the sweep's end (tau2's response time cannot shrink as e2 grows, so scattered points past the noise with clean \
         ones after them are the machine's bursts); the strict limit, every point up to it, is beside it. RT throttling was lifted for the run, as for the probe. Under the flood tau_D \
         took {:.1}% of the CPU on average as Foreground ({:.1}% Traditional, {:.1}% Background, {:.1}% Sporadic, {:.1}% \
         SCHED_DEADLINE), getting {:.0}% / {:.0}% / {:.0}% / {:.0}% / {:.0}% of the datagrams sent to the UDP layer; tau1 found no \
         heartbeat in {} / {} / {} / {} / {} of its polls (all sweeps together). {}",
        sheltered.moved,
        sheltered.stayed,
        share(Foreground),
        share(Traditional),
        share(Background),
        share(Sporadic),
        share(Deadline),
        processed(Foreground),
        processed(Traditional),
        processed(Background),
        processed(Sporadic),
        processed(Deadline),
        hb(Foreground),
        hb(Traditional),
        hb(Background),
        hb(Sporadic),
        hb(Deadline),
        if hrtick_dl {
            "SCHED_DEADLINE runtimes were enforced by an hrtimer: HRTICK_DL was switched on for the run (--hrtick-dl), so the \
             kthread is throttled when its 1 ms runtime is spent, not at the next tick."
        } else {
            "SCHED_DEADLINE runtimes are enforced at the scheduler tick on this kernel unless HRTICK_DL is on (it was not switched \
             on for the run: --hrtick-dl), so a 1 ms runtime can run on to the next tick before the kthread is throttled."
        },
    );
    if hb(Foreground) > hb(Traditional) {
        text.push_str(&format!(
            " Foreground lost {} heartbeats where Traditional lost {}: softirqs run at interrupt exit ahead of every thread, while a \
             kthread, even at the top SCHED_FIFO priority, waits whenever the fair-class deadline server (Linux 6.12+, up to 50 ms \
             of each second) runs fair tasks that tau1 and tau2 starve, and the link's queue overflows meanwhile.",
            hb(Foreground),
            hb(Traditional)
        ));
    }
    text
}

/// The rows: per configuration the live sweep beside the simulation, then
/// the paper's relations judged on the live numbers.
pub fn relations(d: &Details) -> Vec<Row> {
    let mut rows = sweep_rows(d);
    rows.extend(relation_checks(d));
    rows
}

pub(super) fn sim_config(d: &Details, c: Configuration) -> Option<&crate::load_bounds::ConfigResult> {
    d.simulated.as_ref().and_then(|s| s.configs.iter().find(|r| r.name == c))
}

/// The live limit compared with the analysis: the median of the sweeps'
/// sustained limits ([`sustained_limit`]).
pub(super) fn live_limit(s: &Summary) -> f64 {
    s.sustained_up_to_e2_ns.map_or(0.0, ms)
}

/// Per configuration: the live sweep's figures beside the simulation's.
pub(super) fn sweep_rows(d: &Details) -> Vec<Row> {
    let sim = |c: Configuration| sim_config(d, c);
    let mut rows = Vec::new();
    for setup in Setup::ALL {
        let Some(s) = d.summaries.iter().find(|s| s.setup == setup) else { continue };
        let mine: Vec<&Point> = d.points.iter().filter(|p| p.setup == setup).collect();
        if mine.is_empty() {
            continue;
        }
        let sim_c = match setup {
            Setup::Config(c) => sim(c),
            Setup::NoFlood => None,
        };
        let sim_hb_pct = sim_c.map_or(f64::NAN, |c| {
            let (missed, all) =
                c.points.iter().fold((0, 0), |(m, a), p| (m + p.heartbeats_missed, a + p.heartbeats_missed + p.heartbeats_received));
            pct(missed, all)
        });
        let sim_miss_pct = sim_c.map_or(f64::NAN, |c| mean(c.points.iter().map(|p| p.tau2_miss_pct)));
        rows.push(
            Row::info(
                format!(
                    "live {setup}: tau2 meets its deadlines at every swept e2 up to (median of {} sweeps, {})",
                    s.repeats.len(),
                    strict_range_text(s)
                ),
                "-",
                sim_c.and_then(|c| c.meets_up_to_e2_ns).map_or(f64::NAN, ms),
                "ms",
            )
            .with_live(s.meets_up_to_e2_ns.map_or(0.0, ms)),
        );
        rows.push(
            Row::info(
                format!(
                    "live {setup}: tau2's live limit, the e2 before the misses that last to the sweep's end (median of {} sweeps, {})",
                    s.repeats.len(),
                    range_text(s)
                ),
                "-",
                f64::NAN,
                "ms",
            )
            .with_live(live_limit(s)),
        );
        let analyses = [
            (
                "the paper's analysis (tau1 and tau_D alone)",
                s.paper_predicted_max_e2_ns,
                sim_c.map_or(f64::NAN, |c| ms(c.predicted_max_e2_ns)),
            ),
            ("the analysis with the machine's own interference (compared)", s.predicted_max_e2_ns, f64::NAN),
        ];
        for (which, live, simulated) in analyses {
            let Some(live) = live else { continue };
            rows.push(Row::info(format!("live {setup}: {which} predicts no miss up to e2"), "-", simulated, "ms").with_live(ms(live)));
        }
        rows.push(
            Row::info(format!("live {setup}: tau2 deadlines missed, mean over the sweep"), "-", sim_miss_pct, "%")
                .with_live(mean(mine.iter().map(|p| p.tau2_miss_pct))),
        );
        rows.push(
            Row::info(format!("live {setup}: tau1 polls without a heartbeat, over the sweep"), "-", sim_hb_pct, "%")
                .with_live(pct(s.heartbeats_missed, s.heartbeats_sent)),
        );
        if setup != Setup::NoFlood {
            rows.push(
                Row::info(format!("live {setup}: tau_D's CPU share, mean"), "-", f64::NAN, "%")
                    .with_live(100.0 * mean(mine.iter().filter_map(|p| p.tau_d_share))),
            );
            rows.push(
                Row::info(format!("live {setup}: flood datagrams host b sent per second, mean"), "100000", f64::NAN, "1/s")
                    .with_live(mean(mine.iter().map(|p| flood_rate(p)))),
            );
            rows.push(
                Row::info(format!("live {setup}: datagrams taken in by UDP, mean"), "-", f64::NAN, "% of sent")
                    .with_live(mean(mine.iter().map(|p| p.processed_pct))),
            );
        }
    }
    rows
}

/// "`x`'s mean is at most the others'" for the metric `f`, judged
/// with the repeats' measured noise: the closest other (the least of them
/// whose mean `x` must not exceed beyond the noise) and the tolerance.
pub(super) fn least_of<'a>(x: &Spread, others: impl Iterator<Item = (&'a Summary, Spread)>) -> Option<(&'a Summary, Spread, f64, bool)> {
    others
        .map(|(s, o)| (s, o, x.tolerance(&o), x.at_most(&o)))
        .min_by(|a, b| (a.1.mean + a.2 - x.mean).total_cmp(&(b.1.mean + b.2 - x.mean)))
}

pub(super) fn relation_of(x: &Spread, closest: Option<(&Summary, Spread, f64, bool)>, what: &str) -> (String, bool) {
    match closest {
        Some((s, o, tol, ok)) => (format!("{what}: {:.0} vs {} {:.0}, noise of the difference {tol:.0}", x.mean, s.setup, o.mean), ok),
        None => (format!("{what}: nothing to compare"), false),
    }
}

/// The paper's relations, judged on the live numbers: the counts are
/// means over the repeated sweeps, and an order counts as holding unless
/// it is reversed by more than the repeats' measured noise
/// ([`Spread::tolerance`]); the rows name both means and that noise.
pub(super) fn relation_checks(d: &Details) -> Vec<Row> {
    let sim = |c: Configuration| sim_config(d, c);
    let sum = |c: Configuration| d.summaries.iter().find(|s| s.setup == Setup::Config(c) && !s.repeats.is_empty());
    let step = d.e2_values_ns.windows(2).map(|w| w[1] - w[0]).min().unwrap_or(MS);
    let mut rows = Vec::new();
    use Configuration::{Background, Deadline, Foreground, Sporadic};
    let (Some(bg), Some(fg)) = (sum(Background), sum(Foreground)) else { return rows };
    let flooded = || d.summaries.iter().filter(|s| s.setup != Setup::NoFlood && !s.repeats.is_empty());
    let sim_value = |c: Configuration, f: fn(&crate::load_bounds::ConfigResult) -> f64| sim(c).map_or(f64::NAN, f);
    let n = d.repeats;
    let neg = |s: Spread| Spread { mean: -s.mean, ..s };
    // "x has the fewest (or, `most`, the most) of `metric` among the
    // flooded configurations", judged by [`least_of`] (the most: the
    // fewest of the negated counts).
    let order = |x: &Summary, metric: fn(&Summary) -> Spread, most: bool, claim: &str, what: &str| {
        let signed = |s: Spread| if most { neg(s) } else { s };
        let closest = least_of(&signed(metric(x)), flooded().filter(|s| s.setup != x.setup).map(|s| (s, signed(metric(s)))));
        let closest = closest.map(|(s, o, tol, ok)| (s, signed(o), tol, ok));
        let (text, ok) = relation_of(&metric(x), closest, &format!("{what}, means of {n}"));
        (format!("live: {claim}; {text})"), ok, metric(x).mean)
    };
    let misses: fn(&Summary) -> Spread = |s| s.tau2_misses_per_sweep;
    let heartbeats: fn(&Summary) -> Spread = |s| s.heartbeats_missed_per_sweep;
    let checks = [
        (
            order(bg, misses, false, "Background has the fewest tau2 misses (Fig. 7", "tau2 misses per sweep"),
            "fewest misses",
            sim_value(Background, |c| c.points.iter().map(|p| p.tau2_misses as f64).sum()),
            "misses",
        ),
        (
            order(bg, heartbeats, true, "Background loses the most heartbeats (Fig. 8", "polls without a heartbeat per sweep"),
            "worst packet loss",
            sim_value(Background, |c| c.heartbeats_missed_total as f64),
            "polls without",
        ),
        (
            order(fg, heartbeats, false, "Foreground loses the fewest heartbeats (Fig. 8", "polls without a heartbeat per sweep"),
            "best heartbeat receipt",
            sim_value(Foreground, |c| c.heartbeats_missed_total as f64),
            "polls without",
        ),
    ];
    for ((metric, ok, live), paper, simulated, unit) in checks {
        rows.push(Row::check(metric, paper, simulated, unit, ok).with_live(live));
    }
    let (bg_m, bg_h, fg_h) = (bg.tau2_misses_per_sweep, bg.heartbeats_missed_per_sweep, fg.heartbeats_missed_per_sweep);
    limit_rows(d, step, &mut rows);
    for c in [Sporadic, Deadline] {
        let Some(s) = sum(c) else { continue };
        let between = [
            (
                "tau2 misses between Background's and Foreground's (Fig. 7",
                "misses",
                bg_m,
                s.tau2_misses_per_sweep,
                fg.tau2_misses_per_sweep,
            ),
            ("heartbeats lost between Foreground's and Background's (Fig. 8", "polls without", fg_h, s.heartbeats_missed_per_sweep, bg_h),
        ];
        for (what, unit, low, x, high) in between {
            rows.push(
                Row::check(
                    format!(
                        "live {}: {what}; per sweep, means of {n}: {:.0} <= {:.0} <= {:.0}, noise of the differences {:.0} and {:.0})",
                        c.name(),
                        low.mean,
                        x.mean,
                        high.mean,
                        low.tolerance(&x),
                        x.tolerance(&high)
                    ),
                    "between",
                    f64::NAN,
                    unit,
                    low.at_most(&x) && x.at_most(&high),
                )
                .with_live(x.mean),
            );
        }
    }
    if let Some(s) = sum(Deadline) {
        let ideal = ms(PERIOD - E1 - BUDGET);
        rows.push(
            Row::check(
                format!(
                    "live SCHED_DEADLINE: tau2 meets its deadlines up to 10 - e1 - budget = {ideal:.0} ms (within 1 ms; median of {n} sweeps, {})",
                    range_text(s)
                ),
                "-",
                sim(Deadline).and_then(|r| r.meets_up_to_e2_ns).map_or(f64::NAN, ms),
                "ms",
                (live_limit(s) - ideal).abs() <= 1.0 + 1e-9,
            )
            .with_live(live_limit(s)),
        );
    }
    rows
}

/// The sweeps' least and largest live limit ([`live_limit`]).
pub(super) fn range_text(s: &Summary) -> String {
    s.sustained_up_to_range_ns.map_or("-".into(), |(lo, hi)| format!("{:.1}-{:.1} ms", ms(lo), ms(hi)))
}

/// The same for the strict limits ([`meets_up_to`]).
pub(super) fn strict_range_text(s: &Summary) -> String {
    s.meets_up_to_range_ns.map_or("-".into(), |(lo, hi)| format!("{:.1}-{:.1} ms", ms(lo), ms(hi)))
}

/// The live limits (medians of the repeats) against the analysis with the
/// machine's own interference, within one sweep step, and the paper's
/// analysis beside; the sporadic server's difference as the paper reported
/// its own.
pub(super) fn limit_rows(d: &Details, step: Nanos, rows: &mut Vec<Row>) {
    use Configuration::{Background, Deadline, Foreground, Sporadic};
    let sim = |c: Configuration| sim_config(d, c);
    let sum = |c: Configuration| d.summaries.iter().find(|s| s.setup == Setup::Config(c) && !s.repeats.is_empty());
    for c in [Foreground, Background, Deadline] {
        let Some(s) = sum(c) else { continue };
        let pred = s.predicted_max_e2_ns.map_or(f64::NAN, ms);
        let paper = s.paper_predicted_max_e2_ns.map_or(f64::NAN, ms);
        rows.push(
            Row::check(
                format!(
                    "live {}: tau2's live limit (median of {} sweeps, {}) within one sweep step ({:.1} ms) of the analysis with the \
                     machine's own interference, {pred:.2} ms (Figs. 9-10)",
                    c.name(),
                    d.repeats,
                    range_text(s),
                    ms(step)
                ),
                "within a step",
                sim(c).map_or(f64::NAN, |r| ms(r.predicted_max_e2_ns)),
                "ms",
                (live_limit(s) - pred).abs() <= ms(step) + 1e-9,
            )
            .with_live(live_limit(s)),
        );
        rows.push(
            Row::info(
                format!(
                    "live {}: live limit minus the paper's analysis (tau1 and tau_D alone, no term for the machine: {paper:.2} ms; not compared)",
                    c.name()
                ),
                "-",
                f64::NAN,
                "ms",
            )
            .with_live(live_limit(s) - paper),
        );
    }
    if let Some(s) = sum(Sporadic) {
        rows.push(
            Row::info(
                format!(
                    "live Sporadic: live limit (median of {} sweeps, {}) minus the analysis's {:.2} ms (the paper's server fell 3 ms short of its 7 ms)",
                    d.repeats,
                    range_text(s),
                    s.predicted_max_e2_ns.map_or(f64::NAN, ms)
                ),
                "-3",
                sim(Sporadic).map_or(f64::NAN, |r| r.meets_up_to_e2_ns.map_or(0.0, ms) - ms(r.predicted_max_e2_ns)),
                "ms",
            )
            .with_live(live_limit(s) - s.predicted_max_e2_ns.map_or(f64::NAN, ms)),
        );
    }
}
