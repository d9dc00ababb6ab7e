//! Live measurement on a real Linux machine: interference probe, latency,
//! BPF accounting, the netns testbed and traffic generators.

pub mod error;
pub mod privilege;

pub use error::{Error, Result};
