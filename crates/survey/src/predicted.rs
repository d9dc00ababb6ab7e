//! A prediction beside what was measured after (issue 53): `irqlab sim
//! --from-survey BEFORE --profile P` simulated each CPU and load of the
//! before survey with the profile applied in the model; a survey compared
//! with BEFORE after the profile was applied lines the three up per CPU
//! and load: before, predicted after, measured after.
//!
//! All three are raw maximum loads (the probe's measured curve, before any
//! idle floor is subtracted) and mean loads (gap time over run time), the
//! numbers the simulator produces, so that they compare like with like.

use crate::doc::{LoadCurve, Survey};
use crate::scenario::{FromSurvey, DOC_FILE, DOC_SCHEMA};
use irqlab_analysis::{InputError, Location};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The window lengths lined up (the issue's: 1 ms and 10 ms).
pub const WINDOWS_NS: [u64; 2] = [1_000_000, 10_000_000];

/// The survey document's `prediction`: where it came from and its rows.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PredictionBeside {
    /// The `irqlab/sim-from-survey/v1` file.
    pub file: String,
    /// The profile it predicts.
    pub profile: Option<String>,
    pub rows: Vec<PredictedRow>,
}

/// One CPU, load and measure: before (measured), the model of before
/// (simulated), predicted after, measured after.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PredictedRow {
    pub cpu: usize,
    pub load: String,
    /// The window's maximum load; `None`: the mean load.
    pub window_ns: Option<u64>,
    pub before: Option<f64>,
    pub simulated_before: Option<f64>,
    pub predicted: Option<f64>,
    pub after: Option<f64>,
}

impl PredictedRow {
    /// What the row measures, for people: `mean`, `1 ms`.
    pub fn measure(&self) -> String {
        self.window_ns.map_or("mean load".into(), |w| format!("max load, {} ms", w / 1_000_000))
    }
}

/// Reads an `irqlab/sim-from-survey/v1` document.
pub fn read(file: &str, text: &str) -> Result<FromSurvey, InputError> {
    match serde_json::from_str::<FromSurvey>(text) {
        Ok(doc) if doc.schema == DOC_SCHEMA => Ok(doc),
        Ok(doc) => Err(InputError::at(format!("schema is `{}`, expected `{DOC_SCHEMA}`", doc.schema), Location::at_offset(file, text, 0))),
        Err(e) => Err(InputError::at(
            format!("not an {DOC_SCHEMA} document: {e}"),
            Location { file: file.to_string(), line: e.line(), col: e.column() },
        )),
    }
}

/// Where `irqlab sim --from-survey DIR` keeps its document by default:
/// DIR/sim/from-survey.json beside the before survey's survey.json.
pub fn beside_survey(survey_file: &Path) -> PathBuf {
    survey_file.parent().unwrap_or(Path::new(".")).join("sim").join(DOC_FILE)
}

/// The rows of a prediction beside the survey measured after.
pub fn beside(prediction: &FromSurvey, file: &str, after: &Survey) -> PredictionBeside {
    let mut rows = Vec::new();
    for run in prediction.runs.iter().filter(|r| r.predicted.is_some()) {
        let predicted = run.predicted.as_ref().expect("filtered");
        let measured_after = after.cpus.iter().find(|c| c.cpu == run.cpu).and_then(|c| c.curves.iter().find(|c| c.load.name() == run.load));
        rows.push(PredictedRow {
            cpu: run.cpu,
            load: run.load.clone(),
            window_ns: None,
            before: Some(run.mean_load.measured),
            simulated_before: Some(run.mean_load.simulated),
            predicted: Some(predicted.mean_load),
            after: measured_after.and_then(LoadCurve::mean_load),
        });
        for w in WINDOWS_NS {
            let at = run.windows.iter().find(|p| p.window_ns == w);
            rows.push(PredictedRow {
                cpu: run.cpu,
                load: run.load.clone(),
                window_ns: Some(w),
                before: at.map(|p| p.measured),
                simulated_before: at.map(|p| p.simulated),
                predicted: predicted.windows.iter().find(|(x, _)| *x == w).map(|(_, y)| *y),
                after: measured_after.and_then(|c| c.measured.points.iter().find(|p| p.window_ns == w)).map(|p| p.max_load),
            });
        }
    }
    PredictionBeside { file: file.to_string(), profile: prediction.profile.clone(), rows }
}
