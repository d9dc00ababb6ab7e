//! The sporadic server's promise, checked over random workloads: in any
//! window of one period the thread runs at its high level for at most its
//! budget (the property that lets the analysis treat it as a periodic task
//! of budget per period; load-bounds paper §5, POSIX SCHED_SPORADIC).
//! The harness runs the shared rules as a live controller without delay
//! would: the thread runs whenever it has work and is at its high level
//! (a competitor above its low level keeps it from running there), the
//! budget is checked at the instant it runs out, replenishments fire on
//! time.

use irqlab_policy::server::{Accounting, Decision, SporadicServer, Timers};
use proptest::prelude::*;

const US: u64 = 1_000;

/// Runs `bursts` (idle gap before, then work, both in us) through a
/// server of `budget` per `period`; the intervals the thread ran at its
/// high level.
fn high_runs(budget: u64, period: u64, max_repl: usize, bursts: &[(u64, u64)]) -> Vec<(u64, u64)> {
    let mut s = SporadicServer::new(budget, period, max_repl, Accounting::Exact { granularity: 1 });
    let mut runs: Vec<(u64, u64)> = Vec::new();
    let mut t = 0u64;
    let mut timers = Timers::new();
    let mut arrivals = bursts.iter();
    let mut work = 0u64;
    let mut next_arrival = arrivals.next().map(|&(gap, w)| (t + gap * US, w * US));
    loop {
        // Work arrives: the thread wakes if it was blocked.
        if let Some((at, w)) = next_arrival {
            if at <= t {
                if work == 0 {
                    s.on_wakeup(t);
                }
                work += w;
                next_arrival = arrivals.next().map(|&(gap, w)| (at + gap * US, w * US));
            }
        }
        if s.pending().iter().any(|&(at, _)| at <= t) {
            s.timer(t);
        }
        let running = work > 0 && s.at_high();
        let replenishment = s.pending().iter().map(|&(at, _)| at).min();
        let mut next = [next_arrival.map(|(at, _)| at), replenishment].into_iter().flatten().min();
        if running {
            let until = [Some(t + work), s.budget_left(t).map(|left| t + left), next].into_iter().flatten().min().unwrap();
            s.consume(t, until);
            if until > t {
                match runs.last_mut() {
                    Some(last) if last.1 == t => last.1 = until,
                    _ => runs.push((t, until)),
                }
            }
            work -= until - t;
            t = until;
            if s.at_high() && s.budget_left(t) == Some(0) && work > 0 {
                assert_eq!(s.exhausted(t, &mut timers), Decision::ToLow);
            } else if work == 0 {
                s.on_block(t, &mut timers);
            }
            continue;
        }
        if work > 0 && next.is_none() {
            // Ready at the low level with nothing ever to raise it.
            break;
        }
        next = next.filter(|&n| n > t);
        match next {
            Some(n) => t = n,
            None => break,
        }
    }
    runs
}

/// The most high-level time in any window of `len` (a window starting
/// where a run starts holds the most).
fn most_in_a_window(runs: &[(u64, u64)], len: u64) -> u64 {
    runs.iter()
        .map(|&(start, _)| {
            let end = start + len;
            runs.iter().map(|&(a, b)| b.min(end).saturating_sub(a.max(start))).sum()
        })
        .max()
        .unwrap_or(0)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2_000, ..ProptestConfig::default() })]

    #[test]
    fn no_window_of_one_period_holds_more_than_the_budget(
        budget_us in 100u64..3_000,
        period_ms in 4u64..20,
        max_repl in 1usize..6,
        bursts in proptest::collection::vec((0u64..15_000, 1u64..4_000), 1..40),
    ) {
        let (budget, period) = (budget_us * US, period_ms * 1_000 * US);
        let runs = high_runs(budget, period, max_repl, &bursts);
        let most = most_in_a_window(&runs, period);
        prop_assert!(most <= budget, "{most} ns at the high level in one period ({period} ns), budget {budget} ns: runs {runs:?}");
    }
}
