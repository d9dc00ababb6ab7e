//! Why one timer wake-up was late: what ran on its CPU between the
//! programmed expiry and the moment the measuring thread read the clock,
//! from the flight recorder's segments (the gap-source monitor's cut of
//! the CPU's timeline at every hard IRQ, softirq and context switch).
//!
//! The span `[due, woke)` is one gap in the probe's sense, so its sources
//! come from the same composition ([`Timeline::compose`]) and add up to the
//! span exactly: each traced source's overlap, and `unseen` for what no
//! tracepoint covered (the hypervisor holding the vCPU, an SMI, the entry
//! and exit paths around handlers). rtla's `timerlat -a` explains one
//! sample the same way: IRQ, softirq and thread interference, then what is
//! left.

use crate::probe::sources::{RawSegment, Source, SourceKind, Timeline};
use crate::probe::window::Gap;
use serde::{Deserialize, Serialize};

/// What took a late wake-up's time, largest first, and the verdict.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Cause {
    /// The late part: from the programmed expiry to the clock read.
    pub span_ns: u64,
    /// Every source's share of the span, largest first; they add up to it.
    pub sources: Vec<Source>,
    /// The source named as the cause: the largest one other than the
    /// measuring thread's own return from its sleep. `unseen` when
    /// untraced time was the largest; `idle` when the CPU stayed idle past
    /// the expiry (the timer's interrupt came late). None only when the
    /// thread's own path took it all.
    pub culprit: Option<Source>,
    /// One sentence for people; the fields above are for programs.
    pub verdict: String,
    /// The recorder had no segment reaching the wake-up (its ring was
    /// full, or the monitor fell behind): the sources are incomplete.
    pub recorder_gap: bool,
}

/// The cause of a wake-up programmed for `due_ns` and seen at `woke_ns`
/// (CLOCK_MONOTONIC) by thread `watcher_tid`, from the recorder's
/// `segments` of that CPU.
pub fn explain(segments: &[RawSegment], due_ns: u64, woke_ns: u64, watcher_tid: u32) -> Cause {
    let span_ns = woke_ns.saturating_sub(due_ns);
    let timeline = Timeline::new(segments.iter().map(|s| (s.start_ns, s.end_ns, crate::probe::sources::source_id(&s.source))));
    let gap = [Gap { start_ns: due_ns, len_ns: span_ns }];
    let (_, sources) = timeline.compose(&gap, due_ns, span_ns);
    let recorder_gap = !segments.iter().any(|s| s.end_ns >= due_ns) && span_ns > 0;
    let own = |s: &Source| s.pid == Some(watcher_tid);
    let culprit = sources.iter().find(|s| !own(s)).cloned();
    let verdict = verdict(&sources, culprit.as_ref(), span_ns, watcher_tid);
    Cause { span_ns, sources, culprit, verdict, recorder_gap }
}

fn us(ns: u64) -> String {
    format!("{:.0} us", ns as f64 / 1e3)
}

fn verdict(sources: &[Source], culprit: Option<&Source>, span_ns: u64, watcher_tid: u32) -> String {
    let Some(c) = culprit else {
        let own: u64 = sources.iter().filter(|s| s.pid == Some(watcher_tid)).map(|s| s.ns).sum();
        return format!("the measuring thread's own wake-up path ({} of {}), nothing else ran", us(own), us(span_ns));
    };
    let share = if span_ns > 0 { 100.0 * c.ns as f64 / span_ns as f64 } else { 0.0 };
    if c.label == "idle" && c.pid.is_none() {
        return format!(
            "exit from idle: the CPU stayed idle for {} of the {} late ({share:.0}%), its timer interrupt late \
             (a deep C-state's exit, or on a VM the hypervisor delivering it late)",
            us(c.ns),
            us(span_ns)
        );
    }
    match c.kind {
        SourceKind::Unseen => format!(
            "nothing traced ran for {} of the {} late ({share:.0}%): the hypervisor holding the vCPU, firmware (SMI), \
             or a kernel section with interrupts off",
            us(c.ns),
            us(span_ns)
        ),
        SourceKind::Irq => format!("hard IRQ {}: {} of the {} late ({share:.0}%)", c.label, us(c.ns), us(span_ns)),
        SourceKind::Softirq => format!("softirq {}: {} of the {} late ({share:.0}%)", c.label, us(c.ns), us(span_ns)),
        SourceKind::Thread => format!("thread {} ran {} of the {} late ({share:.0}%)", c.label, us(c.ns), us(span_ns)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::probe::sources::RawSource;

    /// Kinds as the BPF program sends them.
    const IRQ: u32 = 1;
    const SOFTIRQ: u32 = 2;
    const THREAD: u32 = 3;
    const SYSVEC: u32 = 4;

    fn seg(start_ns: u64, end_ns: u64, kind: u32, id: u32, policy: u32, rt_priority: u32, name: &str) -> RawSegment {
        RawSegment { start_ns, end_ns, source: RawSource { kind, id, tgid: id, policy, rt_priority, nice: 0, name: name.into() } }
    }

    #[test]
    fn a_higher_priority_thread_is_named_with_its_pid() {
        // Due at 1,000; the injector (FIFO 90) runs 1,000..900,000, the
        // timer IRQ at 900,000..905,000, the watcher from 905,000.
        let segs = [
            seg(0, 1_000, THREAD, 0, 0, 0, "swapper/1"),
            seg(1_000, 900_000, THREAD, 4242, 1, 90, "inject"),
            seg(900_000, 905_000, SYSVEC, 1, 0, 0, ""),
            seg(905_000, 910_000, THREAD, 77, 1, 80, "irqlab-watch"),
        ];
        let c = explain(&segs, 1_000, 908_000, 77);
        assert_eq!(c.span_ns, 907_000);
        assert_eq!(c.sources.iter().map(|s| s.ns).sum::<u64>(), c.span_ns, "the sources add up to the span");
        let culprit = c.culprit.unwrap();
        assert_eq!((culprit.pid, culprit.kind, culprit.ns), (Some(4242), SourceKind::Thread, 899_000));
        assert!(culprit.label.starts_with("inject/4242"), "{}", culprit.label);
        assert!(c.verdict.starts_with("thread inject/4242 FIFO 90 ran 899 us"), "{}", c.verdict);
        assert!(!c.recorder_gap);
    }

    #[test]
    fn untraced_time_is_named_unseen_never_an_empty_cause() {
        // Nothing traced between the idle task's end and the watcher.
        let segs = [seg(0, 2_000, THREAD, 0, 0, 0, "swapper/1"), seg(600_000, 610_000, THREAD, 77, 1, 80, "irqlab-watch")];
        let c = explain(&segs, 1_000, 605_000, 77);
        let culprit = c.culprit.unwrap();
        assert_eq!((culprit.kind, culprit.ns), (SourceKind::Unseen, 598_000));
        assert!(c.verdict.starts_with("nothing traced ran for 598 us of the 604 us late"), "{}", c.verdict);
    }

    #[test]
    fn softirq_and_irq_are_named_by_vector_and_handler() {
        let segs = [
            seg(1_000, 11_000, IRQ, 11, 0, 0, "virtio0"),
            seg(11_000, 311_000, SOFTIRQ, 3, 0, 0, ""),
            seg(311_000, 320_000, THREAD, 77, 1, 80, "irqlab-watch"),
        ];
        let c = explain(&segs, 1_000, 315_000, 77);
        let names: Vec<(&str, u64)> = c.sources.iter().map(|s| (s.label.as_str(), s.ns)).collect();
        assert_eq!(names, vec![("NET_RX", 300_000), ("irq 11 virtio0", 10_000), ("irqlab-watch/77 FIFO 80", 4_000)]);
        assert_eq!(c.culprit.unwrap().label, "NET_RX");
        assert!(c.verdict.starts_with("softirq NET_RX: 300 us of the 314 us late"), "{}", c.verdict);
    }

    #[test]
    fn only_idle_and_the_thread_itself_is_an_exit_from_idle() {
        let segs = [seg(0, 40_000, THREAD, 0, 0, 0, "swapper/1"), seg(40_000, 50_000, THREAD, 77, 1, 80, "irqlab-watch")];
        let c = explain(&segs, 1_000, 45_000, 77);
        assert_eq!(c.culprit.map(|s| (s.label, s.ns)), Some(("idle".into(), 39_000)));
        assert!(c.verdict.starts_with("exit from idle: the CPU stayed idle for 39 us of the 44 us late (89%)"), "{}", c.verdict);
        // A small IRQ beside a long idle stretch is not the cause.
        let segs = [
            seg(0, 2_000_000, THREAD, 0, 0, 0, "swapper/1"),
            seg(2_000_000, 2_009_000, SYSVEC, 1, 0, 0, ""),
            seg(2_009_000, 2_020_000, THREAD, 77, 1, 80, "irqlab-watch"),
        ];
        let c = explain(&segs, 1_000, 2_010_000, 77);
        assert_eq!(c.culprit.unwrap().label, "idle");
        // Only the thread's own path: no culprit, and the verdict says so.
        let c = explain(&[seg(0, 50_000, THREAD, 77, 1, 80, "irqlab-watch")], 1_000, 45_000, 77);
        assert_eq!(c.culprit, None);
        assert!(c.verdict.starts_with("the measuring thread's own wake-up path (44 us of 44 us)"), "{}", c.verdict);
    }

    #[test]
    fn a_recorder_without_segments_says_so() {
        let c = explain(&[], 1_000, 600_000, 77);
        assert!(c.recorder_gap);
        assert_eq!(c.culprit.unwrap().kind, SourceKind::Unseen);
    }
}
