//! Experiments: the papers this project reproduces, one module per paper,
//! above the simulator (`irqlab-sim`) and the live side (`irqlab-host`,
//! `irqlab-measure`, `irqlab-control`).
//!
//! An experiment is a paper's claims run again: its setups (scenarios in
//! `scenarios/<paper>/`, embedded with `include_str!`, or configurations
//! built in code), a sweep over them, and a comparison of the numbers with
//! the paper's. The simulated half of a paper returns a [`Report`] (the
//! `irqlab/reproduce/v1` document, [`report`]) made of [`Row`]s, one per
//! claim or landmark, each saying whether the relation the paper claims
//! holds; paper-specific detail (grids, curves, baselines) goes into its
//! `details`. A live half (the process-aware paper's [`process_aware::fig6`])
//! runs on this machine through the live crates and returns its own document.
//! The cases a relation compares (configurations, curves, setups) are
//! enums whose `name()` is the text shown, never strings matched.
//!
//! - [`idletime`]: idle-time scheduling of background work (disk, network).
//! - [`load_bounds`]: interrupt load bounds and server-based handling.
//! - [`bh_threshold`]: the bottom-half scheduler under a network flood.
//! - [`process_aware`]: process-aware interrupt accounting and scheduling,
//!   simulated ([`process_aware::sim`]) and live ([`process_aware::fig6`]).
//!
//! Adding a paper: a module here (a folder when it has a live half too)
//! with an `Options`, a `reproduce(&Options, &AtomicBool, ...)` returning a
//! `Report<Details>`, and unit tests for its relations; its scenarios in
//! `scenarios/<paper>/`; a command in `crates/cli/src/commands/reproduce/` that prints it (see
//! `docs/internals-experiments.md`).

/// Displays and serializes an enum as its `name()`: the text the
/// documents have always shown for that case.
macro_rules! by_name {
    ($($t:ty),*) => {$(
        impl std::fmt::Display for $t {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.pad(self.name())
            }
        }
        impl serde::Serialize for $t {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.name())
            }
        }
    )*};
}

pub mod bh_threshold;
pub mod idletime;
pub mod load_bounds;
pub mod process_aware;
pub mod repeats;
pub mod report;

pub use report::{Report, Row, SCHEMA};
