//! Latency measurement: the timer test (cyclictest's method) and the
//! statistics shared with the external stimulus/response generator.

pub mod realtime;
pub mod stats;
pub mod timer;

pub use stats::{LatencyStats, LinearHistogram, StatsSummary};
pub use timer::{measure, Config, LatencyReport, LiveThread, ThreadResult};
