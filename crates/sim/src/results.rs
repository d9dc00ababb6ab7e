//! The `irqlab/sim/v2` result document, and the conservation checks every
//! run must pass: CPU time in all contexts plus idle equals the measured
//! span; every packet offered is handled, delivered, dropped with a reason,
//! or still in flight.
//!
//! A task's and the CPU's times are `irqlab_analysis::cpu_time`'s
//! [`TaskTime`] and `CpuTime`, flattened, the vocabulary the live
//! accounting (`irqlab/accounting/v1`) writes too, so simulated and live
//! compare with `cpu_time::compare`. v2 differs from v1 only in those
//! names: a task's `cpu_ns` is `run_ns`, the CPU's `task_ns` is `run_ns`
//! (`docs/conventions.md`, Outputs).

use crate::kernel::{CpuTimes, Sim};
use crate::metrics::{Percentiles, Series};
use crate::net::{NicStats, SocketStats};
use crate::softirq::SoftirqStats;
use crate::task::{Policy, RunState};
use irqlab_analysis::cpu_time::TaskTime;
use irqlab_analysis::curve::Curve;
use irqlab_analysis::Nanos;
use serde::Serialize;

pub const SIM_SCHEMA: &str = "irqlab/sim/v2";

#[derive(Debug, Clone, Serialize)]
pub struct SimResult {
    pub schema: &'static str,
    pub complete: bool,
    pub scenario: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    pub seed: u64,
    pub duration_ns: Nanos,
    pub warmup_ns: Nanos,
    /// Span the statistics cover (end − warm-up, or less if stopped).
    pub measured_ns: Nanos,
    pub machine: MachineInfo,
    /// Events the engine processed (heap events + CPU completions).
    pub events: u64,
    pub cpu: CpuTimes,
    pub conservation: Conservation,
    pub tasks: Vec<TaskResult>,
    pub nics: Vec<NicResult>,
    pub devices: Vec<serde_json::Value>,
    pub sockets: Vec<SocketResult>,
    pub irq_lines: Vec<LineResult>,
    pub softirq: SoftirqStats,
    pub servers: Vec<serde_json::Value>,
    /// RT throttling or the fair server (kernel presets), with how often it acted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bandwidth: Option<serde_json::Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bottom_half_policy: Option<serde_json::Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bh_time: Option<Series>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub probe: Option<Curve>,
}

#[derive(Debug, Clone, Serialize)]
pub struct MachineInfo {
    pub hz: u32,
    /// The `[machine] kernel` preset, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kernel: Option<&'static str>,
    pub softirq_model: String,
    pub scheduler: String,
    pub bottom_half_policy: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct Conservation {
    /// hardirq + softirq + task + switch + idle == measured span.
    pub cpu_time_ok: bool,
    pub cpu_accounted_ns: Nanos,
    /// offered + in flight at start == handled + delivered + dropped + in
    /// flight at end.
    pub packets_ok: bool,
    pub packets_offered: u64,
    pub icmp_handled: u64,
    pub udp_delivered_to_app: u64,
    pub dropped_ring_full: u64,
    pub dropped_backlog_full: u64,
    pub dropped_socket_full: u64,
    pub in_flight_at_start: u64,
    pub in_flight_at_end: u64,
    /// RPS: packets this CPU put on other CPUs' backlogs, and those other
    /// CPUs put on its backlog (0 on one CPU).
    #[serde(skip_serializing_if = "is_zero")]
    pub rps_packets_sent: u64,
    #[serde(skip_serializing_if = "is_zero")]
    pub rps_packets_received: u64,
    /// Every device's requests: submitted + inside at start == completed +
    /// inside at end.
    pub devices_ok: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct TaskResult {
    pub name: String,
    pub policy: String,
    pub state: String,
    /// `run_ns` (`cpu_ns` in v1), `stolen_ns`, `stolen_hardirq_ns`,
    /// `stolen_softirq_ns`; no `served_softirq_ns`: the simulator does not
    /// attribute softirq work to the task it served.
    #[serde(flatten)]
    pub time: TaskTime,
    /// `run_ns` split by the mode the task ran in.
    pub user_ns: Nanos,
    pub system_ns: Nanos,
    pub charged_utime_ns: Nanos,
    pub charged_stime_ns: Nanos,
    /// Bottom-half work this task did itself, as ksoftirqd or a softirq
    /// thread (threaded model), inside its `run_ns`. Not `served_softirq_ns`, the
    /// work done *for* a task.
    pub bottom_half_work_ns: Nanos,
    pub context_switches_in: u64,
    pub preemptions: u64,
    /// Jobs finished, plus (periodic tasks) jobs whose deadline passed
    /// unfinished before the end.
    pub jobs: u64,
    /// Jobs that finished after their deadline or had not finished when
    /// it passed.
    pub deadline_misses: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub response: Option<Percentiles>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub extra: Option<serde_json::Value>,
}

#[derive(Debug, Clone, Serialize)]
pub struct NicResult {
    pub name: String,
    pub napi: bool,
    #[serde(flatten)]
    pub stats: NicStats,
    pub in_ring: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct SocketResult {
    pub name: String,
    pub owner: Option<String>,
    #[serde(flatten)]
    pub stats: SocketStats,
    pub queued: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct LineResult {
    pub name: String,
    pub count: u64,
    pub time_ns: Nanos,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

pub fn policy_name(p: Policy) -> String {
    match p {
        Policy::Fifo(x) => format!("fifo:{x}"),
        Policy::Rr(x) => format!("rr:{x}"),
        Policy::Other(n) => format!("other:nice{n}"),
        Policy::Idle => "idle".into(),
        Policy::Deadline { runtime, deadline, period } => format!("deadline:{runtime}/{deadline}/{period}"),
    }
}

impl Sim {
    /// The result document of the run so far.
    pub fn result(&mut self, scenario: &str, description: Option<&str>, duration: Nanos, warmup: Nanos, complete: bool) -> SimResult {
        let measured = self.now - self.stats_start;
        let now = self.now;
        for t in &mut self.tasks {
            if let crate::task::TaskKind::User(b) = &mut t.kind {
                b.finish(now, &mut t.jobs);
            }
        }
        let tasks = self
            .tasks
            .iter()
            .map(|t| TaskResult {
                name: t.name.clone(),
                policy: policy_name(t.policy),
                state: format!("{:?}", t.state).to_lowercase(),
                time: TaskTime::new(t.acct.run_ns, t.acct.stolen_hardirq_ns, t.acct.stolen_softirq_ns, None),
                user_ns: t.acct.user_ns,
                system_ns: t.acct.system_ns,
                charged_utime_ns: t.acct.charged_utime_ns,
                charged_stime_ns: t.acct.charged_stime_ns,
                bottom_half_work_ns: t.acct.bh_work_ns,
                context_switches_in: t.acct.context_switches_in,
                preemptions: t.acct.preemptions,
                jobs: t.jobs.jobs,
                deadline_misses: t.jobs.deadline_misses,
                response: t.jobs.response.summary(),
                extra: match &t.kind {
                    crate::task::TaskKind::User(b) => b.extra(),
                    _ => None,
                },
            })
            .collect();
        let conservation = self.conservation();
        let probe_end = self.now;
        SimResult {
            schema: SIM_SCHEMA,
            complete,
            scenario: scenario.to_string(),
            description: description.map(str::to_string),
            seed: self.seed,
            duration_ns: duration,
            warmup_ns: warmup,
            measured_ns: measured,
            machine: MachineInfo {
                hz: self.cfg.hz,
                kernel: self.kernel_preset,
                softirq_model: self.model.name().to_string(),
                scheduler: self.sched.fair.name().to_string(),
                bottom_half_policy: self.bh_policy.as_ref().map_or("none", |p| p.name()).to_string(),
            },
            events: self.events,
            cpu: self.times.clone(),
            conservation,
            tasks,
            nics: self
                .nics
                .iter()
                .map(|n| NicResult { name: n.name.clone(), napi: n.napi, stats: n.stats.clone(), in_ring: n.ring.len() as u64 })
                .collect(),
            devices: self.device_reports(),
            sockets: self
                .sockets
                .iter()
                .map(|s| SocketResult {
                    name: s.name.clone(),
                    owner: s.owner.map(|o| self.tasks[o].name.clone()),
                    stats: s.stats.clone(),
                    queued: s.queue.len() as u64,
                })
                .collect(),
            irq_lines: self.lines.iter().map(|l| LineResult { name: l.name.clone(), count: l.count, time_ns: l.ns }).collect(),
            softirq: {
                let mut st = self.softirq_stats.clone();
                for (v, ns) in self.bh_vector_ns.iter().enumerate() {
                    if *ns > 0 {
                        st.per_vector_ns.insert(crate::softirq::vector_name(v as u32).to_string(), *ns);
                    }
                }
                st
            },
            servers: self.servers.iter().map(|s| s.report()).collect(),
            bandwidth: self.sched.bandwidth.report(),
            bottom_half_policy: self.bh_policy.as_ref().and_then(|p| p.report()),
            bh_time: self.bh_series.clone(),
            probe: self.probe.as_mut().map(|p| p.finish(probe_end)),
        }
    }

    /// Each device's own report plus its interrupt line's count and time.
    fn device_reports(&self) -> Vec<serde_json::Value> {
        let mut out: Vec<serde_json::Value> = self.devices.iter().flatten().map(|d| d.report()).collect();
        for l in &self.lines {
            if let crate::kernel::IrqKind::Device(d) = l.kind {
                if let Some(serde_json::Value::Object(m)) = out.get_mut(d) {
                    m.insert("irq_count".into(), l.count.into());
                    m.insert("hardirq_ns".into(), l.ns.into());
                }
            }
        }
        out
    }

    pub fn conservation(&self) -> Conservation {
        let measured = self.now - self.stats_start;
        let sum = |f: fn(&NicStats) -> u64| self.nics.iter().map(|n| f(&n.stats)).sum::<u64>();
        let offered = sum(|s| s.packets_offered);
        let icmp = sum(|s| s.icmp_handled);
        let ring = sum(|s| s.dropped_ring_full);
        let backlog = sum(|s| s.dropped_backlog_full);
        let sock = sum(|s| s.dropped_socket_full);
        let delivered: u64 = self.sockets.iter().map(|s| s.stats.delivered).sum();
        let in_flight = self.packets_in_flight();
        let (rps_out, rps_in) = (self.cross.stats.rps_packets_sent, self.cross.stats.rps_packets_received);
        Conservation {
            cpu_time_ok: self.times.total() == measured,
            cpu_accounted_ns: self.times.total(),
            packets_ok: offered + self.in_flight_at_start + rps_in == icmp + delivered + ring + backlog + sock + in_flight + rps_out,
            packets_offered: offered,
            icmp_handled: icmp,
            udp_delivered_to_app: delivered,
            dropped_ring_full: ring,
            dropped_backlog_full: backlog,
            dropped_socket_full: sock,
            in_flight_at_start: self.in_flight_at_start,
            in_flight_at_end: in_flight,
            rps_packets_sent: rps_out,
            rps_packets_received: rps_in,
            devices_ok: self.devices.iter().flatten().all(|d| d.conserved()),
        }
    }

    pub fn task_state(&self, name: &str) -> Option<RunState> {
        self.task_id(name).map(|t| self.tasks[t].state)
    }
}
