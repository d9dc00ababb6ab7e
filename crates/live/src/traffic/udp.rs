//! Paced UDP sender and a counting sink.

use super::pacing::{now_ns, wait_until, Pacer};
use super::{Counters, Plan};
use crate::error::{Error, Result};
use std::net::{SocketAddrV4, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};

pub fn send(plan: &Plan, port: u16, stop: &AtomicBool) -> Result<Counters> {
    let socket = UdpSocket::bind("0.0.0.0:0").map_err(|e| Error::io("binding a UDP socket", e))?;
    socket.set_nonblocking(true).map_err(|e| Error::io("setting the UDP socket non-blocking", e))?;
    let target = SocketAddrV4::new(plan.target, port);
    let payload = vec![0x5a_u8; plan.size];
    let mut reply = vec![0u8; 65_536];
    let start = now_ns();
    let end = start + plan.duration_ns;
    let mut pacer = Pacer::new(plan.schedule, start);
    let mut c = Counters::default();
    loop {
        let at = pacer.next_send_ns();
        if at >= end || stop.load(Ordering::Relaxed) {
            break;
        }
        wait_until(at);
        if now_ns().saturating_sub(at) > interval_of(plan) {
            c.late += 1;
        }
        match socket.send_to(&payload, target) {
            Ok(_) => c.sent += 1,
            Err(_) => c.failed += 1,
        }
        while socket.recv_from(&mut reply).is_ok() {
            c.replies += 1;
        }
    }
    c.complete = !stop.load(Ordering::Relaxed);
    c.elapsed_ns = now_ns() - start;
    Ok(c)
}

pub(super) fn interval_of(plan: &Plan) -> u64 {
    match plan.schedule {
        super::Schedule::Periodic { interval_ns } | super::Schedule::Mmpp { interval_ns, .. } => interval_ns.max(1),
    }
}

/// Counts datagrams arriving at `bind` until `stop` is set; with `echo`
/// each one is sent back (so the sender counts replies). Polls every 10 ms
/// for the stop flag.
pub fn udp_sink(bind: SocketAddrV4, echo: bool, stop: &AtomicBool) -> Result<u64> {
    let socket = UdpSocket::bind(bind).map_err(|e| Error::io(format!("binding UDP {bind}"), e))?;
    socket
        .set_read_timeout(Some(std::time::Duration::from_millis(10)))
        .map_err(|e| Error::io("setting a read timeout", e))?;
    let mut buf = vec![0u8; 65_536];
    let mut received = 0u64;
    while !stop.load(Ordering::Relaxed) {
        if let Ok((n, from)) = socket.recv_from(&mut buf) {
            received += 1;
            if echo {
                let _ = socket.send_to(&buf[..n], from);
            }
        }
    }
    Ok(received)
}
