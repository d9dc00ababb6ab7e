//! Workloads: periodic real-time task (optionally polling a socket once
//! per period), CPU-bound loop (optionally run/sleep phases), UDP server,
//! media player. Each is a [`Behavior`]: a small state machine the kernel
//! asks for its next step.

use crate::engine::SourceRng;
use crate::metrics::Histogram;
use crate::task::{Behavior, Step, StepCtx};
use irqlab_analysis::Nanos;
use rand::Rng;
use serde_json::json;

/// A cost or execution-time distribution.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Dist {
    Const(Nanos),
    Uniform(Nanos, Nanos),
    /// Exponential with this mean.
    Exp(Nanos),
}

impl Dist {
    pub fn draw(&self, rng: &mut SourceRng) -> Nanos {
        match *self {
            Dist::Const(v) => v,
            Dist::Uniform(a, b) => {
                if b <= a {
                    a
                } else {
                    rng.gen_range(a..=b)
                }
            }
            Dist::Exp(m) => (-(1.0 - rng.gen::<f64>()).ln() * m as f64).round() as Nanos,
        }
    }

    pub fn max(&self) -> Option<Nanos> {
        match *self {
            Dist::Const(v) => Some(v),
            Dist::Uniform(_, b) => Some(b),
            Dist::Exp(_) => None,
        }
    }
}

/// A periodic task: a job every `period` (first at `offset`), each
/// computing an execution time drawn from `exec`; response time = finish −
/// release, a miss when it exceeds `deadline`. Jobs never skip: an overrun
/// delays the next job. With `poll`, each job first makes one
/// non-blocking receive on that socket (cost `recv_cost` in kernel mode)
/// and counts successes (the load-bounds paper's τ1 counting heartbeats).
pub struct Periodic {
    pub period: Nanos,
    pub offset: Nanos,
    pub deadline: Nanos,
    pub exec: Dist,
    pub rng: SourceRng,
    pub poll: Option<usize>,
    pub recv_cost: Nanos,
    release: Nanos,
    phase: u8,
    pub polled_ok: u64,
    pub polled_empty: u64,
    pub max_jobs: Option<u64>,
    finished: bool,
}

impl Periodic {
    pub fn new(period: Nanos, offset: Nanos, deadline: Nanos, exec: Dist, rng: SourceRng) -> Self {
        Periodic {
            period,
            offset,
            deadline,
            exec,
            rng,
            poll: None,
            recv_cost: 0,
            release: offset,
            phase: 0,
            polled_ok: 0,
            polled_empty: 0,
            max_jobs: None,
            finished: false,
        }
    }
}

impl Behavior for Periodic {
    fn next(&mut self, ctx: &mut StepCtx) -> Step {
        loop {
            match self.phase {
                // Waiting for the release.
                0 => {
                    if self.max_jobs.is_some_and(|m| ctx.jobs.jobs >= m) {
                        return Step::Exit;
                    }
                    if ctx.now < self.release {
                        return Step::SleepUntil(self.release);
                    }
                    self.phase = 1;
                    if let Some(s) = self.poll {
                        if ctx.sockets[s].try_recv().is_some() {
                            self.polled_ok += 1;
                        } else {
                            self.polled_empty += 1;
                        }
                        if self.recv_cost > 0 {
                            return Step::Kernel(self.recv_cost);
                        }
                    }
                }
                1 => {
                    self.phase = 2;
                    return Step::User(self.exec.draw(&mut self.rng));
                }
                _ => {
                    let response = ctx.now - self.release;
                    ctx.jobs.jobs += 1;
                    ctx.jobs.response.record(response);
                    if response > self.deadline {
                        ctx.jobs.deadline_misses += 1;
                    }
                    self.release += self.period;
                    self.phase = 0;
                }
            }
        }
    }

    fn extra(&self) -> Option<serde_json::Value> {
        self.poll.map(|_| json!({"polls_ok": self.polled_ok, "polls_empty": self.polled_empty}))
    }

    fn reset_stats(&mut self) {
        self.polled_ok = 0;
        self.polled_empty = 0;
    }

    /// Jobs released but unfinished at the end whose deadline already
    /// passed are misses too (the job in progress and every later release,
    /// since jobs never skip); without this a task starved to the end of
    /// the run would show fewer misses than one that finished late. They
    /// count as jobs too, so misses / jobs stays a miss ratio.
    fn finish(&mut self, now: Nanos, jobs: &mut crate::task::JobStats) {
        if std::mem::replace(&mut self.finished, true) {
            return;
        }
        let mut release = self.release;
        while release.saturating_add(self.deadline) < now && self.max_jobs.is_none_or(|m| jobs.jobs < m) {
            jobs.jobs += 1;
            jobs.deadline_misses += 1;
            release += self.period;
        }
    }
}

/// A CPU-bound loop; with `run`/`sleep` it computes for `run` of wall
/// time, then sleeps `sleep`, and so on (the process-aware paper's
/// CPU-bound process: 100 s on, 10 s off). Reports the CPU time it got in
/// each completed active phase.
pub struct CpuLoop {
    pub chunk: Nanos,
    pub phases: Option<(Nanos, Nanos)>,
    phase_end: Option<Nanos>,
    pub phase_count: u64,
}

impl CpuLoop {
    pub fn new(phases: Option<(Nanos, Nanos)>) -> Self {
        CpuLoop { chunk: 1_000_000, phases, phase_end: None, phase_count: 0 }
    }
}

impl Behavior for CpuLoop {
    fn next(&mut self, ctx: &mut StepCtx) -> Step {
        let Some((run, sleep)) = self.phases else {
            return Step::User(self.chunk);
        };
        let end = *self.phase_end.get_or_insert(ctx.now + run);
        if ctx.now >= end {
            self.phase_count += 1;
            self.phase_end = Some(end + sleep + run);
            return Step::SleepUntil(end + sleep);
        }
        Step::User(self.chunk.min(end - ctx.now))
    }

    fn extra(&self) -> Option<serde_json::Value> {
        self.phases.map(|_| json!({"active_phases_completed": self.phase_count}))
    }
}

/// A UDP server: blocking receive, then `recv_cost` in the kernel (copy
/// to user) and `user_cost` of user work per datagram; with `reply`, a
/// sendto of that many bytes (`send_cost` in the kernel, then the frame
/// goes to the NIC's transmit queue).
pub struct UdpServer {
    pub socket: usize,
    pub recv_cost: Nanos,
    pub user_cost: Nanos,
    /// (tx device, reply size in bytes, send syscall cost).
    pub reply: Option<(usize, u32, Nanos)>,
    phase: u8,
    pub received: u64,
    pub replies: u64,
}

impl UdpServer {
    pub fn new(socket: usize, recv_cost: Nanos, user_cost: Nanos) -> Self {
        UdpServer { socket, recv_cost, user_cost, reply: None, phase: 0, received: 0, replies: 0 }
    }
}

impl Behavior for UdpServer {
    fn next(&mut self, ctx: &mut StepCtx) -> Step {
        loop {
            match self.phase {
                0 => {
                    if ctx.received {
                        ctx.received = false;
                        self.received += 1;
                        self.phase = 1;
                        return Step::Kernel(self.recv_cost);
                    }
                    return Step::Recv(self.socket);
                }
                1 => {
                    self.phase = 2;
                    return Step::User(self.user_cost);
                }
                2 => {
                    let Some((_, _, cost)) = self.reply else {
                        self.phase = 0;
                        continue;
                    };
                    self.phase = 3;
                    if cost > 0 {
                        return Step::Kernel(cost);
                    }
                }
                3 => {
                    self.phase = 0;
                    if let Some((dev, size, _)) = self.reply {
                        self.replies += 1;
                        return Step::Send { dev, size };
                    }
                }
                _ => self.phase = 0,
            }
        }
    }

    fn reset_stats(&mut self) {
        self.received = 0;
        self.replies = 0;
    }

    fn extra(&self) -> Option<serde_json::Value> {
        match self.reply {
            Some(_) => Some(json!({"datagrams": self.received, "replies": self.replies})),
            None => Some(json!({"datagrams": self.received})),
        }
    }
}

/// A media player (mplayer as in the BH-threshold paper): decodes frame k
/// (cost drawn from `decode`, user time) then spends `kernel_cost` in the
/// kernel on it (the system calls that read and show it), sleeps until its display time start +
/// (k + 1) × period if early (one period of pre-roll), displays late
/// frames at once. Records the delay
/// between consecutive displays.
pub struct MediaPlayer {
    pub period: Nanos,
    pub decode: Dist,
    pub frames: u64,
    pub rng: SourceRng,
    pub keep_frames: bool,
    pub kernel_cost: Nanos,
    start: Option<Nanos>,
    k: u64,
    decoded: bool,
    in_kernel: bool,
    waited: bool,
    last_display: Option<Nanos>,
    pub delays: Histogram,
    pub delays_ns: Vec<Nanos>,
    pub late_frames: u64,
    pub finished_at: Option<Nanos>,
}

impl MediaPlayer {
    pub fn new(period: Nanos, decode: Dist, frames: u64, rng: SourceRng, keep_frames: bool) -> Self {
        MediaPlayer {
            period,
            decode,
            frames,
            rng,
            keep_frames,
            kernel_cost: 0,
            start: None,
            k: 0,
            decoded: false,
            in_kernel: false,
            waited: false,
            last_display: None,
            delays: Histogram::default(),
            delays_ns: Vec::new(),
            late_frames: 0,
            finished_at: None,
        }
    }
}

impl MediaPlayer {
    /// Kernel time per frame after its decoding.
    pub fn with_kernel_cost(mut self, ns: Nanos) -> Self {
        self.kernel_cost = ns;
        self
    }
}

impl Behavior for MediaPlayer {
    fn next(&mut self, ctx: &mut StepCtx) -> Step {
        let start = *self.start.get_or_insert(ctx.now);
        if self.k >= self.frames {
            self.finished_at.get_or_insert(ctx.now);
            return Step::Exit;
        }
        if !self.decoded {
            self.decoded = true;
            return Step::User(self.decode.draw(&mut self.rng));
        }
        if !self.in_kernel && self.kernel_cost > 0 {
            self.in_kernel = true;
            return Step::Kernel(self.kernel_cost);
        }
        let due = start + (self.k + 1) * self.period;
        if !self.waited {
            // Decoding just finished: early frames wait for their time,
            // late ones are shown at once.
            self.waited = true;
            if ctx.now < due {
                return Step::SleepUntil(due);
            }
            self.late_frames += 1;
        }
        if let Some(last) = self.last_display {
            let d = ctx.now - last;
            self.delays.record(d);
            if self.keep_frames {
                self.delays_ns.push(d);
            }
        }
        ctx.jobs.jobs += 1;
        self.last_display = Some(ctx.now);
        self.k += 1;
        self.decoded = false;
        self.in_kernel = false;
        self.waited = false;
        self.next(ctx)
    }

    fn extra(&self) -> Option<serde_json::Value> {
        let s = self.delays.summary();
        let mut v = json!({
            "frames_displayed": self.k,
            "late_frames": self.late_frames,
            "decode_finished_ns": self.finished_at,
            "inter_frame_delay": s,
        });
        if self.keep_frames {
            v["inter_frame_delays_ns"] = json!(self.delays_ns);
        }
        Some(v)
    }
}

/// The CPU quantum of the idletime dissertation's benchmark processes,
/// t_max = 100 ms (§4.4.1, §6); intensity is a fraction of it.
pub const QUANTUM_NS: Nanos = 100_000_000;

/// Where a disk reader's next block is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadPattern {
    /// Uniformly random block-aligned positions over the whole disk.
    Random,
    /// Consecutive blocks from the start of the disk, wrapping at its end.
    Sequential,
}

/// A disk reader (the idletime dissertation's foreground process, §6,
/// Fig. 6.1): at intensity i it issues blocking reads of `block_sectors`
/// back to back for i · 100 ms ("the fraction of each CPU quantum a
/// process spends generating resource requests"; at least one read per
/// quantum), then sleeps (1 − i) · 100 ms. Each read costs `issue_cost` of
/// kernel time to submit; the reader blocks until the completion wakes it.
/// Response times (issue → wake-up) go into the task's response histogram,
/// one job per read.
pub struct DiskReader {
    pub dev: usize,
    pub disk_sectors: u64,
    pub block_sectors: u64,
    pub pattern: ReadPattern,
    pub intensity: f64,
    pub issue_cost: Nanos,
    pub rng: SourceRng,
    state: ReaderState,
    active_until: Nanos,
    reads_in_quantum: u64,
    next_sequential: u64,
    submitted_at: Nanos,
    pub reads: u64,
    pub bytes: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ReaderState {
    QuantumStart,
    Issue,
    Submit,
    Reading,
}

impl DiskReader {
    pub fn new(
        dev: usize,
        disk_sectors: u64,
        block_sectors: u64,
        pattern: ReadPattern,
        intensity: f64,
        issue_cost: Nanos,
        rng: SourceRng,
    ) -> Self {
        DiskReader {
            dev,
            disk_sectors,
            block_sectors: block_sectors.clamp(1, disk_sectors.max(1)),
            pattern,
            intensity: intensity.clamp(0.0, 1.0),
            issue_cost,
            rng,
            state: ReaderState::QuantumStart,
            active_until: 0,
            reads_in_quantum: 0,
            next_sequential: 0,
            submitted_at: 0,
            reads: 0,
            bytes: 0,
        }
    }

    fn next_sector(&mut self) -> u64 {
        let blocks = (self.disk_sectors / self.block_sectors).max(1);
        match self.pattern {
            ReadPattern::Random => self.rng.gen_range(0..blocks) * self.block_sectors,
            ReadPattern::Sequential => {
                let s = self.next_sequential;
                self.next_sequential = if s / self.block_sectors + 1 >= blocks { 0 } else { s + self.block_sectors };
                s
            }
        }
    }
}

impl Behavior for DiskReader {
    fn next(&mut self, ctx: &mut StepCtx) -> Step {
        loop {
            match self.state {
                ReaderState::QuantumStart => {
                    self.active_until = ctx.now + (self.intensity * QUANTUM_NS as f64).round() as Nanos;
                    self.reads_in_quantum = 0;
                    self.state = ReaderState::Issue;
                }
                ReaderState::Issue => {
                    if self.reads_in_quantum > 0 && ctx.now >= self.active_until {
                        self.state = ReaderState::QuantumStart;
                        let sleep = ((1.0 - self.intensity) * QUANTUM_NS as f64).round() as Nanos;
                        if sleep > 0 {
                            return Step::SleepUntil(ctx.now + sleep);
                        }
                        continue;
                    }
                    self.state = ReaderState::Submit;
                    self.submitted_at = ctx.now;
                    if self.issue_cost > 0 {
                        return Step::Kernel(self.issue_cost);
                    }
                }
                ReaderState::Submit => {
                    self.state = ReaderState::Reading;
                    let sector = self.next_sector();
                    return Step::Read { dev: self.dev, sector, sectors: self.block_sectors };
                }
                ReaderState::Reading => {
                    // Woken by the completion: the read is done.
                    self.reads += 1;
                    self.reads_in_quantum += 1;
                    self.bytes += self.block_sectors * crate::disk::drive::SECTOR_BYTES;
                    ctx.jobs.jobs += 1;
                    ctx.jobs.response.record(ctx.now - self.submitted_at);
                    self.state = ReaderState::Issue;
                }
            }
        }
    }

    fn reset_stats(&mut self) {
        self.reads = 0;
        self.bytes = 0;
    }

    fn extra(&self) -> Option<serde_json::Value> {
        Some(json!({
            "pattern": match self.pattern { ReadPattern::Random => "random", ReadPattern::Sequential => "sequential" },
            "intensity": self.intensity,
            "reads": self.reads,
            "bytes_read": self.bytes,
        }))
    }
}
