//! The network side: packets, the NIC (rx ring, per-packet IRQ or NAPI,
//! optional interrupt coalescing), the per-CPU backlog of non-NAPI
//! receive, UDP sockets with a receive-buffer limit, and traffic sources
//! limited by their link's rate.

use crate::engine::SourceRng;
use crate::task::TaskId;
use irqlab_analysis::Nanos;
use rand::Rng;
use serde::Serialize;
use std::collections::VecDeque;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Proto {
    /// ICMP echo request; with `reply` the echo reply is built and
    /// transmitted inside the receive softirq.
    IcmpEcho { reply: bool },
    /// UDP datagram to a socket.
    Udp { socket: u16 },
}

#[derive(Debug, Clone, Copy)]
pub struct Packet {
    pub proto: Proto,
    pub size: u32,
    pub source: u16,
    pub arrival: Nanos,
}

/// Softirq costs of receive processing, per packet and protocol.
#[derive(Debug, Clone, Copy, Default)]
pub struct NicCosts {
    /// Driver ISR (ack, NAPI schedule) per interrupt.
    pub irq: Nanos,
    /// Extra ISR work per packet when not using NAPI (netif_rx copy).
    pub irq_per_packet: Nanos,
    /// Full ICMP echo handling in softirq including the reply's transmit.
    pub icmp_echo: Nanos,
    /// ICMP echo handling when no reply is sent.
    pub icmp_no_reply: Nanos,
    /// UDP receive up to the socket queue.
    pub udp: Nanos,
    /// RPS: the receiving CPU's per-packet share when the packet goes to
    /// another CPU's backlog (driver poll, flow hash, enqueue_to_backlog).
    pub rps_enqueue: Nanos,
}

/// Threaded NAPI (`/sys/class/net/DEV/threaded` = 1).
#[derive(Debug, Clone, Copy)]
pub struct ThreadedNapi {
    pub cpu: usize,
    pub thread: Option<crate::task::TaskId>,
    /// Packets left in the current poll (`weight` at its start).
    pub quota: u32,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct NicStats {
    pub packets_offered: u64,
    /// Handed to the protocol: ICMP handled, or UDP queued on its socket.
    pub packets_received: u64,
    pub icmp_handled: u64,
    pub dropped_ring_full: u64,
    pub dropped_backlog_full: u64,
    pub dropped_socket_full: u64,
    /// Echo replies handed to the transmit side (or, without `[nic.tx]`,
    /// counted as sent).
    pub replies_sent: u64,
    /// Echo replies the tx queue dropped (full).
    pub replies_dropped_tx_full: u64,
    pub hardirqs: u64,
    /// NIC interrupts taken while its NAPI instance was scheduled: NAPI
    /// keeps the line masked, so this stays 0 when the model is right.
    pub hardirqs_while_polling: u64,
    pub napi_polls_completed: u64,
    pub softirq_ns: Nanos,
    pub hardirq_ns: Nanos,
}

pub struct Nic {
    pub name: String,
    pub ring: VecDeque<Packet>,
    pub ring_size: usize,
    pub napi: bool,
    pub weight: u32,
    pub line: usize,
    /// NAPI_STATE_SCHED: on the poll list, device interrupt disabled.
    pub napi_scheduled: bool,
    /// RPS: the CPU whose backlog takes its packets.
    pub rps_cpu: Option<usize>,
    /// The CPU its interrupt goes to (a packet arriving on another CPU's
    /// copy of the NIC raises it there).
    pub irq_cpu: usize,
    /// Threaded NAPI: the CPU of its kernel thread, and the thread on
    /// that CPU's copy.
    pub threaded: Option<ThreadedNapi>,
    pub costs: NicCosts,
    /// Interrupt coalescing: raise after this many frames ...
    pub coalesce_frames: u32,
    /// ... or this long after the first unsignalled frame (0 = off).
    pub coalesce_ns: Nanos,
    pub unsignalled: u32,
    pub coalesce_gen: u32,
    pub coalesce_armed: bool,
    /// When the last frame finished arriving on the wire.
    pub link_free_at: Nanos,
    /// The transmit side ([`crate::net_tx::NicTx`] device), if modelled.
    pub tx_dev: Option<usize>,
    pub stats: NicStats,
}

impl Nic {
    pub fn in_flight(&self) -> u64 {
        self.ring.len() as u64
    }
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct SocketStats {
    pub delivered: u64,
    pub dropped_full: u64,
    pub queued_max_bytes: u64,
}

pub struct Socket {
    pub name: String,
    pub owner: Option<TaskId>,
    pub queue: VecDeque<Packet>,
    pub bytes: u64,
    pub rcvbuf: u64,
    /// A task blocked in receive on this socket.
    pub waiter: Option<TaskId>,
    pub stats: SocketStats,
}

impl Socket {
    pub fn new(name: impl Into<String>, rcvbuf: u64) -> Self {
        Socket { name: name.into(), owner: None, queue: VecDeque::new(), bytes: 0, rcvbuf, waiter: None, stats: SocketStats::default() }
    }

    /// Queues a datagram unless the receive buffer is full (counted drop).
    pub fn enqueue(&mut self, p: Packet) -> bool {
        if self.bytes + p.size as u64 > self.rcvbuf {
            self.stats.dropped_full += 1;
            return false;
        }
        self.bytes += p.size as u64;
        self.stats.queued_max_bytes = self.stats.queued_max_bytes.max(self.bytes);
        self.queue.push_back(p);
        true
    }

    /// Non-blocking receive (MSG_DONTWAIT).
    pub fn try_recv(&mut self) -> Option<Packet> {
        let p = self.queue.pop_front()?;
        self.bytes -= p.size as u64;
        self.stats.delivered += 1;
        Some(p)
    }
}

/// How a source spaces its packets.
#[derive(Debug, Clone, Copy)]
pub enum Arrivals {
    Constant {
        interval: Nanos,
    },
    Poisson {
        mean: Nanos,
    },
    /// Two-state MMPP as the process-aware paper's bursty client:
    /// geometric bursts of mean `burst` packets spaced exponentially with
    /// mean `spacing`, exponential gaps of mean `gap` between bursts.
    Mmpp2 {
        burst: f64,
        spacing: Nanos,
        gap: Nanos,
    },
}

pub struct Source {
    pub name: String,
    pub nic: usize,
    pub arrivals: Arrivals,
    pub proto: Proto,
    pub size: u32,
    /// Time the frame occupies the wire (size / link rate).
    pub wire_ns: Nanos,
    pub start: Nanos,
    pub stop: Nanos,
    pub rng: SourceRng,
    pub sent: u64,
}

fn exp_draw(rng: &mut SourceRng, mean: f64) -> f64 {
    let u: f64 = rng.gen::<f64>();
    -(1.0 - u).ln() * mean
}

impl Source {
    /// The gap to this source's next packet (never below its wire time).
    pub fn next_gap(&mut self) -> Nanos {
        let g = match self.arrivals {
            Arrivals::Constant { interval } => interval,
            Arrivals::Poisson { mean } => exp_draw(&mut self.rng, mean as f64).round() as Nanos,
            Arrivals::Mmpp2 { burst, spacing, gap } => {
                // After each packet the burst ends with probability 1/burst.
                if self.rng.gen::<f64>() < 1.0 / burst.max(1.0) {
                    exp_draw(&mut self.rng, gap as f64).round() as Nanos
                } else {
                    exp_draw(&mut self.rng, spacing as f64).round() as Nanos
                }
            }
        };
        g.max(self.wire_ns).max(1)
    }
}

/// Wire time of a frame of `size` bytes (plus 24 bytes of Ethernet
/// preamble, FCS and inter-frame gap) on a link of `bits_per_s`.
pub fn wire_ns(size: u32, bits_per_s: u64) -> Nanos {
    if bits_per_s == 0 {
        return 0;
    }
    let bits = (size as u128 + 24) * 8;
    ((bits * 1_000_000_000).div_ceil(bits_per_s as u128)) as Nanos
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_time_of_minimum_frame_on_gige() {
        // 64-byte frame + 24 bytes overhead = 704 bits = 704 ns at 1 Gb/s.
        assert_eq!(wire_ns(64, 1_000_000_000), 704);
    }

    #[test]
    fn socket_drops_when_buffer_full() {
        let mut s = Socket::new("s", 1000);
        let p = Packet { proto: Proto::Udp { socket: 0 }, size: 600, source: 0, arrival: 0 };
        assert!(s.enqueue(p));
        assert!(!s.enqueue(p));
        assert_eq!(s.stats.dropped_full, 1);
        assert!(s.try_recv().is_some());
        assert_eq!(s.bytes, 0);
    }
}
