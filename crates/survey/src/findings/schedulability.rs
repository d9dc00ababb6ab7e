//! The user's task set against each CPU's measured interference, and the
//! server that would make it fit.
//!
//! The measured (attributed) curve of a load, and the idle run's measured
//! curve, enter the task set as its most urgent task (`kind = "curve"`: its conservative demand envelope,
//! load-bounds paper §4), and `irqlab analyze`'s default test decides (RTA,
//! refined bound). A driver thread irqlab can control is then tried under a
//! server instead, two kinds, each analysed as what it enforces here:
//!
//! - SCHED_DEADLINE: the kernel checks the budget at the scheduler tick
//!   unless HRTICK_DL is on (off by default, and only settable through
//!   debugfs, which a locked-down kernel such as this VM's shuts: doctor's
//!   `kernel lockdown` line), so a budget Q can overrun by up to one tick
//!   before the thread is throttled (it pays the overrun back later). It is
//!   analysed as a deferrable server of budget Q + tick (load-bounds paper
//!   §2: it may also run back to back across a period boundary).
//! - irqlab's sporadic server: the controller drops the thread to its low
//!   priority within its reaction time (tens of microseconds measured, see
//!   `SPORADIC_REACTION_NS`), analysed as a sporadic server of budget
//!   Q + reaction (by the sporadic-server theorem, a periodic task).
//!
//! The recommendation is the largest budget with which the set stays
//! schedulable with 20% headroom on every task's wcet (wcets and curves
//! are measured estimates), a kernel server preferred to irqlab's when both
//! fit: it bounds the driver's interference and gives the driver as much
//! of the CPU as the set allows.

use crate::doc::{Load, LoadCurve, ServerCheck, ServerKind, TasksetCheck};
use irqlab_analysis::{analyze, DemandBound, DemandEnvelope, Model, Nanos, Server, Task, TaskSet, Test};

/// The live sporadic server's reaction to an exhausted budget, with room:
/// its controller measured 25 us p50, 55 us p99 and 88 us at most on this
/// VM (`irqlab control threads --policy sporadic:...`, issue 16).
pub const SPORADIC_REACTION_NS: Nanos = 100_000;
/// Every task's wcet is scaled by this when a budget is chosen.
pub const HEADROOM: f64 = 1.2;

/// The server period tried: the load-bounds paper's 10 ms, or the
/// shortest deadline in the set when that is shorter (whole milliseconds,
/// at least 1 ms), so one budget cannot take a whole deadline.
pub fn server_period(set: &TaskSet) -> Nanos {
    let shortest = set.tasks.iter().filter_map(|t| t.model.as_periodic()).map(|t| t.deadline_ns).min();
    let period = shortest.map_or(10_000_000, |d| d.min(10_000_000));
    (period / 1_000_000).max(1) * 1_000_000
}

/// Budgets tried, as fractions of the period.
const BUDGET_FRACTIONS: [f64; 9] = [0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8];

/// `set` with `model` on top (most urgent) under the name `name`.
pub fn with_interferer(set: &TaskSet, name: &str, model: Model) -> TaskSet {
    let top = set.tasks.iter().map(|t| t.priority).min().unwrap_or(0) - 1;
    let mut tasks = vec![Task { name: name.to_string(), priority: top, model, origin: Default::default() }];
    tasks.extend(set.tasks.iter().cloned());
    TaskSet { tasks }
}

/// `set` with every periodic task's wcet scaled by `factor` (at most its deadline).
pub fn scaled(set: &TaskSet, factor: f64) -> TaskSet {
    let mut set = set.clone();
    for task in &mut set.tasks {
        if let Model::Periodic(t) = &mut task.model {
            t.wcet_ns = ((t.wcet_ns as f64 * factor) as Nanos).min(t.deadline_ns);
        }
    }
    set
}

/// Whether `set` is schedulable (and each periodic task's worst response),
/// by `irqlab analyze`'s default test and bound.
pub fn schedulable(set: &TaskSet) -> (bool, Vec<(String, Option<u64>)>) {
    match analyze(set, Test::Rta, DemandBound::Refined) {
        Ok(a) => (a.schedulable, a.tasks.iter().map(|t| (t.name.clone(), t.response_time_ns)).collect()),
        Err(_) => (false, Vec::new()),
    }
}

/// What a server of `kind` with budget `budget_ns` per `period_ns` can
/// take, as analysed (see the module doc).
pub fn server_model(kind: ServerKind, budget_ns: Nanos, period_ns: Nanos, tick_ns: Nanos) -> Model {
    match kind {
        ServerKind::Deadline => Model::DeferrableServer(Server { budget_ns: (budget_ns + tick_ns).min(period_ns), period_ns }),
        ServerKind::Sporadic => Model::SporadicServer(Server { budget_ns: (budget_ns + SPORADIC_REACTION_NS).min(period_ns), period_ns }),
    }
}

/// The check of one loaded curve; `tick_ns` is the scheduler tick.
pub fn check(set: &TaskSet, cpu: usize, curve: &LoadCurve, tick_ns: Nanos) -> TasksetCheck {
    let driver = Model::Curve(DemandEnvelope::from_curve(curve.judged()));
    let name = match curve.load {
        Load::None => format!("idle interference on CPU {cpu}"),
        load => format!("{} load on CPU {cpu}", load.name()),
    };
    let (schedulable_as_measured, responses_ns) = schedulable(&with_interferer(set, &name, driver));
    let driver_utilization = curve.fit.map(|f| f.utilization);
    let period = server_period(set);
    let with_headroom = scaled(set, HEADROOM);
    let mut servers = Vec::new();
    if curve.driver_match.is_some() {
        for kind in [ServerKind::Deadline, ServerKind::Sporadic] {
            for f in BUDGET_FRACTIONS {
                let budget_ns = ((period as f64 * f) as u64).max(1_024);
                let (ok, _) = schedulable(&with_interferer(&with_headroom, &name, server_model(kind, budget_ns, period, tick_ns)));
                let keeps_up = driver_utilization.is_some_and(|u| f >= u);
                servers.push(ServerCheck { kind, budget_ns, period_ns: period, schedulable: ok, keeps_up });
            }
        }
    }
    TasksetCheck { cpu, load: curve.load, schedulable_as_measured, responses_ns, driver_utilization, servers }
}

/// Every curve of the survey checked: the idle run's too, which is
/// interference as well (a survey with `--load none` answers with it).
pub fn checks(survey: &crate::doc::Survey, set: &TaskSet, tick_ns: Nanos) -> Vec<TasksetCheck> {
    survey.cpus.iter().flat_map(|c| c.curves.iter().map(move |l| check(set, c.cpu, l, tick_ns))).collect()
}

/// The largest budget that keeps the set schedulable, SCHED_DEADLINE
/// preferred when one fits.
pub fn best_server(check: &TasksetCheck) -> Option<&ServerCheck> {
    let best = |kind| check.servers.iter().filter(|s| s.kind == kind && s.schedulable).max_by_key(|s| s.budget_ns);
    best(ServerKind::Deadline).or_else(|| best(ServerKind::Sporadic))
}

#[cfg(test)]
mod tests {
    use super::*;
    use irqlab_analysis::{Curve, CurvePoint, PeriodicTask};

    fn periodic(name: &str, priority: i64, period_ms: u64, wcet_ms: u64) -> Task {
        let t = PeriodicTask { period_ns: period_ms * 1_000_000, wcet_ns: wcet_ms * 1_000_000, deadline_ns: period_ms * 1_000_000 };
        Task { name: name.into(), priority, model: Model::Periodic(t), origin: Default::default() }
    }

    fn heavy_driver() -> LoadCurve {
        // 90% of every window up to 100 ms: no task of 4 ms per 10 ms fits.
        let points =
            [10_000u64, 100_000, 1_000_000, 10_000_000, 100_000_000].iter().map(|&w| CurvePoint { window_ns: w, max_load: 0.9 }).collect();
        LoadCurve {
            load: Load::Net,
            complete: true,
            duration_ns: 1_000_000_000,
            measured: Curve::new(points),
            attributed: None,
            baseline_use: None,
            fit: Some(irqlab_analysis::HyperbolaFit { utilization: 0.9, period_ns: 1_000_000 }),
            fit_error: None,
            max_gap_ns: 0,
            rt_throttled: false,
            driver_threads: vec![],
            driver_match: Some("napi:irqlab-b".into()),
            sources: None,
            steal_ns: None,
            interrupts: None,
        }
    }

    #[test]
    fn a_heavy_driver_fails_the_set_and_a_server_makes_it_fit() {
        let set = TaskSet { tasks: vec![periodic("control", 0, 10, 4), periodic("logger", 1, 50, 10)] };
        // A 1 ms tick: SCHED_DEADLINE fits. control (4.8 ms with headroom
        // every 10 ms) beside a deferrable server of Q + 1 ms, which can
        // take 2(Q + 1 ms) in a 10 ms window: Q + 1 ms ≤ 2.6 ms, so 1 ms
        // (10%) is the largest budget tried that fits.
        let c = check(&set, 1, &heavy_driver(), 1_000_000);
        assert!(!c.schedulable_as_measured);
        let best = best_server(&c).expect("some budget fits");
        assert_eq!((best.kind, best.period_ns, best.budget_ns), (ServerKind::Deadline, 10_000_000, 1_000_000), "{best:?}");
        assert!(!best.keeps_up, "90% cannot be kept up with 10%");
        let bigger = c.servers.iter().find(|s| s.kind == ServerKind::Deadline && s.budget_ns > best.budget_ns).unwrap();
        assert!(!bigger.schedulable);

        // A 4 ms tick (HZ=250): no SCHED_DEADLINE budget fits; the sporadic
        // server (Q + 0.1 ms, a periodic interferer) does, up to
        // 4.8 + Q + 0.1 ≤ 10 → 5 ms, less what the logger needs.
        let c = check(&set, 1, &heavy_driver(), 4_000_000);
        assert!(c.servers.iter().filter(|s| s.kind == ServerKind::Deadline).all(|s| !s.schedulable));
        let best = best_server(&c).expect("a sporadic budget fits");
        assert_eq!(best.kind, ServerKind::Sporadic);
        assert!(best.budget_ns >= 2_000_000 && best.budget_ns <= 5_000_000, "{best:?}");
    }

    #[test]
    fn the_server_period_follows_short_deadlines() {
        let set = TaskSet { tasks: vec![periodic("fast", 0, 4, 1)] };
        assert_eq!(server_period(&set), 4_000_000);
        assert_eq!(server_period(&TaskSet { tasks: vec![periodic("slow", 0, 50, 1)] }), 10_000_000);
    }
}
