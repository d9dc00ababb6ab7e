//! Loading, attaching and reading the BPF accounting programs.
//!
//! The skeleton borrows storage for the BPF object for its whole life (as
//! in the sched_ext schedulers), so the caller owns a [`Storage`] and the
//! [`Session`] borrows it:
//!
//! ```no_run
//! let mut storage = irqlab_measure::accounting::Storage::default();
//! let mut session = irqlab_measure::accounting::Session::start(&mut storage, Default::default())?;
//! std::thread::sleep(std::time::Duration::from_secs(1));
//! let snapshot = session.snapshot()?;
//! # Ok::<(), irqlab_host::Error>(())
//! ```

use super::procfs::{self, TaskKind};
use super::raw::{CpuState, CpuTotals, RawSnapshot, ReferenceCpu, SlotCharges, TaskCounters};
use super::skel::accounting::{types, AccountingSkel, AccountingSkelBuilder, OpenAccountingSkel};
use super::skel::softirq_sum::{types as sum_types, SoftirqSumSkel, SoftirqSumSkelBuilder};
use irqlab_host::error::{Error, Result};
use irqlab_host::privilege;
use libbpf_rs::skel::{OpenSkel, Skel, SkelBuilder};
use libbpf_rs::{MapCore, MapFlags, OpenObject};
use std::collections::{BTreeMap, HashMap};
use std::mem::MaybeUninit;

/// Where the loaded BPF objects live while a [`Session`] runs.
pub struct Storage {
    accounting: MaybeUninit<OpenObject>,
    reference: MaybeUninit<OpenObject>,
}

impl Default for Storage {
    fn default() -> Self {
        Storage { accounting: MaybeUninit::uninit(), reference: MaybeUninit::uninit() }
    }
}

/// How to run the accounting.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Also run the plain softirq_entry/exit sum that the totals are
    /// checked against (tests, `--check`).
    pub reference_softirq_sum: bool,
}

/// Tracepoints without which the accounting means nothing.
const REQUIRED: &[&str] = &["irq_handler_entry", "irq_handler_exit", "softirq_entry", "softirq_exit", "sched_switch"];

/// A running accounting: programs attached, maps filling in the kernel.
pub struct Session<'obj> {
    skel: AccountingSkel<'obj>,
    reference: Option<SoftirqSumSkel<'obj>>,
    /// The reference's last_entry/last_exit, attached after the accounting
    /// (detached when dropped).
    reference_last: Vec<libbpf_rs::Link>,
    start_ns: u64,
    online: Vec<usize>,
    /// utime+stime ticks of every thread alive at the start.
    baseline_ticks: HashMap<u32, u64>,
    /// Each online CPU's /proc/stat steal at the start, ns.
    steal_baseline_ns: HashMap<usize, u64>,
    /// Optional tracepoints this kernel lacks (their programs not loaded).
    missing: Vec<String>,
    /// Threads already in the BPF service_threads map.
    service_tids: std::collections::HashSet<u32>,
    /// Read once at the start, recorded in every report.
    machine: irqlab_host::machine::MachineContext,
}

/// Fails with exit 3 naming what is missing: BTF, CAP_BPF, CAP_PERFMON.
pub fn check_prerequisites() -> Result<()> {
    privilege::require_bpf("load and attach the BPF accounting programs")
}

/// Fails with exit 3 naming the first tracepoint the accounting cannot do
/// without that the running kernel lacks.
pub fn check_required_tracepoints() -> Result<()> {
    match irqlab_host::tracepoints::missing(REQUIRED.iter().copied()).map_err(btf_missing)?.first() {
        Some(name) => Err(Error::MissingKernelFeature {
            feature: format!("tracepoint {name}"),
            detail: "the running kernel has no such raw tracepoint in its BTF".into(),
        }),
        None => Ok(()),
    }
}

/// Every optional program and the tracepoint it needs.
fn optional() -> impl Iterator<Item = &'static (&'static str, &'static str)> {
    irqlab_host::tracepoints::SYSTEM_VECTORS.iter().chain(OPTIONAL_BESIDES_VECTORS)
}

/// The optional tracepoints the running kernel lacks: their part of the
/// accounting (named in [`optional`]) is not measured.
pub fn missing_optional_tracepoints() -> Result<Vec<String>> {
    irqlab_host::tracepoints::missing(optional().map(|(_, tp)| *tp)).map_err(btf_missing)
}

fn btf_missing(detail: String) -> Error {
    Error::MissingKernelFeature { feature: "BTF".into(), detail }
}

use irqlab_host::bpf::{err as bpf_err, Plain};

// SAFETY: generated from the programs' BTF: #[repr(C)] structs of integers.
unsafe impl Plain for types::cpu_state {}
unsafe impl Plain for types::cpu_totals {}
unsafe impl Plain for types::task_stats {}
unsafe impl Plain for types::task_irq_key {}
unsafe impl Plain for sum_types::sum_state {}

/// A map key or value as its generated type; an error naming the map when
/// the bytes are too short for it (a map of another build of the program):
/// zeros would read as a quiet CPU.
fn pod<T: Plain>(bytes: &[u8], map: &str) -> Result<T> {
    irqlab_host::bpf::read(bytes).ok_or_else(|| {
        Error::Failed(format!("reading {map}: a record of {} bytes where {} were expected", bytes.len(), std::mem::size_of::<T>()))
    })
}

/// A NUL-terminated `char[16]` from the kernel.
fn comm_of(comm: &[std::ffi::c_char]) -> String {
    let bytes: Vec<u8> = comm.iter().take_while(|&&c| c != 0).map(|&c| c as u8).collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// One BPF `struct task_acc` (a CPU's task slot) as plain values.
fn slot_charges(a: &types::task_acc) -> SlotCharges {
    SlotCharges {
        tid: a.tid,
        tgid: a.tgid,
        comm: comm_of(&a.comm),
        counters: TaskCounters {
            run_ns: a.run_ns,
            hardirq_ns: a.hardirq_ns,
            softirq_ns: a.softirq_ns,
            switches_in: a.switches_in,
            ..Default::default()
        },
        irqs: a.irq.iter().zip(a.irq_ns).filter(|(_, ns)| *ns > 0).map(|(irq, ns)| (*irq, ns)).collect(),
    }
}

/// The BPF `struct cpu_state` as plain values.
fn cpu_state(s: &types::cpu_state) -> CpuState {
    let unflushed = s.slots.iter().filter(|a| a.valid != 0).map(slot_charges).collect();
    let mut unflushed_served = TaskCounters { served_by_thread_ns: s.served_thread_ns, ..Default::default() };
    for (slot, v) in unflushed_served.served_softirq_ns.iter_mut().zip(s.served_softirq_ns) {
        *slot = v;
    }
    CpuState {
        served_tid: s.served_tid,
        unflushed_served,
        initialised: s.initialised != 0,
        last_ts: s.last_ts,
        cur_tid: s.cur_tid,
        hard_irq: (s.hard_depth > 0).then_some(s.hard_irq),
        soft_vec: (s.soft_vec >= 0).then_some(s.soft_vec as usize),
        unflushed,
        flushes: s.flushes,
    }
}

/// The address of a kernel symbol from /proc/kallsyms (None when absent or
/// hidden: kptr_restrict shows zeros).
fn kernel_symbol(name: &str) -> Option<u64> {
    let text = std::fs::read_to_string("/proc/kallsyms").ok()?;
    text.lines().find_map(|line| {
        let mut fields = line.split_whitespace();
        let (addr, _kind, sym) = (fields.next()?, fields.next()?, fields.next()?);
        (sym == name).then(|| u64::from_str_radix(addr, 16).ok()).flatten().filter(|&a| a != 0)
    })
}

/// Runs the task_file iterator that gives already-open sockets their
/// process as owner.
fn seed_socket_owners(skel: &AccountingSkel<'_>) -> Result<()> {
    use std::io::Read;
    let link = skel.progs.seed_socket_owners.attach().map_err(bpf_err("attaching the socket-owner iterator"))?;
    let mut iter = libbpf_rs::Iter::new(&link).map_err(bpf_err("creating the socket-owner iterator"))?;
    let mut sink = Vec::new();
    iter.read_to_end(&mut sink).map_err(|e| Error::io("running the socket-owner iterator", e))?;
    Ok(())
}

/// Optional programs (by BPF function name) and the tracepoint each needs,
/// besides the system vectors' ([`irqlab_host::tracepoints::SYSTEM_VECTORS`]).
const OPTIONAL_BESIDES_VECTORS: &[(&str, &str)] = &[
    ("on_waking", "sched_waking"),
    ("on_sk_data_ready", "sk_data_ready"),
    ("on_udp_drop", "udp_fail_queue_rcv_skb"),
    ("on_sock_recv", "sock_recv_length"),
];

/// Opens the accounting object with the programs [`Session::start`]
/// loads: all but those whose optional tracepoint is `missing`, and the
/// receive hook only where there is no sched_waking.
fn open_accounting<'obj>(storage: &'obj mut MaybeUninit<OpenObject>, missing: &[String]) -> Result<OpenAccountingSkel<'obj>> {
    let mut open = AccountingSkelBuilder::default().open(storage).map_err(bpf_err("opening the accounting BPF object"))?;
    let mut absent: Vec<&str> = optional().filter(|(_, tp)| missing.iter().any(|m| m == tp)).map(|(prog, _)| *prog).collect();
    // Socket owners are learned from wakeups (on_waking); the receive
    // hook, a program run per datagram, stands in only where the
    // kernel has no sched_waking.
    if !absent.contains(&"on_waking") {
        absent.push("on_sock_recv");
    }
    if !sock_def_readable_stands_in(missing) {
        absent.push("on_sock_def_readable");
    }
    for mut prog in open.open_object_mut().progs_mut() {
        if absent.iter().any(|a| prog.name() == *a) {
            prog.set_autoload(false);
        }
    }
    // The iterator runs once, by hand, before the tracepoints attach;
    // sync_cpu only ever runs by hand.
    open.progs.seed_socket_owners.set_autoattach(false);
    open.progs.sync_cpu.set_autoattach(false);
    Ok(open)
}

/// Whether an fentry program on `sock_def_readable` (the sk_data_ready
/// callback of UDP and TCP sockets) stands in for the sk_data_ready
/// tracepoint this kernel lacks (6.1): without either, NET_RX work finds
/// its socket's owner only when it wakes the owner, and work for a
/// receiver that is already awake goes unattributed.
fn sock_def_readable_stands_in(missing: &[String]) -> bool {
    // Asked when the programs are opened and again for the report: one
    // read of /proc/kallsyms (megabytes) per process.
    static PRESENT: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    missing.iter().any(|m| m == "sk_data_ready") && *PRESENT.get_or_init(|| kernel_symbol("sock_def_readable").is_some())
}

/// The optional tracepoints whose work goes unmeasured: the missing ones
/// less those a stand-in covers.
fn unmeasured(missing: Vec<String>) -> Vec<String> {
    let covered = sock_def_readable_stands_in(&missing);
    missing.into_iter().filter(|m| !(covered && m == "sk_data_ready")).collect()
}

/// Loads the accounting programs as [`Session::start`] does, attaches
/// nothing and unloads them: whether this kernel's verifier accepts them
/// (doctor's readiness). Exit 3 naming the program it rejects and why.
pub fn check_loads() -> Result<()> {
    let missing = missing_optional_tracepoints()?;
    let mut storage = MaybeUninit::uninit();
    irqlab_host::bpf_trial::load("the accounting BPF programs", || {
        open_accounting(&mut storage, &missing)?.load().map(drop).map_err(bpf_err("loading the accounting BPF programs"))
    })
}

impl<'obj> Session<'obj> {
    /// Checks privileges and kernel support, loads and attaches the
    /// programs. Exit-3 errors name the missing capability or feature.
    pub fn start(storage: &'obj mut Storage, options: Options) -> Result<Session<'obj>> {
        check_prerequisites()?;
        check_required_tracepoints()?;

        let Storage { accounting, reference } = storage;
        let missing = missing_optional_tracepoints()?;
        let mut skel = open_accounting(accounting, &missing)?.load().map_err(bpf_err("loading the accounting BPF programs"))?;

        let reference = if options.reference_softirq_sum {
            let mut open = SoftirqSumSkelBuilder::default().open(reference).map_err(bpf_err("opening the softirq-sum BPF object"))?;
            // Attached by hand after the accounting (see softirq_sum.bpf.c).
            open.progs.last_entry.set_autoattach(false);
            open.progs.last_exit.set_autoattach(false);
            Some(open.load().map_err(bpf_err("loading the softirq-sum BPF program"))?)
        } else {
            None
        };

        if let Some(bss) = skel.maps.bss_data.as_deref_mut() {
            bss.receiver_wake_fn = kernel_symbol("receiver_wake_function").unwrap_or(0);
            // PREEMPT_RT runs softirqs in task context, preemptibly.
            bss.preemptible_softirqs = u32::from(std::fs::read_to_string("/sys/kernel/realtime").is_ok_and(|s| s.trim() == "1"));
        }
        seed_socket_owners(&skel)?;
        let mut session = Session {
            skel,
            reference,
            reference_last: Vec::new(),
            start_ns: 0,
            online: irqlab_host::rt::online_cpus()?,
            baseline_ticks: HashMap::new(),
            steal_baseline_ns: HashMap::new(),
            missing: unmeasured(missing),
            service_tids: Default::default(),
            machine: irqlab_host::machine::MachineContext::read(),
        };
        session.refresh_service_threads()?;

        if let Some(r) = session.reference.as_mut() {
            r.attach().map_err(bpf_err("attaching the softirq-sum program"))?;
        }
        session.skel.attach().map_err(bpf_err("attaching the accounting programs"))?;
        // The plain sum's entry and exit programs run before the
        // accounting's at every softirq boundary (a tracepoint runs its
        // programs in the order they were attached), its last pair after.
        if let Some(r) = session.reference.as_ref() {
            for prog in [&r.progs.last_entry, &r.progs.last_exit] {
                session.reference_last.push(prog.attach().map_err(bpf_err("attaching the softirq-sum program"))?);
            }
        }
        // Counting starts now that every hook is in, for the accounting and
        // its reference alike, and /proc's charges are taken at the same
        // moment.
        session.baseline_ticks = procfs::all_threads().into_iter().map(|(tid, s)| (tid, s.charged_ticks)).collect();
        session.steal_baseline_ns = session.online.iter().map(|&c| (c, procfs::cpu_steal_ns(c))).collect();
        let start_ns = irqlab_host::rt::monotonic_ns();
        if let Some(r) = session.reference.as_mut() {
            r.maps.bss_data.as_deref_mut().ok_or_else(|| Error::Failed("softirq-sum BPF object has no .bss".into()))?.start_ns = start_ns;
        }
        session.skel.maps.bss_data.as_deref_mut().ok_or_else(|| Error::Failed("BPF object has no .bss".into()))?.start_ns = start_ns;
        session.start_ns = start_ns;
        Ok(session)
    }

    /// Optional tracepoints the running kernel does not have and no
    /// stand-in covers.
    pub fn missing_tracepoints(&self) -> &[String] {
        &self.missing
    }

    /// Start of the measured interval (CLOCK_MONOTONIC ns).
    pub fn start_ns(&self) -> u64 {
        self.start_ns
    }

    /// utime+stime ticks of `tid` when the session started (0 for a thread
    /// born since).
    pub fn baseline_ticks(&self, tid: u32) -> u64 {
        self.baseline_ticks.get(&tid).copied().unwrap_or(0)
    }

    /// Tells the BPF side which threads do interrupt work in task context
    /// (ksoftirqd, irq/, napi/); new ones (a testbed's napi thread) appear
    /// at the next refresh.
    pub fn refresh_service_threads(&mut self) -> Result<()> {
        let mut changed = false;
        // A service thread that exited (a testbed's napi thread after
        // `testbed down`) leaves the map: its tid may be reused by a kernel
        // thread that is not one (the BPF side only asks for kthreads).
        let gone: Vec<u32> = self
            .service_tids
            .iter()
            .copied()
            .filter(|&pid| match std::fs::read_to_string(format!("/proc/{pid}/comm")) {
                Ok(comm) => !TaskKind::classify(pid, comm.trim_end(), true).is_service(),
                Err(_) => true,
            })
            .collect();
        for pid in gone {
            // Already absent is fine: the goal is that it is not there.
            let _ = self.skel.maps.service_threads.delete(&pid.to_ne_bytes());
            self.service_tids.remove(&pid);
            changed = true;
        }
        for pid in irqlab_host::procs::pids().into_iter().map(|p| p as u32) {
            if self.service_tids.contains(&pid) {
                continue;
            }
            let Some(comm) = irqlab_host::procs::comm(pid as i32) else { continue };
            if TaskKind::classify(pid, &comm, true).is_service() {
                self.skel
                    .maps
                    .service_threads
                    .update(&pid.to_ne_bytes(), &[1u8], MapFlags::ANY)
                    .map_err(bpf_err("updating the service-thread map"))?;
                self.service_tids.insert(pid);
                changed = true;
            }
        }
        if changed {
            // Task slots cache the service flag; make them look again.
            if let Some(bss) = self.skel.maps.bss_data.as_deref_mut() {
                bss.service_generation += 1;
            }
        }
        Ok(())
    }

    /// Whether the BPF side treats `tid` as a service thread now.
    pub fn flags_service_thread(&self, tid: u32) -> bool {
        matches!(self.skel.maps.service_threads.lookup(&tid.to_ne_bytes(), MapFlags::ANY), Ok(Some(_)))
    }

    /// Reads every map into plain values, with each CPU's open segment
    /// closed at the moment of reading.
    ///
    /// Each CPU is synchronised first (`sync_cpu`), so a switch the kernel
    /// did not trace is repaired before reading. A CPU flushes its
    /// current task's charges into the task map at each switch; the CPU
    /// states are read before and after the task maps, and the read is
    /// retried when a flush fell in between, so nothing is counted twice
    /// or lost.
    pub fn snapshot(&mut self) -> Result<RawSnapshot> {
        let _ = self.refresh_service_threads();
        self.read_snapshot()
    }

    /// [`Session::snapshot`] without looking for new service threads in
    /// /proc first (a scan of every process): for readers that snapshot
    /// every few ms and call [`Session::refresh_service_threads`] now and
    /// then themselves.
    pub fn read_snapshot(&mut self) -> Result<RawSnapshot> {
        let synced_ns = irqlab_host::rt::monotonic_ns();
        self.sync_every_cpu();
        let mut attempt = 0;
        loop {
            attempt += 1;
            let (before, _) = self.read_cpus()?;
            let (tasks, identity, task_irqs) = self.read_tasks()?;
            let taken_ns = irqlab_host::rt::monotonic_ns();
            let (after, totals) = self.read_cpus()?;
            let raced = before.iter().zip(&after).any(|(b, a)| b.flushes != a.flushes || a.flushes % 2 == 1);
            if raced && attempt < 20 {
                continue;
            }
            let reference_cpus = self.read_reference()?;
            let read_ns = irqlab_host::rt::monotonic_ns();
            let cpus = after.into_iter().zip(totals).collect();
            let mut raw =
                RawSnapshot { start_ns: self.start_ns, taken_ns, cpus, tasks, identity, task_irqs, reference_cpus, synced_ns, read_ns };
            raw.close_open_segments();
            return Ok(raw);
        }
    }

    /// Runs the `sync_cpu` program on every online CPU (an IPI each): a
    /// context switch the kernel did not trace is repaired and the open
    /// segment closed there before the maps are read. Best effort: a CPU
    /// that cannot be reached keeps its state as the last event left it.
    fn sync_every_cpu(&self) {
        const BPF_F_TEST_RUN_ON_CPU: u32 = 1;
        for &cpu in &self.online {
            let input = libbpf_rs::ProgramInput { cpu: cpu as u32, flags: BPF_F_TEST_RUN_ON_CPU, ..Default::default() };
            let _ = self.skel.progs.sync_cpu.test_run(input);
        }
    }

    /// Per-CPU values of a per-CPU map's single entry, online CPUs only.
    fn online_values(&self, per_cpu: Vec<Vec<u8>>) -> Vec<Vec<u8>> {
        self.online.iter().map(|&c| per_cpu.get(c).cloned().unwrap_or_default()).collect()
    }

    fn read_cpus(&self) -> Result<(Vec<CpuState>, Vec<CpuTotals>)> {
        let maps = &self.skel.maps;
        let zero = 0u32.to_ne_bytes();
        let states = maps.cpu_states.lookup_percpu(&zero, MapFlags::ANY).map_err(bpf_err("reading cpu_states"))?.unwrap_or_default();
        let totals = maps.cpu_totals.lookup_percpu(&zero, MapFlags::ANY).map_err(bpf_err("reading cpu_totals"))?.unwrap_or_default();
        let states = self.online_values(states).iter().map(|b| Ok(cpu_state(&pod(b, "cpu_states")?))).collect::<Result<_>>()?;
        let totals = self
            .online_values(totals)
            .iter()
            .map(|b| {
                let t: types::cpu_totals = pod(b, "cpu_totals")?;
                Ok(CpuTotals {
                    hardirq_in_softirq_ns: t.hardirq_in_softirq_ns,
                    orphan_softirq_ns: t.orphan_softirq_ns,
                    orphan_thread_ns: t.orphan_thread_ns,
                    anomalies: t.anomalies,
                    hidden_switches: t.hidden_switches,
                    dropped_tasks: t.dropped_tasks,
                    socket_events: t.socket_events,
                    socket_events_no_owner: t.socket_events_no_owner,
                    socket_events_outside: t.socket_events_outside,
                })
            })
            .collect::<Result<_>>()?;
        Ok((states, totals))
    }

    /// A plain softirq sum's per-CPU state, online CPUs only.
    fn read_reference(&self) -> Result<Option<Vec<ReferenceCpu>>> {
        let Some(r) = &self.reference else { return Ok(None) };
        let zero = 0u32.to_ne_bytes();
        let per_cpu = r.maps.softirq_sums.lookup_percpu(&zero, MapFlags::ANY).map_err(bpf_err("reading softirq_sums"))?.unwrap_or_default();
        let cpus = self
            .online_values(per_cpu)
            .iter()
            .map(|bytes| {
                let s: sum_types::sum_state = pod(bytes, "softirq_sums")?;
                Ok(ReferenceCpu {
                    sum_ns: s.sum_ns,
                    count: s.count,
                    max_ns: s.max_ns,
                    windows: s.windows,
                    window_in_ns: s.window_in_ns,
                    window_out_ns: s.window_out_ns,
                })
            })
            .collect::<Result<_>>()?;
        Ok(Some(cpus))
    }

    #[allow(clippy::type_complexity)]
    fn read_tasks(&self) -> Result<(BTreeMap<u32, Vec<TaskCounters>>, BTreeMap<u32, (u32, String)>, BTreeMap<(u32, i32), Vec<u64>>)> {
        let maps = &self.skel.maps;
        let online = &self.online;
        let pick = |per_cpu: Vec<Vec<u8>>| self.online_values(per_cpu);
        let mut tasks = BTreeMap::new();
        let mut identity = BTreeMap::new();
        for key in maps.task_stats.keys() {
            let Some(per_cpu) = maps.task_stats.lookup_percpu(&key, MapFlags::ANY).map_err(bpf_err("reading task_stats"))? else {
                continue; // removed between keys() and lookup
            };
            let tid = u32::from_ne_bytes(key[..4].try_into().expect("u32 key"));
            let mut counters = Vec::with_capacity(online.len());
            for bytes in pick(per_cpu) {
                let s: types::task_stats = pod(&bytes, "task_stats")?;
                if s.comm[0] != 0 && !identity.contains_key(&tid) {
                    identity.insert(tid, (s.tgid, comm_of(&s.comm)));
                }
                counters.push(TaskCounters {
                    run_ns: s.run_ns,
                    hardirq_ns: s.hardirq_ns,
                    softirq_ns: s.softirq_ns,
                    served_softirq_ns: s.served_softirq_ns,
                    served_by_thread_ns: s.served_by_thread_ns,
                    switches_in: s.switches_in,
                });
            }
            tasks.insert(tid, counters);
        }

        let mut task_irqs = BTreeMap::new();
        for key in maps.task_irq_ns.keys() {
            let Some(per_cpu) = maps.task_irq_ns.lookup_percpu(&key, MapFlags::ANY).map_err(bpf_err("reading task_irq_ns"))? else {
                continue;
            };
            let k: types::task_irq_key = pod(&key, "task_irq_ns")?;
            let per_cpu = pick(per_cpu).iter().map(|b| pod::<u64>(b, "task_irq_ns")).collect::<Result<_>>()?;
            task_irqs.insert((k.tid, k.irq), per_cpu);
        }

        Ok((tasks, identity, task_irqs))
    }

    /// The CPU numbers the snapshot's per-CPU vectors are indexed by.
    pub fn online_cpus(&self) -> &[usize] {
        &self.online
    }
}

impl Session<'_> {
    /// A snapshot turned into the `irqlab/accounting/v1` report, with the
    /// /proc charges of every task read now.
    pub fn report(&mut self, complete: bool) -> Result<super::Report> {
        let raw = self.snapshot()?;
        Ok(self.report_from(&raw, complete))
    }

    /// The report of an already taken snapshot.
    pub fn report_from(&self, raw: &RawSnapshot, complete: bool) -> super::Report {
        let names = super::names::IrqNames::from_proc();
        let baseline = |tid: u32| self.baseline_ticks(tid);
        let steal = |cpu: usize| procfs::cpu_steal_ns(cpu).saturating_sub(self.steal_baseline_ns.get(&cpu).copied().unwrap_or(0));
        let ctx = super::report::Context {
            cpus: &self.online,
            irq_names: &names,
            proc_now: &procfs::task_stat,
            baseline_ticks: &baseline,
            ticks_per_second: procfs::ticks_per_second(),
            steal_ns: &steal,
            missing_tracepoints: &self.missing,
            machine: &self.machine,
            complete,
        };
        super::Report::build(raw, &ctx)
    }
}
