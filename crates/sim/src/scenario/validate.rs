//! Raw file → [`Spec`]: every string interpreted, every value checked,
//! every default applied, errors at the value's `file:line:col`. One
//! function per section.

use super::raw::*;
use super::spec::*;
use super::{parse_link, MAX_CORES, MAX_DURATION_NS, MAX_QUEUE};
use crate::net::{wire_ns, Arrivals, NicCosts};
use crate::probe::log_windows;
use crate::sched::FairKind;
use crate::server::Accounting;
use crate::softirq;
use crate::task::Policy;
use crate::workload::{Dist, ReadPattern};
use irqlab_analysis::{parse_duration_ns, InputError, Location, Nanos};
use std::collections::{BTreeMap, BTreeSet};
use std::ops::RangeInclusive;
use toml::Spanned;

/// Checks `raw` (read from `text`, the contents of `file`) into a spec.
pub(super) fn spec(file: &str, text: &str, raw: Raw) -> Result<Spec, InputError> {
    let v = V { file, text };
    let run = v.run(&raw.run)?;
    let machine = v.machine(&raw.machine)?;
    let threads = v.threads(&raw.threads, machine.softirq, machine.hz)?;
    let sockets = v.sockets(&raw.socket)?;
    let nic = raw.nic.as_ref().map(|n| v.nic(n)).transpose()?;
    let irqs = raw.irq.iter().map(|i| v.irq(i)).collect::<Result<Vec<_>, _>>()?;
    let disk = raw.disk.as_ref().map(|d| v.disk(d)).transpose()?;
    let ctx = TaskContext { hz: machine.hz, tx: nic.as_ref().is_some_and(|n| n.tx.is_some()), disk: disk.is_some() };
    let tasks = raw.task.iter().map(|t| v.task(t, &ctx)).collect::<Result<Vec<_>, _>>()?;
    if let (Some(t), None) = (raw.traffic.first(), &nic) {
        return Err(v.err(t.span(), "traffic needs a [nic]"));
    }
    let traffic = raw.traffic.iter().enumerate().map(|(i, t)| v.traffic(i, t)).collect::<Result<Vec<_>, _>>()?;
    let metrics = raw.metric.iter().map(|m| v.metric(m)).collect::<Result<Vec<_>, _>>()?;
    let policy = raw.policy.as_ref().map(|p| v.bh_policy(p)).transpose()?;
    v.placement(&raw, &machine, nic.as_ref(), &irqs, &tasks)?;
    Ok(Spec {
        name: raw.name,
        description: raw.description,
        machine,
        nic,
        disk,
        threads,
        irqs,
        sockets,
        tasks,
        traffic,
        policy,
        run,
        metrics,
    })
}

struct V<'a> {
    file: &'a str,
    text: &'a str,
}

/// What a task's checks need to know of the rest of the file.
struct TaskContext {
    hz: u32,
    tx: bool,
    disk: bool,
}

impl V<'_> {
    fn err(&self, span: Span, msg: impl Into<String>) -> InputError {
        InputError::at(msg, Location::at_span(self.file, self.text, span))
    }

    fn dur(&self, d: &Dur) -> Result<Nanos, InputError> {
        parse_duration_ns(d.get_ref()).map_err(|e| self.err(d.span(), e.to_string()))
    }

    fn dur_or(&self, d: &Option<Dur>, default: Nanos) -> Result<Nanos, InputError> {
        d.as_ref().map_or(Ok(default), |d| self.dur(d))
    }

    fn positive(&self, d: &Dur, what: &str) -> Result<Nanos, InputError> {
        let v = self.dur(d)?;
        if v == 0 {
            return Err(self.err(d.span(), format!("{what} must be greater than 0")));
        }
        Ok(v)
    }

    /// A count that becomes an allocation or a loop bound (ring, weight,
    /// queue, ...): `default` when absent, else it must lie in `range`
    /// (error at the value naming the key and the bounds). The bounds are
    /// far beyond any real NIC or kernel setting, and keep a typo from
    /// asking for 100 GB or a weight that wraps to 0 as u32.
    fn count(&self, v: &Option<Spanned<u64>>, key: &str, default: u64, range: RangeInclusive<u64>) -> Result<u64, InputError> {
        let Some(v) = v else { return Ok(default) };
        let n = *v.get_ref();
        if range.contains(&n) {
            Ok(n)
        } else {
            Err(self.err(v.span(), format!("{key} = {n}: must be {}..={}", range.start(), range.end())))
        }
    }

    fn need<'a, T>(&self, v: &'a Option<T>, span: Span, what: &str) -> Result<&'a T, InputError> {
        v.as_ref().ok_or_else(|| self.err(span, format!("missing `{what}`")))
    }

    fn link(&self, l: &Option<Spanned<String>>) -> Result<u64, InputError> {
        match l {
            Some(l) => parse_link(l.get_ref()).map_err(|e| self.err(l.span(), e)),
            None => Ok(1_000_000_000),
        }
    }

    fn run(&self, run: &Spanned<RawRun>) -> Result<RunSpec, InputError> {
        let r = run.get_ref();
        let duration = self.positive(&r.duration, "run.duration")?;
        if duration > MAX_DURATION_NS {
            return Err(self.err(r.duration.span(), "run.duration: at most 1000000s (11.6 days simulated)"));
        }
        let warmup = self.dur_or(&r.warmup, 0)?;
        let warmup_at = r.warmup.as_ref().map_or(run.span(), |w| w.span());
        if warmup >= duration {
            return Err(self.err(warmup_at, "warm-up must be shorter than the run"));
        }
        Ok(RunSpec { duration, seed: r.seed, warmup, warmup_at })
    }

    fn machine(&self, machine: &Spanned<RawMachine>) -> Result<MachineSpec, InputError> {
        let m = machine.get_ref();
        let hz = *m.hz.get_ref();
        if ![100, 250, 300, 1000].contains(&hz) {
            return Err(self.err(m.hz.span(), "hz must be 100, 250, 300 or 1000"));
        }
        let cores = match &m.cores {
            None => 1,
            Some(c) if (1..=MAX_CORES).contains(c.get_ref()) => *c.get_ref() as usize,
            Some(c) => return Err(self.err(c.span(), format!("cores must be 1..={MAX_CORES}"))),
        };
        let kernel = match &m.kernel {
            None => None,
            Some(k) => Some(KernelPreset::ALL.into_iter().find(|p| p.name() == k.get_ref()).ok_or_else(|| {
                let names: Vec<&str> = KernelPreset::ALL.iter().map(|p| p.name()).collect();
                self.err(k.span(), format!("unknown kernel `{}` ({})", k.get_ref(), names.join(", ")))
            })?),
        };
        // A preset sets the softirq model (its budgets still apply).
        let model_name = match (&m.softirq, kernel) {
            (Some(s), Some(k)) => {
                return Err(self.err(s.span(), format!("kernel = \"{}\" sets the softirq model; leave `softirq` out", k.name())))
            }
            (Some(s), None) => s.get_ref().as_str(),
            (None, Some(_)) => "linux-modern",
            (None, None) => return Err(self.err(machine.span(), "missing `softirq` (or a `kernel` preset)")),
        };
        let softirq_span = m.softirq.as_ref().or(m.kernel.as_ref()).map_or(machine.span(), |s| s.span());
        let costs = m.costs.get_ref();
        let (irq_entry, irq_exit, tick) = (self.dur(&costs.irq_entry)?, self.dur(&costs.irq_exit)?, self.dur(&costs.tick)?);
        let context_switch = self.dur(&costs.context_switch)?;
        let irq_primary = self.dur_or(&costs.irq_primary, 0)?;
        let hrtimer = costs.hrtimer.as_ref().map(|d| self.dur(d)).transpose()?;
        let backlog_default = if model_name == "linux-2.4" { 300 } else { 1000 };
        let netdev_max_backlog = self.count(&m.netdev_max_backlog, "netdev_max_backlog", backlog_default, 1..=MAX_QUEUE)? as usize;
        let softirq = match model_name {
            "linux-2.4" => SoftirqKind::Linux24,
            "linux-2.6" => SoftirqKind::Linux26,
            "linux-modern" => {
                let budget_packets = self.count(&m.netdev_budget, "netdev_budget", 300, 1..=MAX_QUEUE)? as u32;
                let budget_ns = self.dur_or(&m.netdev_budget_usecs, 2_000_000)?;
                match kernel {
                    Some(k) => k.softirq(budget_packets, budget_ns),
                    None => SoftirqKind::LinuxModern { budget_packets, budget_ns },
                }
            }
            "threaded" => SoftirqKind::Threaded,
            _ => {
                return Err(
                    self.err(softirq_span, format!("unknown softirq model `{model_name}` (linux-2.4, linux-2.6, linux-modern, threaded)"))
                )
            }
        };
        let scheduler = match m.scheduler.as_ref().map(|s| (s.get_ref().as_str(), s.span())) {
            None | Some(("cfs", _)) => FairKind::Cfs,
            Some(("linux-2.4", _)) => FairKind::Linux24,
            Some((other, span)) => return Err(self.err(span, format!("unknown scheduler `{other}` (cfs, linux-2.4)"))),
        };
        let ksoftirqd_nice = match &m.ksoftirqd_nice {
            Some(n) if (-20..=19).contains(n.get_ref()) => *n.get_ref() as i8,
            Some(n) => return Err(self.err(n.span(), "nice must be -20..19")),
            // 2.4 ran ksoftirqd at nice 19; 2.6 and later at nice 0.
            None if softirq == SoftirqKind::Linux24 => 19,
            None => 0,
        };
        Ok(MachineSpec {
            hz,
            cores,
            kernel,
            // x86's CALL_FUNCTION_SINGLE handler with rps_trigger_softirq:
            // a few hundred ns on a 2020s core (assumed; the scenario's
            // `costs.ipi` overrides it).
            ipi: self.dur_or(&costs.ipi, 500)?,
            softirq,
            scheduler,
            ksoftirqd_nice,
            irq_entry,
            irq_exit,
            tick,
            context_switch,
            irq_primary,
            hrtimer,
            // On in Debian's 6.x kernels (CONFIG_IRQ_TIME_ACCOUNTING=y).
            irq_time_accounting: m.irq_time_accounting.unwrap_or(model_name == "linux-modern"),
            netdev_max_backlog,
        })
    }

    fn threads(&self, raw: &BTreeMap<String, Spanned<RawThread>>, model: SoftirqKind, hz: u32) -> Result<ThreadsSpec, InputError> {
        let mut threads = ThreadsSpec::default();
        for (name, t) in raw {
            let r = t.get_ref();
            let slot = match name.as_str() {
                "ksoftirqd" => &mut threads.ksoftirqd,
                _ if !["net_rx", "net_tx", "nic_irq", "napi"].contains(&name.as_str()) => {
                    return Err(self.err(t.span(), format!("unknown thread `{name}` (net_rx, net_tx, nic_irq, ksoftirqd, napi)")))
                }
                "nic_irq" if model.threads_irqs() => &mut threads.nic_irq,
                "napi" => &mut threads.napi,
                _ if model != SoftirqKind::Threaded => {
                    return Err(self.err(t.span(), format!("thread `{name}` exists only under the threaded softirq model")))
                }
                "net_rx" => &mut threads.net_rx,
                "net_tx" => &mut threads.net_tx,
                _ => &mut threads.nic_irq,
            };
            let sched = Sched {
                policy: &Some(r.policy.clone()),
                priority: &r.priority,
                nice: &r.nice,
                dl: (&r.runtime, &r.deadline, &r.period),
                server: &r.server,
            };
            *slot = Some(self.sched(t.span(), &sched, hz)?);
        }
        Ok(threads)
    }

    fn sockets(&self, raw: &[Spanned<RawSocket>]) -> Result<Vec<SocketSpec>, InputError> {
        let mut seen = BTreeSet::new();
        let mut sockets = Vec::new();
        for s in raw {
            let r = s.get_ref();
            if !seen.insert(r.name.get_ref().as_str()) {
                return Err(self.err(r.name.span(), format!("socket `{}` declared twice", r.name.get_ref())));
            }
            sockets.push(SocketSpec { name: r.name.get_ref().clone(), rcvbuf: *r.rcvbuf.get_ref() });
        }
        Ok(sockets)
    }

    /// `threaded = true` and its thread's `napi_cpu` (default: the
    /// interrupt's CPU).
    fn threaded_napi(&self, r: &RawNic) -> Result<Option<usize>, InputError> {
        let threaded = r.threaded.as_ref().is_some_and(|t| *t.get_ref());
        match (&r.threaded, &r.napi_cpu) {
            (Some(t), _) if threaded && !r.napi => Err(self.err(t.span(), "threaded NAPI needs napi = true")),
            (Some(t), _) if threaded && r.rps_cpu.is_some() => {
                Err(self.err(t.span(), "threaded NAPI with rps_cpu is not modelled yet (docs/sim-multicore.md)"))
            }
            (_, Some(c)) if !threaded => Err(self.err(c.span(), "napi_cpu is the NAPI thread's CPU: it needs threaded = true")),
            _ if !threaded => Ok(None),
            _ => Ok(Some(self.cpu(&r.napi_cpu, "napi_cpu")?.map_or(self.cpu(&r.cpu, "cpu")?.unwrap_or(0), |c| c))),
        }
    }

    /// A CPU number key (`cpu`, `rps_cpu`, `napi_cpu`), when given; whether
    /// the machine has that CPU is [`V::placement`]'s check.
    fn cpu(&self, v: &Option<Spanned<u64>>, key: &str) -> Result<Option<usize>, InputError> {
        v.as_ref().map(|_| self.count(v, key, 0, 0..=MAX_CORES as u64 - 1).map(|c| c as usize)).transpose()
    }

    fn nic(&self, nic: &Spanned<RawNic>) -> Result<NicSpec, InputError> {
        let r = nic.get_ref();
        let c = r.costs.get_ref();
        let costs = NicCosts {
            irq: self.dur(&c.irq)?,
            irq_per_packet: self.dur_or(&c.irq_per_packet, 0)?,
            icmp_echo: self.dur(&c.icmp_echo)?,
            icmp_no_reply: match &c.icmp_no_reply {
                Some(d) => self.dur(d)?,
                None => self.dur(&c.icmp_echo)?,
            },
            udp: self.dur(&c.udp)?,
            rps_enqueue: self.dur_or(&c.rps_enqueue, 0)?,
        };
        let tx = match &r.tx {
            Some(tx) => {
                let t = tx.get_ref();
                let queue = self.count(&t.queue, "queue", 1000, 1..=MAX_QUEUE)? as usize;
                let link = self.link(&t.link)?;
                let costs = crate::net_tx::TxCosts { irq: self.dur(&t.irq)?, complete: self.dur(&t.complete)? };
                Some(NicTxSpec { queue, link, costs })
            }
            None => None,
        };
        Ok(NicSpec {
            name: r.name.clone().unwrap_or_else(|| "eth0".into()),
            ring: self.count(&r.ring, "ring", 256, 1..=MAX_QUEUE)? as usize,
            napi: r.napi,
            weight: self.count(&r.weight, "weight", 64, 1..=MAX_QUEUE)? as u32,
            coalesce_frames: self.count(&r.coalesce_frames, "coalesce_frames", 1, 1..=MAX_QUEUE)? as u32,
            coalesce_ns: self.dur_or(&r.coalesce_usecs, 0)?,
            cpu: self.cpu(&r.cpu, "cpu")?.unwrap_or(0),
            rps_cpu: self.cpu(&r.rps_cpu, "rps_cpu")?,
            napi_thread_cpu: self.threaded_napi(r)?,
            costs,
            tx,
        })
    }

    fn irq(&self, irq: &Spanned<RawIrq>) -> Result<IrqSpec, InputError> {
        let r = irq.get_ref();
        let vector = match r.vector.as_ref().map(|v| (v.get_ref().as_str(), v.span())) {
            None | Some(("tasklet", _)) => softirq::TASKLET,
            Some(("hi", _)) => softirq::HI,
            Some(("timer", _)) => softirq::TIMER,
            Some(("block", _)) => softirq::BLOCK,
            Some((other, span)) => return Err(self.err(span, format!("unknown vector `{other}` (hi, timer, block, tasklet)"))),
        };
        Ok(IrqSpec {
            name: r.name.get_ref().clone(),
            interval: self.positive(&r.interval, "interval")?,
            poisson: r.poisson.unwrap_or(false),
            handler: self.dur(&r.handler)?,
            bottom_half: self.dur_or(&r.bottom_half, 0)?,
            vector,
            cpu: self.cpu(&r.cpu, "cpu")?.unwrap_or(0),
        })
    }

    /// `[disk]`: the drive (defaults: the idletime dissertation's WD Caviar
    /// AC28200, see [`crate::disk::DiskGeometry`]) and its completion costs.
    fn disk(&self, d: &Spanned<RawDisk>) -> Result<DiskSpec, InputError> {
        let r = d.get_ref();
        let mut g = crate::disk::DiskGeometry::default();
        if let Some(rpm) = &r.rpm {
            if !(*rpm.get_ref() >= 1.0 && rpm.get_ref().is_finite()) {
                return Err(self.err(rpm.span(), "rpm must be at least 1"));
            }
            g.rpm = *rpm.get_ref();
        }
        g.seek_min_ns = self.dur_or(&r.seek_min, g.seek_min_ns)?;
        g.seek_full_ns = self.dur_or(&r.seek_full, g.seek_full_ns)?;
        if g.seek_full_ns < g.seek_min_ns {
            let span = r.seek_full.as_ref().or(r.seek_min.as_ref()).map_or(d.span(), |s| s.span());
            return Err(self.err(span, "seek_full must be at least seek_min"));
        }
        g.overhead_ns = self.dur_or(&r.overhead, g.overhead_ns)?;
        if let Some(spt) = &r.sectors_per_track {
            if *spt.get_ref() == 0 {
                return Err(self.err(spt.span(), "sectors_per_track must be at least 1"));
            }
            g.sectors_per_track = *spt.get_ref();
        }
        let c = r.costs.get_ref();
        let costs = crate::disk::DiskCosts { irq: self.dur(&c.irq)?, block_softirq: self.dur(&c.block_softirq)? };
        Ok(DiskSpec { name: r.name.clone().unwrap_or_else(|| "sda".into()), geometry: g, costs })
    }
}

/// The scheduling keys of a task or thread, as read.
struct Sched<'a> {
    policy: &'a Option<Spanned<String>>,
    priority: &'a Option<Spanned<i64>>,
    nice: &'a Option<Spanned<i64>>,
    dl: (&'a Option<Dur>, &'a Option<Dur>, &'a Option<Dur>),
    server: &'a Option<Spanned<RawServer>>,
}

impl V<'_> {
    fn sched(&self, span: Span, s: &Sched, hz: u32) -> Result<SchedSpec, InputError> {
        let policy = self.policy(span, s)?;
        let server = match s.server {
            Some(_) if matches!(policy, Policy::Deadline { .. }) => {
                return Err(self.err(s.server.as_ref().expect("set").span(), "a SCHED_DEADLINE task is its own server"))
            }
            Some(srv) => Some(self.server(srv, policy, hz)?),
            None => None,
        };
        Ok(SchedSpec { policy, server })
    }

    fn policy(&self, span: Span, s: &Sched) -> Result<Policy, InputError> {
        let rt_prio = |what: &str| -> Result<u8, InputError> {
            let p = s.priority.as_ref().ok_or_else(|| self.err(span.clone(), format!("{what} needs `priority` (1-99)")))?;
            if !(1..=99).contains(p.get_ref()) {
                return Err(self.err(p.span(), "priority must be 1-99"));
            }
            Ok(*p.get_ref() as u8)
        };
        let name = s.policy.as_ref().map_or("other", |p| p.get_ref().as_str());
        Ok(match name {
            "fifo" => Policy::Fifo(rt_prio("fifo")?),
            "rr" => Policy::Rr(rt_prio("rr")?),
            "other" => {
                let n = s.nice.as_ref().map_or(Ok(0), |n| {
                    if (-20..=19).contains(n.get_ref()) {
                        Ok(*n.get_ref() as i8)
                    } else {
                        Err(self.err(n.span(), "nice must be -20..19"))
                    }
                })?;
                Policy::Other(n)
            }
            "idle" => Policy::Idle,
            "deadline" => {
                let runtime = self.positive(self.need(s.dl.0, span.clone(), "runtime")?, "runtime")?;
                let period = self.positive(self.need(s.dl.2, span.clone(), "period")?, "period")?;
                let deadline = self.dur_or(s.dl.1, period)?;
                if !(runtime <= deadline && deadline <= period) {
                    return Err(self.err(span, "SCHED_DEADLINE needs runtime <= deadline <= period"));
                }
                Policy::Deadline { runtime, deadline, period }
            }
            _ => {
                let p = s.policy.as_ref().expect("non-default");
                return Err(self.err(p.span(), format!("unknown policy `{name}` (fifo, rr, other, idle, deadline)")));
            }
        })
    }

    fn server(&self, s: &Spanned<RawServer>, high: Policy, hz: u32) -> Result<ServerSpec, InputError> {
        let r = s.get_ref();
        let budget = self.positive(&r.budget, "budget")?;
        let period = self.positive(&r.period, "period")?;
        if budget > period {
            return Err(self.err(r.budget.span(), "budget must not exceed the period"));
        }
        Ok(match r.kind.get_ref().as_str() {
            "sporadic" => {
                if high.rt_priority().is_none() {
                    return Err(self.err(s.span(), "a sporadic server needs a fifo or rr task"));
                }
                let low_priority = match &r.low_priority {
                    None => None,
                    Some(p) if (1..=99).contains(p.get_ref()) => Some(*p.get_ref() as u8),
                    Some(p) => return Err(self.err(p.span(), "low_priority must be 1-99 (omit it to suspend instead)")),
                };
                let max_repl = self.count(&r.max_repl, "max_repl", 4, 1..=1024)? as usize;
                let accounting = match r.accounting.as_ref().map(|a| (a.get_ref().as_str(), a.span())) {
                    None | Some(("exact", _)) => Accounting::Exact { granularity: self.dur_or(&r.granularity, 1)? },
                    Some(("tick", _)) if r.granularity.is_some() => {
                        let g = r.granularity.as_ref().expect("checked");
                        return Err(self.err(g.span(), "with accounting = \"tick\" the granularity is the timer tick (omit granularity)"));
                    }
                    Some(("tick", _)) => Accounting::TickSampled { tick: 1_000_000_000 / hz.max(1) as Nanos },
                    Some((a, span)) => return Err(self.err(span, format!("unknown accounting `{a}` (exact, tick)"))),
                };
                ServerSpec::Sporadic { budget, period, low_priority, max_repl, accounting }
            }
            "polling" => ServerSpec::Polling { budget, period },
            "deferrable" => ServerSpec::Deferrable { budget, period },
            k => return Err(self.err(r.kind.span(), format!("unknown server kind `{k}` (sporadic, polling, deferrable)"))),
        })
    }
}

impl V<'_> {
    /// Where things run: every `cpu` within `cores`, and what the
    /// multi-core model does not have yet refused by name.
    fn placement(
        &self,
        raw: &Raw,
        machine: &MachineSpec,
        nic: Option<&NicSpec>,
        irqs: &[IrqSpec],
        tasks: &[TaskSpec],
    ) -> Result<(), InputError> {
        let cores = machine.cores;
        let out_of_range = |span: Span, key: &str, cpu: usize| {
            let max = cores - 1;
            self.err(span, format!("{key} = {cpu}, but the machine has cores = {cores} (CPUs 0..={max})"))
        };
        if let (Some(nic), Some(r)) = (nic, &raw.nic) {
            let r = r.get_ref();
            let keys =
                [("cpu", Some(nic.cpu), &r.cpu), ("rps_cpu", nic.rps_cpu, &r.rps_cpu), ("napi_cpu", nic.napi_thread_cpu, &r.napi_cpu)];
            for (key, cpu, span) in keys {
                if let (Some(cpu), Some(span)) = (cpu, span) {
                    if cpu >= cores {
                        return Err(out_of_range(span.span(), key, cpu));
                    }
                }
            }
            if let (Some(span), false) = (&r.rps_cpu, nic.napi) {
                return Err(self.err(span.span(), "rps_cpu needs napi = true (RPS from a non-NAPI driver's netif_rx is not modelled yet)"));
            }
        }
        for (irq, r) in irqs.iter().zip(&raw.irq) {
            if let (true, Some(span)) = (irq.cpu >= cores, &r.get_ref().cpu) {
                return Err(out_of_range(span.span(), "cpu", irq.cpu));
            }
        }
        for (t, r) in tasks.iter().zip(&raw.task) {
            if t.cpu >= cores {
                let span = r.get_ref().cpu.as_ref().map_or(t.at.clone(), |c| c.span());
                return Err(out_of_range(span, "cpu", t.cpu));
            }
            // A reader is woken by the CPU that runs the protocol for its
            // packets; a wake-up from another CPU (an IPI and the remote
            // run queue) is not modelled yet.
            if let (Some(nic), Some(_)) = (nic, t.work.read_socket()) {
                if cores > 1 && t.cpu != nic.protocol_cpu() {
                    let span = r.get_ref().cpu.as_ref().map_or(t.at.clone(), |c| c.span());
                    return Err(self.err(
                        span,
                        format!(
                            "task `{}` reads a socket on CPU {}, but its packets' protocol runs on CPU {} (the NIC's rps_cpu, else its NAPI thread's napi_cpu, else its cpu); \
                             wake-ups across CPUs are not modelled yet: put it on CPU {}",
                            t.name,
                            t.cpu,
                            nic.protocol_cpu(),
                            nic.protocol_cpu()
                        ),
                    ));
                }
            }
        }
        if cores > 1 {
            let not_yet =
                |span: Span, what: &str| self.err(span, format!("{what} with cores > 1 is not modelled yet (docs/sim-multicore.md)"));
            if let Some(d) = &raw.disk {
                return Err(not_yet(d.span(), "a [disk]"));
            }
            if let Some(p) = &raw.policy {
                return Err(not_yet(p.span(), "a bottom-half [policy]"));
            }
        }
        if let (Some(p), Some(_)) = (&raw.policy, nic.and_then(|n| n.napi_thread_cpu)) {
            return Err(
                self.err(p.span(), "a bottom-half [policy] with threaded NAPI is not modelled yet (the thread polls outside NET_RX)")
            );
        }
        Ok(())
    }

    fn task(&self, t: &Spanned<RawTask>, ctx: &TaskContext) -> Result<TaskSpec, InputError> {
        let r = t.get_ref();
        let sched =
            Sched { policy: &r.policy, priority: &r.priority, nice: &r.nice, dl: (&r.runtime, &r.deadline, &r.period), server: &r.server };
        let sched = self.sched(t.span(), &sched, ctx.hz)?;
        let work = match r.kind.get_ref().as_str() {
            "periodic" => Work::Periodic(self.periodic(t, sched.policy)?),
            "cpu-loop" => Work::CpuLoop(self.cpu_loop(t)?),
            "probe" => Work::Probe(self.cpu_loop(t)?),
            "udp-server" => Work::UdpServer(self.udp_server(t, ctx)?),
            "media-player" => {
                let period = self.positive(self.need(&r.period, t.span(), "period")?, "period")?;
                let frames = r.frames.unwrap_or(u64::MAX);
                Work::MediaPlayer(MediaPlayerSpec {
                    period,
                    exec: self.exec(t)?,
                    frames,
                    keep_frames: r.keep_frames.unwrap_or(false),
                    kernel_cost: self.dur_or(&r.kernel_cost, 0)?,
                })
            }
            "disk-reader" => Work::DiskReader(self.disk_reader(t, ctx)?),
            k => {
                return Err(self.err(
                    r.kind.span(),
                    format!("unknown task kind `{k}` (periodic, cpu-loop, probe, udp-server, media-player, disk-reader)"),
                ))
            }
        };
        let cpu = self.cpu(&r.cpu, "cpu")?.unwrap_or(0);
        Ok(TaskSpec { name: r.name.get_ref().clone(), cpu, sched, work, at: r.name.span() })
    }

    fn exec(&self, t: &Spanned<RawTask>) -> Result<Dist, InputError> {
        let r = t.get_ref();
        let e = self.positive(self.need(&r.exec, t.span(), "exec")?, "exec")?;
        match r.exec_dist.as_ref().map_or("const", |d| d.get_ref().as_str()) {
            "const" => Ok(Dist::Const(e)),
            "uniform" => {
                let hi = self.dur(self.need(&r.exec_max, t.span(), "exec_max")?)?;
                if hi < e {
                    return Err(self.err(r.exec_max.as_ref().expect("set").span(), "exec_max must be >= exec"));
                }
                Ok(Dist::Uniform(e, hi))
            }
            "exp" => Ok(Dist::Exp(e)),
            _ => Err(self.err(r.exec_dist.as_ref().expect("set").span(), "exec_dist must be const, uniform or exp")),
        }
    }

    fn periodic(&self, t: &Spanned<RawTask>, policy: Policy) -> Result<PeriodicSpec, InputError> {
        let r = t.get_ref();
        let period = match (&r.period, policy) {
            (Some(d), _) => self.positive(d, "period")?,
            (None, Policy::Deadline { period, .. }) => period,
            (None, _) => return Err(self.err(t.span(), "missing `period`")),
        };
        let deadline = match (&r.deadline, policy) {
            (_, Policy::Deadline { deadline, .. }) => deadline,
            (Some(d), _) => self.positive(d, "deadline")?,
            (None, _) => period,
        };
        let offset = self.dur_or(&r.offset, 0)?;
        let exec = self.exec(t)?;
        let poll = r.poll.as_ref().map(|s| SocketRef { name: s.get_ref().clone(), at: s.span() });
        let recv_cost = if poll.is_some() { self.dur_or(&r.recv_cost, 0)? } else { 0 };
        Ok(PeriodicSpec { period, offset, deadline, exec, jobs: r.jobs, poll, recv_cost })
    }

    fn cpu_loop(&self, t: &Spanned<RawTask>) -> Result<LoopSpec, InputError> {
        let r = t.get_ref();
        let phases = match (&r.run, &r.sleep) {
            (Some(a), Some(b)) => Some((self.positive(a, "run")?, self.dur(b)?)),
            (None, None) => None,
            _ => return Err(self.err(t.span(), "`run` and `sleep` go together")),
        };
        Ok(LoopSpec { phases })
    }

    fn udp_server(&self, t: &Spanned<RawTask>, ctx: &TaskContext) -> Result<UdpServerSpec, InputError> {
        let r = t.get_ref();
        let s = self.need(&r.socket, t.span(), "socket")?;
        let socket = SocketRef { name: s.get_ref().clone(), at: s.span() };
        let (recv_cost, user_cost) = (self.dur_or(&r.recv_cost, 0)?, self.dur_or(&r.user_cost, 0)?);
        let reply = match &r.reply_size {
            Some(size) => {
                if !ctx.tx {
                    return Err(self.err(size.span(), "replies need a [nic.tx]"));
                }
                if !(1..=65_535).contains(size.get_ref()) {
                    return Err(self.err(size.span(), "reply_size must be 1-65535 bytes"));
                }
                Some((*size.get_ref() as u32, self.dur_or(&r.send_cost, 0)?))
            }
            None => None,
        };
        Ok(UdpServerSpec { socket, recv_cost, user_cost, reply })
    }

    fn disk_reader(&self, t: &Spanned<RawTask>, ctx: &TaskContext) -> Result<DiskReaderSpec, InputError> {
        let r = t.get_ref();
        if !ctx.disk {
            return Err(self.err(t.span(), "a disk-reader needs a [disk]"));
        }
        let pattern = match r.pattern.as_ref().map(|p| (p.get_ref().as_str(), p.span())) {
            None | Some(("random", _)) => ReadPattern::Random,
            Some(("sequential", _)) => ReadPattern::Sequential,
            Some((other, span)) => return Err(self.err(span, format!("unknown pattern `{other}` (random, sequential)"))),
        };
        let intensity = match &r.intensity {
            None => 1.0,
            Some(i) if *i.get_ref() > 0.0 && *i.get_ref() <= 1.0 => *i.get_ref(),
            Some(i) => return Err(self.err(i.span(), "intensity must be in (0, 1]")),
        };
        // 16 KB: the dissertation's read size (§4.4.2 / crate::disk::drive).
        let block = r.block.as_ref().map_or(16_384, |b| *b.get_ref());
        if block == 0 || !block.is_multiple_of(512) || block > 16 << 20 {
            let span = r.block.as_ref().expect("default is valid").span();
            return Err(self.err(span, "block must be a multiple of 512 bytes, at most 16 MiB"));
        }
        Ok(DiskReaderSpec { pattern, intensity, block_sectors: block / 512, issue_cost: self.dur_or(&r.issue_cost, 0)? })
    }

    fn traffic(&self, i: usize, tr: &Spanned<RawTraffic>) -> Result<TrafficSpec, InputError> {
        let r = tr.get_ref();
        let kind = r.kind.get_ref().as_str();
        let size = r.size.as_ref().map_or(64, |s| *s.get_ref());
        if !(1..=65_535).contains(&size) {
            return Err(self.err(r.size.as_ref().expect("set").span(), "size must be 1-65535 bytes"));
        }
        let link = self.link(&r.link)?;
        let interval = |default: Option<Nanos>| -> Result<Nanos, InputError> {
            match (&r.interval, default) {
                (Some(d), _) => self.positive(d, "interval"),
                (None, Some(d)) => Ok(d),
                (None, None) => Err(self.err(tr.span(), "missing `interval`")),
            }
        };
        let udp = || -> Result<TrafficProto, InputError> {
            let socket = self.need(&r.socket, tr.span(), "socket")?;
            Ok(TrafficProto::Udp { socket: SocketRef { name: socket.get_ref().clone(), at: socket.span() } })
        };
        let icmp = TrafficProto::IcmpEcho { reply: r.reply.unwrap_or(true) };
        let (arrivals, proto) = match kind {
            "ping-flood" => (Arrivals::Constant { interval: interval(None)? }, icmp),
            // The load-bounds paper's heartbeat: a datagram every 10 ms.
            "heartbeat" => (Arrivals::Constant { interval: interval(Some(10_000_000))? }, udp()?),
            "constant" | "poisson" | "mmpp2" => {
                let proto = if r.socket.is_some() { udp()? } else { icmp };
                let arrivals = match kind {
                    "constant" => Arrivals::Constant { interval: interval(None)? },
                    "poisson" => Arrivals::Poisson { mean: interval(None)? },
                    _ => {
                        let burst = self.need(&r.burst, tr.span(), "burst")?;
                        if *burst.get_ref() < 1.0 {
                            return Err(self.err(burst.span(), "burst (mean packets per burst) must be >= 1"));
                        }
                        Arrivals::Mmpp2 {
                            burst: *burst.get_ref(),
                            spacing: self.dur_or(&r.spacing, wire_ns(size as u32, link))?,
                            gap: self.positive(self.need(&r.gap, tr.span(), "gap")?, "gap")?,
                        }
                    }
                };
                (arrivals, proto)
            }
            k => {
                return Err(self.err(r.kind.span(), format!("unknown traffic kind `{k}` (ping-flood, heartbeat, constant, poisson, mmpp2)")))
            }
        };
        let kind = match kind {
            "ping-flood" => TrafficKind::PingFlood,
            "heartbeat" => TrafficKind::Heartbeat,
            "constant" => TrafficKind::Constant,
            "poisson" => TrafficKind::Poisson,
            _ => TrafficKind::Mmpp2,
        };
        Ok(TrafficSpec {
            kind,
            name: r.name.clone().unwrap_or_else(|| format!("{}-{i}", r.kind.get_ref())),
            size: size as u32,
            link,
            start: self.dur_or(&r.start, 0)?,
            stop: self.dur_or(&r.stop, Nanos::MAX)?,
            arrivals,
            proto,
        })
    }

    fn metric(&self, mt: &Spanned<RawMetric>) -> Result<MetricSpec, InputError> {
        let r = mt.get_ref();
        match r.kind.get_ref().as_str() {
            "bh_time" => {
                let interval = match &r.interval {
                    Some(d) => self.positive(d, "interval")?,
                    None => 1_000_000,
                };
                Ok(MetricSpec::BhTime { interval })
            }
            "probe" => {
                let t = self.need(&r.task, mt.span(), "task")?;
                let windows = match &r.windows {
                    Some(ws) => ws.iter().map(|w| self.positive(w, "window")).collect::<Result<Vec<_>, _>>()?,
                    None => log_windows(
                        self.dur_or(&r.from, 10_000)?,
                        self.dur_or(&r.to, 100_000_000)?,
                        self.count(&r.points, "points", 25, 1..=10_000)? as usize,
                    ),
                };
                if windows.is_empty() {
                    return Err(self.err(mt.span(), "a probe needs at least one window"));
                }
                Ok(MetricSpec::Probe { task: t.get_ref().clone(), windows, at: t.span() })
            }
            k => Err(self.err(r.kind.span(), format!("unknown metric `{k}` (bh_time, probe)"))),
        }
    }

    fn bh_policy(&self, pol: &Spanned<toml::Table>) -> Result<PolicySpec, InputError> {
        let mut params = pol.get_ref().clone();
        let bottom_half = match params.remove("bottom_half") {
            None => "none".to_string(),
            Some(toml::Value::String(s)) => s,
            Some(_) => return Err(self.err(pol.span(), "bottom_half must be a string")),
        };
        Ok(PolicySpec { bottom_half, params, at: pol.span() })
    }
}
