//! `irqlab control sched-feature` and `control fair-server` as a control
//! like the others: the scheduler's debugfs knobs
//! (`irqlab_host::journal::sched_knobs`: lockdown checked, debugfs mounted
//! when it is not, each knob a journal object) applied, held with the one
//! hold (`journal::hold`: the one end-of-run rule, drift read back every
//! second) and restored, or persisted.

use irqlab_host::journal::hold::{self, Changed, EndedBy};
use irqlab_host::journal::sched_knobs::{apply, kernel_release, Change};
use irqlab_host::journal::{Object, Value};
use irqlab_host::Result;
use serde::Serialize;
use std::sync::atomic::AtomicBool;

pub const SCHEMA: &str = "irqlab/control-sched/v1";

#[derive(Debug, Clone)]
pub struct Config {
    pub change: Change,
    pub duration_ns: Option<u64>,
    pub persist: bool,
}

/// The `irqlab/control-sched/v1` document.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub schema: &'static str,
    pub kernel: String,
    pub change: Change,
    /// Where debugfs was, and whether irqlab mounted it for the run.
    pub debugfs: String,
    pub mounted_debugfs: bool,
    pub changes: Vec<Changed>,
    pub persist: bool,
    pub held_ns: u64,
    pub ended_by: EndedBy,
    pub complete: bool,
    /// Values something else changed while the run held them, as found
    /// (each said on stderr then; `control status` names them after).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub drifts: Vec<hold::Drift>,
}

/// Applies the change (each knob recorded in the journal first), holds it
/// until `stop` or the duration, and restores it (unless `persist`, which
/// keeps the knobs and still unmounts a debugfs irqlab mounted: the kernel
/// keeps the setting without the mount). `on_applied` is told each knob's
/// (object, old, new) once all are in force.
pub fn run(config: &Config, stop: &AtomicBool, mut on_applied: impl FnMut(&Object, &Value, &Value)) -> Result<Report> {
    let mut held = apply(&config.change)?;
    for a in &held.changes {
        on_applied(&a.entry().object, &a.entry().old, &a.entry().new);
    }
    let debugfs = held.debugfs.mount.display().to_string();
    let mounted_debugfs = held.debugfs.mounted.is_some();
    let mut drift = hold::DriftWatch::new(true);
    let (held_ns, ended_by) = hold::wait_while(stop, config.duration_ns, config.persist, || {
        drift.check_all(&held.changes);
        None
    });
    let complete = ended_by.complete(config.duration_ns, 0);
    let changes = hold::settle(std::mem::take(&mut held.changes), config.persist)?;
    if let Some(mount) = held.debugfs.mounted.take() {
        mount.restore()?;
    }
    Ok(Report {
        schema: SCHEMA,
        kernel: kernel_release(),
        change: config.change.clone(),
        debugfs,
        mounted_debugfs,
        changes,
        persist: config.persist,
        held_ns,
        ended_by,
        complete,
        drifts: drift.drifts,
    })
}
