//! One socket per stimulus path, with kernel timestamps (SO_TIMESTAMPING):
//! the transmit time comes back on the socket's error queue when the driver
//! hands the packet to the device, the receive time with the reply when the
//! kernel takes it off the device. Hardware timestamps are used when the
//! NIC delivers them on both sides; otherwise software (kernel) ones.

use super::wire::{self, Payload, PAYLOAD_LEN};
use irqlab_host::error::{Error, Result};
use nix::errno::Errno;
use nix::sys::socket::{self, ControlMessageOwned, MsgFlags, MultiHeaders};
use nix::sys::time::TimeSpec;
use serde::{Deserialize, Serialize};
use std::io::IoSliceMut;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// Which path of the target answers: the kernel's ICMP echo (softirq, no
/// user code) or the `stimulus respond` task (softirq + task wake-up).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PathKind {
    Icmp,
    Udp,
}

impl PathKind {
    pub fn name(self) -> &'static str {
        match self {
            PathKind::Icmp => "icmp",
            PathKind::Udp => "udp",
        }
    }

    /// What the path measures on the target.
    pub fn meaning(self) -> &'static str {
        match self {
            PathKind::Icmp => "softirq path: kernel ICMP echo",
            PathKind::Udp => "task path: responder wake-up",
        }
    }
}

/// Where a timestamp came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StampSource {
    /// The NIC's clock, on both send and receive.
    Hardware,
    /// The kernel's clock at the driver, on both send and receive.
    Software,
    /// Receive from the kernel, send from user space just before sendto
    /// (the transmit timestamp never came back).
    User,
}

impl StampSource {
    /// The name the JSON documents and logs use.
    pub fn name(self) -> &'static str {
        match self {
            StampSource::Hardware => "hardware",
            StampSource::Software => "software",
            StampSource::User => "user",
        }
    }
}

/// A kernel timestamp: software (CLOCK_REALTIME) and, if the NIC gave
/// one, hardware.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stamp {
    pub software_ns: u64,
    pub hardware_ns: u64,
}

const ICMP_FILTER: i32 = 1;
const SCM_TSTAMP_SND: u32 = 0;

pub struct StimulusSocket {
    fd: OwnedFd,
    kind: PathKind,
    dest: libc::sockaddr_in,
    icmp_id: u16,
}

fn sockaddr(addr: SocketAddrV4) -> libc::sockaddr_in {
    libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: addr.port().to_be(),
        sin_addr: libc::in_addr { s_addr: u32::from(*addr.ip()).to_be() },
        sin_zero: [0; 8],
    }
}

fn setsockopt<T>(fd: RawFd, level: i32, name: i32, value: &T) -> std::io::Result<()> {
    // SAFETY: value points at a live T of the given size.
    let rc = unsafe { libc::setsockopt(fd, level, name, value as *const T as *const libc::c_void, std::mem::size_of::<T>() as u32) };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

impl StimulusSocket {
    /// Opens the socket of `kind` towards `target` (the port matters only
    /// for UDP); `icmp_id` tells this run's echo replies from others'.
    pub fn open(kind: PathKind, target: SocketAddrV4, icmp_id: u16) -> Result<Self> {
        let (ty, proto) = match kind {
            PathKind::Icmp => (libc::SOCK_RAW, libc::IPPROTO_ICMP),
            PathKind::Udp => (libc::SOCK_DGRAM, libc::IPPROTO_UDP),
        };
        // SAFETY: plain socket(2).
        let raw = unsafe { libc::socket(libc::AF_INET, ty | libc::SOCK_CLOEXEC, proto) };
        if raw < 0 {
            let err = std::io::Error::last_os_error();
            return Err(match err.raw_os_error() {
                Some(libc::EPERM) | Some(libc::EACCES) => {
                    Error::MissingPrivilege { capability: "CAP_NET_RAW", purpose: "send ICMP echo stimuli on a raw socket".into() }
                }
                _ => Error::io(format!("opening the {} socket", kind.name()), err),
            });
        }
        // SAFETY: raw is a fresh descriptor we own.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let sock = StimulusSocket { fd, kind, dest: sockaddr(target), icmp_id };
        sock.configure().map_err(|e| Error::io(format!("configuring the {} socket", kind.name()), e))?;
        Ok(sock)
    }

    fn configure(&self) -> std::io::Result<()> {
        let fd = self.fd.as_raw_fd();
        if self.kind == PathKind::Icmp {
            // Wake only for echo replies, not for every ICMP message the
            // host receives (the raw socket sees all of them).
            let mask: u32 = !(1u32 << wire::ICMP_ECHO_REPLY);
            setsockopt(fd, libc::SOL_RAW, ICMP_FILTER, &mask)?;
        }
        let flags: u32 = libc::SOF_TIMESTAMPING_TX_SOFTWARE
            | libc::SOF_TIMESTAMPING_RX_SOFTWARE
            | libc::SOF_TIMESTAMPING_SOFTWARE
            | libc::SOF_TIMESTAMPING_TX_HARDWARE
            | libc::SOF_TIMESTAMPING_RX_HARDWARE
            | libc::SOF_TIMESTAMPING_RAW_HARDWARE;
        setsockopt(fd, libc::SOL_SOCKET, libc::SO_TIMESTAMPING, &flags)?;
        // Room for a quarter second of replies and send timestamps at 100k/s
        // (the error queue counts against the same budget) if the reader
        // stalls; FORCE needs CAP_NET_ADMIN, the plain one is capped by
        // rmem_max.
        let size: i32 = 32 << 20;
        if setsockopt(fd, libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, &size).is_err() {
            setsockopt(fd, libc::SOL_SOCKET, libc::SO_RCVBUF, &size)?;
        }
        Ok(())
    }

    pub fn kind(&self) -> PathKind {
        self.kind
    }

    pub fn raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// The bytes of one stimulus on this path: the payload, behind an ICMP
    /// echo header on the ICMP path.
    fn packet(&self, payload: &Payload, out: &mut [u8; MAX_STIMULUS_LEN]) -> usize {
        match self.kind {
            PathKind::Icmp => {
                out.copy_from_slice(&wire::icmp_echo_request(self.icmp_id, payload));
                MAX_STIMULUS_LEN
            }
            PathKind::Udp => {
                out[..PAYLOAD_LEN].copy_from_slice(&payload.encode());
                PAYLOAD_LEN
            }
        }
    }

    /// Sends a batch of stimuli with as few system calls as the kernel
    /// allows (sendmmsg(2), up to `MAX_BATCH` a call); returns how many
    /// went out and how many the kernel refused. Each stimulus is its own
    /// datagram with its own send timestamp, as with one send per call.
    pub fn send_batch(&self, payloads: &[Payload]) -> (u64, u64) {
        let (mut sent, mut refused) = (0u64, 0u64);
        for chunk in payloads.chunks(MAX_BATCH) {
            let mut bufs = [[0u8; MAX_STIMULUS_LEN]; MAX_BATCH];
            // SAFETY: zeroed iovec/mmsghdr are valid; filled in below.
            let mut iovs: [libc::iovec; MAX_BATCH] = unsafe { std::mem::zeroed() };
            let mut msgs: [libc::mmsghdr; MAX_BATCH] = unsafe { std::mem::zeroed() };
            for (i, p) in chunk.iter().enumerate() {
                let len = self.packet(p, &mut bufs[i]);
                iovs[i] = libc::iovec { iov_base: bufs[i].as_mut_ptr() as *mut libc::c_void, iov_len: len };
                msgs[i].msg_hdr.msg_iov = &mut iovs[i];
                msgs[i].msg_hdr.msg_iovlen = 1;
                msgs[i].msg_hdr.msg_name = &self.dest as *const libc::sockaddr_in as *mut libc::c_void;
                msgs[i].msg_hdr.msg_namelen = std::mem::size_of::<libc::sockaddr_in>() as u32;
            }
            let mut at = 0;
            while at < chunk.len() {
                // SAFETY: msgs[at..len] point at live buffers for the call.
                let rc = unsafe { libc::sendmmsg(self.fd.as_raw_fd(), msgs[at..].as_mut_ptr(), (chunk.len() - at) as u32, 0) };
                if rc > 0 {
                    sent += rc as u64;
                    at += rc as usize;
                } else {
                    if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
                        continue;
                    }
                    // The first message of the rest was refused: count it
                    // and go on with the next, as one sendto per stimulus
                    // would.
                    refused += 1;
                    at += 1;
                }
            }
        }
        (sent, refused)
    }

    /// Sends one stimulus.
    pub fn send(&self, payload: &Payload) -> std::io::Result<()> {
        let mut buf = [0u8; MAX_STIMULUS_LEN];
        let len = self.packet(payload, &mut buf);
        let bytes = &buf[..len];
        // SAFETY: bytes and dest are valid for the call.
        let rc = unsafe {
            libc::sendto(
                self.fd.as_raw_fd(),
                bytes.as_ptr() as *const libc::c_void,
                bytes.len(),
                0,
                &self.dest as *const libc::sockaddr_in as *const libc::sockaddr,
                std::mem::size_of::<libc::sockaddr_in>() as u32,
            )
        };
        if rc < 0 {
            Err(std::io::Error::last_os_error())
        } else {
            Ok(())
        }
    }

    /// One reply waiting on the socket, without blocking: `Ok(None)` when
    /// none is queued; `Ok(Some((None, _)))` for a packet that is not one of
    /// this run's replies.
    pub fn recv_reply(&self, buf: &mut [u8]) -> std::io::Result<Option<(Option<Payload>, Stamp)>> {
        let (len, stamp, _) = match recvmsg(self.fd.as_raw_fd(), buf, MsgFlags::MSG_DONTWAIT)? {
            Some(r) => r,
            None => return Ok(None),
        };
        let data = &buf[..len];
        let payload = match self.kind {
            PathKind::Icmp => wire::parse_icmp_echo_reply(data, self.icmp_id),
            PathKind::Udp => (len == PAYLOAD_LEN).then(|| Payload::decode(data)).flatten(),
        };
        Ok(Some((payload, stamp.unwrap_or_default())))
    }

    /// One transmit timestamp waiting on the error queue, without blocking.
    pub fn recv_tx_stamp(&self, buf: &mut [u8]) -> std::io::Result<Option<(Option<Payload>, Stamp)>> {
        let (len, stamp, is_send_stamp) = match recvmsg(self.fd.as_raw_fd(), buf, MsgFlags::MSG_DONTWAIT | MsgFlags::MSG_ERRQUEUE)? {
            Some(r) => r,
            None => return Ok(None),
        };
        let payload = if is_send_stamp { Payload::decode_tail(&buf[..len]) } else { None };
        Ok(Some((payload, stamp.filter(|_| is_send_stamp).unwrap_or_default())))
    }

    /// Every reply waiting on the socket, up to `batch`'s size, in one
    /// system call (recvmmsg(2)), without blocking; each entry as
    /// [`recv_reply`](Self::recv_reply) gives it. Returns how many were read.
    pub fn recv_replies(&self, batch: &mut RecvBatch) -> std::io::Result<usize> {
        let n = batch.receive(self.fd.as_raw_fd(), MsgFlags::MSG_DONTWAIT)?;
        for i in 0..n {
            let (len, stamp, _) = batch.meta[i];
            let data = &batch.bufs[i][..len];
            let payload = match self.kind {
                PathKind::Icmp => wire::parse_icmp_echo_reply(data, self.icmp_id),
                PathKind::Udp => (len == PAYLOAD_LEN).then(|| Payload::decode(data)).flatten(),
            };
            batch.out[i] = (payload, stamp.unwrap_or_default());
        }
        Ok(n)
    }

    /// Every transmit timestamp waiting on the error queue, up to `batch`'s
    /// size, in one system call, without blocking.
    pub fn recv_tx_stamps(&self, batch: &mut RecvBatch) -> std::io::Result<usize> {
        let n = batch.receive(self.fd.as_raw_fd(), MsgFlags::MSG_DONTWAIT | MsgFlags::MSG_ERRQUEUE)?;
        for i in 0..n {
            let (len, stamp, is_send_stamp) = batch.meta[i];
            let payload = if is_send_stamp { Payload::decode_tail(&batch.bufs[i][..len]) } else { None };
            batch.out[i] = (payload, stamp.filter(|_| is_send_stamp).unwrap_or_default());
        }
        Ok(n)
    }
}

/// The longest stimulus on the wire (the ICMP one).
const MAX_STIMULUS_LEN: usize = wire::ICMP_HEADER_LEN + PAYLOAD_LEN;
/// Messages per sendmmsg/recvmmsg call.
pub const MAX_BATCH: usize = 64;
/// Room for a reply (IP header + ICMP + payload) or an error-queue entry
/// (the sent packet, link header included); longer packets are not
/// stimuli and come back truncated.
const SLOT_LEN: usize = 256;
/// Room for one message's control messages: the timestamps and, on the
/// error queue, the extended error with its offender's address (about
/// 120 bytes on x86-64); more than that comes back truncated (MSG_CTRUNC)
/// and is read as no timestamp.
const CONTROL_LEN: usize = 256;

/// Buffers for one recvmmsg(2) call, kept across calls.
pub struct RecvBatch {
    bufs: Vec<[u8; SLOT_LEN]>,
    meta: Vec<(usize, Option<Stamp>, bool)>,
    /// What the last call read: this run's payload (if it is one) and the
    /// kernel's timestamp, per message.
    pub out: Vec<(Option<Payload>, Stamp)>,
}

impl Default for RecvBatch {
    fn default() -> Self {
        RecvBatch {
            bufs: vec![[0; SLOT_LEN]; MAX_BATCH],
            meta: vec![(0, None, false); MAX_BATCH],
            out: vec![(None, Stamp::default()); MAX_BATCH],
        }
    }
}

impl RecvBatch {
    fn receive(&mut self, fd: RawFd, flags: MsgFlags) -> std::io::Result<usize> {
        // New headers for every call: the kernel writes each header's
        // control and address lengths back, and nix (0.29) does not set
        // them again on a reused one, so a slot that once received no
        // timestamp would never receive one again (and a name length
        // written back over a header without room is EFAULT).
        let mut headers = MultiHeaders::<()>::preallocate(MAX_BATCH, Some(Vec::with_capacity(CONTROL_LEN)));
        let mut bufs = self.bufs.iter_mut();
        let mut iovs: [[IoSliceMut; 1]; MAX_BATCH] = std::array::from_fn(|_| [IoSliceMut::new(bufs.next().expect("MAX_BATCH buffers"))]);
        let received = match socket::recvmmsg(fd, &mut headers, iovs.iter_mut(), flags, None) {
            Ok(received) => received,
            Err(Errno::EAGAIN | Errno::EINTR) => return Ok(0),
            Err(e) => return Err(e.into()),
        };
        let mut n = 0;
        for (meta, m) in self.meta.iter_mut().zip(received) {
            let (stamp, is_send_stamp) = control_messages(&m);
            *meta = (m.bytes.min(SLOT_LEN), stamp, is_send_stamp);
            n += 1;
        }
        Ok(n)
    }
}

/// recvmsg(2) with the control messages irqlab reads: the kernel timestamps
/// and whether an error-queue entry is a send timestamp. `Ok(None)` on
/// EAGAIN.
fn recvmsg(fd: RawFd, buf: &mut [u8], flags: MsgFlags) -> std::io::Result<Option<(usize, Option<Stamp>, bool)>> {
    let mut control = Vec::with_capacity(CONTROL_LEN);
    match socket::recvmsg::<()>(fd, &mut [IoSliceMut::new(buf)], Some(&mut control), flags) {
        Ok(m) => {
            let (stamp, is_send_stamp) = control_messages(&m);
            Ok(Some((m.bytes, stamp, is_send_stamp)))
        }
        Err(Errno::EAGAIN) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// The kernel timestamp and whether an error-queue entry is a send
/// timestamp, from the control messages of a received message (none
/// where they were truncated).
fn control_messages<S>(msg: &socket::RecvMsg<'_, '_, S>) -> (Option<Stamp>, bool) {
    let mut stamp = None;
    let mut is_send_stamp = false;
    let Ok(cmsgs) = msg.cmsgs() else { return (None, false) };
    let ns = |t: &TimeSpec| t.tv_sec() as u64 * 1_000_000_000 + t.tv_nsec() as u64;
    for cmsg in cmsgs {
        match cmsg {
            ControlMessageOwned::ScmTimestampsns(ts) => stamp = Some(Stamp { software_ns: ns(&ts.system), hardware_ns: ns(&ts.hw_raw) }),
            ControlMessageOwned::Ipv4RecvErr(ee, _) => {
                is_send_stamp =
                    ee.ee_errno == libc::ENOMSG as u32 && ee.ee_origin == libc::SO_EE_ORIGIN_TIMESTAMPING && ee.ee_info == SCM_TSTAMP_SND;
            }
            _ => {}
        }
    }
    (stamp, is_send_stamp)
}

/// Resolves `host` (an IPv4 address or a name) to one IPv4 address.
pub fn resolve_ipv4(host: &str) -> std::result::Result<Ipv4Addr, String> {
    if let Ok(ip) = host.parse::<Ipv4Addr>() {
        return Ok(ip);
    }
    use std::net::ToSocketAddrs;
    let addrs = (host, 0).to_socket_addrs().map_err(|e| format!("cannot resolve `{host}`: {e}"))?;
    addrs
        .filter_map(|a| match a {
            std::net::SocketAddr::V4(v4) => Some(*v4.ip()),
            _ => None,
        })
        .next()
        .ok_or_else(|| format!("`{host}` has no IPv4 address (irqlab's stimuli are IPv4)"))
}
