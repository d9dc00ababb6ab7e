//! Cross-check with the analysis crate: for fixed-priority periodic task
//! sets without interrupts or overheads, the simulated worst-case response
//! time under synchronous release equals the exact response-time bound of
//! `irqlab_analysis::fixed_priority::response_time` (eq. 4 demand).

mod common;

use irqlab_analysis::demand::{periodic_demand, DemandBound};
use irqlab_analysis::fixed_priority::{response_time, Horizon};
use proptest::prelude::*;

/// Periods whose least common multiple is 120 ms, so a simulated span of
/// two hyperperiods covers every busy period of a set with U < 1.
const PERIODS_MS: [u64; 10] = [4, 5, 6, 8, 10, 12, 15, 20, 24, 30];

fn task_set() -> impl Strategy<Value = Vec<(u64, u64)>> {
    prop::collection::vec((0..PERIODS_MS.len(), 1u64..1000), 2..6).prop_map(|v| {
        // Scale execution times so the total utilisation is at most 0.95.
        let raw: Vec<(u64, f64)> = v.iter().map(|&(i, w)| (PERIODS_MS[i] * 1_000_000, w as f64)).collect();
        let weight: f64 = raw.iter().map(|&(_, w)| w).sum();
        let target = 0.95 * (v.len() as f64 / 5.0).clamp(0.5, 1.0);
        raw.iter().map(|&(p, w)| (p, ((target * w / weight) * p as f64).max(1.0) as u64)).collect()
    })
}

fn scenario(set: &[(u64, u64)]) -> String {
    // Zero overheads: no IRQ, tick or switch cost; tasks in priority order
    // (first = highest), deadline = period.
    let mut s = common::machine(100, "linux-2.6", "");
    for (i, (p, e)) in set.iter().enumerate() {
        s.push_str(&format!(
            "[[task]]\nname = \"t{i}\"\nkind = \"periodic\"\npolicy = \"fifo\"\npriority = {}\nperiod = \"{p}ns\"\nexec = \"{e}ns\"\n",
            90 - i
        ));
    }
    s.push_str("[run]\nduration = \"250ms\"\n");
    s
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, .. ProptestConfig::default() })]

    #[test]
    fn simulated_wcrt_equals_rta(set in task_set()) {
        let r = common::run(&scenario(&set));
        for k in 0..set.len() {
            let (p, e) = set[k];
            let hp = &set[..k];
            let bound = response_time(
                p,
                e,
                |t| hp.iter().map(|&(pi, ei)| periodic_demand(DemandBound::Traditional, pi, ei, t)).sum(),
                &Horizon::for_task(p, p),
            )
            .expect("U < 1: bounded");
            let t = common::task(&r, &format!("t{k}"));
            let max = t.response.as_ref().expect("jobs ran").max_ns;
            prop_assert_eq!(max, bound, "task {} of {:?}", k, set);
        }
    }
}

/// The textbook set of Burns & Wellings (§13): (T, C) = (7, 3), (12, 3),
/// (20, 5) ms in priority order has response times 3, 6 and 20 ms.
#[test]
fn textbook_set_response_times() {
    let set = [(7_000_000, 3_000_000), (12_000_000, 3_000_000), (20_000_000, 5_000_000)];
    let r = common::run(&scenario(&set));
    let max: Vec<u64> = (0..3).map(|k| common::task(&r, &format!("t{k}")).response.as_ref().unwrap().max_ns).collect();
    assert_eq!(max, [3_000_000, 6_000_000, 20_000_000]);
}
