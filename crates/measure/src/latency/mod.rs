//! Latency measurement: the timer test (cyclictest's method) and the
//! statistics shared with the external stimulus/response generator.

pub mod log_histogram;
pub mod realtime;
pub mod stats;
pub mod timer;

pub use log_histogram::{LogBins, LogHistogram};
pub use stats::{LatencyStats, LinearHistogram, StatsSummary};
pub use timer::{measure, measure_with_spikes, Config, LatencyReport, LiveThread, Spike, ThreadResult};
