//! How a kernel keeps real-time tasks from starving the fair class on a
//! CPU, per kernel version (the `[machine] kernel` presets):
//!
//! - **RT throttling** (Linux 2.6.25 to 6.11; `kernel/sched/rt.c`,
//!   `sched_rt_runtime_exceeded`, `do_sched_rt_period_timer`): the RT
//!   class may run `sched_rt_runtime_us` (950 ms) of every
//!   `sched_rt_period_us` (1 s) on a CPU; past that its tasks are
//!   dequeued until the period ends, and the CPU runs fair tasks or idles.
//! - **The fair server** (6.12: "sched/fair: Add trivial fair server",
//!   "sched/deadline: Deferrable dl server", and "sched/rt: Remove
//!   default bandwidth control", which drops RT throttling where
//!   RT_GROUP_SCHED is off, as in Debian's kernels): a deadline entity of
//!   50 ms per 1 s per CPU that runs fair tasks. Deferred: the fair tasks'
//!   own running consumes its runtime; only when they have not had it by
//!   the zero-laxity point (period − runtime into the period) does it
//!   preempt the RT tasks and run them for what is left.
//!
//! Simplifications (docs/sim-multicore.md): periods are aligned to
//! multiples of the period from time 0, where the kernel starts them at
//! the first RT or fair enqueue; the fair server competes with no other
//! deadline task (it ranks above the RT class only).

use irqlab_analysis::Nanos;

/// Default `sched_rt_runtime_us` / `sched_rt_period_us`, and the fair
/// server's 50 ms per 1 s (`fair_server_init`: the same bandwidth).
pub const RT_RUNTIME: Nanos = 950_000_000;
pub const PERIOD: Nanos = 1_000_000_000;
pub const FAIR_SERVER_RUNTIME: Nanos = 50_000_000;

#[derive(Debug, Clone, Default)]
pub enum Bandwidth {
    /// No limit (the papers' kernels, and RT throttling switched off).
    #[default]
    Unlimited,
    RtThrottle(RtThrottle),
    FairServer(FairServer),
}

#[derive(Debug, Clone)]
pub struct RtThrottle {
    pub runtime: Nanos,
    pub period: Nanos,
    /// `rt_time`: RT time run, less what period timers took off.
    pub used: Nanos,
    pub throttled: bool,
    /// Times it throttled.
    pub throttles: u64,
}

#[derive(Debug, Clone)]
pub struct FairServer {
    pub runtime: Nanos,
    pub period: Nanos,
    /// Fair time run in this period (the server's runtime used).
    pub consumed: Nanos,
    /// Past the zero-laxity point with runtime left: fair tasks rank
    /// above the RT class until it is used up or the period ends.
    pub boosted: bool,
    /// Times it boosted, and fair time run while boosted.
    pub boosts: u64,
    pub boosted_ns: Nanos,
}

/// What a bandwidth timer asks of the CPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimerOutcome {
    pub resched: bool,
    /// When the next timer is due.
    pub next: Nanos,
}

impl Bandwidth {
    pub fn rt_throttle() -> Self {
        Bandwidth::RtThrottle(RtThrottle { runtime: RT_RUNTIME, period: PERIOD, used: 0, throttled: false, throttles: 0 })
    }

    pub fn fair_server() -> Self {
        Bandwidth::FairServer(FairServer {
            runtime: FAIR_SERVER_RUNTIME,
            period: PERIOD,
            consumed: 0,
            boosted: false,
            boosts: 0,
            boosted_ns: 0,
        })
    }

    /// The first timer, if any.
    pub fn first_timer(&self) -> Option<Nanos> {
        match self {
            Bandwidth::Unlimited => None,
            Bandwidth::RtThrottle(r) => Some(r.period),
            Bandwidth::FairServer(f) => Some(f.period - f.runtime),
        }
    }

    /// The RT class may not run now.
    #[inline]
    pub fn rt_held_back(&self) -> bool {
        matches!(self, Bandwidth::RtThrottle(r) if r.throttled)
    }

    /// Fair tasks rank above the RT class now.
    #[inline]
    pub fn fair_boosted(&self) -> bool {
        matches!(self, Bandwidth::FairServer(f) if f.boosted)
    }

    /// A task of the RT class ran `ns`.
    #[inline]
    pub fn rt_ran(&mut self, ns: Nanos) {
        if let Bandwidth::RtThrottle(r) = self {
            r.used += ns;
        }
    }

    /// A task of the fair class ran `ns`.
    #[inline]
    pub fn fair_ran(&mut self, ns: Nanos) {
        if let Bandwidth::FairServer(f) = self {
            f.consumed += ns;
            if f.boosted {
                f.boosted_ns += ns;
            }
        }
    }

    /// How long a task of the RT class (`rt`) or the fair class may run
    /// before the bandwidth rule acts (None: no limit now).
    #[inline]
    pub fn left(&self, rt: bool) -> Option<Nanos> {
        match self {
            Bandwidth::RtThrottle(r) if rt => Some(r.runtime.saturating_sub(r.used)),
            Bandwidth::FairServer(f) if !rt && f.boosted => Some(f.runtime.saturating_sub(f.consumed)),
            _ => None,
        }
    }

    /// The limit [`Bandwidth::left`] gave was reached: RT throttled, or the
    /// boost over. Returns whether anything changed.
    pub fn exhausted(&mut self) -> bool {
        match self {
            Bandwidth::RtThrottle(r) if !r.throttled && r.used >= r.runtime => {
                r.throttled = true;
                r.throttles += 1;
                true
            }
            Bandwidth::FairServer(f) if f.boosted && f.consumed >= f.runtime => {
                f.boosted = false;
                true
            }
            _ => false,
        }
    }

    /// A bandwidth timer at `now`; `fair_waiting`: a fair task is runnable.
    pub fn timer(&mut self, now: Nanos, fair_waiting: bool) -> TimerOutcome {
        match self {
            Bandwidth::Unlimited => TimerOutcome { resched: false, next: Nanos::MAX },
            Bandwidth::RtThrottle(r) => {
                r.used -= r.used.min(r.runtime);
                let resched = r.throttled && r.used < r.runtime;
                if resched {
                    r.throttled = false;
                }
                TimerOutcome { resched, next: now + r.period }
            }
            Bandwidth::FairServer(f) => {
                let into = now % f.period;
                if into == 0 {
                    // A new period: the runtime replenished, the boost over.
                    let resched = f.boosted;
                    f.consumed = 0;
                    f.boosted = false;
                    TimerOutcome { resched, next: now + f.period - f.runtime }
                } else {
                    // The zero-laxity point: boost if the fair tasks wait
                    // and have not had their runtime.
                    let boost = fair_waiting && f.consumed < f.runtime;
                    if boost {
                        f.boosted = true;
                        f.boosts += 1;
                    }
                    TimerOutcome { resched: boost, next: now - into + f.period }
                }
            }
        }
    }

    /// Its figures for the results.
    pub fn report(&self) -> Option<serde_json::Value> {
        match self {
            Bandwidth::Unlimited => None,
            Bandwidth::RtThrottle(r) => Some(serde_json::json!({
                "kind": "rt_throttling", "runtime_ns": r.runtime, "period_ns": r.period, "throttles": r.throttles,
            })),
            Bandwidth::FairServer(f) => Some(serde_json::json!({
                "kind": "fair_server", "runtime_ns": f.runtime, "period_ns": f.period, "boosts": f.boosts, "boosted_ns": f.boosted_ns,
            })),
        }
    }

    /// Statistics restart (end of warm-up).
    pub fn reset_stats(&mut self) {
        match self {
            Bandwidth::Unlimited => {}
            Bandwidth::RtThrottle(r) => r.throttles = 0,
            Bandwidth::FairServer(f) => {
                f.boosts = 0;
                f.boosted_ns = 0;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rt_throttling_holds_rt_back_past_its_runtime_until_the_period_ends() {
        let mut b = Bandwidth::rt_throttle();
        assert_eq!(b.left(true), Some(RT_RUNTIME));
        assert_eq!(b.left(false), None);
        b.rt_ran(RT_RUNTIME);
        assert_eq!(b.left(true), Some(0));
        assert!(b.exhausted() && b.rt_held_back());
        let t = b.timer(PERIOD, true);
        assert!(t.resched && !b.rt_held_back());
        assert_eq!(t.next, 2 * PERIOD);
        assert_eq!(b.left(true), Some(RT_RUNTIME));
    }

    #[test]
    fn the_fair_server_boosts_only_fair_tasks_starved_until_zero_laxity() {
        let mut b = Bandwidth::fair_server();
        let zero_lax = b.first_timer().unwrap();
        assert_eq!(zero_lax, PERIOD - FAIR_SERVER_RUNTIME);
        // Starved: boosted at zero laxity for its whole runtime.
        let t = b.timer(zero_lax, true);
        assert!(t.resched && b.fair_boosted());
        assert_eq!(t.next, PERIOD);
        assert_eq!(b.left(false), Some(FAIR_SERVER_RUNTIME));
        b.fair_ran(FAIR_SERVER_RUNTIME);
        assert!(b.exhausted() && !b.fair_boosted());
        let t = b.timer(PERIOD, true);
        assert_eq!(t.next, 2 * PERIOD - FAIR_SERVER_RUNTIME);
        // Fair tasks that had their runtime by themselves: no boost.
        b.fair_ran(FAIR_SERVER_RUNTIME);
        assert!(!b.timer(t.next, true).resched && !b.fair_boosted());
        // Nobody waiting: no boost either.
        b.timer(2 * PERIOD, false);
        assert!(!b.timer(3 * PERIOD - FAIR_SERVER_RUNTIME, false).resched);
    }
}
