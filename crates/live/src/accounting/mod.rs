//! Per-process interrupt accounting with BPF (the process-aware paper,
//! SEEDS.md §2): for every task, the time it ran, the hard-IRQ and softirq
//! time that ran while it was current ("stolen"), the softirq time done on
//! its behalf ("served", its beneficiary share), and what /proc charges it.
//!
//! The BPF side (`src/bpf/accounting.bpf.c`) aggregates in per-CPU maps;
//! user space only reads them ([`Session::snapshot`]) and turns them into a
//! [`Report`].

pub mod fig6;
pub mod names;
pub mod procfs;
pub mod raw;
pub mod render;
pub mod report;
pub(crate) mod session;
mod skel;

pub use report::Report;
pub use session::{check_prerequisites, Options, Session, Storage};
