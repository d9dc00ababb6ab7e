//! Aperiodic servers that govern one thread (a driver thread in the
//! load-bounds paper's Table 1): the POSIX sporadic server and the polling
//! and deferrable servers. Each sees the served thread's execution, its
//! wake-ups and blocks, and its own timers, and answers with a
//! [`Decision`]; the caller carries it out (the simulator changes the
//! task's policy or throttles it, a live controller calls sched_setattr).

use irqlab_analysis::Nanos;

/// What the caller must do with the served thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Nothing changes.
    Keep,
    /// Run it at its low level from now on (a sporadic server's low
    /// priority; suspended when there is none, and for periodic servers).
    ToLow,
    /// Run it at its high level again.
    ToHigh,
}

/// Timers a server asks for: (absolute time, token). The token comes back
/// with the timer; servers here ignore it but keep them distinct.
pub type Timers = Vec<(Nanos, u64)>;

fn round_up(t: Nanos, gran: Nanos) -> Nanos {
    if gran <= 1 {
        t
    } else {
        t.div_ceil(gran) * gran
    }
}

/// How a sporadic server measures what its thread consumed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Accounting {
    /// Exact execution time; budget checks and replenishment times are
    /// rounded up to this granularity of wall time (1 ns: exact).
    Exact { granularity: Nanos },
    /// Linux 2.6's jiffies accounting (load-bounds paper §5: the sporadic
    /// server "uses the native (and rather coarse) time accounting
    /// granularity of Linux, which is 1 msec"): the timer tick that finds
    /// the thread running charges it one whole tick, whatever it really ran
    /// since the last tick; time between ticks is not seen, so the budget is
    /// only checked at ticks; activation times are jiffies (floored to the
    /// tick) and replenishments fire on tick boundaries.
    TickSampled { tick: Nanos },
}

/// POSIX sporadic server (IEEE Std 1003.1, SCHED_SPORADIC), as the
/// load-bounds paper's "Sporadic" configuration uses it (Table 1: budget
/// 1 ms, period 10 ms, at most 2 pending replenishments): the thread runs
/// at its high level while it has budget; execution consumed since an
/// activation is replenished one period after the activation began; when
/// the budget is gone, or `max_repl` replenishments are pending at a block,
/// it runs at its low level until a replenishment brings budget back.
#[derive(Debug, Clone)]
pub struct SporadicServer {
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

impl SporadicServer {
    pub fn new(budget: Nanos, period: Nanos, max_repl: usize, accounting: Accounting) -> Self {
        SporadicServer {
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

    /// Whether the thread is at its high level now.
    pub fn at_high(&self) -> bool {
        self.at_high
    }

    /// Replenishments scheduled and not yet due: (time, amount).
    pub fn pending(&self) -> &[(Nanos, Nanos)] {
        &self.pending
    }

    /// Ends the current activation: its consumption comes back one period
    /// after it began.
    fn close_activation(&mut self, timers: &mut Timers) {
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

    fn drop_low(&mut self) -> Decision {
        self.at_high = false;
        Decision::ToLow
    }

    /// The served thread executed during [start, end).
    pub fn consume(&mut self, start: Nanos, end: Nanos) {
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

    /// How long the thread may run from `now` before the server must act
    /// ([`SporadicServer::exhausted`]); None: no limit right now.
    pub fn budget_left(&self, now: Nanos) -> Option<Nanos> {
        match self.accounting {
            _ if !self.at_high => None,
            Accounting::Exact { granularity } => {
                let left = self.capacity.max(0) as Nanos;
                Some(round_up(now + left, granularity) - now)
            }
            // Checked only when a tick charges the thread (on_tick).
            Accounting::TickSampled { .. } => None,
        }
    }

    /// The timer tick fired; `running` says whether it interrupted the
    /// served thread. Only tick-sampled accounting charges here.
    pub fn on_tick(&mut self, now: Nanos, running: bool, timers: &mut Timers) -> Decision {
        let Accounting::TickSampled { tick } = self.accounting else { return Decision::Keep };
        if !(self.at_high && running) {
            return Decision::Keep;
        }
        if self.activation.is_none() {
            self.activation = Some(self.activation_time(now));
        }
        self.capacity -= tick as i64;
        self.consumed_since_activation += tick;
        if self.capacity > 0 {
            return Decision::Keep;
        }
        self.exhaustions += 1;
        self.close_activation(timers);
        self.drop_low()
    }

    /// The budget ran out while the thread ran.
    pub fn exhausted(&mut self, _now: Nanos, timers: &mut Timers) -> Decision {
        self.exhaustions += 1;
        self.close_activation(timers);
        self.drop_low()
    }

    /// The thread became ready.
    pub fn on_wakeup(&mut self, now: Nanos) -> Decision {
        // The activation begins when the thread becomes ready at high priority.
        if self.at_high && self.activation.is_none() && self.capacity > 0 {
            self.activation = Some(self.activation_time(now));
        }
        Decision::Keep
    }

    /// The thread blocked.
    pub fn on_block(&mut self, _now: Nanos, timers: &mut Timers) -> Decision {
        if !self.at_high {
            return Decision::Keep;
        }
        self.close_activation(timers);
        if self.pending.len() >= self.max_repl {
            // No replenishment slot left: budget is gone until one returns.
            self.capacity = self.capacity.min(0);
            return self.drop_low();
        }
        Decision::Keep
    }

    /// A replenishment timer fired.
    pub fn timer(&mut self, now: Nanos) -> Decision {
        let (due, later): (Vec<_>, Vec<_>) = self.pending.iter().partition(|(at, _)| *at <= now);
        self.pending = later;
        for (_, amount) in due {
            self.capacity = (self.capacity + amount as i64).min(self.budget as i64);
            self.replenishments += 1;
        }
        if !self.at_high && self.capacity > 0 && self.pending.len() < self.max_repl {
            self.at_high = true;
            self.activation = None;
            return Decision::ToHigh;
        }
        Decision::Keep
    }
}

/// Polling and deferrable servers: the budget is refilled to full at every
/// period boundary; the thread runs only while budget is left. A polling
/// server loses its budget as soon as the thread has nothing to do (it only
/// serves work present when it polls); a deferrable server keeps it until
/// the period ends. Low level = suspended.
#[derive(Debug, Clone)]
pub struct PeriodicServer {
    pub budget: Nanos,
    pub period: Nanos,
    pub deferrable: bool,
    capacity: i64,
    runnable: bool,
    pub exhaustions: u64,
}

impl PeriodicServer {
    pub fn new(budget: Nanos, period: Nanos, deferrable: bool) -> Self {
        PeriodicServer { budget, period, deferrable, capacity: budget as i64, runnable: true, exhaustions: 0 }
    }

    pub fn kind(&self) -> &'static str {
        if self.deferrable {
            "deferrable"
        } else {
            "polling"
        }
    }

    /// The first period starts at `now`.
    pub fn start(&mut self, now: Nanos, timers: &mut Timers) {
        timers.push((now + self.period, 0));
    }

    pub fn consume(&mut self, start: Nanos, end: Nanos) {
        self.capacity -= (end - start) as i64;
    }

    pub fn budget_left(&self) -> Nanos {
        self.capacity.max(0) as Nanos
    }

    pub fn exhausted(&mut self) -> Decision {
        self.exhaustions += 1;
        Decision::ToLow
    }

    pub fn on_wakeup(&mut self) -> Decision {
        self.runnable = true;
        Decision::Keep
    }

    pub fn on_block(&mut self) -> Decision {
        self.runnable = false;
        if !self.deferrable {
            self.capacity = 0; // nothing queued: the poll is over
        }
        Decision::Keep
    }

    /// The period ended: full budget again.
    pub fn timer(&mut self, now: Nanos, timers: &mut Timers) -> Decision {
        timers.push((now + self.period, 0));
        self.capacity = self.budget as i64;
        Decision::ToHigh
    }

    /// Whether the thread may not run now.
    pub fn suspended(&self) -> bool {
        self.capacity <= 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Nanos = 1_000_000;

    #[test]
    fn tick_sampled_server_sees_only_the_ticks_that_find_it_running() {
        let mut s = SporadicServer::new(MS, 10 * MS, 2, Accounting::TickSampled { tick: MS });
        let mut timers = Vec::new();
        // 3 ms of short runs between ticks: nothing charged, no enforcement.
        s.on_wakeup(1_500_000);
        for k in 0..300 {
            let t = 1_500_000 + k * 10_000;
            s.consume(t, t + 3_000);
        }
        assert_eq!(s.budget_left(4_500_000), None, "no budget timer between ticks");
        assert_eq!(s.on_tick(2 * MS, false, &mut timers), Decision::Keep);
        assert!(timers.is_empty());
        // A tick that finds it running charges a whole tick: the 1 ms budget is gone.
        assert_eq!(s.on_tick(5 * MS, true, &mut timers), Decision::ToLow);
        assert_eq!(s.exhaustions, 1);
        // Replenished one period after the activation's jiffy (1 ms), not 1.5 ms.
        assert_eq!(timers, vec![(11 * MS, 0)]);
        assert_eq!(s.timer(11 * MS), Decision::ToHigh);
    }

    #[test]
    fn exact_server_enforces_its_budget_to_the_granule() {
        let mut s = SporadicServer::new(MS, 10 * MS, 2, Accounting::Exact { granularity: 1 });
        let mut timers = Vec::new();
        s.on_wakeup(1_500_000);
        s.consume(1_500_000, 1_900_000);
        assert_eq!(s.budget_left(1_900_000), Some(600_000));
        // Ticks mean nothing to it.
        assert_eq!(s.on_tick(2 * MS, true, &mut timers), Decision::Keep);
        s.consume(1_900_000, 2_500_000);
        assert_eq!(s.exhausted(2_500_000, &mut timers), Decision::ToLow);
        assert_eq!(timers, vec![(11_500_000, 0)]);
    }

    #[test]
    fn max_pending_replenishments_drop_it_low_at_a_block() {
        let mut s = SporadicServer::new(5 * MS, 10 * MS, 2, Accounting::Exact { granularity: 1 });
        let mut timers = Vec::new();
        for k in 0..2 {
            let t = k * MS;
            s.on_wakeup(t);
            s.consume(t, t + 100_000);
            let d = s.on_block(t + 100_000, &mut timers);
            assert_eq!(d, if k == 1 { Decision::ToLow } else { Decision::Keep }, "block {k}");
        }
        assert_eq!(s.pending().len(), 2);
        // The first replenishment frees a slot and brings budget: high again.
        assert_eq!(s.timer(10 * MS), Decision::ToHigh);
    }

    #[test]
    fn polling_server_loses_its_budget_when_idle_and_deferrable_keeps_it() {
        let (mut poll, mut defer) = (PeriodicServer::new(MS, 10 * MS, false), PeriodicServer::new(MS, 10 * MS, true));
        for s in [&mut poll, &mut defer] {
            s.consume(0, 200_000);
            s.on_block();
        }
        assert_eq!(poll.budget_left(), 0);
        assert_eq!(defer.budget_left(), 800_000);
        let mut timers = Vec::new();
        assert_eq!(poll.timer(10 * MS, &mut timers), Decision::ToHigh);
        assert_eq!(poll.budget_left(), MS);
        assert_eq!(timers, vec![(20 * MS, 0)]);
    }
}
