//! What one CPU of a multi-core machine hands the others (the machine,
//! `crate::machine`, carries it): RPS packets for another CPU's backlog,
//! and the IPI that schedules that backlog there.
//!
//! The kernel's path (net/core/dev.c, 6.x): the CPU that polls the NIC
//! picks a CPU by the flow's hash (`get_rps_cpu`) and puts the packet on
//! that CPU's backlog (`enqueue_to_backlog`); when the backlog was not
//! scheduled, the enqueue sets its `NAPI_STATE_SCHED` and puts the CPU on
//! the sender's `rps_ipi_list`; at the end of `net_rx_action` the sender
//! sends each listed CPU a function-call IPI (`net_rps_send_ipi`), whose
//! handler (`rps_trigger_softirq`) puts the backlog on that CPU's poll
//! list and raises NET_RX there, where `process_backlog` runs the
//! protocol.

use super::Sim;
use crate::net::Packet;
use crate::softirq::{PollDev, NET_RX};
use serde::Serialize;

/// A message from one CPU to another.
#[derive(Debug, Clone, Copy)]
pub enum Remote {
    /// `enqueue_to_backlog` on CPU `to`.
    Backlog { to: usize, pkt: Packet },
    /// `net_rps_send_ipi` to CPU `to`.
    Ipi { to: usize },
    /// A device interrupt routed to CPU `to` (its `smp_affinity`), raised
    /// by a packet arriving in a NIC ring polled from another CPU.
    Irq { to: usize, line: usize },
    /// `napi_schedule` of a NIC whose NAPI thread is on CPU `to`: the
    /// wake-up reaches it as a reschedule IPI (`ttwu_queue_wakelist`).
    NapiWake { to: usize, nic: usize },
}

/// A CPU's part in the machine.
#[derive(Debug, Default)]
pub struct CrossCpu {
    /// This CPU's number.
    pub cpu: usize,
    /// Messages for other CPUs, taken by the machine after each step.
    pub outbox: Vec<Remote>,
    /// The CPUs this `net_rx_action` enqueued to (the `rps_ipi_list`), as bits.
    pub ipi_due: u64,
    /// The function-call IPI's line (only when cores > 1).
    pub ipi_line: Option<usize>,
    /// This CPU's backlog scheduled by another CPU's enqueue, its IPI not
    /// yet handled.
    pub backlog_scheduled_remotely: bool,
    /// The reschedule IPI's line (only when cores > 1), and the NICs whose
    /// NAPI thread it is to wake.
    pub resched_line: Option<usize>,
    pub napi_wakes: Vec<usize>,
    pub stats: CrossCpuStats,
}

/// What crossed between this CPU and the others.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct CrossCpuStats {
    /// Packets this CPU's NET_RX put on another CPU's backlog.
    pub rps_packets_sent: u64,
    /// Packets other CPUs put on this CPU's backlog (or dropped there: backlog full).
    pub rps_packets_received: u64,
    pub ipis_sent: u64,
    pub ipis_received: u64,
}

impl Sim {
    /// Where RPS sends the packets of a polled device: another CPU, or
    /// None when they stay here.
    #[inline]
    pub(super) fn rps_target(&self, dev: PollDev) -> Option<usize> {
        match dev {
            PollDev::Nic(n) => self.nics[n].rps_cpu.filter(|&c| c != self.cross.cpu),
            PollDev::Backlog => None,
        }
    }

    /// The receiving CPU's part of a packet RPS steers away.
    pub(super) fn send_to_backlog(&mut self, to: usize, pkt: Packet) {
        self.cross.stats.rps_packets_sent += 1;
        self.cross.ipi_due |= 1 << to;
        self.cross.outbox.push(Remote::Backlog { to, pkt });
    }

    /// End of `net_rx_action`: an IPI to each CPU this run enqueued to.
    pub(super) fn send_rps_ipis(&mut self) {
        let mut due = std::mem::take(&mut self.cross.ipi_due);
        while due != 0 {
            let to = due.trailing_zeros() as usize;
            due &= due - 1;
            self.cross.outbox.push(Remote::Ipi { to });
        }
    }

    /// Another CPU's `enqueue_to_backlog` onto this CPU's backlog.
    pub fn take_remote_packet(&mut self, pkt: Packet) {
        self.cross.stats.rps_packets_received += 1;
        if self.backlog.len() >= self.cfg.netdev_max_backlog {
            let n = self.sources[pkt.source as usize].nic;
            self.nics[n].stats.dropped_backlog_full += 1;
            return;
        }
        self.backlog.push_back(pkt);
        if !self.backlog_on_list {
            self.cross.backlog_scheduled_remotely = true;
        }
    }

    /// Another CPU's `net_rps_send_ipi`: the IPI is sent only when its
    /// enqueue scheduled this CPU's backlog (and once until handled).
    /// Returns whether it was.
    pub fn take_remote_ipi(&mut self) -> bool {
        let Some(line) = self.cross.ipi_line else { return false };
        if !self.cross.backlog_scheduled_remotely || self.lines[line].pending {
            return false;
        }
        self.cross.stats.ipis_received += 1;
        self.raise_irq(line);
        true
    }

    /// A NIC's interrupt: here, or on the CPU it is routed to.
    pub(super) fn raise_nic_irq(&mut self, n: usize) {
        let (line, to) = (self.nics[n].line, self.nics[n].irq_cpu);
        if to == self.cross.cpu {
            self.raise_irq(line);
        } else {
            self.cross.outbox.push(Remote::Irq { to, line });
        }
    }

    /// Threaded NAPI's `napi_schedule`: wake the NIC's thread, here or on
    /// its CPU.
    pub(super) fn napi_schedule_thread(&mut self, n: usize) {
        let to = self.nics[n].threaded.expect("threaded NAPI").cpu;
        if to == self.cross.cpu {
            self.napi_wake(n);
        } else {
            self.cross.outbox.push(Remote::NapiWake { to, nic: n });
        }
    }

    /// NAPI_STATE_SCHED set and the thread woken, unless already polling.
    fn napi_wake(&mut self, n: usize) {
        let nic = &mut self.nics[n];
        if nic.napi_scheduled {
            return;
        }
        nic.napi_scheduled = true;
        if let Some(t) = nic.threaded.and_then(|th| th.thread) {
            self.wake(t);
        }
    }

    /// Another CPU's wake-up of a NAPI thread here: a reschedule IPI.
    pub fn take_remote_napi_wake(&mut self, n: usize) {
        let Some(line) = self.cross.resched_line else { return };
        self.cross.napi_wakes.push(n);
        self.cross.stats.ipis_received += 1;
        self.raise_irq(line);
    }

    /// The reschedule IPI's handler (`sched_ttwu_pending`).
    pub(super) fn remote_wakes_handled(&mut self) {
        for n in std::mem::take(&mut self.cross.napi_wakes) {
            self.napi_wake(n);
        }
    }

    /// The IPI's handler (`rps_trigger_softirq`): the backlog on the poll
    /// list, NET_RX raised; IRQ exit runs it.
    pub(super) fn rps_ipi_handled(&mut self) {
        self.cross.backlog_scheduled_remotely = false;
        if !self.backlog_on_list && !self.backlog.is_empty() {
            self.backlog_on_list = true;
            self.poll_list.push_back(PollDev::Backlog);
        }
        self.raise_softirq(NET_RX, false);
    }
}
