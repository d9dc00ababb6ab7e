//! One decision code, two worlds: a recorded sequence of a driver thread's
//! scheduling events (a NAPI thread under a flood: wake-ups, runs,
//! preemptions, blocks, a burst past the budget) goes through the
//! simulator's sporadic-server adapter (`irqlab_sim::server::Sporadic`,
//! driven as the simulated kernel drives it) and through the live adapter
//! (`irqlab_control::sporadic::LiveServer`, driven as the live
//! controller drives it, with a fake actuator). Both must move the thread
//! between its levels at the same instants.

use irqlab_control::monitor::thread::Kind;
use irqlab_control::sporadic::{Actuator, LiveServer};
use irqlab_host::error::Result;
use irqlab_policy::server::{Accounting, Decision};
use irqlab_sim::server::{Server, ServerAction, Sporadic};
use irqlab_sim::task::Policy;

const US: u64 = 1_000;
const MS: u64 = 1_000_000;
const HIGH: Policy = Policy::Fifo(90);
const LOW: Policy = Policy::Fifo(1);

/// The thread's events as the monitor reports them.
fn recorded() -> Vec<(u64, Kind)> {
    use Kind::*;
    let mut seq = Vec::new();
    let mut t = 0;
    // Short bursts, some preempted, that block in time.
    for (k, burst) in [300 * US, 250 * US, 120 * US, 200 * US, 90 * US].into_iter().enumerate() {
        seq.extend([(t, Wakeup), (t + 5 * US, In)]);
        if k % 2 == 1 {
            seq.extend([(t + 50 * US, Preempted), (t + 80 * US, In)]);
            t += 30 * US;
        }
        seq.push((t + 5 * US + burst, Blocked));
        t += 3 * MS + burst;
    }
    // A flood: runnable from here on, preempted now and then; it runs past
    // its budget again and again, and comes back at each replenishment.
    seq.extend([(t, Wakeup), (t + 5 * US, In)]);
    for k in 1..=40 {
        let at = t + k * MS;
        seq.extend([(at, Preempted), (at + 20 * US, In)]);
    }
    seq.push((t + 41 * MS, Blocked));
    seq
}

/// Records the level changes the live controller makes.
#[derive(Default)]
struct FakeActuator {
    high: bool,
    changes: Vec<(u64, bool)>,
    now: u64,
}

impl Actuator for FakeActuator {
    fn set_level(&mut self, high: bool) -> Result<()> {
        self.high = high;
        self.changes.push((self.now, high));
        Ok(())
    }
}

impl FakeActuator {
    /// What `Served::follow` does: act only on a change.
    fn follow(&mut self, now: u64, d: Decision) {
        self.now = now;
        match d {
            Decision::ToHigh if !self.high => self.set_level(true).unwrap(),
            Decision::ToLow if self.high => self.set_level(false).unwrap(),
            _ => {}
        }
    }
}

/// The live controller with a perfect clock: it acts exactly at
/// `next_action_at`, and sees each event as it happens.
fn live_changes(seq: &[(u64, Kind)], end: u64) -> Vec<(u64, bool)> {
    let mut server = LiveServer::new(MS, 10 * MS, 2, 0);
    let mut act = FakeActuator { high: true, ..FakeActuator::default() };
    let run_until = |server: &mut LiveServer, act: &mut FakeActuator, limit: u64| {
        while let Some(t) = server.next_action_at().filter(|&t| t <= limit) {
            let d = server.advance(t);
            act.follow(t, d);
        }
    };
    for &(ts, kind) in seq {
        run_until(&mut server, &mut act, ts);
        let d = server.observe(kind, ts);
        act.follow(ts, d);
    }
    run_until(&mut server, &mut act, end);
    act.changes
}

/// The simulated kernel's side: it charges the running task when it stops
/// or when a server event fires, arms the exhaustion at the budget left
/// when the task runs, and fires the server's timers.
struct SimKernel {
    server: Sporadic,
    timers: Vec<(u64, u64)>,
    running: Option<u64>,
    high: bool,
    changes: Vec<(u64, bool)>,
}

impl SimKernel {
    fn apply(&mut self, a: ServerAction, t: u64) {
        let to_high = match a {
            ServerAction::SetPolicy(p) if p == HIGH => true,
            ServerAction::SetPolicy(p) if p == LOW => false,
            ServerAction::None => return,
            other => panic!("unexpected {other:?}"),
        };
        if to_high != self.high {
            self.high = to_high;
            self.changes.push((t, to_high));
        }
    }

    fn run_until(&mut self, limit: u64) {
        loop {
            let exhaustion = self.running.and_then(|since| self.server.budget_left(since).map(|left| since + left));
            let timer = self.timers.iter().map(|&(t, _)| t).min();
            let Some(t) = [exhaustion, timer].into_iter().flatten().min().filter(|&t| t <= limit) else { break };
            if let Some(since) = self.running {
                self.server.consume(since, t);
                self.running = Some(t);
            }
            if timer == Some(t) {
                let due: Vec<_> = self.timers.iter().copied().filter(|&(at, _)| at <= t).collect();
                self.timers.retain(|&(at, _)| at > t);
                for (_, token) in due {
                    let a = self.server.timer(t, token, &mut self.timers);
                    self.apply(a, t);
                }
            }
            if self.running.is_some() && self.server.budget_left(t) == Some(0) {
                let a = self.server.exhausted(t, &mut self.timers);
                self.apply(a, t);
            }
        }
    }

    fn event(&mut self, ts: u64, kind: Kind) {
        self.run_until(ts);
        match kind {
            Kind::Wakeup => {
                let a = self.server.on_wakeup(ts, &mut self.timers);
                self.apply(a, ts);
            }
            Kind::In => self.running = Some(ts),
            Kind::Budget | Kind::Decision => unreachable!("the sporadic server sets no budget signal and no waiter filter"),
            Kind::Preempted | Kind::Blocked => {
                if let Some(since) = self.running.take() {
                    self.server.consume(since, ts);
                }
                if kind == Kind::Blocked {
                    let a = self.server.on_block(ts, &mut self.timers);
                    self.apply(a, ts);
                }
            }
        }
    }
}

fn sim_changes(seq: &[(u64, Kind)], end: u64) -> Vec<(u64, bool)> {
    let server = Sporadic::new(0, HIGH, Some(LOW), MS, 10 * MS, 2, Accounting::Exact { granularity: 1 });
    let mut kernel = SimKernel { server, timers: Vec::new(), running: None, high: true, changes: Vec::new() };
    for &(ts, kind) in seq {
        kernel.event(ts, kind);
    }
    kernel.run_until(end);
    kernel.changes
}

#[test]
fn the_live_controller_and_the_simulator_change_levels_at_the_same_instants() {
    let seq = recorded();
    let end = seq.last().unwrap().0 + 30 * MS;
    let live = live_changes(&seq, end);
    let sim = sim_changes(&seq, end);
    assert_eq!(live, sim);
    // The sequence exercises both directions, several times.
    let drops = live.iter().filter(|(_, high)| !high).count();
    let raises = live.iter().filter(|(_, high)| *high).count();
    assert!(drops >= 3 && raises >= 3, "{live:?}");
}
