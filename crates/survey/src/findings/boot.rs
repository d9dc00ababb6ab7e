//! Boot-time isolation, recommended from what the probe measured on each
//! CPU while it ran there alone (issue 51): `nohz_full=` where the local
//! timer kept firing, `rcu_nocbs=` where RCU callbacks ran in the probe's
//! windows, `isolcpus=domain,` where the scheduler's load balancing (the
//! SCHED softirq) did. Each becomes a `[boot]` option of the survey's profile, with
//! the number behind it; `control apply --boot` writes them for the next
//! boot, and `lab compare` boots a guest with them to check the prediction.
//!
//! CPU 0 is never recommended: the kernel needs a housekeeping CPU (the
//! timekeeping tick, the offloaded RCU callbacks, unbound work) and takes
//! the boot CPU by default, so no layout made here isolates every CPU.
//! Not recommended from measurements yet: `isolcpus=managed_irq` (the
//! survey does not tell managed IRQs apart without debugfs) and
//! `kthread_cpus=`.

use super::{pct, short_ns, Out, Rec, MS};
use crate::doc::*;

/// A CPU with one task running and its tick stopped (nohz_full) takes
/// about one local timer interrupt per second or fewer (the residual 1 Hz
/// tick, offloaded to a housekeeping CPU since Linux 4.17); the slowest
/// periodic tick, HZ=100, takes 100. A rate at or above this is the tick.
const TICKING_PER_S: f64 = 10.0;
/// The label the gap-source monitor gives the local timer's system vector.
const LOCAL_TIMER: &str = "irq LOC timer";

/// The boot CPU: kept for housekeeping, never recommended for isolation.
const HOUSEKEEPING_CPU: usize = 0;

/// Adds a finding for each CPU whose tick, RCU callbacks or load balancing
/// the probe saw, and one recommendation per boot option answering them all.
pub fn isolation(survey: &Survey, out: &mut Out) {
    let BootState { isolated, preempt_rt } = BootState::of(survey);
    let mut nohz = Vec::new();
    let mut rates = Vec::new();
    let mut nocbs = Vec::new();
    let mut balanced = Vec::new();
    for cpu in survey.cpus.iter().filter(|c| c.cpu != HOUSEKEEPING_CPU) {
        if let Some(tick) = Tick::of(cpu) {
            match tick_finding(cpu.cpu, &tick, isolated.nohz_full.contains(&cpu.cpu), out) {
                TickFinding::Ticking(id) => {
                    // nohz_full= alone does not stop the tick under a
                    // real-time task on PREEMPT_RT (raise_ktimers says
                    // why): both answer the finding, made together.
                    if preempt_rt {
                        raise_ktimers(cpu.cpu, &id, out);
                    }
                    nohz.push((cpu.cpu, id));
                    rates.push(format!("CPU {}: {}", cpu.cpu, tick.figure()));
                }
                TickFinding::KeptUnderNohzFull(id) if preempt_rt => raise_ktimers(cpu.cpu, &id, out),
                TickFinding::KeptUnderNohzFull(_) | TickFinding::None => {}
            }
        }
        if let Some(rcu) = Seen::of(cpu, is_rcu_callbacks) {
            if !isolated.rcu_nocbs.contains(&cpu.cpu) {
                nocbs.push(rcu_finding(cpu.cpu, &rcu, out));
            }
        }
        if let Some(balance) = Seen::of(cpu, is_load_balancing) {
            if !isolated.domain.contains(&cpu.cpu) {
                balanced.push(balance_finding(cpu, &balance, out));
            }
        }
    }
    recommend_for_all(out, &nohz, |list| {
        Rec::new(
            Action::BootIsolation,
            None,
            format!("Stop the timer tick on CPU {list} at boot (nohz_full={list})"),
            format!(
                "the tick stops on a CPU with one runnable task; CPU {HOUSEKEEPING_CPU} keeps the timekeeping tick and takes the \
                 offloaded work, and every kernel entry and exit on CPU {list} costs a little more (context tracking)"
            ),
        )
        .setting(Declared::Boot { option: format!("nohz_full={list}") })
        .predicted(format!(
            "with one task running on CPU {list}, its local timer falls toward 1/s or fewer ({}), at the next boot",
            rates.join("; ")
        ))
    });
    recommend_for_all(out, &nocbs, |list| {
        Rec::new(
            Action::BootIsolation,
            None,
            format!("Run CPU {list}'s RCU callbacks elsewhere at boot (rcu_nocbs={list})"),
            format!("the callbacks then run in rcuo kthreads that can be kept on CPU {HOUSEKEEPING_CPU}; that CPU takes their load"),
        )
        .setting(Declared::Boot { option: format!("rcu_nocbs={list}") })
        .predicted(format!("no RCU callback work in CPU {list}'s windows, at the next boot"))
    });
    recommend_for_all(out, &balanced, |list| {
        Rec::new(
            Action::BootIsolation,
            None,
            format!("Keep CPU {list} out of the scheduler's load balancing at boot (isolcpus=domain,{list})"),
            format!(
                "no SCHED softirq on CPU {list}, and on PREEMPT_RT no ksoftirqd woken to run it (a second runnable task, \
                 which keeps the tick on under nohz_full); the scheduler then never moves a task onto or off CPU {list}: \
                 the time-critical task must be placed there by its affinity"
            ),
        )
        .setting(Declared::Boot { option: format!("isolcpus=domain,{list}") })
        .predicted(format!("no SCHED softirq in CPU {list}'s windows, at the next boot"))
    });
}

/// One recommendation, made by `rec` from the CPU list, answering each
/// of `found` (a CPU and its finding's id).
fn recommend_for_all(out: &mut Out, found: &[(usize, String)], rec: impl Fn(&str) -> Rec) {
    let cpus: Vec<usize> = found.iter().map(|(c, _)| *c).collect();
    let Some(&first) = cpus.first() else { return };
    let list = irqlab_host::rt::format_cpu_list(&cpus);
    for (_, id) in found {
        let mut r = rec(&list);
        r.cpu = Some(first);
        out.recommend(id, r);
    }
}

/// What this module's recommendations start from: the running kernel's
/// isolation, and whether it is PREEMPT_RT. Read once per survey.
pub(super) struct BootState {
    isolated: Isolated,
    preempt_rt: bool,
}

impl BootState {
    pub(super) fn of(survey: &Survey) -> BootState {
        let preempt_rt = super::setting(survey, "preemption").is_some_and(|p| p.starts_with("PREEMPT_RT"));
        BootState { isolated: Isolated::of(survey), preempt_rt }
    }

    /// Whether the boot options this module recommends would take
    /// `source` off `cpu` (the quiet-CPU choice counts it as movable):
    /// the local timer (`nohz_full=`; on PREEMPT_RT with the ktimers
    /// raise, also where nohz_full is in force and the tick kept firing),
    /// RCU callbacks (`rcu_nocbs=`) and load balancing
    /// (`isolcpus=domain,`), on any CPU but the housekeeping CPU, unless
    /// the running kernel already has the option for that CPU (then what
    /// is left stays).
    pub(super) fn removes(&self, cpu: usize, source: &Source) -> bool {
        let isolated = &self.isolated;
        if cpu == HOUSEKEEPING_CPU {
            false
        } else if source.kind == SourceKind::Irq && source.label == LOCAL_TIMER {
            !isolated.nohz_full.contains(&cpu) || self.preempt_rt
        } else if is_rcu_callbacks(source) {
            !isolated.rcu_nocbs.contains(&cpu)
        } else if is_load_balancing(source) {
            !isolated.domain.contains(&cpu)
        } else {
            false
        }
    }
}

/// The running kernel's isolation, from the survey's "isolated CPUs"
/// setting (`isolated 2-3, nohz_full 1, rcu_nocbs 1`).
#[derive(Default)]
struct Isolated {
    /// `/sys/devices/system/cpu/isolated`: out of the scheduler's domains.
    domain: Vec<usize>,
    nohz_full: Vec<usize>,
    rcu_nocbs: Vec<usize>,
}

impl Isolated {
    fn of(survey: &Survey) -> Isolated {
        let mut isolated = Isolated::default();
        let Some(text) = super::setting(survey, "isolated CPUs") else { return isolated };
        for part in text.split(", ") {
            let Some((key, list)) = part.split_once(' ') else { continue };
            let cpus = irqlab_host::rt::parse_cpu_list(list).unwrap_or_default();
            match key {
                "isolated" => isolated.domain = cpus,
                "nohz_full" => isolated.nohz_full = cpus,
                "rcu_nocbs" => isolated.rcu_nocbs = cpus,
                _ => {}
            }
        }
        isolated
    }
}

/// The tick as the probe saw it on one CPU: its rate (from
/// `/proc/interrupts`, over the probe's spin), and its share of the
/// worst window near 1 ms (from the gap sources).
struct Tick {
    per_s: Option<f64>,
    /// The load whose curve the figures come from.
    load: Load,
    /// The local timer's time in the worst window near 1 ms, and that window.
    in_window: Option<(u64, u64)>,
}

impl Tick {
    /// The idle run's figures when there is one (the tick does not depend
    /// on the load), else the first run's; `None` when neither a rate nor
    /// a source was recorded.
    fn of(cpu: &CpuSurvey) -> Option<Tick> {
        let curve = cpu.curves.iter().find(|c| c.load == Load::None).or(cpu.curves.first())?;
        let per_s = curve.interrupts.as_ref().map(|i| i.local_timer_per_s);
        let in_window = curve
            .sources
            .as_ref()
            .and_then(|s| s.nearest(MS))
            .and_then(|w| w.sources.iter().find(|s| s.label == LOCAL_TIMER).map(|s| (s.ns, w.window_ns)));
        (per_s.is_some() || in_window.is_some()).then_some(Tick { per_s, load: curve.load, in_window })
    }

    /// The rate, or where no rate was recorded, the timer seen in a window.
    fn ticking(&self) -> bool {
        match self.per_s {
            Some(rate) => rate >= TICKING_PER_S,
            None => self.in_window.is_some(),
        }
    }

    fn figure(&self) -> String {
        let mut parts = Vec::new();
        if let Some(rate) = self.per_s {
            parts.push(format!("{rate:.0} local timer interrupts/s"));
        }
        if let Some((ns, window)) = self.in_window {
            parts.push(format!("{} ({}) of the worst {} window", short_ns(ns), pct(ns as f64 / window.max(1) as f64), short_ns(window)));
        }
        parts.join(", ")
    }
}

/// What the tick finding of a CPU was, with its id.
enum TickFinding {
    None,
    /// The tick can be stopped at boot (the CPU is not nohz_full yet).
    Ticking(String),
    /// Already nohz_full, and the tick kept firing.
    KeptUnderNohzFull(String),
}

/// The finding for a CPU whose tick kept firing under one task.
fn tick_finding(cpu: usize, tick: &Tick, nohz_full: bool, out: &mut Out) -> TickFinding {
    if !tick.ticking() {
        return TickFinding::None;
    }
    let measured = format!("{} while the probe ran alone on CPU {cpu} ({} load)", tick.figure(), tick.load.name());
    let rule = "≥ 10 local timer interrupts/s with one task on the CPU is the periodic tick (HZ ≥ 100); a nohz_full CPU takes about 1/s";
    if nohz_full {
        // Already asked for at boot: the kernel kept the tick on for a reason
        // of its own (a second runnable task, a timer, RCU, irq_work, perf).
        return TickFinding::KeptUnderNohzFull(out.find(
            format!("tick-kept-cpu{cpu}"),
            Severity::Note,
            Some(cpu),
            format!("CPU {cpu} is nohz_full, yet its timer tick kept firing while one task ran"),
            measured,
            rule,
        ));
    }
    TickFinding::Ticking(out.find(
        format!("tick-cpu{cpu}"),
        Severity::Note,
        Some(cpu),
        format!("CPU {cpu}: the timer tick interrupts a task running alone"),
        measured,
        rule,
    ))
}

/// On PREEMPT_RT, a nohz_full CPU keeps its tick under a real-time task
/// because the TIMER softirq runs in `ktimers/N` at SCHED_FIFO 1: the task
/// starves it, and once a timer expires on the CPU the softirq stays
/// pending and the tick is re-armed every jiffy (docs/lab.md, "Why the
/// tick keeps firing on 6.12-rt": 488-543 local timer interrupts in 3 s
/// under a FIFO 50 spinner, 13 with ktimers/1 at FIFO 51). The answer:
/// `ktimers/N` above the time-critical task, which the probe stands for;
/// recommended beside `nohz_full=` on a CPU not yet tickless, and alone
/// on one that is.
fn raise_ktimers(cpu: usize, finding: &str, out: &mut Out) {
    let priority = crate::run::PROBE_PRIORITY + 1;
    let rec = Rec::new(
        Action::RaiseTimerThread,
        Some(cpu),
        format!("Run CPU {cpu}'s timer softirq thread above the time-critical task (ktimers/{cpu} at FIFO {priority})"),
        format!(
            "on PREEMPT_RT the timers' softirq runs in ktimers/{cpu} at FIFO 1, below any real-time task; starved, it leaves the \
             TIMER softirq pending and a nohz_full CPU re-arms the tick every jiffy, so nohz_full= alone does not stop it. Above the task (the probe ran at FIFO {}; use \
             your task's priority + 1) each expired timer costs a short preemption by ktimers/{cpu} instead",
            crate::run::PROBE_PRIORITY
        ),
    )
    .setting(Declared::Threads { matched: format!("comm:ktimers/{cpu}"), policy: format!("fifo:{priority}"), cpus: None, kernel_thread: true })
    .predicted(format!("with one real-time task running on CPU {cpu}, its local timer falls toward 1/s or fewer"));
    out.recommend(finding, rec);
}

/// Work of one kind the probe saw on one CPU: the most a source of that
/// kind took of any worst window, and which source it was.
struct Seen {
    label: String,
    ns: u64,
    window_ns: u64,
}

impl Seen {
    fn of(cpu: &CpuSurvey, kind: impl Fn(&Source) -> bool) -> Option<Seen> {
        let windows = cpu.curves.iter().filter_map(|c| c.sources.as_ref()).flat_map(|s| &s.windows);
        let seen = windows.flat_map(|w| w.sources.iter().map(move |s| (s, w.window_ns))).filter(|(s, _)| kind(s));
        seen.max_by_key(|(s, _)| s.ns).map(|(s, window_ns)| Seen { label: s.label.clone(), ns: s.ns, window_ns })
    }

    fn figure(&self) -> String {
        format!("{} took {} of a worst {} window", self.label, short_ns(self.ns), short_ns(self.window_ns))
    }
}

/// The scheduler's load balancing: the SCHED softirq, raised by the tick.
fn is_load_balancing(source: &Source) -> bool {
    source.kind == SourceKind::Softirq && source.label == "SCHED"
}

/// The RCU softirq, or RCU's per-CPU callback thread (`rcuc/N`, where
/// the kernel runs callbacks in threads: PREEMPT_RT).
fn is_rcu_callbacks(source: &Source) -> bool {
    match source.kind {
        SourceKind::Softirq => source.label == "RCU",
        SourceKind::Thread => super::thread_comm(&source.label).is_some_and(|c| c.starts_with("rcuc/")),
        _ => false,
    }
}

fn rcu_finding(cpu: usize, rcu: &Seen, out: &mut Out) -> (usize, String) {
    let id = out.find(
        format!("rcu-cpu{cpu}"),
        Severity::Note,
        Some(cpu),
        format!("CPU {cpu}: RCU callbacks ran in the probe's windows"),
        rcu.figure(),
        "RCU callback work (the RCU softirq, or rcuc/N threads) seen among a worst window's sources",
    );
    (cpu, id)
}

/// Load balancing on a CPU running one task; the CPU's ksoftirqd, which
/// runs the SCHED softirq on PREEMPT_RT, is named beside it when it ran.
fn balance_finding(cpu: &CpuSurvey, balance: &Seen, out: &mut Out) -> (usize, String) {
    let ksoftirqd = format!("ksoftirqd/{}", cpu.cpu);
    let is_ksoftirqd = |s: &Source| s.kind == SourceKind::Thread && super::thread_comm(&s.label) == Some(ksoftirqd.as_str());
    let beside = Seen::of(cpu, is_ksoftirqd).map(|t| format!("; {}", t.figure())).unwrap_or_default();
    let id = out.find(
        format!("balance-cpu{}", cpu.cpu),
        Severity::Note,
        Some(cpu.cpu),
        format!("CPU {}: the scheduler's load balancing ran while one task ran alone", cpu.cpu),
        format!("{}{beside}", balance.figure()),
        "the SCHED softirq (load balancing, raised by the tick) among a worst window's sources",
    );
    (cpu.cpu, id)
}
