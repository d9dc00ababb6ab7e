//! A machine of several CPUs: one simulated kernel per CPU ([`Sim`]),
//! stepped together in time order, with what one CPU hands another
//! (`kernel::Remote`: RPS packets and IPIs) delivered at the moment it is
//! sent.
//!
//! Tasks are pinned to their CPU (`cpu = N`), so no load balancer is
//! needed; interrupts go to the CPU their line names. Each CPU keeps its
//! own run queue, softirq state, ksoftirqd and tick, as the kernel's
//! per-CPU data does. What is not modelled yet (wake-ups across CPUs,
//! migration, shared caches and locks) is listed in `docs/sim-multicore.md`.
//!
//! One CPU's machine is the single-CPU simulator itself: `irqlab sim`
//! runs a `cores = 1` scenario through [`Sim::run`] unchanged.

use crate::kernel::{CrossCpuStats, Remote, Sim, SimError};
use crate::results::SimResult;
use irqlab_analysis::Nanos;
use serde::Serialize;
use std::sync::atomic::{AtomicBool, Ordering};

pub const MACHINE_SCHEMA: &str = "irqlab/sim-machine/v1";

pub struct Machine {
    pub cpus: Vec<Sim>,
}

impl Machine {
    pub fn new(cpus: Vec<Sim>) -> Self {
        Machine { cpus }
    }

    /// Schedules the end of the warm-up on every CPU.
    pub fn warmup_until(&mut self, at: Nanos) {
        for cpu in &mut self.cpus {
            cpu.q.schedule_at(at, crate::kernel::Ev::WarmupEnd);
        }
    }

    /// Runs every CPU until `end` (or the stop flag); as [`Sim::run`].
    pub fn run(&mut self, end: Nanos, stop: &AtomicBool, mut progress: impl FnMut(Nanos)) -> Result<bool, SimError> {
        for cpu in &mut self.cpus {
            cpu.begin()?;
        }
        // Each CPU's next event time, kept up to date for the CPUs a step
        // changed (the stepped one and those it sent to).
        let mut next: Vec<Nanos> = self.cpus.iter_mut().map(|c| c.next_time()).collect();
        let mut n: u64 = 0;
        loop {
            // The CPU whose next event is earliest (the lowest number on a tie).
            let (i, t) = next.iter().copied().enumerate().min_by_key(|&(i, t)| (t, i)).expect("a CPU");
            if t >= end {
                for cpu in &mut self.cpus {
                    cpu.finish_at(end);
                }
                return Ok(true);
            }
            self.cpus[i].step()?;
            if !self.cpus[i].cross.outbox.is_empty() {
                self.deliver(i, &mut next)?;
            }
            next[i] = self.cpus[i].next_time();
            n += 1;
            if n & 0xffff == 0 {
                progress(t);
                if stop.load(Ordering::Relaxed) {
                    return Ok(false);
                }
            }
        }
    }

    /// Hands CPU `from`'s messages to their CPUs, at its time, and
    /// updates their next event times.
    fn deliver(&mut self, from: usize, next: &mut [Nanos]) -> Result<(), SimError> {
        let now = self.cpus[from].now;
        for msg in std::mem::take(&mut self.cpus[from].cross.outbox) {
            let to = match msg {
                Remote::Backlog { to, pkt } => {
                    self.cpus[to].receive(now, |sim| sim.take_remote_packet(pkt))?;
                    to
                }
                Remote::Ipi { to } => {
                    let mut sent = false;
                    self.cpus[to].receive(now, |sim| sent = sim.take_remote_ipi())?;
                    if sent {
                        self.cpus[from].cross.stats.ipis_sent += 1;
                    }
                    to
                }
                Remote::Irq { to, line } => {
                    self.cpus[to].receive(now, |sim| sim.raise_irq(line))?;
                    to
                }
                Remote::NapiWake { to, nic } => {
                    self.cpus[to].receive(now, |sim| sim.take_remote_napi_wake(nic))?;
                    self.cpus[from].cross.stats.ipis_sent += 1;
                    to
                }
            };
            next[to] = self.cpus[to].next_time();
        }
        Ok(())
    }

    /// The result document of the run so far.
    pub fn result(&mut self, scenario: &str, description: Option<&str>, duration: Nanos, warmup: Nanos, complete: bool) -> MachineResult {
        let cpus: Vec<CpuRun> = self
            .cpus
            .iter_mut()
            .enumerate()
            .map(|(cpu, sim)| CpuRun {
                cpu,
                cross_cpu: sim.cross.stats.clone(),
                sim: sim.result(scenario, description, duration, warmup, complete),
            })
            .collect();
        let conservation = MachineConservation::of(&cpus);
        MachineResult {
            schema: MACHINE_SCHEMA,
            complete,
            scenario: scenario.to_string(),
            description: description.map(str::to_string),
            cores: cpus.len(),
            kernel: self.cpus.first().and_then(|c| c.kernel_preset),
            duration_ns: duration,
            warmup_ns: warmup,
            events: cpus.iter().map(|c| c.sim.events).sum(),
            conservation,
            cpus,
        }
    }
}

/// `irqlab/sim-machine/v1`: each CPU's `irqlab/sim/v2` document (as one
/// CPU's run writes it) with what crossed to and from the others.
#[derive(Debug, Clone, Serialize)]
pub struct MachineResult {
    pub schema: &'static str,
    pub complete: bool,
    pub scenario: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    pub cores: usize,
    /// The `[machine] kernel` preset, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kernel: Option<&'static str>,
    pub duration_ns: Nanos,
    pub warmup_ns: Nanos,
    pub events: u64,
    pub conservation: MachineConservation,
    pub cpus: Vec<CpuRun>,
}

#[derive(Debug, Clone, Serialize)]
pub struct CpuRun {
    pub cpu: usize,
    pub cross_cpu: CrossCpuStats,
    pub sim: SimResult,
}

/// The machine's books: each CPU's time adds up, each CPU's packets too
/// (counting those that crossed), and what one CPU sent the others took.
#[derive(Debug, Clone, Serialize)]
pub struct MachineConservation {
    pub cpu_time_ok: bool,
    pub packets_ok: bool,
    /// RPS packets sent == received, summed over the CPUs.
    pub crossing_ok: bool,
}

impl MachineConservation {
    fn of(cpus: &[CpuRun]) -> Self {
        let sent: u64 = cpus.iter().map(|c| c.cross_cpu.rps_packets_sent).sum();
        let received: u64 = cpus.iter().map(|c| c.cross_cpu.rps_packets_received).sum();
        MachineConservation {
            cpu_time_ok: cpus.iter().all(|c| c.sim.conservation.cpu_time_ok),
            packets_ok: cpus.iter().all(|c| c.sim.conservation.packets_ok),
            crossing_ok: sent == received,
        }
    }

    pub fn ok(&self) -> bool {
        self.cpu_time_ok && self.packets_ok && self.crossing_ok
    }
}
