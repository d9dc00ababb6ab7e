//! The analysis beside the live sweeps: the probe's curves, the tasks'
//! measured execution times and the largest e2 each configuration's
//! analysis predicts (the paper's, and with the machine's own
//! interference).

use super::*;

/// The analysis's largest e2 without misses for one configuration.
#[derive(Debug, Clone, Serialize)]
pub struct Prediction {
    pub setup: Setup,
    /// The paper's analysis: τ1 and τD only (the driver curve with the
    /// idle floor subtracted, or the server's bound).
    pub max_e2_ns: Nanos,
    pub model: String,
    pub driver_fit: Option<HyperbolaFit>,
    /// The same plus the machine's own interference, which live τ2 suffers
    /// too: the probe's curve under the flood as measured (nothing
    /// subtracted), or the idle curve's fit beside τ1 and the server. This
    /// is the one compared with the live limit; `None` when no curve fitted.
    pub machine_max_e2_ns: Option<Nanos>,
    pub machine_model: String,
    pub machine_fit: Option<HyperbolaFit>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Curves {
    /// The probe in τ2's place with no flood, and under the flood with the
    /// Traditional and Foreground layouts.
    pub idle: Curve,
    pub traditional: Curve,
    pub foreground: Curve,
    /// Under the flood with SCHED_DEADLINE's layout: the server's runs and
    /// what its kthread's wake-ups cost the CPU around them.
    pub deadline: Curve,
    /// The flood curves minus the idle curve's least load (the driver alone).
    pub traditional_driver: Curve,
    pub foreground_driver: Curve,
}

/// Per window, the least of the runs' maxima. This guest's host stops a
/// vCPU for 5-15 ms now and then, which puts a window's maximum at 100%
/// up to the stall's length in whichever run it hits; a stationary
/// driver reaches its own maxima in every run, so the least over runs keeps
/// the driver's and drops a stall unless it hit every run.
pub fn robust_maxima(curves: &[Curve]) -> Curve {
    let Some(first) = curves.first() else { return Curve::new(Vec::new()) };
    let least = |f: &dyn Fn(&Curve) -> Option<f64>| curves.iter().filter_map(f).fold(f64::INFINITY, f64::min);
    let points = first
        .points
        .iter()
        .map(|p| CurvePoint {
            window_ns: p.window_ns,
            max_load: least(&|c| c.points.iter().find(|q| q.window_ns == p.window_ns).map(|q| q.max_load)),
        })
        .collect();
    // The least load of any window is the least over all runs.
    let floor = first
        .floor
        .iter()
        .map(|f| FloorPoint {
            window_ns: f.window_ns,
            min_load: least(&|c| c.floor.iter().find(|q| q.window_ns == f.window_ns).map(|q| q.min_load)),
        })
        .collect();
    Curve::with_floor(points, floor)
}

/// What the nominal e1 and e2 took on this machine: the most CPU time one
/// job took in the no-flood sweeps (the kernel's charge to the thread: the
/// work and the interrupts that landed in it; the host's steal is not in
/// it, this kernel accounts steal time apart), τ1's over all of them and
/// τ2's per swept e2. The work loop is calibrated once (its sustained speed
/// over 500 ms) and its jobs take up to a few percent more than asked
/// (timer and tick interrupts, the speed's drift): the analysis's
/// execution times are these, not the nominal ones.
#[derive(Debug, Clone, Serialize)]
pub struct Execution {
    pub tau1_ns: Nanos,
    /// (nominal e2, the most CPU time one of its jobs took), by e2.
    pub tau2_ns: Vec<(Nanos, Nanos)>,
}

impl Execution {
    /// From the no-flood points; `None` without their job measures.
    pub(super) fn measured(points: &[Point]) -> Option<Execution> {
        let quiet: Vec<&Point> = points.iter().filter(|p| p.setup == Setup::NoFlood).collect();
        let ns = |us: f64| (us * 1e3).round() as Nanos;
        let tau1_ns = quiet.iter().filter_map(|p| p.tau1_cpu_us).map(|q| ns(q.max)).max()?;
        let mut tau2_ns: Vec<(Nanos, Nanos)> = Vec::new();
        for p in &quiet {
            let Some(q) = p.tau2_cpu_us else { continue };
            match tau2_ns.iter_mut().find(|(e, _)| *e == p.e2_ns) {
                Some(known) => known.1 = known.1.max(ns(q.max)),
                None => tau2_ns.push((p.e2_ns, ns(q.max))),
            }
        }
        tau2_ns.sort_unstable();
        (!tau2_ns.is_empty()).then_some(Execution { tau1_ns, tau2_ns })
    }

    /// τ2's execution time for a nominal e2: the measured ratio to the
    /// nominal, interpolated linearly between the swept values (the
    /// nearest one's beyond them).
    pub fn tau2(&self, e2: Nanos) -> Nanos {
        let ratio = |(e, c): (Nanos, Nanos)| c as f64 / e.max(1) as f64;
        let m = &self.tau2_ns;
        let r = match m.iter().position(|&(e, _)| e >= e2) {
            Some(0) => ratio(m[0]),
            None => ratio(m[m.len() - 1]),
            Some(i) => {
                let (a, b) = (m[i - 1], m[i]);
                ratio(a) + (e2 - a.0) as f64 / (b.0 - a.0) as f64 * (ratio(b) - ratio(a))
            }
        };
        (e2 as f64 * r).round() as Nanos
    }

    /// τ1's demand in a window (eq. 4) with its measured execution time
    /// and its receive, as [`tau1_demand`] has the nominal one.
    pub fn tau1_demand(&self, window: Nanos) -> Nanos {
        periodic_demand(DemandBound::Traditional, PERIOD, self.tau1_ns + TAU1_RECEIVE_NS, window)
    }
}

/// The analysis per configuration (see the module's comment), twice: the
/// paper's (τ1 and τD alone) and with the machine's own interference,
/// which live τ2 suffers as well (the probe's curves: under the flood as
/// measured for Traditional, Foreground and SCHED_DEADLINE, where the probe
/// lost it to the driver or the server and the machine together; the idle
/// curve's fit beside τ1 and the server for the others), with τ1's and
/// τ2's measured execution times ([`Execution`]).
pub(super) fn predictions(curves: Option<&Curves>, execution: Option<&Execution>, points: &[Point]) -> Vec<Prediction> {
    use irqlab_analysis::task::deferrable_server_demand;
    let fit = |c: Option<&Curve>| c.and_then(|c| fit_hyperbola(&c.points).ok());
    let hyperbola = |f: &HyperbolaFit, t: Nanos| hyperbolic_demand(f.utilization, f.period_ns, t);
    let idle_fit = fit(curves.map(|c| &c.idle));
    // The machine's analysis runs τ1 and τ2 with their measured execution
    // times (nominal without them).
    let tau1 = |t: Nanos| execution.map_or_else(|| tau1_demand(t), |x| x.tau1_demand(t));
    let solve = |interference: &dyn Fn(Nanos) -> Nanos| match execution {
        Some(x) => max_e2_executing(&|e2| x.tau2(e2), interference),
        None => max_e2(interference),
    };
    let executing = if execution.is_some() { ", tau1 and tau2 at their measured execution times" } else { "" };
    let machine_idle = format!("the same plus the machine's own interference (the probe's idle curve, fitted){executing}");
    let driver = |setup, driver: Option<&Curve>, whole: Option<&Curve>| {
        let (driver_fit, machine_fit) = (fit(driver), fit(whole));
        Prediction {
            setup,
            max_e2_ns: driver_fit.map_or(0, |f| predicted_max_e2(&f)),
            model: if driver_fit.is_some() {
                "tau1 + fitted driver curve (probe under the flood minus the idle floor)"
            } else {
                "no curve fitted"
            }
            .into(),
            driver_fit,
            machine_max_e2_ns: machine_fit.map(|f| solve(&|t| tau1(t) + hyperbola(&f, t))),
            machine_model: format!("tau1 + the probe's curve under the flood as measured, fitted (driver and machine together){executing}"),
            machine_fit,
        }
    };
    let beside = |setup, model: String, other: &dyn Fn(Nanos) -> Nanos| Prediction {
        setup,
        max_e2_ns: max_e2(&|t| tau1_demand(t) + other(t)),
        model,
        driver_fit: None,
        machine_max_e2_ns: idle_fit.map(|f| solve(&|t| tau1(t) + other(t) + hyperbola(&f, t))),
        machine_model: machine_idle.clone(),
        machine_fit: idle_fit,
    };
    let reaction_ns = points
        .iter()
        .filter(|p| p.setup == Setup::Config(Configuration::Sporadic))
        .filter_map(|p| p.server_reaction_p99_us)
        .fold(0.0, f64::max)
        * 1e3;
    let server = irqlab_analysis::Server { budget_ns: BUDGET, period_ns: SERVER_PERIOD };
    let deadline_server = |t| deferrable_server_demand(server, t, DemandBound::Traditional);
    let mut deadline = beside(
        Setup::Config(Configuration::Deadline),
        "tau1 + a deferrable server of the runtime (a CBS may run a fresh budget right after a spent one)".into(),
        &deadline_server,
    );
    // The server's own interference as the probe measured it under the
    // flood, with what its kthread's wake-ups cost around its runs, which
    // the server's bound leaves out.
    if let Some(f) = fit(curves.map(|c| &c.deadline)) {
        deadline.machine_max_e2_ns = Some(solve(&|t| tau1(t) + hyperbola(&f, t)));
        deadline.machine_model =
            format!("tau1 + the probe's curve under the flood with the server's layout as measured, fitted (server and machine together){executing}");
        deadline.machine_fit = Some(f);
    }
    vec![
        driver(Setup::Config(Configuration::Traditional), curves.map(|c| &c.traditional_driver), curves.map(|c| &c.traditional)),
        beside(Setup::Config(Configuration::Background), "tau1 alone (the driver below tau2)".into(), &|_| 0),
        driver(Setup::Config(Configuration::Foreground), curves.map(|c| &c.foreground_driver), curves.map(|c| &c.foreground)),
        beside(
            Setup::Config(Configuration::Sporadic),
            format!(
                "tau1 + a periodic task of the budget plus the controller's measured reaction p99 ({:.0} us; sporadic-server theorem)",
                reaction_ns / 1e3
            ),
            &|t| periodic_demand(DemandBound::Traditional, SERVER_PERIOD, BUDGET + reaction_ns as Nanos, t),
        ),
        deadline,
    ]
}
