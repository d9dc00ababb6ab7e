//! Measured interference curves: maximum observed load per window length.
//!
//! The load-bounds paper's empirical load bound (§4, Figs. 4–6): for each
//! window length Δ, the largest fraction of any window of that length that
//! was taken from the probe task. Written by the live probe and by the
//! simulated probe, read by `irqlab fit` and by task sets (`kind = "curve"`).

use serde::{Deserialize, Serialize};

/// The JSON schema tag of a curve document.
pub const CURVE_SCHEMA: &str = "irqlab/curve/v1";

/// One point: over every window of `window_ns`, at most `max_load` of it
/// was taken (a fraction in [0, 1]).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct CurvePoint {
    pub window_ns: u64,
    pub max_load: f64,
}

/// The minimal curve document every producer writes and every consumer
/// reads. Producers add their own fields (resolution, histogram,
/// `complete`, ...) beside these; readers ignore what they do not know.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Curve {
    pub schema: String,
    pub points: Vec<CurvePoint>,
}

impl Curve {
    pub fn new(points: Vec<CurvePoint>) -> Self {
        Curve { schema: CURVE_SCHEMA.to_string(), points }
    }
}
