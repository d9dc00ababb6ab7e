//! Task models and the demand each one places on lower-priority work.
//!
//! Load-bounds paper §2 (periodic/sporadic tasks, aperiodic servers) and §4
//! (empirical load bounds: hyperbolic and tabulated).

use crate::demand::{hyperbolic_demand, hyperbolic_load, periodic_demand, DemandBound};
use crate::envelope::DemandEnvelope;
use crate::units::Nanos;

/// A periodic or sporadic task (load-bounds paper §2): releases at least
/// `period_ns` apart, each job needs at most `wcet_ns` and must finish
/// within `deadline_ns` of its release (may be longer than the period).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PeriodicTask {
    /// p: period or minimum separation of releases.
    pub period_ns: Nanos,
    /// e: worst-case execution time of one job.
    pub wcet_ns: Nanos,
    /// d: relative deadline.
    pub deadline_ns: Nanos,
}

impl PeriodicTask {
    /// `u = e / p` (load-bounds paper §2).
    pub fn utilization(&self) -> f64 {
        self.wcet_ns as f64 / self.period_ns as f64
    }
}

/// An empirical hyperbolic load bound (load-bounds paper eq. 10 with the
/// fitted `u` and `p` of §4): `load(Δ) = min(1, u + u (1 - u) p / Δ)`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Hyperbola {
    /// u of eq. 10.
    pub utilization: f64,
    /// p of eq. 10 (e = u·p).
    pub period_ns: Nanos,
}

/// An aperiodic server's budget `budget_ns` per `period_ns` (load-bounds
/// paper §2, "aperiodic server thread scheduling algorithms").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Server {
    /// C: execution budget per period.
    pub budget_ns: Nanos,
    /// T: replenishment period.
    pub period_ns: Nanos,
}

/// What a task is. Only [`Model::Periodic`] tasks have deadlines and are
/// analysed; the others are interferers: they only take time from tasks of
/// lower priority.
#[derive(Debug, Clone, PartialEq)]
pub enum Model {
    /// Periodic or sporadic task, load-bounds paper §2.
    Periodic(PeriodicTask),
    /// Empirical hyperbolic load bound, load-bounds paper eq. 10 / §4.
    Hyperbolic(Hyperbola),
    /// Empirical tabulated load curve (Δ → max load), load-bounds paper §4.
    Curve(DemandEnvelope),
    /// Polling server (load-bounds paper §2, [14]): runs as a periodic task
    /// with wcet = budget, so it interferes like one (eqs. 4/6/7).
    PollingServer(Server),
    /// Deferrable server (load-bounds paper §2, [16, 8]): keeps its budget
    /// through the period, so it can run its budget at the end of one period
    /// and again at the start of the next (back to back).
    DeferrableServer(Server),
    /// Sporadic server (load-bounds paper §2 and §5, [15, 10]): by the
    /// sporadic-server theorem it interferes no more than a periodic task
    /// with wcet = budget and the same period.
    SporadicServer(Server),
}

impl Model {
    /// The name used in task-set files (`kind = ...`).
    pub fn kind(&self) -> &'static str {
        match self {
            Model::Periodic(_) => "periodic",
            Model::Hyperbolic(_) => "hyperbolic",
            Model::Curve(_) => "curve",
            Model::PollingServer(_) => "polling-server",
            Model::DeferrableServer(_) => "deferrable-server",
            Model::SporadicServer(_) => "sporadic-server",
        }
    }

    /// The periodic task this is, when it is one (only those are analysed).
    pub fn as_periodic(&self) -> Option<PeriodicTask> {
        match self {
            Model::Periodic(t) => Some(*t),
            _ => None,
        }
    }

    /// Upper bound on the CPU time this task takes in any window of length
    /// `window` (`demand_max(Δ)`, load-bounds paper eq. 2). `bound` selects
    /// eq. 4, 6 or 7 for periodic tasks and servers; the empirical models
    /// have their own bound. Never decreases in `window`.
    pub fn demand_ns(&self, window: Nanos, bound: DemandBound) -> Nanos {
        match self {
            Model::Periodic(t) => periodic_demand(bound, t.period_ns, t.wcet_ns, window),
            Model::Hyperbolic(h) => hyperbolic_demand(h.utilization, h.period_ns, window),
            Model::Curve(env) => env.demand_ns(window),
            Model::PollingServer(s) | Model::SporadicServer(s) => periodic_demand(bound, s.period_ns, s.budget_ns, window),
            Model::DeferrableServer(s) => deferrable_server_demand(*s, window, bound),
        }
    }

    /// Load bound `demand(Δ)/Δ` (load-bounds paper eqs. 9, 10 and §4).
    pub fn load(&self, window: Nanos, bound: DemandBound) -> f64 {
        match self {
            Model::Hyperbolic(h) => hyperbolic_load(h.utilization, h.period_ns, window),
            Model::Curve(env) => env.load(window),
            _ if window == 0 => 1.0,
            _ => self.demand_ns(window, bound) as f64 / window as f64,
        }
    }

    /// A line above the demand: `demand(Δ) ≤ slope Δ + intercept` for every
    /// Δ. The slope is the long-run utilisation; the EDF test uses the line
    /// to know how far it must look.
    pub fn demand_line(&self) -> (f64, f64) {
        // +1: the linear bound is rounded up to whole nanoseconds.
        let periodic = |p: Nanos, e: Nanos| (e as f64 / p as f64, e as f64 + 1.0);
        match self {
            // ceil(Δ/p) e ≤ (Δ/p + 1) e bounds all three of eqs. 4, 6, 7.
            Model::Periodic(t) => periodic(t.period_ns, t.wcet_ns),
            Model::PollingServer(s) | Model::SporadicServer(s) => periodic(s.period_ns, s.budget_ns),
            Model::DeferrableServer(s) => {
                let u = s.budget_ns as f64 / s.period_ns as f64;
                (u, 2.0 * s.budget_ns as f64 + u * s.period_ns as f64)
            }
            Model::Hyperbolic(h) => {
                let u = h.utilization;
                (u, u * (1.0 - u) * h.period_ns as f64 + 1.0)
            }
            Model::Curve(env) => {
                let u = env.long_run_utilization();
                (u, env.demand(env.last_window()) + 1.0)
            }
        }
    }
}

/// Demand of a deferrable server as lower-priority tasks see it
/// (load-bounds paper §2, deferrable server [16, 8]): the worst window
/// starts when the server spends its whole budget at the very end of a
/// period, and a full budget arrives right after, so the window sees
/// `min(Δ, C)` and then the demand of a periodic task (C, T) in the rest:
/// `min(Δ, C) + bound(Δ - C)`. With the traditional bound this is the
/// classic `ceil((Δ + T - C)/T) C` (periodic with release jitter T - C).
pub fn deferrable_server_demand(server: Server, window: Nanos, bound: DemandBound) -> Nanos {
    let Server { budget_ns: c, period_ns: t } = server;
    if window <= c {
        return window;
    }
    let rest = window - c;
    let tail = match bound {
        // Eq. 4 with jitter: ceil((Δ - C)/T) more budgets after the first.
        DemandBound::Traditional => rest.div_ceil(t.max(1)).saturating_mul(c),
        _ => periodic_demand(bound, t, c, rest),
    };
    c.saturating_add(tail).min(window)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deferrable_server_runs_back_to_back() {
        let s = Server { budget_ns: 2, period_ns: 10 };
        // Two budgets back to back: 4 units of demand in a window of 4.
        assert_eq!(deferrable_server_demand(s, 4, DemandBound::Refined), 4);
        assert_eq!(deferrable_server_demand(s, 5, DemandBound::Refined), 4);
        // A third budget arrives 10 after the second one started (at 2).
        assert_eq!(deferrable_server_demand(s, 12, DemandBound::Refined), 4);
        assert_eq!(deferrable_server_demand(s, 13, DemandBound::Refined), 5);
        assert_eq!(deferrable_server_demand(s, 14, DemandBound::Refined), 6);
        // Classic ceil((Δ + T - C)/T) C with jitter T - C.
        for w in [3u64, 4, 9, 12, 13, 25] {
            assert_eq!(deferrable_server_demand(s, w, DemandBound::Traditional), ((w + 10 - 2).div_ceil(10) * 2).min(w));
        }
        // A polling server of the same budget interferes less.
        let polling = Model::PollingServer(s);
        let deferrable = Model::DeferrableServer(s);
        assert!(polling.demand_ns(4, DemandBound::Refined) < deferrable.demand_ns(4, DemandBound::Refined));
    }

    #[test]
    fn demand_lines_lie_above_the_demand() {
        let env = DemandEnvelope::from_points(&[
            crate::curve::CurvePoint { window_ns: 1_000, max_load: 0.6 },
            crate::curve::CurvePoint { window_ns: 10_000, max_load: 0.2 },
        ]);
        let models = [
            Model::Periodic(PeriodicTask { period_ns: 7, wcet_ns: 2, deadline_ns: 7 }),
            Model::Hyperbolic(Hyperbola { utilization: 0.3, period_ns: 500 }),
            Model::Curve(env),
            Model::PollingServer(Server { budget_ns: 3, period_ns: 11 }),
            Model::DeferrableServer(Server { budget_ns: 3, period_ns: 11 }),
            Model::SporadicServer(Server { budget_ns: 3, period_ns: 11 }),
        ];
        for m in &models {
            let (slope, intercept) = m.demand_line();
            for w in (0..50_000).step_by(7) {
                for bound in [DemandBound::Traditional, DemandBound::Refined, DemandBound::Linear] {
                    let d = m.demand_ns(w, bound) as f64;
                    assert!(d <= slope * w as f64 + intercept + 1e-6, "{} at {w}", m.kind());
                }
            }
        }
    }
}
