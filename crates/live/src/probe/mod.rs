//! The interference probe (load-bounds paper §4, "empirical load bound";
//! `shared/SEEDS.md` §3): a thread pinned to one CPU at real-time priority
//! just below the driver threads, memory locked, reads the clock as fast as
//! it can; every jump above a threshold is a preemption. For each window
//! length Δ the largest fraction of any window taken by preemptions is the
//! measured load bound, computed exactly over all window positions.
//!
//! ```no_run
//! use irqlab_live::probe::{run, ProbeConfig};
//! use std::sync::{atomic::AtomicBool, Arc};
//! // RT throttling is lifted for the run where allowed (`rt_limit`).
//! let config = ProbeConfig::new(1, 2_000_000_000);
//! let curve = run(&config, Arc::new(AtomicBool::new(false)), |_| {})?;
//! println!("mean load {:.4}, resolution {:.0} ns", curve.mean_load, curve.sampling_period_ns);
//! # Ok::<(), irqlab_live::Error>(())
//! ```

pub mod clock;
pub mod inject;
pub mod result;
pub mod rt_limit;
pub mod run;
pub mod sched;
pub mod spin;
pub mod window;

pub use inject::Injector;
pub use result::InterferenceCurve;
pub use run::{measure_gaps, run, Measurement, ProbeConfig, RtLimit, Snapshot, MAX_GAPS};
pub use sched::Policy;
pub use window::{log_windows, Gap, GapIndex, MAX_PER_DECADE};
