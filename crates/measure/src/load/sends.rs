//! Sends from this namespace to a testbed host, through its link's egress:
//! the idletime experiments' network processes (dissertation §6.2: UDP or
//! TCP senders of a foreground intensity, and a greedy background). At
//! intensity i a sender sends back to back (blocking, so the link's queue
//! and the socket's buffer pace it) for i × 100 ms of every 100 ms, then
//! sleeps; without one it sends all the time. Only to the testbed's own
//! addresses (the host's side of link a or b).

use irqlab_host::error::{Error, Result};
use irqlab_host::testbed::{Side, Testbed};
use std::io::Write;
use std::net::{SocketAddrV4, TcpStream, UdpSocket};
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::AtomicBool;
use std::time::Duration;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    Udp,
    Tcp,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Sends {
    /// The testbed host sent to (through link `to`'s root-side device).
    pub to: Side,
    pub port: u16,
    pub protocol: Protocol,
    /// Bytes per datagram (UDP) or per write (TCP).
    pub size: usize,
    /// The dissertation's foreground intensity (§6): a fraction in (0, 1].
    pub intensity: Option<f64>,
    /// SO_SNDBUF (None: the kernel's default): how much a sender may have
    /// queued below it, in its socket and the device's queue.
    pub sndbuf: Option<usize>,
}

/// The largest UDP payload in one 1500-byte Ethernet frame.
pub const UDP_PAYLOAD_MAX: usize = 1472;

impl Sends {
    /// Checks the flags; an error names the flag (exit 2).
    pub fn check(&self) -> Result<()> {
        super::Intensity::check(self.intensity)?;
        let max = match self.protocol {
            Protocol::Udp => UDP_PAYLOAD_MAX,
            Protocol::Tcp => 1 << 20,
        };
        if self.size == 0 || self.size > max {
            return Err(Error::Invalid(format!("--size {}: 1 to {max} bytes", self.size)));
        }
        if let Some(b) = self.sndbuf.filter(|&b| !(4096..=64 << 20).contains(&b)) {
            return Err(Error::Invalid(format!("--sndbuf {b}: 4 KiB to 64 MiB")));
        }
        if self.port == 0 {
            return Err(Error::Invalid("--port 0: name the port the host listens on".into()));
        }
        Ok(())
    }

    /// Sends until `duration_ns` or `stop`: the bytes sent, a line saying
    /// what was sent, and for TCP the mean smoothed round-trip time at the
    /// bursts' ends (without an intensity: at the end).
    pub(super) fn run(&self, duration_ns: u64, stop: &AtomicBool) -> Result<super::Done> {
        self.check()?;
        let bed = Testbed::up()?;
        let target = SocketAddrV4::new(bed.host_addr(self.to), self.port);
        let (mut send, fd) = self.sender(target)?;
        let buf = vec![0x5au8; self.size];
        let deadline = super::deadline(duration_ns);
        let start = std::time::Instant::now();
        let pacing = self.intensity.map(super::Intensity::starting_now);
        let mut bytes = 0u64;
        // Bytes in the socket each time a burst ended (SIOCOUTQ): for TCP
        // the data unsent or unacknowledged, which the link still carries
        // after the sender sleeps; for UDP the memory of the datagrams the
        // device has not yet sent.
        let mut left: Vec<u64> = Vec::new();
        // TCP's smoothed round-trip time (TCP_INFO) at each burst's end:
        // the link's queue and the receiver's ACKs as the sender sees them,
        // the idletime dissertation's landmark for a TCP foreground.
        let tcp = self.protocol == Protocol::Tcp;
        let mut rtts_us: Vec<u32> = Vec::new();
        while super::running(deadline, stop) {
            match send(&buf) {
                Ok(n) => bytes += n as u64,
                // Ctrl-C, or the host's queue full for a moment (no receiver yet).
                Err(e) if matches!(e.kind(), std::io::ErrorKind::Interrupted | std::io::ErrorKind::ConnectionRefused) => {}
                Err(e) => return Err(Error::io(format!("sending to {target}"), e)),
            }
            if let Some(p) = &pacing {
                p.pace_then(|| {
                    left.extend(outq(fd));
                    rtts_us.extend(tcp.then(|| rtt_us(fd)).flatten());
                });
            }
        }
        if tcp && rtts_us.is_empty() {
            rtts_us.extend(rtt_us(fd));
        }
        let rtt = (!rtts_us.is_empty()).then(|| rtts_us.iter().map(|&r| f64::from(r)).sum::<f64>() / rtts_us.len() as f64);
        let secs = start.elapsed().as_secs_f64().max(1e-9);
        let at_burst_end = match left.len() {
            0 => String::new(),
            n => format!(
                "; {:.1} KB left in the socket at a burst's end (mean of {n}; {:.1}-{:.1})",
                left.iter().sum::<u64>() as f64 / n as f64 / 1e3,
                left.iter().min().copied().unwrap_or(0) as f64 / 1e3,
                left.iter().max().copied().unwrap_or(0) as f64 / 1e3
            ),
        };
        let rtt_text = rtt.map_or(String::new(), |r| format!("; smoothed RTT {:.2} ms (mean of {})", r / 1e3, rtts_us.len()));
        let detail = format!(
            "{} to {target} through {}{}, {:.2} Mb/s sent{at_burst_end}{rtt_text}",
            match self.protocol {
                Protocol::Udp => format!("{}-byte UDP datagrams", self.size),
                Protocol::Tcp => format!("TCP writes of {} bytes", self.size),
            },
            self.to.netns(),
            self.intensity.map_or(String::new(), |i| format!(" at intensity {:.0}%", i * 100.0)),
            bytes as f64 * 8.0 / secs / 1e6
        );
        Ok(super::Done { tcp_rtt_us: rtt, ..super::Done::new(bytes, "bytes", detail) })
    }

    /// A blocking send of one buffer to `target`, and the socket's descriptor
    /// (valid while the sender lives).
    #[allow(clippy::type_complexity)]
    fn sender(&self, target: SocketAddrV4) -> Result<(Box<dyn FnMut(&[u8]) -> std::io::Result<usize>>, RawFd)> {
        let io = |what: &str, e| Error::io(format!("{what} {target}"), e);
        Ok(match self.protocol {
            Protocol::Udp => {
                let socket = UdpSocket::bind("0.0.0.0:0").map_err(|e| io("a UDP socket for", e))?;
                self.set_sndbuf(&socket)?;
                socket.connect(target).map_err(|e| io("connecting to", e))?;
                let fd = socket.as_raw_fd();
                (Box::new(move |b| socket.send(b)), fd)
            }
            Protocol::Tcp => {
                let mut stream = TcpStream::connect_timeout(&target.into(), Duration::from_secs(2)).map_err(|e| io("connecting to", e))?;
                self.set_sndbuf(&stream)?;
                let fd = stream.as_raw_fd();
                (Box::new(move |b| stream.write_all(b).map(|()| b.len())), fd)
            }
        })
    }
}

/// SIOCOUTQ: the bytes a TCP socket holds that its peer has not
/// acknowledged; for UDP the memory of the datagrams not yet sent.
fn outq(fd: RawFd) -> Option<u64> {
    let mut n: libc::c_int = 0;
    // SAFETY: SIOCOUTQ writes one int; `fd` is a socket of this process.
    let rc = unsafe { libc::ioctl(fd, libc::TIOCOUTQ, &mut n) };
    (rc == 0 && n >= 0).then_some(n as u64)
}

/// TCP_INFO's smoothed round-trip time (tcpi_rtt, microseconds) of a
/// connected TCP socket.
fn rtt_us(fd: RawFd) -> Option<u32> {
    // SAFETY: tcp_info is plain data; getsockopt writes at most `len` bytes
    // of it for a socket of this process.
    let mut info: libc::tcp_info = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::tcp_info>() as libc::socklen_t;
    let rc = unsafe { libc::getsockopt(fd, libc::IPPROTO_TCP, libc::TCP_INFO, (&raw mut info).cast(), &mut len) };
    (rc == 0 && info.tcpi_rtt > 0).then_some(info.tcpi_rtt)
}

impl Sends {
    fn set_sndbuf(&self, socket: &impl std::os::fd::AsFd) -> Result<()> {
        if let Some(bytes) = self.sndbuf {
            nix::sys::socket::setsockopt(socket, nix::sys::socket::sockopt::SndBuf, &bytes)
                .map_err(|e| Error::sys(format!("--sndbuf {bytes}: SO_SNDBUF"), e))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_flags_are_named() {
        let s = Sends { to: Side::A, port: 9, protocol: Protocol::Udp, size: 1472, intensity: None, sndbuf: None };
        assert!(s.check().is_ok());
        let e = Sends { size: 1473, ..s.clone() }.check().unwrap_err();
        assert!(e.to_string().contains("--size 1473"), "{e}");
        let e = Sends { intensity: Some(1.5), ..s.clone() }.check().unwrap_err();
        assert!(e.to_string().contains("--intensity 1.5"), "{e}");
        let e = Sends { sndbuf: Some(100), ..s.clone() }.check().unwrap_err();
        assert!(e.to_string().contains("--sndbuf 100"), "{e}");
        let e = Sends { port: 0, ..s }.check().unwrap_err();
        assert_eq!(e.exit_code(), 2);
    }
}
