//! Aperiodic servers that govern one task (e.g. a driver thread): the
//! POSIX sporadic server (SCHED_SPORADIC semantics), the polling server
//! and the deferrable server. SCHED_DEADLINE's CBS lives in the scheduler
//! ([`crate::sched::deadline`]).
//!
//! The servers' rules are `irqlab_policy::server`, the same code the live
//! controllers run; this module only adapts them to the simulator: a
//! [`Server`] sees the served task's execution ([`Server::consume`]), its
//! wake-ups and blocks, and its own timers, and answers with a
//! [`ServerAction`] the kernel carries out (throttle, unthrottle, change
//! the task's priority). To add a server, write its rules in
//! `crates/policy`, an adapter here, and a `kind` in the scenario parser.

use crate::task::{Policy, TaskId};
use irqlab_analysis::Nanos;
use irqlab_policy::server::{Decision, PeriodicServer, SporadicServer};
use serde_json::json;

pub use irqlab_policy::server::Accounting;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServerAction {
    None,
    /// Take the task off the run queue until the server says otherwise.
    Throttle,
    Unthrottle,
    /// Run the task under this policy from now on (sporadic server's
    /// high/low priority switch).
    SetPolicy(Policy),
}

pub trait Server {
    fn kind(&self) -> &'static str;
    fn task(&self) -> TaskId;
    /// The served task executed during [start, end).
    fn consume(&mut self, start: Nanos, end: Nanos);
    /// How long the task may run before the server must act (None: no
    /// limit right now).
    fn budget_left(&self, now: Nanos) -> Option<Nanos>;
    /// The budget ran out while the task ran. Timers to set go to `timers`
    /// as (absolute time, token).
    fn exhausted(&mut self, now: Nanos, timers: &mut Vec<(Nanos, u64)>) -> ServerAction;
    fn on_wakeup(&mut self, now: Nanos, timers: &mut Vec<(Nanos, u64)>) -> ServerAction;
    fn on_block(&mut self, now: Nanos, timers: &mut Vec<(Nanos, u64)>) -> ServerAction;
    fn timer(&mut self, now: Nanos, token: u64, timers: &mut Vec<(Nanos, u64)>) -> ServerAction;
    /// The task may not run now (it stays off the run queue).
    fn throttled(&self) -> bool;
    /// Timers to arm when the run starts.
    fn start(&mut self, _now: Nanos, _timers: &mut Vec<(Nanos, u64)>) {}
    /// The timer tick fired; `running` says whether it interrupted the
    /// served task. Servers that account by sampling the tick (as Linux's
    /// jiffies accounting does) charge here; the others ignore it.
    fn on_tick(&mut self, _now: Nanos, _running: bool, _timers: &mut Vec<(Nanos, u64)>) -> ServerAction {
        ServerAction::None
    }
    fn report(&self) -> serde_json::Value;
}

/// The POSIX sporadic server ([`SporadicServer`]) on a simulated task: its
/// high level is `high`, its low level `low`, or throttled when `low` is
/// None.
pub struct Sporadic {
    pub task: TaskId,
    pub high: Policy,
    pub low: Option<Policy>,
    pub rules: SporadicServer,
}

impl Sporadic {
    pub fn new(
        task: TaskId,
        high: Policy,
        low: Option<Policy>,
        budget: Nanos,
        period: Nanos,
        max_repl: usize,
        accounting: Accounting,
    ) -> Self {
        Sporadic { task, high, low, rules: SporadicServer::new(budget, period, max_repl, accounting) }
    }

    fn act(&self, d: Decision) -> ServerAction {
        match (d, self.low) {
            (Decision::Keep, _) => ServerAction::None,
            (Decision::ToLow, Some(p)) => ServerAction::SetPolicy(p),
            (Decision::ToLow, None) => ServerAction::Throttle,
            (Decision::ToHigh, Some(_)) => ServerAction::SetPolicy(self.high),
            (Decision::ToHigh, None) => ServerAction::Unthrottle,
        }
    }
}

impl Server for Sporadic {
    fn kind(&self) -> &'static str {
        "sporadic"
    }
    fn task(&self) -> TaskId {
        self.task
    }
    fn consume(&mut self, start: Nanos, end: Nanos) {
        self.rules.consume(start, end);
    }
    fn budget_left(&self, now: Nanos) -> Option<Nanos> {
        self.rules.budget_left(now)
    }
    fn on_tick(&mut self, now: Nanos, running: bool, timers: &mut Vec<(Nanos, u64)>) -> ServerAction {
        let d = self.rules.on_tick(now, running, timers);
        self.act(d)
    }
    fn exhausted(&mut self, now: Nanos, timers: &mut Vec<(Nanos, u64)>) -> ServerAction {
        let d = self.rules.exhausted(now, timers);
        self.act(d)
    }
    fn on_wakeup(&mut self, now: Nanos, _timers: &mut Vec<(Nanos, u64)>) -> ServerAction {
        let d = self.rules.on_wakeup(now);
        self.act(d)
    }
    fn on_block(&mut self, now: Nanos, timers: &mut Vec<(Nanos, u64)>) -> ServerAction {
        let d = self.rules.on_block(now, timers);
        self.act(d)
    }
    fn timer(&mut self, now: Nanos, _token: u64, _timers: &mut Vec<(Nanos, u64)>) -> ServerAction {
        let d = self.rules.timer(now);
        self.act(d)
    }
    fn throttled(&self) -> bool {
        !self.rules.at_high() && self.low.is_none()
    }
    fn report(&self) -> serde_json::Value {
        let r = &self.rules;
        let (accounting, granularity) = match r.accounting {
            Accounting::Exact { granularity } => ("exact", granularity),
            Accounting::TickSampled { tick } => ("tick", tick),
        };
        json!({"kind": "sporadic", "budget_ns": r.budget, "period_ns": r.period,
               "max_repl": r.max_repl, "accounting": accounting, "granularity_ns": granularity,
               "replenishments": r.replenishments, "exhaustions": r.exhaustions})
    }
}

/// Polling and deferrable servers ([`PeriodicServer`]) on a simulated
/// task: throttled while their budget is gone.
pub struct Periodic {
    pub task: TaskId,
    pub rules: PeriodicServer,
}

impl Periodic {
    pub fn new(task: TaskId, budget: Nanos, period: Nanos, deferrable: bool) -> Self {
        Periodic { task, rules: PeriodicServer::new(budget, period, deferrable) }
    }
}

/// A periodic server's decisions as kernel actions: low is throttled.
fn throttle_action(d: Decision) -> ServerAction {
    match d {
        Decision::Keep => ServerAction::None,
        Decision::ToLow => ServerAction::Throttle,
        Decision::ToHigh => ServerAction::Unthrottle,
    }
}

impl Server for Periodic {
    fn kind(&self) -> &'static str {
        self.rules.kind()
    }
    fn task(&self) -> TaskId {
        self.task
    }
    fn start(&mut self, now: Nanos, timers: &mut Vec<(Nanos, u64)>) {
        self.rules.start(now, timers);
    }
    fn consume(&mut self, start: Nanos, end: Nanos) {
        self.rules.consume(start, end);
    }
    fn budget_left(&self, _now: Nanos) -> Option<Nanos> {
        Some(self.rules.budget_left())
    }
    fn exhausted(&mut self, _now: Nanos, _timers: &mut Vec<(Nanos, u64)>) -> ServerAction {
        throttle_action(self.rules.exhausted())
    }
    fn on_wakeup(&mut self, _now: Nanos, _timers: &mut Vec<(Nanos, u64)>) -> ServerAction {
        throttle_action(self.rules.on_wakeup())
    }
    fn on_block(&mut self, _now: Nanos, _timers: &mut Vec<(Nanos, u64)>) -> ServerAction {
        throttle_action(self.rules.on_block())
    }
    fn timer(&mut self, now: Nanos, _token: u64, timers: &mut Vec<(Nanos, u64)>) -> ServerAction {
        throttle_action(self.rules.timer(now, timers))
    }
    fn throttled(&self) -> bool {
        self.rules.suspended()
    }
    fn report(&self) -> serde_json::Value {
        json!({"kind": self.kind(), "budget_ns": self.rules.budget, "period_ns": self.rules.period,
               "exhaustions": self.rules.exhaustions})
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Nanos = 1_000_000;

    fn sporadic(accounting: Accounting, low: Option<Policy>) -> Sporadic {
        Sporadic::new(0, Policy::Fifo(85), low, MS, 10 * MS, 2, accounting)
    }

    #[test]
    fn decisions_become_the_tasks_policy_or_its_throttling() {
        let mut timers = Vec::new();
        let mut s = sporadic(Accounting::Exact { granularity: 1 }, Some(Policy::Fifo(1)));
        s.on_wakeup(0, &mut timers);
        s.consume(0, MS);
        assert_eq!(s.exhausted(MS, &mut timers), ServerAction::SetPolicy(Policy::Fifo(1)));
        assert!(!s.throttled());
        assert_eq!(s.timer(10 * MS, 0, &mut timers), ServerAction::SetPolicy(Policy::Fifo(85)));
        let mut s = sporadic(Accounting::Exact { granularity: 1 }, None);
        s.on_wakeup(0, &mut timers);
        s.consume(0, MS);
        assert_eq!(s.exhausted(MS, &mut timers), ServerAction::Throttle);
        assert!(s.throttled());
        assert_eq!(s.timer(10 * MS, 0, &mut timers), ServerAction::Unthrottle);
    }
}
