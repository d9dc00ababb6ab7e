//! Schedulability analysis with interrupt and driver load.
//!
//! Pure math, no I/O. Implements the analysis of the load-bounds paper
//! (Lewandowski et al., "Modeling device driver effects in real-time
//! schedulability analysis", `shared/seeds/driver-load-bounds.txt`) and the
//! throughput model of the idletime dissertation. Each public item cites the
//! equation it implements.
//!
//! Shared foundations used by every other crate also live here because they
//! are pure: the duration parser ([`units`]) and located input errors
//! ([`input`]).

pub mod curve;
pub mod input;
pub mod units;

pub use input::{InputError, Location};
pub use units::{format_ns, parse_duration_ns, Nanos};
