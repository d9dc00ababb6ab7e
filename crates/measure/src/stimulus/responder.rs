//! The target side: a thread that blocks in receive and sends each
//! stimulus straight back — SCHED_FIFO, memory locked, and nothing else: no
//! clock reads, no logging, so what the generator measures is the target's
//! softirq + wake-up + syscall path and not irqlab's own bookkeeping.

use irqlab_host::error::{Error, Result};
use std::net::{SocketAddrV4, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// The default UDP port of the task path.
pub const DEFAULT_PORT: u16 = 9750;

#[derive(Debug, Clone)]
pub struct ResponderConfig {
    pub bind: SocketAddrV4,
    /// SCHED_FIFO priority; 0 keeps SCHED_OTHER.
    pub priority: u8,
    pub cpu: Option<usize>,
}

pub struct Responder {
    socket: UdpSocket,
    config: ResponderConfig,
}

/// Binds the socket; port conflicts and foreign addresses are reported
/// here, before anything changes on the machine.
pub fn bind(config: &ResponderConfig) -> Result<Responder> {
    let socket = UdpSocket::bind(config.bind).map_err(|e| match e.raw_os_error() {
        Some(libc::EADDRINUSE) => Error::Invalid(format!(
            "UDP port {} is in use on {} (another responder running?): pick another with --bind",
            config.bind.port(),
            config.bind.ip()
        )),
        Some(libc::EADDRNOTAVAIL) => Error::Invalid(format!("{} is not an address of this host", config.bind.ip())),
        Some(libc::EACCES) => Error::MissingPrivilege {
            capability: "CAP_NET_BIND_SERVICE",
            purpose: format!("listen on port {} (below 1024)", config.bind.port()),
        },
        _ => Error::io(format!("binding UDP {}", config.bind), e),
    })?;
    // A deep queue so a burst of stimuli waits instead of being dropped
    // (the default holds ~300 small datagrams: 15 ms at 20 kHz). FORCE
    // needs CAP_NET_ADMIN; otherwise the plain option, capped by rmem_max.
    let size: libc::c_int = 8 << 20;
    for opt in [libc::SO_RCVBUFFORCE, libc::SO_RCVBUF] {
        // SAFETY: setsockopt on our socket with an int option.
        let rc = unsafe {
            libc::setsockopt(
                std::os::fd::AsRawFd::as_raw_fd(&socket),
                libc::SOL_SOCKET,
                opt,
                &size as *const libc::c_int as *const libc::c_void,
                std::mem::size_of::<libc::c_int>() as u32,
            )
        };
        if rc == 0 {
            break;
        }
    }
    // Woken every 200 ms with nothing to do so Ctrl-C is noticed; the
    // timeout lives in the kernel, so the loop still reads no clock.
    socket.set_read_timeout(Some(Duration::from_millis(200))).map_err(|e| Error::io("setting the receive timeout", e))?;
    Ok(Responder { socket, config: config.clone() })
}

impl Responder {
    pub fn local_addr(&self) -> Result<std::net::SocketAddr> {
        self.socket.local_addr().map_err(|e| Error::io("reading the bound address", e))
    }

    /// Answers stimuli on the calling thread until `stop` is set; returns
    /// how many it answered. Pins and raises the calling thread and locks
    /// the process's memory for as long as it serves.
    pub fn serve(self, stop: &AtomicBool) -> Result<u64> {
        if let Some(cpu) = self.config.cpu {
            irqlab_host::rt::pin_to_cpu(cpu)?;
        }
        irqlab_host::rt::lock_memory()?;
        let result = irqlab_host::rt::set_fifo(self.config.priority).and_then(|_| self.answer(stop));
        irqlab_host::rt::unlock_memory();
        result
    }

    fn answer(&self, stop: &AtomicBool) -> Result<u64> {
        let fd = std::os::fd::AsRawFd::as_raw_fd(&self.socket);
        let mut bufs = vec![[0u8; SLOT_LEN]; BATCH];
        // SAFETY: zeroed sockaddr_in/iovec/mmsghdr are valid.
        let mut from: [libc::sockaddr_in; BATCH] = unsafe { std::mem::zeroed() };
        let mut iovs: [libc::iovec; BATCH] = unsafe { std::mem::zeroed() };
        let mut msgs: [libc::mmsghdr; BATCH] = unsafe { std::mem::zeroed() };
        let mut answered = 0u64;
        while !stop.load(Ordering::Relaxed) {
            for i in 0..BATCH {
                iovs[i] = libc::iovec { iov_base: bufs[i].as_mut_ptr() as *mut libc::c_void, iov_len: SLOT_LEN };
                msgs[i].msg_hdr.msg_iov = &mut iovs[i];
                msgs[i].msg_hdr.msg_iovlen = 1;
                msgs[i].msg_hdr.msg_name = &mut from[i] as *mut libc::sockaddr_in as *mut libc::c_void;
                msgs[i].msg_hdr.msg_namelen = std::mem::size_of::<libc::sockaddr_in>() as u32;
            }
            // Blocks for the first stimulus (up to the socket's timeout),
            // then takes whatever else is queued: one wake-up and two system
            // calls for a burst instead of two per stimulus.
            // SAFETY: msgs point at live buffers for the call.
            let n = unsafe { libc::recvmmsg(fd, msgs.as_mut_ptr(), BATCH as u32, libc::MSG_WAITFORONE, std::ptr::null_mut()) };
            if n < 0 {
                let e = std::io::Error::last_os_error();
                match e.kind() {
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut | std::io::ErrorKind::Interrupted => continue,
                    // An ICMP error from an earlier reply's destination.
                    std::io::ErrorKind::ConnectionRefused => continue,
                    _ => return Err(Error::io("receiving a stimulus", e)),
                }
            }
            let n = n as usize;
            for (i, m) in msgs.iter_mut().enumerate().take(n) {
                // Each reply goes back to where its stimulus came from, as
                // received (truncated beyond a slot: not a stimulus).
                iovs[i].iov_len = (m.msg_len as usize).min(SLOT_LEN);
            }
            let mut at = 0;
            while at < n {
                // SAFETY: msgs[at..n] point at live buffers for the call.
                let rc = unsafe { libc::sendmmsg(fd, msgs[at..n].as_mut_ptr(), (n - at) as u32, 0) };
                if rc > 0 {
                    answered += rc as u64;
                    at += rc as usize;
                } else {
                    // A failed send (the generator went away) is the
                    // generator's loss to count, not the responder's error.
                    at += 1;
                }
            }
        }
        Ok(answered)
    }
}

/// Stimuli per recvmmsg/sendmmsg call, and the room for each (a stimulus is
/// 32 bytes).
const BATCH: usize = 64;
const SLOT_LEN: usize = 2048;

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    #[test]
    fn port_in_use_is_bad_input() {
        let first = bind(&ResponderConfig { bind: SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0), priority: 0, cpu: None }).unwrap();
        let port = first.local_addr().unwrap().port();
        let err = bind(&ResponderConfig { bind: SocketAddrV4::new(Ipv4Addr::LOCALHOST, port), priority: 0, cpu: None })
            .err()
            .expect("second bind must fail");
        assert_eq!(err.exit_code(), 2);
        assert!(err.to_string().contains("in use"), "{err}");
    }

    #[test]
    fn echoes_what_it_receives() {
        let r = bind(&ResponderConfig { bind: SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0), priority: 0, cpu: None }).unwrap();
        let addr = r.local_addr().unwrap();
        let stop = AtomicBool::new(false);
        std::thread::scope(|s| {
            let h = s.spawn(|| r.answer(&stop));
            let c = UdpSocket::bind("127.0.0.1:0").unwrap();
            c.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
            c.send_to(b"ping", addr).unwrap();
            let mut buf = [0u8; 16];
            let n = c.recv(&mut buf).unwrap();
            assert_eq!(&buf[..n], b"ping");
            stop.store(true, Ordering::Relaxed);
            assert_eq!(h.join().unwrap().unwrap(), 1);
        });
    }
}
