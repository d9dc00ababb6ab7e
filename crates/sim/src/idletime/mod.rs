//! Idletime scheduling (Eggert's dissertation; `docs/papers.md` §4):
//! a two-class queue with a preemption interval, at a disk and at a NIC's
//! transmit dequeue point, and the dissertation's experiments (Ch. 6)
//! rebuilt on the simulation engine.
//!
//! - [`scheduler`]: the Variant-1 state machine (I, F, B, P) with X[e] counters.
//! - [`workload`]: the foreground process of intensity i and the greedy
//!   background process, shared by every experiment.
//! - [`disk_experiment`]: random and sequential reads on the C-LOOK disk of
//!   [`crate::disk`], foreground read-ahead, no read-ahead for background.
//! - [`net`]: links, the hosts' idletime transmit queues, UDP senders and a
//!   simplified TCP ([`tcp`]); the GigE, 100 Mb/s LAN and 10 ms WAN setups.

pub mod disk_experiment;
pub mod gated;
pub mod net;
pub mod scheduler;
pub mod tcp;
pub mod workload;

pub use scheduler::{Class, Counters, Decision, Event, IdletimeScheduler, IntervalStart, State};

use irqlab_analysis::Nanos;
use serde::Serialize;
use std::collections::BTreeMap;

/// The queueing discipline at the shared resource.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum Discipline {
    /// One queue in arrival order, no classes (baseline).
    Fifo,
    /// Two classes with preemption interval p (None = ∞). p = 0 is a plain
    /// two-class priority queue (baseline).
    Idletime { p_ns: Option<Nanos> },
}

/// What one run measured. Throughputs are in the experiment's unit
/// (requests/s, bytes/s or bits/s, see `unit`).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct RunResult {
    pub unit: String,
    pub foreground: f64,
    pub background: f64,
    pub fg_latency_mean_ns: f64,
    pub bg_latency_mean_ns: f64,
    pub fg_completed: u64,
    pub bg_completed: u64,
    /// Mean service time of the resource over all requests it served.
    pub mean_service_ns: f64,
    /// The X[e] counters of the idletime scheduler(s), e.g. "P[t]".
    pub counters: BTreeMap<String, u64>,
    pub events: u64,
}

/// Running mean helper.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Mean {
    sum: f64,
    n: u64,
}

impl Mean {
    pub(crate) fn add(&mut self, x: f64) {
        self.sum += x;
        self.n += 1;
    }
    pub(crate) fn get(&self) -> f64 {
        if self.n == 0 {
            0.0
        } else {
            self.sum / self.n as f64
        }
    }
}

/// Sums counters of several schedulers (both hosts of a link).
pub(crate) fn merge_counters(into: &mut BTreeMap<String, u64>, from: &Counters) {
    for (k, v) in from.to_map() {
        *into.entry(k).or_insert(0) += v;
    }
}
