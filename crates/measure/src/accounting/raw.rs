//! A snapshot of the BPF maps as plain Rust values, before any naming or
//! /proc lookups. Kept free of libbpf types so the arithmetic on it (closing
//! the open segment of each CPU, per-CPU sums) is unit-testable.

use std::collections::BTreeMap;

/// Vector slots per array, as `accounting.h` sizes them.
pub const VECTOR_SLOTS: usize = super::skel::accounting::VECTOR_SLOTS as usize;

/// One task's counters on one CPU (`struct task_stats`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TaskCounters {
    pub run_ns: u64,
    pub hardirq_ns: u64,
    pub softirq_ns: [u64; VECTOR_SLOTS],
    pub served_softirq_ns: [u64; VECTOR_SLOTS],
    pub served_by_thread_ns: u64,
    pub switches_in: u64,
}

impl TaskCounters {
    pub fn softirq_total(&self) -> u64 {
        self.softirq_ns.iter().sum()
    }
    pub fn served_softirq_total(&self) -> u64 {
        self.served_softirq_ns.iter().sum()
    }
    pub fn add(&mut self, o: &TaskCounters) {
        self.run_ns += o.run_ns;
        self.hardirq_ns += o.hardirq_ns;
        for v in 0..VECTOR_SLOTS {
            self.softirq_ns[v] += o.softirq_ns[v];
            self.served_softirq_ns[v] += o.served_softirq_ns[v];
        }
        self.served_by_thread_ns += o.served_by_thread_ns;
        self.switches_in += o.switches_in;
    }
}

/// What a CPU is doing right now (`struct cpu_state`), needed to close its
/// open segment at snapshot time.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CpuState {
    pub initialised: bool,
    pub last_ts: u64,
    pub cur_tid: u32,
    /// Innermost active hard IRQ, if any.
    pub hard_irq: Option<i32>,
    pub soft_vec: Option<usize>,
    /// What tasks were charged on this CPU that the BPF side keeps in its
    /// per-CPU task slots and has not yet added to their task entries.
    pub unflushed: Vec<SlotCharges>,
    /// Time served on this CPU to `served_tid` that the BPF side has not
    /// yet added to its task entry (served_softirq_ns, served_by_thread_ns).
    pub served_tid: u32,
    pub unflushed_served: TaskCounters,
    /// Flush sequence: odd while a flush runs.
    pub flushes: u64,
}

/// One task slot of a CPU (`struct task_acc`): charges not yet in the
/// task map.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SlotCharges {
    pub tid: u32,
    pub tgid: u32,
    pub comm: String,
    /// Run, hard IRQ, softirq and switches_in.
    pub counters: TaskCounters,
    /// The same hard-IRQ time by line.
    pub irqs: Vec<(i32, u64)>,
}

/// Per-CPU totals not tied to a task (`struct cpu_totals`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CpuTotals {
    pub hardirq_in_softirq_ns: u64,
    pub orphan_softirq_ns: [u64; VECTOR_SLOTS],
    pub orphan_thread_ns: u64,
    pub anomalies: u64,
    /// Context switches the kernel did not trace, found and repaired.
    pub hidden_switches: u64,
    pub dropped_tasks: u64,
    pub socket_events: u64,
    pub socket_events_no_owner: u64,
    pub socket_events_outside: u64,
}

/// One CPU's plain softirq_entry/exit sum (`struct sum_state` of
/// softirq_sum.bpf.c).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReferenceCpu {
    /// By vector.
    pub sum_ns: [u64; VECTOR_SLOTS],
    /// Softirqs summed.
    pub count: u64,
    /// The longest of them, by vector.
    pub max_ns: [u64; VECTOR_SLOTS],
    /// Softirqs whose windows were summed (all of `count`, unless the
    /// second pair of programs missed one).
    pub windows: u64,
    /// By vector: how much later than the plain sum's own programs the
    /// programs attached after the accounting read the clock, at softirq
    /// entry and at exit; the accounting reads it in between (see
    /// softirq_sum.bpf.c).
    pub window_in_ns: [u64; VECTOR_SLOTS],
    pub window_out_ns: [u64; VECTOR_SLOTS],
}

impl ReferenceCpu {
    pub fn total_ns(&self) -> u64 {
        self.sum_ns.iter().sum()
    }
    pub fn window_in_total_ns(&self) -> u64 {
        self.window_in_ns.iter().sum()
    }
    pub fn window_out_total_ns(&self) -> u64 {
        self.window_out_ns.iter().sum()
    }
    /// The longest softirq of any vector.
    pub fn longest_ns(&self) -> u64 {
        self.max_ns.iter().copied().max().unwrap_or(0)
    }
}

/// Everything read from the maps at one instant.
#[derive(Debug, Clone, Default)]
pub struct RawSnapshot {
    /// CLOCK_MONOTONIC when the measurement started and when this was read.
    pub start_ns: u64,
    pub taken_ns: u64,
    /// Indexed by CPU number; only online CPUs.
    pub cpus: Vec<(CpuState, CpuTotals)>,
    /// tid -> counters per CPU (same indexing as `cpus`).
    pub tasks: BTreeMap<u32, Vec<TaskCounters>>,
    /// tid -> (tgid, comm) as the BPF side saw them.
    pub identity: BTreeMap<u32, (u32, String)>,
    /// (tid, irq) -> hard IRQ ns per CPU.
    pub task_irqs: BTreeMap<(u32, i32), Vec<u64>>,
    /// The plain softirq_entry/exit sum per CPU (same indexing as `cpus`),
    /// with its counts and clock windows, when the reference program ran.
    pub reference_cpus: Option<Vec<ReferenceCpu>>,
    /// CLOCK_MONOTONIC right before each CPU's open segment was closed
    /// (`sync_cpu`) and after the last map (the reference's) was read: the
    /// maps were read within this span, so it bounds where a CPU's
    /// timeline is cut; the CPU states and the reference were read within
    /// `taken_ns`..`read_ns`.
    pub synced_ns: u64,
    pub read_ns: u64,
}

impl RawSnapshot {
    /// The plain softirq sum per vector over every CPU, when the
    /// reference program ran.
    pub fn reference_softirq_ns(&self) -> Option<Vec<u64>> {
        self.reference_cpus.as_ref().map(|cpus| {
            let mut sum = vec![0u64; VECTOR_SLOTS];
            for c in cpus {
                for (acc, v) in sum.iter_mut().zip(c.sum_ns) {
                    *acc += v;
                }
            }
            sum
        })
    }

    /// Adds to each task what it was charged on each CPU and the BPF side
    /// still holds in that CPU's task slots, then charges the open segment
    /// [last_ts, taken_ns) to the context running it, as the next boundary
    /// event would have. A CPU that saw no event since the start has been
    /// idle the whole time (NOHZ idle CPUs get no tick), so its whole
    /// interval is idle time.
    pub fn close_open_segments(&mut self) {
        let ncpus = self.cpus.len();
        for cpu in 0..ncpus {
            let state = &mut self.cpus[cpu].0;
            let served_tid = state.served_tid;
            let slots = std::mem::take(&mut state.unflushed);
            let served = std::mem::take(&mut state.unflushed_served);
            for slot in slots {
                if !slot.comm.is_empty() {
                    self.identity.entry(slot.tid).or_insert((slot.tgid, slot.comm));
                }
                counters_at(&mut self.tasks, slot.tid, cpu, ncpus).add(&slot.counters);
                for (irq, ns) in slot.irqs {
                    *irq_ns_at(&mut self.task_irqs, (slot.tid, irq), cpu, ncpus) += ns;
                }
            }
            if served_tid != 0 && served != TaskCounters::default() {
                counters_at(&mut self.tasks, served_tid, cpu, ncpus).add(&served);
            }
        }
        for cpu in 0..ncpus {
            let state = &self.cpus[cpu].0;
            let (tid, since) = if state.initialised { (state.cur_tid, state.last_ts) } else { (0, self.start_ns) };
            let (hard_irq, soft_vec) = (state.hard_irq, state.soft_vec);
            let delta = self.taken_ns.saturating_sub(since);
            if delta == 0 {
                continue;
            }
            let c = counters_at(&mut self.tasks, tid, cpu, ncpus);
            match (hard_irq, soft_vec) {
                (Some(irq), _) => {
                    c.hardirq_ns += delta;
                    *irq_ns_at(&mut self.task_irqs, (tid, irq), cpu, ncpus) += delta;
                }
                (None, Some(vec)) => c.softirq_ns[vec.min(VECTOR_SLOTS - 1)] += delta,
                (None, None) => c.run_ns += delta,
            }
            self.cpus[cpu].0.last_ts = self.taken_ns;
            self.cpus[cpu].0.initialised = true;
        }
    }
}

/// `tid`'s counters on `cpu`, created (zero, for every CPU) if absent.
fn counters_at(tasks: &mut BTreeMap<u32, Vec<TaskCounters>>, tid: u32, cpu: usize, ncpus: usize) -> &mut TaskCounters {
    let per_cpu = tasks.entry(tid).or_default();
    if per_cpu.len() < ncpus {
        per_cpu.resize(ncpus, TaskCounters::default());
    }
    &mut per_cpu[cpu]
}

/// Hard-IRQ ns of (tid, irq) on `cpu`, created if absent.
fn irq_ns_at(irqs: &mut BTreeMap<(u32, i32), Vec<u64>>, key: (u32, i32), cpu: usize, ncpus: usize) -> &mut u64 {
    let per_cpu = irqs.entry(key).or_default();
    if per_cpu.len() < ncpus {
        per_cpu.resize(ncpus, 0);
    }
    &mut per_cpu[cpu]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snapshot() -> RawSnapshot {
        let mut s = RawSnapshot { start_ns: 1_000, taken_ns: 11_000, ..Default::default() };
        s.cpus = vec![
            (CpuState { initialised: true, last_ts: 9_000, cur_tid: 7, soft_vec: Some(3), ..Default::default() }, CpuTotals::default()),
            (CpuState::default(), CpuTotals::default()),
            (
                CpuState { initialised: true, last_ts: 10_500, cur_tid: 8, hard_irq: Some(24), soft_vec: Some(3), ..Default::default() },
                CpuTotals::default(),
            ),
        ];
        s
    }

    #[test]
    fn open_segments_go_to_the_running_context() {
        let mut s = snapshot();
        s.close_open_segments();
        // CPU 0: softirq NET_RX stolen from tid 7 since 9000.
        assert_eq!(s.tasks[&7][0].softirq_ns[3], 2_000);
        // CPU 1 never saw an event: idle for the whole interval.
        assert_eq!(s.tasks[&0][1].run_ns, 10_000);
        // CPU 2: inside a hard IRQ nested in a softirq: hard IRQ time only.
        assert_eq!(s.tasks[&8][2].hardirq_ns, 500);
        assert_eq!(s.tasks[&8][2].softirq_total(), 0);
        assert_eq!(s.task_irqs[&(8, 24)][2], 500);
        // Closing twice adds nothing.
        let before = s.tasks.clone();
        s.close_open_segments();
        assert_eq!(before, s.tasks);
    }

    #[test]
    fn unflushed_slot_charges_go_to_their_tasks_once() {
        let mut s = snapshot();
        let slot = |tid, counters, irqs| SlotCharges { tid, tgid: tid, comm: format!("t{tid}"), counters, irqs };
        s.cpus[0].0.unflushed = vec![
            slot(7, TaskCounters { run_ns: 5_000, hardirq_ns: 300, switches_in: 1, ..Default::default() }, vec![(24, 300)]),
            slot(5, TaskCounters { run_ns: 2_000, switches_in: 3, ..Default::default() }, vec![]),
        ];
        s.cpus[2].0.served_tid = 9;
        s.cpus[2].0.unflushed_served.served_softirq_ns[3] = 700;
        s.close_open_segments();
        assert_eq!(s.tasks[&7][0].run_ns, 5_000);
        assert_eq!(s.tasks[&7][0].hardirq_ns, 300);
        assert_eq!(s.tasks[&7][0].switches_in, 1);
        assert_eq!(s.task_irqs[&(7, 24)][0], 300);
        // A task that is not current keeps what its slot held.
        assert_eq!((s.tasks[&5][0].run_ns, s.tasks[&5][0].switches_in), (2_000, 3));
        assert_eq!(s.identity[&5], (5, "t5".to_string()));
        assert_eq!(s.tasks[&9][2].served_softirq_ns[3], 700);
        let before = (s.tasks.clone(), s.task_irqs.clone());
        s.close_open_segments();
        assert_eq!(before, (s.tasks.clone(), s.task_irqs.clone()));
    }

    #[test]
    fn counters_add_fieldwise() {
        let mut a = TaskCounters { run_ns: 1, hardirq_ns: 2, switches_in: 1, ..Default::default() };
        a.softirq_ns[3] = 5;
        let mut b = a;
        b.served_softirq_ns[3] = 4;
        a.add(&b);
        assert_eq!((a.run_ns, a.hardirq_ns, a.softirq_ns[3], a.served_softirq_total(), a.switches_in), (2, 4, 10, 4, 2));
    }
}
