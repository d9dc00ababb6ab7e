//! Live measurement on a real Linux machine: interference probe, latency,
//! BPF accounting, the netns testbed and traffic generators.

pub mod accounting;
mod bpf_trial;
pub mod cleanup;
pub mod control;
pub mod doctor;
pub mod error;
pub mod export;
mod flock;
pub mod latency;
pub mod load;
pub mod machine;
pub mod monitor;
pub mod player;
pub mod privilege;
pub mod probe;
pub mod rt;
pub mod rt_limit;
pub mod stimulus;
pub mod stop;
pub mod testbed;
pub mod tracepoints;
pub mod traffic;

pub use error::{Error, Result};
