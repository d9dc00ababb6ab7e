//! The live adapter of the compensation algorithm (`docs/papers.md` §2,
//! the paper's §3.1; the decision code is `irqlab_policy::process_aware`'s
//! [`Compensation`] and [`BhPerTick`], the code the simulator's
//! `process-aware` policy runs). Pure: observations in (bottom halves done
//! in softirq context with the process they served, ticks with the process
//! the kernel charged), ticks moved out. Processes are keyed by pid.
//!
//! Fed as the simulator feeds its adapter: a bottom half done in softirq
//! context bumps m(t) and x_owner; at each tick N(t) takes the tick's
//! bottom halves (EWMA), then the charged process gets x −= m and whole
//! multiples of N move one tick onto (or off) its system time. An idle tick
//! (nobody charged) drops m. Live, the monitor turns the softirq work it
//! measured in each tick into bottom halves of [`QUANTUM_NS`] (the BPF
//! accounting measures time, not invocations): [`Quanta`].

use irqlab_policy::process_aware::{BhPerTick, Compensation};
use serde::Serialize;
use std::collections::BTreeMap;

/// The paper's EWMA weight for N(t).
pub const GAMMA: f64 = 0.3;

/// Live, one "bottom half" is this much measured softirq work.
pub const QUANTUM_NS: u64 = 10_000;

/// The compensation algorithm over live processes.
#[derive(Debug, Clone)]
pub struct Compensator {
    tick_ns: u64,
    comp: Compensation,
    n_est: BhPerTick,
    index: BTreeMap<i32, usize>,
    tick_cost_ns: u64,
    tick_jobs: u64,
    /// Net ticks moved onto each process's system time (negative: off it).
    moved: BTreeMap<i32, i64>,
}

/// Measured softirq work as bottom halves of [`QUANTUM_NS`], per owner
/// (None: orphan work); what is not yet a whole quantum waits for more.
#[derive(Debug, Clone, Default)]
pub struct Quanta {
    carry: BTreeMap<Option<i32>, u64>,
}

impl Quanta {
    /// `ns` more work for `owner`: how many whole bottom halves it makes.
    pub fn add(&mut self, owner: Option<i32>, ns: u64) -> u64 {
        let c = self.carry.entry(owner).or_insert(0);
        *c += ns;
        let whole = *c / QUANTUM_NS;
        *c -= whole * QUANTUM_NS;
        whole
    }
}

/// What the algorithm charged one process.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Charge {
    pub pid: i32,
    /// Ticks moved onto its system time (negative: off it).
    pub moved_ticks: i64,
    /// The same in ns.
    pub moved_ns: i64,
    /// x_k: bottom halves it still owes (positive) or was overcharged for.
    pub unaccounted: i64,
}

impl Compensator {
    pub fn new(tick_ns: u64, gamma: f64) -> Self {
        Compensator {
            tick_ns,
            comp: Compensation::default(),
            n_est: BhPerTick { gamma, value: None },
            index: BTreeMap::new(),
            tick_cost_ns: 0,
            tick_jobs: 0,
            moved: BTreeMap::new(),
        }
    }

    pub fn tick_ns(&self) -> u64 {
        self.tick_ns
    }

    fn slot(&mut self, pid: i32) -> usize {
        let next = self.index.len();
        *self.index.entry(pid).or_insert(next)
    }

    /// A bottom half of `cost_ns` finished in softirq context, for `owner`.
    pub fn bh_done(&mut self, owner: Option<i32>, cost_ns: u64) {
        let k = owner.map(|p| self.slot(p));
        self.comp.bh_done(k);
        self.tick_cost_ns += cost_ns;
        self.tick_jobs += 1;
    }

    /// The tick charged to `charged` (None: an idle tick). Returns the
    /// ticks moved onto it (negative: off it).
    pub fn tick(&mut self, charged: Option<i32>) -> i64 {
        self.n_est.observe(self.tick_ns, self.tick_cost_ns, self.tick_jobs);
        self.tick_cost_ns = 0;
        self.tick_jobs = 0;
        // Known from its first tick on, charged or not.
        let i = charged.map(|pid| self.slot(pid));
        let Some(n) = self.n_est.rounded() else {
            return 0;
        };
        let (Some(pid), Some(i)) = (charged, i) else {
            self.comp.m = 0;
            return 0;
        };
        let moved = self.comp.tick(i, n);
        if moved != 0 {
            *self.moved.entry(pid).or_insert(0) += moved;
        }
        moved
    }

    /// N(t) as it stands (bottom halves per tick), None before any ran.
    pub fn bh_per_tick(&self) -> Option<f64> {
        self.n_est.value
    }

    pub fn orphans(&self) -> u64 {
        self.comp.orphans
    }

    /// What it charged each process it saw, by pid.
    pub fn charges(&self) -> Vec<Charge> {
        self.index
            .iter()
            .map(|(&pid, &k)| {
                let moved_ticks = self.moved.get(&pid).copied().unwrap_or(0);
                Charge {
                    pid,
                    moved_ticks,
                    moved_ns: moved_ticks * self.tick_ns as i64,
                    unaccounted: self.comp.x.get(k).copied().unwrap_or(0),
                }
            })
            .collect()
    }

    pub fn charge(&self, pid: i32) -> Option<Charge> {
        self.charges().into_iter().find(|c| c.pid == pid)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn foreign_work_in_a_process_s_ticks_comes_off_it_and_onto_its_owner() {
        let mut c = Compensator::new(10_000_000, GAMMA);
        // 6 ms of the server's (pid 2) work ran under the hog (pid 1) in
        // one 10 ms tick: N = 1000 quanta; 600 is not a whole tick.
        let mut q = Quanta::default();
        let mut work = |c: &mut Compensator, owner, ns| {
            for _ in 0..q.add(owner, ns) {
                c.bh_done(owner, QUANTUM_NS);
            }
        };
        work(&mut c, Some(2), 6_000_000);
        assert_eq!(c.tick(Some(1)), 0);
        assert_eq!(c.charge(1).unwrap().unaccounted, -600);
        // The next tick another 6 ms: x1 = -1200, one tick comes off.
        work(&mut c, Some(2), 6_000_000);
        assert_eq!(c.tick(Some(1)), -1);
        assert_eq!(c.charge(1).unwrap(), Charge { pid: 1, moved_ticks: -1, moved_ns: -10_000_000, unaccounted: -200 });
        // The server charged a tick with nothing under it: +1 tick.
        assert_eq!(c.tick(Some(2)), 1);
        assert_eq!(c.charge(2).unwrap().unaccounted, 200);
        // Work below a quantum waits for the rest.
        work(&mut c, None, QUANTUM_NS - 1);
        assert_eq!(c.orphans(), 0);
        work(&mut c, None, 1);
        assert_eq!(c.orphans(), 1);
    }

    #[test]
    fn an_idle_tick_drops_what_ran_in_it() {
        let mut c = Compensator::new(10_000_000, GAMMA);
        for _ in 0..300 {
            c.bh_done(Some(2), QUANTUM_NS);
        }
        assert_eq!(c.tick(None), 0);
        assert_eq!(c.tick(Some(1)), 0);
        assert_eq!(c.charge(1).unwrap().unaccounted, 0);
    }
}
