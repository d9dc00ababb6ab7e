//! `irqlab survey`: the question a user asks first — how much do
//! interrupts and bottom halves take from my tasks on this machine, where,
//! and what should I change? — answered by one run and one page.
//!
//! - [`doc`]: the `irqlab/survey/v1` document (every measurement embedded).
//! - [`run`]: the steps on the live machine (doctor, interference probe idle
//!   and under load, timer and stimulus latency, BPF accounting), each
//!   skipped with its reason when it cannot run here, all stopping cleanly
//!   on Ctrl-C with what was measured kept.
//! - [`interrupts`]: the probed CPU's interrupt counts during each probe
//!   run (/proc/interrupts; the local timer apart).
//! - [`findings`]: pure rules from measured numbers to findings and
//!   recommendations (each shows its number and states its rule).
//! - [`page`]: the one-page, self-contained HTML report.
//! - [`before_after`]: an earlier survey beside this one (`--compare`).

pub mod before_after;
pub mod compare;
pub mod doc;
pub mod findings;
pub mod interrupts;
pub mod loads;
pub mod page;
pub mod predicted;
pub mod profile;
pub mod run;
pub mod scenario;

pub use doc::{Survey, SCHEMA};

/// The survey a `FILE|DIR` argument names: DIR/survey.json for a directory.
pub fn survey_file(path: &std::path::Path) -> std::path::PathBuf {
    if path.is_dir() {
        path.join("survey.json")
    } else {
        path.to_path_buf()
    }
}
