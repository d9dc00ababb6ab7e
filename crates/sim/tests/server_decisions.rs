//! One recorded observation sequence of a driver thread fed to the
//! sporadic server's rules directly (`irqlab_policy`, what a live
//! controller runs) and through the simulator's adapter: the same
//! decisions, in the same places, with the same timers. The sequence is a
//! NAPI thread under a flood: bursts of work, blocks, a budget overrun,
//! replenishments.

use irqlab_policy::server::{Accounting, Decision, SporadicServer};
use irqlab_sim::server::{Server, ServerAction, Sporadic};
use irqlab_sim::task::Policy;

const MS: u64 = 1_000_000;

#[derive(Debug, Clone, Copy)]
enum Observation {
    Wakeup(u64),
    Ran(u64, u64),
    Block(u64),
    Exhausted(u64),
    Timer(u64),
}

fn recorded() -> Vec<Observation> {
    use Observation::*;
    let mut seq = Vec::new();
    let mut t = 0;
    for burst in [300_000, 250_000, 700_000, 200_000, 900_000, 100_000, 400_000] {
        seq.push(Wakeup(t));
        seq.push(Ran(t, t + burst));
        seq.push(Block(t + burst));
        t += 2 * MS + burst;
    }
    // A long burst that runs past the budget.
    seq.push(Wakeup(t));
    seq.push(Ran(t, t + MS));
    seq.push(Exhausted(t + MS));
    for k in 1..=4 {
        seq.push(Timer(t + k * 10 * MS));
    }
    seq
}

fn as_decision(a: ServerAction, low: Option<Policy>, high: Policy) -> Decision {
    match a {
        ServerAction::None => Decision::Keep,
        ServerAction::SetPolicy(p) if Some(p) == low => Decision::ToLow,
        ServerAction::SetPolicy(p) if p == high => Decision::ToHigh,
        ServerAction::Throttle => Decision::ToLow,
        ServerAction::Unthrottle => Decision::ToHigh,
        other => panic!("unexpected action {other:?}"),
    }
}

#[test]
fn the_simulator_decides_what_the_shared_rules_decide() {
    for (accounting, low) in
        [(Accounting::Exact { granularity: 1 }, Some(Policy::Fifo(1))), (Accounting::Exact { granularity: 100_000 }, None)]
    {
        let (high, budget, period) = (Policy::Fifo(50), MS, 10 * MS);
        let mut rules = SporadicServer::new(budget, period, 2, accounting);
        let mut sim = Sporadic::new(0, high, low, budget, period, 2, accounting);
        let (mut rules_timers, mut sim_timers) = (Vec::new(), Vec::new());
        let mut decisions = 0;
        for obs in recorded() {
            let (a, b) = match obs {
                Observation::Wakeup(t) => (rules.on_wakeup(t), as_decision(sim.on_wakeup(t, &mut sim_timers), low, high)),
                Observation::Ran(s, e) => {
                    rules.consume(s, e);
                    sim.consume(s, e);
                    assert_eq!(rules.budget_left(e), sim.budget_left(e), "{obs:?}");
                    continue;
                }
                Observation::Block(t) => (rules.on_block(t, &mut rules_timers), as_decision(sim.on_block(t, &mut sim_timers), low, high)),
                Observation::Exhausted(t) => {
                    (rules.exhausted(t, &mut rules_timers), as_decision(sim.exhausted(t, &mut sim_timers), low, high))
                }
                Observation::Timer(t) => (rules.timer(t), as_decision(sim.timer(t, 0, &mut sim_timers), low, high)),
            };
            assert_eq!(a, b, "{obs:?} with {accounting:?}");
            decisions += (a != Decision::Keep) as usize;
            assert_eq!(rules_timers, sim_timers, "{obs:?}");
        }
        // The sequence exercises both directions.
        assert!(decisions >= 2, "only {decisions} decisions");
        assert_eq!(rules.exhaustions, sim.rules.exhaustions);
        assert_eq!(rules.replenishments, sim.rules.replenishments);
    }
}
