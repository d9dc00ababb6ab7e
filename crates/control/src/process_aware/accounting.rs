//! The compensation algorithm live (`docs/papers.md` §2, the paper's §3.1):
//! the BPF accounting (`irqlab_measure::accounting`, the programs of `irqlab measure
//! accounting`) is read every tick ([`super::TICK_NS`], the paper's 100 Hz),
//! and per CPU the network softirq work done in softirq context since the
//! last tick, by the task it served (the owner of the socket it reached;
//! orphan work: none), becomes bottom halves of
//! [`compensation::QUANTUM_NS`] for the [`Compensator`]; the tick is
//! charged to the task that ran most on the CPU since the last one (none
//! when the CPU was idle more than any task ran). Tasks are threads (tids):
//! the server and the CPU-bound task of the reproduction are threads of one
//! process.
//!
//! Per task served or charged, the report puts the compensation's charge
//! (the kernel's /proc charge plus the ticks moved) beside the kernel's
//! charge and the BPF-measured truth (its own run, interrupt contexts
//! excluded). On a kernel without IRQ_TIME_ACCOUNTING the /proc charge
//! counts the softirq work done in a task's context as its own; with
//! threaded NAPI the work runs in the kthread, not in softirq context, and
//! is charged to the kthread (the compensation, as the simulator's, moves
//! only softirq-context work: the paper's ksoftirqd is charged for itself).

use super::compensation::{self, Compensator, Quanta, QUANTUM_NS};
use super::Observation;
use irqlab_host::error::Result;
use irqlab_host::rt::monotonic_ns;
use irqlab_measure::accounting::raw::RawSnapshot;
use irqlab_measure::accounting::{Options, Session, Storage};
use serde::Serialize;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};

/// The network softirq vectors (NET_TX, NET_RX).
const NET_VECTORS: [usize; 2] = [2, 3];

/// The monitor half for one CPU: successive snapshots in, the observations
/// the adapter takes out (bottom halves by owner, then the tick).
#[derive(Debug, Clone, Default)]
pub struct TickSampler {
    /// Index of the CPU in the snapshot's per-CPU vectors.
    slot: usize,
    /// Per tid: (run + interrupt time on the CPU, network work served on it).
    prev: BTreeMap<u32, (u64, u64)>,
    prev_orphan: u64,
    prev_taken: Option<u64>,
    quanta: Quanta,
}

impl TickSampler {
    pub fn new(slot: usize) -> Self {
        TickSampler { slot, ..TickSampler::default() }
    }

    /// The observations since the previous snapshot (none for the first).
    pub fn step(&mut self, raw: &RawSnapshot) -> Vec<Observation> {
        let mut out = Vec::new();
        let mut busiest: Option<(u32, u64)> = None;
        let mut busy_total = 0;
        for (&tid, per_cpu) in &raw.tasks {
            let Some(c) = per_cpu.get(self.slot) else { continue };
            let on_cpu = c.run_ns + c.hardirq_ns + c.softirq_total();
            let served: u64 = NET_VECTORS.iter().map(|&v| c.served_softirq_ns[v]).sum();
            let (p_on, p_served) = self.prev.insert(tid, (on_cpu, served)).unwrap_or((0, 0));
            if self.prev_taken.is_none() {
                continue;
            }
            let (d_on, d_served) = (on_cpu.saturating_sub(p_on), served.saturating_sub(p_served));
            let owner = i32::try_from(tid).ok().filter(|&t| t != 0);
            let count = self.quanta.add(owner, d_served);
            if count > 0 {
                out.push(Observation::Bh { owner, count, cost_ns: QUANTUM_NS });
            }
            if tid != 0 {
                busy_total += d_on;
                if busiest.is_none_or(|(_, d)| d_on > d) {
                    busiest = Some((tid, d_on));
                }
            }
        }
        let orphan: u64 = raw.cpus.get(self.slot).map_or(0, |(_, t)| NET_VECTORS.iter().map(|&v| t.orphan_softirq_ns[v]).sum());
        let d_orphan = orphan.saturating_sub(self.prev_orphan);
        self.prev_orphan = orphan;
        let Some(prev_taken) = self.prev_taken.replace(raw.taken_ns) else {
            return out;
        };
        let count = self.quanta.add(None, d_orphan);
        if count > 0 {
            out.push(Observation::Bh { owner: None, count, cost_ns: QUANTUM_NS });
        }
        let idle = raw.taken_ns.saturating_sub(prev_taken).saturating_sub(busy_total);
        let charged = busiest.filter(|&(_, d)| d > 0 && d >= idle).map(|(t, _)| t as i32);
        out.push(Observation::Tick { charged });
        out
    }
}

/// One task's charges.
#[derive(Debug, Clone, Serialize)]
pub struct Served {
    pub tid: i32,
    pub tgid: u32,
    pub comm: String,
    /// The BPF-measured truth: its own run, interrupt contexts excluded.
    pub truth_run_ns: u64,
    /// What /proc/PID/task/TID/stat charged it over the run (utime + stime).
    pub kernel_charged_ns: Option<u64>,
    /// The compensation algorithm's: the kernel's charge plus the ticks it moved.
    pub compensation_charged_ns: Option<u64>,
    pub moved_ticks: i64,
    /// x_k at the end: bottom halves of the quantum not yet a whole tick.
    pub unaccounted: i64,
    /// Network softirq work done for it in softirq context, and done in its context.
    pub served_softirq_ns: u64,
    pub stolen_softirq_ns: u64,
    /// (charge − truth) / truth.
    pub kernel_error: Option<f64>,
    pub compensation_error: Option<f64>,
}

/// What the compensation did over a run.
#[derive(Debug, Clone, Serialize)]
pub struct Accounted {
    pub tick_ns: u64,
    pub quantum_ns: u64,
    pub cpus: Vec<usize>,
    pub ticks: u64,
    /// Ticks whose snapshot came more than a tick late.
    pub late_ticks: u64,
    /// N(t) at the end, per CPU (bottom halves of the quantum per tick).
    pub bh_per_tick: Vec<Option<f64>>,
    pub orphan_bottom_halves: u64,
    /// The tasks the compensation charged or that were served, by tid.
    pub tasks: Vec<Served>,
    /// The first CPU's observations, when asked to record them.
    #[serde(skip)]
    pub recorded: Vec<(u64, Observation)>,
}

fn error(charge: Option<u64>, truth: u64) -> Option<f64> {
    charge.filter(|_| truth > 0).map(|c| (c as f64 - truth as f64) / truth as f64)
}

/// Runs the accounting and the compensation on `cpus` until `stop`.
pub fn run(cpus: &[usize], tick_ns: u64, record: bool, stop: &AtomicBool) -> Result<Accounted> {
    let mut storage = Storage::default();
    let mut session = Session::start(&mut storage, Options::default())?;
    // Its thread's cost counts from here (its BPF programs loaded).
    crate::controller_thread::control_starts();
    let slots: Vec<usize> = cpus.iter().filter_map(|c| session.online_cpus().iter().position(|o| o == c)).collect();
    let mut samplers: Vec<TickSampler> = slots.iter().map(|&s| TickSampler::new(s)).collect();
    let mut comps: Vec<Compensator> = slots.iter().map(|_| Compensator::new(tick_ns, compensation::GAMMA)).collect();
    let (mut ticks, mut late) = (0, 0);
    let mut recorded = Vec::new();
    // The /proc charge of every task charged or served, read every 10 ticks
    // while it lives (a thread that exits before the end keeps its last).
    let mut proc_seen: BTreeMap<i32, u64> = BTreeMap::new();
    let tick_per_s = irqlab_host::machine::ticks_per_second().max(1);
    let mut next = monotonic_ns();
    let mut raw = session.snapshot()?;
    loop {
        for (i, (s, c)) in samplers.iter_mut().zip(comps.iter_mut()).enumerate() {
            for o in s.step(&raw) {
                match o {
                    Observation::Bh { owner, count, cost_ns } => (0..count).for_each(|_| c.bh_done(owner, cost_ns)),
                    Observation::Tick { charged } => {
                        c.tick(charged);
                    }
                    _ => {}
                }
                if record && i == 0 {
                    recorded.push((raw.taken_ns, o));
                }
            }
        }
        if ticks % 10 == 0 {
            for c in &comps {
                for ch in c.charges() {
                    let tgid = raw.identity.get(&(ch.pid as u32)).map_or(ch.pid as u32, |&(g, _)| g);
                    if let Some(st) = irqlab_measure::accounting::procfs::task_stat(tgid, ch.pid as u32) {
                        let ticks = st.charged_ticks.saturating_sub(session.baseline_ticks(ch.pid as u32));
                        proc_seen.insert(ch.pid, ticks * 1_000_000_000 / tick_per_s);
                    }
                }
            }
        }
        if stop.load(Ordering::SeqCst) {
            break;
        }
        next += tick_ns;
        let now = monotonic_ns();
        if now > next + tick_ns {
            late += 1;
            next = now;
        }
        irqlab_host::rt::sleep_until_ns(next);
        // New service threads (a napi kthread) once a second: the /proc
        // scan costs more than a tick's read.
        if ticks % 100 == 99 {
            session.refresh_service_threads()?;
        }
        raw = session.read_snapshot()?;
        ticks += 1;
    }
    let report = session.report_from(&raw, true);
    let mut charges: BTreeMap<i32, (i64, i64)> = BTreeMap::new();
    for c in &comps {
        for ch in c.charges() {
            let e = charges.entry(ch.pid).or_insert((0, 0));
            e.0 += ch.moved_ticks;
            e.1 += ch.unaccounted;
        }
    }
    let tasks = charges
        .into_iter()
        .map(|(tid, (moved_ticks, unaccounted))| {
            let t = report.tasks.iter().find(|t| t.tid as i32 == tid);
            let truth = t.map_or(0, |t| t.time.run_ns);
            let kernel = t.and_then(|t| t.proc_charged_ns).or_else(|| proc_seen.get(&tid).copied());
            let comp = kernel.map(|k| (k as i64 + moved_ticks * tick_ns as i64).max(0) as u64);
            let net =
                |m: Option<&BTreeMap<String, u64>>| m.map_or(0, |m| m.iter().filter(|(k, _)| k.starts_with("NET")).map(|(_, v)| v).sum());
            Served {
                tid,
                tgid: t.map_or(0, |t| t.tgid),
                comm: t.map_or_else(String::new, |t| t.comm.clone()),
                truth_run_ns: truth,
                kernel_charged_ns: kernel,
                compensation_charged_ns: comp,
                moved_ticks,
                unaccounted,
                served_softirq_ns: net(t.map(|t| &t.served_by_softirq_ns)),
                stolen_softirq_ns: net(t.map(|t| &t.stolen_by_softirq_ns)),
                kernel_error: error(kernel, truth),
                compensation_error: error(comp, truth),
            }
        })
        .collect();
    Ok(Accounted {
        tick_ns,
        quantum_ns: QUANTUM_NS,
        cpus: cpus.to_vec(),
        ticks,
        late_ticks: late,
        bh_per_tick: comps.iter().map(Compensator::bh_per_tick).collect(),
        orphan_bottom_halves: comps.iter().map(Compensator::orphans).sum(),
        tasks,
        recorded,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use irqlab_measure::accounting::raw::{CpuState, CpuTotals, TaskCounters};

    fn snap(taken_ns: u64, tasks: &[(u32, u64, u64, u64)]) -> RawSnapshot {
        let mut raw = RawSnapshot { taken_ns, cpus: vec![(CpuState::default(), CpuTotals::default())], ..RawSnapshot::default() };
        for &(tid, run, softirq, served) in tasks {
            let mut c = TaskCounters { run_ns: run, ..TaskCounters::default() };
            c.softirq_ns[3] = softirq;
            c.served_softirq_ns[3] = served;
            raw.tasks.insert(tid, vec![c]);
        }
        raw
    }

    #[test]
    fn the_busiest_task_is_charged_and_served_work_becomes_bottom_halves() {
        let mut s = TickSampler::new(0);
        assert!(s.step(&snap(0, &[(1, 0, 0, 0), (2, 0, 0, 0)])).is_empty());
        // In 10 ms the hog (1) ran 7 ms with 3 ms of the server's (2) work in its context.
        let obs = s.step(&snap(10_000_000, &[(1, 7_000_000, 3_000_000, 0), (2, 0, 0, 3_000_005)]));
        assert_eq!(obs, vec![Observation::Bh { owner: Some(2), count: 300, cost_ns: QUANTUM_NS }, Observation::Tick { charged: Some(1) }]);
        // Then an idle tick: 1 ms of the server's run, the rest idle.
        let obs = s.step(&snap(20_000_000, &[(1, 7_000_000, 3_000_000, 0), (2, 1_000_000, 0, 3_000_005)]));
        assert_eq!(obs, vec![Observation::Tick { charged: None }]);
    }
}
