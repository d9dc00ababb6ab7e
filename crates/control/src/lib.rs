//! The live controllers: irqlab changing the machine it measured, always
//! through the control journal (`irqlab_host::journal`: written before each
//! change, restored on every exit path, leftovers of a killed run named and
//! revertible). A live policy is a monitor ([`monitor`], BPF), the shared
//! decision code (`irqlab-policy`), and an actuator (the journal's objects).
//! [`doctor`] aggregates the checks of every measurement and controller.
//!
//! Where to add: an actuator is a new `journal::Object` / `journal::Value`
//! pair in `irqlab-host` and its arms in `journal::read` / `journal::write`;
//! a controller is a module here with the shape
//! `run(&Config, &stop, on_event) -> Result<Report>`.

pub mod beside_tuned;
pub mod bh_budget;
pub mod boot;
pub mod controller_thread;
pub mod doctor;
pub mod idletime;
pub mod install;
pub mod monitor;
pub mod napi_layout;
pub mod process_aware;
pub mod profile;
pub mod sched_knobs;
pub mod set_napi;
pub mod set_threads;
pub mod sporadic;
pub mod tuned_export;

pub use irqlab_host::{Error, Result};
