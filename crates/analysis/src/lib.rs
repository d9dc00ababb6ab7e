//! Schedulability analysis with interrupt and driver load.
//!
//! Pure math, no I/O. Implements the analysis of the load-bounds paper
//! (Lewandowski et al., "Modeling device driver effects in real-time
//! schedulability analysis"; `docs/papers.md` §3) and the
//! throughput model of the idletime dissertation. Each public item cites the
//! equation it implements.
//!
//! Shared foundations used by every other crate also live here because they
//! are pure: the duration parser ([`units`]), located input errors
//! ([`input`]) and the CPU-time vocabulary the simulator's and the live
//! accounting's documents share ([`cpu_time`]).

pub mod cpu_time;
pub mod curve;
pub mod demand;
pub mod edf;
pub mod envelope;
pub mod fit;
pub mod fixed_priority;
pub mod idletime;
pub mod input;
mod interference;
pub mod task;
pub mod taskset;
pub mod units;
pub mod verdict;

pub use input::{InputError, Location};
pub use units::{format_ns, parse_duration_ns, Nanos};

pub use curve::{Curve, CurvePoint};
pub use demand::DemandBound;
pub use envelope::DemandEnvelope;
pub use fit::{fit_hyperbola, subtract_baseline, HyperbolaFit};
pub use task::{Hyperbola, Model, PeriodicTask, Server};
pub use taskset::{parse_task_set, Task, TaskSet};
pub use verdict::{analyze, response_times, Analysis, TaskVerdict, Test};
