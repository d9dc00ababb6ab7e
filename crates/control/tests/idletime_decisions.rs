//! One decision code, two worlds, for the idletime gate (issue 21): the
//! foreground's request issues and completions go through the live
//! controller's ordering (`irqlab_control::idletime::TimeOrdered`, as
//! `control idletime` drives it: request events in the kernel's time
//! order, its timer firing late) and through the simulator's gated device
//! (`irqlab_sim::idletime::gated::replay`: the same observations as events
//! of the simulator's queue, the interval's end an event at its exact
//! time). Step by step, both must take the same transitions, open and
//! close the gate at the same times and ask for the same wake-ups.
//!
//! Sequences: a recorded live run (`tests/data/idletime_live_trace.json`,
//! `irqlab control idletime --record` on this project's VM) and random ones.

use irqlab_control::idletime::{Recording, TimeOrdered};
use irqlab_policy::idletime::{GateStep, IntervalStart, Observation};
use irqlab_sim::idletime::gated;
use proptest::prelude::*;

/// The simulator's steps for a recording's observations, cut where the
/// live run ended (its last step): the simulator goes on to the interval
/// end still pending then.
fn simulated(r: &Recording) -> Vec<GateStep> {
    let mut steps = gated::replay(Some(r.interval_ns), IntervalStart::Dispatch, r.begin_ns, &r.observations);
    let end = r.steps.last().map_or(0, |s| s.at_ns);
    let tail: Vec<GateStep> = steps.split_off(r.steps.len().min(steps.len()));
    for s in &tail {
        assert!(s.observed == Observation::IntervalEnd && s.at_ns > end, "the simulator took a step the live run did not: {s:?}");
    }
    steps
}

#[test]
fn a_recorded_live_run_replays_to_the_same_decisions_in_the_simulator() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/idletime_live_trace.json");
    let r: Recording = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    assert!(r.observations.len() > 500, "a real run, not a stub: {} observations", r.observations.len());
    let sim = simulated(&r);
    assert_eq!(sim.len(), r.steps.len(), "step count");
    for (i, (live, sim)) in r.steps.iter().zip(&sim).enumerate() {
        assert_eq!(live, sim, "step {i}");
    }
    // The trace exercises every transition the gate has on a disk: the
    // interval running out (P --t--> I --b--> B, open), a foreground
    // request inside it (P --f--> F), and the gate closing on a foreground
    // arrival while open (B --f--> F).
    let opened_at_interval_end = r.steps.iter().filter(|s| s.observed == Observation::IntervalEnd && s.open).count();
    let closed_on_arrival = r.steps.windows(2).filter(|w| w[0].open && !w[1].open && w[1].observed == Observation::ForegroundIssue).count();
    let restarted_in_interval =
        r.steps.windows(2).filter(|w| w[0].wake_at.is_some() && w[1].observed == Observation::ForegroundIssue && !w[1].open).count();
    assert!(
        opened_at_interval_end > 10 && closed_on_arrival > 10 && restarted_in_interval > 10,
        "opened at interval end {opened_at_interval_end}, closed on arrival {closed_on_arrival}, restarted {restarted_in_interval}"
    );
}

/// What happens to the live controller: request events (time, issue or
/// completion), and its timer firing at some wall time after each event.
#[derive(Debug, Clone)]
struct Live {
    events: Vec<(u64, Observation)>,
    timer_lateness: Vec<Option<u64>>,
}

fn live_sequence() -> impl Strategy<Value = Live> {
    // A foreground with up to 3 requests in the device at once, gaps from
    // 0 to 6 ms, service times 50 us to 3 ms, p drawn below.
    prop::collection::vec((0u64..6_000_000, 50_000u64..3_000_000, 1usize..4, prop::option::of(0u64..4_000_000)), 1..60).prop_map(|bursts| {
        let (mut t, mut events, mut timer_lateness) = (1_000u64, Vec::new(), Vec::new());
        for (gap, service, n, late) in bursts {
            t += gap;
            for k in 0..n as u64 {
                events.push((t + k, Observation::ForegroundIssue));
            }
            for k in 0..n as u64 {
                events.push((t + service + k * service, Observation::ForegroundComplete));
            }
            t += n as u64 * service + 1;
            timer_lateness.push(late);
        }
        events.sort_by_key(|e| e.0);
        Live { events, timer_lateness }
    })
}

/// The live controller's steps: each event as it comes, and after it its
/// timer firing (late) when a wake-up is due. A timer that fires after the
/// next event's time stands for an event that reached user space late.
fn drive_live(p: u64, live: &Live) -> Vec<GateStep> {
    let mut ordered = TimeOrdered::new(p);
    let mut steps = vec![ordered.begin(0)];
    for (i, &(t, observed)) in live.events.iter().enumerate() {
        ordered.request(t, observed, &mut steps);
        if let (Some(w), Some(late)) = (ordered.gate().wake_at(), live.timer_lateness[i % live.timer_lateness.len()]) {
            ordered.timer(w + late, &mut steps);
        }
    }
    ordered.timer(u64::MAX - 1, &mut steps);
    steps
}

/// What `--record` keeps of the steps: the requests, at the times taken.
fn observations(steps: &[GateStep]) -> Vec<(u64, Observation)> {
    steps.iter().filter(|s| s.observed != Observation::IntervalEnd).map(|s| (s.at_ns, s.observed)).collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn live_ordering_and_the_simulators_gated_device_decide_alike(live in live_sequence(), p in prop_oneof![Just(0u64), 100_000u64..8_000_000]) {
        let got = drive_live(p, &live);
        let sim = gated::replay(Some(p), IntervalStart::Dispatch, 0, &observations(&got));
        prop_assert_eq!(&got, &sim);
        // With every event in user space before its timer would fire, the
        // times taken are the kernel's: the simulator on the events themselves agrees.
        let prompt = Live { timer_lateness: vec![None], ..live.clone() };
        let got = drive_live(p, &prompt);
        prop_assert_eq!(got, gated::replay(Some(p), IntervalStart::Dispatch, 0, &prompt.events));
    }
}
