//! NIC transmit (`[nic.tx]` in a scenario): the queue discipline in front
//! of the NIC (txqueuelen frames, drops counted by reason), the wire at
//! the link's rate one frame at a time, a tx-completion hard IRQ (its own
//! line, as a NIC's separate tx MSI-X vector) and the NET_TX softirq that
//! frees each sent frame (`dev_kfree_skb_irq` → `net_tx_action`). ICMP
//! echo replies (built in NET_RX) and UDP sends from tasks go through it.
//!
//! Without `[nic.tx]` replies are counted as sent at once and their
//! transmit is part of the `icmp_echo` softirq cost, as before this
//! device existed (the reproductions' calibrated costs assume that).

use crate::device::Device;
use crate::kernel::{Ev, Sim};
use crate::net::wire_ns;
use crate::softirq::{Job, JobWhat, NET_TX};
use crate::task::TaskId;
use irqlab_analysis::Nanos;
use serde_json::json;
use std::collections::VecDeque;

/// CPU costs of transmit completion.
#[derive(Debug, Clone, Copy, Default)]
pub struct TxCosts {
    /// Tx-completion hard-IRQ handler (entry/exit are added).
    pub irq: Nanos,
    /// NET_TX softirq work per sent frame (free the skb, wake the queue).
    pub complete: Nanos,
}

#[derive(Debug, Clone, Default)]
struct TxStats {
    queued: u64,
    dropped_queue_full: u64,
    sent: u64,
    completed: u64,
    bytes_sent: u64,
    net_tx_softirq_ns: Nanos,
    hardirqs: u64,
    queue_max: u64,
}

pub struct NicTx {
    pub name: String,
    pub id: usize,
    pub line: usize,
    /// txqueuelen: frames the queue discipline holds.
    pub limit: usize,
    pub link_bits_per_s: u64,
    pub costs: TxCosts,
    queue: VecDeque<u32>,
    on_wire: Option<u32>,
    /// Sent, waiting for the tx-completion IRQ handler.
    sent_unreaped: u64,
    /// Handed to NET_TX, not yet freed.
    in_bh: u64,
    stats: TxStats,
    in_flight_at_start: u64,
}

impl NicTx {
    pub fn new(name: String, id: usize, line: usize, limit: usize, link_bits_per_s: u64, costs: TxCosts) -> Self {
        NicTx {
            name,
            id,
            line,
            limit,
            link_bits_per_s,
            costs,
            queue: VecDeque::new(),
            on_wire: None,
            sent_unreaped: 0,
            in_bh: 0,
            stats: TxStats::default(),
            in_flight_at_start: 0,
        }
    }

    fn start_next(&mut self, sim: &mut Sim) {
        if self.on_wire.is_some() {
            return;
        }
        if let Some(size) = self.queue.pop_front() {
            self.on_wire = Some(size);
            let t = wire_ns(size, self.link_bits_per_s).max(1);
            sim.q.schedule_at(sim.now + t, Ev::Device { dev: self.id as u32, token: 0 });
        }
    }
}

impl Device for NicTx {
    fn name(&self) -> &str {
        &self.name
    }

    fn hardirq_cost(&mut self, _sim: &Sim) -> Nanos {
        self.costs.irq
    }

    fn hardirq_done(&mut self, sim: &mut Sim) {
        self.stats.hardirqs += 1;
        // The handler reaps every frame sent so far: one NET_TX job each.
        for _ in 0..std::mem::take(&mut self.sent_unreaped) {
            self.in_bh += 1;
            let job = Job { vector: NET_TX, cost: self.costs.complete, what: JobWhat::Device { dev: self.id, token: 0 }, owner: None };
            sim.queue_bh_job(job, false);
        }
    }

    fn bh_done(&mut self, _sim: &mut Sim, _token: u64) {
        self.in_bh = self.in_bh.saturating_sub(1);
        self.stats.completed += 1;
        self.stats.net_tx_softirq_ns += self.costs.complete;
    }

    fn on_event(&mut self, sim: &mut Sim, _token: u64) {
        // The frame on the wire is out: signal completion, send the next.
        if let Some(size) = self.on_wire.take() {
            self.stats.sent += 1;
            self.stats.bytes_sent += size as u64;
            self.sent_unreaped += 1;
            sim.raise_irq(self.line);
        }
        self.start_next(sim);
    }

    fn transmit(&mut self, sim: &mut Sim, size: u32, _from: Option<TaskId>) -> bool {
        if self.queue.len() >= self.limit {
            self.stats.dropped_queue_full += 1;
            return false;
        }
        self.stats.queued += 1;
        self.queue.push_back(size);
        self.stats.queue_max = self.stats.queue_max.max(self.queue.len() as u64);
        self.start_next(sim);
        true
    }

    fn in_flight(&self) -> u64 {
        self.queue.len() as u64 + self.on_wire.iter().count() as u64 + self.sent_unreaped + self.in_bh
    }

    fn reset_stats(&mut self) {
        self.stats = TxStats::default();
        self.in_flight_at_start = self.in_flight();
    }

    fn conserved(&self) -> bool {
        self.stats.queued + self.in_flight_at_start == self.stats.completed + self.in_flight()
    }

    fn report(&self) -> serde_json::Value {
        let st = &self.stats;
        json!({
            "name": self.name,
            "kind": "nic-tx",
            "queue_limit": self.limit,
            "frames_queued": st.queued,
            "frames_sent": st.sent,
            "bytes_sent": st.bytes_sent,
            "frames_completed": st.completed,
            "dropped": {"queue_full": st.dropped_queue_full},
            "completion_hardirqs": st.hardirqs,
            "net_tx_softirq_ns": st.net_tx_softirq_ns,
            "queue_max": st.queue_max,
            "in_flight_at_start": self.in_flight_at_start,
            "in_flight": self.in_flight(),
        })
    }
}
