//! One decision code, two worlds: a sequence of observations (receivers
//! blocking and waking with their scheduling, bottom halves done in
//! softirq context with the process they served, ticks with the process
//! charged) goes through the live controller's pure adapter
//! (`irqlab_control::process_aware::Adapter`, as `control
//! process-aware` drives it) and through the simulator's `process-aware`
//! policy (`irqlab_sim::policy::process_aware::ProcessAware`, driven as the
//! simulated kernel drives it: waiters on sockets, jobs done in softirq
//! context, `on_tick` with the current task). Step by step, both must
//! predict the same bottom-half priority and move the same ticks, and end
//! with the same charges and unaccounted counts.
//!
//! Two sequences: a recorded live trace
//! (`tests/data/process_aware_live_trace.json`, written by `irqlab control
//! process-aware --record` on the testbed) and a synthetic one.

use irqlab_control::process_aware::{Adapter, Observation, Outcome};
use irqlab_host::journal::sched::SchedAttr;
use irqlab_sim::kernel::{MachineConfig, Sim};
use irqlab_sim::net::Socket;
use irqlab_sim::policy::process_aware::ProcessAware;
use irqlab_sim::sched::FairKind;
use irqlab_sim::softirq::{self, BottomHalfPolicy, Job, JobWhat, Loc};
use irqlab_sim::task::{Policy, Task, TaskKind};
use std::collections::BTreeMap;

const MS: u64 = 1_000_000;

fn sim_policy(a: SchedAttr) -> Policy {
    match a {
        SchedAttr::Fifo { priority } => Policy::Fifo(priority as u8),
        SchedAttr::Rr { priority } => Policy::Rr(priority as u8),
        SchedAttr::Other { nice } | SchedAttr::Batch { nice } => Policy::Other(nice as i8),
        SchedAttr::Idle => Policy::Idle,
        SchedAttr::Deadline { .. } => panic!("no SCHED_DEADLINE waiter in these sequences"),
    }
}

/// The simulated kernel holding one task per pid of the sequence (a
/// receiver's task gets a socket it waits on) and the policy under test.
struct SimWorld {
    sim: Sim,
    policy: ProcessAware,
    task: BTreeMap<i32, usize>,
    socket: BTreeMap<i32, usize>,
}

impl SimWorld {
    fn new(seq: &[Observation], tick_ns: u64) -> Self {
        let cfg = MachineConfig {
            hz: (1_000_000_000 / tick_ns) as u32,
            irq_entry: 0,
            irq_exit: 0,
            tick: 0,
            context_switch: 0,
            irq_primary: 0,
            irq_time_accounting: false,
            netdev_max_backlog: 1000,
            hrtimer: None,
            defer_to_running_ksoftirqd: false,
            ipi: 0,
        };
        assert_eq!(cfg.tick_ns(), tick_ns, "a tick the simulator's HZ can express");
        let mut sim = Sim::new(cfg, FairKind::Cfs, Box::new(softirq::Linux26), 1);
        let (mut task, mut socket) = (BTreeMap::new(), BTreeMap::new());
        let mut add = |sim: &mut Sim, pid: i32, policy: Policy| {
            *task.entry(pid).or_insert_with(|| sim.add_task(Task::new(format!("p{pid}"), policy, TaskKind::SoftirqThread { vectors: 0 })))
        };
        for o in seq {
            match *o {
                Observation::Block { tid, attr } => {
                    let t = add(&mut sim, tid, sim_policy(attr));
                    sim.tasks[t].policy = sim_policy(attr);
                    socket.entry(tid).or_insert_with(|| {
                        sim.sockets.push(Socket::new(format!("s{tid}"), 212_992));
                        sim.sockets.len() - 1
                    });
                }
                Observation::Bh { owner: Some(p), .. } | Observation::Tick { charged: Some(p) } => {
                    add(&mut sim, p, Policy::Other(0));
                }
                _ => {}
            }
        }
        let policy = ProcessAware::from_params(&toml::Table::new(), &sim).unwrap();
        SimWorld { sim, policy, task, socket }
    }

    /// The observation as the simulated kernel would make it happen, and
    /// what the policy decided: the predicted rank, or the ticks moved.
    fn observe(&mut self, o: &Observation) -> (Option<i32>, Option<i64>) {
        match *o {
            Observation::Block { tid, attr } => {
                let t = self.task[&tid];
                self.sim.tasks[t].policy = sim_policy(attr);
                self.sim.sockets[self.socket[&tid]].waiter = Some(t);
                (Some(self.policy.predicted(&self.sim)), None)
            }
            Observation::Wake { tid } => {
                if let Some(&s) = self.socket.get(&tid) {
                    self.sim.sockets[s].waiter = None;
                }
                (Some(self.policy.predicted(&self.sim)), None)
            }
            Observation::Bh { owner, count, cost_ns } => {
                let owner = owner.map(|p| self.task[&p]);
                let job = Job { vector: softirq::NET_RX, cost: cost_ns, what: JobWhat::Device { dev: 0, token: 0 }, owner };
                for _ in 0..count {
                    self.policy.job_done(&self.sim, Loc::Cpu, &job);
                }
                (None, None)
            }
            Observation::Tick { charged } => {
                let current = charged.map(|p| self.task[&p]);
                let before = current.map_or(0, |t| self.policy.moved_ticks().get(t).copied().unwrap_or(0));
                self.sim.cpu.current = current;
                self.policy.on_tick(&mut self.sim);
                let after = current.map_or(0, |t| self.policy.moved_ticks().get(t).copied().unwrap_or(0));
                (None, Some(after - before))
            }
        }
    }
}

/// Drives both; returns (priority decisions, ticks moved) compared.
fn same_decisions(seq: &[Observation], floor: SchedAttr, tick_ns: u64) -> (usize, i64) {
    let mut live = Adapter::new(floor, tick_ns);
    let mut sim = SimWorld::new(seq, tick_ns);
    assert_eq!(sim_policy(floor).rank(), sim.policy.predicted(&sim.sim), "the floor is the simulator's orphan priority");
    let (mut decisions, mut moved) = (0, 0);
    for (k, o) in seq.iter().enumerate() {
        match (live.observe(o), sim.observe(o)) {
            (Outcome::Schedule(attr, waiter), (Some(rank), None)) => {
                assert_eq!(sim_policy(attr).rank(), rank, "step {k} {o:?}: live {attr} (waiter {waiter:?}), simulator rank {rank}");
                decisions += 1;
            }
            (Outcome::Moved(l), (None, Some(s))) => {
                assert_eq!(l, s, "step {k} {o:?}: ticks moved, live {l}, simulator {s}");
                moved += l.abs();
            }
            (Outcome::Counted, (None, None)) => {}
            (l, s) => panic!("step {k} {o:?}: live {l:?}, simulator {s:?}"),
        }
    }
    // The same charges and the same debts at the end, per process.
    for c in live.compensation.charges() {
        let t = sim.task[&c.pid];
        assert_eq!(c.moved_ticks, sim.policy.moved_ticks().get(t).copied().unwrap_or(0), "moved ticks of {}", c.pid);
        assert_eq!(c.unaccounted, sim.policy.unaccounted().get(t).copied().unwrap_or(0), "x of {}", c.pid);
    }
    (decisions, moved)
}

/// A CPU-bound process (pid 1) charged for the ticks of its run phase
/// while the receive work of two receivers (pid 20: SCHED_FIFO 20; pid 30:
/// SCHED_OTHER nice 5) runs in its context; they block and wake in turn;
/// idle ticks in its sleep phase; some orphan work.
fn synthetic() -> Vec<Observation> {
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut rnd = |n: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % n.max(1)
    };
    let fifo20 = SchedAttr::Fifo { priority: 20 };
    let nice5 = SchedAttr::Other { nice: 5 };
    let mut seq = Vec::new();
    for tick in 0..400u64 {
        let phase = tick % 100;
        for _ in 0..rnd(4) {
            seq.push(match rnd(4) {
                0 => Observation::Block { tid: 20, attr: fifo20 },
                1 => Observation::Block { tid: 30, attr: nice5 },
                2 => Observation::Wake { tid: 20 },
                _ => Observation::Wake { tid: 30 },
            });
            let owner = match rnd(5) {
                0 => None,
                1 | 2 => Some(20),
                _ => Some(30),
            };
            seq.push(Observation::Bh { owner, count: rnd(60), cost_ns: 5_000 + 1_000 * rnd(10) });
        }
        let charged = match phase {
            0..=79 => Some(1),
            80..=89 => Some([20, 30][rnd(2) as usize]),
            _ => None,
        };
        seq.push(Observation::Tick { charged });
    }
    seq
}

#[test]
fn a_synthetic_sequence_gets_the_same_priorities_and_charges_from_both() {
    let (decisions, moved) = same_decisions(&synthetic(), SchedAttr::Other { nice: 0 }, 10 * MS);
    assert!(decisions > 300, "{decisions} priority decisions");
    assert!(moved > 20, "{moved} ticks moved");
    let (_, moved4) = same_decisions(&synthetic(), SchedAttr::Other { nice: 0 }, 4 * MS);
    assert!(moved4 > 0);
}

#[test]
fn a_recorded_live_trace_gets_the_same_priorities_and_charges_from_both() {
    let doc: serde_json::Value = serde_json::from_str(include_str!("data/process_aware_live_trace.json")).unwrap();
    let seq: Vec<Observation> = serde_json::from_value(doc["observations"].clone()).unwrap();
    let floor: SchedAttr = serde_json::from_value(doc["floor"].clone()).unwrap();
    let tick_ns = doc["tick_ns"].as_u64().unwrap();
    let (decisions, _) = same_decisions(&seq, floor, tick_ns);
    // Both receivers blocked and woke many times; their bottom halves and
    // the ticks of the run are all in it.
    assert!(decisions > 300, "{decisions} priority decisions");
    let count = |f: fn(&Observation) -> bool| seq.iter().filter(|o| f(o)).count();
    assert!(count(|o| matches!(o, Observation::Bh { owner: Some(_), .. })) > 30);
    assert!(count(|o| matches!(o, Observation::Tick { charged: Some(_) })) > 300);
}
