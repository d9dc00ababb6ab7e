//! The simulator's adapter to the idletime scheduler: the Variant-1 state
//! machine itself (dissertation Fig. 5.6, §5.1) lives in
//! `irqlab_policy::idletime`, shared with the live controllers; this module
//! re-exports it and adds what the simulated disk and NIC need to drive it
//! from their two class queues and the event queue.

use irqlab_analysis::Nanos;
pub use irqlab_policy::idletime::{Class, Counters, Decision, Event, IdletimeScheduler, IntervalStart, State};

/// [`IdletimeScheduler::dispatch`] for a non-preemptable resource that keeps
/// one queue per class (the disk's and the NIC's): which class starts now,
/// given whether each queue holds work. On `WaitUntil` it asks
/// `schedule_wake` for a wake-up unless one is pending in `wake_at` (the
/// owner clears it when it fires): one is enough, the interval only ever
/// moves later and the wake-up re-asks.
pub(crate) fn next_class(
    sched: &mut IdletimeScheduler,
    now: Nanos,
    fg_waiting: bool,
    bg_waiting: bool,
    wake_at: &mut Option<Nanos>,
    schedule_wake: impl FnOnce(Nanos),
) -> Option<Class> {
    let head = if fg_waiting {
        Some(Class::Foreground)
    } else if bg_waiting {
        Some(Class::Background)
    } else {
        None
    };
    match sched.dispatch(now, head) {
        Decision::StartForeground => Some(Class::Foreground),
        Decision::StartBackground => Some(Class::Background),
        Decision::WaitUntil(t) => {
            if wake_at.is_none() {
                *wake_at = Some(t);
                schedule_wake(t);
            }
            None
        }
        Decision::Nothing | Decision::PreemptAndStartForeground => None,
    }
}
