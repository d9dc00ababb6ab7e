//! The disk experiments of §6.1: a foreground and a background process
//! reading the same 8.2 GB file on one disk, under FIFO, a two-class
//! priority queue or the idletime scheduler (two C-LOOK queues, background
//! held out of the drive during the preemption interval, §5.3).
//!
//! Random (§6.1.1): every read is one random file-system block.
//! Sequential (§6.1.2): 512-byte reads; the foreground's go through the
//! buffer cache with clustered read-ahead, the background's get neither
//! caching nor read-ahead (§5.3), so each one is a disk read of its block.
//! Foreground and background start at different offsets (0 and 4.1 GB,
//! §6.1.2), so every switch between them costs a seek.

use super::workload::IntensityPhase;
use super::{merge_counters, scheduler, Class, Discipline, IdletimeScheduler, IntervalStart, Mean, RunResult};
use crate::disk::drive::SECTOR_BYTES;
use crate::disk::{CLookQueue, DiskGeometry, Drive};
use crate::engine::{rng_stream, EventQueue, SourceRng};
use irqlab_analysis::Nanos;
use rand::Rng;
use serde::Serialize;
use std::collections::{BTreeMap, VecDeque};

/// UFS block size: FreeBSD 4.x newfs default of 16 KB = 32 sectors.
pub const FS_BLOCK_SECTORS: u64 = 32;
/// Read-ahead cluster: MAXPHYS = 128 KB = 8 file-system blocks, the largest
/// single transfer `cluster_read` issues.
pub const CLUSTER_BLOCKS: u64 = 8;
/// Largest read-ahead in blocks: FreeBSD's IO_SEQMAX.
pub const SEQ_MAX: u64 = 127;
/// Application read size in the sequential experiment (§6.1.2): 512 bytes.
pub const APP_READ_BYTES: u64 = 512;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Pattern {
    Random,
    Sequential,
}

/// One disk run.
#[derive(Debug, Clone, Serialize)]
pub struct DiskExperiment {
    pub pattern: Pattern,
    /// Foreground intensity in (0, 1]; None runs no foreground process.
    pub intensity: Option<f64>,
    pub background: bool,
    pub discipline: Discipline,
    pub interval_start: IntervalStart,
    pub duration_ns: Nanos,
    pub seed: u64,
    pub geometry: DiskGeometry,
    /// CPU time per application read. Random: 50 µs for the system call
    /// and block lookup (our choice for the 733 MHz Pentium III).
    /// Sequential: 25 µs per 512-byte read out of the buffer cache, from
    /// the linear part of the sequential baseline (Fig. 6.5: 2.28 MB/s at
    /// 10%, 8.90 MB/s at 50%, i.e. 512 B per 22–29 µs of active time).
    pub cpu_random_ns: Nanos,
    pub cpu_sequential_ns: Nanos,
}

impl DiskExperiment {
    pub fn new(pattern: Pattern, intensity: Option<f64>, background: bool, discipline: Discipline) -> Self {
        DiskExperiment {
            pattern,
            intensity,
            background,
            discipline,
            interval_start: IntervalStart::Dispatch,
            duration_ns: 30_000_000_000,
            seed: 1,
            geometry: DiskGeometry::default(),
            cpu_random_ns: 50_000,
            cpu_sequential_ns: 25_000,
        }
    }
}

#[derive(Debug, Clone, Copy)]
struct Request {
    class: Class,
    sector: u64,
    sectors: u64,
    issued: Nanos,
    /// Foreground cluster start block (sequential), for the cache.
    cluster: Option<u64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ev {
    FgWake,
    FgRead,
    BgRead,
    DiskDone,
    IntervalEnd,
}

enum Queues {
    Fifo(VecDeque<Request>),
    Idletime { sched: IdletimeScheduler, fg: CLookQueue<Request>, bg: CLookQueue<Request> },
}

struct Sim<'a> {
    cfg: &'a DiskExperiment,
    q: EventQueue<Ev>,
    drive: Drive,
    queues: Queues,
    active: Option<Request>,
    wake_at: Option<Nanos>,
    fg_rng: SourceRng,
    bg_rng: SourceRng,
    phase: IntensityPhase,
    // Foreground sequential state: next byte offset, clusters by start block (done?).
    fg_offset: u64,
    fg_clusters: BTreeMap<u64, bool>,
    fg_ra_next: u64,
    fg_seqcount: u64,
    fg_waiting_block: Option<u64>,
    fg_wait_since: Nanos,
    bg_offset: u64,
    fg_bytes: u64,
    bg_bytes: u64,
    fg_done: u64,
    bg_done: u64,
    fg_lat: Mean,
    bg_lat: Mean,
    service: Mean,
    busy_until: Nanos,
}

const FG_FILE_START: u64 = 0;

impl<'a> Sim<'a> {
    fn new(cfg: &'a DiskExperiment) -> Self {
        let queues = match cfg.discipline {
            Discipline::Fifo => Queues::Fifo(VecDeque::new()),
            Discipline::Idletime { p_ns } => Queues::Idletime {
                sched: IdletimeScheduler::new(p_ns, cfg.interval_start, false),
                fg: CLookQueue::new(),
                bg: CLookQueue::new(),
            },
        };
        Sim {
            cfg,
            q: EventQueue::new(),
            drive: Drive::new(cfg.geometry),
            queues,
            active: None,
            wake_at: None,
            fg_rng: rng_stream(cfg.seed, "idletime-disk-fg"),
            bg_rng: rng_stream(cfg.seed, "idletime-disk-bg"),
            phase: IntensityPhase::new(cfg.intensity.unwrap_or(0.0)),
            fg_offset: 0,
            fg_clusters: BTreeMap::new(),
            fg_ra_next: 0,
            fg_seqcount: 0,
            fg_waiting_block: None,
            fg_wait_since: 0,
            // §6.1.2: the background process starts in the middle of the file (4.1 GB).
            bg_offset: cfg.geometry.sectors / 2 * SECTOR_BYTES,
            fg_bytes: 0,
            bg_bytes: 0,
            fg_done: 0,
            bg_done: 0,
            fg_lat: Mean::default(),
            bg_lat: Mean::default(),
            service: Mean::default(),
            busy_until: 0,
        }
    }

    fn random_block(rng: &mut SourceRng, g: &DiskGeometry) -> u64 {
        rng.gen_range(0..g.sectors / FS_BLOCK_SECTORS) * FS_BLOCK_SECTORS
    }

    fn enqueue(&mut self, req: Request) {
        let now = self.q.now();
        match &mut self.queues {
            Queues::Fifo(q) => q.push_back(req),
            Queues::Idletime { sched, fg, bg } => {
                let _ = sched.on_arrival(now, req.class); // disk: not preemptable
                match req.class {
                    Class::Foreground => fg.push(req.sector, req),
                    Class::Background => bg.push(req.sector, req),
                }
            }
        }
        self.dispatch();
    }

    fn dispatch(&mut self) {
        if self.active.is_some() {
            return;
        }
        let now = self.q.now();
        let head = self.drive.head_sector();
        let next = match &mut self.queues {
            Queues::Fifo(q) => q.pop_front(),
            Queues::Idletime { sched, fg, bg } => {
                let wake = |t| {
                    self.q.schedule_at(t, Ev::IntervalEnd);
                };
                match scheduler::next_class(sched, now, !fg.is_empty(), !bg.is_empty(), &mut self.wake_at, wake) {
                    Some(Class::Foreground) => fg.pop_next(head).map(|(_, r)| r),
                    Some(Class::Background) => bg.pop_next(head).map(|(_, r)| r),
                    None => None,
                }
            }
        };
        if let Some(req) = next {
            let (t, _) = self.drive.serve(now, req.sector, req.sectors);
            self.service.add(t as f64);
            self.active = Some(req);
            self.busy_until = now + t;
            self.q.schedule_in(t, Ev::DiskDone);
        }
    }

    // ---- foreground process ----

    fn fg_wake(&mut self) {
        let now = self.q.now();
        self.phase.begin(now);
        self.fg_read();
    }

    /// Continues the foreground loop after a read finished at `now`.
    fn fg_continue(&mut self) {
        let now = self.q.now();
        if self.phase.active(now) {
            let cpu = match self.cfg.pattern {
                Pattern::Random => self.cfg.cpu_random_ns,
                Pattern::Sequential => self.cfg.cpu_sequential_ns,
            };
            self.q.schedule_in(cpu, Ev::FgRead);
        } else {
            self.q.schedule_in(self.phase.sleep_ns(), Ev::FgWake);
        }
    }

    fn fg_read(&mut self) {
        let now = self.q.now();
        match self.cfg.pattern {
            Pattern::Random => {
                let sector = Self::random_block(&mut self.fg_rng, &self.cfg.geometry);
                self.enqueue(Request { class: Class::Foreground, sector, sectors: FS_BLOCK_SECTORS, issued: now, cluster: None });
            }
            Pattern::Sequential => {
                let block = self.fg_offset / (FS_BLOCK_SECTORS * SECTOR_BYTES);
                // FreeBSD 4.x sequential heuristic: every sequential read
                // raises seqcount by one (a 512-byte read is one BKVASIZE
                // unit), up to IO_SEQMAX = 127, and cluster_read keeps up to
                // seqcount blocks read ahead, in MAXPHYS clusters. It looks
                // at offsets only, not at timing (§6.1.2).
                self.fg_seqcount = (self.fg_seqcount + 1).min(SEQ_MAX);
                if self.cluster_status(block).is_none() {
                    self.fg_issue_cluster(block);
                    self.fg_ra_next = self.fg_ra_next.max(block - block % CLUSTER_BLOCKS + CLUSTER_BLOCKS);
                }
                while self.fg_ra_next <= block + self.fg_seqcount {
                    let ra = self.fg_ra_next;
                    self.fg_issue_cluster(ra);
                    self.fg_ra_next = ra + CLUSTER_BLOCKS;
                }
                match self.cluster_status(block) {
                    Some(true) => self.fg_app_read_done(now, now),
                    _ => {
                        self.fg_waiting_block = Some(block);
                        self.fg_wait_since = now;
                    }
                }
            }
        }
    }

    fn cluster_status(&self, block: u64) -> Option<bool> {
        let start = block - block % CLUSTER_BLOCKS;
        self.fg_clusters.get(&start).copied()
    }

    fn fg_issue_cluster(&mut self, block: u64) {
        let start = block - block % CLUSTER_BLOCKS;
        if self.fg_clusters.contains_key(&start) {
            return;
        }
        self.fg_clusters.insert(start, false);
        let now = self.q.now();
        self.enqueue(Request {
            class: Class::Foreground,
            sector: FG_FILE_START + start * FS_BLOCK_SECTORS,
            sectors: CLUSTER_BLOCKS * FS_BLOCK_SECTORS,
            issued: now,
            cluster: Some(start),
        });
    }

    fn fg_app_read_done(&mut self, issued: Nanos, now: Nanos) {
        let bytes = match self.cfg.pattern {
            Pattern::Random => FS_BLOCK_SECTORS * SECTOR_BYTES,
            Pattern::Sequential => APP_READ_BYTES,
        };
        self.fg_bytes += bytes;
        self.fg_done += 1;
        self.fg_lat.add((now - issued) as f64);
        if self.cfg.pattern == Pattern::Sequential {
            self.fg_offset += APP_READ_BYTES;
            // Forget clusters well behind the reader.
            let block = self.fg_offset / (FS_BLOCK_SECTORS * SECTOR_BYTES);
            while let Some((&s, &done)) = self.fg_clusters.iter().next() {
                if done && s + 2 * CLUSTER_BLOCKS < block {
                    self.fg_clusters.remove(&s);
                } else {
                    break;
                }
            }
        }
        self.fg_continue();
    }

    // ---- background process ----

    fn bg_read(&mut self) {
        let now = self.q.now();
        let sector = match self.cfg.pattern {
            Pattern::Random => Self::random_block(&mut self.bg_rng, &self.cfg.geometry),
            // No caching for idletime data: each 512-byte read is a disk read of its block.
            Pattern::Sequential => self.bg_offset / SECTOR_BYTES / FS_BLOCK_SECTORS * FS_BLOCK_SECTORS,
        };
        self.enqueue(Request { class: Class::Background, sector, sectors: FS_BLOCK_SECTORS, issued: now, cluster: None });
    }

    fn disk_done(&mut self) {
        let now = self.q.now();
        let req = self.active.take().expect("a request was active");
        if let Queues::Idletime { sched, .. } = &mut self.queues {
            sched.on_completion(now);
        }
        match req.class {
            Class::Foreground => match req.cluster {
                None => self.fg_app_read_done(req.issued, now),
                Some(start) => {
                    self.fg_clusters.insert(start, true);
                    if let Some(b) = self.fg_waiting_block {
                        if self.cluster_status(b) == Some(true) {
                            self.fg_waiting_block = None;
                            let since = self.fg_wait_since;
                            self.fg_app_read_done(since, now);
                        }
                    }
                }
            },
            Class::Background => {
                let bytes = match self.cfg.pattern {
                    Pattern::Random => FS_BLOCK_SECTORS * SECTOR_BYTES,
                    Pattern::Sequential => APP_READ_BYTES,
                };
                self.bg_bytes += bytes;
                self.bg_done += 1;
                self.bg_lat.add((now - req.issued) as f64);
                self.bg_offset += APP_READ_BYTES;
                let cpu = match self.cfg.pattern {
                    Pattern::Random => self.cfg.cpu_random_ns,
                    Pattern::Sequential => self.cfg.cpu_sequential_ns,
                };
                self.q.schedule_in(cpu, Ev::BgRead);
            }
        }
        self.dispatch();
    }

    fn run(mut self) -> RunResult {
        if self.cfg.intensity.is_some() {
            self.q.schedule_at(0, Ev::FgWake);
        }
        if self.cfg.background {
            self.q.schedule_at(0, Ev::BgRead);
        }
        while let Some(t) = self.q.peek_time() {
            if t >= self.cfg.duration_ns {
                break;
            }
            let (_, ev) = self.q.pop().expect("peeked");
            match ev {
                Ev::FgWake => self.fg_wake(),
                Ev::FgRead => self.fg_read(),
                Ev::BgRead => self.bg_read(),
                Ev::DiskDone => self.disk_done(),
                Ev::IntervalEnd => {
                    self.wake_at = None;
                    self.dispatch();
                }
            }
        }
        let secs = self.cfg.duration_ns as f64 / 1e9;
        let (unit, scale) = match self.cfg.pattern {
            Pattern::Random => ("blocks/s", 1.0 / (FS_BLOCK_SECTORS * SECTOR_BYTES) as f64),
            Pattern::Sequential => ("MB/s", 1e-6),
        };
        let mut counters = BTreeMap::new();
        if let Queues::Idletime { sched, .. } = &self.queues {
            merge_counters(&mut counters, sched.counters());
        }
        RunResult {
            unit: unit.into(),
            foreground: self.fg_bytes as f64 * scale / secs,
            background: self.bg_bytes as f64 * scale / secs,
            fg_latency_mean_ns: self.fg_lat.get(),
            bg_latency_mean_ns: self.bg_lat.get(),
            fg_completed: self.fg_done,
            bg_completed: self.bg_done,
            mean_service_ns: self.service.get(),
            counters,
            events: self.q.events_processed(),
        }
    }
}

/// Runs one disk experiment.
pub fn run(cfg: &DiskExperiment) -> RunResult {
    Sim::new(cfg).run()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exp(pattern: Pattern, i: Option<f64>, bg: bool, d: Discipline) -> RunResult {
        let mut e = DiskExperiment::new(pattern, i, bg, d);
        e.duration_ns = 10_000_000_000;
        run(&e)
    }

    #[test]
    fn random_baseline_saturates_near_52_blocks_per_s() {
        let r = exp(Pattern::Random, Some(1.0), false, Discipline::Fifo);
        assert!((45.0..58.0).contains(&r.foreground), "{r:?}");
        let low = exp(Pattern::Random, Some(0.01), false, Discipline::Fifo);
        // One read per ~119 ms cycle (19 ms read + 99 ms sleep).
        assert!((7.0..10.0).contains(&low.foreground), "{low:?}");
    }

    #[test]
    fn long_interval_protects_foreground_and_starves_background() {
        let d = Discipline::Idletime { p_ns: Some(150_000_000) };
        let base = exp(Pattern::Random, Some(0.5), false, d);
        let it = exp(Pattern::Random, Some(0.5), true, d);
        assert!(it.foreground > 0.95 * base.foreground, "{it:?} vs {base:?}");
        assert!(it.background < 0.05 * 52.0, "{it:?}");
        assert!(it.counters.get("P[b]").copied().unwrap_or(0) > 0);
    }

    #[test]
    fn sequential_foreground_issues_read_ahead_clusters() {
        let r = exp(Pattern::Sequential, Some(1.0), false, Discipline::Fifo);
        assert!(r.foreground > 8.0, "{r:?}");
    }
}
