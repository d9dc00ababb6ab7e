//! Process-aware interrupts (the paper's §3; `docs/papers.md` §2): bottom-half accounting and scheduling.
//!
//! - **Accounting** (§3.1, the compensation algorithm, [`Compensation`]):
//!   bottom halves run in softirq context are charged by the tick to
//!   whichever process was interrupted. Each finished bottom half bumps
//!   m(t) and, when its owner P_j is known, x_j(t); at every tick the
//!   process P_i charged for that tick gets x_i −= m and whole multiples
//!   of N(t) (bottom halves per tick, EWMA γ = 0.3) move one tick of
//!   system time and time slice onto or off it. Bottom halves without an
//!   owner are counted as orphans.
//! - **Scheduling** (§3.2): processes register with the device when they
//!   bind/recv (socket owners and blocked receivers are the candidates);
//!   the predicted bottom-half priority is the highest candidate priority;
//!   raised bottom halves run at IRQ exit only when that priority is at
//!   least the most important task wanting the CPU, else they wait, and
//!   the scheduler makes the same comparison before each context switch.
//!
//! `mode = "IA"` turns on the accounting only, `"ISA"` both, `"IS"` the
//! scheduling only.

use crate::kernel::Sim;
use crate::softirq::{self, Admit, BottomHalfPolicy, Job, Loc};
use crate::task::{Policy, RunState, TaskId, TaskKind};
use irqlab_analysis::Nanos;
use irqlab_policy::process_aware;
pub use irqlab_policy::process_aware::{BhPerTick, Compensation};
use serde_json::json;

/// The policy: an adapter over `irqlab_policy::process_aware` (the decision
/// code, shared with live controllers) that finds the registered
/// processes, the contenders and the charged task in the simulated kernel.
pub struct ProcessAware {
    accounting: bool,
    scheduling: bool,
    comp: Compensation,
    n_est: BhPerTick,
    tick_cost_ns: Nanos,
    tick_jobs: u64,
    /// Net ticks moved onto each task's system time (negative: off it).
    moved_ticks: Vec<i64>,
    /// Ticks that could not be taken off because the charged system time
    /// was already zero.
    clipped_ticks: u64,
    deferred_at_irq_exit: u64,
    deferred_jobs: u64,
    run_before_switch: u64,
    orphan_rank: i32,
}

impl ProcessAware {
    /// `[policy]` keys: `mode` ("IA", "IS", "ISA"; default "ISA"), `gamma`
    /// (default 0.3, the paper's), `orphan_priority` ("other" default, or
    /// an RT priority 1-99 for bottom halves nobody registered for).
    pub fn from_params(params: &toml::Table, _sim: &Sim) -> Result<Self, String> {
        let mut mode = "ISA".to_string();
        let mut gamma = 0.3;
        let mut orphan_rank = Policy::Other(0).rank();
        for (key, v) in params {
            match key.as_str() {
                "mode" => mode = v.as_str().ok_or("`mode` must be \"IA\", \"IS\" or \"ISA\"")?.to_string(),
                "gamma" => {
                    gamma = v.as_float().ok_or("`gamma` must be a number in (0, 1)")?;
                    if !(gamma > 0.0 && gamma < 1.0) {
                        return Err("`gamma` must be in (0, 1)".into());
                    }
                }
                "orphan_priority" => {
                    orphan_rank = match (v.as_str(), v.as_integer()) {
                        (Some("other"), _) => Policy::Other(0).rank(),
                        (_, Some(p)) if (1..=99).contains(&p) => Policy::Fifo(p as u8).rank(),
                        _ => return Err("`orphan_priority` must be \"other\" or an RT priority 1-99".into()),
                    }
                }
                other => return Err(format!("unknown process-aware parameter `{other}` (mode, gamma, orphan_priority)")),
            }
        }
        let (accounting, scheduling) = match mode.as_str() {
            "IA" => (true, false),
            "IS" => (false, true),
            "ISA" => (true, true),
            m => return Err(format!("unknown process-aware mode `{m}` (IA, IS, ISA)")),
        };
        Ok(ProcessAware {
            accounting,
            scheduling,
            comp: Compensation::default(),
            n_est: BhPerTick { gamma, value: None },
            tick_cost_ns: 0,
            tick_jobs: 0,
            moved_ticks: Vec::new(),
            clipped_ticks: 0,
            deferred_at_irq_exit: 0,
            deferred_jobs: 0,
            run_before_switch: 0,
            orphan_rank,
        })
    }

    /// Predicted bottom-half priority: the highest priority among the
    /// processes registered with the device (socket owners, bound at
    /// start) and those blocked in recv on it.
    fn predicted_rank(sim: &Sim, orphan_rank: i32) -> i32 {
        let registered = sim
            .sockets
            .iter()
            .flat_map(|s| [s.owner, s.waiter].into_iter().flatten())
            .filter(|&t| sim.tasks[t].state != RunState::Exited)
            .map(|t| sim.tasks[t].policy.rank());
        process_aware::predicted_priority(registered, orphan_rank)
    }

    /// The most important user task that wants the CPU (current or
    /// runnable); kernel bottom-half threads are not contenders.
    fn contender_rank(sim: &Sim) -> Option<i32> {
        sim.tasks
            .iter()
            .filter(|t| matches!(t.kind, TaskKind::User(_)))
            .filter(|t| matches!(t.state, RunState::Running | RunState::Runnable))
            .map(|t| t.policy.rank())
            .max()
    }

    /// The predicted bottom-half priority (scheduler rank) in `sim` now.
    pub fn predicted(&self, sim: &Sim) -> i32 {
        Self::predicted_rank(sim, self.orphan_rank)
    }

    /// Net ticks moved onto each task's system time so far, by task id.
    pub fn moved_ticks(&self) -> &[i64] {
        &self.moved_ticks
    }

    /// x_k: each task's unaccounted bottom halves, by task id.
    pub fn unaccounted(&self) -> &[i64] {
        &self.comp.x
    }

    fn bottom_halves_win(&self, sim: &Sim) -> bool {
        process_aware::bottom_halves_win(|| Self::predicted_rank(sim, self.orphan_rank), Self::contender_rank(sim))
    }

    /// Moves `ticks` ticks of system time and time slice onto task `i`.
    fn apply(&mut self, sim: &mut Sim, i: TaskId, ticks: i64) {
        if self.moved_ticks.len() <= i {
            self.moved_ticks.resize(i + 1, 0);
        }
        self.moved_ticks[i] += ticks;
        let tick = sim.cfg.tick_ns();
        let t = &mut sim.tasks[i];
        for _ in 0..ticks.unsigned_abs() {
            if ticks > 0 {
                t.acct.charged_stime_ns += tick;
            } else if t.acct.charged_stime_ns >= tick {
                t.acct.charged_stime_ns -= tick;
            } else if t.acct.charged_utime_ns >= tick {
                // Tick sampling put the interrupted tick in user time.
                t.acct.charged_utime_ns -= tick;
            } else {
                self.clipped_ticks += 1;
            }
        }
        // The time slice: the 2.4 epoch counter, the fair class's virtual
        // runtime, the RR slice. SCHED_FIFO has none.
        match t.policy {
            Policy::Other(_) | Policy::Idle => {
                t.counter -= ticks;
                let w = crate::sched::cfs::weight(t.policy) as u128;
                let dv = tick as u128 * ticks.unsigned_abs() as u128 * 1024 * 1024 / w;
                t.vruntime = if ticks > 0 { t.vruntime + dv } else { t.vruntime.saturating_sub(dv) };
            }
            Policy::Rr(_) => {
                let d = tick * ticks.unsigned_abs();
                t.rr_left = if ticks > 0 { t.rr_left.saturating_sub(d) } else { t.rr_left + d };
            }
            _ => {}
        }
    }
}

impl BottomHalfPolicy for ProcessAware {
    fn name(&self) -> &'static str {
        match (self.accounting, self.scheduling) {
            (true, true) => "process-aware-isa",
            (true, false) => "process-aware-ia",
            _ => "process-aware-is",
        }
    }

    fn admit(&mut self, sim: &Sim, loc: Loc, job: &Job) -> Admit {
        // A softirq-context run may have started for another vector (or
        // before a more important task woke): network jobs wait then.
        if self.scheduling && loc == Loc::Cpu && is_net(job.vector) && !self.bottom_halves_win(sim) {
            self.deferred_jobs += 1;
            return Admit::Defer { wake_ksoftirqd: false };
        }
        Admit::Run
    }

    fn job_done(&mut self, _sim: &Sim, loc: Loc, job: &Job) {
        // Only softirq-context work is charged to an unrelated process;
        // work in ksoftirqd is charged to ksoftirqd.
        if loc == Loc::Cpu {
            self.comp.bh_done(job.owner);
            self.tick_cost_ns += job.cost;
            self.tick_jobs += 1;
        }
    }

    fn run_on_irq_exit(&mut self, sim: &Sim) -> bool {
        if !self.scheduling || sim.pending & !NET_VECTORS != 0 {
            return true;
        }
        let run = self.bottom_halves_win(sim);
        if !run {
            self.deferred_at_irq_exit += 1;
        }
        run
    }

    fn run_before_switch(&mut self, sim: &Sim, _next: Option<TaskId>) -> bool {
        if !self.scheduling || sim.pending & NET_VECTORS == 0 {
            return false;
        }
        let run = self.bottom_halves_win(sim);
        if run {
            self.run_before_switch += 1;
        }
        run
    }

    fn on_tick(&mut self, sim: &mut Sim) {
        self.n_est.observe(sim.cfg.tick_ns(), self.tick_cost_ns, self.tick_jobs);
        self.tick_cost_ns = 0;
        self.tick_jobs = 0;
        if !self.accounting {
            self.comp.m = 0;
            return;
        }
        let Some(n) = self.n_est.rounded() else {
            return;
        };
        match sim.cpu.current {
            Some(i) => {
                let moved = self.comp.tick(i, n);
                if moved != 0 {
                    self.apply(sim, i, moved);
                }
            }
            // An idle tick is charged to nobody: nothing to take back.
            None => self.comp.m = 0,
        }
    }

    fn report(&self) -> Option<serde_json::Value> {
        Some(json!({
            "name": self.name(),
            "accounting": self.accounting,
            "scheduling": self.scheduling,
            "gamma": self.n_est.gamma,
            "bh_per_tick": self.n_est.value,
            "moved_ticks": self.moved_ticks,
            "clipped_ticks": self.clipped_ticks,
            "unaccounted": self.comp.x,
            "orphans": self.comp.orphans,
            "deferred_at_irq_exit": self.deferred_at_irq_exit,
            "deferred_jobs": self.deferred_jobs,
            "run_before_switch": self.run_before_switch,
        }))
    }
}

const NET_VECTORS: u32 = (1 << softirq::NET_RX) | (1 << softirq::NET_TX);

fn is_net(v: u32) -> bool {
    NET_VECTORS & (1 << v) != 0
}
