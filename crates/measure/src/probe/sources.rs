//! Who interfered: what ran on the probed CPU during the probe's gaps
//! (issue 43). A BPF monitor (`bpf/gap_sources.bpf.c`) cuts the probed
//! CPU's timeline at every hard IRQ, system vector, softirq and context
//! switch boundary and sends each piece as a segment charged to the
//! innermost context. Here the segments are lined up with the gaps: the
//! part of a gap a segment covers is that source's; what no segment covers
//! is `unseen` (the hypervisor stopping the vCPU, SMIs, the entry and exit
//! paths around each handler, the probe's own clock reads). So the sources
//! of any stretch of gaps add up to its gap time exactly, by construction.
//!
//! The segments' clock is CLOCK_MONOTONIC (`bpf_ktime_get_ns`); the probe's
//! gaps are in ns since its first clock read, mapped to CLOCK_MONOTONIC by
//! the calibration pairs that bracket the run ([`super::run`]).

use super::window::Gap;
use irqlab_host::error::{Error, Result};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// What kind of context a source is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SourceKind {
    /// A hard IRQ handler (by number and action name) or an x86 system
    /// vector (local timer, IPIs).
    Irq,
    /// A softirq vector (NET_RX, TIMER, ...), wherever it ran.
    Softirq,
    /// A thread that ran instead of the probe (kernel threads included).
    Thread,
    /// Gap time no tracepoint accounted for.
    Unseen,
}

/// One source's share of a window's busy time.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Source {
    /// `irq 11 virtio0`, `irq LOC timer`, `NET_RX`, `inject/4211 FIFO 95`,
    /// `ksoftirqd/1/23 OTHER`, `unseen`.
    pub label: String,
    pub kind: SourceKind,
    /// Thread id (threads only): what `irqlab control threads pid:N` takes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    /// The thread's policy in `irqlab control threads --policy` spelling
    /// (`fifo:95`, `other`, `other:5`, `idle`), so that a command can move
    /// it and keep it; `None` for other kinds and for policies that
    /// spelling cannot restate (batch, deadline).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<String>,
    pub ns: u64,
}

/// The composition of one window length's maximum-load window.
///
/// `busy_ns` is the gap time in `[start_ns, start_ns + window_ns]` (the
/// window that set the curve's `max_load` for `window_ns`, before any
/// baseline was subtracted), and the `sources`' `ns` add up to it exactly.
/// Sources are sorted by `ns`, largest first; `unseen` is one of them when
/// it is not zero.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WindowSources {
    pub window_ns: u64,
    /// Where the window starts, ns since the start of the run.
    pub start_ns: u64,
    pub busy_ns: u64,
    pub sources: Vec<Source>,
}

/// The `sources` of a curve document: whether the run has them, why not
/// when it has none, and the composition of each window length's
/// maximum-load window (one entry per curve point, same `window_ns`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GapSources {
    pub available: bool,
    /// What the monitor did or why it could not run.
    pub note: String,
    /// Segments received from the kernel.
    pub segments: u64,
    /// Segments the ring buffer had no room for: their time is counted as
    /// `unseen`.
    pub lost_segments: u64,
    #[serde(default)]
    pub windows: Vec<WindowSources>,
    /// Each source's share of the whole run's gaps: how many gaps it ran
    /// in, its time there and its most in one gap (`unseen` included).
    /// What `irqlab sim --from-survey` calibrates a source's rate and
    /// cost from. Absent in documents written before it existed.
    #[serde(default)]
    pub totals: Vec<SourceTotal>,
}

/// One source over the whole run: the gaps it took time from.
///
/// A gap is one burst as the probe saw it, so `gaps` counts bursts, not
/// handler calls: a timer tick whose softirq follows it is one gap for
/// each, a thread interrupted by an IRQ in the same gap is one burst.
/// `unseen` counts only the gaps in which no source was seen; the unseen
/// time of any other gap is its largest source's `unseen_ns`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SourceTotal {
    pub label: String,
    pub kind: SourceKind,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<String>,
    /// Gaps in which it ran.
    pub gaps: u64,
    /// Its time in all gaps.
    pub ns: u64,
    /// The most of one gap it took.
    pub max_ns: u64,
    /// Unseen time of the gaps it was the largest source of (the paths
    /// into and out of it no tracepoint covers).
    #[serde(default)]
    pub unseen_ns: u64,
    /// Threads: the gaps in which it was the first thread to run after a
    /// reschedule IPI (`irq RES resched IPI`): woken from another CPU
    /// (`ttwu_queue_wakelist`), so its wake-ups cost this CPU the IPI.
    /// Zero for other kinds and in documents written before it existed.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub woken_by_resched_ipi: u64,
    /// The reschedule IPI's time in those gaps: all of it there (its
    /// seen time, and the gap's unseen time where the IPI was the gap's
    /// largest source): a part of the RES source's `ns + unseen_ns`,
    /// which keeps them too. Each gap's RES time is one thread's, so the
    /// threads' parts add up to at most the RES source's total, and the
    /// rest is the IPIs no thread followed in their gap.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub resched_ipi_ns: u64,
    /// The most seen RES time of one of those gaps (as `max_ns`).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub resched_ipi_max_ns: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// What a stalld boost adds to the label of the thread it boosted.
pub const STALLD_BOOST: &str = "(stalld's boost)";

impl GapSources {
    /// Names stalld's boosts (issue 54): where stalld runs (`stalld`, its
    /// pids), a thread seen at SCHED_DEADLINE that is no longer at it
    /// after the run (`policy_now`: its policy number now, None where it
    /// exited) ran as stalld's boost (SCHED_DEADLINE for a few seconds,
    /// then its own policy back), not as a deadline task of its own: its
    /// label says so, and the note. How many threads were named.
    pub fn name_stalld_boosts(&mut self, stalld: &[i32], policy_now: impl Fn(u32) -> Option<u32>) -> usize {
        const SCHED_DEADLINE: u32 = 6;
        if stalld.is_empty() {
            return 0;
        }
        let boosted = |kind: SourceKind, label: &str, pid: Option<u32>| {
            kind == SourceKind::Thread && label.ends_with(" DEADLINE") && pid.and_then(&policy_now).is_some_and(|now| now != SCHED_DEADLINE)
        };
        let mut named: Vec<u32> = Vec::new();
        let sources = self.windows.iter_mut().flat_map(|w| w.sources.iter_mut().map(|s| (s.kind, &mut s.label, s.pid)));
        let totals = self.totals.iter_mut().map(|t| (t.kind, &mut t.label, t.pid));
        for (kind, label, pid) in sources.chain(totals) {
            if boosted(kind, label, pid) {
                label.push(' ');
                label.push_str(STALLD_BOOST);
                named.extend(pid.filter(|p| !named.contains(p)));
            }
        }
        if !named.is_empty() {
            let pids = stalld.iter().map(i32::to_string).collect::<Vec<_>>().join(", ");
            self.note.push_str(&format!(
                "; {} thread(s) ran at SCHED_DEADLINE and were back at their own policy after the run while stalld (pid {pids}) ran: \
                 stalld's boosts, named so",
                named.len()
            ));
        }
        named.len()
    }

    /// No sources, and why.
    pub fn off(note: impl Into<String>) -> Self {
        GapSources { available: false, note: note.into(), segments: 0, lost_segments: 0, windows: Vec::new(), totals: Vec::new() }
    }

    /// The composition of the maximum-load window of `window_ns`.
    pub fn window(&self, window_ns: u64) -> Option<&WindowSources> {
        self.windows.iter().find(|w| w.window_ns == window_ns)
    }

    /// The composition of the window length nearest `window_ns` (log
    /// scale), as a curve's `load_at` picks its point.
    pub fn nearest(&self, window_ns: u64) -> Option<&WindowSources> {
        let distance = |w: u64| ((w.max(1) as f64).ln() - (window_ns.max(1) as f64).ln()).abs();
        self.windows.iter().min_by(|a, b| distance(a.window_ns).total_cmp(&distance(b.window_ns)))
    }

    /// The sources of every max-load window as stacked layers, bottom to
    /// top: the `named` sources that take the largest share of any window,
    /// then `others`, then `unseen`. Each point is (window_ns, top of the
    /// layer as a fraction of the window), so the last layer's top is the
    /// raw max-load curve. Layers that are zero everywhere are left out.
    pub fn layers(&self, named: usize) -> Vec<Layer> {
        if !self.available || self.windows.is_empty() {
            return Vec::new();
        }
        // Rank by the largest share a source takes of any window.
        let mut share: std::collections::BTreeMap<&str, f64> = Default::default();
        for w in &self.windows {
            for x in w.sources.iter().filter(|x| x.kind != SourceKind::Unseen) {
                let v = share.entry(x.label.as_str()).or_default();
                *v = v.max(x.ns as f64 / w.window_ns as f64);
            }
        }
        let mut ranked: Vec<(&str, f64)> = share.into_iter().collect();
        ranked.sort_by(|a, b| b.1.total_cmp(&a.1));
        let names: Vec<&str> = ranked.iter().take(named).map(|r| r.0).collect();
        let mut layers: Vec<Layer> = names.iter().map(|n| Layer { name: n.to_string(), points: Vec::new() }).collect();
        layers.push(Layer { name: "others".into(), points: Vec::new() });
        layers.push(Layer { name: "unseen".into(), points: Vec::new() });
        for w in &self.windows {
            let of = |pred: &dyn Fn(&Source) -> bool| {
                w.sources.iter().filter(|s| pred(s)).map(|s| s.ns).sum::<u64>() as f64 / w.window_ns as f64
            };
            let mut top = 0.0;
            for (i, layer) in layers.iter_mut().enumerate() {
                top += match i {
                    _ if i < names.len() => of(&|s| s.label == layer.name),
                    _ if layer.name == "unseen" => of(&|s| s.kind == SourceKind::Unseen),
                    _ => of(&|s| s.kind != SourceKind::Unseen && !names.contains(&s.label.as_str())),
                };
                layer.points.push((w.window_ns, top.min(1.0)));
            }
        }
        layers.retain(|l| l.points.iter().any(|&(_, y)| y > 0.0));
        layers
    }
}

/// One layer of [`GapSources::layers`]: (window_ns, top as a fraction).
#[derive(Debug, Clone, PartialEq)]
pub struct Layer {
    pub name: String,
    pub points: Vec<(u64, f64)>,
}

/// Who a segment is charged to (its label, kind and thread id).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SourceId {
    pub label: String,
    pub kind: SourceKind,
    pub pid: Option<u32>,
    /// Threads: `--policy` spelling (see [`Source::policy`]).
    pub policy: Option<String>,
}

/// A stretch of the probed CPU's time one source ran, in ns since the
/// start of the run. Segments are disjoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Segment {
    pub start_ns: u64,
    pub end_ns: u64,
    /// Index into the source table.
    pub source: usize,
}

/// Segments with their source table, sorted by start.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Timeline {
    pub sources: Vec<SourceId>,
    pub segments: Vec<Segment>,
}

impl Timeline {
    /// Builds a timeline from (start, end, source) in any order; source
    /// ids are interned. Overlaps (which one CPU's exclusive segments do
    /// not have) are cut so no time is counted twice.
    pub fn new(raw: impl IntoIterator<Item = (u64, u64, SourceId)>) -> Self {
        let mut index: HashMap<SourceId, usize> = HashMap::new();
        let mut t = Timeline::default();
        for (start_ns, end_ns, id) in raw {
            if end_ns <= start_ns {
                continue;
            }
            let next = t.sources.len();
            let source = *index.entry(id.clone()).or_insert(next);
            if source == next {
                t.sources.push(id);
            }
            t.segments.push(Segment { start_ns, end_ns, source });
        }
        t.segments.sort_by_key(|s| (s.start_ns, s.end_ns));
        let mut floor = 0;
        t.segments.retain_mut(|s| {
            s.start_ns = s.start_ns.max(floor);
            floor = floor.max(s.end_ns);
            s.end_ns > s.start_ns
        });
        t
    }

    /// Adds each source's overlap with `[a, b)` to `into` (by source index);
    /// returns the total added (at most `b - a`, segments being disjoint).
    fn overlap(&self, a: u64, b: u64, into: &mut HashMap<usize, u64>) -> u64 {
        let mut seen = 0;
        let first = self.segments.partition_point(|s| s.end_ns <= a);
        for s in self.segments[first..].iter().take_while(|s| s.start_ns < b) {
            let ns = s.end_ns.min(b).saturating_sub(s.start_ns.max(a));
            if ns > 0 {
                *into.entry(s.source).or_default() += ns;
                seen += ns;
            }
        }
        seen
    }

    /// The sources of the gap time in `[t, t + window]`: each source's
    /// overlap with the gaps there, `unseen` the rest. Their sum is the gap
    /// time in the window (conservation).
    pub fn compose(&self, gaps: &[Gap], t: u64, window: u64) -> (u64, Vec<Source>) {
        let end = t.saturating_add(window);
        let mut per: HashMap<usize, u64> = HashMap::new();
        let (mut busy, mut seen) = (0u64, 0u64);
        let first = gaps.partition_point(|g| g.start_ns + g.len_ns <= t);
        for g in gaps[first..].iter().take_while(|g| g.start_ns < end) {
            let (a, b) = (g.start_ns.max(t), (g.start_ns + g.len_ns).min(end));
            if b > a {
                busy += b - a;
                seen += self.overlap(a, b, &mut per);
            }
        }
        let mut out: Vec<Source> = per
            .into_iter()
            .map(|(i, ns)| {
                let id = &self.sources[i];
                Source { label: id.label.clone(), kind: id.kind, pid: id.pid, policy: id.policy.clone(), ns }
            })
            .collect();
        let unseen = busy - seen;
        if unseen > 0 {
            out.push(Source { label: "unseen".into(), kind: SourceKind::Unseen, pid: None, policy: None, ns: unseen });
        }
        out.sort_by(|x, y| y.ns.cmp(&x.ns).then_with(|| x.label.cmp(&y.label)));
        (busy, out)
    }

    /// Every source's [`SourceTotal`] over all `gaps`, largest time first.
    /// The unseen time of a gap in which a source was seen is that gap's
    /// largest source's `unseen_ns` (the entry, exit and switch paths
    /// around it); `unseen` itself counts only gaps in which nothing was
    /// seen. So all `ns` and `unseen_ns` add up to the gap time.
    ///
    /// A gap's reschedule IPI time (its RES seen time, and the gap's unseen
    /// time when RES led it) is also the wake-up's of the thread that ran
    /// first after the gap's first RES segment, when one did:
    /// that thread's `woken_by_resched_ipi` and `resched_ipi_ns`. A part,
    /// not a move: the RES source keeps its `ns` and `unseen_ns`, so the
    /// conservation above holds as it did, and a gap's RES time goes to
    /// one thread at most, so the parts never add up to more than RES's.
    pub fn totals(&self, gaps: &[Gap]) -> Vec<SourceTotal> {
        #[derive(Default)]
        struct Sum {
            gaps: u64,
            ns: u64,
            max_ns: u64,
            unseen_ns: u64,
            woken: u64,
            resched_ns: u64,
            resched_max_ns: u64,
        }
        // Per source index; `None` for unseen.
        let mut per: HashMap<Option<usize>, Sum> = HashMap::new();
        let mut in_gap: HashMap<usize, u64> = HashMap::new();
        let resched = resched_ipi();
        let res = self.sources.iter().position(|s| *s == resched);
        for g in gaps {
            in_gap.clear();
            let seen = self.overlap(g.start_ns, g.start_ns + g.len_ns, &mut in_gap);
            let unseen = g.len_ns - seen;
            // The gap's lead: its largest seen source (the lower index on a tie).
            let lead = in_gap.iter().max_by(|a, b| a.1.cmp(b.1).then_with(|| b.0.cmp(a.0))).map(|(&i, _)| i);
            if let Some(woken) = res.and_then(|r| self.woken_after(g.start_ns, g.start_ns + g.len_ns, r)) {
                let res_ns = res.and_then(|r| in_gap.get(&r)).copied().unwrap_or(0);
                let t = per.entry(Some(woken)).or_default();
                t.woken += 1;
                t.resched_ns += res_ns + if lead == res { unseen } else { 0 };
                t.resched_max_ns = t.resched_max_ns.max(res_ns);
            }
            for (&i, &ns) in &in_gap {
                let t = per.entry(Some(i)).or_default();
                t.gaps += 1;
                t.ns += ns;
                t.max_ns = t.max_ns.max(ns);
                if Some(i) == lead {
                    t.unseen_ns += unseen;
                }
            }
            if lead.is_none() && unseen > 0 {
                let t = per.entry(None).or_default();
                t.gaps += 1;
                t.ns += unseen;
                t.max_ns = t.max_ns.max(unseen);
            }
        }
        let mut out: Vec<SourceTotal> = per
            .into_iter()
            .map(|(source, t)| {
                let (label, kind, pid, policy) = match source {
                    Some(i) => {
                        let id = &self.sources[i];
                        (id.label.clone(), id.kind, id.pid, id.policy.clone())
                    }
                    None => ("unseen".to_string(), SourceKind::Unseen, None, None),
                };
                SourceTotal {
                    label,
                    kind,
                    pid,
                    policy,
                    gaps: t.gaps,
                    ns: t.ns,
                    max_ns: t.max_ns,
                    unseen_ns: t.unseen_ns,
                    woken_by_resched_ipi: t.woken,
                    resched_ipi_ns: t.resched_ns,
                    resched_ipi_max_ns: t.resched_max_ns,
                }
            })
            .collect();
        out.sort_by(|x, y| y.ns.cmp(&x.ns).then_with(|| x.label.cmp(&y.label)));
        out
    }

    /// The thread (source index) that ran first in `[a, b)` after the
    /// first segment of source `res` there: the one a reschedule IPI woke.
    /// Threads only (the idle task, which has no pid, is none).
    fn woken_after(&self, a: u64, b: u64, res: usize) -> Option<usize> {
        let first = self.segments.partition_point(|s| s.end_ns <= a);
        let mut within = self.segments[first..].iter().take_while(|s| s.start_ns < b);
        let ipi = within.find(|s| s.source == res)?;
        let is_thread = |i: usize| self.sources[i].kind == SourceKind::Thread && self.sources[i].pid.is_some();
        within.find(|s| s.start_ns >= ipi.end_ns && is_thread(s.source)).map(|s| s.source)
    }
}

/// Where a window of `window` ns with the most gap time starts, and that
/// gap time; `None` when the run is shorter than the window. The candidates
/// are those of [`super::window::GapIndex`]: a window starting at a gap's
/// start, ending at a gap's end, or at either end of the run; of equal
/// maxima the earliest.
pub fn max_window(gaps: &[Gap], total_ns: u64, window: u64) -> Option<(u64, u64)> {
    if window == 0 || window > total_ns {
        return None;
    }
    // before[k]: gap time of gaps 0..k.
    let mut before = Vec::with_capacity(gaps.len() + 1);
    before.push(0u64);
    for g in gaps {
        before.push(before.last().copied().unwrap_or(0) + g.len_ns);
    }
    // Gap time in [0, x].
    let upto = |x: u64| {
        let k = gaps.partition_point(|g| g.start_ns < x);
        match k.checked_sub(1) {
            None => 0,
            Some(j) => before[j] + (gaps[j].start_ns + gaps[j].len_ns).min(x) - gaps[j].start_ns,
        }
    };
    let last = total_ns - window;
    let candidates = gaps
        .iter()
        .map(|g| g.start_ns)
        .chain(gaps.iter().filter_map(|g| (g.start_ns + g.len_ns).checked_sub(window)))
        .chain([0, last])
        .filter(|&t| t <= last);
    let mut best: Option<(u64, u64)> = None;
    for t in candidates {
        let busy = upto(t + window) - upto(t);
        if best.is_none_or(|(bt, bb)| busy > bb || (busy == bb && t < bt)) {
            best = Some((t, busy));
        }
    }
    best
}

/// The composition of each window length's maximum-load window.
pub fn per_window(timeline: &Timeline, gaps: &[Gap], total_ns: u64, windows_ns: &[u64]) -> Vec<WindowSources> {
    windows_ns
        .iter()
        .filter_map(|&w| {
            let (start_ns, _) = max_window(gaps, total_ns, w)?;
            let (busy_ns, sources) = timeline.compose(gaps, start_ns, w);
            Some(WindowSources { window_ns: w, start_ns, busy_ns, sources })
        })
        .collect()
}

/// Linux's softirq vector names (`include/linux/interrupt.h`).
const SOFTIRQ_NAMES: [&str; 10] = ["HI", "TIMER", "NET_TX", "NET_RX", "BLOCK", "IRQ_POLL", "TASKLET", "SCHED", "HRTIMER", "RCU"];

fn policy_name(policy: u32) -> &'static str {
    match policy {
        0 => "OTHER",
        1 => "FIFO",
        2 => "RR",
        3 => "BATCH",
        5 => "IDLE",
        6 => "DEADLINE",
        _ => "policy?",
    }
}

/// A thread's policy as `irqlab control threads --policy` takes it, where
/// that spelling can restate it.
fn policy_spec(policy: u32, rt_priority: u32, nice: i32) -> Option<String> {
    match policy {
        0 if nice != 0 => Some(format!("other:{nice}")),
        0 => Some("other".into()),
        1 => Some(format!("fifo:{rt_priority}")),
        2 => Some(format!("rr:{rt_priority}")),
        5 => Some("idle".into()),
        _ => None,
    }
}

/// A segment record's source, as the BPF program describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawSource {
    pub kind: u32,
    pub id: u32,
    pub tgid: u32,
    pub policy: u32,
    pub rt_priority: u32,
    pub nice: i32,
    pub name: String,
}

/// The reschedule IPI's source (`irq RES resched IPI`), as [`source_id`]
/// names the x86 system vector: what a thread woken from another CPU
/// costs the CPU it runs on.
pub fn resched_ipi() -> SourceId {
    let vector = RawSource {
        kind: consts::GS_KIND_SYSVEC as u32,
        id: consts::GS_SYSVEC_RESCHEDULE as u32,
        tgid: 0,
        policy: 0,
        rt_priority: 0,
        nice: 0,
        name: String::new(),
    };
    source_id(&vector)
}

/// The label a report shows for a source. Threads are `comm/tid` with
/// their policy and priority as they were when the segment ended.
pub fn source_id(r: &RawSource) -> SourceId {
    const IRQ: u32 = consts::GS_KIND_IRQ as u32;
    const SOFTIRQ: u32 = consts::GS_KIND_SOFTIRQ as u32;
    const THREAD: u32 = consts::GS_KIND_THREAD as u32;
    const SYSVEC: u32 = consts::GS_KIND_SYSVEC as u32;
    const LOCAL_TIMER: u32 = consts::GS_SYSVEC_LOCAL_TIMER as u32;
    const RESCHEDULE: u32 = consts::GS_SYSVEC_RESCHEDULE as u32;
    const CALL_FUNCTION: u32 = consts::GS_SYSVEC_CALL_FUNCTION as u32;
    const CALL_FUNCTION_SINGLE: u32 = consts::GS_SYSVEC_CALL_FUNCTION_SINGLE as u32;
    match r.kind {
        IRQ => {
            SourceId { label: format!("irq {} {}", r.id, r.name).trim_end().to_string(), kind: SourceKind::Irq, pid: None, policy: None }
        }
        SYSVEC => {
            let name = match r.id {
                LOCAL_TIMER => "LOC timer",
                RESCHEDULE => "RES resched IPI",
                CALL_FUNCTION => "CAL function IPI",
                CALL_FUNCTION_SINGLE => "CAL function-single IPI",
                _ => "system vector",
            };
            SourceId { label: format!("irq {name}"), kind: SourceKind::Irq, pid: None, policy: None }
        }
        SOFTIRQ => {
            let label = SOFTIRQ_NAMES.get(r.id as usize).map_or_else(|| format!("softirq {}", r.id), |n| (*n).to_string());
            SourceId { label, kind: SourceKind::Softirq, pid: None, policy: None }
        }
        THREAD if r.id == 0 => SourceId { label: "idle".into(), kind: SourceKind::Thread, pid: None, policy: None },
        THREAD => {
            let prio = match r.policy {
                1 | 2 => format!(" {}", r.rt_priority),
                _ if r.nice != 0 => format!(" nice {}", r.nice),
                _ => String::new(),
            };
            SourceId {
                label: format!("{}/{} {}{prio}", r.name, r.id, policy_name(r.policy)),
                kind: SourceKind::Thread,
                pid: Some(r.id),
                policy: policy_spec(r.policy, r.rt_priority, r.nice),
            }
        }
        _ => SourceId { label: format!("source kind {}", r.kind), kind: SourceKind::Irq, pid: None, policy: None },
    }
}

/// One segment as received, CLOCK_MONOTONIC ns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawSegment {
    pub start_ns: u64,
    pub end_ns: u64,
    pub source: RawSource,
}

/// Turns received segments into a timeline relative to the probe's run
/// start (`origin_mono_ns`, CLOCK_MONOTONIC), dropping the probe thread's
/// own segments (`probe_tid`) and everything outside `[0, total_ns]`.
pub fn timeline(raw: &[RawSegment], origin_mono_ns: u64, total_ns: u64, probe_tid: Option<u32>) -> Timeline {
    Timeline::new(raw.iter().filter(|s| !(s.source.kind == 3 && Some(s.source.id) == probe_tid)).filter_map(|s| {
        let a = s.start_ns.saturating_sub(origin_mono_ns).min(total_ns);
        let b = s.end_ns.saturating_sub(origin_mono_ns).min(total_ns);
        (b > a).then(|| (a, b, source_id(&s.source)))
    }))
}

/// The curve's `sources` from what the monitor collected (or why it has
/// none): segments moved onto the run's time base (`origin_mono_ns`, the
/// loop's first read on CLOCK_MONOTONIC), the probe thread's own dropped,
/// and each window length's maximum-load window composed.
pub fn assemble(
    collected: std::result::Result<Collected, String>,
    cpu: usize,
    origin_mono_ns: u64,
    probe_tid: Option<u32>,
    gaps: &[Gap],
    total_ns: u64,
    windows_ns: &[u64],
) -> GapSources {
    let c = match collected {
        Ok(c) => c,
        Err(why) => return GapSources::off(why),
    };
    let timeline = timeline(&c.segments, origin_mono_ns, total_ns, probe_tid);
    let mut note = format!("BPF monitor on CPU {cpu}: {} segments", c.segments.len());
    if c.lost > 0 {
        note.push_str(&format!(", {} lost (ring buffer full; their time counts as unseen)", c.lost));
    }
    if !c.missing.is_empty() {
        note.push_str(&format!("; no tracepoint {} on this kernel (that time counts as unseen)", c.missing.join(", ")));
    }
    GapSources {
        available: true,
        note,
        segments: c.segments.len() as u64,
        lost_segments: c.lost,
        windows: per_window(&timeline, gaps, total_ns, windows_ns),
        totals: timeline.totals(gaps),
    }
}

/// Where a streaming monitor sends each batch of segments it reads.
pub type SegmentSink = Box<dyn FnMut(Vec<RawSegment>) + Send>;

/// What the monitor collected.
#[derive(Debug, Clone, Default)]
pub struct Collected {
    pub segments: Vec<RawSegment>,
    pub lost: u64,
    /// Optional tracepoints (system vectors) this kernel lacks.
    pub missing: Vec<String>,
}

/// The BPF monitor of the probed CPU, running on a thread of its own (off
/// that CPU) until [`Monitor::finish`].
pub struct Monitor {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<std::result::Result<Collected, String>>>,
}

use irqlab_host::tracepoints::SYSTEM_VECTORS;

irqlab_host::bpf_program!("gap_sources");

// SAFETY: generated from the program's BTF: a #[repr(C)] struct of
// integers and a char array, for which every bit pattern is valid.
unsafe impl irqlab_host::bpf::Plain for skel::types::gs_segment {}

/// A libbpf error as this monitor's (a note on the curve, not a failed run).
fn bpf_err(what: &str) -> impl FnOnce(libbpf_rs::Error) -> String + '_ {
    move |e| irqlab_host::bpf::err(what)(e).to_string()
}

/// A segment record out of the ring buffer, through the skeleton's
/// generated type.
fn decode(bytes: &[u8]) -> Option<RawSegment> {
    let s: skel::types::gs_segment = irqlab_host::bpf::read(bytes)?;
    let name: Vec<u8> = s.name.iter().take_while(|&&c| c != 0).map(|&c| c as u8).collect();
    Some(RawSegment {
        start_ns: s.start_ns,
        end_ns: s.end_ns,
        source: RawSource {
            kind: s.kind,
            id: s.id,
            tgid: s.tgid,
            policy: s.policy,
            rt_priority: s.rt_priority,
            nice: s.nice,
            name: String::from_utf8_lossy(&name).into_owned(),
        },
    })
}

/// How often the reader empties the ring buffer: 8 MB of 64-byte segments
/// hold 131072, some 50 ms of a CPU switching and interrupted at 2.6 MHz.
const POLL: Duration = Duration::from_millis(20);

impl Monitor {
    /// [`Monitor::start`] when `wanted`; otherwise, or when it cannot run,
    /// the note a curve without sources carries.
    pub fn start_if(wanted: bool, cpu: usize) -> std::result::Result<Monitor, String> {
        if wanted {
            Monitor::start(cpu).map_err(|e| format!("sources unavailable: {e}"))
        } else {
            Err("sources not asked for (--no-sources)".to_string())
        }
    }

    /// Loads and attaches the monitor for `cpu`; returns once it is
    /// attached. Errors say why it cannot run (privilege, BTF, verifier).
    pub fn start(cpu: usize) -> Result<Monitor> {
        Monitor::spawn(cpu, None)
    }

    /// As [`Monitor::start`], but each batch of segments read goes to
    /// `sink` as it comes (every 20 ms) instead of being kept: what a run
    /// of any length needs (`irqlab watch`'s flight recorder). The
    /// [`Collected`] of [`Monitor::finish`] then has no segments.
    pub fn stream(cpu: usize, sink: SegmentSink) -> Result<Monitor> {
        Monitor::spawn(cpu, Some(sink))
    }

    fn spawn(cpu: usize, sink: Option<SegmentSink>) -> Result<Monitor> {
        irqlab_host::privilege::require_bpf("watch the probed CPU for gap sources")?;
        let stop = Arc::new(AtomicBool::new(false));
        let (tx, rx) = std::sync::mpsc::channel::<std::result::Result<(), String>>();
        let halt = stop.clone();
        let thread = std::thread::Builder::new()
            .name("irqlab-sources".into())
            .spawn(move || watch(cpu, &halt, &tx, sink))
            .map_err(|e| Error::io("spawning the gap-source monitor", e))?;
        match rx.recv() {
            Ok(Ok(())) => Ok(Monitor { stop, thread: Some(thread) }),
            Ok(Err(why)) => {
                let _ = thread.join();
                Err(Error::Failed(why))
            }
            Err(_) => Err(Error::Failed("the gap-source monitor thread died".into())),
        }
    }

    /// Stops the monitor and returns what it collected.
    pub fn finish(mut self) -> Result<Collected> {
        self.stop.store(true, Ordering::Relaxed);
        match self.thread.take().map(|t| t.join()) {
            Some(Ok(Ok(c))) => Ok(c),
            Some(Ok(Err(why))) => Err(Error::Failed(why)),
            _ => Err(Error::Failed("the gap-source monitor thread panicked".into())),
        }
    }
}

impl Drop for Monitor {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The monitor thread: the skeleton borrows its storage, so both live
/// here, from loading to the last read.
/// The gap-source object opened, its programs for system vectors this
/// kernel has no tracepoint for left out of the load.
/// Also returns the tracepoints left out.
type Opened<'obj> = (skel::OpenGapSourcesSkel<'obj>, Vec<String>);

fn open_skel(storage: &mut std::mem::MaybeUninit<libbpf_rs::OpenObject>) -> std::result::Result<Opened<'_>, String> {
    use libbpf_rs::skel::{OpenSkel, SkelBuilder};
    let missing = irqlab_host::tracepoints::missing(SYSTEM_VECTORS.iter().map(|(_, tp)| *tp))?;
    let mut open = skel::GapSourcesSkelBuilder::default().open(storage).map_err(bpf_err("opening the gap-source BPF object"))?;
    for mut prog in open.open_object_mut().progs_mut() {
        if SYSTEM_VECTORS.iter().any(|(p, tp)| prog.name() == *p && missing.iter().any(|m| m == tp)) {
            prog.set_autoload(false);
        }
    }
    Ok((open, missing))
}

/// Loads the gap-source programs as [`Monitor::start`] does, attaches
/// nothing and unloads them: whether this kernel's verifier accepts them
/// (doctor's readiness of `measure interference`'s sources). Exit 3
/// naming the program it rejects and why.
pub fn check_loads() -> Result<()> {
    use libbpf_rs::skel::OpenSkel;
    irqlab_host::privilege::require_bpf("load the gap-source BPF programs")?;
    let mut storage = std::mem::MaybeUninit::uninit();
    irqlab_host::bpf_trial::load("the gap-source BPF programs", || {
        let (open, _) = open_skel(&mut storage).map_err(Error::Failed)?;
        open.load().map(drop).map_err(|e| Error::Failed(bpf_err("loading the gap-source BPF programs")(e)))
    })
}

fn watch(
    cpu: usize,
    stop: &AtomicBool,
    ready: &std::sync::mpsc::Sender<std::result::Result<(), String>>,
    mut sink: Option<SegmentSink>,
) -> std::result::Result<Collected, String> {
    use libbpf_rs::skel::{OpenSkel, Skel};
    let fail = |why: String| {
        let _ = ready.send(Err(why.clone()));
        Err(why)
    };
    // Off the probed CPU: a SCHED_FIFO probe spinning there would starve
    // the reader, and the reader there would be interference.
    let _ = irqlab_host::rt::pin_off(cpu);
    let mut storage = std::mem::MaybeUninit::uninit();
    let (open, missing) = match open_skel(&mut storage) {
        Ok(o) => o,
        Err(why) => return fail(why),
    };
    let mut skel = match open.load() {
        Ok(s) => s,
        Err(e) => return fail(bpf_err("loading the gap-source BPF programs")(e)),
    };
    match skel.maps.bss_data.as_deref_mut() {
        Some(bss) => bss.target_cpu = cpu as u32,
        None => return fail("the gap-source BPF object has no .bss".into()),
    }
    let (ring, received) = match irqlab_host::bpf::ring_sink(&skel.maps.segments, "gap-source segments", decode) {
        Ok(sink) => sink,
        Err(e) => return fail(e.to_string()),
    };
    if let Err(e) = skel.attach() {
        return fail(bpf_err("attaching the gap-source programs")(e));
    }
    let _ = ready.send(Ok(()));
    let mut deliver = || {
        if let Some(sink) = sink.as_mut() {
            let batch = std::mem::take(&mut *received.borrow_mut());
            if !batch.is_empty() {
                sink(batch);
            }
        }
    };
    while !stop.load(Ordering::Relaxed) {
        std::thread::sleep(POLL);
        ring.consume().map_err(bpf_err("reading the gap-source segments"))?;
        deliver();
    }
    ring.consume().map_err(bpf_err("reading the gap-source segments"))?;
    deliver();
    let lost = skel.maps.bss_data.as_deref().map_or(0, |b| b.lost_segments);
    drop(ring);
    let segments = std::mem::take(&mut *received.borrow_mut());
    Ok(Collected { segments, lost, missing })
}

#[cfg(test)]
mod tests {
    use super::super::window::tests::gaps_from;
    use super::*;
    use proptest::prelude::*;

    fn id(label: &str, kind: SourceKind) -> SourceId {
        SourceId { label: label.into(), kind, pid: None, policy: None }
    }

    #[test]
    fn a_deadline_thread_back_at_its_own_policy_is_named_stalld_s_boost_where_stalld_runs() {
        let thread = |label: &str, pid: u32| Source { label: label.into(), kind: SourceKind::Thread, pid: Some(pid), policy: None, ns: 5 };
        let mut g = GapSources::off("BPF monitor on CPU 1");
        g.windows.push(WindowSources {
            window_ns: 1_000,
            start_ns: 0,
            busy_ns: 15,
            sources: vec![thread("spin/7 DEADLINE", 7), thread("dl/8 DEADLINE", 8), thread("gone/9 DEADLINE", 9)],
        });
        g.totals.push(SourceTotal {
            label: "spin/7 DEADLINE".into(),
            kind: SourceKind::Thread,
            pid: Some(7),
            policy: None,
            gaps: 1,
            ns: 5,
            max_ns: 5,
            unseen_ns: 0,
            woken_by_resched_ipi: 0,
            resched_ipi_ns: 0,
            resched_ipi_max_ns: 0,
        });
        // 7 is back at SCHED_OTHER, 8 still at SCHED_DEADLINE, 9 exited.
        let now = |tid: u32| match tid {
            7 => Some(0),
            8 => Some(6),
            _ => None,
        };
        assert_eq!(g.clone().name_stalld_boosts(&[], now), 0, "no stalld, no boost");
        assert_eq!(g.name_stalld_boosts(&[42], now), 1);
        let labels: Vec<&str> = g.windows[0].sources.iter().map(|s| s.label.as_str()).collect();
        assert_eq!(labels, ["spin/7 DEADLINE (stalld's boost)", "dl/8 DEADLINE", "gone/9 DEADLINE"]);
        assert_eq!(g.totals[0].label, "spin/7 DEADLINE (stalld's boost)");
        assert!(g.note.contains("stalld (pid 42)"), "{}", g.note);
    }

    #[test]
    fn a_gap_is_split_between_its_sources_and_unseen() {
        // Gap [100, 200): IRQ 110..120, the injector 120..180, the rest unseen.
        let t = Timeline::new([
            (110, 120, id("irq 11 virtio0", SourceKind::Irq)),
            (120, 180, id("inject/7 FIFO 95", SourceKind::Thread)),
            // Outside the gap: not counted.
            (300, 400, id("inject/7 FIFO 95", SourceKind::Thread)),
        ]);
        let gaps = [Gap { start_ns: 100, len_ns: 100 }];
        let (busy, sources) = t.compose(&gaps, 0, 250);
        assert_eq!(busy, 100);
        let got: Vec<(&str, u64)> = sources.iter().map(|s| (s.label.as_str(), s.ns)).collect();
        assert_eq!(got, vec![("inject/7 FIFO 95", 60), ("unseen", 30), ("irq 11 virtio0", 10)]);
    }

    #[test]
    fn totals_count_each_source_once_per_gap_and_add_up_to_the_gap_time_with_the_unseen_beside_them() {
        // Gap 1 [100, 200): the tick 100..110, a thread 110..150, the tick
        // again 150..155 (one burst for each), the rest unseen. Gap 2
        // [500, 520): the tick only. The thread also ran outside the gaps.
        let t = Timeline::new([
            (100, 110, id("irq LOC timer", SourceKind::Irq)),
            (110, 150, id("kworker/0:1/9 OTHER", SourceKind::Thread)),
            (150, 155, id("irq LOC timer", SourceKind::Irq)),
            (300, 400, id("kworker/0:1/9 OTHER", SourceKind::Thread)),
            (500, 520, id("irq LOC timer", SourceKind::Irq)),
        ]);
        let gaps = [Gap { start_ns: 100, len_ns: 100 }, Gap { start_ns: 500, len_ns: 20 }];
        let totals = t.totals(&gaps);
        let got: Vec<(&str, u64, u64, u64, u64)> = totals.iter().map(|s| (s.label.as_str(), s.gaps, s.ns, s.max_ns, s.unseen_ns)).collect();
        // Gap 1's 45 ns unseen belong to its largest source, the thread.
        assert_eq!(got, vec![("kworker/0:1/9 OTHER", 1, 40, 40, 45), ("irq LOC timer", 2, 35, 20, 0)]);
        assert_eq!(got.iter().map(|g| g.2 + g.4).sum::<u64>(), 120);
        // A gap in which nothing was seen is `unseen`'s.
        let alone = t.totals(&[Gap { start_ns: 600, len_ns: 30 }]);
        assert_eq!(alone.iter().map(|s| (s.label.as_str(), s.gaps, s.ns, s.unseen_ns)).collect::<Vec<_>>(), vec![("unseen", 1, 30, 0)]);
    }

    fn thread(label: &str, pid: u32) -> SourceId {
        SourceId { label: label.into(), kind: SourceKind::Thread, pid: Some(pid), policy: Some("fifo:50".into()) }
    }

    /// (label, woken_by_resched_ipi, resched_ipi_ns, resched_ipi_max_ns) of each total.
    fn woken(totals: &[SourceTotal]) -> Vec<(&str, u64, u64, u64)> {
        totals.iter().map(|s| (s.label.as_str(), s.woken_by_resched_ipi, s.resched_ipi_ns, s.resched_ipi_max_ns)).collect()
    }

    #[test]
    fn the_resched_ipi_is_the_system_vectors_source() {
        let r = resched_ipi();
        assert_eq!((r.label.as_str(), r.kind, r.pid), ("irq RES resched IPI", SourceKind::Irq, None));
    }

    #[test]
    fn a_reschedule_ipi_followed_by_a_thread_in_its_gap_is_that_threads_wake_up() {
        // Gap [100, 200): RES 100..104, the tick 104..110, the NAPI thread
        // 112..180, a kworker after it; 26 ns unseen, the thread's (the lead).
        let t = Timeline::new([
            (100, 104, resched_ipi()),
            (104, 110, id("irq LOC timer", SourceKind::Irq)),
            (112, 180, thread("napi/irqlab-b-1/7 FIFO 50", 7)),
            (180, 190, thread("kworker/1:2/9 OTHER", 9)),
        ]);
        let totals = t.totals(&[Gap { start_ns: 100, len_ns: 100 }]);
        assert_eq!(
            woken(&totals),
            vec![
                ("napi/irqlab-b-1/7 FIFO 50", 1, 4, 4),
                ("kworker/1:2/9 OTHER", 0, 0, 0),
                ("irq LOC timer", 0, 0, 0),
                ("irq RES resched IPI", 0, 0, 0),
            ]
        );
        // A part of RES's time, which RES keeps: the conservation is as it was.
        assert_eq!(totals.iter().map(|s| s.ns + s.unseen_ns).sum::<u64>(), 100);
        let res = totals.iter().find(|s| s.label == "irq RES resched IPI").unwrap();
        assert_eq!((res.gaps, res.ns, res.unseen_ns), (1, 4, 0));
        // Old documents (and new ones where they are zero) read and write without the fields.
        let json = serde_json::to_string(&totals[1]).unwrap();
        assert!(!json.contains("woken_by_resched_ipi") && !json.contains("resched_ipi_ns"), "{json}");
        assert_eq!(serde_json::from_str::<SourceTotal>(&json).unwrap(), totals[1]);
        assert!(serde_json::to_string(&totals[0]).unwrap().contains("\"woken_by_resched_ipi\":1"));
    }

    #[test]
    fn a_reschedule_ipi_after_the_thread_wakes_nothing() {
        // Thread then RES, in one gap: no wake-up of that thread (the IPI's
        // wakee runs after the gap, or it is a stray resched).
        let t = Timeline::new([(100, 150, thread("napi/irqlab-b-1/7 FIFO 50", 7)), (150, 155, resched_ipi())]);
        let totals = t.totals(&[Gap { start_ns: 100, len_ns: 60 }]);
        assert!(totals.iter().all(|s| s.woken_by_resched_ipi == 0 && s.resched_ipi_ns == 0), "{totals:?}");
        // Nor across gaps: a thread in the next gap was not woken by this gap's IPI.
        let t = Timeline::new([(100, 105, resched_ipi()), (300, 350, thread("napi/irqlab-b-1/7 FIFO 50", 7))]);
        let totals = t.totals(&[Gap { start_ns: 100, len_ns: 10 }, Gap { start_ns: 300, len_ns: 60 }]);
        assert!(totals.iter().all(|s| s.woken_by_resched_ipi == 0 && s.resched_ipi_ns == 0), "{totals:?}");
    }

    #[test]
    fn each_gaps_reschedule_ipi_time_goes_to_the_thread_it_woke_with_its_unseen_share_where_it_led() {
        // Gap 1 [100, 150): RES 100..110, the thread 110..115 (RES leads:
        // its 35 ns unseen go with it). Gap 2 [500, 600): RES 500..503,
        // another RES 503..505, the thread 505..590 (it leads: the 10 ns
        // unseen stay its own). Gap 3 [700, 710): RES alone, no wake-up.
        let napi = thread("napi/irqlab-b-1/7 FIFO 50", 7);
        let t = Timeline::new([
            (100, 110, resched_ipi()),
            (110, 115, napi.clone()),
            (500, 503, resched_ipi()),
            (503, 505, resched_ipi()),
            (505, 590, napi),
            (700, 706, resched_ipi()),
        ]);
        let gaps = [Gap { start_ns: 100, len_ns: 50 }, Gap { start_ns: 500, len_ns: 100 }, Gap { start_ns: 700, len_ns: 10 }];
        let totals = t.totals(&gaps);
        let napi = totals.iter().find(|s| s.pid == Some(7)).unwrap();
        assert_eq!((napi.gaps, napi.ns, napi.unseen_ns), (2, 90, 10));
        assert_eq!((napi.woken_by_resched_ipi, napi.resched_ipi_ns, napi.resched_ipi_max_ns), (2, 10 + 35 + 5, 10));
        let res = totals.iter().find(|s| s.label == "irq RES resched IPI").unwrap();
        assert_eq!((res.gaps, res.ns, res.unseen_ns, res.max_ns), (3, 21, 35 + 4, 10));
        // Conservation unchanged; the thread's part is within RES's total,
        // the rest (gap 3's 6 + 4 unseen) the IPIs no thread followed.
        assert_eq!(totals.iter().map(|s| s.ns + s.unseen_ns).sum::<u64>(), 160);
        assert_eq!(res.ns + res.unseen_ns - napi.resched_ipi_ns, 10);
    }

    #[test]
    fn segments_nested_in_the_probes_run_count_only_inside_gaps() {
        // An IRQ segment that starts before the gap (the probe saw the gap
        // start at its last clock read): only the overlap counts.
        let t = Timeline::new([(90, 130, id("irq LOC timer", SourceKind::Irq))]);
        let gaps = [Gap { start_ns: 100, len_ns: 50 }];
        let (busy, sources) = t.compose(&gaps, 0, 1000);
        assert_eq!(busy, 50);
        assert_eq!(sources.iter().map(|s| s.ns).collect::<Vec<_>>(), vec![30, 20]);
        assert_eq!(sources[1].kind, SourceKind::Unseen);
    }

    #[test]
    fn the_max_window_is_found_where_the_index_finds_it() {
        let gaps: Vec<Gap> = (0..50).map(|i| Gap { start_ns: i * 2_000 + 700, len_ns: 600 + (i % 7) * 10 }).collect();
        let idx = super::super::window::GapIndex::new(&gaps, 100_000);
        for w in [1, 500, 1_000, 3_333, 10_000, 99_999, 100_000] {
            let (t, busy) = max_window(&gaps, 100_000, w).unwrap();
            assert_eq!(Some(busy), idx.max_in_window(w), "w={w}");
            assert!(t + w <= 100_000);
        }
        assert_eq!(max_window(&gaps, 100_000, 100_001), None);
    }

    #[test]
    fn labels_name_what_a_user_knows() {
        let raw =
            |kind, id, policy, rt_priority, name: &str| RawSource { kind, id, tgid: id, policy, rt_priority, nice: 0, name: name.into() };
        assert_eq!(source_id(&raw(1, 11, 0, 0, "virtio0")).label, "irq 11 virtio0");
        assert_eq!(source_id(&raw(4, 1, 0, 0, "")).label, "irq LOC timer");
        assert_eq!(source_id(&raw(2, 3, 0, 0, "")).label, "NET_RX");
        let t = source_id(&raw(3, 4211, 1, 95, "inject"));
        assert_eq!((t.label.as_str(), t.pid, t.policy.as_deref()), ("inject/4211 FIFO 95", Some(4211), Some("fifo:95")));
        let k = source_id(&raw(3, 23, 0, 0, "ksoftirqd/1"));
        assert_eq!((k.label.as_str(), k.policy.as_deref()), ("ksoftirqd/1/23 OTHER", Some("other")));
        // SCHED_DEADLINE cannot be restated without its runtime and period.
        assert_eq!(source_id(&raw(3, 24, 6, 0, "dl")).policy, None);
        assert_eq!(source_id(&raw(1, 11, 0, 0, "virtio0")).policy, None);
    }

    #[test]
    fn the_probes_own_segments_and_the_clock_offset() {
        let seg = |a, b, kind, id| RawSegment {
            start_ns: a,
            end_ns: b,
            source: RawSource { kind, id, tgid: 1, policy: 0, rt_priority: 0, nice: 0, name: "x".into() },
        };
        let raw = [seg(1_000, 1_100, 3, 42), seg(1_100, 1_200, 1, 5), seg(1_200, 1_300, 3, 43)];
        let t = timeline(&raw, 1_000, 250, Some(42));
        let spans: Vec<(u64, u64)> = t.segments.iter().map(|s| (s.start_ns, s.end_ns)).collect();
        assert_eq!(spans, vec![(100, 200), (200, 250)]);
    }

    proptest! {
        /// Conservation on recorded gaps with synthetic segments: the
        /// sources of every maximum-load window add up to its gap time,
        /// which is the curve's maximum.
        #[test]
        fn sources_add_up_to_the_windows_busy_time(
            spec in proptest::collection::vec((0u64..400, 1u64..300), 1..40),
            segs in proptest::collection::vec((0u64..20_000, 1u64..500, 0usize..4), 0..80),
            w in 1u64..5_000,
        ) {
            let (gaps, total) = gaps_from(&spec);
            let kinds = [SourceKind::Irq, SourceKind::Softirq, SourceKind::Thread, SourceKind::Thread];
            let timeline = Timeline::new(segs.iter().map(|&(a, l, k)| (a, a + l, id(&format!("s{k}"), kinds[k]))));
            let idx = super::super::window::GapIndex::new(&gaps, total);
            for ws in per_window(&timeline, &gaps, total, &[w]) {
                prop_assert_eq!(ws.sources.iter().map(|s| s.ns).sum::<u64>(), ws.busy_ns);
                prop_assert_eq!(Some(ws.busy_ns), idx.max_in_window(w));
            }
        }

        /// The totals add up to the gap time with reschedule IPIs among
        /// the segments as without, and the threads' parts of the IPIs'
        /// time and gaps are within the RES source's.
        #[test]
        fn the_threads_parts_of_the_reschedule_ipis_are_within_theirs(
            spec in proptest::collection::vec((0u64..400, 1u64..300), 1..40),
            segs in proptest::collection::vec((0u64..20_000, 1u64..500, 0usize..4), 0..80),
        ) {
            let (gaps, _) = gaps_from(&spec);
            let source = |k: usize| match k {
                0 => resched_ipi(),
                1 => id("irq LOC timer", SourceKind::Irq),
                k => thread(&format!("t{k}/{k} FIFO 50"), k as u32),
            };
            let timeline = Timeline::new(segs.iter().map(|&(a, l, k)| (a, a + l, source(k))));
            let totals = timeline.totals(&gaps);
            prop_assert_eq!(totals.iter().map(|s| s.ns + s.unseen_ns).sum::<u64>(), gaps.iter().map(|g| g.len_ns).sum::<u64>());
            let (res_gaps, res_ns) = totals.iter().find(|s| s.label == "irq RES resched IPI").map_or((0, 0), |s| (s.gaps, s.ns + s.unseen_ns));
            prop_assert!(totals.iter().map(|s| s.woken_by_resched_ipi).sum::<u64>() <= res_gaps);
            prop_assert!(totals.iter().map(|s| s.resched_ipi_ns).sum::<u64>() <= res_ns);
            prop_assert!(totals.iter().all(|s| s.kind == SourceKind::Thread || s.woken_by_resched_ipi == 0));
        }
    }
}
