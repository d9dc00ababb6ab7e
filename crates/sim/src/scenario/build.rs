//! [`Spec`] → a fresh [`Sim`], one function per section, in the order
//! that fixes every index (tasks, lines, devices, sockets, servers) and so
//! every result. What is left to check here needs the whole simulator:
//! names that must be unique or exist, sockets something sends to, and
//! the bottom-half policy's parameters.

use super::spec::*;
use super::{RunParams, Scenario};
use crate::engine::rng_stream;
use crate::kernel::{IrqKind, IrqLine, MachineConfig, Sim};
use crate::net::{wire_ns, Nic, Proto, Socket, Source};
use crate::probe::{log_windows, Probe};
use crate::server::{Periodic as PeriodicServer, Server, Sporadic};
use crate::softirq::{self, SoftirqModel};
use crate::task::{Behavior, Policy, Task, TaskKind};
use crate::workload::{CpuLoop, DiskReader, MediaPlayer, Periodic, UdpServer};
use irqlab_analysis::{InputError, Nanos};
use std::collections::{BTreeMap, BTreeSet, VecDeque};

/// Builds a fresh simulator of CPU `cpu` for one run of `sc`. On a
/// machine of several CPUs each CPU is a simulator of its own with the
/// same tables (NICs, sources, sockets: so a packet's indices mean the
/// same on every CPU) and its own tasks, kernel threads and interrupts:
/// what is placed on another CPU is left out, and a source whose NIC
/// interrupts another CPU never sends here.
pub(super) fn build(sc: &Scenario, p: RunParams, cpu: usize) -> Result<Sim, InputError> {
    let spec = sc.spec();
    let cores = spec.machine.cores;
    let mut sim = machine(&spec.machine, p.seed);
    sim.cross.cpu = cpu;
    sim.kernel_preset = spec.machine.kernel.map(KernelPreset::name);
    if let Some(k) = spec.machine.kernel {
        sim.sched.bandwidth = k.bandwidth();
    }
    let mut b = Builder { sc, spec, seed: p.seed, cpu, sim, servers: Vec::new(), sockets: BTreeMap::new() };
    b.kernel_threads();
    if cores > 1 {
        // Device vectors sit below the IPIs' on x86: the lines go first.
        b.sim.cross.ipi_line = Some(b.sim.add_line(IrqLine::new("ipi", IrqKind::Ipi)));
        b.sim.cross.resched_line = Some(b.sim.add_line(IrqLine::new("resched", IrqKind::Resched)));
    }
    for s in &spec.sockets {
        b.sockets.insert(s.name.clone(), b.sim.sockets.len());
        b.sim.sockets.push(Socket::new(s.name.clone(), s.rcvbuf));
    }
    if cores > 1 {
        // Every socket on every CPU, in one order, whichever CPU reads it.
        let traffic = spec.traffic.iter().filter_map(|t| match &t.proto {
            TrafficProto::Udp { socket } => Some(&socket.name),
            TrafficProto::IcmpEcho { .. } => None,
        });
        let names: Vec<String> = spec.tasks.iter().filter_map(|t| t.work.read_socket()).map(|s| &s.name).chain(traffic).cloned().collect();
        for name in names {
            b.socket(&name);
        }
    }
    if let Some(nic) = &spec.nic {
        b.nic(nic);
    }
    for irq in spec.irqs.iter().filter(|irq| irq.cpu == cpu) {
        b.irq(irq);
    }
    let disk = spec.disk.as_ref().map(|d| b.disk(d));
    let probe_task = b.tasks(disk)?;
    for (task, s) in std::mem::take(&mut b.servers) {
        let server = make_server(&s, task, b.sim.tasks[task].policy);
        b.sim.tasks[task].server = Some(b.sim.servers.len());
        b.sim.servers.push(server);
    }
    for t in &spec.traffic {
        b.traffic(t);
    }
    b.check_read_sockets()?;
    b.metrics(probe_task)?;
    if let Some(pol) = &spec.policy {
        let made = crate::policy::bottom_half_policy(&pol.bottom_half, &pol.params, &b.sim).map_err(|e| sc.err(pol.at.clone(), e))?;
        b.sim.bh_policy = made;
    }
    Ok(b.sim)
}

fn machine(m: &MachineSpec, seed: u64) -> Sim {
    let cfg = MachineConfig {
        hz: m.hz,
        irq_entry: m.irq_entry,
        irq_exit: m.irq_exit,
        tick: m.tick,
        context_switch: m.context_switch,
        irq_primary: m.irq_primary,
        hrtimer: m.hrtimer,
        irq_time_accounting: m.irq_time_accounting,
        netdev_max_backlog: m.netdev_max_backlog,
        defer_to_running_ksoftirqd: m.kernel.is_some_and(|k| k.defers_to_running_ksoftirqd()),
        ipi: m.ipi,
    };
    let model: Box<dyn SoftirqModel> = match m.softirq {
        SoftirqKind::Linux24 => Box::new(softirq::Linux24),
        SoftirqKind::Linux26 => Box::new(softirq::Linux26),
        SoftirqKind::LinuxModern { budget_packets, budget_ns } => Box::new(softirq::LinuxModern { budget_packets, budget_ns }),
        SoftirqKind::Threaded => Box::new(softirq::Threaded),
        SoftirqKind::PreemptRt { budget_packets, budget_ns } => Box::new(softirq::PreemptRt { budget_packets, budget_ns }),
    };
    Sim::new(cfg, m.scheduler, model, seed)
}

fn make_server(s: &ServerSpec, task: usize, high: Policy) -> Box<dyn Server> {
    match *s {
        ServerSpec::Sporadic { budget, period, low_priority, max_repl, accounting } => {
            Box::new(Sporadic::new(task, high, low_priority.map(Policy::Fifo), budget, period, max_repl, accounting))
        }
        ServerSpec::Polling { budget, period } => Box::new(PeriodicServer::new(task, budget, period, false)),
        ServerSpec::Deferrable { budget, period } => Box::new(PeriodicServer::new(task, budget, period, true)),
    }
}

struct Builder<'a> {
    sc: &'a Scenario,
    spec: &'a Spec,
    seed: u64,
    /// The CPU being built.
    cpu: usize,
    sim: Sim,
    /// Servers to attach once every task exists, in the order they were
    /// met (which numbers them).
    servers: Vec<(usize, ServerSpec)>,
    /// Socket ids by name: declared ones, then any name a task or source
    /// uses.
    sockets: BTreeMap<String, usize>,
}

impl Builder<'_> {
    fn socket(&mut self, name: &str) -> usize {
        let sim = &mut self.sim;
        *self.sockets.entry(name.to_string()).or_insert_with(|| {
            // Linux's default rmem_default (212992 bytes).
            sim.sockets.push(Socket::new(name, DEFAULT_RCVBUF));
            sim.sockets.len() - 1
        })
    }

    /// Adds a kernel thread with the scheduling the file gives it (else
    /// `default`).
    fn thread(&mut self, name: String, sched: &Option<SchedSpec>, default: Policy, kind: TaskKind) -> usize {
        let policy = sched.as_ref().map_or(default, |s| s.policy);
        let id = self.sim.add_task(Task::new(name, policy, kind));
        if let Some(s) = sched.as_ref().and_then(|s| s.server) {
            self.servers.push((id, s));
        }
        id
    }

    fn kernel_threads(&mut self) {
        let th = &self.spec.threads;
        let cpu = self.cpu;
        self.thread(format!("ksoftirqd/{cpu}"), &th.ksoftirqd, Policy::Other(self.spec.machine.ksoftirqd_nice), TaskKind::Ksoftirqd);
        if self.spec.machine.softirq == SoftirqKind::Threaded {
            // Default priorities as PREEMPT_RT gives its IRQ threads (FIFO 50).
            for (sched, name, vector) in [(&th.net_rx, "net-rx", softirq::NET_RX), (&th.net_tx, "net-tx", softirq::NET_TX)] {
                let name = if self.spec.machine.cores > 1 { format!("{name}/{cpu}") } else { name.to_string() };
                let id = self.thread(name, sched, Policy::Fifo(50), TaskKind::SoftirqThread { vectors: 1 << vector });
                self.sim.vector_thread[vector as usize] = Some(id);
            }
        }
    }

    fn nic(&mut self, r: &NicSpec) {
        let name = r.name.clone();
        let line = self.sim.add_line(IrqLine::new(name.clone(), IrqKind::Nic(0)));
        self.sim.nics.push(Nic {
            name: name.clone(),
            ring: VecDeque::with_capacity(r.ring),
            ring_size: r.ring,
            napi: r.napi,
            weight: r.weight,
            line,
            napi_scheduled: false,
            rps_cpu: r.rps_cpu,
            irq_cpu: r.cpu,
            threaded: r.napi_thread_cpu.map(|cpu| crate::net::ThreadedNapi { cpu, thread: None, quota: 0 }),
            costs: r.costs,
            coalesce_frames: r.coalesce_frames,
            coalesce_ns: r.coalesce_ns,
            unsignalled: 0,
            coalesce_gen: 0,
            coalesce_armed: false,
            link_free_at: 0,
            tx_dev: None,
            stats: Default::default(),
        });
        if r.napi_thread_cpu == Some(self.cpu) {
            // napi_kthread_create: SCHED_OTHER, bound where it is pinned.
            let id = self.thread(format!("napi/{name}-0"), &self.spec.threads.napi, Policy::Other(0), TaskKind::NapiThread { nic: 0 });
            if let Some(th) = &mut self.sim.nics[0].threaded {
                th.thread = Some(id);
            }
        }
        if self.spec.machine.softirq.threads_irqs() && r.cpu == self.cpu {
            let id = self.thread(format!("irq/{line}-{name}"), &self.spec.threads.nic_irq, Policy::Fifo(50), TaskKind::IrqThread { line });
            self.sim.lines[line].thread = Some(id);
        }
        if let Some(tx) = &r.tx {
            let id = self.sim.devices.len();
            let name = format!("{}-tx", self.sim.nics[0].name);
            let line = self.sim.add_line(IrqLine::new(name.clone(), IrqKind::Device(id)));
            self.sim.devices.push(Some(Box::new(crate::net_tx::NicTx::new(name, id, line, tx.queue, tx.link, tx.costs))));
            self.sim.nics[0].tx_dev = Some(id);
        }
    }

    fn irq(&mut self, r: &IrqSpec) {
        let id = self.sim.devices.len();
        let name = r.name.clone();
        let line = self.sim.add_line(IrqLine::new(name.clone(), IrqKind::Device(id)));
        let rng = rng_stream(self.seed, &format!("irq/{name}"));
        let src = crate::irq_source::IrqSource::new(name, id, line, r.interval, r.poisson, r.handler, r.bottom_half, r.vector, rng);
        self.sim.devices.push(Some(Box::new(src)));
        self.sim.q.schedule_at(r.interval, crate::kernel::Ev::Device { dev: id as u32, token: 0 });
    }

    /// Builds the `[disk]` device; returns its device index and capacity.
    fn disk(&mut self, d: &DiskSpec) -> (usize, u64) {
        let id = self.sim.devices.len();
        let line = self.sim.add_line(IrqLine::new(d.name.clone(), IrqKind::Device(id)));
        let dev = crate::disk::DiskDevice::new(d.name.clone(), id, line, d.costs, crate::disk::Drive::new(d.geometry));
        let sectors = dev.sectors();
        self.sim.devices.push(Some(Box::new(dev)));
        (id, sectors)
    }

    /// Adds the tasks; returns the first probe task's id.
    fn tasks(&mut self, disk: Option<(usize, u64)>) -> Result<Option<usize>, InputError> {
        let mut names: BTreeSet<String> = self.sim.tasks.iter().map(|t| t.name.clone()).collect();
        let mut probe_task = None;
        for t in &self.spec.tasks {
            if !names.insert(t.name.clone()) {
                return Err(self.sc.err(t.at.clone(), format!("task name `{}` is used twice", t.name)));
            }
            if t.cpu != self.cpu {
                continue;
            }
            let behavior = self.behavior(t, disk);
            let policy = t.sched.policy;
            let id = self.sim.add_task(Task::new(t.name.clone(), policy, TaskKind::User(behavior)));
            if let Policy::Rr(_) = policy {
                self.sim.tasks[id].rr_left = crate::sched::rt::RR_TIMESLICE_NS;
            }
            if let Some(s) = t.work.read_socket() {
                let sid = self.socket(&s.name);
                self.sim.sockets[sid].owner.get_or_insert(id);
            }
            if let Some(s) = t.sched.server {
                self.servers.push((id, s));
            }
            if matches!(t.work, Work::Probe(_)) && probe_task.is_none() {
                probe_task = Some(id);
            }
        }
        Ok(probe_task)
    }

    fn behavior(&mut self, t: &TaskSpec, disk: Option<(usize, u64)>) -> Box<dyn Behavior> {
        let rng = rng_stream(self.seed, &format!("task/{}", t.name));
        match &t.work {
            Work::Periodic(w) => {
                let mut b = Periodic::new(w.period, w.offset, w.deadline, w.exec, rng);
                if let Some(s) = &w.poll {
                    b.poll = Some(self.socket(&s.name));
                    b.recv_cost = w.recv_cost;
                }
                b.max_jobs = w.jobs;
                Box::new(b)
            }
            Work::CpuLoop(w) | Work::Probe(w) => Box::new(CpuLoop::new(w.phases)),
            Work::UdpServer(w) => {
                let mut b = UdpServer::new(self.socket(&w.socket.name), w.recv_cost, w.user_cost);
                if let Some((size, send_cost)) = w.reply {
                    let tx = self.sim.nics.first().and_then(|n| n.tx_dev).expect("validated: replies need a [nic.tx]");
                    b.reply = Some((tx, size, send_cost));
                }
                Box::new(b)
            }
            Work::MediaPlayer(w) => {
                Box::new(MediaPlayer::new(w.period, w.exec, w.frames, rng, w.keep_frames).with_kernel_cost(w.kernel_cost))
            }
            Work::DiskReader(w) => {
                let (dev, sectors) = disk.expect("validated: a disk-reader needs a [disk]");
                Box::new(DiskReader::new(dev, sectors, w.block_sectors, w.pattern, w.intensity, w.issue_cost, rng))
            }
        }
    }

    fn traffic(&mut self, t: &TrafficSpec) {
        let proto = match &t.proto {
            TrafficProto::IcmpEcho { reply } => Proto::IcmpEcho { reply: *reply },
            TrafficProto::Udp { socket } => Proto::Udp { socket: self.socket(&socket.name) as u16 },
        };
        // Packets arrive where the NIC interrupts; the source is here
        // only so that its index means the same on every CPU.
        let here = self.spec.nic.as_ref().is_none_or(|n| n.ring_cpu() == self.cpu);
        self.sim.sources.push(Source {
            rng: rng_stream(self.seed, &format!("traffic/{}", t.name)),
            name: t.name.clone(),
            nic: 0,
            arrivals: t.arrivals,
            proto,
            size: t.size,
            wire_ns: wire_ns(t.size, t.link),
            start: if here { t.start } else { Nanos::MAX },
            stop: t.stop,
            sent: 0,
        });
    }

    /// A socket a task reads that nothing sends to and no [[socket]]
    /// declares is a misspelt name (`poll = "hearbeat"`): every datagram
    /// would go to the other socket and the task would wait forever.
    ///
    /// The other way round too: traffic to a socket no task reads and no
    /// [[socket]] declares (`socket = "tcpp"`) would fill a socket nobody
    /// drains while the reader waits on the real one.
    fn check_read_sockets(&self) -> Result<(), InputError> {
        let sent_to: Vec<&SocketRef> = self
            .spec
            .traffic
            .iter()
            .filter_map(|t| match &t.proto {
                TrafficProto::Udp { socket } => Some(socket),
                TrafficProto::IcmpEcho { .. } => None,
            })
            .collect();
        let read: Vec<&SocketRef> = self.spec.tasks.iter().filter_map(|t| t.work.read_socket()).collect();
        let declared = || self.spec.sockets.iter().map(|d| d.name.as_str());
        let mut known: Vec<&str> = sent_to.iter().chain(&read).map(|s| s.name.as_str()).chain(declared()).collect();
        known.sort_unstable();
        known.dedup();
        let unmatched = |s: &SocketRef, others: &[&SocketRef], what: &str| -> Result<(), InputError> {
            let name = s.name.as_str();
            if others.iter().any(|o| o.name == name) || declared().any(|d| d == name) {
                return Ok(());
            }
            let others: Vec<&str> = known.iter().copied().filter(|k| *k != name).collect();
            let others = if others.is_empty() { "none".to_string() } else { others.join(", ") };
            Err(self.sc.err(
                s.at.clone(),
                format!("{what} socket `{name}` and no [[socket]] declares it (other sockets: {others}); declare it with [[socket]] if that is meant"),
            ))
        };
        for s in &read {
            unmatched(s, &sent_to, "no traffic sends to")?;
        }
        for s in &sent_to {
            unmatched(s, &read, "no task reads")?;
        }
        Ok(())
    }

    /// The metrics asked for; without a probe metric, a probe task is
    /// measured at the default windows.
    fn metrics(&mut self, probe_task: Option<usize>) -> Result<(), InputError> {
        for m in &self.spec.metrics {
            match m {
                MetricSpec::BhTime { interval } => self.sim.bh_series = Some(crate::metrics::Series::new(*interval, 0)),
                MetricSpec::Probe { task, windows, at } => {
                    let Some(spec) = self.spec.task(task) else { return Err(self.sc.err(at.clone(), format!("no task named `{task}`"))) };
                    if spec.cpu != self.cpu {
                        continue; // measured on its own CPU
                    }
                    let id = self.sim.task_id(task).ok_or_else(|| self.sc.err(at.clone(), format!("no task named `{task}`")))?;
                    self.sim.probe = Some(Probe::new(id, windows.clone(), 0));
                }
            }
        }
        if let (None, Some(id)) = (&self.sim.probe, probe_task) {
            self.sim.probe = Some(Probe::new(id, log_windows(10_000, 100_000_000, 25), 0));
        }
        Ok(())
    }
}
