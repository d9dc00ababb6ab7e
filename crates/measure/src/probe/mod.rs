//! The interference probe (load-bounds paper §4, "empirical load bound";
//! `docs/papers.md` §3): a thread pinned to one CPU at real-time priority
//! just below the driver threads, memory locked, reads the clock as fast as
//! it can; every jump above a threshold is a preemption. For each window
//! length Δ the largest fraction of any window taken by preemptions is the
//! measured load bound, computed exactly over all window positions.
//!
//! ```no_run
//! use irqlab_measure::probe::{measure, Config};
//! use std::sync::atomic::AtomicBool;
//! // RT throttling is lifted for the run where allowed (`rt_limit`).
//! let config = Config { cpu: Some(1), duration_ns: 2_000_000_000, ..Config::default() };
//! let curve = measure(&config, &AtomicBool::new(false), |_| {})?;
//! println!("mean load {:.4}, resolution {:.0} ns", curve.mean_load, curve.sampling_period_ns);
//! # Ok::<(), irqlab_host::Error>(())
//! ```

pub mod clock;
pub mod inject;
pub mod result;
pub mod run;
pub mod sched;
pub mod sources;
pub mod spin;
pub mod window;

/// The shared RT-throttling lift, a module of its own ([`irqlab_host::rt_limit`]):
/// `control` and `machine` use it too.
pub use irqlab_host::rt_limit;

pub use inject::Injector;
pub use result::InterferenceCurve;
pub use run::{check_prerequisites, measure, measure_with_gaps, Config, Measurement, RtLimit, Snapshot, MAX_GAPS};
pub use sched::Policy;
pub use sources::{resched_ipi, GapSources, Source, SourceKind, SourceTotal, WindowSources};
pub use window::{log_windows, Gap, GapIndex, MAX_PER_DECADE};
