//! Traffic generators for the testbed: paced UDP (constant rate, heartbeat,
//! MMPP bursts) and a raw-ICMP ping flood, each with sent / failed / reply
//! counters, plus a UDP sink to count what arrives.
//!
//! Senders run on the calling thread; to send from a testbed host run them
//! through [`irqlab_host::testbed::Testbed::spawn_in`] or use [`send_from`].
//! Targets are checked against the testbed's own addresses and loopback
//! ([`irqlab_host::testbed::Testbed::allows_target`]); nothing else is reachable
//! through this module.
//!
//! ```no_run
//! use irqlab_host::testbed::{Side, Testbed};
//! use irqlab_measure::traffic::{self, Kind, Plan, Schedule};
//! use std::sync::{atomic::AtomicBool, Arc};
//! let bed = Testbed::up()?;
//! let plan = Plan {
//!     kind: Kind::Udp { port: 9000 },
//!     target: bed.root_addr(Side::B),
//!     schedule: Schedule::Periodic { interval_ns: 20_000 },
//!     size: 64,
//!     duration_ns: 2_000_000_000,
//! };
//! let stop = Arc::new(AtomicBool::new(false));
//! let counters = traffic::send_from(&bed, Side::B, plan, stop)?.join().unwrap()?;
//! println!("sent {} failed {}", counters.sent, counters.failed);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod icmp;
pub mod pacing;
mod udp;

pub use icmp::{echo_request, internet_checksum};
pub use pacing::{Pacer, Schedule};
pub use udp::{udp_sink, udp_sink_counting};

use irqlab_host::error::{Error, Result};
use irqlab_host::testbed::{NsThread, Side, Testbed};
use pacing::{now_ns, wait_until};
use std::net::Ipv4Addr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// What is sent.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Kind {
    /// UDP datagrams to `port`; datagrams coming back on the socket count
    /// as replies.
    Udp { port: u16 },
    /// ICMP echo requests built here (raw socket, CAP_NET_RAW); echo
    /// replies with our identifier count as replies.
    PingFlood,
}

/// One sender's job.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Plan {
    pub kind: Kind,
    pub target: Ipv4Addr,
    pub schedule: Schedule,
    /// Payload bytes (UDP payload / ICMP echo data).
    pub size: usize,
    pub duration_ns: u64,
}

/// What a sender did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct Counters {
    pub sent: u64,
    /// Sends the kernel refused (full queue, unreachable, ...).
    pub failed: u64,
    pub replies: u64,
    pub elapsed_ns: u64,
    /// Sends that started later than their scheduled time by more than
    /// one interval (the generator could not keep up).
    pub late: u64,
    /// Sends the schedule called for within the duration.
    pub scheduled: u64,
    /// How far the sender was behind its schedule when the duration ended
    /// (0 when it kept up): the time the unsent part of the schedule needed.
    pub behind_ns: u64,
    /// False when stopped early by the stop flag, or when the sender fell
    /// short of its schedule by more than one interval.
    pub complete: bool,
}

impl Counters {
    /// Sends per second actually reached.
    pub fn rate_per_s(&self) -> f64 {
        if self.elapsed_ns == 0 {
            0.0
        } else {
            self.sent as f64 * 1e9 / self.elapsed_ns as f64
        }
    }
}

/// Runs `plan` on the calling thread (in whatever namespace it is in).
pub fn send(plan: &Plan, stop: &AtomicBool) -> Result<Counters> {
    if plan.size > 65_000 {
        return Err(Error::Invalid(format!("payload size {} is too large for one datagram", plan.size)));
    }
    match plan.kind {
        Kind::Udp { port } => udp::send(plan, port, stop),
        Kind::PingFlood => icmp::flood(plan, stop),
    }
}

/// One generator as [`run_paced`] drives it (UDP sender, ping flood).
trait PacedSender {
    /// Sends one packet at its scheduled time, counting it (and any replies
    /// already back) in `c`.
    fn send_one(&mut self, c: &mut Counters);
    /// Runs once after the last send, inside the measured time (the ping
    /// flood collects the replies still in flight); nothing by default.
    fn settle(&mut self, _c: &mut Counters) {}
}

/// The sending loop every generator shares: `sender` sends at each time of
/// `plan`'s schedule until the plan's duration is over or `stop` is set;
/// sends that start more than one interval late are counted as late.
///
/// The clock ends the run, not the schedule: a sender that cannot reach
/// the rate stops at the duration (within one send) and reports how far
/// behind it was, instead of running on until it has sent the schedule's
/// count (a 12 s run at 400k/s used to take 18.4 s).
fn run_paced(plan: &Plan, stop: &AtomicBool, sender: &mut impl PacedSender) -> Counters {
    let start = now_ns();
    let end = start + plan.duration_ns;
    let mut pacer = Pacer::new(plan.schedule, start);
    let mut c = Counters::default();
    let mut at = pacer.next_send_ns();
    while at < end && now_ns() < end && !stop.load(Ordering::Relaxed) {
        wait_until(at);
        if now_ns().saturating_sub(at) > interval_of(plan) {
            c.late += 1;
        }
        sender.send_one(&mut c);
        c.scheduled += 1;
        at = pacer.next_send_ns();
    }
    sender.settle(&mut c);
    c.elapsed_ns = now_ns() - start;
    let stopped = stop.load(Ordering::Relaxed);
    if !stopped && at < end {
        // Ended by the clock with sends still due: count them (after the
        // clock is read: millions of schedule steps take milliseconds).
        c.behind_ns = end - at;
        c.scheduled += match plan.schedule {
            Schedule::Periodic { interval_ns } => (end - at).div_ceil(interval_ns.max(1)),
            Schedule::Mmpp { .. } => 1 + std::iter::from_fn(|| Some(pacer.next_send_ns())).take_while(|&t| t < end).count() as u64,
        };
    }
    c.complete = !stopped && c.behind_ns <= interval_of(plan);
    c
}

fn interval_of(plan: &Plan) -> u64 {
    match plan.schedule {
        Schedule::Periodic { interval_ns } | Schedule::Mmpp { interval_ns, .. } => interval_ns.max(1),
    }
}

/// Runs `plan` on a new thread inside testbed host `from`, after checking
/// the target is one of the testbed's addresses or loopback.
pub fn send_from(bed: &Testbed, from: Side, plan: Plan, stop: Arc<AtomicBool>) -> Result<NsThread<Result<Counters>>> {
    if !bed.allows_target(plan.target) {
        return Err(Error::Invalid(format!(
            "target {} is outside the testbed ({}/24) and loopback; irqlab only sends traffic to its own namespaces",
            plan.target,
            bed.subnet()
        )));
    }
    if plan.kind == Kind::PingFlood {
        irqlab_host::privilege::require(&[irqlab_host::privilege::Capability::NetRaw], "open a raw ICMP socket for the ping flood")?;
    }
    bed.spawn_in(from, move || send(&plan, &stop))
}
