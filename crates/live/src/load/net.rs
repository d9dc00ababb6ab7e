//! Network load: UDP datagrams as fast as the sender goes, so the receiving
//! side's softirq (or threaded NAPI) path is kept busy. Sent only to
//! loopback or through the testbed (from host `irqlab-a` to the root
//! namespace, the machine under test), never anywhere else.

use crate::error::{Error, Result};
use crate::testbed::{Side, Testbed};
use crate::traffic::{self, Kind, Plan};
use std::net::Ipv4Addr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// The discard port: nothing listens, the kernel drops each datagram after
/// the whole receive path has run.
const DISCARD_PORT: u16 = 9;

#[derive(Debug, Clone, PartialEq)]
pub struct NetLoad {
    /// Send from testbed host `irqlab-a` to the root namespace instead of
    /// over loopback (brings the testbed up if needed).
    pub via_testbed: bool,
    pub size: usize,
    /// Time between datagrams; small values mean "as fast as it goes".
    pub interval_ns: u64,
}

impl NetLoad {
    pub fn loopback() -> NetLoad {
        NetLoad { via_testbed: false, size: 64, interval_ns: 2_000 }
    }

    pub(super) fn run(&self, duration_ns: u64, stop: &AtomicBool) -> Result<(u64, &'static str, String)> {
        let plan = |target| Plan {
            kind: Kind::Udp { port: DISCARD_PORT },
            target,
            schedule: traffic::Schedule::Periodic { interval_ns: self.interval_ns.max(1) },
            size: self.size,
            duration_ns,
        };
        if !self.via_testbed {
            let c = traffic::send(&plan(Ipv4Addr::LOCALHOST), stop)?;
            return Ok((c.sent, "datagrams", "loopback to 127.0.0.1".into()));
        }
        let bed = Testbed::up()?;
        let target = bed.root_addr(Side::A);
        let inner_stop = Arc::new(AtomicBool::new(false));
        let handle = traffic::send_from(&bed, Side::A, plan(target), inner_stop.clone())?;
        // Forward our stop flag to the sender inside the namespace.
        while !handle.is_finished() {
            if stop.load(Ordering::Relaxed) {
                inner_stop.store(true, Ordering::Relaxed);
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let c = handle.join().map_err(|_| Error::Failed("the net load sender panicked".into()))??;
        Ok((c.sent, "datagrams", format!("from irqlab-a to {target}")))
    }
}
