//! The `irqlab/reproduce/v1` document every simulated reproduction
//! returns: a [`Report`] made of [`Row`]s, one per claim or landmark of the
//! paper, each saying whether the relation the paper claims holds.

use serde::Serialize;

/// The JSON schema tag of every reproduction document.
pub const SCHEMA: &str = "irqlab/reproduce/v1";

/// One compared number: what the paper reports beside what the simulation
/// gave, and whether the relation the paper claims holds in simulation
/// (`None` for numbers shown for information only).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Row {
    pub metric: String,
    pub paper: String,
    pub simulated: f64,
    /// What this machine measured, in a live reproduction (whose `holds`
    /// then judges this number).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub live: Option<f64>,
    pub unit: String,
    pub holds: Option<bool>,
    /// The run was stopped before this relation could be judged: its
    /// numbers are partial, and neither "yes" nor "no" would be true.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub not_evaluated: bool,
}

impl Row {
    pub fn info(metric: impl Into<String>, paper: impl Into<String>, simulated: f64, unit: impl Into<String>) -> Self {
        Row { metric: metric.into(), paper: paper.into(), simulated, live: None, unit: unit.into(), holds: None, not_evaluated: false }
    }
    pub fn check(metric: impl Into<String>, paper: impl Into<String>, simulated: f64, unit: impl Into<String>, holds: bool) -> Self {
        Row {
            metric: metric.into(),
            paper: paper.into(),
            simulated,
            live: None,
            unit: unit.into(),
            holds: Some(holds),
            not_evaluated: false,
        }
    }
    /// The same row with the live measurement beside the simulated one.
    pub fn with_live(self, live: f64) -> Self {
        Row { live: Some(live), ..self }
    }
}

/// The `irqlab/reproduce/v1` document.
#[derive(Debug, Clone, Serialize)]
pub struct Report<D: Serialize> {
    pub schema: &'static str,
    pub paper: String,
    pub quick: bool,
    /// False when the run was stopped (Ctrl-C) before every run finished.
    pub complete: bool,
    pub seed: u64,
    pub rows: Vec<Row>,
    /// True when every checked relation holds.
    pub all_hold: bool,
    /// Paper-specific detail (grids, baselines, counters).
    pub details: D,
}

impl<D: Serialize> Report<D> {
    /// An interrupted run's relations are not evaluated (its sweeps are
    /// partial), rather than reported as failing.
    pub fn new(paper: &str, quick: bool, complete: bool, seed: u64, mut rows: Vec<Row>, details: D) -> Self {
        if !complete {
            for r in rows.iter_mut().filter(|r| r.holds.is_some()) {
                (r.holds, r.not_evaluated) = (None, true);
            }
        }
        let all_hold = complete && rows.iter().all(|r| r.holds != Some(false));
        Report { schema: SCHEMA, paper: paper.into(), quick, complete, seed, rows, all_hold, details }
    }
}
