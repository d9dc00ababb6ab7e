//! The `irqlab/accounting/v1` document: per task, per CPU and system-wide
//! run, stolen and served time, built from a [`RawSnapshot`]. The times
//! both this and the simulator's document have are
//! `irqlab_analysis::cpu_time`'s types, embedded (flattened), so a
//! simulated run compares with a measured one field by field
//! (`cpu_time::compare`).

use super::names::{softirq_name, IrqNames, SOFTIRQ_NAMES};
use super::procfs::{TaskKind, TaskStat};
use super::raw::{RawSnapshot, TaskCounters};
use irqlab_analysis::cpu_time::{CpuTime, TaskTime};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

pub const SCHEMA: &str = "irqlab/accounting/v1";

/// One task (thread). The idle task appears once per CPU.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct TaskReport {
    pub tid: u32,
    pub tgid: u32,
    pub comm: String,
    pub kind: TaskKind,
    /// Only for the idle task: the CPU it idles.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu: Option<usize>,
    /// Run, stolen and served time (`run_ns`, `stolen_ns`,
    /// `stolen_hardirq_ns`, `stolen_softirq_ns`, `served_softirq_ns`;
    /// served is always measured here).
    #[serde(flatten)]
    pub time: TaskTime,
    /// Stolen hard-IRQ time by IRQ line ("24:virtio0-input.0").
    pub stolen_by_irq_ns: BTreeMap<String, u64>,
    /// Stolen softirq time by vector ("NET_RX").
    pub stolen_by_softirq_ns: BTreeMap<String, u64>,
    /// `served_softirq_ns` by vector.
    pub served_by_softirq_ns: BTreeMap<String, u64>,
    /// The same split by the CPU the softirq ran on (CPU number -> vector
    /// -> ns); empty for tasks nobody served.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub served_by_cpu_ns: BTreeMap<usize, BTreeMap<String, u64>>,
    /// Time of service threads (ksoftirqd, irq/, napi/) done on its behalf.
    pub served_by_thread_ns: u64,
    /// utime + stime growth in /proc/<tid>/stat over the run, in ns;
    /// `None` for the idle task and tasks that exited.
    pub proc_charged_ns: Option<u64>,
    /// (proc_charged - run) / run: how wrong /proc's accounting is.
    pub proc_error: Option<f64>,
    pub exited: bool,
    pub switches_in: u64,
}

/// One CPU's wall time broken down; the parts add up to `wall_ns`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct CpuReport {
    pub cpu: usize,
    pub wall_ns: u64,
    /// `run_ns` (tasks, the idle task excluded), `idle_ns`, `hardirq_ns`,
    /// `softirq_ns`.
    #[serde(flatten)]
    pub time: CpuTime,
    pub softirq_by_vector_ns: BTreeMap<String, u64>,
    /// Hard-IRQ time that interrupted a softirq (counted in hardirq_ns).
    pub hardirq_in_softirq_ns: u64,
    pub orphan_softirq_ns: u64,
    /// wall - (run + idle + hardirq + softirq), signed.
    pub unaccounted_ns: i64,
    /// Lost or mismatched events the BPF side resynchronised after.
    pub anomalies: u64,
    /// Context switches the kernel did not trace (some guest kernels hide
    /// their agent's), found at the next event and repaired with the
    /// switched-out task's own runtime clock.
    #[serde(default)]
    pub hidden_switches: u64,
    /// Packets queued to (or dropped at) a socket on this CPU; of them,
    /// those whose socket had no known owner yet (no thread was blocked
    /// receiving on it at the start or woken by a packet to it since), and
    /// those seen outside softirq or service-thread context.
    pub socket_events: u64,
    pub socket_events_no_owner: u64,
    pub socket_events_outside: u64,
    /// Time the hypervisor took from this CPU during the run (/proc/stat
    /// "steal"; 0 on bare metal). The guest cannot see it happen: it lies
    /// inside whichever of the parts above was running, most often a
    /// task's run time.
    #[serde(default)]
    pub steal_ns: u64,
}

/// Interrupt work for which no beneficiary was found.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct OrphanReport {
    pub softirq_ns: u64,
    pub softirq_by_vector_ns: BTreeMap<String, u64>,
    pub thread_ns: u64,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Totals {
    pub wall_ns: u64,
    /// The CPUs' times summed.
    #[serde(flatten)]
    pub time: CpuTime,
    pub softirq_by_vector_ns: BTreeMap<String, u64>,
    pub served_softirq_ns: u64,
    /// Hypervisor steal over all CPUs (see `CpuReport::steal_ns`).
    #[serde(default)]
    pub steal_ns: u64,
    /// Plain softirq_entry/exit sum, when the reference program ran.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reference_softirq_ns: Option<u64>,
    /// The same by vector.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reference_softirq_by_vector_ns: Option<BTreeMap<String, u64>>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Report {
    pub schema: String,
    /// False when the run was cut short (Ctrl-C).
    pub complete: bool,
    pub duration_ns: u64,
    pub totals: Totals,
    pub cpus: Vec<CpuReport>,
    pub orphan: OrphanReport,
    /// Sorted by stolen time, largest first.
    pub tasks: Vec<TaskReport>,
    /// Optional tracepoints the kernel lacks (their part is not measured).
    pub missing_tracepoints: Vec<String>,
    pub notes: Vec<String>,
    /// The kernel and its interference-relevant settings (`irqlab doctor`).
    #[serde(default)]
    pub machine: irqlab_host::machine::MachineContext,
}

/// What building a report needs besides the maps.
pub struct Context<'a> {
    /// CPU numbers the raw per-CPU vectors are indexed by.
    pub cpus: &'a [usize],
    pub irq_names: &'a IrqNames,
    /// /proc/<tgid>/task/<tid>/stat now (None: exited), by (tgid, tid).
    pub proc_now: &'a dyn Fn(u32, u32) -> Option<TaskStat>,
    /// utime+stime ticks at the start.
    pub baseline_ticks: &'a dyn Fn(u32) -> u64,
    pub ticks_per_second: u64,
    /// Hypervisor steal of a CPU (by its number) since the start, ns.
    pub steal_ns: &'a dyn Fn(usize) -> u64,
    pub missing_tracepoints: &'a [String],
    pub machine: &'a irqlab_host::machine::MachineContext,
    pub complete: bool,
}

fn by_vector(values: &[u64]) -> BTreeMap<String, u64> {
    values.iter().enumerate().filter(|(_, &v)| v > 0).map(|(i, &v)| (softirq_name(i), v)).collect()
}

impl Report {
    pub fn build(raw: &RawSnapshot, ctx: &Context) -> Report {
        let ncpus = raw.cpus.len();
        let mut tasks = Vec::new();
        let mut cpu_sum = vec![TaskCounters::default(); ncpus];
        let mut cpu_idle = vec![TaskCounters::default(); ncpus];

        for (&tid, per_cpu) in &raw.tasks {
            for (cpu, c) in per_cpu.iter().enumerate().take(ncpus) {
                if tid == 0 {
                    cpu_idle[cpu].add(c);
                } else {
                    cpu_sum[cpu].add(c);
                }
            }
            if tid == 0 {
                // One idle task per CPU that idled (a busy CPU has none).
                for (cpu, c) in per_cpu.iter().enumerate().take(ncpus).filter(|(_, c)| **c != TaskCounters::default()) {
                    let cpu_no = ctx.cpus.get(cpu).copied().unwrap_or(cpu);
                    tasks.push(task_report(raw, ctx, 0, Some((cpu, cpu_no)), c, None));
                }
            } else {
                let mut total = TaskCounters::default();
                per_cpu.iter().for_each(|c| total.add(c));
                let tgid = raw.identity.get(&tid).map(|(g, _)| *g).unwrap_or(tid);
                let proc_stat = (ctx.proc_now)(tgid, tid);
                tasks.push(task_report(raw, ctx, tid, None, &total, proc_stat));
            }
        }
        tasks.sort_by(|a, b| b.time.stolen_ns.cmp(&a.time.stolen_ns).then(b.time.run_ns.cmp(&a.time.run_ns)).then(a.tid.cmp(&b.tid)));

        let wall_ns = raw.taken_ns.saturating_sub(raw.start_ns);
        let mut cpus = Vec::new();
        let mut orphan = OrphanReport::default();
        let mut orphan_vec = vec![0u64; SOFTIRQ_NAMES.len().max(16)];
        for cpu in 0..ncpus {
            let (_, totals) = &raw.cpus[cpu];
            let mut all = cpu_sum[cpu];
            all.add(&cpu_idle[cpu]);
            let idle_ns = cpu_idle[cpu].run_ns;
            let softirq_ns = all.softirq_total();
            let orphan_softirq: u64 = totals.orphan_softirq_ns.iter().sum();
            for (acc, v) in orphan_vec.iter_mut().zip(totals.orphan_softirq_ns) {
                *acc += v;
            }
            orphan.thread_ns += totals.orphan_thread_ns;
            let accounted = cpu_sum[cpu].run_ns + idle_ns + all.hardirq_ns + softirq_ns;
            let cpu_no = ctx.cpus.get(cpu).copied().unwrap_or(cpu);
            cpus.push(CpuReport {
                cpu: cpu_no,
                wall_ns,
                time: CpuTime { run_ns: cpu_sum[cpu].run_ns, idle_ns, hardirq_ns: all.hardirq_ns, softirq_ns },
                softirq_by_vector_ns: by_vector(&all.softirq_ns),
                hardirq_in_softirq_ns: totals.hardirq_in_softirq_ns,
                orphan_softirq_ns: orphan_softirq,
                unaccounted_ns: wall_ns as i64 - accounted as i64,
                anomalies: totals.anomalies,
                hidden_switches: totals.hidden_switches,
                socket_events: totals.socket_events,
                socket_events_no_owner: totals.socket_events_no_owner,
                socket_events_outside: totals.socket_events_outside,
                steal_ns: (ctx.steal_ns)(cpu_no),
            });
        }
        orphan.softirq_ns = orphan_vec.iter().sum();
        orphan.softirq_by_vector_ns = by_vector(&orphan_vec);

        let mut vec_total = vec![0u64; 16];
        for c in cpu_sum.iter().chain(cpu_idle.iter()) {
            for (acc, v) in vec_total.iter_mut().zip(c.softirq_ns) {
                *acc += v;
            }
        }
        let reference = raw.reference_softirq_ns();
        let totals = Totals {
            wall_ns: wall_ns * ncpus as u64,
            time: CpuTime {
                run_ns: cpus.iter().map(|c| c.time.run_ns).sum(),
                idle_ns: cpus.iter().map(|c| c.time.idle_ns).sum(),
                hardirq_ns: cpus.iter().map(|c| c.time.hardirq_ns).sum(),
                softirq_ns: cpus.iter().map(|c| c.time.softirq_ns).sum(),
            },
            softirq_by_vector_ns: by_vector(&vec_total),
            served_softirq_ns: tasks.iter().map(TaskReport::served_softirq_ns).sum(),
            steal_ns: cpus.iter().map(|c| c.steal_ns).sum(),
            reference_softirq_ns: reference.as_ref().map(|v| v.iter().sum()),
            reference_softirq_by_vector_ns: reference.as_deref().map(by_vector),
        };

        let mut notes = Vec::new();
        let dropped: u64 = raw.cpus.iter().map(|(_, t)| t.dropped_tasks).sum();
        if dropped > 0 {
            notes.push(format!("{dropped} events found the task map full; their time is missing"));
        }
        if totals.steal_ns > 0 {
            notes.push(format!(
                "the hypervisor stole {:.1} ms of CPU time (STEAL): it is inside the run, IRQ and idle times above, mostly the run times of the tasks it hit; /proc leaves it out of their charge",
                totals.steal_ns as f64 / 1e6
            ));
        }
        Report {
            schema: SCHEMA.into(),
            complete: ctx.complete,
            duration_ns: wall_ns,
            totals,
            cpus,
            orphan,
            tasks,
            missing_tracepoints: ctx.missing_tracepoints.to_vec(),
            notes,
            machine: ctx.machine.clone(),
        }
    }

    /// The tasks whose tid or tgid is in `pids` (all when empty).
    pub fn tasks_of(&self, pids: &[u32]) -> Vec<&TaskReport> {
        self.tasks.iter().filter(|t| pids.is_empty() || pids.contains(&t.tid) || pids.contains(&t.tgid)).collect()
    }

    pub fn task(&self, tid: u32) -> Option<&TaskReport> {
        self.tasks.iter().find(|t| t.tid == tid)
    }
}

impl TaskReport {
    /// Softirq time done on its behalf (always measured live).
    pub fn served_softirq_ns(&self) -> u64 {
        self.time.served_softirq_ns.unwrap_or(0)
    }
}

fn served_by_cpu(raw: &RawSnapshot, ctx: &Context, tid: u32, idle_cpu: Option<(usize, usize)>) -> BTreeMap<usize, BTreeMap<String, u64>> {
    let Some(per_cpu) = raw.tasks.get(&tid) else { return BTreeMap::new() };
    per_cpu
        .iter()
        .enumerate()
        .filter(|(idx, _)| idle_cpu.is_none_or(|(i, _)| i == *idx))
        .map(|(idx, c)| (ctx.cpus.get(idx).copied().unwrap_or(idx), by_vector(&c.served_softirq_ns)))
        .filter(|(_, m)| !m.is_empty())
        .collect()
}

fn task_report(
    raw: &RawSnapshot,
    ctx: &Context,
    tid: u32,
    idle_cpu: Option<(usize, usize)>,
    c: &TaskCounters,
    proc_stat: Option<TaskStat>,
) -> TaskReport {
    let (tgid, bpf_comm) = raw.identity.get(&tid).cloned().unwrap_or((tid, String::new()));
    let comm = match (&idle_cpu, &proc_stat) {
        (Some((_, cpu_no)), _) => format!("swapper/{cpu_no}"),
        (None, Some(s)) if bpf_comm.is_empty() => s.comm.clone(),
        _ if bpf_comm.is_empty() => "?".into(),
        _ => bpf_comm,
    };
    let kernel_thread = proc_stat.as_ref().map(|s| s.kernel_thread).unwrap_or(false);
    let kind = TaskKind::classify(tid, &comm, kernel_thread);
    let mut stolen_by_irq_ns = BTreeMap::new();
    for (&(t, irq), per_cpu) in raw.task_irqs.range((tid, i32::MIN)..=(tid, i32::MAX)) {
        debug_assert_eq!(t, tid);
        let ns: u64 = match idle_cpu {
            Some((idx, _)) => per_cpu.get(idx).copied().unwrap_or(0),
            None => per_cpu.iter().sum(),
        };
        if ns > 0 {
            *stolen_by_irq_ns.entry(ctx.irq_names.name(irq)).or_insert(0) += ns;
        }
    }
    let proc_charged_ns = match (&idle_cpu, &proc_stat) {
        (None, Some(s)) => {
            let ticks = s.charged_ticks.saturating_sub((ctx.baseline_ticks)(tid));
            Some(ticks * 1_000_000_000 / ctx.ticks_per_second.max(1))
        }
        _ => None,
    };
    let proc_error = match proc_charged_ns {
        Some(p) if c.run_ns > 0 => Some((p as f64 - c.run_ns as f64) / c.run_ns as f64),
        _ => None,
    };
    TaskReport {
        tid,
        tgid,
        comm,
        kind,
        cpu: idle_cpu.map(|(_, n)| n),
        time: TaskTime::new(c.run_ns, c.hardirq_ns, c.softirq_total(), Some(c.served_softirq_total())),
        stolen_by_irq_ns,
        stolen_by_softirq_ns: by_vector(&c.softirq_ns),
        served_by_softirq_ns: by_vector(&c.served_softirq_ns),
        served_by_cpu_ns: served_by_cpu(raw, ctx, tid, idle_cpu),
        served_by_thread_ns: c.served_by_thread_ns,
        proc_charged_ns,
        proc_error,
        exited: idle_cpu.is_none() && proc_stat.is_none(),
        switches_in: c.switches_in,
    }
}

#[cfg(test)]
mod tests {
    use super::super::raw::{CpuState, CpuTotals};
    use super::*;

    fn raw() -> RawSnapshot {
        let mut raw = RawSnapshot { start_ns: 0, taken_ns: 1_000_000, ..Default::default() };
        let st = CpuState { initialised: true, last_ts: 1_000_000, ..Default::default() };
        let mut tot = CpuTotals::default();
        tot.orphan_softirq_ns[9] = 50;
        raw.cpus = vec![(st.clone(), tot), (st, CpuTotals::default())];
        let idle0 = TaskCounters { run_ns: 400_000, hardirq_ns: 10_000, ..Default::default() };
        let idle1 = TaskCounters { run_ns: 900_000, ..Default::default() };
        raw.tasks.insert(0, vec![idle0, idle1]);
        let mut hog = TaskCounters { run_ns: 500_000, hardirq_ns: 5_000, ..Default::default() };
        hog.softirq_ns[3] = 85_000;
        let mut server = TaskCounters { run_ns: 100_000, ..Default::default() };
        server.served_softirq_ns[3] = 80_000;
        raw.tasks.insert(42, vec![hog, TaskCounters::default()]);
        raw.tasks.insert(43, vec![TaskCounters::default(), server]);
        raw.identity.insert(42, (42, "hog".into()));
        raw.identity.insert(43, (43, "server".into()));
        raw.task_irqs.insert((0, -1), vec![10_000, 0]);
        raw.task_irqs.insert((42, 24), vec![5_000, 0]);
        raw
    }

    fn build(raw: &RawSnapshot) -> Report {
        let names = IrqNames::default();
        let proc_now = |_tgid: u32, tid: u32| match tid {
            42 => Some(TaskStat { comm: "hog".into(), state: 'S', ppid: 1, kernel_thread: false, charged_ticks: 160, start_ticks: 0 }),
            _ => None,
        };
        let baseline = |tid: u32| if tid == 42 { 100 } else { 0 };
        let ctx = Context {
            cpus: &[0, 1],
            irq_names: &names,
            proc_now: &proc_now,
            baseline_ticks: &baseline,
            ticks_per_second: 100_000,
            steal_ns: &|cpu| if cpu == 1 { 7_000 } else { 0 },
            missing_tracepoints: &[],
            machine: &Default::default(),
            complete: true,
        };
        Report::build(raw, &ctx)
    }

    #[test]
    fn cpu_parts_add_up_and_tasks_sort_by_stolen() {
        let r = build(&raw());
        assert_eq!(r.schema, SCHEMA);
        assert_eq!(r.cpus[0].unaccounted_ns, 0);
        assert_eq!(r.cpus[1].unaccounted_ns, 0);
        assert_eq!(r.cpus[0].time.idle_ns, 400_000);
        // Steal is reported per CPU number, summed, and explained in a note.
        assert_eq!((r.cpus[0].steal_ns, r.cpus[1].steal_ns, r.totals.steal_ns), (0, 7_000, 7_000));
        assert!(r.notes.iter().any(|n| n.contains("hypervisor stole")), "{:?}", r.notes);
        assert_eq!(r.cpus[0].softirq_by_vector_ns["NET_RX"], 85_000);
        assert_eq!(r.tasks[0].comm, "hog");
        assert_eq!(r.tasks[0].time.stolen_ns, 90_000);
        assert_eq!(r.tasks[0].stolen_by_irq_ns["24"], 5_000);
        // Idle tasks are split per CPU, each with its own IRQ breakdown.
        let idle0 = r.tasks.iter().find(|t| t.tid == 0 && t.cpu == Some(0)).unwrap();
        assert_eq!(idle0.stolen_by_irq_ns["LOC:local-timer"], 10_000);
        assert_eq!(idle0.comm, "swapper/0");
        assert_eq!(idle0.kind, TaskKind::Idle);
        assert_eq!(r.orphan.softirq_by_vector_ns["RCU"], 50);
        assert_eq!(r.task(43).unwrap().served_by_softirq_ns["NET_RX"], 80_000);
        assert_eq!(r.task(43).unwrap().served_by_cpu_ns[&1]["NET_RX"], 80_000);
        assert!(!r.task(43).unwrap().served_by_cpu_ns.contains_key(&0));
    }

    #[test]
    fn proc_error_and_exited_tasks() {
        let r = build(&raw());
        let hog = r.task(42).unwrap();
        // 60 ticks at 100000 Hz = 600 us charged for 500 us of real run.
        assert_eq!(hog.proc_charged_ns, Some(600_000));
        assert!((hog.proc_error.unwrap() - 0.2).abs() < 1e-9);
        let server = r.task(43).unwrap();
        assert!(server.exited);
        assert_eq!(server.proc_charged_ns, None);
        assert_eq!(r.tasks_of(&[43]).len(), 1);
    }

    #[test]
    fn the_shared_times_are_flattened_and_the_document_reads_back() {
        let r = build(&raw());
        let server = r.task(43).unwrap();
        assert_eq!(server.time, TaskTime::new(100_000, 0, 0, Some(80_000)));
        assert_eq!(r.totals.served_softirq_ns, 80_000);
        // The order written (serde_json::Value would sort the keys): the
        // flattened TaskTime comes out where it is declared,
        // served_softirq_ns included.
        let order = |text: &str| {
            let mut keys: Vec<(usize, String)> = serde_json::from_str::<serde_json::Map<String, serde_json::Value>>(text)
                .unwrap()
                .keys()
                .map(|k| (text.find(&format!("\"{k}\":")).unwrap(), k.clone()))
                .collect();
            keys.sort();
            keys.into_iter().map(|(_, k)| k).collect::<Vec<_>>()
        };
        assert_eq!(
            order(&serde_json::to_string(server).unwrap()),
            [
                "tid",
                "tgid",
                "comm",
                "kind",
                "run_ns",
                "stolen_ns",
                "stolen_hardirq_ns",
                "stolen_softirq_ns",
                "served_softirq_ns",
                "stolen_by_irq_ns",
                "stolen_by_softirq_ns",
                "served_by_softirq_ns",
                "served_by_cpu_ns",
                "served_by_thread_ns",
                "proc_charged_ns",
                "proc_error",
                "exited",
                "switches_in"
            ]
        );
        assert_eq!(
            order(&serde_json::to_string(&r.cpus[1]).unwrap())[..6],
            ["cpu", "wall_ns", "run_ns", "idle_ns", "hardirq_ns", "softirq_ns"]
        );
        let text = serde_json::to_string(&r).unwrap();
        assert_eq!(serde_json::from_str::<Report>(&text).unwrap(), r);
    }
}
