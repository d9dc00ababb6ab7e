//! The simulator's gated device: a resource that serves many requests at
//! once (a disk with a queue, a NIC), with the background held back as a
//! whole while the idletime scheduler is not in B ([`irqlab_policy::idletime::Gate`],
//! the live controller's decision code). [`replay`] runs the foreground's
//! request issues and completions, as a live run recorded them, through
//! the simulator's event queue, with the preemption interval's end as an
//! event of its own at its exact time: what the simulator decides, to set
//! beside what the live controller decided.

use crate::engine::EventQueue;
use irqlab_analysis::Nanos;
pub use irqlab_policy::idletime::{Gate, GateStep, IntervalStart, Observation};

/// The gate's steps for foreground observations `foreground` (time,
/// issue or completion; in time order), the gate opened at `begin_ns`.
pub fn replay(p_ns: Option<Nanos>, start: IntervalStart, begin_ns: Nanos, foreground: &[(Nanos, Observation)]) -> Vec<GateStep> {
    let mut queue = EventQueue::new();
    queue.advance_to(begin_ns);
    for &(t, observed) in foreground {
        queue.schedule_at(t.max(begin_ns), observed);
    }
    let mut gate = Gate::new(p_ns, start);
    let mut steps = vec![gate.begin(begin_ns)];
    let mut scheduled: Option<Nanos> = None;
    while let Some((now, observed)) = queue.pop() {
        // An interval end that a later foreground request made stale.
        if observed == Observation::IntervalEnd && gate.wake_at() != Some(now) {
            continue;
        }
        steps.push(gate.observe(now, observed));
        if let Some(t) = gate.wake_at() {
            if scheduled != Some(t) {
                queue.schedule_at(t, Observation::IntervalEnd);
                scheduled = Some(t);
            }
        }
    }
    steps
}

#[cfg(test)]
mod tests {
    use super::*;
    use Observation::{ForegroundComplete as Done, ForegroundIssue as Issue};

    #[test]
    fn the_interval_end_is_an_event_at_its_own_time() {
        let steps = replay(Some(10), IntervalStart::Dispatch, 0, &[(5, Issue), (7, Done), (30, Issue), (31, Done)]);
        let opens: Vec<(Nanos, bool)> = steps.iter().map(|s| (s.at_ns, s.open)).collect();
        // open at 0, closed at 5, held at 7, opened at 15 (5 + p), closed at 30, held at 31, opened at 40.
        assert_eq!(opens, vec![(0, true), (5, false), (7, false), (15, true), (30, false), (31, false), (40, true)]);
        // A foreground request inside the interval moves its end: the earlier end is stale.
        let steps = replay(Some(10), IntervalStart::Dispatch, 0, &[(5, Issue), (7, Done), (12, Issue), (13, Done)]);
        let ends: Vec<Nanos> = steps.iter().filter(|s| s.observed == Observation::IntervalEnd).map(|s| s.at_ns).collect();
        assert_eq!(ends, vec![0, 22]);
    }
}
