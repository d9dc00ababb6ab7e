//! One vocabulary for CPU time: where a task's and a CPU's time went, in the
//! same fields for the simulator (`irqlab/sim/v2`) and the live BPF
//! accounting (`irqlab/accounting/v1`).
//!
//! Why: the process-aware paper's accounting experiment (`docs/papers.md`
//! §2, Fig. 6) is run both ways, simulated (`irqlab reproduce
//! process-aware`) and live (`irqlab measure accounting --fig6`), and a
//! simulated run is only worth as much as its agreement with the machine.
//! With both documents embedding [`TaskTime`] and [`CpuTime`]
//! (`#[serde(flatten)]`), that agreement is one call, [`compare`], instead
//! of picking fields by two sets of names. The names are the live
//! accounting's (`docs/internals-live.md`, BPF accounting); the simulator's
//! first document (`irqlab/sim/v1`) called a task's run time `cpu_ns` and
//! the CPU's `task_ns`, which still load (serde aliases).
//!
//! Known differences between the two sources, which no renaming removes:
//! - Bottom-half work in ksoftirqd: the simulator runs it as the thread's
//!   own time (its `run_ns`), the kernel traces it as softirq context (live:
//!   ksoftirqd's `stolen_softirq_ns`). Softirq and NAPI threads (threaded
//!   model) are `run_ns` in both.
//! - Context switches: the simulator charges them to the CPU's
//!   `context_switch_ns`, outside these fields; live they are inside some
//!   task's `run_ns`.
//! - The simulator does not attribute softirq work to the task it served:
//!   its [`TaskTime::served_softirq_ns`] is `None` (left out of the
//!   document), and [`compare`] reports that field as not comparable.

use crate::units::Nanos;
use serde::{Deserialize, Serialize};

/// One task's CPU time: what it ran, what interrupts stole from it, and
/// what softirq work was done on its behalf (`docs/papers.md` §2: the
/// process-aware paper's t_opt is `run_ns`; Linux's charge is `run_ns` plus
/// the stolen time the tick happens to sample).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskTime {
    /// Time the task itself ran, hard-IRQ and softirq context excluded
    /// (the paper's t_opt). `cpu_ns` in `irqlab/sim/v1`.
    #[serde(alias = "cpu_ns")]
    pub run_ns: Nanos,
    /// Hard-IRQ + softirq time that ran while it was current:
    /// `stolen_hardirq_ns + stolen_softirq_ns`.
    pub stolen_ns: Nanos,
    /// Hard-IRQ handler time that ran while it was current.
    pub stolen_hardirq_ns: Nanos,
    /// Softirq-context time that ran while it was current, whoever it was
    /// for.
    pub stolen_softirq_ns: Nanos,
    /// Softirq time done on its behalf (it owned the socket a packet was
    /// queued to, or a softirq woke it), wherever and over whomever it ran:
    /// the work the process-aware paper charges to its beneficiary. `None`
    /// where the source does not attribute beneficiaries (the simulator);
    /// then it is absent from the document.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub served_softirq_ns: Option<Nanos>,
}

impl TaskTime {
    /// A task's time from its parts; `stolen_ns` is their sum.
    pub fn new(run_ns: Nanos, stolen_hardirq_ns: Nanos, stolen_softirq_ns: Nanos, served_softirq_ns: Option<Nanos>) -> TaskTime {
        TaskTime { run_ns, stolen_ns: stolen_hardirq_ns + stolen_softirq_ns, stolen_hardirq_ns, stolen_softirq_ns, served_softirq_ns }
    }
}

/// One CPU's time (or a machine's, summed over CPUs) by the context that
/// used it: the BPF accounting's per-CPU split (`docs/internals-live.md`,
/// BPF accounting) and the simulator's CPU buckets (`docs/internals-sim.md`,
/// the CPU). Live, the four add up to the wall time but for what the
/// accounting missed (`unaccounted_ns`); simulated, they and the CPU's
/// context-switch time add up to the measured span exactly.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CpuTime {
    /// Tasks' own time, the idle task excluded. `task_ns` in
    /// `irqlab/sim/v1`.
    #[serde(alias = "task_ns")]
    pub run_ns: Nanos,
    /// Time nothing ran (the idle task's run time).
    pub idle_ns: Nanos,
    /// Hard-IRQ handler time, nested handlers counted once.
    pub hardirq_ns: Nanos,
    /// Softirq-context time (`__do_softirq` at IRQ exit, in
    /// `local_bh_enable`, and, live, in ksoftirqd).
    pub softirq_ns: Nanos,
}

/// The values of a CPU-time type by field name, in document order, `None`
/// for a field its source does not measure: what [`compare`] walks.
pub trait Fields {
    fn fields(&self) -> Vec<(&'static str, Option<Nanos>)>;
}

impl Fields for TaskTime {
    fn fields(&self) -> Vec<(&'static str, Option<Nanos>)> {
        vec![
            ("run_ns", Some(self.run_ns)),
            ("stolen_ns", Some(self.stolen_ns)),
            ("stolen_hardirq_ns", Some(self.stolen_hardirq_ns)),
            ("stolen_softirq_ns", Some(self.stolen_softirq_ns)),
            ("served_softirq_ns", self.served_softirq_ns),
        ]
    }
}

impl Fields for CpuTime {
    fn fields(&self) -> Vec<(&'static str, Option<Nanos>)> {
        vec![
            ("run_ns", Some(self.run_ns)),
            ("idle_ns", Some(self.idle_ns)),
            ("hardirq_ns", Some(self.hardirq_ns)),
            ("softirq_ns", Some(self.softirq_ns)),
        ]
    }
}

/// One field of a simulated-vs-live comparison.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FieldDifference {
    pub field: &'static str,
    pub sim_ns: Option<Nanos>,
    pub live_ns: Option<Nanos>,
    /// sim − live, when both measure the field.
    pub difference_ns: Option<i64>,
    /// (sim − live) / live, when both measure it and live is not 0: the
    /// process-aware paper's error measure, (t − t_opt) / t_opt, with the
    /// live machine as the reference.
    pub relative: Option<f64>,
}

/// Simulated against live CPU time, field by field in document order: the
/// one comparison of the two sources (module docs: what differs by
/// construction). Works on a task ([`TaskTime`]) or a CPU ([`CpuTime`]).
pub fn compare<T: Fields>(sim: &T, live: &T) -> Vec<FieldDifference> {
    sim.fields()
        .into_iter()
        .zip(live.fields())
        .map(|((field, s), (_, l))| {
            let difference_ns = s.zip(l).map(|(s, l)| s as i64 - l as i64);
            let relative = difference_ns.zip(l.filter(|&l| l > 0)).map(|(d, l)| d as f64 / l as f64);
            FieldDifference { field, sim_ns: s, live_ns: l, difference_ns, relative }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stolen_is_the_sum_of_its_parts() {
        let t = TaskTime::new(900, 30, 70, None);
        assert_eq!((t.stolen_ns, t.stolen_hardirq_ns, t.stolen_softirq_ns), (100, 30, 70));
    }

    #[test]
    fn compare_gives_each_fields_difference() {
        // A simulated CPU-bound task against its live counterpart: 1.2 s
        // run against 1.0 s, 50 ms stolen against 40 ms (20 + 20 hard-IRQ
        // / softirq against 15 + 25); the simulator attributes no service.
        let sim = TaskTime::new(1_200_000_000, 20_000_000, 30_000_000, None);
        let live = TaskTime::new(1_000_000_000, 15_000_000, 25_000_000, Some(4_000_000));
        let d = compare(&sim, &live);
        let fields: Vec<_> = d.iter().map(|f| f.field).collect();
        assert_eq!(fields, ["run_ns", "stolen_ns", "stolen_hardirq_ns", "stolen_softirq_ns", "served_softirq_ns"]);
        assert_eq!(d[0].difference_ns, Some(200_000_000));
        assert_eq!(d[0].relative, Some(0.2));
        assert_eq!((d[1].sim_ns, d[1].live_ns, d[1].difference_ns), (Some(50_000_000), Some(40_000_000), Some(10_000_000)));
        assert_eq!(d[1].relative, Some(0.25));
        assert_eq!(d[2].difference_ns, Some(5_000_000));
        assert_eq!(d[3].difference_ns, Some(5_000_000));
        assert_eq!(d[3].relative, Some(0.2));
        assert_eq!((d[4].sim_ns, d[4].live_ns, d[4].difference_ns, d[4].relative), (None, Some(4_000_000), None, None));
    }

    #[test]
    fn compare_cpus_and_a_zero_reference() {
        let sim = CpuTime { run_ns: 700, idle_ns: 100, hardirq_ns: 50, softirq_ns: 150 };
        let live = CpuTime { run_ns: 800, idle_ns: 0, hardirq_ns: 40, softirq_ns: 160 };
        let d = compare(&sim, &live);
        let diffs: Vec<_> = d.iter().map(|f| (f.field, f.difference_ns)).collect();
        assert_eq!(diffs, [("run_ns", Some(-100)), ("idle_ns", Some(100)), ("hardirq_ns", Some(10)), ("softirq_ns", Some(-10))]);
        assert_eq!(d[0].relative, Some(-0.125));
        // No relative difference against a live 0.
        assert_eq!(d[1].relative, None);
    }

    #[test]
    fn reads_the_simulators_first_names_and_writes_the_live_ones() {
        // A task and the CPU split as irqlab/sim/v1 wrote them.
        let v1_task = r#"{"name":"hog","cpu_ns":900,"user_ns":900,"stolen_ns":100,"stolen_hardirq_ns":30,"stolen_softirq_ns":70}"#;
        let t: TaskTime = serde_json::from_str(v1_task).unwrap();
        assert_eq!(t, TaskTime::new(900, 30, 70, None));
        let v1_cpu = r#"{"hardirq_ns":5,"softirq_ns":6,"task_ns":7,"context_switch_ns":1,"idle_ns":8,"bottom_half_ns":6}"#;
        let c: CpuTime = serde_json::from_str(v1_cpu).unwrap();
        assert_eq!(c, CpuTime { run_ns: 7, idle_ns: 8, hardirq_ns: 5, softirq_ns: 6 });
        // Written with the live names; no served time when not measured.
        assert_eq!(serde_json::to_string(&t).unwrap(), r#"{"run_ns":900,"stolen_ns":100,"stolen_hardirq_ns":30,"stolen_softirq_ns":70}"#);
        let live = TaskTime { served_softirq_ns: Some(12), ..t };
        let text = serde_json::to_string(&live).unwrap();
        assert!(text.ends_with(r#""served_softirq_ns":12}"#), "{text}");
        assert_eq!(serde_json::from_str::<TaskTime>(&text).unwrap(), live);
    }
}
