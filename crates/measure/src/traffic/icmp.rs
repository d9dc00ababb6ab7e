//! Ping flood with ICMP echo requests built here: a raw socket, no
//! external `ping` (whose flood mode waits for replies or caps the rate).

use super::pacing::now_ns;
use super::{run_paced, Counters, PacedSender, Plan};
use irqlab_host::error::{Error, Result};
use std::sync::atomic::AtomicBool;

const ECHO_REQUEST: u8 = 8;
const ECHO_REPLY: u8 = 0;

/// RFC 1071 ones'-complement sum of 16-bit words.
pub fn internet_checksum(data: &[u8]) -> u16 {
    let mut sum: u32 = 0;
    let mut chunks = data.chunks_exact(2);
    for w in &mut chunks {
        sum += u16::from_be_bytes([w[0], w[1]]) as u32;
    }
    if let [last] = chunks.remainder() {
        sum += (*last as u32) << 8;
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// An ICMP echo request (header + `payload_len` bytes) into `out`.
pub fn echo_request(id: u16, seq: u16, payload_len: usize, out: &mut Vec<u8>) {
    out.clear();
    out.extend_from_slice(&[ECHO_REQUEST, 0, 0, 0]);
    out.extend_from_slice(&id.to_be_bytes());
    out.extend_from_slice(&seq.to_be_bytes());
    out.extend((0..payload_len).map(|i| i as u8));
    let sum = internet_checksum(out);
    out[2..4].copy_from_slice(&sum.to_be_bytes());
}

struct RawSocket(libc::c_int);

impl Drop for RawSocket {
    fn drop(&mut self) {
        // SAFETY: closing the descriptor this wrapper owns.
        unsafe { libc::close(self.0) };
    }
}

pub fn flood(plan: &Plan, stop: &AtomicBool) -> Result<Counters> {
    // SAFETY: plain socket creation; the descriptor is owned by RawSocket.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_RAW | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC, libc::IPPROTO_ICMP) };
    if fd < 0 {
        let err = std::io::Error::last_os_error();
        if err.raw_os_error() == Some(libc::EPERM) {
            return Err(Error::MissingPrivilege { capability: "CAP_NET_RAW", purpose: "open a raw ICMP socket".into() });
        }
        return Err(Error::io("opening a raw ICMP socket", err));
    }
    let dest = libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: 0,
        sin_addr: libc::in_addr { s_addr: u32::from_ne_bytes(plan.target.octets()) },
        sin_zero: [0; 8],
    };
    let mut flood = EchoFlood {
        sock: RawSocket(fd),
        dest,
        id: (std::process::id() as u16) ^ 0x1a5b,
        seq: 0,
        size: plan.size,
        packet: Vec::with_capacity(plan.size + 8),
        reply: vec![0u8; 65_536],
    };
    Ok(run_paced(plan, stop, &mut flood))
}

struct EchoFlood {
    sock: RawSocket,
    dest: libc::sockaddr_in,
    /// Echo identifier: replies carrying it are ours.
    id: u16,
    seq: u16,
    /// Echo data bytes.
    size: usize,
    packet: Vec<u8>,
    reply: Vec<u8>,
}

impl PacedSender for EchoFlood {
    fn send_one(&mut self, c: &mut Counters) {
        echo_request(self.id, self.seq, self.size, &mut self.packet);
        self.seq = self.seq.wrapping_add(1);
        // SAFETY: packet and dest are valid for the lengths passed.
        let n = unsafe {
            libc::sendto(
                self.sock.0,
                self.packet.as_ptr().cast(),
                self.packet.len(),
                0,
                (&self.dest as *const libc::sockaddr_in).cast(),
                std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
            )
        };
        if n < 0 {
            c.failed += 1;
        } else {
            c.sent += 1;
        }
        c.replies += drain_replies(&self.sock, self.id, &mut self.reply);
    }

    fn settle(&mut self, c: &mut Counters) {
        // Replies still in flight for the last requests.
        let settle = now_ns() + 20_000_000;
        while now_ns() < settle {
            c.replies += drain_replies(&self.sock, self.id, &mut self.reply);
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }
}

/// Reads every queued packet; counts echo replies carrying our id. A raw
/// ICMP socket receives the IP header too.
fn drain_replies(sock: &RawSocket, id: u16, buf: &mut [u8]) -> u64 {
    let mut replies = 0;
    loop {
        // SAFETY: buf is valid for its length.
        let n = unsafe { libc::recv(sock.0, buf.as_mut_ptr().cast(), buf.len(), 0) };
        if n <= 0 {
            return replies;
        }
        let packet = &buf[..n as usize];
        let ihl = (packet[0] & 0x0f) as usize * 4;
        if let Some(icmp) = packet.get(ihl..ihl + 8) {
            if icmp[0] == ECHO_REPLY && u16::from_be_bytes([icmp[4], icmp[5]]) == id {
                replies += 1;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checksum_of_rfc1071_example() {
        // RFC 1071 §3 example words 0001 f203 f4f5 f6f7 sum to ddf2 → checksum 220d.
        assert_eq!(internet_checksum(&[0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7]), 0x220d);
    }

    #[test]
    fn echo_request_verifies_to_zero() {
        let mut p = Vec::new();
        echo_request(0x1234, 7, 13, &mut p);
        assert_eq!(p.len(), 21);
        assert_eq!(p[0], 8);
        assert_eq!(&p[4..8], &[0x12, 0x34, 0, 7]);
        // A correct checksum makes the whole message sum to 0 (complement).
        assert_eq!(internet_checksum(&p), 0);
    }
}
