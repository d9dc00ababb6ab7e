//! The papers' policies as pure decision code: no I/O, no simulator
//! types, time as `u64` nanoseconds. Inputs are observations (a thread ran
//! from `start` to `end`, it woke, it blocked, a timer fired); outputs are
//! decisions (run it at its high or its low level) and the timers to arm.
//! The simulator (`irqlab-sim`) and the live controllers (`irqlab-control`)
//! call the same code through thin adapters, so what the simulator
//! predicts is what the machine is made to do.
//!
//! Today: the aperiodic servers of the load-bounds paper's driver
//! configurations ([`server`]), the BH-threshold paper's Bottom Half
//! Scheduler ([`bh_threshold`]), and the process-aware paper's
//! compensation and priority prediction ([`process_aware`]), and the
//! idletime dissertation's Variant-1 scheduler ([`idletime`]).

pub mod bh_threshold;
pub mod idletime;
pub mod process_aware;
pub mod server;
