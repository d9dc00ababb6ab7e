//! Deterministic discrete-event simulator of a Linux-like kernel: hard IRQs,
//! softirqs, NAPI, ksoftirqd, threaded IRQs, schedulers and servers.
//!
//! [`engine`] is the shared core every model runs on: an integer-nanosecond
//! clock, one event queue with deterministic tie-breaking, and one seeded
//! random stream per named source.

pub mod disk;
pub mod engine;
pub mod idletime;
pub mod reproduce;
