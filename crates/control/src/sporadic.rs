//! The POSIX sporadic server, live, on a kernel that has none (Linux has
//! SCHED_DEADLINE, a CBS, but no SCHED_SPORADIC): the thread-watch BPF
//! monitor reports each switch in, preemption, block and wake-up of the
//! served thread; [`LiveServer`] turns them into calls of the shared
//! decision code (`irqlab_policy::server::SporadicServer`, the rules the
//! simulator runs); an [`Actuator`] carries out each decision by moving
//! the thread between its high and low level with `sched_setattr`.
//!
//! The controller thread runs at SCHED_FIFO 99 and sleeps with `ppoll` (ns
//! timeout) on the monitor's ring buffer until the next thing it must act
//! on: the instant the running thread's budget runs out, or a
//! replenishment, or a thread at its high level waking or switching in (its
//! budget must be timed from then). The other events (blocks, preemptions,
//! runs at the low level) wait in the ring, timestamped, for that wake-up:
//! the monitor's lazy mode (issue 42). A thread woken at its high level is
//! timed from its wake-up, not only from its switch in: this kernel does
//! not trace every switch in (`bpf/thread_watch.bpf.c`), and a run whose
//! start went unseen ran on, uncharged, at the high level (a CI run of
//! 2026-11-30: 3 ms in 4.2 ms on a server of 2 ms per 10 ms). How long the thread
//! ran on at its high level past that instant (the controller's wake-up
//! plus `sched_setattr`) is the reaction latency, reported as a histogram.

use crate::controller_thread;
use crate::monitor::thread::{Event, Kind, Storage, ThreadWatch};
use irqlab_host::error::Result;
use irqlab_host::rt::monotonic_ns;
use irqlab_host::run_end::{EndedBy, RunEnd};
use irqlab_measure::latency::stats::{LatencyStats, StatsSummary};
use irqlab_policy::server::{Accounting, Decision, SporadicServer, Timers};
use serde::Serialize;
use std::collections::BTreeMap;

use irqlab_host::journal::sched::{self, SchedAttr};
use irqlab_host::journal::threads::Thread;

/// The longest the controller sleeps without a reason to wake (it checks
/// the stop flag and the threads' existence this often).
const IDLE_WAIT_NS: u64 = 50_000_000;

/// Histogram bucket of the reaction latency and served-time summaries.
const BUCKET_NS: u64 = 1_000;
const MAX_BUCKETS: usize = 20_000;

/// What the server's thread is, as the monitor last reported it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Seen {
    Running { since: u64 },
    NotRunning,
}

/// The live adapter: the monitor's observations of one thread in, the
/// shared rules' decisions out. Pure: no clock, no I/O; the controller
/// calls [`LiveServer::observe`] for each event and
/// [`LiveServer::advance`] when [`LiveServer::next_action_at`] comes.
///
/// Consumption is measured from the events' timestamps (switch in to
/// switch out). A kernel that does not trace a switch in (this Firecracker
/// guest hides a few) leaves that run uncharged here; the monitor's own
/// total (`ThreadWatch::ran_ns`, from the runtime clock) still has it.
#[derive(Clone)]
pub struct LiveServer {
    rules: SporadicServer,
    seen: Seen,
    /// When the budget ran out at the last exhaustion (for the reaction
    /// latency).
    last_exhaustion: Option<u64>,
    /// High-level service per period: the current period's start and sum.
    period_start: u64,
    period_served: u64,
    served: LatencyStats,
}

impl LiveServer {
    /// A server of `budget` per `period`, at most `max_repl` pending
    /// replenishments, exact accounting (the monitor's timestamps are the
    /// kernel's own, to the ns); periods of the served-time summary count
    /// from `start`.
    pub fn new(budget: u64, period: u64, max_repl: usize, start: u64) -> Self {
        LiveServer {
            rules: SporadicServer::new(budget, period, max_repl, Accounting::Exact { granularity: 1 }),
            seen: Seen::NotRunning,
            last_exhaustion: None,
            period_start: start,
            period_served: 0,
            served: LatencyStats::new(),
        }
    }

    pub fn rules(&self) -> &SporadicServer {
        &self.rules
    }

    /// Whether the rules want the thread at its high level.
    pub fn at_high(&self) -> bool {
        self.rules.at_high()
    }

    /// When the budget ran out at the last exhaustion.
    pub fn last_exhaustion(&self) -> Option<u64> {
        self.last_exhaustion
    }

    /// High-level service of each whole period so far.
    pub fn served_per_period(&self) -> &LatencyStats {
        &self.served
    }

    /// Charges [start, end) to the rules and to the served-time periods.
    fn consume(&mut self, start: u64, end: u64) {
        let end = end.max(start);
        if self.rules.at_high() {
            // Split at period boundaries so each period gets its own part.
            let period = self.rules.period;
            let mut t = start;
            while t < end {
                while t >= self.period_start + period {
                    self.served.record(self.period_served);
                    self.period_served = 0;
                    self.period_start += period;
                }
                let part_end = end.min(self.period_start + period);
                self.period_served += part_end - t;
                t = part_end;
            }
        }
        self.rules.consume(start, end);
    }

    /// One event of the monitor.
    pub fn observe(&mut self, kind: Kind, ts: u64) -> Decision {
        let mut timers = Timers::new();
        match kind {
            Kind::Wakeup => {
                // Ready at its high level, it runs at once unless something
                // above it runs: timed from here (its switch in, when the
                // kernel traces it, times it from there), so a run whose
                // switch in goes untraced is charged all the same; at most
                // the wait for the CPU too much.
                if self.rules.at_high() && self.seen == Seen::NotRunning {
                    self.seen = Seen::Running { since: ts };
                }
                self.rules.on_wakeup(ts)
            }
            // Never asked for here.
            Kind::Budget | Kind::Decision => Decision::Keep,
            Kind::In => {
                // Timed from its wake-up (just before) or from here, the
                // later. Already timed from a later instant: this switch in
                // was at the low level, before a raise found the thread
                // running (`raised_while_running`), and the time between
                // was not the server's to charge.
                if !matches!(self.seen, Seen::Running { since } if since >= ts) {
                    self.seen = Seen::Running { since: ts };
                }
                Decision::Keep
            }
            Kind::Preempted | Kind::Blocked => {
                if let Seen::Running { since } = self.seen {
                    self.consume(since, ts);
                }
                self.seen = Seen::NotRunning;
                if kind == Kind::Blocked {
                    self.rules.on_block(ts, &mut timers)
                } else {
                    Decision::Keep
                }
            }
        }
    }

    /// The thread was raised to its high level at `now` and is on a CPU:
    /// its switch in happened before (at its low level, or at the start),
    /// so no switch in will time its run at the high level; time it from
    /// now. Its switch in may still wait in the monitor's ring (it came
    /// after the controller last drained it, and before the raise): that
    /// one is older and changes nothing ([`LiveServer::observe`]).
    pub fn raised_while_running(&mut self, now: u64) {
        if self.seen == Seen::NotRunning {
            self.seen = Seen::Running { since: now };
        }
    }

    /// The next instant the controller must act at: a replenishment, or
    /// the budget running out while the thread runs at its high level.
    pub fn next_action_at(&self) -> Option<u64> {
        let replenishment = self.rules.pending().iter().map(|&(at, _)| at).min();
        let exhaustion = match self.seen {
            Seen::Running { since } => self.rules.budget_left(since).map(|left| since + left),
            Seen::NotRunning => None,
        };
        [replenishment, exhaustion].into_iter().flatten().min()
    }

    /// Time has reached `now`: charges the running thread up to it, fires
    /// due replenishments, and ends the budget if it ran out. Returns the
    /// last change asked for (Keep when none).
    pub fn advance(&mut self, now: u64) -> Decision {
        let mut timers = Timers::new();
        let mut decision = Decision::Keep;
        if let Seen::Running { since } = self.seen {
            let exhausts_at = self.rules.budget_left(since).map(|left| since + left);
            self.consume(since, now);
            self.seen = Seen::Running { since: now.max(since) };
            if self.rules.pending().iter().any(|&(at, _)| at <= now) {
                decision = self.rules.timer(now);
            }
            if self.rules.at_high() && self.rules.budget_left(now) == Some(0) {
                self.last_exhaustion = exhausts_at.map(|e| e.min(now));
                decision = self.rules.exhausted(now, &mut timers);
            }
        } else if self.rules.pending().iter().any(|&(at, _)| at <= now) {
            decision = self.rules.timer(now);
        }
        decision
    }
}

/// Carries out the rules' decisions on a thread.
pub trait Actuator {
    /// Puts the thread at its high (true) or low level.
    fn set_level(&mut self, high: bool) -> Result<()>;
}

/// The live actuator: `sched_setattr` on the thread.
pub struct SchedActuator {
    pub tid: i32,
    pub high: SchedAttr,
    pub low: SchedAttr,
}

impl Actuator for SchedActuator {
    fn set_level(&mut self, high: bool) -> Result<()> {
        sched::set(self.tid, if high { self.high } else { self.low })
    }
}

/// The server's parameters as `--policy sporadic:...` gave them.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct SporadicParams {
    pub budget_ns: u64,
    pub period_ns: u64,
    pub max_repl: usize,
    pub high: SchedAttr,
    pub low: SchedAttr,
}

impl SporadicParams {
    /// From the parsed policy: the high level is SCHED_FIFO `high`; the low
    /// level SCHED_FIFO `low`, or SCHED_IDLE when none is given (Linux
    /// cannot suspend a kernel thread; SCHED_IDLE runs it only when nothing
    /// else wants the CPU).
    pub fn new(budget_ns: u64, period_ns: u64, high: u32, low: Option<u32>, max_repl: u32) -> Self {
        SporadicParams {
            budget_ns,
            period_ns,
            max_repl: max_repl as usize,
            high: SchedAttr::Fifo { priority: high },
            low: low.map_or(SchedAttr::Idle, |priority| SchedAttr::Fifo { priority }),
        }
    }
}

/// One served thread's figures.
#[derive(Debug, Clone, Serialize)]
pub struct ServedThread {
    pub tid: i32,
    pub comm: String,
    pub exhaustions: u64,
    pub replenishments: u64,
    /// How long the thread ran on at its high level after its budget ran
    /// out (the controller's wake-up plus `sched_setattr`), per exhaustion.
    pub reaction: StatsSummary,
    /// High-level execution per whole period (consecutive periods from the
    /// start), as the monitor measured it.
    pub served_per_period: StatsSummary,
    /// Level changes made.
    pub level_changes: u64,
    /// Raises that found the thread on a CPU (at its low level): no
    /// switch in at the high level follows, so its run was timed from the
    /// raise.
    pub raised_while_running: u64,
    /// Exited while served.
    pub exited: bool,
}

/// The server run: every thread's figures and the monitor's health.
#[derive(Debug, Clone, Serialize)]
pub struct ServerReport {
    pub params: SporadicParams,
    /// When the server began (the threads got their high level) and ended,
    /// CLOCK_MONOTONIC ns: the span to compare a trace against. Outside it
    /// the threads ran at their low level or their own policy.
    pub start_ns: u64,
    pub end_ns: u64,
    pub threads: Vec<ServedThread>,
    /// Monitor events lost (the controller fell behind); its figures are
    /// unreliable when this is not 0.
    pub lost_events: u64,
    /// What the controller's thread cost.
    pub overhead: controller_thread::Overhead,
    /// How many times the controller woke (its timer or a switch in at the
    /// high level): most of its cost.
    pub wakeups: u64,
}

struct Served {
    thread: Thread,
    server: LiveServer,
    actuator: SchedActuator,
    applied_high: bool,
    reaction: LatencyStats,
    level_changes: u64,
    raised_while_running: u64,
    exited: bool,
}

impl Served {
    /// Makes the thread's level what the rules want; records the reaction
    /// latency of a drop after an exhaustion.
    ///
    /// `watch` is told to wake the controller at the start of the thread's
    /// runs (its wake-ups and switch ins) while it is at its high level:
    /// before it is raised (a runnable thread raised runs at once, and its
    /// budget must be timed from then), and no more once it is lowered.
    fn follow(&mut self, decision: Decision, watch: &mut ThreadWatch) -> Result<()> {
        let want_high = match decision {
            Decision::Keep => return Ok(()),
            Decision::ToHigh => true,
            Decision::ToLow => false,
        };
        if want_high == self.applied_high || self.exited {
            return Ok(());
        }
        let tid = self.thread.tid as u32;
        if want_high {
            watch.wake_on_start(tid, true)?;
        }
        let set = self.actuator.set_level(want_high);
        if !want_high || set.is_err() {
            watch.wake_on_start(tid, false)?;
        }
        match set {
            Ok(()) => {}
            Err(_) if !self.thread.alive() => {
                self.exited = true;
                return Ok(());
            }
            Err(e) => return Err(e),
        }
        let done = monotonic_ns();
        if want_high && watch.running(tid)? {
            self.server.raised_while_running(done);
            self.raised_while_running += 1;
        }
        self.applied_high = want_high;
        self.level_changes += 1;
        if !want_high {
            if let Some(e) = self.server.last_exhaustion.take() {
                self.reaction.record(done.saturating_sub(e));
            }
        }
        Ok(())
    }
}

/// Serves `threads` (put at `params.low` through the journal by the
/// caller, who restores them) until `run` ends or every thread exited; the
/// report and how the run ended. They get their high level once the
/// monitor watches them, so no execution escapes the budget. Runs on its
/// own SCHED_FIFO 99 thread with memory locked.
pub fn serve(threads: &[Thread], params: SporadicParams, run: &RunEnd) -> Result<(ServerReport, EndedBy)> {
    // Off the served threads' CPUs when they are pinned to one (as bh-budget's).
    let off = served_cpus(threads);
    let setup = controller_thread::Setup { priority: 99, off: &off, lock_memory: true };
    let ((mut report, ended_by), cost) = controller_thread::run("sporadic-server", setup, || serve_here(threads, params, run))?;
    report.overhead = controller_thread::Overhead::of(cost);
    Ok((report, ended_by))
}

/// The CPUs the served threads are pinned to, when that is not every CPU.
fn served_cpus(threads: &[Thread]) -> Vec<usize> {
    let online = irqlab_host::rt::online_cpus().unwrap_or_default();
    let mut cpus: Vec<usize> = threads.iter().filter_map(|t| irqlab_host::rt::affinity(t.tid).ok()).flatten().collect();
    cpus.sort_unstable();
    cpus.dedup();
    if cpus.len() >= online.len() {
        Vec::new()
    } else {
        cpus
    }
}

fn serve_here(threads: &[Thread], params: SporadicParams, run: &RunEnd) -> Result<(ServerReport, EndedBy)> {
    let tids: Vec<u32> = threads.iter().map(|t| t.tid as u32).collect();
    let mut storage = Storage::default();
    let mut watch = ThreadWatch::start(&mut storage, &tids)?;
    // Woken by a served thread's wake-up or switch in only while it is at
    // its high level (its budget must then be timed); every other event waits in
    // the ring for the next wake-up, which the rules' own next instant
    // (an exhaustion or a replenishment) brings. The events keep the
    // kernel's timestamps, so the rules see the same history, later.
    watch.set_lazy();
    let start = monotonic_ns();
    let mut served: BTreeMap<u32, Served> = threads
        .iter()
        .map(|t| {
            let server = LiveServer::new(params.budget_ns, params.period_ns, params.max_repl, start);
            let actuator = SchedActuator { tid: t.tid, high: params.high, low: params.low };
            let s = Served {
                thread: t.clone(),
                server,
                actuator,
                applied_high: false,
                reaction: LatencyStats::new(),
                level_changes: 0,
                raised_while_running: 0,
                exited: false,
            };
            (t.tid as u32, s)
        })
        .collect();
    // The threads wait at their low level until the watch sees them; only
    // now do they get their high level and full budget. A thread already
    // running shows no switch in until it next leaves the CPU: count it
    // from now.
    controller_thread::control_starts();
    let start_ns = monotonic_ns();
    for s in served.values_mut() {
        s.follow(Decision::ToHigh, &mut watch)?;
    }
    let ring_fd = watch.ring_epoll_fd();
    let mut next_liveness = start_ns + IDLE_WAIT_NS;
    let mut wakeups = 0;
    let mut events = Vec::new();
    let ended_by = loop {
        if let Some(why) = run.ended(|| served.values().all(|s| s.exited).then_some(EndedBy::ThreadsExited)) {
            break why;
        }
        let now = monotonic_ns();
        let next = served.values().filter(|s| !s.exited).filter_map(|s| s.server.next_action_at()).min();
        let wait = next.map_or(IDLE_WAIT_NS, |t| t.saturating_sub(now)).min(IDLE_WAIT_NS);
        crate::monitor::wait_readable(ring_fd, wait)?;
        wakeups += 1;
        watch.drain_into(&mut events)?;
        for &Event { tid, kind, ts_ns, .. } in &events {
            if let Some(s) = served.get_mut(&tid) {
                let d = s.server.observe(kind, ts_ns);
                s.follow(d, &mut watch)?;
            }
        }
        let now = monotonic_ns();
        // Reading /proc for each thread at every wake-up (thousands a
        // second under a flood) was a large part of the controller's cost
        // (issue 42): look every IDLE_WAIT_NS; a level change that fails
        // on an exited thread notices it at once (`follow`).
        let look = now >= next_liveness;
        if look {
            next_liveness = now + IDLE_WAIT_NS;
        }
        for s in served.values_mut().filter(|s| !s.exited) {
            if s.server.next_action_at().is_some_and(|t| t <= now) {
                let d = s.server.advance(now);
                s.follow(d, &mut watch)?;
            }
            if look && !s.thread.alive() {
                s.exited = true;
            }
        }
    };
    let end_ns = monotonic_ns();
    let lost_events = watch.lost_events();
    let threads = served
        .into_values()
        .map(|s| ServedThread {
            tid: s.thread.tid,
            comm: s.thread.comm.clone(),
            exhaustions: s.server.rules().exhaustions,
            replenishments: s.server.rules().replenishments,
            reaction: s.reaction.summary(BUCKET_NS, MAX_BUCKETS),
            served_per_period: s.server.served_per_period().summary(BUCKET_NS, MAX_BUCKETS),
            level_changes: s.level_changes,
            raised_while_running: s.raised_while_running,
            exited: s.exited,
        })
        .collect();
    // The thread's CPU time is measured around this call ([`serve`]).
    let report = ServerReport { params, start_ns, end_ns, threads, lost_events, overhead: controller_thread::Overhead::default(), wakeups };
    Ok((report, ended_by))
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    #[test]
    fn a_burst_past_the_budget_is_cut_at_the_budget() {
        let mut s = LiveServer::new(MS, 10 * MS, 2, 0);
        assert_eq!(s.observe(Kind::Wakeup, 0), Decision::Keep);
        s.observe(Kind::In, 0);
        assert_eq!(s.next_action_at(), Some(MS));
        // The controller woke 20 us late.
        assert_eq!(s.advance(MS + 20_000), Decision::ToLow);
        assert_eq!(s.last_exhaustion(), Some(MS));
        // What it consumed (overrun included) comes back one period after
        // the activation began.
        assert_eq!(s.rules().pending(), &[(10 * MS, MS + 20_000)]);
        assert_eq!(s.next_action_at(), Some(10 * MS));
        s.observe(Kind::Blocked, 3 * MS);
        assert_eq!(s.advance(10 * MS), Decision::ToHigh);
    }

    #[test]
    fn a_thread_that_blocks_in_time_keeps_its_level() {
        let mut s = LiveServer::new(MS, 10 * MS, 2, 0);
        s.observe(Kind::Wakeup, 0);
        s.observe(Kind::In, 0);
        assert_eq!(s.observe(Kind::Blocked, 400_000), Decision::Keep);
        assert_eq!(s.next_action_at(), Some(10 * MS));
        s.observe(Kind::Wakeup, 2 * MS);
        s.observe(Kind::In, 2 * MS);
        // 600 us of budget left.
        assert_eq!(s.next_action_at(), Some(2 * MS + 600_000));
    }

    #[test]
    fn a_run_whose_switch_in_went_untraced_is_timed_from_its_wake_up() {
        let mut s = LiveServer::new(MS, 10 * MS, 2, 0);
        // Woken at its high level: the budget runs out 1 ms later, switch
        // in or not.
        s.observe(Kind::Wakeup, 0);
        assert_eq!(s.next_action_at(), Some(MS));
        assert_eq!(s.advance(MS), Decision::ToLow);
        // Blocked, replenished, woken again; this time the switch in is
        // traced 5 us after the wake-up and times the run from there.
        s.observe(Kind::Blocked, MS + 50_000);
        assert_eq!(s.advance(10 * MS), Decision::ToHigh);
        s.observe(Kind::Wakeup, 12 * MS);
        s.observe(Kind::In, 12 * MS + 5_000);
        assert_eq!(s.next_action_at(), Some(13 * MS + 5_000));
        // Woken at its low level, it waits below what runs there: no time.
        assert_eq!(s.advance(13 * MS + 5_000), Decision::ToLow);
        s.observe(Kind::Preempted, 13 * MS + 6_000);
        s.observe(Kind::Wakeup, 14 * MS);
        // Only the replenishment: one period after the activation began at
        // the wake-up of 12 ms.
        assert_eq!(s.next_action_at(), Some(22 * MS));
    }

    #[test]
    fn a_thread_raised_while_it_runs_is_timed_from_the_raise() {
        let mut s = LiveServer::new(MS, 10 * MS, 2, 0);
        s.observe(Kind::In, 0);
        // The budget ran out; lowered, it went on running at the low level
        // and blocked.
        assert_eq!(s.advance(MS), Decision::ToLow);
        s.observe(Kind::Blocked, 2 * MS);
        // It ran again at its low level at 9.9 ms; that switch in reaches
        // the controller only after the replenishment at 10 ms raised it.
        assert_eq!(s.advance(10 * MS), Decision::ToHigh);
        assert_eq!(s.next_action_at(), None, "not known to run, no replenishment pending: nothing to act at");
        s.raised_while_running(10 * MS);
        assert_eq!(s.next_action_at(), Some(11 * MS), "timed from the raise");
        // The older switch in, drained now, changes nothing.
        s.observe(Kind::In, 9_900_000);
        assert_eq!(s.next_action_at(), Some(11 * MS));
        assert_eq!(s.advance(11 * MS), Decision::ToLow);
        assert_eq!(s.rules().pending().last(), Some(&(20 * MS, MS)));
    }

    #[test]
    fn served_time_is_split_into_periods() {
        let mut s = LiveServer::new(5 * MS, 10 * MS, 2, 0);
        s.observe(Kind::In, 8 * MS);
        s.observe(Kind::Preempted, 12 * MS);
        s.observe(Kind::In, 25 * MS);
        s.observe(Kind::Blocked, 26 * MS);
        // Periods [0,10) 2 ms, [10,20) 2 ms, recorded; [20,30) still open.
        assert_eq!(s.served_per_period().count(), 2);
        assert_eq!(s.served_per_period().max_ns(), Some(2 * MS));
    }
}
