//! Live measurement on a real Linux machine: the interference probe,
//! latency, BPF accounting, stimulus, loads, traffic generators, the
//! Prometheus exporter and the player. Built on the host layer
//! (`irqlab-host`).

pub mod accounting;
pub mod export;
pub mod latency;
pub mod load;
pub mod player;
pub mod probe;
pub mod stimulus;
pub mod traffic;
pub mod watch;

pub use irqlab_host::{Error, Result};
