//! The idletime scheduler's state machine, Variant 1 of the dissertation
//! (Fig. 5.6, §5.1), usable at any resource.
//!
//! States: I (idle), F (foreground active), B (background active), P (in the
//! preemption interval, background held back although the resource is
//! free). Events: f (a foreground request is at the head of the queue), b (a
//! background request is at the head), t (the preemption interval expired),
//! i (the queue is empty). Variant 1's transitions:
//!
//! ```text
//!        f     b        t     i
//!   I    F     B        -     I
//!   F    F     P (b/b)  -     P
//!   B    F     B        -     I
//!   P    F     P        I     P
//! ```
//!
//! The resource owner keeps the queues and calls [`IdletimeScheduler::dispatch`]
//! whenever the resource may start work: on enqueue, on completion and at
//! the interval's end. This type only decides; it holds no requests, so the
//! simulator's disk and NIC queues (`irqlab-sim`'s idletime module) and a
//! live gate of background I/O drive the same transitions.

use irqlab_analysis::Nanos;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Foreground (regular) or background (idletime) work.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Class {
    Foreground,
    Background,
}

/// The four states of §5.1.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum State {
    I,
    F,
    B,
    P,
}

/// The four events of §5.1.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub enum Event {
    F,
    B,
    T,
    I,
}

/// When the preemption interval restarts: at each foreground dispatch (the
/// prototype, §5.5) or at each foreground completion (the model of §4.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum IntervalStart {
    Dispatch,
    Completion,
}

/// What the resource should do now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Start the foreground request at the head of the foreground queue.
    StartForeground,
    /// Start the background request at the head of the background queue.
    StartBackground,
    /// Preemptable resource only: put the active background request back at
    /// the head of its queue and start the foreground request instead.
    PreemptAndStartForeground,
    /// Stay idle although background work waits; call `dispatch` again at
    /// this time (the interval's end). With nothing waiting the scheduler
    /// answers `Nothing`: the next arrival calls `dispatch` anyway.
    WaitUntil(Nanos),
    /// Nothing to do (the resource is busy, or the queue is empty).
    Nothing,
}

/// The X[e] counters: how often event e was seen in state X. A repeated
/// observation of the same (X, e) with nothing started in between (e.g. the
/// resource asking again while the queue stays empty) counts once.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Counters {
    counts: BTreeMap<(State, Event), u64>,
}

impl Counters {
    pub fn get(&self, state: State, event: Event) -> u64 {
        self.counts.get(&(state, event)).copied().unwrap_or(0)
    }
    fn bump(&mut self, state: State, event: Event) {
        *self.counts.entry((state, event)).or_insert(0) += 1;
    }
    /// As "X[e]" → count, e.g. "P[t]", for the JSON results.
    pub fn to_map(&self) -> BTreeMap<String, u64> {
        self.counts
            .iter()
            .map(|(&(s, e), &n)| {
                let e = match e {
                    Event::F => 'f',
                    Event::B => 'b',
                    Event::T => 't',
                    Event::I => 'i',
                };
                (format!("{s:?}[{e}]"), n)
            })
            .collect()
    }
}

/// The Variant-1 idletime scheduler of one resource.
#[derive(Debug, Clone)]
pub struct IdletimeScheduler {
    /// Preemption interval; `None` is p = ∞ (background never runs).
    p_ns: Option<Nanos>,
    start: IntervalStart,
    preemptable: bool,
    state: State,
    /// The class of the request in service, if any.
    active: Option<Class>,
    /// The preemption interval runs while `now < interval_end`.
    interval_end: Nanos,
    counters: Counters,
    last_seen: Option<(State, Event)>,
}

impl IdletimeScheduler {
    /// A scheduler with preemption interval `p_ns` (None = ∞). p = 0 is a
    /// plain two-class priority queue.
    pub fn new(p_ns: Option<Nanos>, start: IntervalStart, preemptable: bool) -> Self {
        IdletimeScheduler {
            p_ns,
            start,
            preemptable,
            state: State::I,
            active: None,
            interval_end: 0,
            counters: Counters::default(),
            last_seen: None,
        }
    }

    pub fn state(&self) -> State {
        self.state
    }
    pub fn counters(&self) -> &Counters {
        &self.counters
    }
    pub fn busy(&self) -> bool {
        self.active.is_some()
    }
    pub fn interval_running(&self, now: Nanos) -> bool {
        now < self.interval_end
    }

    fn restart_interval(&mut self, now: Nanos) {
        self.interval_end = match self.p_ns {
            None => Nanos::MAX,
            Some(p) => now.saturating_add(p),
        };
    }

    /// A request of `class` arrived. For a preemptable resource a
    /// foreground arrival while background work is active preempts it.
    /// Otherwise the owner simply calls [`Self::dispatch`].
    pub fn on_arrival(&mut self, now: Nanos, class: Class) -> Decision {
        if self.preemptable && class == Class::Foreground && self.active == Some(Class::Background) {
            self.counters.bump(State::B, Event::F);
            self.last_seen = None;
            self.state = State::F;
            self.active = Some(Class::Foreground);
            self.restart_interval(now);
            return Decision::PreemptAndStartForeground;
        }
        Decision::Nothing
    }

    /// The active request finished.
    pub fn on_completion(&mut self, now: Nanos) {
        if self.active == Some(Class::Foreground) && self.start == IntervalStart::Completion {
            self.restart_interval(now);
        }
        self.active = None;
    }

    /// Decides what the free resource does next, given the class at the head
    /// of the (priority-ordered) queue: `Some(Foreground)` if any foreground
    /// request waits, else `Some(Background)` if a background one does.
    pub fn dispatch(&mut self, now: Nanos, head: Option<Class>) -> Decision {
        if self.active.is_some() {
            return Decision::Nothing;
        }
        // A few steps at most: F →(b) P →(t) I →(b) B when the interval
        // already ended during foreground service (p < service time).
        loop {
            let event = match head {
                Some(Class::Foreground) => Event::F,
                _ if self.state == State::P && !self.interval_running(now) => Event::T,
                Some(Class::Background) => Event::B,
                None => Event::I,
            };
            if self.last_seen != Some((self.state, event)) {
                self.counters.bump(self.state, event);
                self.last_seen = Some((self.state, event));
            }
            let next = match (self.state, event) {
                (_, Event::F) => State::F,
                (State::I, Event::B) | (State::B, Event::B) => State::B,
                (State::I, Event::I) | (State::B, Event::I) => State::I,
                (State::F, Event::B) | (State::F, Event::I) => State::P,
                (State::P, Event::B) | (State::P, Event::I) => State::P,
                (State::P, Event::T) => State::I,
                (_, Event::T) => unreachable!("t is only seen in P"),
            };
            let from = self.state;
            self.state = next;
            match next {
                State::F => {
                    self.last_seen = None;
                    self.active = Some(Class::Foreground);
                    if self.start == IntervalStart::Dispatch {
                        self.restart_interval(now);
                    }
                    return Decision::StartForeground;
                }
                State::B => {
                    self.last_seen = None;
                    self.active = Some(Class::Background);
                    return Decision::StartBackground;
                }
                State::I if event == Event::T => continue, // re-examine the head in I
                State::I => return Decision::Nothing,
                State::P => {
                    if self.interval_running(now) {
                        return match (self.interval_end, head) {
                            (Nanos::MAX, _) | (_, None) => Decision::Nothing,
                            (end, _) => Decision::WaitUntil(end),
                        };
                    }
                    if from == State::P {
                        unreachable!("P with an expired interval sees t first");
                    }
                    continue; // the interval already ended: t at once
                }
            }
        }
    }
}

/// An observation of a gated resource: a foreground request went to the
/// device or completed, or the preemption interval's wake-up came.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Observation {
    ForegroundIssue,
    ForegroundComplete,
    /// The wake-up asked by [`Gate::wake_at`] (observed at its own time,
    /// however late the caller's timer fired).
    IntervalEnd,
}

/// What one observation made the [`Gate`] do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct GateStep {
    pub at_ns: Nanos,
    pub observed: Observation,
    /// Whether background work may run after this step.
    pub open: bool,
    pub state: State,
    /// The wake-up pending after this step, if any.
    pub wake_at: Option<Nanos>,
}

/// The idletime scheduler in front of a device that serves many requests
/// at once (a disk with a queue, a NIC), where background work cannot be
/// held request by request but can be held back as a whole: the gate
/// (a frozen cgroup, a throttle, a plugged queue) is open while the
/// scheduler is in B and closed otherwise. The foreground's requests are
/// seen as one queue served in order (F while any is in the device);
/// background work is greedy (it waits whenever its processes live) and
/// preemptable at request boundaries: a foreground arrival closes the gate
/// at once (B --f--> F), and the background requests already in the device
/// finish (the gate's reaction, measured live).
///
/// The live controller (`irqlab control idletime`) and the simulator's
/// gated device (`irqlab-sim`'s `idletime::gated`) drive this same code.
#[derive(Debug, Clone)]
pub struct Gate {
    sched: IdletimeScheduler,
    fg_in_device: u32,
    background_waits: bool,
    wake_at: Option<Nanos>,
    open: bool,
}

impl Gate {
    /// A closed gate with preemption interval `p_ns` (None = ∞).
    pub fn new(p_ns: Option<Nanos>, start: IntervalStart) -> Self {
        Gate { sched: IdletimeScheduler::new(p_ns, start, true), fg_in_device: 0, background_waits: true, wake_at: None, open: false }
    }

    pub fn state(&self) -> State {
        self.sched.state()
    }
    pub fn counters(&self) -> &Counters {
        self.sched.counters()
    }
    /// When the caller must observe [`Observation::IntervalEnd`].
    pub fn wake_at(&self) -> Option<Nanos> {
        self.wake_at
    }

    /// Whether background work waits (its processes live); it is asked for
    /// at the next decision.
    pub fn set_background_waits(&mut self, waits: bool) {
        self.background_waits = waits;
    }

    /// The first decision: with nothing in the device, I --b--> B opens the
    /// gate (or I --i--> I keeps it closed when no background waits).
    pub fn begin(&mut self, now: Nanos) -> GateStep {
        let head = self.background_waits.then_some(Class::Background);
        self.decide(now, head);
        self.step(now, Observation::IntervalEnd)
    }

    fn head_when_free(&self) -> Option<Class> {
        if self.fg_in_device > 0 {
            Some(Class::Foreground)
        } else if self.background_waits {
            Some(Class::Background)
        } else {
            None
        }
    }

    fn decide(&mut self, now: Nanos, head: Option<Class>) {
        match self.sched.dispatch(now, head) {
            Decision::StartBackground => self.open = true,
            Decision::StartForeground | Decision::PreemptAndStartForeground => self.open = false,
            Decision::WaitUntil(t) => {
                self.open = false;
                if self.wake_at.is_none_or(|w| w < t) {
                    self.wake_at = Some(t);
                }
            }
            Decision::Nothing => {}
        }
    }

    fn step(&self, at_ns: Nanos, observed: Observation) -> GateStep {
        GateStep { at_ns, observed, open: self.open, state: self.sched.state(), wake_at: self.wake_at }
    }

    /// Feeds one observation at `now` (observations in time order; an
    /// interval end at the time [`Gate::wake_at`] named).
    pub fn observe(&mut self, now: Nanos, observed: Observation) -> GateStep {
        match observed {
            Observation::ForegroundIssue => {
                self.fg_in_device += 1;
                if self.fg_in_device == 1 {
                    if self.sched.on_arrival(now, Class::Foreground) == Decision::PreemptAndStartForeground {
                        self.open = false;
                    } else {
                        self.decide(now, Some(Class::Foreground));
                    }
                }
            }
            Observation::ForegroundComplete => {
                // A request issued before the watch began is not ours.
                if self.fg_in_device > 0 {
                    self.fg_in_device -= 1;
                    self.sched.on_completion(now);
                    let head = self.head_when_free();
                    self.decide(now, head);
                }
            }
            Observation::IntervalEnd => {
                self.wake_at = None;
                if !self.sched.busy() {
                    let head = self.head_when_free();
                    self.decide(now, head);
                }
            }
        }
        self.step(now, observed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use Class::{Background as Bg, Foreground as Fg};

    fn sched(p: Nanos) -> IdletimeScheduler {
        IdletimeScheduler::new(Some(p), IntervalStart::Dispatch, false)
    }

    #[test]
    fn idle_transitions() {
        let mut s = sched(10);
        assert_eq!(s.dispatch(0, None), Decision::Nothing); // I --i--> I
        assert_eq!(s.state(), State::I);
        assert_eq!(s.dispatch(0, Some(Bg)), Decision::StartBackground); // I --b--> B
        assert_eq!(s.state(), State::B);
        assert_eq!(s.counters().get(State::I, Event::I), 1);
        assert_eq!(s.counters().get(State::I, Event::B), 1);
        let mut s = sched(10);
        assert_eq!(s.dispatch(0, Some(Fg)), Decision::StartForeground); // I --f--> F
        assert_eq!(s.state(), State::F);
        assert_eq!(s.counters().get(State::I, Event::F), 1);
    }

    #[test]
    fn foreground_transitions() {
        // F --f--> F restarts the interval at each dispatch.
        let mut s = sched(10);
        s.dispatch(0, Some(Fg));
        s.on_completion(3);
        assert_eq!(s.dispatch(3, Some(Fg)), Decision::StartForeground);
        assert_eq!(s.state(), State::F);
        assert!(s.interval_running(12)); // restarted at 3, ends at 13
                                         // F --b--> P without consuming b; the interval holds B back.
        s.on_completion(5);
        assert_eq!(s.dispatch(5, Some(Bg)), Decision::WaitUntil(13));
        assert_eq!(s.state(), State::P);
        // F --i--> P
        let mut s = sched(10);
        s.dispatch(0, Some(Fg));
        s.on_completion(2);
        assert_eq!(s.dispatch(2, None), Decision::Nothing); // nothing waits: no wake-up needed
        assert_eq!(s.state(), State::P);
        assert_eq!(s.counters().get(State::F, Event::I), 1);
    }

    #[test]
    fn background_transitions() {
        let mut s = sched(10);
        s.dispatch(0, Some(Bg));
        s.on_completion(4);
        assert_eq!(s.dispatch(4, Some(Bg)), Decision::StartBackground); // B --b--> B, no interval
        s.on_completion(8);
        assert_eq!(s.dispatch(8, None), Decision::Nothing); // B --i--> I
        assert_eq!(s.state(), State::I);
        assert_eq!(s.counters().get(State::B, Event::B), 1);
        assert_eq!(s.counters().get(State::B, Event::I), 1);
        let mut s = sched(10);
        s.dispatch(0, Some(Bg));
        s.on_completion(4);
        assert_eq!(s.dispatch(4, Some(Fg)), Decision::StartForeground); // B --f--> F
        assert_eq!(s.counters().get(State::B, Event::F), 1);
    }

    #[test]
    fn interval_transitions() {
        let mut s = sched(10);
        s.dispatch(0, Some(Fg));
        s.on_completion(2);
        assert_eq!(s.dispatch(2, Some(Bg)), Decision::WaitUntil(10));
        // P --b--> P and P --i--> P while the interval runs.
        assert_eq!(s.dispatch(5, Some(Bg)), Decision::WaitUntil(10));
        assert_eq!(s.dispatch(5, Some(Bg)), Decision::WaitUntil(10)); // asked again: counted once
        assert_eq!(s.counters().get(State::P, Event::B), 1);
        assert_eq!(s.dispatch(6, None), Decision::Nothing);
        assert_eq!(s.state(), State::P);
        // P --t--> I, then I --b--> B.
        assert_eq!(s.dispatch(10, Some(Bg)), Decision::StartBackground);
        assert_eq!(s.counters().get(State::P, Event::T), 1);
        assert_eq!(s.counters().get(State::I, Event::B), 1);
        // P --f--> F
        let mut s = sched(10);
        s.dispatch(0, Some(Fg));
        s.on_completion(2);
        s.dispatch(2, None);
        assert_eq!(s.dispatch(4, Some(Fg)), Decision::StartForeground);
        assert_eq!(s.counters().get(State::P, Event::F), 1);
        // P --t--> I --i--> I
        let mut s = sched(10);
        s.dispatch(0, Some(Fg));
        s.on_completion(2);
        s.dispatch(2, None);
        assert_eq!(s.dispatch(10, None), Decision::Nothing);
        assert_eq!(s.state(), State::I);
        assert_eq!(s.counters().to_map()["P[t]"], 1);
    }

    #[test]
    fn interval_shorter_than_service_degenerates_to_priority_queue() {
        // p = 1 expires during a foreground service of 5: F --b--> P --t--> I --b--> B at once.
        let mut s = sched(1);
        s.dispatch(0, Some(Fg));
        s.on_completion(5);
        assert_eq!(s.dispatch(5, Some(Bg)), Decision::StartBackground);
        for (st, ev) in [(State::F, Event::B), (State::P, Event::T), (State::I, Event::B)] {
            assert_eq!(s.counters().get(st, ev), 1, "{st:?}[{ev:?}]");
        }
    }

    #[test]
    fn interval_at_completion_option() {
        let mut s = IdletimeScheduler::new(Some(10), IntervalStart::Completion, false);
        s.dispatch(0, Some(Fg));
        s.on_completion(7);
        assert_eq!(s.dispatch(7, Some(Bg)), Decision::WaitUntil(17));
    }

    #[test]
    fn infinite_interval_never_runs_background() {
        let mut s = IdletimeScheduler::new(None, IntervalStart::Dispatch, false);
        s.dispatch(0, Some(Fg));
        s.on_completion(1);
        assert_eq!(s.dispatch(1, Some(Bg)), Decision::Nothing);
        assert_eq!(s.dispatch(1_000_000_000, Some(Bg)), Decision::Nothing);
        assert_eq!(s.state(), State::P);
    }

    #[test]
    fn preemptable_resource_requeues_active_background() {
        let mut s = IdletimeScheduler::new(Some(10), IntervalStart::Dispatch, true);
        s.dispatch(0, Some(Bg));
        assert_eq!(s.on_arrival(3, Fg), Decision::PreemptAndStartForeground);
        assert_eq!(s.state(), State::F);
        assert!(s.interval_running(12));
        // Non-preemptable: the foreground request waits for completion.
        let mut s = sched(10);
        s.dispatch(0, Some(Bg));
        assert_eq!(s.on_arrival(3, Fg), Decision::Nothing);
        assert_eq!(s.dispatch(3, Some(Fg)), Decision::Nothing); // busy
        assert_eq!(s.state(), State::B);
    }

    #[test]
    fn gate_opens_after_the_interval_and_closes_at_once_on_foreground() {
        let mut g = Gate::new(Some(10), IntervalStart::Dispatch);
        assert!(g.begin(0).open); // I --b--> B
        let s = g.observe(5, Observation::ForegroundIssue); // B --f--> F (preempt)
        assert!(!s.open);
        assert_eq!(s.state, State::F);
        assert!(!g.observe(6, Observation::ForegroundIssue).open); // queued behind
        let s = g.observe(8, Observation::ForegroundComplete); // F --f--> F: the next one, interval from 8
        assert_eq!((s.open, s.state), (false, State::F));
        let s = g.observe(9, Observation::ForegroundComplete); // F --b--> P until 18
        assert_eq!((s.open, s.state, s.wake_at), (false, State::P, Some(18)));
        let s = g.observe(18, Observation::IntervalEnd); // P --t--> I --b--> B
        assert_eq!((s.open, s.state, s.wake_at), (true, State::B, None));
        assert_eq!(g.counters().get(State::B, Event::F), 1);
        assert_eq!(g.counters().get(State::P, Event::T), 1);
    }

    #[test]
    fn gate_interval_end_after_a_new_foreground_request_changes_nothing() {
        let mut g = Gate::new(Some(10), IntervalStart::Dispatch);
        g.begin(0);
        g.observe(1, Observation::ForegroundIssue);
        g.observe(2, Observation::ForegroundComplete); // P until 11
        g.observe(5, Observation::ForegroundIssue); // P --f--> F, interval until 15
        let s = g.observe(11, Observation::IntervalEnd); // busy: stays closed
        assert_eq!((s.open, s.state, s.wake_at), (false, State::F, None));
        let s = g.observe(12, Observation::ForegroundComplete); // P, wake at 15
        assert_eq!((s.open, s.wake_at), (false, Some(15)));
        // A completion of a request issued before the watch: ignored.
        let mut g = Gate::new(Some(10), IntervalStart::Dispatch);
        g.begin(0);
        assert!(g.observe(3, Observation::ForegroundComplete).open);
    }

    #[test]
    fn gate_without_background_stays_closed() {
        let mut g = Gate::new(Some(0), IntervalStart::Dispatch);
        g.set_background_waits(false);
        assert!(!g.begin(0).open);
        g.observe(1, Observation::ForegroundIssue);
        assert!(!g.observe(2, Observation::ForegroundComplete).open);
        // p = 0: plain priority, the gate opens as soon as the foreground is out.
        g.set_background_waits(true);
        g.observe(3, Observation::ForegroundIssue);
        assert!(g.observe(4, Observation::ForegroundComplete).open);
    }
}
