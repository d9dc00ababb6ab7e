//! Network load: UDP datagrams as fast as the sender goes, so the receiving
//! side's softirq (or threaded NAPI) path is kept busy. Sent only to
//! loopback or through the testbed (from a testbed host to the root
//! namespace, the machine under test), never anywhere else.

use crate::traffic::{self, Kind, Plan};
use irqlab_host::error::{Error, Result};
use irqlab_host::testbed::{Side, Testbed};
use std::net::Ipv4Addr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// The discard port: nothing listens, the kernel drops each datagram after
/// the whole receive path has run.
const DISCARD_PORT: u16 = 9;

#[derive(Debug, Clone, PartialEq)]
pub struct NetLoad {
    /// Send from this testbed host to the root namespace instead of over
    /// loopback (brings the testbed up if needed). Host b shares its link
    /// with the stimulus generator, as a file copy to the target shares
    /// the wire with the thesis's trigger.
    pub via_testbed: Option<Side>,
    pub size: usize,
    /// Sending threads, each as fast as it goes.
    pub threads: usize,
    /// Time between datagrams; small values mean "as fast as it goes".
    pub interval_ns: u64,
}

impl NetLoad {
    pub fn loopback() -> NetLoad {
        NetLoad { via_testbed: None, size: 64, threads: 1, interval_ns: 2_000 }
    }

    pub(super) fn run(&self, duration_ns: u64, stop: &AtomicBool) -> Result<super::Done> {
        let plan = |target| Plan {
            kind: Kind::Udp { port: DISCARD_PORT },
            target,
            schedule: traffic::Schedule::Periodic { interval_ns: self.interval_ns.max(1) },
            size: self.size,
            duration_ns,
        };
        if self.threads == 0 {
            return Err(Error::Invalid("the net load needs at least one sending thread".into()));
        }
        let Some(side) = self.via_testbed else {
            let sent = std::thread::scope(|s| {
                let senders: Vec<_> = (0..self.threads).map(|_| s.spawn(|| traffic::send(&plan(Ipv4Addr::LOCALHOST), stop))).collect();
                senders
                    .into_iter()
                    .map(|h| h.join().map_err(|_| Error::Failed("a net load sender panicked".into()))?.map(|c| c.sent))
                    .sum::<Result<u64>>()
            })?;
            return Ok(super::Done::new(sent, "datagrams", format!("{} thread(s), loopback to 127.0.0.1", self.threads)));
        };
        let bed = Testbed::up()?;
        let target = bed.root_addr(side);
        let inner_stop = Arc::new(AtomicBool::new(false));
        let handles =
            (0..self.threads).map(|_| traffic::send_from(&bed, side, plan(target), inner_stop.clone())).collect::<Result<Vec<_>>>()?;
        // Forward our stop flag to the senders inside the namespace.
        while !handles.iter().all(|h| h.is_finished()) {
            if stop.load(Ordering::Relaxed) {
                inner_stop.store(true, Ordering::Relaxed);
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let mut sent = 0;
        for h in handles {
            sent += h.join().map_err(|_| Error::Failed("a net load sender panicked".into()))??.sent;
        }
        Ok(super::Done::new(sent, "datagrams", format!("{} thread(s) from {} to {target}", self.threads, side.netns())))
    }
}
