//! The control layer: irqlab changing the machine it measured, always
//! through the [`journal`] (written before each change, restored on every
//! exit path, leftovers of a killed run named and revertible). A live
//! policy is a monitor (`crate::monitor`), the shared decision code, and an
//! actuator here: [`sched`] sets any thread's scheduling class through
//! `sched_setattr` (SCHED_DEADLINE included), [`sched_knobs`] the
//! scheduler's debugfs knobs (HRTICK_DL, the fair server), [`threads`]
//! resolves which threads a user means.
//!
//! Where to add: an actuator is a new [`journal::Object`] / [`journal::Value`]
//! pair and its arms in `journal::read` / `journal::write`; a controller is a
//! module here with the shape `run(&Config, &stop, on_event) -> Result<Report>`.

pub mod bh_budget;
pub mod cgroup;
pub mod idletime;
pub mod journal;
pub mod netdev;
pub mod process_aware;
pub mod root_domain;
pub mod sched;
pub mod sched_knobs;
pub mod set_napi;
pub mod set_threads;
pub mod sporadic;
pub mod threads;
