//! Aperiodic servers that govern one task (e.g. a driver thread): the
//! POSIX sporadic server (SCHED_SPORADIC semantics), the polling server
//! and the deferrable server. SCHED_DEADLINE's CBS lives in the scheduler
//! ([`crate::sched::deadline`]).
//!
//! A server sees the served task's execution ([`Server::consume`]), its
//! wake-ups and blocks, and its own timers; it answers with a
//! [`ServerAction`] the kernel carries out (throttle, unthrottle, change
//! the task's priority). To add a server, implement [`Server`] and add a
//! `kind` in the scenario parser.

use crate::task::{Policy, TaskId};
use irqlab_analysis::Nanos;
use serde_json::json;

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

fn round_up(t: Nanos, gran: Nanos) -> Nanos {
    if gran <= 1 {
        t
    } else {
        t.div_ceil(gran) * gran
    }
}

/// How a sporadic server measures what its task consumed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Accounting {
    /// Exact execution time; budget checks and replenishment timers are
    /// rounded up to this granularity of wall time (1 ns: exact).
    Exact { granularity: Nanos },
    /// Linux 2.6's native jiffies accounting (the load-bounds paper §5:
    /// "uses the native (and rather coarse) time accounting granularity of
    /// Linux, which is 1 msec"): the timer tick that finds the task
    /// running charges it one whole tick, whatever it really ran since the
    /// last tick; time between ticks is not seen, so the budget is only
    /// checked at ticks; activation times are jiffies (floored to the
    /// tick) and replenishments fire on the timer wheel's tick boundaries.
    TickSampled { tick: Nanos },
}

/// POSIX sporadic server (IEEE 1003.1 SCHED_SPORADIC): the task runs at
/// its high priority while it has budget; execution consumed since an
/// activation is replenished one period after the activation; when the
/// budget is gone, or `max_repl` replenishments are pending, the task runs
/// at `low` (or not at all when `low` is None). How consumption is
/// measured is the [`Accounting`]: exact (budget checks rounded up to a
/// granularity) or sampled by the tick, as the paper's implementation on
/// the Timesys kernel did.
pub struct Sporadic {
    pub task: TaskId,
    pub high: Policy,
    pub low: Option<Policy>,
    pub budget: Nanos,
    pub period: Nanos,
    pub max_repl: usize,
    pub accounting: Accounting,
    capacity: i64,
    at_high: bool,
    activation: Option<Nanos>,
    consumed_since_activation: Nanos,
    pending: Vec<(Nanos, Nanos)>,
    next_token: u64,
    pub replenishments: u64,
    pub exhaustions: u64,
}

impl Sporadic {
    pub fn new(task: TaskId, high: Policy, low: Option<Policy>, budget: Nanos, period: Nanos, max_repl: usize, accounting: Accounting) -> Self {
        Sporadic {
            task,
            high,
            low,
            budget,
            period,
            max_repl: max_repl.max(1),
            accounting,
            capacity: budget as i64,
            at_high: true,
            activation: None,
            consumed_since_activation: 0,
            pending: Vec::new(),
            next_token: 0,
            replenishments: 0,
            exhaustions: 0,
        }
    }

    /// Ends the current activation: its consumption comes back one period
    /// after it began.
    fn close_activation(&mut self, timers: &mut Vec<(Nanos, u64)>) {
        if let Some(a) = self.activation.take() {
            let amount = std::mem::take(&mut self.consumed_since_activation);
            if amount > 0 {
                let at = match self.accounting {
                    Accounting::Exact { granularity } => round_up(a + self.period, granularity),
                    // The activation is a jiffies value already: the timer
                    // expires on the tick `period` later.
                    Accounting::TickSampled { .. } => a + self.period,
                };
                self.pending.push((at, amount));
                timers.push((at, self.next_token));
                self.next_token += 1;
            }
        }
    }

    /// When an activation starting at `t` begins, as the server records it.
    fn activation_time(&self, t: Nanos) -> Nanos {
        match self.accounting {
            Accounting::Exact { .. } => t,
            Accounting::TickSampled { tick } => t / tick * tick,
        }
    }

    fn tick_sampled(&self) -> bool {
        matches!(self.accounting, Accounting::TickSampled { .. })
    }

    fn drop_low(&mut self) -> ServerAction {
        self.at_high = false;
        match self.low {
            Some(p) => ServerAction::SetPolicy(p),
            None => ServerAction::Throttle,
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
        if self.at_high {
            if self.activation.is_none() {
                self.activation = Some(self.activation_time(start));
            }
            if !self.tick_sampled() {
                self.capacity -= (end - start) as i64;
                self.consumed_since_activation += end - start;
            }
        }
    }
    fn budget_left(&self, now: Nanos) -> Option<Nanos> {
        match self.accounting {
            _ if !self.at_high => None,
            Accounting::Exact { granularity } => {
                let left = self.capacity.max(0) as Nanos;
                Some(round_up(now + left, granularity) - now)
            }
            // Checked only when a tick charges the task (Self::on_tick).
            Accounting::TickSampled { .. } => None,
        }
    }
    fn on_tick(&mut self, now: Nanos, running: bool, timers: &mut Vec<(Nanos, u64)>) -> ServerAction {
        let Accounting::TickSampled { tick } = self.accounting else { return ServerAction::None };
        if !(self.at_high && running) {
            return ServerAction::None;
        }
        if self.activation.is_none() {
            self.activation = Some(self.activation_time(now));
        }
        self.capacity -= tick as i64;
        self.consumed_since_activation += tick;
        if self.capacity > 0 {
            return ServerAction::None;
        }
        self.exhaustions += 1;
        self.close_activation(timers);
        self.drop_low()
    }
    fn exhausted(&mut self, _now: Nanos, timers: &mut Vec<(Nanos, u64)>) -> ServerAction {
        self.exhaustions += 1;
        self.close_activation(timers);
        self.drop_low()
    }
    fn on_wakeup(&mut self, now: Nanos, _timers: &mut Vec<(Nanos, u64)>) -> ServerAction {
        // The activation begins when the task becomes ready at high priority.
        if self.at_high && self.activation.is_none() && self.capacity > 0 {
            self.activation = Some(self.activation_time(now));
        }
        ServerAction::None
    }
    fn on_block(&mut self, _now: Nanos, timers: &mut Vec<(Nanos, u64)>) -> ServerAction {
        if !self.at_high {
            return ServerAction::None;
        }
        self.close_activation(timers);
        if self.pending.len() >= self.max_repl {
            // No replenishment slot left: budget is gone until one returns.
            self.capacity = self.capacity.min(0);
            return self.drop_low();
        }
        ServerAction::None
    }
    fn timer(&mut self, now: Nanos, _token: u64, _timers: &mut Vec<(Nanos, u64)>) -> ServerAction {
        let (due, later): (Vec<_>, Vec<_>) = self.pending.iter().partition(|(at, _)| *at <= now);
        self.pending = later;
        for (_, amount) in due {
            self.capacity = (self.capacity + amount as i64).min(self.budget as i64);
            self.replenishments += 1;
        }
        if !self.at_high && self.capacity > 0 && self.pending.len() < self.max_repl {
            self.at_high = true;
            self.activation = None;
            return match self.low {
                Some(_) => ServerAction::SetPolicy(self.high),
                None => ServerAction::Unthrottle,
            };
        }
        ServerAction::None
    }
    fn throttled(&self) -> bool {
        !self.at_high && self.low.is_none()
    }
    fn report(&self) -> serde_json::Value {
        let (accounting, granularity) = match self.accounting {
            Accounting::Exact { granularity } => ("exact", granularity),
            Accounting::TickSampled { tick } => ("tick", tick),
        };
        json!({"kind": "sporadic", "budget_ns": self.budget, "period_ns": self.period,
               "max_repl": self.max_repl, "accounting": accounting, "granularity_ns": granularity,
               "replenishments": self.replenishments, "exhaustions": self.exhaustions})
    }
}

/// Polling and deferrable servers: the budget is refilled to full at every
/// period boundary; the task runs only while budget is left. A polling
/// server loses its budget as soon as the task has nothing to do (it only
/// serves work present when it polls); a deferrable server keeps it until
/// the period ends.
pub struct Periodic {
    pub task: TaskId,
    pub budget: Nanos,
    pub period: Nanos,
    pub deferrable: bool,
    capacity: i64,
    runnable: bool,
    pub exhaustions: u64,
}

impl Periodic {
    pub fn new(task: TaskId, budget: Nanos, period: Nanos, deferrable: bool) -> Self {
        Periodic { task, budget, period, deferrable, capacity: budget as i64, runnable: true, exhaustions: 0 }
    }
}

impl Server for Periodic {
    fn kind(&self) -> &'static str {
        if self.deferrable {
            "deferrable"
        } else {
            "polling"
        }
    }
    fn task(&self) -> TaskId {
        self.task
    }
    fn start(&mut self, now: Nanos, timers: &mut Vec<(Nanos, u64)>) {
        timers.push((now + self.period, 0));
    }
    fn consume(&mut self, start: Nanos, end: Nanos) {
        self.capacity -= (end - start) as i64;
    }
    fn budget_left(&self, _now: Nanos) -> Option<Nanos> {
        Some(self.capacity.max(0) as Nanos)
    }
    fn exhausted(&mut self, _now: Nanos, _timers: &mut Vec<(Nanos, u64)>) -> ServerAction {
        self.exhaustions += 1;
        ServerAction::Throttle
    }
    fn on_wakeup(&mut self, _now: Nanos, _timers: &mut Vec<(Nanos, u64)>) -> ServerAction {
        self.runnable = true;
        ServerAction::None
    }
    fn on_block(&mut self, _now: Nanos, _timers: &mut Vec<(Nanos, u64)>) -> ServerAction {
        self.runnable = false;
        if !self.deferrable {
            self.capacity = 0; // nothing queued: the poll is over
        }
        ServerAction::None
    }
    fn timer(&mut self, now: Nanos, _token: u64, timers: &mut Vec<(Nanos, u64)>) -> ServerAction {
        timers.push((now + self.period, 0));
        self.capacity = self.budget as i64;
        ServerAction::Unthrottle
    }
    fn throttled(&self) -> bool {
        self.capacity <= 0
    }
    fn report(&self) -> serde_json::Value {
        json!({"kind": self.kind(), "budget_ns": self.budget, "period_ns": self.period,
               "exhaustions": self.exhaustions})
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Nanos = 1_000_000;

    fn sporadic(accounting: Accounting) -> Sporadic {
        Sporadic::new(0, Policy::Fifo(85), Some(Policy::Fifo(1)), MS, 10 * MS, 2, accounting)
    }

    #[test]
    fn tick_sampled_server_sees_only_the_ticks_that_find_it_running() {
        let mut s = sporadic(Accounting::TickSampled { tick: MS });
        let mut timers = Vec::new();
        // 3 ms of short runs between ticks: nothing charged, no enforcement.
        s.on_wakeup(1_500_000, &mut timers);
        for k in 0..300 {
            let t = 1_500_000 + k * 10_000;
            s.consume(t, t + 3_000);
        }
        assert_eq!(s.budget_left(4_500_000), None, "no budget timer between ticks");
        assert_eq!(s.on_tick(2 * MS, false, &mut timers), ServerAction::None);
        assert!(timers.is_empty());
        // A tick that finds it running charges a whole tick: the 1 ms budget is gone.
        assert_eq!(s.on_tick(5 * MS, true, &mut timers), ServerAction::SetPolicy(Policy::Fifo(1)));
        assert_eq!(s.exhaustions, 1);
        // Replenished one period after the activation's jiffy (1 ms), not 1.5 ms.
        assert_eq!(timers, vec![(11 * MS, 0)]);
        assert_eq!(s.timer(11 * MS, 0, &mut timers), ServerAction::SetPolicy(Policy::Fifo(85)));
    }

    #[test]
    fn exact_server_enforces_its_budget_to_the_granule() {
        let mut s = sporadic(Accounting::Exact { granularity: 1 });
        let mut timers = Vec::new();
        s.on_wakeup(1_500_000, &mut timers);
        s.consume(1_500_000, 1_900_000);
        assert_eq!(s.budget_left(1_900_000), Some(600_000));
        // Ticks mean nothing to it.
        assert_eq!(s.on_tick(2 * MS, true, &mut timers), ServerAction::None);
        s.consume(1_900_000, 2_500_000);
        assert_eq!(s.exhausted(2_500_000, &mut timers), ServerAction::SetPolicy(Policy::Fifo(1)));
        assert_eq!(timers, vec![(11_500_000, 0)]);
    }
}
