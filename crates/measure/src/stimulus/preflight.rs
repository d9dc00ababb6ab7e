//! Before a run, one probe per path: a wrong address, a target that drops
//! ICMP, or a missing responder is reported as bad input (exit 2) instead of
//! a run in which every stimulus is lost.

use super::socket::{PathKind, StimulusSocket};
use super::wire::Payload;
use irqlab_host::error::{Error, Result};
use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};
use std::time::{Duration, Instant};

// Five probes over 2 s: a loaded target (or a VM stalled for a second)
// may drop a few, and calling it "down" then would be a false bad-input.
const TRIES: u32 = 5;
const WAIT: Duration = Duration::from_millis(400);

fn unreachable(target: Ipv4Addr, e: &std::io::Error) -> Option<Error> {
    matches!(e.raw_os_error(), Some(libc::ENETUNREACH) | Some(libc::EHOSTUNREACH) | Some(libc::EADDRNOTAVAIL))
        .then(|| Error::Invalid(format!("target {target} is unreachable: {e}")))
}

pub fn check(sock: &StimulusSocket, target: Ipv4Addr, port: u16, probe_run_id: u32) -> Result<()> {
    match sock.kind() {
        PathKind::Icmp => check_icmp(sock, target, probe_run_id),
        PathKind::Udp => check_udp(target, port, probe_run_id),
    }
}

fn check_icmp(sock: &StimulusSocket, target: Ipv4Addr, run_id: u32) -> Result<()> {
    let mut buf = vec![0u8; 2048];
    for attempt in 0..TRIES {
        let probe = Payload { run_id, seq: attempt as u64, user_tx_ns: 0 };
        if let Err(e) = sock.send(&probe) {
            return Err(unreachable(target, &e).unwrap_or_else(|| Error::io(format!("sending an ICMP echo to {target}"), e)));
        }
        let deadline = Instant::now() + WAIT;
        while Instant::now() < deadline {
            let mut pfd = libc::pollfd { fd: sock.raw_fd(), events: libc::POLLIN, revents: 0 };
            // SAFETY: one valid pollfd.
            unsafe { libc::poll(&mut pfd, 1, 20) };
            while let Ok(Some(_)) = sock.recv_tx_stamp(&mut buf) {}
            while let Some((payload, _)) = sock.recv_reply(&mut buf).map_err(|e| Error::io("receiving an ICMP echo reply", e))? {
                if payload.is_some_and(|p| p.run_id == run_id) {
                    return Ok(());
                }
            }
        }
    }
    Err(Error::Invalid(format!(
        "target {target} does not answer ICMP echo (no reply within {} ms): wrong address, host down, or it ignores pings (net.ipv4.icmp_echo_ignore_all)",
        (WAIT * TRIES).as_millis()
    )))
}

fn check_udp(target: Ipv4Addr, port: u16, run_id: u32) -> Result<()> {
    let io = |e| Error::io("opening the UDP probe socket", e);
    let probe = UdpSocket::bind((Ipv4Addr::UNSPECIFIED, 0)).map_err(io)?;
    probe.connect(SocketAddrV4::new(target, port)).map_err(|e| unreachable(target, &e).unwrap_or_else(|| io(e)))?;
    probe.set_read_timeout(Some(WAIT)).map_err(io)?;
    let mut buf = [0u8; 64];
    for attempt in 0..TRIES {
        let payload = Payload { run_id, seq: attempt as u64, user_tx_ns: 0 }.encode();
        if let Err(e) = probe.send(&payload) {
            if let Some(err) = unreachable(target, &e) {
                return Err(err);
            }
        }
        match probe.recv(&mut buf) {
            Ok(n) if Payload::decode(&buf[..n]).is_some_and(|p| p.run_id == run_id) => return Ok(()),
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
                return Err(Error::Invalid(format!(
                    "nothing answers on UDP {target}:{port} (port unreachable): start `irqlab stimulus respond --bind {target}:{port}` on the target"
                )))
            }
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {}
            Err(e) => return Err(unreachable(target, &e).unwrap_or_else(|| Error::io(format!("probing {target}:{port}"), e))),
        }
    }
    Err(Error::Invalid(format!(
        "no reply from a responder at UDP {target}:{port} within {} ms: start `irqlab stimulus respond` on the target, or check the address and port",
        (WAIT * TRIES).as_millis()
    )))
}
