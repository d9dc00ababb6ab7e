//! The quiet CPU: where the most time-critical task is best off, and the
//! one CPU no recommendation sends work to.
//!
//! A CPU's interference is of two kinds: what the survey's own
//! recommendations move off it (threads, numbered IRQs, the softirq work
//! those IRQs raise, the loads' driver threads) and what stays whatever is
//! changed (time no tracepoint saw: the hypervisor or firmware; the local
//! timer and the other system vectors; the softirqs every CPU runs for
//! itself; per-CPU kernel threads). The quiet CPU is the one whose worst
//! windows hold the least of the second kind: on a VM whose CPU 0 the host
//! stops for whole milliseconds, a CPU 1 that only a movable driver loads
//! is the better choice, though both measured 100% of a 1 ms window
//! (issue 55). Every recommendation that sends work elsewhere then avoids
//! it ([`elsewhere`]), so the recommendations of one page agree.

use super::{load_at, pct, Out, Rec, MS};
use crate::doc::*;

/// Per-CPU kernel threads (softirq and timer threads, workqueue workers):
/// what they run is the CPU's own, and no recommendation moves them.
pub(super) fn per_cpu_thread(comm: &str) -> bool {
    const PER_CPU: [&str; 3] = ["ksoftirqd/", "ktimers/", "kworker/"];
    PER_CPU.iter().any(|k| comm.starts_with(k))
}

/// Softirq vectors raised by a device's IRQ or its driver: they run where
/// the IRQ is steered, or in a thread (threaded NAPI). The others (TIMER,
/// HRTIMER, SCHED, RCU) are every CPU's own.
const DEVICE_SOFTIRQS: [&str; 6] = ["NET_RX", "NET_TX", "BLOCK", "IRQ_POLL", "TASKLET", "HI"];

/// Whether the survey's recommendations can take `source` off its CPU: a
/// thread (but the kernel's per-CPU and protected threads, and the idle
/// task), a numbered IRQ, a device's softirq work. Unseen time, system
/// vectors (`irq LOC timer`, IPIs) and the local softirqs cannot be moved.
/// irqlab's own threads count as movable: they leave with the survey.
pub fn movable(source: &Source) -> bool {
    match source.kind {
        SourceKind::Unseen => false,
        SourceKind::Irq => super::irq_number(&source.label).is_some(),
        SourceKind::Softirq => DEVICE_SOFTIRQS.contains(&source.label.as_str()),
        SourceKind::Thread => match super::thread_comm(&source.label) {
            Some(comm) => !per_cpu_thread(comm) && !irqlab_host::journal::threads::is_protected(comm),
            None => false, // the idle task
        },
    }
}

/// The windows a tie at 1 ms is broken on, in order.
const TIE_WINDOWS_NS: [u64; 2] = [10 * MS, 100 * MS];

/// The quiet-CPU choice: every CPU's score, best first; `None` with fewer
/// than two CPUs measured.
pub fn choose(survey: &Survey) -> Option<QuietCpu> {
    let mut curves = survey.cpus.iter().flat_map(|c| &c.curves).filter(|l| load_at(l.judged(), MS).is_some());
    let basis = if curves.all(has_sources) { QuietBasis::Unmovable } else { QuietBasis::Load };
    let boot = super::boot::BootState::of(survey);
    let mut cpus: Vec<CpuScore> = survey.cpus.iter().filter_map(|c| score(&boot, c, basis)).collect();
    if cpus.len() < 2 {
        return None;
    }
    cpus.sort_by(|a, b| rank(a).cmp(&rank(b)).then(a.at_1ms.total_cmp(&b.at_1ms)).then(a.cpu.cmp(&b.cpu)));
    Some(QuietCpu { basis, cpus })
}

fn has_sources(curve: &LoadCurve) -> bool {
    curve.sources.as_ref().is_some_and(|s| s.available && !s.windows.is_empty())
}

/// What counts of CPU `cpu`'s curve's max-load window nearest
/// `window_ns`, as a share of the window: with sources, what neither a
/// run-time recommendation nor a recommended boot option takes off it.
fn counted(boot: &super::boot::BootState, cpu: usize, curve: &LoadCurve, window_ns: u64, basis: QuietBasis) -> Option<f64> {
    match basis {
        QuietBasis::Load => load_at(curve.judged(), window_ns),
        QuietBasis::Unmovable => {
            let w = curve.sources.as_ref()?.nearest(window_ns)?;
            let stays = |s: &&Source| !movable(s) && !boot.removes(cpu, s);
            let fixed: u64 = w.sources.iter().filter(stays).map(|s| s.ns).sum();
            Some(fixed as f64 / w.window_ns.max(1) as f64)
        }
    }
}

/// A CPU's worst share over every load, per window.
fn score(boot: &super::boot::BootState, cpu: &CpuSurvey, basis: QuietBasis) -> Option<CpuScore> {
    let worst = |window_ns| cpu.curves.iter().filter_map(|l| counted(boot, cpu.cpu, l, window_ns, basis)).reduce(f64::max);
    Some(CpuScore { cpu: cpu.cpu, at_1ms: worst(MS)?, at_10ms: worst(TIE_WINDOWS_NS[0]), at_100ms: worst(TIE_WINDOWS_NS[1]) })
}

/// Whole percent (as shown) at 1 ms, then 10 ms, then 100 ms: equal
/// percentages are a tie, broken by the next window.
fn rank(s: &CpuScore) -> [i64; 3] {
    let whole = |x: Option<f64>| x.map_or(i64::MAX, |x| (x * 100.0).round() as i64);
    [whole(Some(s.at_1ms)), whole(s.at_10ms), whole(s.at_100ms)]
}

/// The window that told `best` from `next`, when 1 ms did not.
fn tie_broken_at(best: &CpuScore, next: &CpuScore) -> Option<(&'static str, f64, f64)> {
    let (a, b) = (rank(best), rank(next));
    if a[0] != b[0] {
        return None;
    }
    let at = |s: &CpuScore, i: usize| if i == 1 { s.at_10ms } else { s.at_100ms }.unwrap_or(0.0);
    (1..3).find(|&i| a[i] != b[i]).map(|i| (if i == 1 { "10 ms" } else { "100 ms" }, at(best, i), at(next, i)))
}

const RULE_UNMOVABLE: &str = "the CPU whose max-load windows, over every load, hold the least of what no recommendation can move: \
     time no tracepoint saw (the hypervisor, firmware), system vectors (the local timer, IPIs), the local softirqs (TIMER, HRTIMER, \
     SCHED, RCU) and per-CPU kernel threads (ksoftirqd, ktimers, kworker); threads, numbered IRQs and device softirqs (NET_RX, NET_TX, \
     BLOCK) are what the other recommendations move, and none of them sends work to this CPU; on every CPU but the housekeeping \
     CPU 0 the tick, RCU callbacks and load balancing count as moved too, as the recommended boot options (nohz_full=, rcu_nocbs=, \
     isolcpus=domain,) take them off it. Compared at 1 ms in whole percent, a tie broken at 10 ms, then at 100 ms";
const RULE_LOAD: &str = "the CPU whose worst 1 ms window (any load; a loaded run less the idle floor) is lowest, in whole percent, a tie \
     broken at 10 ms, then at 100 ms; some run recorded no gap sources, so what could be moved cannot be told from what could not";

/// With more than one CPU, where a time-critical task is best off: a
/// finding (`quietest-cpu`, with every CPU's score) and the recommendation
/// to steer interrupts off it.
pub(super) fn quietest_cpu(survey: &Survey, out: &mut Out) {
    let Some(choice) = choose(survey) else { return };
    let (best, next) = (&choice.cpus[0], &choice.cpus[1]);
    let tie =
        tie_broken_at(best, next).map(|(w, a, b)| format!("; a tie at 1 ms, broken at {w}: {} vs {}", pct(a), pct(b))).unwrap_or_default();
    let (title, measured, rule) = match choice.basis {
        QuietBasis::Unmovable => (
            format!(
                "CPU {} is the quiet CPU: what nothing here can move takes up to {} of its worst 1 ms window, {} on CPU {}{tie}",
                best.cpu,
                pct(best.at_1ms),
                pct(next.at_1ms),
                next.cpu
            ),
            "the unmovable part of the max-load windows, worst over every load",
            RULE_UNMOVABLE,
        ),
        QuietBasis::Load => (
            format!(
                "CPU {} has the least interference (worst 1 ms window {} vs {} on CPU {}{tie})",
                best.cpu,
                pct(best.at_1ms),
                pct(next.at_1ms),
                next.cpu
            ),
            "the worst max load over every load",
            RULE_LOAD,
        ),
    };
    let per_cpu = choice.cpus.iter().map(describe).collect::<Vec<_>>().join("; ");
    let id = out.find("quietest-cpu".into(), Severity::Note, Some(best.cpu), title, format!("{measured}: {per_cpu}"), rule);
    let best = best.cpu;
    out.last_finding().quiet_cpu = Some(choice);
    let others: Vec<String> = survey.options.cpus.iter().filter(|&&c| c != best).map(|c| c.to_string()).collect();
    if others.is_empty() {
        return;
    }
    let title = format!("Run the most time-critical task on CPU {best} and steer interrupts away from it");
    let rule = format!(
        "CPU {best} is the quiet CPU (its finding's rule); interrupts and their bottom halves run where their IRQ is steered \
         (every IRQ the kernel lets move, and the default for IRQs registered later), and no other recommendation sends work \
         to CPU {best}; then pin the task: taskset -c {best} chrt -f 80 TASK"
    );
    let setting = Declared::Irq { irqs: vec!["*".into(), "default".into()], cpus: others.join(",") };
    out.recommend(&id, Rec::new(Action::QuietCpu, Some(best), title, rule).setting(setting));
}

/// "CPU 0: 100% at 1 ms, 89% at 10 ms, 20% at 100 ms".
fn describe(s: &CpuScore) -> String {
    let mut text = format!("CPU {}: {} at 1 ms", s.cpu, pct(s.at_1ms));
    for (value, window) in [(s.at_10ms, "10 ms"), (s.at_100ms, "100 ms")] {
        if let Some(v) = value {
            text.push_str(&format!(", {} at {window}", pct(v)));
        }
    }
    text
}

/// The CPU the quiet-CPU rule chose, if it ran.
pub(super) fn quietest(out: &Out) -> Option<usize> {
    out.findings.iter().find(|f| f.id == "quietest-cpu").and_then(|f| f.cpu)
}

/// Where work taken off a CPU goes.
pub(super) struct Place {
    /// A CPU list.
    pub cpus: String,
    /// The quiet CPU, when the work can only be kept off it (it stays on
    /// the CPU it was found on, the only other one).
    pub kept_off: Option<usize>,
    pub quiet: Option<usize>,
}

impl Place {
    /// `moved` ("Move inject/4211 FIFO 95 off CPU 1"), or "Keep WHAT off
    /// CPU Q" when the work can only be kept off the quiet CPU.
    pub fn title(&self, what: &str, moved: String) -> String {
        match self.kept_off {
            Some(q) => format!("Keep {what} off CPU {q}"),
            None => moved,
        }
    }

    /// Why there: `subject` ("its handler then runs") on which CPUs.
    pub fn why(&self, subject: &str) -> String {
        match (self.kept_off, self.quiet) {
            (Some(q), _) => format!(
                "CPU {q} is the quiet CPU, kept for your time-critical task, and no other CPU is left to take it: {subject} on CPU {} only, away from CPU {q}",
                self.cpus
            ),
            (None, Some(q)) => format!("{subject} on CPU {}, not on the quiet CPU {q}", self.cpus),
            (None, None) => format!("{subject} on CPU {}", self.cpus),
        }
    }
}

/// Where to move work found on `cpu`: the surveyed CPUs but `cpu` and the
/// quiet CPU; when that leaves none (two CPUs, the work found on the one
/// that is not quiet), every surveyed CPU but the quiet one, so that the
/// work stays off it; `None` when nothing is left (one CPU surveyed).
pub(super) fn elsewhere(survey: &Survey, out: &Out, cpu: usize) -> Option<Place> {
    let quiet = quietest(out);
    let list = |cpus: Vec<usize>| cpus.iter().map(|c| c.to_string()).collect::<Vec<_>>().join(",");
    let away: Vec<usize> = survey.options.cpus.iter().copied().filter(|&c| c != cpu && Some(c) != quiet).collect();
    if !away.is_empty() {
        return Some(Place { cpus: list(away), kept_off: None, quiet });
    }
    let q = quiet.filter(|&q| q != cpu)?;
    let rest: Vec<usize> = survey.options.cpus.iter().copied().filter(|&c| c != q).collect();
    (!rest.is_empty()).then(|| Place { cpus: list(rest), kept_off: Some(q), quiet })
}
