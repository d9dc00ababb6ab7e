//! `irqlab control process-aware DEV`: the process-aware paper's bottom-half
//! scheduling (`docs/papers.md` §2, §3.2) on a live threaded-NAPI device.
//! The device's NAPI kthreads run at the priority of the most important
//! process blocked waiting for data from it; when none waits, at the floor
//! (default SCHED_OTHER nice 0: the paper's "defer to the next scheduling
//! point").
//!
//! - **Candidates** ([`candidates`]): the processes owning a socket bound
//!   to the device's addresses (or the wildcard), from /proc/net and the fd
//!   tables, rescanned every [`Config::rescan_ns`]; all their threads are
//!   watched.
//! - **Monitor**: the thread watch (`sched_switch`/`sched_wakeup`
//!   tracepoints, `monitor::thread`) on those threads, with its waiter
//!   filter: a thread that switches out to sleep inside a receive-family
//!   system call (the number it entered the kernel with, what
//!   `/proc/TID/syscall` shows) is waiting; its wake-up or switch-in ends
//!   the wait. The kernel wakes the controller only when the highest
//!   waiter's scheduling changes; the controller then reads who waits and
//!   feeds the adapter those blocks and wake-ups (a receiver blocking and
//!   waking at every datagram of a flood costs it nothing while the
//!   decision stays; issue 42). A thread that blocks on the socket through
//!   another call, or that waits on a socket of another device in the same
//!   call, is judged by the call alone: the stated approximation.
//! - **Decision**: `irqlab_policy::process_aware::predicted_priority` over
//!   the waiters' ranks, the code the simulator's `process-aware` policy
//!   calls; the kthreads take the scheduling of the waiter whose rank won
//!   (SCHED_FIFO/RR p as is, SCHED_OTHER/BATCH with its nice; a
//!   SCHED_DEADLINE waiter gives SCHED_FIFO 99: a reservation is not
//!   copied).
//! - **Actuator**: `sched_setattr` on the kthreads; the journal records
//!   their own setting at the start and restores it on every exit path. The
//!   reaction latency is from the kernel's timestamp of the event that
//!   changed the decision (a block or a wake-up) to the change applied.
//!
//! The decisions are made by a pure [`Adapter`] (observations in,
//! scheduling and ticks moved out), the code
//! `tests/process_aware_decisions.rs` drives beside the simulator's.

pub mod accounting;
pub mod candidates;
pub mod compensation;

use crate::controller_thread;
use crate::monitor::thread::{Kind, ThreadWatch, MAX_THREADS};
use candidates::Candidate;
use compensation::Compensator;
use irqlab_host::error::{Error, Result};
use irqlab_host::journal::sched::{self, SchedAttr};
use irqlab_host::journal::threads::Thread;
use irqlab_host::privilege::{self, Capability};
use irqlab_host::rt::monotonic_ns;
use irqlab_host::run_end::{EndedBy, RunEnd};
use irqlab_measure::latency::stats::{LatencyStats, StatsSummary};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};

pub const SCHEMA: &str = "irqlab/process-aware/v1";

/// Changes kept in the report (the count goes on).
const MAX_CHANGES: usize = 10_000;
const BUCKET_NS: u64 = 1_000;
/// The compensation algorithm's tick: the paper's 100 Hz.
pub const TICK_NS: u64 = 10_000_000;

#[derive(Debug, Clone, Serialize)]
pub struct Config {
    pub dev: String,
    /// Pin the NAPI kthreads to this CPU (restored at the end).
    pub cpu: Option<usize>,
    /// The kthreads' scheduling when nobody waits.
    pub floor: SchedAttr,
    pub duration_ns: Option<u64>,
    /// How often the receivers are looked for again.
    pub rescan_ns: u64,
    /// Run the compensation algorithm on the BPF accounting (`accounting`).
    pub accounting: bool,
    /// The CPUs it accounts (default: `cpu`, else every online CPU).
    pub account_cpus: Option<Vec<usize>>,
    /// Keep the observations the adapter took (the waiters', and the first
    /// accounted CPU's bottom halves and ticks) in the report's `recorded`.
    #[serde(skip)]
    pub record: bool,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            dev: String::new(),
            cpu: None,
            floor: SchedAttr::Other { nice: 0 },
            duration_ns: None,
            rescan_ns: 250_000_000,
            accounting: true,
            account_cpus: None,
            record: false,
        }
    }
}

impl Config {
    pub fn check(&self) -> Result<()> {
        if matches!(self.floor, SchedAttr::Deadline { .. }) {
            return Err(Error::Invalid(format!(
                "--floor {}: a floor is a priority, not a reservation (other, batch, idle, fifo:P, rr:P)",
                self.floor
            )));
        }
        if self.rescan_ns == 0 {
            return Err(Error::Invalid("rescan interval 0".into()));
        }
        Ok(())
    }
}

/// A scheduling attribute's rank (higher runs first): RT priorities above
/// every fair-class thread, SCHED_DEADLINE above all, nice inverted.
pub fn rank(attr: SchedAttr) -> i32 {
    match attr {
        SchedAttr::Deadline { .. } => 1_000,
        SchedAttr::Fifo { priority } | SchedAttr::Rr { priority } => 100 + priority as i32,
        SchedAttr::Other { nice } | SchedAttr::Batch { nice } => -nice,
        SchedAttr::Idle => -100,
    }
}

/// The waiter filter's key of a scheduling (`bpf/thread_watch.bpf.c`,
/// `wait_key_of`): its rank, then its policy, so that a change of the
/// policy at one rank is a change too.
pub fn wait_key(attr: SchedAttr) -> i32 {
    rank(attr) * 16 + attr.policy_number() as i32
}

/// What the kthreads take to run at a waiter's rank.
fn kthread_attr(waiter: SchedAttr) -> SchedAttr {
    match waiter {
        SchedAttr::Deadline { .. } => SchedAttr::Fifo { priority: 99 },
        other => other,
    }
}

/// The live adapter: who waits (tid → its scheduling), and the decision.
/// Pure: the shared prediction over the waiters.
#[derive(Debug, Clone)]
pub struct Waiters {
    floor: SchedAttr,
    waiting: BTreeMap<i32, SchedAttr>,
}

impl Waiters {
    pub fn new(floor: SchedAttr) -> Self {
        Waiters { floor, waiting: BTreeMap::new() }
    }

    pub fn block(&mut self, tid: i32, attr: SchedAttr) {
        self.waiting.insert(tid, attr);
    }

    pub fn wake(&mut self, tid: i32) -> bool {
        self.waiting.remove(&tid).is_some()
    }

    pub fn count(&self) -> usize {
        self.waiting.len()
    }

    pub fn is_waiting(&self, tid: i32) -> bool {
        self.waiting.contains_key(&tid)
    }

    /// The kthreads' scheduling now: that of the waiter whose rank
    /// `predicted_priority` chose, or the floor. Ties go to the lowest tid.
    pub fn decision(&self) -> (SchedAttr, Option<i32>) {
        let predicted = irqlab_policy::process_aware::predicted_priority(self.waiting.values().map(|&a| rank(a)), rank(self.floor));
        match self.waiting.iter().find(|(_, &a)| rank(a) == predicted) {
            Some((&tid, &attr)) => (kthread_attr(attr), Some(tid)),
            None => (self.floor, None),
        }
    }
}

/// What the monitor saw, as the pure adapter takes it (and as a recorded
/// trace stores it, `--record`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "lowercase")]
pub enum Observation {
    /// A thread blocked in a receive-family call, with its scheduling.
    Block { tid: i32, attr: SchedAttr },
    /// A thread woke or was switched in.
    Wake { tid: i32 },
    /// `count` bottom halves of `cost_ns` each done in softirq context for
    /// process `owner` (None: nobody's).
    Bh { owner: Option<i32>, count: u64, cost_ns: u64 },
    /// A tick charged to process `charged` (None: idle).
    Tick { charged: Option<i32> },
}

/// What the adapter decided on one observation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The kthreads' scheduling, and the waiter it follows (blocks, wakes).
    Schedule(SchedAttr, Option<i32>),
    /// Ticks moved onto the charged process (ticks).
    Moved(i64),
    /// Nothing to decide (bottom halves only count).
    Counted,
}

/// The controller's pure adapter: the shared prediction over the waiters
/// and the shared compensation over the bottom halves and ticks
/// (monitor → adapter → actuator).
#[derive(Debug, Clone)]
pub struct Adapter {
    pub waiters: Waiters,
    pub compensation: Compensator,
}

impl Adapter {
    pub fn new(floor: SchedAttr, tick_ns: u64) -> Self {
        Adapter { waiters: Waiters::new(floor), compensation: Compensator::new(tick_ns, compensation::GAMMA) }
    }

    pub fn observe(&mut self, o: &Observation) -> Outcome {
        match *o {
            Observation::Block { tid, attr } => {
                self.waiters.block(tid, attr);
                let (a, w) = self.waiters.decision();
                Outcome::Schedule(a, w)
            }
            Observation::Wake { tid } => {
                self.waiters.wake(tid);
                let (a, w) = self.waiters.decision();
                Outcome::Schedule(a, w)
            }
            Observation::Bh { owner, count, cost_ns } => {
                for _ in 0..count {
                    self.compensation.bh_done(owner, cost_ns);
                }
                Outcome::Counted
            }
            Observation::Tick { charged } => Outcome::Moved(self.compensation.tick(charged)),
        }
    }
}

/// One change of the kthreads' scheduling.
#[derive(Debug, Clone, Serialize)]
pub struct Change {
    /// Since the run began.
    pub at_ns: u64,
    pub attr: SchedAttr,
    /// The waiter it follows (None: the floor).
    pub waiter: Option<i32>,
    /// From the event that changed the decision to the change applied.
    pub reaction_ns: u64,
}

/// The `irqlab/process-aware/v1` report.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub schema: &'static str,
    pub config: Config,
    pub threads: Vec<Thread>,
    pub candidates: Vec<Candidate>,
    pub watched_threads: usize,
    pub waits: u64,
    pub changes: Vec<Change>,
    pub change_count: u64,
    pub reaction: StatsSummary,
    pub lost_events: u64,
    /// The compensation algorithm's charges beside the kernel's and the
    /// measured truth, per task served or charged.
    pub accounting: Option<accounting::Accounted>,
    /// With `record`: what the adapter took, in time order (monotonic ns).
    #[serde(skip)]
    pub recorded: Vec<(u64, Observation)>,
    pub switched_threaded_on: bool,
    pub held_ns: u64,
    /// What the controller's thread cost.
    pub overhead: controller_thread::Overhead,
    /// What the accounting's thread cost, when it ran: a measurement
    /// beside the controller, not part of it, so reported apart.
    pub accounting_overhead: Option<controller_thread::Overhead>,
    pub ended_by: EndedBy,
    pub complete: bool,
}

/// What it needs before it touches anything.
pub fn check_prerequisites() -> Result<()> {
    privilege::require(&[Capability::SysNice], "change the NAPI kthreads' scheduling (sched_setattr)")?;
    privilege::require_bpf("watch the receiving threads (sched_switch, sched_wakeup)")
}

/// Runs until `stop`, the duration, or the kthreads exit; every change is
/// journalled and restored on return.
pub fn run(config: &Config, stop: &AtomicBool, mut on_change: impl FnMut(&Change) + Send) -> Result<Report> {
    config.check()?;
    let acct_cpus = match (&config.account_cpus, config.cpu) {
        (Some(cpus), _) => cpus.clone(),
        (None, Some(c)) => vec![c],
        (None, None) => irqlab_host::rt::online_cpus()?,
    };
    for &c in &acct_cpus {
        irqlab_host::rt::require_online(c, "--account-cpu")?;
    }
    // The accounting's thread, beside the control loop: off the accounted
    // CPU (else off the kthreads'), above what runs there, so the ticks
    // come on time.
    let acct_off: Vec<usize> = match acct_cpus.as_slice() {
        [one] => vec![*one],
        _ => config.cpu.into_iter().collect(),
    };
    let acct_stop = AtomicBool::new(false);
    let crate::napi_layout::HeldRun { result: (l, accounted), cost, threads, held_ns, switched_threaded_on } =
        crate::napi_layout::control("process-aware", &config.dev, config.cpu, Some(config.floor), check_prerequisites, |threads| {
            std::thread::scope(|scope| {
                let acct = config
                    .accounting
                    .then(|| {
                        let setup = controller_thread::Setup { priority: 98, off: &acct_off, lock_memory: true };
                        controller_thread::spawn(scope, "pa-accounting", setup, || {
                            accounting::run(&acct_cpus, TICK_NS, config.record, &acct_stop)
                        })
                    })
                    .transpose()?;
                let looped = control_loop(config, threads, stop, &mut on_change);
                acct_stop.store(true, Ordering::SeqCst);
                let accounted = acct.map(|h| controller_thread::join("process-aware accounting", h)).transpose();
                Ok((looped?, accounted?))
            })
        })?;
    let overhead = controller_thread::Overhead::of(cost);
    let (accounted, accounting_overhead) = match accounted {
        Some((a, cost)) => (Some(a), Some(controller_thread::Overhead::of(cost))),
        None => (None, None),
    };
    // The one rule (`irqlab_host::run_end`).
    let complete = l.ended_by.complete(config.duration_ns, l.lost_events);
    let mut recorded = l.recorded;
    if let Some(a) = &accounted {
        recorded.extend(a.recorded.iter().copied());
    }
    recorded.sort_by_key(|&(ts, _)| ts);
    Ok(Report {
        schema: SCHEMA,
        config: config.clone(),
        threads,
        candidates: l.candidates,
        watched_threads: l.watched,
        waits: l.waits,
        change_count: l.change_count,
        changes: l.changes,
        reaction: l.reaction.summary(BUCKET_NS, 20_000),
        lost_events: l.lost_events,
        accounting: accounted,
        recorded,
        switched_threaded_on,
        held_ns,
        overhead,
        accounting_overhead,
        ended_by: l.ended_by,
        complete,
    })
}

struct Looped {
    candidates: Vec<Candidate>,
    watched: usize,
    waits: u64,
    changes: Vec<Change>,
    change_count: u64,
    reaction: LatencyStats,
    lost_events: u64,
    ended_by: EndedBy,
    recorded: Vec<(u64, Observation)>,
}

/// The threads of the candidates, without the controller's own process.
fn candidate_tids(candidates: &[Candidate]) -> BTreeSet<i32> {
    let me = std::process::id() as i32;
    let pids: BTreeSet<i32> = candidates.iter().map(|c| c.pid).filter(|&p| p != me).collect();
    pids.into_iter().flat_map(irqlab_host::procs::tids).collect()
}

fn control_loop(config: &Config, threads: &[Thread], stop: &AtomicBool, on_change: &mut impl FnMut(&Change)) -> Result<Looped> {
    let mut finder = candidates::Finder::default();
    let mut candidates = finder.find(&config.dev)?;
    let mut watched: BTreeSet<i32> = candidate_tids(&candidates).into_iter().take(MAX_THREADS).collect();
    let tids: Vec<u32> = watched.iter().map(|&t| t as u32).collect();
    let mut storage = crate::monitor::thread::Storage::default();
    let mut watch = ThreadWatch::start(&mut storage, &tids)?;
    watch.filter_waiters(wait_key(config.floor), &candidates::RECEIVE_CALLS)?;
    let fd = watch.ring_epoll_fd();
    let mut adapter = Adapter::new(config.floor, TICK_NS);
    let mut current = config.floor;
    controller_thread::control_starts();
    let run = RunEnd::start(stop, config.duration_ns);
    let mut next_scan = run.started_ns() + config.rescan_ns;
    let mut out = Looped {
        candidates: Vec::new(),
        watched: 0,
        waits: 0,
        changes: Vec::new(),
        change_count: 0,
        reaction: LatencyStats::new(),
        lost_events: 0,
        ended_by: EndedBy::Stopped, // the loop's end sets it
        recorded: Vec::new(),
    };
    loop {
        if let Some(why) = run.ended(|| threads.iter().all(|t| !t.alive()).then_some(EndedBy::ThreadsExited)) {
            out.ended_by = why;
            break;
        }
        let now = monotonic_ns();
        if now >= next_scan {
            candidates = finder.find(&config.dev)?;
            for tid in candidate_tids(&candidates) {
                if watched.len() < MAX_THREADS && watched.insert(tid) {
                    watch.add(tid as u32)?;
                }
            }
            next_scan = now + config.rescan_ns;
        }
        let wake = next_scan.min(run.ends_at_ns().unwrap_or(u64::MAX));
        crate::monitor::wait_readable(fd, wake.saturating_sub(now).max(1))?;
        // The kernel sends a record only when the highest waiter changed;
        // who waits is read from its map then, and at every rescan (a
        // change two CPUs made at once, or a tie of ranks the key does not
        // order as the adapter does, is caught there at the latest).
        let last_event_ns = watch.drain()?.iter().filter(|e| e.kind == Kind::Decision).map(|e| e.ts_ns).max();
        for tid in &watched {
            let seen = match (watch.waiting(*tid as u32)?.is_some(), adapter.waiters.is_waiting(*tid)) {
                (true, false) => Observation::Block { tid: *tid, attr: sched::get(*tid).unwrap_or(config.floor) },
                (false, true) => Observation::Wake { tid: *tid },
                _ => continue,
            };
            adapter.observe(&seen);
            if config.record {
                out.recorded.push((last_event_ns.unwrap_or_else(monotonic_ns), seen));
            }
        }
        let (want, waiter) = adapter.waiters.decision();
        if want != current {
            for t in threads {
                match sched::set(t.tid, want) {
                    Ok(()) => {}
                    Err(_) if !t.alive() => {}
                    Err(e) => return Err(e),
                }
            }
            current = want;
            let applied = monotonic_ns();
            let reaction_ns = last_event_ns.map_or(0, |ts| applied.saturating_sub(ts));
            out.reaction.record(reaction_ns);
            let change = Change { at_ns: applied - run.started_ns(), attr: want, waiter, reaction_ns };
            on_change(&change);
            out.change_count += 1;
            if out.changes.len() < MAX_CHANGES {
                out.changes.push(change);
            }
        }
    }
    out.candidates = candidates;
    out.watched = watched.len();
    out.lost_events = watch.lost_events();
    out.waits = watch.receive_waits();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const OTHER: SchedAttr = SchedAttr::Other { nice: 0 };

    #[test]
    fn ranks_order_the_classes() {
        assert!(rank(SchedAttr::Fifo { priority: 1 }) > rank(SchedAttr::Other { nice: -20 }));
        assert!(rank(SchedAttr::Fifo { priority: 40 }) > rank(SchedAttr::Rr { priority: 20 }));
        assert!(rank(SchedAttr::Other { nice: -5 }) > rank(OTHER));
        assert!(rank(OTHER) > rank(SchedAttr::Idle));
        assert_eq!(rank(SchedAttr::Deadline { runtime_ns: 1, deadline_ns: 2, period_ns: 2 }), 1_000);
    }

    #[test]
    fn the_kthreads_follow_the_most_important_waiter_then_the_floor() {
        let mut w = Waiters::new(OTHER);
        assert_eq!(w.decision(), (OTHER, None));
        w.block(10, SchedAttr::Fifo { priority: 20 });
        assert_eq!(w.decision(), (SchedAttr::Fifo { priority: 20 }, Some(10)));
        w.block(11, SchedAttr::Fifo { priority: 40 });
        assert_eq!(w.decision(), (SchedAttr::Fifo { priority: 40 }, Some(11)));
        assert!(w.wake(11));
        assert_eq!(w.decision(), (SchedAttr::Fifo { priority: 20 }, Some(10)));
        assert!(!w.wake(11), "already awake");
        w.wake(10);
        assert_eq!(w.decision(), (OTHER, None));
        // The floor is for when nobody waits: a waiter below it still
        // gives its own priority (the shared code's rule).
        w.block(12, SchedAttr::Other { nice: 10 });
        assert_eq!(w.decision(), (SchedAttr::Other { nice: 10 }, Some(12)));
        // A SCHED_DEADLINE waiter: FIFO 99, not its reservation.
        w.block(13, SchedAttr::Deadline { runtime_ns: 1, deadline_ns: 2, period_ns: 2 });
        assert_eq!(w.decision(), (SchedAttr::Fifo { priority: 99 }, Some(13)));
    }

    #[test]
    fn a_reservation_is_no_floor() {
        let c = Config { dev: "x".into(), floor: SchedAttr::Deadline { runtime_ns: 1, deadline_ns: 2, period_ns: 2 }, ..Config::default() };
        assert_eq!(c.check().unwrap_err().exit_code(), 2);
        assert!(Config { dev: "x".into(), ..Config::default() }.check().is_ok());
    }
}
