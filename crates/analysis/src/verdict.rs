//! Per-task verdicts of a whole task set: the result of `irqlab analyze`
//! (schema `irqlab/analysis/v1`).
//!
//! Fixed-priority tests follow the load-bounds paper §2: the load test of
//! eq. 8 at each task's deadline, or exact response-time analysis (eq. 3
//! solved for the smallest window, any monotone demand bound). The EDF
//! processor-demand test is added beside them (see [`crate::edf`]).

use crate::demand::DemandBound;
use crate::edf::{edf_demand, edf_test};
use crate::fixed_priority::{load_at_deadline, passes_load_test, response_time_from, Horizon};
use crate::input::InputError;
use crate::interference::PeriodicDemandSum;
use crate::task::{Model, PeriodicTask};
use crate::taskset::TaskSet;
use crate::units::{format_ns, Nanos};
use serde::{Deserialize, Serialize};

/// The JSON schema tag of `irqlab analyze --json`.
pub const ANALYSIS_SCHEMA: &str = "irqlab/analysis/v1";

/// At most this many deadlines in one EDF check.
const EDF_MAX_POINTS: usize = 5_000_000;

/// Which schedulability test decides the verdicts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Test {
    /// Exact response-time analysis (fixed priorities), load-bounds eq. 3.
    Rta,
    /// The load test at the deadline (fixed priorities), load-bounds eq. 8.
    Load,
    /// EDF processor-demand test; interferers run above every EDF task.
    Edf,
}

impl Test {
    /// The name used on the command line and in JSON.
    pub fn name(self) -> &'static str {
        match self {
            Test::Rta => "rta",
            Test::Load => "load",
            Test::Edf => "edf",
        }
    }
}

/// One analysed (periodic or sporadic) task.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskVerdict {
    /// Task name from the task set.
    pub name: String,
    /// Smaller = more urgent.
    pub priority: i64,
    /// p (ns).
    pub period_ns: Nanos,
    /// e (ns).
    pub wcet_ns: Nanos,
    /// d (ns).
    pub deadline_ns: Nanos,
    /// Whether the test proves every deadline is met.
    pub schedulable: bool,
    /// Worst-case response time by RTA with the chosen bound (also under
    /// `--test load`, as information); `null` when unbounded, and under EDF,
    /// whose test gives no per-task response time.
    pub response_time_ns: Option<Nanos>,
    /// `e/d + Σ load_i(d)` (eq. 8's left side) for fixed priorities; for
    /// EDF, `(Σ dbf(d) + interference(d)) / d`.
    pub load_at_deadline: f64,
    /// RTA: `d - R`; load test: `d - e - Σ demand_i(d)`; EDF: the smallest
    /// spare time over all checked deadlines of the set. Negative when
    /// missed, `null` when unbounded.
    pub slack_ns: Option<i64>,
    /// Largest factor by which this task's wcet can be multiplied while it
    /// and every lower-priority task that is schedulable now stay
    /// schedulable (EDF: the whole set). Below 1 when the task itself (EDF:
    /// the set) is unschedulable: how far it must shrink; 0 when even a
    /// wcet of 0 does not help.
    pub wcet_scale_margin: f64,
}

/// A task that is only an interferer (driver, server, measured curve).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InterfererSummary {
    /// Task name from the task set.
    pub name: String,
    /// `hyperbolic`, `curve`, `polling-server`, ...
    pub kind: String,
    /// Smaller = more urgent.
    pub priority: i64,
    /// The load it converges to over long windows.
    pub utilization: f64,
}

/// The result of analysing a task set.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Analysis {
    /// Always [`ANALYSIS_SCHEMA`].
    pub schema: String,
    /// The test that decided.
    pub test: Test,
    /// The demand bound used for periodic tasks and servers.
    pub bound: DemandBound,
    /// Every analysed task is schedulable.
    pub schedulable: bool,
    /// Analysed (periodic/sporadic) tasks, most urgent first.
    pub tasks: Vec<TaskVerdict>,
    /// Tasks that only interfere (drivers, servers, curves).
    pub interferers: Vec<InterfererSummary>,
    /// Plain-language remarks on how the verdict came about (unbounded
    /// response times, an EDF check that could not decide, ...).
    pub notes: Vec<String>,
}

/// Checks that `test` applies to every task; the load test (eq. 8) is
/// stated for `d ≤ p`.
pub fn check_applicable(set: &TaskSet, test: Test) -> Result<(), InputError> {
    if test != Test::Load {
        return Ok(());
    }
    for task in &set.tasks {
        if let Some(p) = task.model.as_periodic() {
            if p.deadline_ns > p.period_ns {
                let message = format!(
                    "task `{}`: the load test (eq. 8) needs deadline ≤ period, but deadline {} > period {} (use --test rta)",
                    task.name,
                    format_ns(p.deadline_ns),
                    format_ns(p.period_ns)
                );
                return Err(match &task.origin.deadline {
                    Some(at) => InputError::at(message, at.clone()),
                    None => InputError::new(message),
                });
            }
        }
    }
    Ok(())
}

/// The task set with one task's wcet replaced (for the margin search).
struct Scenario<'a> {
    set: &'a TaskSet,
    bound: DemandBound,
    scaled: Option<(usize, Nanos)>,
}

impl Scenario<'_> {
    fn periodic(&self, i: usize) -> Option<PeriodicTask> {
        let mut p = self.set.tasks[i].model.as_periodic()?;
        if let Some((k, wcet)) = self.scaled {
            if k == i {
                p.wcet_ns = wcet;
            }
        }
        Some(p)
    }

    fn model(&self, i: usize) -> std::borrow::Cow<'_, Model> {
        match self.periodic(i) {
            Some(p) => std::borrow::Cow::Owned(Model::Periodic(p)),
            None => std::borrow::Cow::Borrowed(&self.set.tasks[i].model),
        }
    }

    /// Fixed priorities: the demand of everything that can preempt task k.
    fn fp_interference(&self, k: usize) -> impl Fn(Nanos) -> Nanos + '_ {
        // The interferers once (with the scaled wcet applied), not per
        // window; periodic ones as their two numbers (RTA sums this at every
        // step, for every task below).
        enum Interferer<'m> {
            Periodic(PeriodicTask),
            Other(&'m Model),
        }
        let others: Vec<Interferer<'_>> = self
            .set
            .interferers_of(k)
            .map(|i| match self.periodic(i) {
                Some(p) => Interferer::Periodic(p),
                None => Interferer::Other(&self.set.tasks[i].model),
            })
            .collect();
        let bound = self.bound;
        move |t| {
            others.iter().fold(0, |sum: Nanos, i| {
                sum.saturating_add(match i {
                    Interferer::Periodic(p) => crate::demand::periodic_demand(bound, p.period_ns, p.wcet_ns, t),
                    Interferer::Other(m) => m.demand_ns(t, bound),
                })
            })
        }
    }

    /// The long-run utilisation of everything that can preempt task k.
    fn interferers_utilization(&self, k: usize) -> f64 {
        self.set.interferers_of(k).map(|i| self.model(i).demand_line().0).sum()
    }

    fn rta(&self, k: usize) -> Option<Nanos> {
        self.rta_from(k, 0, self.interferers_utilization(k)).map(|(r, _)| r)
    }

    /// RTA of task k with its first job's window searched from
    /// `floor + e_k`, where `floor` is 0 or the first-job window w_0 of a
    /// periodic task j of strictly higher priority (under the traditional
    /// or refined bound): `(R_k, w_0 of k)`.
    ///
    /// Why `w_0(j) + e_k` cannot pass task k's answer: j and all of j's
    /// interferers interfere with k, so `I_k(t) ≥ I_j(t) + demand_j(t)`.
    /// With e_k > 0, `w_0(k) ≥ e_j` (below e_j, j's demand under eq. 4 or
    /// eq. 6 is the whole window, and `t = e_k + t + …` has no solution),
    /// where `demand_j ≥ e_j`; so `w_0(k) ≥ e_k + e_j + I_j(w_0(k))`, which
    /// makes w_0(k) a point of j's fixed-point inequality, hence
    /// `≥ w_0(j)`, and then `w_0(k) ≥ e_k + e_j + I_j(w_0(j)) = e_k + w_0(j)`.
    /// `interferers_utilization` is [`Self::interferers_utilization`] (the
    /// caller may have it at hand).
    fn rta_from(&self, k: usize, floor: Nanos, interferers_utilization: f64) -> Option<(Nanos, Nanos)> {
        let p = self.periodic(k)?;
        // Above utilisation 1 the level-k busy period never ends.
        let utilization: f64 = p.utilization() + interferers_utilization;
        if utilization > 1.0 + 1e-12 {
            return None;
        }
        let start = if floor > 0 && p.wcet_ns > 0 { floor.saturating_add(p.wcet_ns) } else { 0 };
        response_time_from(p.period_ns, p.wcet_ns, self.fp_interference(k), &Horizon::for_task(p.period_ns, p.deadline_ns), start)
    }

    /// Fixed-priority verdict of task k under `test`.
    fn fp_ok(&self, k: usize, test: Test) -> bool {
        let Some(p) = self.periodic(k) else { return true };
        match test {
            Test::Load => passes_load_test(p.wcet_ns, p.deadline_ns, self.fp_interference(k)),
            _ => self.rta(k).is_some_and(|r| r <= p.deadline_ns),
        }
    }

    /// EDF: periodic tasks share the CPU by deadline; every other task
    /// (driver, server, curve) runs above them whatever its priority.
    fn edf(&self) -> crate::edf::EdfOutcome {
        let periodic: Vec<PeriodicTask> = (0..self.set.tasks.len()).filter_map(|i| self.periodic(i)).collect();
        let line = self.edf_interference_line();
        edf_test(&periodic, |t| self.edf_interference(t), line, EDF_MAX_POINTS)
    }

    fn edf_interference(&self, window: Nanos) -> Nanos {
        self.set
            .tasks
            .iter()
            .filter(|t| t.model.as_periodic().is_none())
            .fold(0, |sum: Nanos, t| sum.saturating_add(t.model.demand_ns(window, self.bound)))
    }

    fn edf_interference_line(&self) -> (f64, f64) {
        self.set
            .tasks
            .iter()
            .filter(|t| t.model.as_periodic().is_none())
            .map(|t| t.model.demand_line())
            .fold((0.0, 0.0), |(a, b), (s, c)| (a + s, b + c))
    }

    fn edf_load_at(&self, window: Nanos) -> f64 {
        let tasks: Nanos =
            (0..self.set.tasks.len()).filter_map(|i| self.periodic(i)).map(|p| edf_demand(&p, window)).fold(0, Nanos::saturating_add);
        (tasks.saturating_add(self.edf_interference(window))) as f64 / window.max(1) as f64
    }

    /// Does everything the margin of task k protects still hold? Task k
    /// itself, and each task below it in `protected` (those schedulable now).
    fn margin_holds(&self, k: usize, test: Test, protected: &[usize]) -> bool {
        match test {
            Test::Edf => self.edf().schedulable,
            _ => self.fp_ok(k, test) && protected.iter().all(|&j| self.fp_ok(j, test)),
        }
    }
}

/// Largest wcet (ns, ≤ `limit`) of task k for which `holds` — a monotone
/// predicate (a longer wcet never helps) — is true; `None` if not even 0.
fn largest_wcet(limit: Nanos, holds: impl Fn(Nanos) -> bool) -> Option<Nanos> {
    if !holds(0) {
        return None;
    }
    let (mut ok, mut bad) = (0, limit.saturating_add(1));
    if holds(limit) {
        return Some(limit);
    }
    while bad - ok > 1 {
        let mid = ok + (bad - ok) / 2;
        if holds(mid) {
            ok = mid;
        } else {
            bad = mid;
        }
    }
    Some(ok)
}

/// The load task k sees in a window Δ under fixed priorities:
/// `(e_k + Σ_{i<k} demand_i(Δ)) / Δ` — eq. 8's left side as a function of
/// Δ (the "sum of load-bound functions" of the load-bounds paper's Figs. 9
/// and 10). Task k meets its deadline if this is ≤ 1 at Δ = d_k (eq. 8);
/// RTA finds the smallest Δ where it drops to 1. `None` for interferers.
pub fn load_seen_by(set: &TaskSet, k: usize, bound: DemandBound, window: Nanos) -> Option<f64> {
    let scenario = Scenario { set, bound, scaled: None };
    let p = scenario.periodic(k)?;
    let interference = scenario.fp_interference(k);
    Some((p.wcet_ns as f64 + interference(window) as f64) / window.max(1) as f64)
}

/// Under EDF: `(Σ_k dbf_k(Δ) + interference(Δ)) / Δ`; the set passes the
/// processor-demand test iff this is ≤ 1 at every Δ (see [`crate::edf`]).
pub fn edf_load(set: &TaskSet, bound: DemandBound, window: Nanos) -> f64 {
    Scenario { set, bound, scaled: None }.edf_load_at(window)
}

/// Worst-case response times by RTA of every task of `set`, in priority
/// order (`None` for interferers and for unbounded response times).
/// Load-bounds paper eq. 3 with the demand bound `bound` (eqs. 4/6/7) for
/// periodic interferers.
///
/// Tasks are solved from the highest priority down, each searched from the
/// largest first-job window of the periodic tasks above it (see
/// `Scenario::rta_from`): the same answers as solving each alone, in a few
/// steps each instead of one per release of every interferer. Under eqs. 4
/// and 6 the periodic interferers' demand is summed by
/// [`PeriodicDemandSum`] (the same value, without visiting the tasks whose
/// period exceeds the window).
pub fn response_times(set: &TaskSet, bound: DemandBound) -> Vec<Option<Nanos>> {
    match bound {
        DemandBound::Traditional | DemandBound::Refined => response_times_by_level(set, bound),
        DemandBound::Linear => response_times_one_by_one(set, bound),
    }
}

/// Tasks in priority order (ties in index order).
fn priority_order(set: &TaskSet) -> Vec<usize> {
    let mut order: Vec<usize> = (0..set.tasks.len()).collect();
    order.sort_by_key(|&i| set.tasks[i].priority);
    order
}

/// [`response_times`] with each task's interferers gathered and summed
/// anew (eq. 7, where no warm start applies).
fn response_times_one_by_one(set: &TaskSet, bound: DemandBound) -> Vec<Option<Nanos>> {
    let scenario = Scenario { set, bound, scaled: None };
    let mut out = vec![None; set.tasks.len()];
    let utilization: Vec<f64> = set.tasks.iter().map(|t| t.model.demand_line().0).collect();
    for k in priority_order(set) {
        let interferers_utilization = set.interferers_of(k).map(|i| utilization[i]).sum();
        out[k] = scenario.rta_from(k, 0, interferers_utilization).map(|(r, _)| r);
    }
    out
}

/// [`response_times`] under eq. 4 or 6: the interferers are kept as the
/// priority levels are passed (a level's tasks interfere with each other),
/// and each task's first-job window is searched from the floor of
/// `Scenario::rta_from`.
fn response_times_by_level(set: &TaskSet, bound: DemandBound) -> Vec<Option<Nanos>> {
    let periodic = |i: usize| set.tasks[i].model.as_periodic();
    let mut sum = PeriodicDemandSum::new(
        bound,
        set.tasks.len(),
        (0..set.tasks.len()).filter_map(|i| periodic(i).map(|p| (i, p.period_ns, p.wcet_ns))),
    );
    // Interferers that are not periodic tasks (curves, servers, ...).
    let mut others: Vec<&Model> = Vec::new();
    let utilization: Vec<f64> = set.tasks.iter().map(|t| t.model.demand_line().0).collect();
    // Running total over the levels passed; the overload check below uses
    // it only where the sum's order cannot move the verdict.
    let mut passed_utilization = 0.0;
    let mut out = vec![None; set.tasks.len()];
    // The floor only rises between priority levels: tasks of one level
    // interfere with each other, and the argument needs j strictly above k.
    let (mut floor, mut level_floor): (Nanos, Nanos) = (0, 0);
    let order = priority_order(set);
    for level in order.chunk_by(|&a, &b| set.tasks[a].priority == set.tasks[b].priority) {
        floor = floor.max(level_floor);
        for &i in level {
            match periodic(i) {
                Some(_) => sum.set_active(i, true),
                None => others.push(&set.tasks[i].model),
            }
            passed_utilization += utilization[i];
        }
        for &k in level {
            let Some(p) = periodic(k) else { continue };
            if overloaded(set, k, p.utilization(), passed_utilization - utilization[k], &utilization) {
                continue;
            }
            sum.set_active(k, false);
            let interference = |t: Nanos| {
                let total = others.iter().fold(sum.demand(t), |s, m| s + m.demand_ns(t, bound) as u128);
                total.min(Nanos::MAX as u128) as Nanos
            };
            let start = if floor > 0 && p.wcet_ns > 0 { floor.saturating_add(p.wcet_ns) } else { 0 };
            let horizon = Horizon::for_task(p.period_ns, p.deadline_ns);
            if let Some((r, first_window)) = response_time_from(p.period_ns, p.wcet_ns, interference, &horizon, start) {
                out[k] = Some(r);
                level_floor = level_floor.max(first_window);
            }
            sum.set_active(k, true);
        }
    }
    out
}

/// `Scenario::rta_from`'s overload check (above utilisation 1 the level-k
/// busy period never ends) with the interferers' utilisation summed in the
/// same order as there, so that the verdict is the same: `approx` (the
/// running total) decides where it is clearly on one side.
fn overloaded(set: &TaskSet, k: usize, own: f64, approx: f64, utilization: &[f64]) -> bool {
    const LIMIT: f64 = 1.0 + 1e-12;
    let total = own + approx;
    if total.is_finite() && (total - LIMIT).abs() > 1e-6 {
        return total > LIMIT;
    }
    let exact: f64 = set.interferers_of(k).map(|i| utilization[i]).sum();
    own + exact > LIMIT
}

/// Analyses a task set with `test`, using `bound` (eq. 4, 6 or 7) for the
/// demand of periodic tasks and servers. Errors when the test does not
/// apply ([`check_applicable`]).
///
/// The margin search re-runs the test for the task and everything below it
/// about 30 times per task, so it is quadratic in the number of tasks.
pub fn analyze(set: &TaskSet, test: Test, bound: DemandBound) -> Result<Analysis, InputError> {
    check_applicable(set, test)?;
    let base = Scenario { set, bound, scaled: None };
    let edf = (test == Test::Edf).then(|| base.edf());
    let mut tasks = Vec::new();
    let mut interferers = Vec::new();
    for (k, task) in set.tasks.iter().enumerate() {
        let Some(p) = task.model.as_periodic() else {
            interferers.push(InterfererSummary {
                name: task.name.clone(),
                kind: task.model.kind().to_string(),
                priority: task.priority,
                utilization: task.model.demand_line().0,
            });
            continue;
        };
        // d - x in i64, saturating (durations can exceed i64 in principle).
        let minus = |x: u128| (p.deadline_ns as i128 - x as i128).clamp(i64::MIN as i128, i64::MAX as i128) as i64;
        let (schedulable, response, load, slack) = match (&edf, test) {
            (Some(out), _) => (out.schedulable, None, base.edf_load_at(p.deadline_ns), out.min_slack_ns),
            (None, Test::Load) => {
                let interference = base.fp_interference(k);
                let spare = minus(p.wcet_ns as u128 + interference(p.deadline_ns) as u128);
                (base.fp_ok(k, test), base.rta(k), load_at_deadline(p.wcet_ns, p.deadline_ns, interference), Some(spare))
            }
            (None, _) => {
                let r = base.rta(k);
                (
                    r.is_some_and(|r| r <= p.deadline_ns),
                    r,
                    load_at_deadline(p.wcet_ns, p.deadline_ns, base.fp_interference(k)),
                    r.map(|r| minus(r as u128)),
                )
            }
        };
        let limit = p.deadline_ns.min(p.period_ns);
        let protected: Vec<usize> = set.interfered_by(k).filter(|&j| base.fp_ok(j, test)).collect();
        let margin = largest_wcet(limit, |wcet| Scenario { set, bound, scaled: Some((k, wcet)) }.margin_holds(k, test, &protected))
            .map_or(0.0, |w| w as f64 / p.wcet_ns as f64);
        tasks.push(TaskVerdict {
            name: task.name.clone(),
            priority: task.priority,
            period_ns: p.period_ns,
            wcet_ns: p.wcet_ns,
            deadline_ns: p.deadline_ns,
            schedulable,
            response_time_ns: response,
            load_at_deadline: load,
            slack_ns: slack,
            wcet_scale_margin: margin,
        });
    }
    let schedulable = tasks.iter().all(|t| t.schedulable);
    let mut notes = Vec::new();
    let utilization: f64 = set.tasks.iter().map(|t| t.model.demand_line().0).sum();
    if utilization > 1.0 - 1e-9 {
        notes.push(format!(
            "long-run utilisation of the whole set is {utilization:.4}: busy periods at the lowest priorities may never end"
        ));
    }
    if test != Test::Edf {
        for t in tasks.iter().filter(|t| t.response_time_ns.is_none()) {
            notes.push(format!("{}: response time unbounded (its level's utilisation exceeds 1) or beyond the search horizon", t.name));
        }
    }
    if let Some(out) = &edf {
        if !out.decided {
            notes.push(format!("EDF: stopped after {EDF_MAX_POINTS} deadlines without a decision; counted as not schedulable"));
        }
    }
    Ok(Analysis { schema: ANALYSIS_SCHEMA.to_string(), test, bound, schedulable, tasks, interferers, notes })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::envelope::DemandEnvelope;
    use crate::task::Hyperbola;
    use crate::taskset::{Origin, Task};
    use proptest::prelude::*;

    fn periodic(name: &str, priority: i64, p: u64, e: u64, d: u64) -> Task {
        Task {
            name: name.into(),
            priority,
            model: Model::Periodic(PeriodicTask { period_ns: p, wcet_ns: e, deadline_ns: d }),
            origin: Origin::default(),
        }
    }

    #[test]
    fn refined_bound_passes_where_traditional_fails() {
        // The paper's p = 7, e = 2 task above one with e = 5, d = p = 8.
        let set = TaskSet { tasks: vec![periodic("a", 0, 7, 2, 7), periodic("b", 1, 8, 5, 8)] };
        let trad = analyze(&set, Test::Load, DemandBound::Traditional).unwrap();
        let refined = analyze(&set, Test::Load, DemandBound::Refined).unwrap();
        assert!(!trad.schedulable && refined.schedulable);
        assert_eq!(trad.tasks[1].load_at_deadline, 9.0 / 8.0);
        assert_eq!(refined.tasks[1].slack_ns, Some(0));
        let rta = analyze(&set, Test::Rta, DemandBound::Traditional).unwrap();
        assert_eq!(rta.tasks[1].response_time_ns, Some(7));
        assert_eq!(rta.tasks[1].slack_ns, Some(1));
    }

    #[test]
    fn margins_protect_lower_tasks() {
        // τa = (10, 2), τb = (10, 5): b alone could grow to 8 (1.6×); a
        // can grow until b's response reaches 10: e_a = 5 (2.5×).
        let set = TaskSet { tasks: vec![periodic("a", 0, 10, 2, 10), periodic("b", 1, 10, 5, 10)] };
        let out = analyze(&set, Test::Rta, DemandBound::Refined).unwrap();
        assert_eq!(out.tasks[0].wcet_scale_margin, 2.5);
        assert_eq!(out.tasks[1].wcet_scale_margin, 1.6);
        let edf = analyze(&set, Test::Edf, DemandBound::Refined).unwrap();
        assert!(edf.schedulable);
        assert_eq!(edf.tasks[1].wcet_scale_margin, 1.6);
        assert_eq!(edf.tasks[0].slack_ns, Some(3));
    }

    #[test]
    fn load_test_rejects_deadlines_beyond_periods() {
        let set = TaskSet { tasks: vec![periodic("a", 0, 10, 2, 20)] };
        assert!(analyze(&set, Test::Load, DemandBound::Refined).is_err());
        assert!(analyze(&set, Test::Rta, DemandBound::Refined).unwrap().schedulable);
    }

    fn interferer(name: &str, priority: i64, model: Model) -> Task {
        Task { name: name.into(), priority, model, origin: Origin::default() }
    }

    #[test]
    fn servers_as_interferers() {
        // Budget 2 per 10 above a task with e = 5: a polling or sporadic server
        // takes one budget (R = 7); a deferrable server can run two budgets
        // back to back (R = 9).
        let server = crate::task::Server { budget_ns: 2, period_ns: 10 };
        let below = periodic("t", 1, 20, 5, 20);
        for (model, expected) in
            [(Model::PollingServer(server), 7), (Model::SporadicServer(server), 7), (Model::DeferrableServer(server), 9)]
        {
            let set = TaskSet { tasks: vec![interferer("s", 0, model.clone()), below.clone()] };
            assert_eq!(response_times(&set, DemandBound::Refined)[1], Some(expected), "{}", model.kind());
        }
    }

    #[test]
    fn rta_with_a_tabulated_curve_is_sound() {
        // A curve sampled from a periodic driver (p = 1000, e = 300) at
        // every 50 ns, breakpoints included, then RTA of tasks below it: the
        // curve's envelope can only be more pessimistic than the exact
        // periodic model, and with dense samples it is the same.
        let (p, e) = (1_000u64, 300u64);
        let points: Vec<crate::curve::CurvePoint> = (1..=200u64)
            .map(|i| {
                let w = i * 50;
                crate::curve::CurvePoint { window_ns: w, max_load: crate::demand::periodic_load(DemandBound::Refined, p, e, w) }
            })
            .collect();
        let curve = Model::Curve(DemandEnvelope::from_points(&points));
        let exact = Model::Periodic(PeriodicTask { period_ns: p, wcet_ns: e, deadline_ns: p });
        for (wcet, period) in [(100u64, 2_000u64), (650, 5_000), (1_500, 20_000)] {
            let below = periodic("t", 1, period, wcet, period);
            let with_curve = TaskSet { tasks: vec![interferer("d", 0, curve.clone()), below.clone()] };
            let with_task = TaskSet { tasks: vec![interferer("d", 0, exact.clone()), below] };
            let r_curve = response_times(&with_curve, DemandBound::Refined)[1].unwrap();
            let r_exact = response_times(&with_task, DemandBound::Refined)[1].unwrap();
            assert_eq!(r_curve, r_exact, "e = {wcet}");
        }
        // Sparse samples: still never below the exact response time.
        let sparse: Vec<_> = points.iter().copied().step_by(7).collect();
        let curve = Model::Curve(DemandEnvelope::from_points(&sparse));
        let set = TaskSet { tasks: vec![interferer("d", 0, curve), periodic("t", 1, 5_000, 650, 5_000)] };
        let exact_set = TaskSet { tasks: vec![interferer("d", 0, exact), periodic("t", 1, 5_000, 650, 5_000)] };
        assert!(response_times(&set, DemandBound::Refined)[1] >= response_times(&exact_set, DemandBound::Refined)[1]);
    }

    fn arb_set() -> impl Strategy<Value = TaskSet> {
        proptest::collection::vec((1u64..200, 0.01f64..0.4, 0.5f64..=1.0), 1..6).prop_map(|v| {
            let tasks = v
                .into_iter()
                .enumerate()
                .map(|(i, (p, u, dfrac))| {
                    let e = ((p as f64 * u) as u64).max(1).min(p);
                    let d = ((p as f64 * dfrac) as u64).max(e);
                    periodic(&format!("t{i}"), i as i64, p, e, d)
                })
                .collect();
            TaskSet { tasks }
        })
    }

    /// Mixed sets for the warm-started RTA: periodic tasks whose
    /// priorities repeat (ties interfere both ways), hyperbolic and curve
    /// interferers at any level, deadlines beyond the period (busy periods
    /// of several jobs), in any order.
    fn arb_mixed_set() -> impl Strategy<Value = TaskSet> {
        let task = (0u8..4, 0i64..6, 1u64..400, 0.0f64..0.3, 0.5f64..3.0);
        proptest::collection::vec(task, 1..14).prop_map(|v| {
            let tasks = v
                .into_iter()
                .enumerate()
                .map(|(i, (kind, prio, p, u, dfrac))| match kind {
                    0 => interferer(&format!("h{i}"), prio, Model::Hyperbolic(Hyperbola { utilization: u / 3.0, period_ns: p * 3 })),
                    1 => {
                        let points: Vec<crate::curve::CurvePoint> = (1..=20u64)
                            .map(|w| crate::curve::CurvePoint {
                                window_ns: w * p,
                                max_load: crate::demand::periodic_load(DemandBound::Refined, p * 2, ((p as f64 * u) as u64).max(1), w * p),
                            })
                            .collect();
                        interferer(&format!("c{i}"), prio, Model::Curve(DemandEnvelope::from_points(&points)))
                    }
                    _ => {
                        let e = ((p as f64 * u) as u64).min(p);
                        periodic(&format!("t{i}"), prio, p, e, ((p as f64 * dfrac) as u64).max(1))
                    }
                })
                .collect();
            TaskSet { tasks }
        })
    }

    /// RTA as the textbook writes it, every job's window iterated from its
    /// own work: the reference for the warm-started [`response_times`].
    fn rta_from_scratch(set: &TaskSet, bound: DemandBound, k: usize) -> Option<Nanos> {
        let p = set.tasks[k].model.as_periodic()?;
        let utilization: f64 = p.utilization() + set.interferers_of(k).map(|i| set.tasks[i].model.demand_line().0).sum::<f64>();
        if utilization > 1.0 + 1e-12 {
            return None;
        }
        let interference =
            |t: Nanos| set.interferers_of(k).fold(0, |sum: Nanos, i| sum.saturating_add(set.tasks[i].model.demand_ns(t, bound)));
        let horizon = Horizon::for_task(p.period_ns, p.deadline_ns);
        let mut worst = 0;
        for q in 0..horizon.max_jobs {
            let finish = crate::fixed_priority::smallest_window((q + 1) * p.wcet_ns, &interference, &horizon)?;
            worst = worst.max(finish - q * p.period_ns);
            if finish <= (q + 1) * p.period_ns {
                return Some(worst);
            }
        }
        None
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        #[test]
        fn warm_started_rta_equals_rta_from_scratch(set in arb_mixed_set(), bound_index in 0usize..3) {
            let bound = [DemandBound::Traditional, DemandBound::Refined, DemandBound::Linear][bound_index];
            let fast = response_times(&set, bound);
            let reference: Vec<Option<Nanos>> = (0..set.tasks.len()).map(|k| rta_from_scratch(&set, bound, k)).collect();
            prop_assert_eq!(fast, reference);
        }

        #[test]
        fn load_test_implies_rta(set in arb_set(), bound_index in 0usize..3) {
            let bound = [DemandBound::Traditional, DemandBound::Refined, DemandBound::Linear][bound_index];
            let load = analyze(&set, Test::Load, bound).unwrap();
            let rta = analyze(&set, Test::Rta, bound).unwrap();
            for (l, r) in load.tasks.iter().zip(&rta.tasks) {
                if l.schedulable {
                    prop_assert!(r.schedulable, "{} passes eq. 8 but not RTA", l.name);
                }
            }
        }

        #[test]
        fn response_time_covers_the_wcets_on_its_path(set in arb_set()) {
            let times = response_times(&set, DemandBound::Refined);
            for (k, r) in times.iter().enumerate() {
                if let Some(r) = r {
                    let path: u64 = set.interferers_of(k).chain([k])
                        .filter_map(|i| set.tasks[i].model.as_periodic())
                        .map(|p| p.wcet_ns)
                        .sum();
                    prop_assert!(*r >= path, "task {k}: R = {r} < {path}");
                }
            }
        }

        #[test]
        fn refined_and_traditional_rta_agree_on_periodic_sets(set in arb_set()) {
            // Both are exact at the fixed point for periodic interferers.
            prop_assert_eq!(response_times(&set, DemandBound::Refined), response_times(&set, DemandBound::Traditional));
        }
    }
}
