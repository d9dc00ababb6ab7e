//! The disk as a device in the kernel's interrupt path (`[disk]` in a
//! scenario): tasks issue blocking reads ([`crate::task::Step::Read`]), the
//! request queue is kept in C-LOOK order ([`CLookQueue`]), the drive
//! ([`Drive`]) serves one request at a time with seek + rotation +
//! transfer, and each completion raises the disk's hard IRQ whose handler
//! queues a BLOCK softirq job. The bottom half ends the request (wakes the
//! reader) and dispatches the next one, as Linux's `blk_done_softirq` →
//! `scsi_end_request` → `scsi_run_queue` does; so bottom-half delays also
//! delay the disk.

use super::{CLookQueue, Drive};
use crate::device::Device;
use crate::disk::drive::{Access, SECTOR_BYTES};
use crate::kernel::{Ev, Sim};
use crate::metrics::Histogram;
use crate::softirq::{Job, JobWhat, BLOCK};
use crate::task::TaskId;
use irqlab_analysis::Nanos;
use serde_json::json;
use std::collections::{BTreeMap, VecDeque};

/// CPU costs of one completion (scenario `[disk.costs]`).
#[derive(Debug, Clone, Copy, Default)]
pub struct DiskCosts {
    /// Driver hard-IRQ handler (entry/exit costs are added by the kernel).
    pub irq: Nanos,
    /// BLOCK softirq work per completed request (end_request, wake-up,
    /// dispatch of the next request).
    pub block_softirq: Nanos,
}

#[derive(Debug, Clone, Copy)]
struct Request {
    task: TaskId,
    sector: u64,
    sectors: u64,
    submitted: Nanos,
    /// Drive service time (set when the drive takes it).
    service: Nanos,
}

#[derive(Debug, Clone, Default)]
struct DiskStats {
    submitted: u64,
    completed: u64,
    bytes: u64,
    service: Histogram,
    response: Histogram,
    block_softirq_ns: Nanos,
    hardirqs: u64,
    sequential: u64,
    mechanical: u64,
    cache_hits: u64,
    queue_max: u64,
}

pub struct DiskDevice {
    pub name: String,
    /// This device's index in the simulator's device list.
    pub id: usize,
    pub line: usize,
    pub costs: DiskCosts,
    drive: Drive,
    queue: CLookQueue<Request>,
    /// The request the drive is serving.
    busy: Option<Request>,
    /// Served by the drive, waiting for the hard IRQ handler.
    done_by_drive: VecDeque<Request>,
    /// Handed to the BLOCK softirq, by job token.
    in_bh: BTreeMap<u64, Request>,
    next_token: u64,
    stats: DiskStats,
    in_flight_at_start: u64,
}

impl DiskDevice {
    pub fn new(name: String, id: usize, line: usize, costs: DiskCosts, drive: Drive) -> Self {
        DiskDevice {
            name,
            id,
            line,
            costs,
            drive,
            queue: CLookQueue::new(),
            busy: None,
            done_by_drive: VecDeque::new(),
            in_bh: BTreeMap::new(),
            next_token: 0,
            stats: DiskStats::default(),
            in_flight_at_start: 0,
        }
    }

    /// Capacity in sectors (readers draw their sectors below it).
    pub fn sectors(&self) -> u64 {
        self.drive.geometry.sectors
    }

    /// The drive takes the next request in C-LOOK order, if it is free.
    fn dispatch(&mut self, sim: &mut Sim) {
        if self.busy.is_some() {
            return;
        }
        let Some((_, mut req)) = self.queue.pop_next(self.drive.head_sector()) else { return };
        let (service, access) = self.drive.serve(sim.now, req.sector, req.sectors);
        match access {
            Access::Sequential => self.stats.sequential += 1,
            Access::Mechanical => self.stats.mechanical += 1,
            Access::CacheHit => self.stats.cache_hits += 1,
        }
        req.service = service;
        self.busy = Some(req);
        // schedule_at from sim.now: the queue's clock lags behind when the
        // last step was a CPU completion rather than a popped event.
        sim.q.schedule_at(sim.now + service, Ev::Device { dev: self.id as u32, token: 0 });
    }
}

impl Device for DiskDevice {
    fn name(&self) -> &str {
        &self.name
    }

    fn hardirq_cost(&mut self, _sim: &Sim) -> Nanos {
        self.costs.irq
    }

    fn hardirq_done(&mut self, sim: &mut Sim) {
        self.stats.hardirqs += 1;
        while let Some(req) = self.done_by_drive.pop_front() {
            let token = self.next_token;
            self.next_token += 1;
            self.in_bh.insert(token, req);
            let job =
                Job { vector: BLOCK, cost: self.costs.block_softirq, what: JobWhat::Device { dev: self.id, token }, owner: Some(req.task) };
            sim.queue_bh_job(job, false);
        }
    }

    fn bh_done(&mut self, sim: &mut Sim, token: u64) {
        let Some(req) = self.in_bh.remove(&token) else { return };
        let st = &mut self.stats;
        st.completed += 1;
        st.bytes += req.sectors * SECTOR_BYTES;
        st.service.record(req.service);
        st.response.record(sim.now - req.submitted);
        st.block_softirq_ns += self.costs.block_softirq;
        sim.wake(req.task);
        self.dispatch(sim);
    }

    fn on_event(&mut self, sim: &mut Sim, _token: u64) {
        // The drive finished its request: it raises the completion IRQ.
        if let Some(req) = self.busy.take() {
            self.done_by_drive.push_back(req);
            sim.raise_irq(self.line);
        }
    }

    fn submit_read(&mut self, sim: &mut Sim, task: TaskId, sector: u64, sectors: u64) {
        let g = self.drive.geometry;
        let sectors = sectors.clamp(1, g.sectors);
        let sector = sector.min(g.sectors - sectors);
        self.stats.submitted += 1;
        self.queue.push(sector, Request { task, sector, sectors, submitted: sim.now, service: 0 });
        self.stats.queue_max = self.stats.queue_max.max(self.queue.len() as u64);
        self.dispatch(sim);
    }

    fn in_flight(&self) -> u64 {
        (self.queue.len() + self.busy.iter().count() + self.done_by_drive.len() + self.in_bh.len()) as u64
    }

    fn reset_stats(&mut self) {
        self.stats = DiskStats::default();
        self.in_flight_at_start = self.in_flight();
    }

    fn conserved(&self) -> bool {
        self.stats.submitted + self.in_flight_at_start == self.stats.completed + self.in_flight()
    }

    fn report(&self) -> serde_json::Value {
        let st = &self.stats;
        json!({
            "name": self.name,
            "kind": "disk",
            "requests_submitted": st.submitted,
            "requests_completed": st.completed,
            "bytes_read": st.bytes,
            "service": st.service.summary(),
            "response": st.response.summary(),
            "completion_hardirqs": st.hardirqs,
            "block_softirq_ns": st.block_softirq_ns,
            "accesses": {"sequential": st.sequential, "mechanical": st.mechanical, "cache_hit": st.cache_hits},
            "queue_max": st.queue_max,
            "in_flight_at_start": self.in_flight_at_start,
            "in_flight": self.in_flight(),
        })
    }
}
