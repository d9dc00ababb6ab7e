//! The generator side: sends stimuli on the chosen paths with the chosen
//! timing, takes the kernel's send and receive timestamps, matches replies
//! to stimuli by sequence number, and counts lost and late replies. The
//! target takes no timestamps and writes nothing (the thesis's
//! unintrusive measurement, `docs/papers.md` §5).
//!
//! Threads: one sender per path paces the stimuli (the same schedule on
//! each), sending every stimulus due at a wake-up in one sendmmsg; one
//! receiver per path drains its socket (replies and the error queue's send
//! timestamps) in batches and pairs them, handing records over a bounded
//! channel in batches; the calling thread collects records into statistics
//! and the log (formatted there, off the sending and receiving threads) and
//! reports progress.

use super::log::{Record, RecordLog};
use super::pattern::Pattern;
use super::socket::{PathKind, RecvBatch, Stamp, StampSource, StimulusSocket, MAX_BATCH};
use super::wire::Payload;
use crate::latency::{LatencyStats, StatsSummary};
use irqlab_host::error::{Error, Result};
use irqlab_host::rt::{monotonic_ns, sleep_until_ns};
use irqlab_host::stop::StopOnDrop;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::hash::BuildHasherDefault;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::time::Duration;

pub const SCHEMA: &str = "irqlab/stimulus/v1";

/// The shortest gap between two stimuli the generator accepts: the sender
/// sends every stimulus due at a wake-up in one batch, so gaps shorter than
/// a wake-up are kept on average; below 2 us (500k/s per path) the loopback
/// itself cannot carry both paths on this machine kind.
pub const MIN_GAP_NS: u64 = 2_000;

/// Histogram bins of the JSON output.
const BUCKET_NS: u64 = 1_000;
const MAX_BUCKETS: usize = 20_000;

#[derive(Debug, Clone)]
pub struct GeneratorConfig {
    pub target: Ipv4Addr,
    /// The responder's UDP port (task path).
    pub udp_port: u16,
    pub paths: Vec<PathKind>,
    pub pattern: Pattern,
    /// Stop after this many stimuli ...
    pub count: Option<u64>,
    /// ... or after this long, whichever comes first.
    pub duration_ns: Option<u64>,
    /// A reply later than this counts as late, not as a latency sample; a
    /// stimulus without a reply after this long is lost (until its reply
    /// turns up, when it becomes late).
    pub timeout_ns: u64,
    /// Check before the run that each path answers at all, so a wrong
    /// address or a missing responder is an error, not a run of losses.
    pub preflight: bool,
    /// SCHED_FIFO priority of the sending threads, the receiving ones one
    /// above it (0 = SCHED_OTHER for both), so the pattern holds and the
    /// sockets are drained while other work competes for the CPU.
    pub sender_priority: u8,
    /// Stream every record here (CSV for `.csv`, JSON lines otherwise),
    /// flushed every second.
    pub log: Option<std::path::PathBuf>,
}

impl Default for GeneratorConfig {
    /// Loopback and the responder's default port, both paths, 1 kHz
    /// periodic for 10 s, 1 s reply timeout, a preflight check, SCHED_OTHER
    /// senders, no log: the defaults of `irqlab stimulus run`.
    fn default() -> GeneratorConfig {
        GeneratorConfig {
            target: Ipv4Addr::LOCALHOST,
            udp_port: super::responder::DEFAULT_PORT,
            paths: vec![PathKind::Icmp, PathKind::Udp],
            pattern: Pattern::periodic(1_000_000),
            count: None,
            duration_ns: Some(10_000_000_000),
            timeout_ns: 1_000_000_000,
            preflight: true,
            sender_priority: 0,
            log: None,
        }
    }
}

impl GeneratorConfig {
    pub fn validate(&self) -> Result<()> {
        if self.paths.is_empty() {
            return Err(Error::Invalid("no path to send stimuli on".into()));
        }
        self.pattern.validate().map_err(Error::Invalid)?;
        let gap = self.pattern.min_gap_ns();
        if gap < MIN_GAP_NS {
            return Err(Error::Invalid(format!(
                "rate too high: the pattern asks for a stimulus every {gap} ns, but the generator paces at most one every {} ns ({} per second)",
                MIN_GAP_NS,
                1_000_000_000 / MIN_GAP_NS
            )));
        }
        if self.count.is_none() && self.duration_ns.is_none() {
            return Err(Error::Invalid("give a count or a duration".into()));
        }
        if self.count == Some(0) || self.duration_ns == Some(0) {
            return Err(Error::Invalid("the run would send no stimulus".into()));
        }
        if self.timeout_ns == 0 {
            return Err(Error::Invalid("the reply timeout must be positive".into()));
        }
        Ok(())
    }
}

/// One path's outcome.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PathResult {
    pub path: PathKind,
    pub meaning: String,
    pub sent: u64,
    /// Stimuli sent per second over the run (`sent` over `elapsed_ns`):
    /// the rate reached, whatever the pattern asked for.
    #[serde(default)]
    pub sent_per_s: f64,
    /// Sends the kernel refused (no buffer, no route).
    pub send_errors: u64,
    /// Replies within the timeout: the latency samples.
    pub answered: u64,
    /// Replies after the timeout.
    pub late: u64,
    /// Stimuli never answered.
    pub lost: u64,
    /// Replies to a stimulus already answered.
    pub duplicates: u64,
    /// Which timestamps the samples used, by count.
    pub hardware_stamps: u64,
    pub software_stamps: u64,
    pub user_stamps: u64,
    pub latency: StatsSummary,
}

/// `irqlab/stimulus/v1`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StimulusReport {
    pub schema: String,
    /// False when stopped (Ctrl-C) before the count or duration, or when
    /// the sender fell behind the pattern by more than one gap: stimuli
    /// the pattern called for within the duration were not sent (the
    /// last wake-up sends what was due before the end if one batch holds
    /// it; late sends are counted in `late_sends`, not here).
    pub complete: bool,
    pub target: Ipv4Addr,
    pub udp_port: u16,
    pub pattern: Pattern,
    pub count: Option<u64>,
    pub duration_ns: Option<u64>,
    pub timeout_ns: u64,
    /// How long the sender ran.
    pub elapsed_ns: u64,
    /// Stimuli sent more than one gap after their scheduled time (the
    /// generator could not keep the pattern).
    pub late_sends: u64,
    pub max_send_lag_ns: u64,
    /// Stimuli the pattern called for within the duration (or the count).
    #[serde(default)]
    pub scheduled: u64,
    /// How far behind the pattern the sender was when the duration ended
    /// (0 when it kept up); more than one gap makes the run incomplete.
    #[serde(default)]
    pub behind_ns: u64,
    /// "hardware" when every sample used the NIC's timestamps, "software"
    /// (kernel) otherwise; says why in `timestamps_note`.
    pub timestamps: String,
    pub timestamps_note: String,
    pub paths: Vec<PathResult>,
}

impl StimulusReport {
    pub fn path(&self, kind: PathKind) -> Option<&PathResult> {
        self.paths.iter().find(|p| p.path == kind)
    }
}

/// Per-path counters the receivers and the sender update as they go.
#[derive(Default)]
pub struct PathCounters {
    pub sent: AtomicU64,
    pub send_errors: AtomicU64,
    /// Stimuli with a reply (within the timeout or late), each once.
    pub replied: AtomicU64,
    pub late: AtomicU64,
    /// Currently without a reply after the timeout.
    pub overdue: AtomicU64,
    pub duplicates: AtomicU64,
}

/// What the progress callback sees.
pub struct Progress<'a> {
    pub elapsed_ns: u64,
    pub paths: Vec<(PathKind, &'a PathCounters, &'a LatencyStats)>,
}

fn realtime_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: valid timespec pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// The measurement, in the shape every live measurement has: runs the
/// stimuli until the count or duration (or `stop`), calls `on_tick` with
/// the running figures (from this thread, about five times a second, and
/// once at the end), and
/// streams every record to `config.log` when one is given.
pub fn measure(config: &GeneratorConfig, stop: &AtomicBool, mut on_tick: impl FnMut(&Progress)) -> Result<StimulusReport> {
    config.validate()?;
    let mut log = match &config.log {
        Some(path) => Some(RecordLog::create(path, super::log::LogFormat::from_path(path))?),
        None => None,
    };
    run(config, stop, log.as_mut(), &mut on_tick)
}

fn run(
    config: &GeneratorConfig,
    stop: &AtomicBool,
    mut log: Option<&mut RecordLog>,
    progress: &mut dyn FnMut(&Progress),
) -> Result<StimulusReport> {
    let run_id: u32 = rand::random();
    let icmp_id = (std::process::id() as u16) ^ (run_id as u16);
    let target = SocketAddrV4::new(config.target, config.udp_port);
    let sockets: Vec<StimulusSocket> = config.paths.iter().map(|&k| StimulusSocket::open(k, target, icmp_id)).collect::<Result<_>>()?;
    if config.preflight {
        for s in &sockets {
            super::preflight::check(s, config.target, config.udp_port, run_id.wrapping_add(1))?;
        }
    }

    let counters: Vec<PathCounters> = sockets.iter().map(|_| PathCounters::default()).collect();
    let sender_done = AtomicBool::new(false);
    let sender_done_at = AtomicU64::new(0);
    let (events, records) = mpsc::sync_channel::<Vec<Record>>(CHANNEL_MESSAGES);
    let mut stats: Vec<LatencyStats> = sockets.iter().map(|_| LatencyStats::new()).collect();
    let mut stamp_counts = vec![[0u64; 3]; sockets.len()];
    let start_ns = monotonic_ns() + 20_000_000;

    let (send_outcome, recv_outcomes, collect_outcome) = std::thread::scope(|scope| {
        let receivers: Vec<_> = sockets
            .iter()
            .zip(&counters)
            .map(|(sock, c)| {
                let events = events.clone();
                let (done, done_at) = (&sender_done, &sender_done_at);
                scope.spawn(move || {
                    receive(sock, receiver_priority(config.sender_priority), run_id, config.timeout_ns, c, done, done_at, stop, events)
                })
            })
            .collect();
        drop(events);
        let sender = scope.spawn(|| {
            // The receivers run until the sender is done: tell them even if
            // sending panics, or the scope never returns.
            let _done = StopOnDrop([&sender_done]);
            // One sending thread per path, each on the same schedule: the
            // kernel carries each stimulus through the whole loopback path
            // (the echo, the responder's queue) inside the send call, and
            // one thread for both paths ran out of CPU at 100k/s per path.
            // The senders are kept within one batch of each other (`Peers`):
            // left alone, a path the kernel carries more cheaply (UDP) ran
            // ahead and kept the other (ICMP) at a few stimuli a second
            // when the rate was more than the machine could send.
            let progress: Vec<AtomicU64> = sockets.iter().map(|_| AtomicU64::new(0)).collect();
            let outcome = std::thread::scope(|paths| {
                let senders: Vec<_> = sockets
                    .iter()
                    .zip(&counters)
                    .enumerate()
                    .map(|(i, (sock, c))| {
                        let peers = Peers { progress: &progress, me: i };
                        paths.spawn(move || {
                            let _finished = peers.finish_on_drop();
                            send(config, std::slice::from_ref(sock), std::slice::from_ref(c), run_id, start_ns, stop, &peers)
                        })
                    })
                    .collect();
                senders
                    .into_iter()
                    .map(|h| h.join().unwrap_or_else(|_| Err(Error::Failed("a sender panicked".into()))))
                    .collect::<Result<Vec<Pacing>>>()
            })
            .map(|each| Pacing::worst(&each));
            sender_done_at.store(monotonic_ns(), Ordering::SeqCst);
            sender_done.store(true, Ordering::SeqCst);
            outcome
        });

        // Collect on this thread until every receiver has hung up.
        let collect = (|| -> Result<()> {
            // The collector at the senders' priority: a receiver waits for
            // it when the channel is full, and left in SCHED_OTHER behind a
            // busy machine's builds it made the receivers' socket queues
            // overflow at 100k/s. Restored when the collection ends.
            let _raised = CallingThreadPriority::raise(config.sender_priority)?;
            let mut last_report = monotonic_ns();
            loop {
                match records.recv_timeout(Duration::from_millis(50)) {
                    Ok(batch) => {
                        for r in &batch {
                            let i = sockets.iter().position(|s| s.kind() == r.path).unwrap_or(0);
                            stats[i].record(r.latency_ns);
                            stamp_counts[i][r.timestamps as usize] += 1;
                            if let Some(log) = log.as_deref_mut() {
                                log.write(r)?;
                            }
                        }
                    }
                    Err(mpsc::RecvTimeoutError::Timeout) => {
                        if let Some(log) = log.as_deref_mut() {
                            log.flush_if_due()?;
                        }
                    }
                    Err(mpsc::RecvTimeoutError::Disconnected) => break,
                }
                let now = monotonic_ns();
                if now - last_report >= 200_000_000 {
                    last_report = now;
                    progress(&snapshot(&sockets, &counters, &stats, start_ns));
                }
            }
            if let Some(log) = log.as_deref_mut() {
                log.flush()?;
            }
            progress(&snapshot(&sockets, &counters, &stats, start_ns));
            Ok(())
        })();
        let recv: Vec<Result<()>> =
            receivers.into_iter().map(|h| h.join().unwrap_or_else(|_| Err(Error::Failed("a receiver panicked".into())))).collect();
        let send = sender.join().unwrap_or_else(|_| Err(Error::Failed("the sender panicked".into())));
        (send, recv, collect)
    });
    let pacing = send_outcome?;
    for r in recv_outcomes {
        r?;
    }
    collect_outcome?;

    let mut paths = Vec::new();
    let mut all_hardware = true;
    for (i, sock) in sockets.iter().enumerate() {
        let c = &counters[i];
        let sent = c.sent.load(Ordering::SeqCst);
        let replied = c.replied.load(Ordering::SeqCst);
        let [hw, sw, user] = stamp_counts[i];
        all_hardware &= hw > 0 && sw == 0 && user == 0;
        paths.push(PathResult {
            path: sock.kind(),
            meaning: sock.kind().meaning().into(),
            sent,
            sent_per_s: sent as f64 * 1e9 / pacing.elapsed_ns.max(1) as f64,
            send_errors: c.send_errors.load(Ordering::SeqCst),
            answered: stats[i].count(),
            late: c.late.load(Ordering::SeqCst),
            lost: sent.saturating_sub(replied),
            duplicates: c.duplicates.load(Ordering::SeqCst),
            hardware_stamps: hw,
            software_stamps: sw,
            user_stamps: user,
            latency: stats[i].summary(BUCKET_NS, MAX_BUCKETS),
        });
    }
    let (timestamps, note) = if all_hardware {
        ("hardware", "the NIC timestamped every send and receive")
    } else {
        ("software", "kernel software timestamps (SO_TIMESTAMPING at the driver); the NIC gave no hardware timestamps (they need a NIC that offers them, enabled with SIOCSHWTSTAMP)")
    };
    // Short of the pattern by more than one gap is not a complete run.
    let complete = !stop.load(Ordering::SeqCst) && pacing.behind_ns <= config.pattern.min_gap_ns();
    Ok(StimulusReport {
        schema: SCHEMA.into(),
        complete,
        target: config.target,
        udp_port: config.udp_port,
        pattern: config.pattern,
        count: config.count,
        duration_ns: config.duration_ns,
        timeout_ns: config.timeout_ns,
        elapsed_ns: pacing.elapsed_ns,
        late_sends: pacing.late_sends,
        max_send_lag_ns: pacing.max_lag_ns,
        scheduled: pacing.scheduled,
        behind_ns: pacing.behind_ns,
        timestamps: timestamps.into(),
        timestamps_note: note.into(),
        paths,
    })
}

fn snapshot<'a>(sockets: &[StimulusSocket], counters: &'a [PathCounters], stats: &'a [LatencyStats], start_ns: u64) -> Progress<'a> {
    Progress {
        elapsed_ns: monotonic_ns().saturating_sub(start_ns),
        paths: sockets.iter().enumerate().map(|(i, s)| (s.kind(), &counters[i], &stats[i])).collect(),
    }
}

struct Pacing {
    elapsed_ns: u64,
    late_sends: u64,
    max_lag_ns: u64,
    /// Stimuli the pattern called for within the duration (or the count).
    scheduled: u64,
    /// How far behind the pattern the sender was when the duration ended.
    behind_ns: u64,
}

impl Pacing {
    /// The run's pacing from its paths': each figure of the path that kept
    /// the pattern worst (the paths send the same schedule).
    fn worst(paths: &[Pacing]) -> Pacing {
        let max = |f: fn(&Pacing) -> u64| paths.iter().map(f).max().unwrap_or(0);
        Pacing {
            elapsed_ns: max(|p| p.elapsed_ns),
            late_sends: max(|p| p.late_sends),
            max_lag_ns: max(|p| p.max_lag_ns),
            scheduled: max(|p| p.scheduled),
            behind_ns: max(|p| p.behind_ns),
        }
    }
}

/// The path senders' progress, shared so none runs more than one batch
/// ahead of the slowest: the paths keep the same count whatever the rate.
struct Peers<'a> {
    /// Stimuli each sender has handed to the kernel; `u64::MAX` once done.
    progress: &'a [AtomicU64],
    me: usize,
}

impl Peers<'_> {
    /// How many more stimuli this sender may send now that it has sent
    /// `seq`: up to one batch past the slowest other sender.
    fn allowed(&self, seq: u64) -> usize {
        let slowest = self.progress.iter().enumerate().filter(|&(i, _)| i != self.me).map(|(_, p)| p.load(Ordering::Acquire)).min();
        match slowest {
            None | Some(u64::MAX) => MAX_BATCH,
            Some(p) => (p + MAX_BATCH as u64).saturating_sub(seq).min(MAX_BATCH as u64) as usize,
        }
    }

    fn sent(&self, seq: u64) {
        self.progress[self.me].store(seq, Ordering::Release);
    }

    /// Marks this sender done when dropped, so no other waits for it
    /// (even if it ends with an error or a panic).
    fn finish_on_drop(&self) -> impl Drop + '_ {
        struct Finish<'b>(&'b AtomicU64);
        impl Drop for Finish<'_> {
            fn drop(&mut self) {
                self.0.store(u64::MAX, Ordering::Release);
            }
        }
        Finish(&self.progress[self.me])
    }
}

/// While a sender waits for a slower one to catch up.
const PEER_WAIT_NS: u64 = 20_000;

fn send(
    config: &GeneratorConfig,
    sockets: &[StimulusSocket],
    counters: &[PathCounters],
    run_id: u32,
    start_ns: u64,
    stop: &AtomicBool,
    peers: &Peers,
) -> Result<Pacing> {
    // A 1 ns timer slack: the default 50 us would blur the pattern.
    // SAFETY: prctl with integer arguments.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1u64, 0u64, 0u64, 0u64) };
    irqlab_host::rt::set_fifo(config.sender_priority)?;
    let mut schedule = config.pattern.schedule();
    let gap = config.pattern.min_gap_ns();
    let mut pacing = Pacing { elapsed_ns: 0, late_sends: 0, max_lag_ns: 0, scheduled: 0, behind_ns: 0 };
    let mut seq = 0u64;
    // The first send still due when the duration ran out, if any.
    let mut due_at_end = None;
    let mut next_at = schedule.next_send_ns();
    let mut batch: Vec<Payload> = Vec::with_capacity(MAX_BATCH);
    while !stop.load(Ordering::Relaxed) && config.count.is_none_or(|c| seq < c) {
        if let Some(d) = config.duration_ns {
            if next_at >= d {
                break;
            }
        }
        if monotonic_ns() < start_ns + next_at {
            sleep_until_ns(start_ns + next_at);
        } else {
            // Behind: still let the other path's sender, the collector and
            // a responder of the same priority run, or on two CPUs the
            // senders starve them.
            // SAFETY: no arguments.
            unsafe { libc::sched_yield() };
        }
        // Every stimulus due by now goes out in one system call per path:
        // at 100k/s the gap is shorter than a wake-up, and one call per
        // stimulus left the sender behind its own schedule. Each still
        // has its own scheduled time, its lag, and its own kernel send
        // timestamp.
        let now = monotonic_ns();
        // The clock ends the run, not the pattern: a sender that cannot
        // keep the rate stops at the duration and says how far behind it
        // was (it used to run on until it had sent the pattern's count:
        // 39.4 s for a 10 s run at 100k/s). The wake-up that finds the
        // duration over is the last; what was due before the end goes
        // out in its batch, as at every wake-up, if one batch holds it
        // (the run overshoots by that one system call); more than that
        // is a sender that fell short.
        let last = config.duration_ns.is_some_and(|d| now >= start_ns + d);
        let allowed = if last { MAX_BATCH } else { peers.allowed(seq) };
        if allowed == 0 {
            // One batch ahead of another path: let it catch up.
            sleep_until_ns(now + PEER_WAIT_NS);
            continue;
        }
        batch.clear();
        while start_ns + next_at <= now && config.count.is_none_or(|c| seq < c) && config.duration_ns.is_none_or(|d| next_at < d) {
            if batch.len() == allowed {
                if last {
                    due_at_end = Some(next_at);
                }
                break;
            }
            let lag = now - (start_ns + next_at);
            pacing.max_lag_ns = pacing.max_lag_ns.max(lag);
            if lag > gap {
                pacing.late_sends += 1;
            }
            batch.push(Payload { run_id, seq, user_tx_ns: 0 });
            seq += 1;
            next_at = schedule.next_send_ns();
        }
        for (sock, c) in sockets.iter().zip(counters) {
            // The fallback send time, read just before the call that sends.
            let user_tx_ns = realtime_ns();
            for p in &mut batch {
                p.user_tx_ns = user_tx_ns;
            }
            let (sent, refused) = sock.send_batch(&batch);
            c.sent.fetch_add(sent, Ordering::Relaxed);
            c.send_errors.fetch_add(refused, Ordering::Relaxed);
        }
        peers.sent(seq);
        if last {
            break;
        }
    }
    if let Some(d) = config.duration_ns {
        // Every stimulus sent before the end: the run still lasts its
        // duration (the pattern's last gap), not until the last send.
        // In slices, so a stop still ends it at once.
        while due_at_end.is_none() && !stop.load(Ordering::Relaxed) && config.count.is_none_or(|c| seq < c) {
            let now = monotonic_ns();
            if now >= start_ns + d {
                break;
            }
            sleep_until_ns((start_ns + d).min(now + 50_000_000));
        }
    }
    pacing.elapsed_ns = monotonic_ns().saturating_sub(start_ns);
    pacing.scheduled = seq;
    if let (Some(at), Some(d)) = (due_at_end, config.duration_ns) {
        // Counted after the clock is read: the rest of a fast pattern is
        // many schedule steps. `at` is the schedule's step already taken.
        pacing.behind_ns = d - at;
        pacing.scheduled += 1 + std::iter::from_fn(|| Some(schedule.next_send_ns())).take_while(|&t| t < d).count() as u64;
    }
    Ok(pacing)
}

/// One bit per sequence number.
#[derive(Default)]
struct SeqSet(Vec<u64>);

impl SeqSet {
    fn contains(&self, seq: u64) -> bool {
        self.0.get((seq / 64) as usize).is_some_and(|w| w & (1 << (seq % 64)) != 0)
    }
    fn insert(&mut self, seq: u64) {
        let i = (seq / 64) as usize;
        if i >= self.0.len() {
            self.0.resize(i + 1, 0);
        }
        self.0[i] |= 1 << (seq % 64);
    }
}

#[derive(Default)]
struct Pending {
    tx: Option<Stamp>,
    rx: Option<Stamp>,
    user_tx_ns: u64,
}

/// How long a busy receiver lets packets gather between two reads: at
/// 100k/s, 25 replies and 25 send timestamps, far below the socket's queue.
const COALESCE_NS: u64 = 250_000;

/// The receivers run one step above the senders: a sender behind its
/// schedule sends without sleeping, and a receiver it kept off the CPU for
/// a few tens of milliseconds at 100k/s is a socket queue overflowing (and
/// stimuli counted lost that the target answered). A receiver wakes every
/// `COALESCE_NS` at most and takes what is queued, so it costs the senders
/// little.
fn receiver_priority(sender_priority: u8) -> u8 {
    match sender_priority {
        0 => 0,
        p => (p + 1).min(99),
    }
}

/// Records per message to the collector, and messages the channel holds:
/// about 1.3 s of records at 100k/s on each of two paths (12 MB) before a
/// receiver waits.
const RECORDS_PER_MESSAGE: usize = 256;
const CHANNEL_MESSAGES: usize = 1024;

/// The calling thread's scheduling policy, raised to SCHED_FIFO for a while
/// and put back on drop.
struct CallingThreadPriority(Option<(libc::c_int, libc::sched_param)>);

impl CallingThreadPriority {
    fn raise(priority: u8) -> Result<CallingThreadPriority> {
        if priority == 0 {
            return Ok(CallingThreadPriority(None));
        }
        let mut param = libc::sched_param { sched_priority: 0 };
        // SAFETY: queries on the calling thread with a valid out-pointer.
        let policy = unsafe { libc::sched_getscheduler(0) };
        // SAFETY: as above.
        unsafe { libc::sched_getparam(0, &mut param) };
        irqlab_host::rt::set_fifo(priority)?;
        Ok(CallingThreadPriority(Some((policy, param))))
    }
}

impl Drop for CallingThreadPriority {
    fn drop(&mut self) {
        if let Some((policy, param)) = self.0 {
            // SAFETY: restores what sched_getscheduler/getparam returned.
            unsafe { libc::sched_setscheduler(0, policy, &param) };
        }
    }
}

/// Sequence numbers are dense and distinct: a multiplicative hash spreads
/// them at a fraction of SipHash's cost.
#[derive(Default)]
struct SeqHasher(u64);

impl std::hash::Hasher for SeqHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ b as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = v.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

/// A reply whose send timestamp has not come back after this long is
/// timed from the user-space send time instead.
const TX_STAMP_WAIT_NS: u64 = 100_000_000;

#[allow(clippy::too_many_arguments)]
fn receive(
    sock: &StimulusSocket,
    priority: u8,
    run_id: u32,
    timeout_ns: u64,
    c: &PathCounters,
    sender_done: &AtomicBool,
    sender_done_at: &AtomicU64,
    stop: &AtomicBool,
    events: mpsc::SyncSender<Vec<Record>>,
) -> Result<()> {
    irqlab_host::rt::set_fifo(priority)?;
    let kind = sock.kind();
    let mut batch = RecvBatch::default();
    let mut pending: HashMap<u64, Pending, BuildHasherDefault<SeqHasher>> = HashMap::default();
    let mut replied = SeqSet::default();
    let mut overdue = SeqSet::default();
    let mut last_sweep = 0u64;
    let mut out: Vec<Record> = Vec::with_capacity(RECORDS_PER_MESSAGE);
    let io = |e: std::io::Error| Error::io(format!("receiving on the {} socket", kind.name()), e);
    // Records go to the collector in batches over a bounded channel: the
    // receiver blocks (and the socket queues fill) rather than drop one.
    let flush = |out: &mut Vec<Record>| {
        if !out.is_empty() {
            let _ = events.send(std::mem::replace(out, Vec::with_capacity(RECORDS_PER_MESSAGE)));
        }
    };

    let finish = |seq: u64, p: &Pending, replied: &mut SeqSet| {
        replied.insert(seq);
        c.replied.fetch_add(1, Ordering::Relaxed);
        let rx = p.rx.unwrap_or_default();
        let (tx_ns, rx_ns, source) = match p.tx {
            Some(tx) if tx.hardware_ns != 0 && rx.hardware_ns != 0 => (tx.hardware_ns, rx.hardware_ns, StampSource::Hardware),
            Some(tx) if tx.software_ns != 0 => (tx.software_ns, rx.software_ns, StampSource::Software),
            _ => (p.user_tx_ns, rx.software_ns, StampSource::User),
        };
        let latency_ns = rx_ns.saturating_sub(tx_ns);
        if latency_ns > timeout_ns {
            c.late.fetch_add(1, Ordering::Relaxed);
            return None;
        }
        Some(Record { path: kind, seq, tx_ns, rx_ns, latency_ns, timestamps: source })
    };

    let mut drained = 0usize;
    loop {
        if drained > 0 {
            // Busy: let replies and send timestamps gather for a moment and
            // take them in batches, instead of being woken by each one (a
            // wake-up per packet cost more CPU than the packets at 100k/s).
            // The latencies are the kernel's timestamps, taken when the
            // packets passed, not when they are read.
            std::thread::sleep(Duration::from_nanos(COALESCE_NS));
        } else {
            let mut pfd = libc::pollfd { fd: sock.raw_fd(), events: libc::POLLIN, revents: 0 };
            // SAFETY: one valid pollfd.
            unsafe { libc::poll(&mut pfd, 1, 20) };
        }
        drained = 0;
        loop {
            // Send timestamps first: they were queued before the reply could be.
            let stamps = sock.recv_tx_stamps(&mut batch).map_err(io)?;
            for &(payload, stamp) in &batch.out[..stamps] {
                let Some(p) = payload.filter(|p| p.run_id == run_id) else { continue };
                if replied.contains(p.seq) || overdue.contains(p.seq) {
                    continue;
                }
                let entry = pending.entry(p.seq).or_default();
                entry.tx = Some(stamp);
                entry.user_tx_ns = p.user_tx_ns;
                if entry.rx.is_some() {
                    let entry = pending.remove(&p.seq).unwrap_or_default();
                    out.extend(finish(p.seq, &entry, &mut replied));
                }
            }
            let replies = sock.recv_replies(&mut batch).map_err(io)?;
            for &(payload, stamp) in &batch.out[..replies] {
                let Some(p) = payload.filter(|p| p.run_id == run_id) else { continue };
                if replied.contains(p.seq) {
                    c.duplicates.fetch_add(1, Ordering::Relaxed);
                    continue;
                }
                if overdue.contains(p.seq) {
                    // Declared lost at the timeout, answered after it: late.
                    replied.insert(p.seq);
                    c.replied.fetch_add(1, Ordering::Relaxed);
                    c.late.fetch_add(1, Ordering::Relaxed);
                    c.overdue.fetch_sub(1, Ordering::Relaxed);
                    continue;
                }
                let entry = pending.entry(p.seq).or_default();
                entry.rx = Some(stamp);
                entry.user_tx_ns = p.user_tx_ns;
                if entry.tx.is_some() {
                    let entry = pending.remove(&p.seq).unwrap_or_default();
                    out.extend(finish(p.seq, &entry, &mut replied));
                }
            }
            if out.len() >= RECORDS_PER_MESSAGE / 2 {
                flush(&mut out);
            }
            drained += stamps + replies;
            if stamps < MAX_BATCH && replies < MAX_BATCH {
                break;
            }
        }
        flush(&mut out);

        let mono = monotonic_ns();
        let done = sender_done.load(Ordering::SeqCst);
        if mono - last_sweep >= 20_000_000 || done {
            last_sweep = mono;
            let now = realtime_ns();
            let mut ready = Vec::new();
            pending.retain(|&seq, p| match (p.tx, p.rx) {
                (None, Some(rx)) if now.saturating_sub(rx.software_ns) > TX_STAMP_WAIT_NS => {
                    ready.push((seq, std::mem::take(p)));
                    false
                }
                (Some(tx), None) if now.saturating_sub(tx.software_ns.max(p.user_tx_ns)) > timeout_ns => {
                    overdue.insert(seq);
                    c.overdue.fetch_add(1, Ordering::Relaxed);
                    false
                }
                _ => true,
            });
            for (seq, p) in ready {
                out.extend(finish(seq, &p, &mut replied));
            }
            flush(&mut out);
        }
        if done {
            let all_replied = c.replied.load(Ordering::Relaxed) >= c.sent.load(Ordering::SeqCst);
            let drain_ns = if stop.load(Ordering::Relaxed) { 100_000_000 } else { timeout_ns };
            if all_replied || mono > sender_done_at.load(Ordering::SeqCst) + drain_ns {
                break;
            }
        }
    }
    // Replies still waiting for their send timestamp are timed from user
    // space rather than dropped.
    for (seq, p) in pending.drain() {
        if p.rx.is_some() {
            out.extend(finish(seq, &p, &mut replied));
        }
    }
    flush(&mut out);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> GeneratorConfig {
        GeneratorConfig {
            target: Ipv4Addr::LOCALHOST,
            udp_port: 9,
            paths: vec![PathKind::Udp],
            pattern: Pattern::periodic(1_000_000),
            count: Some(10),
            duration_ns: None,
            timeout_ns: 1_000_000_000,
            preflight: false,
            sender_priority: 0,
            log: None,
        }
    }

    #[test]
    fn validation_names_the_pacing_limit() {
        assert!(config().validate().is_ok());
        let fast = GeneratorConfig { pattern: Pattern::periodic(1_000), ..config() };
        let e = fast.validate().unwrap_err();
        assert_eq!(e.exit_code(), 2);
        assert!(e.to_string().contains("rate too high"), "{e}");
        assert!(GeneratorConfig { count: None, ..config() }.validate().is_err());
        assert!(GeneratorConfig { paths: vec![], ..config() }.validate().is_err());
        assert!(GeneratorConfig { count: Some(0), ..config() }.validate().is_err());
    }

    #[test]
    fn a_sender_stays_within_one_batch_of_the_slowest() {
        let progress = [AtomicU64::new(0), AtomicU64::new(0)];
        let (a, b) = (Peers { progress: &progress, me: 0 }, Peers { progress: &progress, me: 1 });
        assert_eq!(a.allowed(0), MAX_BATCH);
        a.sent(MAX_BATCH as u64);
        assert_eq!(a.allowed(MAX_BATCH as u64), 0, "one batch ahead: waits");
        assert_eq!(b.allowed(0), MAX_BATCH);
        b.sent(10);
        assert_eq!(a.allowed(MAX_BATCH as u64), 10);
        drop(b.finish_on_drop());
        assert_eq!(a.allowed(MAX_BATCH as u64), MAX_BATCH, "a finished sender holds nobody back");
        let alone = Peers { progress: &progress[..1], me: 0 };
        assert_eq!(alone.allowed(1_000), MAX_BATCH);
    }

    #[test]
    fn seq_set_grows_on_demand() {
        let mut s = SeqSet::default();
        assert!(!s.contains(1_000_000));
        s.insert(1_000_000);
        s.insert(3);
        assert!(s.contains(1_000_000) && s.contains(3) && !s.contains(4));
    }
}
