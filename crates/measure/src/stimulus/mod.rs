//! External stimulus/response latency (the unintrusive-measurement thesis,
//! `docs/papers.md` §5, over the network): a generator outside the target
//! sends stimuli and timestamps them and the replies with kernel
//! timestamps; the target answers on two paths — the kernel's own ICMP echo
//! (softirq only) and a SCHED_FIFO responder task (softirq + wake-up) — and
//! measures nothing itself.

pub mod display;
pub mod generator;
pub mod log;
pub mod pattern;
pub mod preflight;
pub mod responder;
pub mod socket;
pub mod wire;

pub use generator::{measure, GeneratorConfig, PathResult, Progress, StimulusReport};
pub use log::{LogFormat, Record, RecordLog};
pub use pattern::{Pattern, PatternKind};
pub use responder::{Responder, ResponderConfig};
pub use socket::{PathKind, StampSource};
