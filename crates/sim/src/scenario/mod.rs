//! Scenario files (TOML): machine, NIC, kernel threads, tasks, traffic,
//! bottom-half policy, run and metric selection. Every value that is
//! wrong is reported with its `file:line:col`.
//!
//! [`Scenario::parse`] reads and fully validates (it builds the simulator
//! once); [`Scenario::build`] makes a fresh simulator for a run.

use crate::engine::rng_stream;
use crate::kernel::{IrqKind, IrqLine, MachineConfig, Sim};
use crate::net::{wire_ns, Arrivals, Nic, NicCosts, Proto, Socket, Source};
use crate::probe::{log_windows, Probe};
use crate::sched::FairKind;
use crate::server::{Accounting, Periodic as PeriodicServer, Server, Sporadic};
use crate::softirq::{self, SoftirqModel};
use crate::task::{Policy, Task, TaskKind};
use crate::workload::{CpuLoop, DiskReader, Dist, MediaPlayer, Periodic, ReadPattern, UdpServer};
use irqlab_analysis::{parse_duration_ns, InputError, Location, Nanos};
use serde::Deserialize;
use std::collections::{BTreeMap, VecDeque};
use std::ops::{Range, RangeInclusive};
use toml::Spanned;

type Dur = Spanned<String>;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Raw {
    name: Option<String>,
    description: Option<String>,
    machine: Spanned<RawMachine>,
    nic: Option<Spanned<RawNic>>,
    disk: Option<Spanned<RawDisk>>,
    #[serde(default)]
    threads: BTreeMap<String, Spanned<RawThread>>,
    #[serde(default)]
    irq: Vec<Spanned<RawIrq>>,
    #[serde(default)]
    socket: Vec<Spanned<RawSocket>>,
    #[serde(default)]
    task: Vec<Spanned<RawTask>>,
    #[serde(default)]
    traffic: Vec<Spanned<RawTraffic>>,
    policy: Option<Spanned<toml::Table>>,
    run: Spanned<RawRun>,
    #[serde(default)]
    metric: Vec<Spanned<RawMetric>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawMachine {
    hz: Spanned<u32>,
    cores: Option<Spanned<u32>>,
    softirq: Spanned<String>,
    scheduler: Option<Spanned<String>>,
    ksoftirqd_nice: Option<Spanned<i64>>,
    irq_time_accounting: Option<bool>,
    netdev_max_backlog: Option<Spanned<u64>>,
    netdev_budget: Option<Spanned<u64>>,
    netdev_budget_usecs: Option<Dur>,
    costs: Spanned<RawCosts>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCosts {
    irq_entry: Dur,
    irq_exit: Dur,
    tick: Dur,
    context_switch: Dur,
    irq_primary: Option<Dur>,
    /// hrtimer interrupt handler per sleeping task's timer expiry; omitted,
    /// expiries cost nothing (see [`MachineConfig::hrtimer`]).
    hrtimer: Option<Dur>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawNic {
    name: Option<String>,
    ring: Option<Spanned<u64>>,
    napi: bool,
    weight: Option<Spanned<u64>>,
    coalesce_frames: Option<Spanned<u64>>,
    coalesce_usecs: Option<Dur>,
    costs: Spanned<RawNicCosts>,
    /// The transmit side; without it replies cost only their share of
    /// `icmp_echo` and are never queued.
    tx: Option<Spanned<RawNicTx>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawNicTx {
    /// txqueuelen (Linux default 1000).
    queue: Option<Spanned<u64>>,
    link: Option<Spanned<String>>,
    irq: Dur,
    complete: Dur,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawNicCosts {
    irq: Dur,
    irq_per_packet: Option<Dur>,
    icmp_echo: Dur,
    icmp_no_reply: Option<Dur>,
    udp: Dur,
}

/// `[disk]`: the drive (defaults: the idletime dissertation's WD Caviar
/// AC28200, see [`crate::disk::DiskGeometry`]) and its completion costs.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawDisk {
    name: Option<String>,
    rpm: Option<Spanned<f64>>,
    seek_min: Option<Dur>,
    seek_full: Option<Dur>,
    overhead: Option<Dur>,
    sectors_per_track: Option<Spanned<u64>>,
    costs: Spanned<RawDiskCosts>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawDiskCosts {
    irq: Dur,
    block_softirq: Dur,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawThread {
    policy: Spanned<String>,
    priority: Option<Spanned<i64>>,
    nice: Option<Spanned<i64>>,
    runtime: Option<Dur>,
    deadline: Option<Dur>,
    period: Option<Dur>,
    server: Option<Spanned<RawServer>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawIrq {
    name: Spanned<String>,
    interval: Dur,
    poisson: Option<bool>,
    handler: Dur,
    bottom_half: Option<Dur>,
    vector: Option<Spanned<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSocket {
    name: Spanned<String>,
    rcvbuf: Spanned<u64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawServer {
    kind: Spanned<String>,
    budget: Dur,
    period: Dur,
    max_repl: Option<Spanned<u64>>,
    low_priority: Option<Spanned<i64>>,
    granularity: Option<Dur>,
    /// "exact" (default) or "tick" (charged by sampling the timer tick).
    accounting: Option<Spanned<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTask {
    name: Spanned<String>,
    kind: Spanned<String>,
    policy: Option<Spanned<String>>,
    priority: Option<Spanned<i64>>,
    nice: Option<Spanned<i64>>,
    runtime: Option<Dur>,
    deadline: Option<Dur>,
    period: Option<Dur>,
    offset: Option<Dur>,
    exec: Option<Dur>,
    exec_max: Option<Dur>,
    exec_dist: Option<Spanned<String>>,
    jobs: Option<u64>,
    poll: Option<Spanned<String>>,
    socket: Option<Spanned<String>>,
    recv_cost: Option<Dur>,
    user_cost: Option<Dur>,
    run: Option<Dur>,
    sleep: Option<Dur>,
    frames: Option<u64>,
    keep_frames: Option<bool>,
    server: Option<Spanned<RawServer>>,
    pattern: Option<Spanned<String>>,
    intensity: Option<Spanned<f64>>,
    block: Option<Spanned<u64>>,
    issue_cost: Option<Dur>,
    reply_size: Option<Spanned<u64>>,
    send_cost: Option<Dur>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTraffic {
    kind: Spanned<String>,
    name: Option<String>,
    interval: Option<Dur>,
    size: Option<Spanned<u64>>,
    link: Option<Spanned<String>>,
    socket: Option<Spanned<String>>,
    reply: Option<bool>,
    start: Option<Dur>,
    stop: Option<Dur>,
    burst: Option<Spanned<f64>>,
    spacing: Option<Dur>,
    gap: Option<Dur>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRun {
    duration: Dur,
    seed: Option<u64>,
    warmup: Option<Dur>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawMetric {
    kind: Spanned<String>,
    interval: Option<Dur>,
    task: Option<Spanned<String>>,
    windows: Option<Vec<Dur>>,
    from: Option<Dur>,
    to: Option<Dur>,
    points: Option<Spanned<u64>>,
}

/// A parsed, validated scenario.
pub struct Scenario {
    pub file: String,
    text: String,
    raw: Raw,
}

/// The longest run a scenario may ask for: 10^6 simulated seconds (11.6
/// days). At the benchmark's ~40 simulated seconds per wall second that is
/// already about 7 hours; anything longer is a typo, not an experiment.
pub const MAX_DURATION_NS: Nanos = 1_000_000 * 1_000_000_000;

/// The largest ring, queue, backlog, weight or budget a scenario may set
/// (2^20: Linux's largest NIC rings hold 2^15 descriptors).
pub const MAX_QUEUE: u64 = 1 << 20;

/// Run parameters after overrides.
#[derive(Debug, Clone, Copy)]
pub struct RunParams {
    pub duration: Nanos,
    pub warmup: Nanos,
    pub seed: u64,
}

impl Scenario {
    /// Parses and validates `text` (the contents of `file`).
    pub fn parse(file: &str, text: &str) -> Result<Scenario, InputError> {
        let raw: Raw = toml::from_str(text).map_err(|e| InputError::from_toml(file, text, &e))?;
        let sc = Scenario { file: file.to_string(), text: text.to_string(), raw };
        let p = sc.run_params(None, None)?;
        sc.build(p)?;
        Ok(sc)
    }

    pub fn name(&self) -> String {
        self.raw
            .name
            .clone()
            .unwrap_or_else(|| std::path::Path::new(&self.file).file_stem().map_or("scenario".into(), |s| s.to_string_lossy().into_owned()))
    }

    /// Whether a run produces a probe curve.
    pub fn has_probe(&self) -> bool {
        self.raw.task.iter().any(|t| t.get_ref().kind.get_ref() == "probe")
            || self.raw.metric.iter().any(|m| m.get_ref().kind.get_ref() == "probe")
    }

    pub fn description(&self) -> Option<&str> {
        self.raw.description.as_deref()
    }

    fn err(&self, span: Range<usize>, msg: impl Into<String>) -> InputError {
        InputError::at(msg, Location::at_span(&self.file, &self.text, span))
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

    fn need<'a, T>(&self, v: &'a Option<T>, span: Range<usize>, what: &str) -> Result<&'a T, InputError> {
        v.as_ref().ok_or_else(|| self.err(span, format!("missing `{what}`")))
    }

    /// Duration, seed and warm-up from the file, with command-line
    /// overrides.
    pub fn run_params(&self, seed: Option<u64>, duration: Option<Nanos>) -> Result<RunParams, InputError> {
        let r = self.raw.run.get_ref();
        let duration = match duration {
            Some(d) => d,
            None => {
                let d = self.positive(&r.duration, "run.duration")?;
                if d > MAX_DURATION_NS {
                    return Err(self.err(r.duration.span(), "run.duration: at most 1000000s (11.6 days simulated)"));
                }
                d
            }
        };
        let warmup = self.dur_or(&r.warmup, 0)?;
        if warmup >= duration {
            let span = r.warmup.as_ref().map_or(self.raw.run.span(), |w| w.span());
            return Err(self.err(span, "warm-up must be shorter than the run"));
        }
        Ok(RunParams { duration, warmup, seed: seed.or(r.seed).unwrap_or(1) })
    }

    fn policy_of(
        &self,
        span: Range<usize>,
        policy: &Option<Spanned<String>>,
        priority: &Option<Spanned<i64>>,
        nice: &Option<Spanned<i64>>,
        dl: (&Option<Dur>, &Option<Dur>, &Option<Dur>),
    ) -> Result<Policy, InputError> {
        let rt_prio = |what: &str| -> Result<u8, InputError> {
            let p = priority.as_ref().ok_or_else(|| self.err(span.clone(), format!("{what} needs `priority` (1-99)")))?;
            if !(1..=99).contains(p.get_ref()) {
                return Err(self.err(p.span(), "priority must be 1-99"));
            }
            Ok(*p.get_ref() as u8)
        };
        let name = policy.as_ref().map_or("other", |p| p.get_ref().as_str());
        Ok(match name {
            "fifo" => Policy::Fifo(rt_prio("fifo")?),
            "rr" => Policy::Rr(rt_prio("rr")?),
            "other" => {
                let n = nice.as_ref().map_or(Ok(0), |n| {
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
                let runtime = self.positive(self.need(dl.0, span.clone(), "runtime")?, "runtime")?;
                let period = self.positive(self.need(dl.2, span.clone(), "period")?, "period")?;
                let deadline = self.dur_or(dl.1, period)?;
                if !(runtime <= deadline && deadline <= period) {
                    return Err(self.err(span, "SCHED_DEADLINE needs runtime <= deadline <= period"));
                }
                Policy::Deadline { runtime, deadline, period }
            }
            _ => {
                let p = policy.as_ref().expect("non-default");
                return Err(self.err(p.span(), format!("unknown policy `{name}` (fifo, rr, other, idle, deadline)")));
            }
        })
    }

    fn server_of(&self, s: &Spanned<RawServer>, task: usize, high: Policy) -> Result<Box<dyn Server>, InputError> {
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
                let low = match &r.low_priority {
                    None => None,
                    Some(p) if (1..=99).contains(p.get_ref()) => Some(Policy::Fifo(*p.get_ref() as u8)),
                    Some(p) => return Err(self.err(p.span(), "low_priority must be 1-99 (omit it to suspend instead)")),
                };
                let max_repl = self.count(&r.max_repl, "max_repl", 4, 1..=1024)? as usize;
                let accounting = match r.accounting.as_ref().map(|a| (a.get_ref().as_str(), a.span())) {
                    None | Some(("exact", _)) => Accounting::Exact { granularity: self.dur_or(&r.granularity, 1)? },
                    Some(("tick", _)) if r.granularity.is_some() => {
                        let g = r.granularity.as_ref().expect("checked");
                        return Err(self.err(g.span(), "with accounting = \"tick\" the granularity is the timer tick (omit granularity)"));
                    }
                    Some(("tick", _)) => {
                        Accounting::TickSampled { tick: 1_000_000_000 / (*self.raw.machine.get_ref().hz.get_ref()).max(1) as Nanos }
                    }
                    Some((a, span)) => return Err(self.err(span, format!("unknown accounting `{a}` (exact, tick)"))),
                };
                Box::new(Sporadic::new(task, high, low, budget, period, max_repl, accounting))
            }
            "polling" => Box::new(PeriodicServer::new(task, budget, period, false)),
            "deferrable" => Box::new(PeriodicServer::new(task, budget, period, true)),
            k => return Err(self.err(r.kind.span(), format!("unknown server kind `{k}` (sporadic, polling, deferrable)"))),
        })
    }

    /// Builds a fresh simulator for one run.
    pub fn build(&self, p: RunParams) -> Result<Sim, InputError> {
        let m = self.raw.machine.get_ref();
        let hz = *m.hz.get_ref();
        if ![100, 250, 300, 1000].contains(&hz) {
            return Err(self.err(m.hz.span(), "hz must be 100, 250, 300 or 1000"));
        }
        if let Some(c) = &m.cores {
            if *c.get_ref() != 1 {
                return Err(self.err(c.span(), "only cores = 1 is modelled so far"));
            }
        }
        let costs = m.costs.get_ref();
        let model_name = m.softirq.get_ref().as_str();
        let cfg = MachineConfig {
            hz,
            irq_entry: self.dur(&costs.irq_entry)?,
            irq_exit: self.dur(&costs.irq_exit)?,
            tick: self.dur(&costs.tick)?,
            context_switch: self.dur(&costs.context_switch)?,
            irq_primary: self.dur_or(&costs.irq_primary, 0)?,
            hrtimer: costs.hrtimer.as_ref().map(|d| self.dur(d)).transpose()?,
            irq_time_accounting: m.irq_time_accounting.unwrap_or(model_name == "linux-modern"),
            netdev_max_backlog: self.count(
                &m.netdev_max_backlog,
                "netdev_max_backlog",
                if model_name == "linux-2.4" { 300 } else { 1000 },
                1..=MAX_QUEUE,
            )? as usize,
        };
        let model: Box<dyn SoftirqModel> = match model_name {
            "linux-2.4" => Box::new(softirq::Linux24),
            "linux-2.6" => Box::new(softirq::Linux26),
            "linux-modern" => Box::new(softirq::LinuxModern {
                budget_packets: self.count(&m.netdev_budget, "netdev_budget", 300, 1..=MAX_QUEUE)? as u32,
                budget_ns: self.dur_or(&m.netdev_budget_usecs, 2_000_000)?,
            }),
            "threaded" => Box::new(softirq::Threaded),
            _ => {
                return Err(self
                    .err(m.softirq.span(), format!("unknown softirq model `{model_name}` (linux-2.4, linux-2.6, linux-modern, threaded)")))
            }
        };
        let fair = match m.scheduler.as_ref().map(|s| (s.get_ref().as_str(), s.span())) {
            None | Some(("cfs", _)) => FairKind::Cfs,
            Some(("linux-2.4", _)) => FairKind::Linux24,
            Some((other, span)) => return Err(self.err(span, format!("unknown scheduler `{other}` (cfs, linux-2.4)"))),
        };
        let threaded = model.threaded();
        let mut sim = Sim::new(cfg, fair, model, p.seed);

        // Kernel threads.
        let ks_nice = match &m.ksoftirqd_nice {
            Some(n) if (-20..=19).contains(n.get_ref()) => *n.get_ref() as i8,
            Some(n) => return Err(self.err(n.span(), "nice must be -20..19")),
            // 2.4 ran ksoftirqd at nice 19; 2.6 and later at nice 0.
            None => {
                if model_name == "linux-2.4" {
                    19
                } else {
                    0
                }
            }
        };
        for name in self.raw.threads.keys() {
            if !["net_rx", "net_tx", "nic_irq", "ksoftirqd"].contains(&name.as_str()) {
                let span = self.raw.threads[name].span();
                return Err(self.err(span, format!("unknown thread `{name}` (net_rx, net_tx, nic_irq, ksoftirqd)")));
            }
        }
        let thread_policy = |key: &str, default: Policy| -> Result<(Policy, Option<&Spanned<RawServer>>), InputError> {
            match self.raw.threads.get(key) {
                None => Ok((default, None)),
                Some(t) => {
                    let r = t.get_ref();
                    let pol =
                        self.policy_of(t.span(), &Some(r.policy.clone()), &r.priority, &r.nice, (&r.runtime, &r.deadline, &r.period))?;
                    Ok((pol, r.server.as_ref()))
                }
            }
        };
        let mut pending_servers: Vec<(usize, &Spanned<RawServer>)> = Vec::new();
        let (kp, ks) = thread_policy("ksoftirqd", Policy::Other(ks_nice))?;
        let kid = sim.add_task(Task::new("ksoftirqd/0", kp, TaskKind::Ksoftirqd));
        if let Some(s) = ks {
            pending_servers.push((kid, s));
        }
        if threaded {
            // Default priorities as PREEMPT_RT gives its IRQ threads (FIFO 50).
            for (key, name, vector) in [("net_rx", "net-rx", softirq::NET_RX), ("net_tx", "net-tx", softirq::NET_TX)] {
                let (pol, srv) = thread_policy(key, Policy::Fifo(50))?;
                let id = sim.add_task(Task::new(name, pol, TaskKind::SoftirqThread { vectors: 1 << vector }));
                sim.vector_thread[vector as usize] = Some(id);
                if let Some(s) = srv {
                    pending_servers.push((id, s));
                }
            }
        } else if let Some((k, t)) = self.raw.threads.iter().find(|(k, _)| *k != "ksoftirqd") {
            return Err(self.err(t.span(), format!("thread `{k}` exists only under the threaded softirq model")));
        }

        // Sockets: declared ones, then any name a task or source uses.
        let mut read_sockets: Vec<&Spanned<String>> = Vec::new();
        let mut fed_sockets: std::collections::BTreeSet<String> = std::collections::BTreeSet::new();
        let mut socket_ids: BTreeMap<String, usize> = BTreeMap::new();
        for s in &self.raw.socket {
            let r = s.get_ref();
            if socket_ids.contains_key(r.name.get_ref()) {
                return Err(self.err(r.name.span(), format!("socket `{}` declared twice", r.name.get_ref())));
            }
            socket_ids.insert(r.name.get_ref().clone(), sim.sockets.len());
            sim.sockets.push(Socket::new(r.name.get_ref().clone(), *r.rcvbuf.get_ref()));
        }
        let mut socket = |sim: &mut Sim, name: &str| -> usize {
            *socket_ids.entry(name.to_string()).or_insert_with(|| {
                // Linux's default rmem_default (212992 bytes).
                sim.sockets.push(Socket::new(name, 212_992));
                sim.sockets.len() - 1
            })
        };

        // NIC.
        if let Some(nic) = &self.raw.nic {
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
            };
            let name = r.name.clone().unwrap_or_else(|| "eth0".into());
            let line = sim.add_line(IrqLine::new(name.clone(), IrqKind::Nic(0)));
            let ring = self.count(&r.ring, "ring", 256, 1..=MAX_QUEUE)? as usize;
            sim.nics.push(Nic {
                name: name.clone(),
                ring: VecDeque::with_capacity(ring),
                ring_size: ring,
                napi: r.napi,
                weight: self.count(&r.weight, "weight", 64, 1..=MAX_QUEUE)? as u32,
                line,
                napi_scheduled: false,
                costs,
                coalesce_frames: self.count(&r.coalesce_frames, "coalesce_frames", 1, 1..=MAX_QUEUE)? as u32,
                coalesce_ns: self.dur_or(&r.coalesce_usecs, 0)?,
                unsignalled: 0,
                coalesce_gen: 0,
                coalesce_armed: false,
                link_free_at: 0,
                tx_dev: None,
                stats: Default::default(),
            });
            if threaded {
                let (pol, srv) = thread_policy("nic_irq", Policy::Fifo(50))?;
                let id = sim.add_task(Task::new(format!("irq/{line}-{name}"), pol, TaskKind::IrqThread { line }));
                sim.lines[line].thread = Some(id);
                if let Some(s) = srv {
                    pending_servers.push((id, s));
                }
            }
        }

        if let Some(tx) = self.raw.nic.as_ref().and_then(|n| n.get_ref().tx.as_ref()) {
            let r = tx.get_ref();
            let limit = self.count(&r.queue, "queue", 1000, 1..=MAX_QUEUE)?;
            let link = match &r.link {
                Some(l) => parse_link(l.get_ref()).map_err(|e| self.err(l.span(), e))?,
                None => 1_000_000_000,
            };
            let costs = crate::net_tx::TxCosts { irq: self.dur(&r.irq)?, complete: self.dur(&r.complete)? };
            let id = sim.devices.len();
            let name = format!("{}-tx", sim.nics[0].name);
            let line = sim.add_line(IrqLine::new(name.clone(), IrqKind::Device(id)));
            sim.devices.push(Some(Box::new(crate::net_tx::NicTx::new(name, id, line, limit as usize, link, costs))));
            sim.nics[0].tx_dev = Some(id);
        }

        // Generic interrupt sources.
        for irq in &self.raw.irq {
            let r = irq.get_ref();
            let vector = match r.vector.as_ref().map(|v| (v.get_ref().as_str(), v.span())) {
                None | Some(("tasklet", _)) => softirq::TASKLET,
                Some(("hi", _)) => softirq::HI,
                Some(("timer", _)) => softirq::TIMER,
                Some(("block", _)) => softirq::BLOCK,
                Some((other, span)) => return Err(self.err(span, format!("unknown vector `{other}` (hi, timer, block, tasklet)"))),
            };
            let id = sim.devices.len();
            let name = r.name.get_ref().clone();
            let line = sim.add_line(IrqLine::new(name.clone(), IrqKind::Device(id)));
            let src = crate::irq_source::IrqSource::new(
                name.clone(),
                id,
                line,
                self.positive(&r.interval, "interval")?,
                r.poisson.unwrap_or(false),
                self.dur(&r.handler)?,
                self.dur_or(&r.bottom_half, 0)?,
                vector,
                rng_stream(p.seed, &format!("irq/{name}")),
            );
            sim.devices.push(Some(Box::new(src)));
            let first = self.positive(&r.interval, "interval")?;
            sim.q.schedule_at(first, crate::kernel::Ev::Device { dev: id as u32, token: 0 });
        }

        // Disk.
        let disk = match &self.raw.disk {
            Some(d) => Some(self.disk_device(d, &mut sim)?),
            None => None,
        };

        // Tasks.
        let mut names: BTreeMap<String, Range<usize>> = BTreeMap::new();
        for t in &sim.tasks {
            names.insert(t.name.clone(), 0..0);
        }
        let mut probe_tasks = Vec::new();
        for (i, t) in self.raw.task.iter().enumerate() {
            let r = t.get_ref();
            let name = r.name.get_ref().clone();
            if names.contains_key(&name) {
                return Err(self.err(r.name.span(), format!("task name `{name}` is used twice")));
            }
            names.insert(name.clone(), r.name.span());
            let policy = self.policy_of(t.span(), &r.policy, &r.priority, &r.nice, (&r.runtime, &r.deadline, &r.period))?;
            let rng = rng_stream(p.seed, &format!("task/{name}"));
            let exec = |what: &str| -> Result<Dist, InputError> {
                let e = self.positive(self.need(&r.exec, t.span(), what)?, what)?;
                let dist = r.exec_dist.as_ref().map_or("const", |d| d.get_ref().as_str());
                match dist {
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
            };
            let behavior: Box<dyn crate::task::Behavior> = match r.kind.get_ref().as_str() {
                "periodic" => {
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
                    let mut b = Periodic::new(period, self.dur_or(&r.offset, 0)?, deadline, exec("exec")?, rng);
                    if let Some(s) = &r.poll {
                        b.poll = Some(socket(&mut sim, s.get_ref()));
                        b.recv_cost = self.dur_or(&r.recv_cost, 0)?;
                    }
                    b.max_jobs = r.jobs;
                    Box::new(b)
                }
                "cpu-loop" | "probe" => {
                    let phases = match (&r.run, &r.sleep) {
                        (Some(a), Some(b)) => Some((self.positive(a, "run")?, self.dur(b)?)),
                        (None, None) => None,
                        _ => return Err(self.err(t.span(), "`run` and `sleep` go together")),
                    };
                    if r.kind.get_ref() == "probe" {
                        probe_tasks.push((i, name.clone()));
                    }
                    Box::new(CpuLoop::new(phases))
                }
                "udp-server" => {
                    let s = self.need(&r.socket, t.span(), "socket")?;
                    let sid = socket(&mut sim, s.get_ref());
                    let mut b = UdpServer::new(sid, self.dur_or(&r.recv_cost, 0)?, self.dur_or(&r.user_cost, 0)?);
                    if let Some(size) = &r.reply_size {
                        let tx = sim.nics.first().and_then(|n| n.tx_dev).ok_or_else(|| self.err(size.span(), "replies need a [nic.tx]"))?;
                        if !(1..=65_535).contains(size.get_ref()) {
                            return Err(self.err(size.span(), "reply_size must be 1-65535 bytes"));
                        }
                        b.reply = Some((tx, *size.get_ref() as u32, self.dur_or(&r.send_cost, 0)?));
                    }
                    Box::new(b)
                }
                "media-player" => {
                    let period = self.positive(self.need(&r.period, t.span(), "period")?, "period")?;
                    let frames = r.frames.unwrap_or(u64::MAX);
                    Box::new(MediaPlayer::new(period, exec("exec")?, frames, rng, r.keep_frames.unwrap_or(false)))
                }
                "disk-reader" => {
                    let (dev, disk_sectors) = disk.ok_or_else(|| self.err(t.span(), "a disk-reader needs a [disk]"))?;
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
                    if block == 0 || block % 512 != 0 || block > 16 << 20 {
                        let span = r.block.as_ref().expect("default is valid").span();
                        return Err(self.err(span, "block must be a multiple of 512 bytes, at most 16 MiB"));
                    }
                    let issue = self.dur_or(&r.issue_cost, 0)?;
                    Box::new(DiskReader::new(dev, disk_sectors, block / 512, pattern, intensity, issue, rng))
                }
                k => {
                    return Err(self.err(
                        r.kind.span(),
                        format!("unknown task kind `{k}` (periodic, cpu-loop, probe, udp-server, media-player, disk-reader)"),
                    ))
                }
            };
            let id = sim.add_task(Task::new(name, policy, TaskKind::User(behavior)));
            if let Policy::Rr(_) = policy {
                sim.tasks[id].rr_left = crate::sched::rt::RR_TIMESLICE_NS;
            }
            for s in [&r.socket, &r.poll].into_iter().flatten() {
                read_sockets.push(s);
                let sid = socket(&mut sim, s.get_ref());
                if sim.sockets[sid].owner.is_none() {
                    sim.sockets[sid].owner = Some(id);
                }
            }
            if let Some(s) = &r.server {
                pending_servers.push((id, s));
            }
        }
        for (task, s) in pending_servers {
            if matches!(sim.tasks[task].policy, Policy::Deadline { .. }) {
                return Err(self.err(s.span(), "a SCHED_DEADLINE task is its own server"));
            }
            let server = self.server_of(s, task, sim.tasks[task].policy)?;
            sim.tasks[task].server = Some(sim.servers.len());
            sim.servers.push(server);
        }

        // Traffic.
        for (i, tr) in self.raw.traffic.iter().enumerate() {
            let r = tr.get_ref();
            if sim.nics.is_empty() {
                return Err(self.err(tr.span(), "traffic needs a [nic]"));
            }
            let kind = r.kind.get_ref().as_str();
            let size = r.size.as_ref().map_or(64, |s| *s.get_ref());
            if !(1..=65_535).contains(&size) {
                return Err(self.err(r.size.as_ref().expect("set").span(), "size must be 1-65535 bytes"));
            }
            let link = match &r.link {
                Some(l) => parse_link(l.get_ref()).map_err(|e| self.err(l.span(), e))?,
                None => 1_000_000_000,
            };
            let interval = |default: Option<Nanos>| -> Result<Nanos, InputError> {
                match (&r.interval, default) {
                    (Some(d), _) => self.positive(d, "interval"),
                    (None, Some(d)) => Ok(d),
                    (None, None) => Err(self.err(tr.span(), "missing `interval`")),
                }
            };
            let mut proto_udp = |sim: &mut Sim| -> Result<Proto, InputError> {
                let s = self.need(&r.socket, tr.span(), "socket")?;
                fed_sockets.insert(s.get_ref().clone());
                Ok(Proto::Udp { socket: socket(sim, s.get_ref()) as u16 })
            };
            let (arrivals, proto) = match kind {
                "ping-flood" => (Arrivals::Constant { interval: interval(None)? }, Proto::IcmpEcho { reply: r.reply.unwrap_or(true) }),
                // The load-bounds paper's heartbeat: a datagram every 10 ms.
                "heartbeat" => (Arrivals::Constant { interval: interval(Some(10_000_000))? }, proto_udp(&mut sim)?),
                "constant" | "poisson" | "mmpp2" => {
                    let proto = if r.socket.is_some() { proto_udp(&mut sim)? } else { Proto::IcmpEcho { reply: r.reply.unwrap_or(true) } };
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
                    return Err(
                        self.err(r.kind.span(), format!("unknown traffic kind `{k}` (ping-flood, heartbeat, constant, poisson, mmpp2)"))
                    )
                }
            };
            let name = r.name.clone().unwrap_or_else(|| format!("{kind}-{i}"));
            sim.sources.push(Source {
                rng: rng_stream(p.seed, &format!("traffic/{name}")),
                name,
                nic: 0,
                arrivals,
                proto,
                size: size as u32,
                wire_ns: wire_ns(size as u32, link),
                start: self.dur_or(&r.start, 0)?,
                stop: self.dur_or(&r.stop, Nanos::MAX)?,
                sent: 0,
            });
        }

        // A socket a task reads that nothing sends to and no [[socket]]
        // declares is a misspelt name (`poll = "hearbeat"`): every datagram
        // would go to the other socket and the task would wait forever.
        for s in &read_sockets {
            let name = s.get_ref();
            if !fed_sockets.contains(name) && !self.raw.socket.iter().any(|d| d.get_ref().name.get_ref() == name) {
                let mut known: Vec<&str> = fed_sockets.iter().map(String::as_str).collect();
                known.extend(self.raw.socket.iter().map(|d| d.get_ref().name.get_ref().as_str()));
                let known = if known.is_empty() { "none".to_string() } else { known.join(", ") };
                return Err(self.err(
                    s.span(),
                    format!(
                        "no traffic sends to socket `{name}` and no [[socket]] declares it (sockets that exist: {known}); \
                         declare it with [[socket]] if nothing is meant to arrive"
                    ),
                ));
            }
        }

        // Metrics.
        for mt in &self.raw.metric {
            let r = mt.get_ref();
            match r.kind.get_ref().as_str() {
                "bh_time" => {
                    let interval = match &r.interval {
                        Some(d) => self.positive(d, "interval")?,
                        None => 1_000_000,
                    };
                    sim.bh_series = Some(crate::metrics::Series::new(interval, 0));
                }
                "probe" => {
                    let t = self.need(&r.task, mt.span(), "task")?;
                    let id = sim.task_id(t.get_ref()).ok_or_else(|| self.err(t.span(), format!("no task named `{}`", t.get_ref())))?;
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
                    sim.probe = Some(Probe::new(id, windows, 0));
                }
                k => return Err(self.err(r.kind.span(), format!("unknown metric `{k}` (bh_time, probe)"))),
            }
        }
        if sim.probe.is_none() {
            if let Some((_, name)) = probe_tasks.first() {
                let id = sim.task_id(name).expect("added");
                sim.probe = Some(Probe::new(id, log_windows(10_000, 100_000_000, 25), 0));
            }
        }

        // Bottom-half policy.
        if let Some(pol) = &self.raw.policy {
            let mut table = pol.get_ref().clone();
            let name = match table.remove("bottom_half") {
                None => "none".to_string(),
                Some(toml::Value::String(s)) => s,
                Some(_) => return Err(self.err(pol.span(), "bottom_half must be a string")),
            };
            let made = crate::policy::bottom_half_policy(&name, &table, &sim).map_err(|e| self.err(pol.span(), e))?;
            sim.bh_policy = made;
        }
        let _ = p.duration;
        Ok(sim)
    }
}

impl Scenario {
    /// Builds the `[disk]` device; returns its device index and capacity.
    fn disk_device(&self, d: &Spanned<RawDisk>, sim: &mut Sim) -> Result<(usize, u64), InputError> {
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
        let id = sim.devices.len();
        let name = r.name.clone().unwrap_or_else(|| "sda".into());
        let line = sim.add_line(IrqLine::new(name.clone(), IrqKind::Device(id)));
        let dev = crate::disk::DiskDevice::new(name, id, line, costs, crate::disk::Drive::new(g));
        let sectors = dev.sectors();
        sim.devices.push(Some(Box::new(dev)));
        Ok((id, sectors))
    }
}

/// Parses a link rate: `"100Mbit"`, `"1Gbit"`, `"10Gbit/s"`, `"56kbit"`.
pub fn parse_link(s: &str) -> Result<u64, String> {
    let t = s.trim().trim_end_matches("/s").trim_end_matches("ps");
    let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(t.len());
    let (num, unit) = (&t[..split], t[split..].trim());
    let v: f64 = num.parse().map_err(|_| format!("link rate `{s}` is not a number with a unit (e.g. \"100Mbit\")"))?;
    let scale = match unit {
        "bit" | "b" => 1.0,
        "kbit" | "Kbit" | "kb" => 1e3,
        "Mbit" | "mbit" | "Mb" => 1e6,
        "Gbit" | "gbit" | "Gb" => 1e9,
        _ => return Err(format!("link rate `{s}` has an unknown unit (bit, kbit, Mbit, Gbit)")),
    };
    let r = (v * scale).round();
    if r < 1.0 {
        return Err(format!("link rate `{s}` must be positive"));
    }
    Ok(r as u64)
}
