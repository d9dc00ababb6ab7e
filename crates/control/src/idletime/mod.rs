//! `irqlab control idletime`: the idletime dissertation's Variant-1
//! scheduler (`../shared/SEEDS.md` §4) applied to a real disk or network
//! device. Foreground processes use the resource freely; background
//! processes are held back by a gate ([`gate`]) unless the resource has
//! had no foreground request for the preemption interval p. The decisions
//! are the shared policy code's ([`irqlab_policy::idletime::Gate`], which
//! the simulator's gated device runs too); the observations are the
//! resource's requests of each class from BPF ([`crate::monitor::io`]): a
//! disk's block requests issued and completed, or a device's packets
//! queued for its egress and taken by its driver.
//!
//! Order of observations: the kernel's timestamps. The interval's end is
//! observed at the time the gate asked for, before any request seen later
//! with a later timestamp, however late the timer fired, so a recorded run
//! replays to the same decisions in the simulator (tests/idletime_decisions.rs).

pub mod band;
pub mod disk;
pub mod gate;
pub mod net;
pub mod selector;

use crate::monitor::io::{self, IoEvent, IoWatch, Kind, Target};
use gate::{CgroupGate, Mechanism};
use irqlab_host::error::{Error, Result};
use irqlab_host::run_end::{EndedBy, RunEnd};
use irqlab_measure::latency::stats::{LatencyStats, StatsSummary};
use irqlab_policy::idletime::{Class, Gate, GateStep, IntervalStart, Observation};
use selector::Selector;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::time::Duration;

/// How often the selectors are resolved again (new processes classed,
/// new background processes moved behind the gate).
const RESCAN_NS: u64 = 100_000_000;

/// A request seen in the device for ten times the p99 of the foreground's
/// service times so far (within these bounds) is taken as complete: its
/// completion ran no program (see [`io::Kind::CompleteInferred`])
/// and its struct request was not reused since. Service times here: p99
/// below 3 ms under a greedy background.
const ASSUME_COMPLETE_MIN_NS: u64 = 20_000_000;
const ASSUME_COMPLETE_MAX_NS: u64 = 1_000_000_000;
/// How often that bound is taken again from the service times.
const BOUND_REFRESH_NS: u64 = 100_000_000;
/// A disk's foreground request older than this is looked for in the
/// disk's own count of requests in flight (`/sys/block/DEV/inflight`):
/// when that count is 0, every request issued before the look has
/// completed, whatever the tracepoints saw. Well past the issue
/// tracepoint's lead over the request's in-flight mark (a few
/// instructions), and above this disk's usual service times (0.1-0.4 ms)
/// so that the file is read only while a request looks overdue.
const DISK_IDLE_CHECK_NS: u64 = 1_000_000;

/// `--resource`: a disk or a network device, by name or the default one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ResourceSpec {
    /// The disk's name (None: the disk under /).
    Disk(Option<String>),
    /// The device's name (None: the default route's).
    Net(Option<String>),
}

impl ResourceSpec {
    /// Parses `disk`, `disk:DEV`, `net` or `net:DEV` (exit 2 naming `--resource`).
    pub fn parse(text: &str) -> Result<ResourceSpec> {
        let (kind, dev) = match text.split_once(':') {
            Some((kind, dev)) if !dev.is_empty() => (kind, Some(dev.to_string())),
            None => (text, None),
            Some(_) => return Err(Error::Invalid(format!("--resource {text}: no device after `:`"))),
        };
        match kind {
            "disk" => Ok(ResourceSpec::Disk(dev)),
            "net" => Ok(ResourceSpec::Net(dev)),
            _ => Err(Error::Invalid(format!("--resource {text}: expected disk, disk:DEV, net or net:DEV"))),
        }
    }

    fn resolve(&self) -> Result<Resource> {
        match self {
            ResourceSpec::Disk(name) => disk::resolve(name.as_deref()).map(Resource::Disk),
            ResourceSpec::Net(name) => net::resolve(name.as_deref()).map(Resource::Net),
        }
    }
}

impl std::fmt::Display for ResourceSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (kind, dev) = match self {
            ResourceSpec::Disk(d) => ("disk", d),
            ResourceSpec::Net(d) => ("net", d),
        };
        match dev {
            Some(d) => write!(f, "{kind}:{d}"),
            None => f.write_str(kind),
        }
    }
}

/// The resource a run gates, resolved.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum Resource {
    Disk(disk::Disk),
    Net(net::NetDevice),
}

impl Resource {
    fn target(&self) -> Target {
        match self {
            Resource::Disk(d) => Target::Disk { major: d.major, minor: d.minor },
            Resource::Net(n) => Target::Net { ifindex: n.ifindex },
        }
    }
}

impl std::fmt::Display for Resource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Resource::Disk(d) => write!(f, "disk {} ({}:{})", d.name, d.major, d.minor),
            Resource::Net(n) => write!(f, "network device {} (ifindex {}, egress)", n.name, n.ifindex),
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct Config {
    #[serde(serialize_with = "display")]
    pub resource: ResourceSpec,
    #[serde(serialize_with = "display")]
    pub foreground: Selector,
    #[serde(serialize_with = "display")]
    pub background: Selector,
    /// The preemption interval p (0: a plain two-class priority).
    pub interval_ns: u64,
    pub mechanism: Mechanism,
    pub duration_ns: Option<u64>,
    /// Keep the observations and steps for a replay.
    pub record: bool,
    /// A network device: put the background's packets in a low-priority
    /// band below the device's token bucket ([`band`]).
    pub band: bool,
}

fn display<S: serde::Serializer, T: std::fmt::Display>(v: &T, s: S) -> std::result::Result<S::Ok, S::Error> {
    s.collect_str(v)
}

/// One class's requests over the run.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ClassFigures {
    pub issued: u64,
    /// Completions seen (the kernel's tracepoint ran our program).
    pub completed: u64,
    /// Completions not seen: inferred when the struct request (sk_buff)
    /// was issued again, or assumed after ten times the p99 service time
    /// in the device.
    pub completions_inferred: u64,
    pub completions_assumed: u64,
    /// Completions not seen, taken when the disk's own count of requests
    /// in flight (`/sys/block/DEV/inflight`) was 0 after the request's issue.
    pub completions_disk_idle: u64,
    /// Requests that completed (by the kernel's clock) after irqlab had
    /// taken them as complete (assumed or disk idle): wrong guesses.
    pub completions_late: u64,
    /// Packets dropped before the driver took them (network).
    pub dropped: u64,
    pub bytes: u64,
    pub bytes_per_s: f64,
    /// Issue to completion in the device.
    pub service: Option<StatsSummary>,
}

/// What the gate did.
#[derive(Debug, Clone, Default, Serialize)]
pub struct GateFigures {
    pub opens: u64,
    pub closes: u64,
    /// Of the run, the share the gate was open.
    pub open_fraction: f64,
    /// From the observation that closed the gate (a foreground request's
    /// issue, by the kernel's clock) to the gate closed (the write done,
    /// and for the freezer the cgroup FROZEN).
    pub close_reaction: Option<StatsSummary>,
    /// From the interval's end to the gate open.
    pub open_lateness: Option<StatsSummary>,
    /// Background requests issued after a foreground request had closed
    /// the gate in the policy's eyes but before the kernel had it closed,
    /// or while it was closed (requests already queued below the gate).
    pub background_issued_while_closed: u64,
}

/// A recorded run: the foreground observations in the order the
/// controller took them, and the steps it took.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Recording {
    pub interval_ns: u64,
    pub begin_ns: u64,
    pub observations: Vec<(u64, Observation)>,
    pub steps: Vec<GateStep>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub schema: &'static str,
    pub config: Config,
    pub resource: Resource,
    pub held_ns: u64,
    pub ended_by: EndedBy,
    pub complete: bool,
    /// What the controller's thread cost: its setup, then per second of
    /// control.
    pub overhead: crate::controller_thread::Overhead,
    pub foreground: ClassFigures,
    pub background: ClassFigures,
    pub gate: GateFigures,
    /// The X[e] counters of the Variant-1 state machine.
    pub counters: BTreeMap<String, u64>,
    pub foreground_processes: usize,
    pub background_processes: usize,
    /// The command's exit status, when irqlab started the background.
    pub command_status: Option<i32>,
    pub lost_events: u64,
    /// The background band at a network device's egress, when there was one.
    pub band: Option<band::BandFigures>,
    pub notes: Vec<String>,
    #[serde(skip)]
    pub recording: Option<Recording>,
}

/// Checks what the run needs before anything changes: the resource, the
/// selectors, the gate's controller and the privileges. Exit 2 / 3 naming
/// the first problem.
pub fn check(config: &Config) -> Result<Resource> {
    let resource = config.resource.resolve()?;
    if let (Resource::Net(_), Mechanism::Throttle) = (&resource, config.mechanism) {
        return Err(Error::Invalid(
            "--gate throttle: the blkio throttle holds back a disk's requests, not packets; gate a network device with freezer".into(),
        ));
    }
    if let Selector::Command(_) = config.foreground {
        return Err(Error::Invalid("--foreground: a command to start is only for the background; name the foreground".into()));
    }
    for (flag, sel) in [("--foreground", &config.foreground), ("--background", &config.background)] {
        if !matches!(sel, Selector::Command(_)) && sel.processes(None).is_empty() {
            return Err(Error::Invalid(format!("{flag} {sel} matches no process")));
        }
    }
    config.mechanism.hierarchy()?;
    irqlab_host::privilege::require(
        &[irqlab_host::privilege::Capability::SysAdmin],
        "create a cgroup and move the background processes into it",
    )?;
    irqlab_host::privilege::require_bpf("watch the resource's requests (block or net tracepoints)")?;
    Ok(resource)
}

/// What happened to one class's requests.
#[derive(Default)]
struct ClassCount {
    issued: u64,
    completed: u64,
    bytes: u64,
    in_device: HashMap<u64, u64>,
    service: LatencyStats,
    inferred: u64,
    assumed: u64,
    /// Taken as complete when the disk had nothing in flight.
    disk_idle: u64,
    /// Completions that happened after their request had been taken as
    /// complete (assumed or disk idle): each is a wrong guess, reported.
    late: u64,
    /// Requests taken as complete without a completion, by key, with the
    /// time of that guess, until their completion shows (or the set is
    /// pruned).
    guessed: HashMap<u64, u64>,
    dropped: u64,
}

impl ClassCount {
    fn add(&mut self, e: &IoEvent) {
        match e.kind {
            Kind::Issue => {
                self.issued += 1;
                self.in_device.insert(e.sector, e.ts_ns);
            }
            Kind::Complete => {
                self.completed += 1;
                self.bytes += u64::from(e.bytes);
                if let Some(t) = self.in_device.remove(&e.sector) {
                    self.service.record(e.ts_ns.saturating_sub(t));
                } else if self.guessed.remove(&e.sector).is_some_and(|guessed_at| e.ts_ns > guessed_at) {
                    // Completed after irqlab took it as complete. (One
                    // that completed before, its event still on the way
                    // to user space, was guessed right.)
                    self.late += 1;
                }
            }
            Kind::CompleteInferred => {
                if self.in_device.remove(&e.sector).is_some() {
                    self.inferred += 1;
                }
            }
            Kind::Dropped => {
                if self.in_device.remove(&e.sector).is_some() {
                    self.dropped += 1;
                }
            }
        }
    }

    /// Requests in the device since before `limit`: taken as complete.
    fn assume_complete_before(&mut self, limit: u64, now: u64) -> usize {
        let n = self.guess_complete_before(limit, now);
        self.assumed += n as u64;
        n
    }

    /// Requests issued before `limit`, taken as complete because the disk
    /// had none in flight then.
    fn complete_as_disk_idle(&mut self, limit: u64, now: u64) -> usize {
        let n = self.guess_complete_before(limit, now);
        self.disk_idle += n as u64;
        n
    }

    fn guess_complete_before(&mut self, limit: u64, now: u64) -> usize {
        let before = self.in_device.len();
        let guessed = &mut self.guessed;
        self.in_device.retain(|&key, &mut t| {
            if t < limit {
                guessed.insert(key, now);
            }
            t >= limit
        });
        // Completions that never come: keep the set small.
        if self.guessed.len() > 4096 {
            self.guessed.clear();
        }
        before - self.in_device.len()
    }

    /// Whether a request has been in the device since before `limit`.
    fn any_issued_before(&self, limit: u64) -> bool {
        self.in_device.values().any(|&t| t < limit)
    }
    fn figures(&self, held_ns: u64) -> ClassFigures {
        ClassFigures {
            issued: self.issued,
            completed: self.completed,
            completions_inferred: self.inferred,
            completions_assumed: self.assumed,
            completions_disk_idle: self.disk_idle,
            completions_late: self.late,
            dropped: self.dropped,
            bytes: self.bytes,
            bytes_per_s: self.bytes as f64 / (held_ns.max(1) as f64 / 1e9),
            service: (self.service.count() > 0).then(|| self.service.summary(10_000, 100)),
        }
    }
}

/// The shared gate fed in the kernel's time order: a request event first
/// lets the interval ends due before it happen at their own times, and a
/// timer that fires late still ends the interval at the time asked for. An
/// event older than one already taken (the ring is filled from several
/// CPUs, and an event can reach user space after the timer acted) counts
/// as happening at the latest time taken, or 1 ns after an interval end
/// taken then: what was done cannot be undone, and a replay of the
/// recorded times must find the same order.
#[derive(Debug, Clone)]
pub struct TimeOrdered {
    gate: Gate,
    last_ts: u64,
    last_was_end: bool,
}

impl TimeOrdered {
    pub fn new(interval_ns: u64) -> Self {
        TimeOrdered { gate: Gate::new(Some(interval_ns), IntervalStart::Dispatch), last_ts: 0, last_was_end: false }
    }

    pub fn gate(&self) -> &Gate {
        &self.gate
    }

    pub fn set_background_waits(&mut self, waits: bool) {
        self.gate.set_background_waits(waits);
    }

    pub fn begin(&mut self, now: u64) -> GateStep {
        self.last_ts = now;
        self.gate.begin(now)
    }

    fn take(&mut self, at: u64, observed: Observation, steps: &mut Vec<GateStep>) {
        let mut at = at.max(self.last_ts);
        if at == self.last_ts && self.last_was_end && observed != Observation::IntervalEnd {
            at += 1;
        }
        self.last_ts = at;
        self.last_was_end = observed == Observation::IntervalEnd;
        steps.push(self.gate.observe(at, observed));
    }

    /// Interval ends due before `t`, at their own times.
    fn due_before(&mut self, t: u64, steps: &mut Vec<GateStep>) {
        while let Some(w) = self.gate.wake_at().filter(|&w| w < t) {
            self.take(w, Observation::IntervalEnd, steps);
        }
    }

    /// A foreground request's issue or completion at `ts` (kernel clock).
    pub fn request(&mut self, ts: u64, observed: Observation, steps: &mut Vec<GateStep>) {
        self.due_before(ts, steps);
        self.take(ts, observed, steps);
    }

    /// The timer fired at `now`: interval ends due by then.
    pub fn timer(&mut self, now: u64, steps: &mut Vec<GateStep>) {
        self.due_before(now.saturating_add(1), steps);
    }
}

/// The controller's state between observations.
struct Controller<'g> {
    ordered: TimeOrdered,
    actuator: &'g mut CgroupGate,
    /// The gate as the policy wants it, and since when (kernel clock).
    wanted_open: bool,
    wanted_since: u64,
    open_since: Option<u64>,
    open_ns: u64,
    figures: GateFigures,
    close_reaction: LatencyStats,
    open_lateness: LatencyStats,
    recording: Option<Recording>,
    /// Steps not yet handed to the caller's callback.
    steps: Vec<GateStep>,
    /// When the assume-complete bound was last taken, and its value.
    assume_bound: Option<(u64, u64)>,
    /// A disk's `/sys/block/DEV/inflight`, when the disk counts its
    /// requests (`queue/iostats` on).
    disk_inflight: Option<PathBuf>,
}

impl Controller<'_> {
    /// Makes the kernel follow the steps taken since `from`, recording them.
    fn apply_from(&mut self, from: usize) -> Result<()> {
        for i in from..self.steps.len() {
            let step = self.steps[i];
            if let Some(r) = &mut self.recording {
                // Interval ends (and the first decision) are the gate's own.
                if step.observed != Observation::IntervalEnd {
                    r.observations.push((step.at_ns, step.observed));
                }
                r.steps.push(step);
            }
            self.follow(step.open, step.at_ns)?;
        }
        Ok(())
    }

    fn request(&mut self, ts: u64, observed: Observation) -> Result<()> {
        let from = self.steps.len();
        self.ordered.request(ts, observed, &mut self.steps);
        self.apply_from(from)
    }

    fn timer(&mut self, now: u64) -> Result<()> {
        let from = self.steps.len();
        self.ordered.timer(now, &mut self.steps);
        self.apply_from(from)
    }

    /// A batch of request events, in the kernel's time order.
    fn take(&mut self, events: &mut [IoEvent], fg: &mut ClassCount, bg: &mut ClassCount) -> Result<()> {
        events.sort_by_key(|e| e.ts_ns);
        for e in events.iter() {
            match e.class {
                Class::Foreground => {
                    let tracked_before = fg.in_device.contains_key(&e.sector);
                    fg.add(e);
                    // A dropped packet left the device as a completed one does.
                    let observed = if e.kind == Kind::Issue { Observation::ForegroundIssue } else { Observation::ForegroundComplete };
                    // A completion of a request not tracked (issued before
                    // the watch, or already assumed complete) is not ours.
                    if e.kind == Kind::Issue || tracked_before {
                        self.request(e.ts_ns, observed)?;
                    }
                }
                Class::Background => {
                    bg.add(e);
                    if e.kind == Kind::Issue && !self.wanted_open && e.ts_ns > self.wanted_since {
                        self.figures.background_issued_while_closed += 1;
                    }
                }
            }
        }
        self.timer(irqlab_host::rt::monotonic_ns())?;
        // Requests whose completion ran no program.
        let now = irqlab_host::rt::monotonic_ns();
        // The histogram's p99 costs a walk of its buckets: at a wake-up per
        // interval it took 80% of the controller's CPU (a third of a CPU at
        // SCHED_FIFO 90 on a network foreground). It moves slowly; take it
        // again every BOUND_REFRESH_NS.
        if self.assume_bound.is_none_or(|(at, _)| now.saturating_sub(at) >= BOUND_REFRESH_NS) {
            let bound = fg
                .service
                .quantile_ns(0.99)
                .map_or(ASSUME_COMPLETE_MAX_NS, |p99| p99.saturating_mul(10))
                .clamp(ASSUME_COMPLETE_MIN_NS, ASSUME_COMPLETE_MAX_NS);
            self.assume_bound = Some((now, bound));
        }
        let bound = self.assume_bound.map_or(ASSUME_COMPLETE_MAX_NS, |(_, b)| b);
        for _ in 0..fg.assume_complete_before(now.saturating_sub(bound), now) {
            self.request(now, Observation::ForegroundComplete)?;
        }
        bg.assume_complete_before(now.saturating_sub(bound), now);
        // A foreground request overdue on a disk with nothing in flight:
        // its completion ran no program. Without this it held the gate
        // closed until the bound above: 20 ms, or a second when the first
        // reads of a cold file had made the p99 large (seen in CI: the
        // gate open 16% of a run instead of 85%).
        let limit = now.saturating_sub(DISK_IDLE_CHECK_NS);
        if let Some(path) = &self.disk_inflight {
            if fg.any_issued_before(limit) && disk_has_nothing_in_flight(path) {
                // The completion tracepoint runs before the request leaves
                // the count: a completion stamped before the read is no
                // wrong guess, though after `now`.
                let looked = irqlab_host::rt::monotonic_ns();
                for _ in 0..fg.complete_as_disk_idle(limit, looked) {
                    self.request(looked, Observation::ForegroundComplete)?;
                }
                bg.complete_as_disk_idle(limit, looked);
            }
        }
        Ok(())
    }

    /// The gate's figures at the end of a run of `held_ns`.
    fn figures(&mut self, held_ns: u64) -> GateFigures {
        if let Some(s) = self.open_since.take() {
            self.open_ns += irqlab_host::rt::monotonic_ns().saturating_sub(s);
        }
        let mut figures = std::mem::take(&mut self.figures);
        figures.open_fraction = (self.open_ns as f64 / held_ns.max(1) as f64).min(1.0);
        figures.close_reaction = (self.close_reaction.count() > 0).then(|| self.close_reaction.summary(10_000, 100));
        figures.open_lateness = (self.open_lateness.count() > 0).then(|| self.open_lateness.summary(10_000, 100));
        figures
    }

    fn follow(&mut self, open: bool, at: u64) -> Result<()> {
        if open == self.wanted_open {
            return Ok(());
        }
        self.wanted_open = open;
        self.wanted_since = at;
        self.actuator.set(open)?;
        let done = irqlab_host::rt::monotonic_ns();
        if open {
            self.figures.opens += 1;
            self.open_lateness.record(done.saturating_sub(at));
            self.open_since = Some(done);
        } else {
            self.figures.closes += 1;
            self.close_reaction.record(done.saturating_sub(at));
            if let Some(s) = self.open_since.take() {
                self.open_ns += done.saturating_sub(s);
            }
        }
        Ok(())
    }
}

/// What the report says about the foreground completions irqlab did not see.
fn completion_notes(fg: &ClassCount, notes: &mut Vec<String>) {
    let unseen = fg.inferred + fg.disk_idle + fg.assumed;
    if unseen > 0 {
        notes.push(format!(
            "{unseen} of {} foreground completions ran no BPF program ({} inferred when the struct request or sk_buff was reused, {} taken \
             when the disk had nothing in flight, {} assumed after ten times the p99 service time in the device): the gate stayed closed \
             until then",
            fg.issued, fg.inferred, fg.disk_idle, fg.assumed
        ));
    }
    // (The background's guesses only count its requests; the gate does
    // not follow them.)
    if fg.late > 0 {
        notes
            .push(format!("{} foreground requests completed after irqlab had taken them as complete: the gate opened early then", fg.late));
    }
}

/// Where a disk counts its requests in flight, if it does: with
/// `queue/iostats` off the count stays 0 and says nothing.
fn disk_inflight_file(disk: &disk::Disk) -> Option<PathBuf> {
    let dir = Path::new("/sys/block").join(&disk.name);
    let counts = std::fs::read_to_string(dir.join("queue/iostats")).is_ok_and(|v| v.trim() == "1");
    counts.then(|| dir.join("inflight"))
}

/// `/sys/block/DEV/inflight` reads "0 0" (reads, writes); unreadable
/// counts as busy.
fn disk_has_nothing_in_flight(path: &Path) -> bool {
    std::fs::read_to_string(path).is_ok_and(|text| all_zero(&text))
}

fn all_zero(counts: &str) -> bool {
    let counts: Vec<Option<u64>> = counts.split_whitespace().map(|n| n.parse().ok()).collect();
    !counts.is_empty() && counts.iter().all(|&n| n == Some(0))
}

/// Classes the processes the selectors name now (new background ones
/// moved behind the gate first); returns how many of each class there are.
fn classify(
    config: &Config,
    started: Option<i32>,
    watch: &mut IoWatch,
    actuator: &mut CgroupGate,
    classed: &mut HashMap<i32, Class>,
) -> Result<(usize, usize)> {
    let table = selector::process_table();
    let fg = config.foreground.processes_in(&table, None);
    let mut bg: BTreeSet<i32> = config.background.processes_in(&table, started);
    // A started command is in the cgroup from its first instruction.
    if started.is_none() {
        for &pid in bg.difference(&fg) {
            actuator.admit(pid)?;
        }
    }
    bg.extend(actuator.members());
    let mut now: HashMap<i32, Class> = fg.iter().map(|&p| (p, Class::Foreground)).collect();
    for &p in &bg {
        now.entry(p).or_insert(Class::Background);
    }
    for (&pid, &class) in &now {
        if classed.get(&pid) != Some(&class) {
            watch.set_class(pid as u32, class)?;
        }
    }
    for pid in classed.keys().filter(|p| !now.contains_key(p)).copied().collect::<Vec<_>>() {
        watch.forget(pid as u32);
    }
    let count = |c: Class| now.values().filter(|&&x| x == c).count();
    let counts = (count(Class::Foreground), count(Class::Background));
    *classed = now;
    Ok(counts)
}

/// Runs the controller until `stop`, the duration, or (a started
/// background command) the command's end. Every change is undone on
/// return, error or panic, and by `irqlab control revert --all` after a
/// SIGKILL.
///
/// It runs on the controller's thread (`controller_thread::run`, named
/// `irqlab-idletime`): it must see a foreground request before the
/// background gets the device again, so it runs at SCHED_FIFO 90, above
/// the processes it gates, its memory locked. It stays on every CPU: what
/// it controls are whole processes, wherever they run. The background
/// command it starts begins at SCHED_OTHER (the thread's priority is not
/// inherited, SCHED_RESET_ON_FORK).
pub fn run(config: &Config, stop: &AtomicBool, on_step: impl FnMut(&GateStep) + Send) -> Result<Report> {
    let resource = check(config)?;
    let setup = crate::controller_thread::Setup { priority: 90, off: &[], lock_memory: true };
    let (mut report, cost) = crate::controller_thread::run("idletime", setup, || control(config, resource, stop, on_step))?;
    report.overhead = crate::controller_thread::Overhead::of(cost);
    Ok(report)
}

/// The run on the controller's thread ([`run`]); its report's `overhead`
/// is filled in by [`run`] when the thread ends.
fn control(config: &Config, resource: Resource, stop: &AtomicBool, mut on_step: impl FnMut(&GateStep)) -> Result<Report> {
    let mut notes = Vec::new();
    if config.interval_ns == 0 {
        notes.push("p = 0: a plain two-class priority (background whenever no foreground request is in the device)".into());
    }
    let disk = match &resource {
        Resource::Disk(d) => Some(d),
        Resource::Net(_) => None,
    };
    let band_parent = match &resource {
        Resource::Net(n) if config.band => band::placement(&n.name)?.map_err(|why| notes.push(why)).ok(),
        _ => None,
    };
    let mut actuator = CgroupGate::create(config.mechanism, disk)?;
    let mut storage = io::Storage::default();
    let mut watch =
        IoWatch::start(&mut storage, resource.target(), config.interval_ns, band_parent.is_some().then(band::background_classid))?;
    // The band before the background starts: its first packets go low.
    let band = match (&resource, band_parent) {
        (Resource::Net(n), Some(parent)) => {
            let band = band::Band::install(&n.name, &parent)?;
            watch.attach_band(&irqlab_host::journal::cgroup::v2_root()?)?;
            Some(band)
        }
        _ => None,
    };

    // The background: existing processes moved in, or the command started in the cgroup.
    let mut child = match &config.background {
        Selector::Command(argv) => Some(spawn_in(argv, &actuator.procs_file())?),
        _ => None,
    };
    let started = child.as_ref().map(|c| c.child.id() as i32);
    let mut classed: HashMap<i32, Class> = HashMap::new();
    let (mut fg_n, mut bg_n) = classify(config, started, &mut watch, &mut actuator, &mut classed)?;

    let run = RunEnd::start(stop, config.duration_ns);
    let begin = run.started_ns();
    let mut ordered = TimeOrdered::new(config.interval_ns);
    ordered.set_background_waits(bg_n > 0);
    let mut ctl = Controller {
        ordered,
        actuator: &mut actuator,
        wanted_open: true,
        wanted_since: begin,
        open_since: Some(begin),
        open_ns: 0,
        figures: GateFigures::default(),
        close_reaction: LatencyStats::new(),
        open_lateness: LatencyStats::new(),
        recording: config.record.then(|| Recording {
            interval_ns: config.interval_ns,
            begin_ns: begin,
            observations: Vec::new(),
            steps: Vec::new(),
        }),
        steps: Vec::new(),
        assume_bound: None,
        disk_inflight: disk.and_then(disk_inflight_file),
    };
    let first = ctl.ordered.begin(begin);
    ctl.steps.push(first);
    ctl.apply_from(0)?;

    let (mut fg, mut bg) = (ClassCount::default(), ClassCount::default());
    let mut next_rescan = begin + RESCAN_NS;
    let mut command_status = None;
    crate::controller_thread::control_starts();
    let ended_by = loop {
        let exited = match child.as_mut() {
            Some(c) => c.exited()?,
            None => None,
        };
        if let Some(why) = run.ended(|| {
            let status = exited?;
            command_status = status.code();
            Some(EndedBy::CommandExited(status.to_string()))
        }) {
            break why;
        }
        let now = irqlab_host::rt::monotonic_ns();
        let mut until = next_rescan.min(run.ends_at_ns().unwrap_or(u64::MAX));
        if let Some(w) = ctl.ordered.gate().wake_at() {
            until = until.min(w);
        } else if !ctl.wanted_open {
            // The foreground's events wake no one while the gate is closed:
            // look every interval for the last one (the interval's end).
            until = until.min(now + config.interval_ns.max(100_000));
        }
        let mut events = watch.poll(Duration::from_nanos(until.saturating_sub(now).clamp(1_000, 50_000_000)))?;
        ctl.take(&mut events, &mut fg, &mut bg)?;
        for step in ctl.steps.drain(..) {
            on_step(&step);
        }
        if now >= next_rescan {
            (fg_n, bg_n) = classify(config, started, &mut watch, ctl.actuator, &mut classed)?;
            ctl.ordered.set_background_waits(bg_n > 0);
            next_rescan = now + RESCAN_NS;
        }
    };
    let end = irqlab_host::rt::monotonic_ns();
    let held_ns = end - begin;
    if let Some(c) = &mut child {
        if command_status.is_none() {
            // Stopped before the command ended: it must not outlive the run
            // (and a frozen process cannot act on a signal: open first).
            ctl.actuator.set(true)?;
            c.stop();
            notes.push("the background command was stopped (SIGTERM to its process group) when the controller ended".into());
        }
    }
    let counters = ctl.ordered.gate().counters().to_map();
    let recording = ctl.recording.take();
    let figures = ctl.figures(held_ns);
    let lost_events = watch.lost_events();
    // Figures are not worth losing the run's report over.
    // The classifier's count after the classes' (every packet the low
    // class sent was classed before).
    let band_figures = band.as_ref().and_then(|b| {
        let figures = b.figures().map_err(|e| notes.push(format!("the band's class counts: {e}"))).ok()?;
        Some(band::BandFigures { classified_background: watch.band_background_packets(), ..figures })
    });
    completion_notes(&fg, &mut notes);
    if lost_events > 0 {
        notes
            .push(format!("{lost_events} request events were lost (the ring was full): decisions after them may differ from the kernel's"));
    }
    drop(watch);
    if let Some(band) = band {
        band.remove()?;
    }
    actuator.restore()?;
    // The one rule (`irqlab_host::run_end`).
    let complete = ended_by.complete(config.duration_ns, lost_events);
    Ok(Report {
        schema: "irqlab/idletime-control/v1",
        config: config.clone(),
        resource,
        held_ns,
        ended_by,
        complete,
        overhead: Default::default(),
        foreground: fg.figures(held_ns),
        background: bg.figures(held_ns),
        gate: figures,
        counters,
        foreground_processes: fg_n,
        background_processes: bg_n,
        command_status,
        lost_events,
        band: band_figures,
        notes,
        recording,
    })
}

/// A background command irqlab started, in a process group of its own:
/// stopped with it on every way out.
struct Started {
    child: std::process::Child,
    reaped: bool,
}

impl Started {
    fn signal_group(&self, signal: nix::sys::signal::Signal) {
        let _ = nix::sys::signal::killpg(nix::unistd::Pid::from_raw(self.child.id() as i32), signal);
    }

    /// Its exit status once it has exited (and is reaped), without waiting.
    fn exited(&mut self) -> Result<Option<std::process::ExitStatus>> {
        let status = self.child.try_wait().map_err(|e| Error::io("waiting for the background command", e))?;
        self.reaped |= status.is_some();
        Ok(status)
    }

    /// SIGTERM to the group, SIGKILL after 2 s, and the child reaped.
    fn stop(&mut self) {
        self.signal_group(nix::sys::signal::Signal::SIGTERM);
        let deadline = irqlab_host::rt::monotonic_ns() + 2_000_000_000;
        while irqlab_host::rt::monotonic_ns() < deadline {
            if matches!(self.child.try_wait(), Ok(Some(_)) | Err(_)) {
                self.reaped = true;
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        self.signal_group(nix::sys::signal::Signal::SIGKILL);
        if !self.reaped {
            let _ = self.child.wait();
            self.reaped = true;
        }
    }
}

impl Drop for Started {
    fn drop(&mut self) {
        // An error or panic: the gate's cgroup goes after this (its tasks
        // moved out, thawed), and they die then.
        if !self.reaped {
            self.signal_group(nix::sys::signal::Signal::SIGKILL);
        }
    }
}

/// Starts `argv` inside the gate's cgroup, in a process group of its own:
/// the child writes itself into `procs` before it executes the command,
/// so nothing it does escapes.
fn spawn_in(argv: &[String], procs: &std::path::Path) -> Result<Started> {
    use std::os::unix::process::CommandExt;
    let (program, args) = argv.split_first().ok_or_else(|| Error::Invalid("--background --: no command after --".into()))?;
    let path = std::ffi::CString::new(procs.as_os_str().as_encoded_bytes()).map_err(|_| Error::Failed("cgroup path with a NUL".into()))?;
    let mut cmd = std::process::Command::new(program);
    cmd.args(args).process_group(0);
    // SAFETY: only async-signal-safe calls (open, write, close) between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            let fd = libc::open(path.as_ptr(), libc::O_WRONLY);
            if fd < 0 {
                return Err(std::io::Error::last_os_error());
            }
            // "0": the writing process itself.
            let ok = libc::write(fd, b"0".as_ptr().cast(), 1) == 1;
            libc::close(fd);
            if ok {
                Ok(())
            } else {
                Err(std::io::Error::last_os_error())
            }
        });
    }
    cmd.spawn().map(|child| Started { child, reaped: false }).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => Error::Invalid(format!("--background -- {program}: no such command")),
        _ => Error::io(format!("starting the background command {program}"), e),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(kind: Kind, sector: u64, ts_ns: u64) -> IoEvent {
        IoEvent { ts_ns, class: Class::Foreground, kind, bytes: 4096, tgid: 1, sector }
    }

    #[test]
    fn a_disk_with_nothing_in_flight_reads_all_zero() {
        assert!(all_zero("       0        0\n"));
        assert!(!all_zero("       0        1\n"));
        assert!(!all_zero(""));
        assert!(!all_zero("0 x"));
    }

    #[test]
    fn a_guess_is_late_only_when_the_request_completed_after_it() {
        let mut c = ClassCount::default();
        c.add(&event(Kind::Issue, 8, 100));
        c.add(&event(Kind::Issue, 16, 150));
        c.add(&event(Kind::Issue, 24, 900));
        assert!(c.any_issued_before(200) && !c.any_issued_before(100));
        // Taken as complete at 1000: the two issued before 200.
        assert_eq!(c.complete_as_disk_idle(200, 1000), 2);
        assert_eq!((c.disk_idle, c.in_device.len()), (2, 1));
        // One completed before the guess (its event on the way): right.
        c.add(&event(Kind::Complete, 8, 990));
        // One completed after it: wrong, counted.
        c.add(&event(Kind::Complete, 16, 1010));
        assert_eq!(c.late, 1);
        // The one still tracked completes as usual.
        c.add(&event(Kind::Complete, 24, 1020));
        assert_eq!((c.late, c.completed, c.service.count()), (1, 3, 1));
    }
}
