//! Paced UDP sender and a counting sink.

use super::{run_paced, Counters, PacedSender, Plan};
use irqlab_host::error::{Error, Result};
use std::net::{SocketAddrV4, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

pub fn send(plan: &Plan, port: u16, stop: &AtomicBool) -> Result<Counters> {
    let socket = UdpSocket::bind("0.0.0.0:0").map_err(|e| Error::io("binding a UDP socket", e))?;
    socket.set_nonblocking(true).map_err(|e| Error::io("setting the UDP socket non-blocking", e))?;
    let mut sender =
        UdpSender { socket, target: SocketAddrV4::new(plan.target, port), payload: vec![0x5a_u8; plan.size], reply: vec![0u8; 65_536] };
    Ok(run_paced(plan, stop, &mut sender))
}

struct UdpSender {
    socket: UdpSocket,
    target: SocketAddrV4,
    payload: Vec<u8>,
    reply: Vec<u8>,
}

impl PacedSender for UdpSender {
    fn send_one(&mut self, c: &mut Counters) {
        match self.socket.send_to(&self.payload, self.target) {
            Ok(_) => c.sent += 1,
            Err(_) => c.failed += 1,
        }
        while self.socket.recv_from(&mut self.reply).is_ok() {
            c.replies += 1;
        }
    }
}

/// Counts datagrams arriving at `bind` until `stop` is set; with `echo`
/// each one is sent back (so the sender counts replies). Polls every 10 ms
/// for the stop flag.
pub fn udp_sink(bind: SocketAddrV4, echo: bool, stop: &AtomicBool) -> Result<u64> {
    let received = AtomicU64::new(0);
    udp_sink_counting(bind, echo, &received, stop)?;
    Ok(received.load(Ordering::Relaxed))
}

/// [`udp_sink`] counting into `received` as datagrams arrive, so another
/// thread can read the count over an interval.
pub fn udp_sink_counting(bind: SocketAddrV4, echo: bool, received: &AtomicU64, stop: &AtomicBool) -> Result<()> {
    let socket = UdpSocket::bind(bind).map_err(|e| Error::io(format!("binding UDP {bind}"), e))?;
    socket.set_read_timeout(Some(std::time::Duration::from_millis(10))).map_err(|e| Error::io("setting a read timeout", e))?;
    let mut buf = vec![0u8; 65_536];
    while !stop.load(Ordering::Relaxed) {
        if let Ok((n, from)) = socket.recv_from(&mut buf) {
            received.fetch_add(1, Ordering::Relaxed);
            if echo {
                let _ = socket.send_to(&buf[..n], from);
            }
        }
    }
    Ok(())
}
