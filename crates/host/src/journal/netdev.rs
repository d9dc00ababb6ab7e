//! The kernel's `netdev` generic-netlink family, the part that reads and
//! sets NAPI instances (`napi-get` / `napi-set`, Linux 6.13+; per-NAPI
//! `threaded` 6.17+): each instance's id, IRQ, polling thread and its
//! deferral settings. A minimal client on a raw netlink socket: one request
//! at a time, the answers parsed into [`Napi`]. Attribute numbers are the
//! kernel's UAPI (`include/uapi/linux/netdev.h`, `genetlink.h`).

use crate::error::{Error, Result};
use serde::{Deserialize, Serialize};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

const NETLINK_GENERIC: i32 = 16;
const GENL_ID_CTRL: u16 = 0x10;
const CTRL_CMD_GETFAMILY: u8 = 3;
const CTRL_ATTR_FAMILY_ID: u16 = 1;
const CTRL_ATTR_FAMILY_NAME: u16 = 2;

const NLM_F_REQUEST: u16 = 0x1;
const NLM_F_ACK: u16 = 0x4;
const NLM_F_DUMP: u16 = 0x300;
const NLMSG_ERROR: u16 = 2;
const NLMSG_DONE: u16 = 3;

const NETDEV_CMD_NAPI_GET: u8 = 11;
const NETDEV_CMD_NAPI_SET: u8 = 14;
const NAPI_IFINDEX: u16 = 1;
const NAPI_ID: u16 = 2;
const NAPI_IRQ: u16 = 3;
const NAPI_PID: u16 = 4;
const NAPI_DEFER_HARD_IRQS: u16 = 5;
const NAPI_GRO_FLUSH_TIMEOUT: u16 = 6;
const NAPI_IRQ_SUSPEND_TIMEOUT: u16 = 7;
const NAPI_THREADED: u16 = 8;

/// One NAPI instance as `napi-get` reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Napi {
    pub id: u32,
    pub ifindex: u32,
    pub irq: Option<u32>,
    /// Its polling kthread (threaded NAPI), if any.
    pub pid: Option<u32>,
    pub defer_hard_irqs: Option<u64>,
    pub gro_flush_timeout_ns: Option<u64>,
    pub irq_suspend_timeout_ns: Option<u64>,
    /// Kernels before 6.17 do not report it per instance.
    pub threaded: Option<bool>,
}

/// A per-NAPI setting `napi-set` takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Knob {
    Threaded,
    DeferHardIrqs,
    GroFlushTimeout,
    IrqSuspendTimeout,
}

impl Knob {
    fn attr(self) -> u16 {
        match self {
            Knob::Threaded => NAPI_THREADED,
            Knob::DeferHardIrqs => NAPI_DEFER_HARD_IRQS,
            Knob::GroFlushTimeout => NAPI_GRO_FLUSH_TIMEOUT,
            Knob::IrqSuspendTimeout => NAPI_IRQ_SUSPEND_TIMEOUT,
        }
    }

    /// The value `napi-get` reported for this knob.
    pub fn of(self, napi: &Napi) -> Option<u64> {
        match self {
            Knob::Threaded => napi.threaded.map(u64::from),
            Knob::DeferHardIrqs => napi.defer_hard_irqs,
            Knob::GroFlushTimeout => napi.gro_flush_timeout_ns,
            Knob::IrqSuspendTimeout => napi.irq_suspend_timeout_ns,
        }
    }
}

impl std::fmt::Display for Knob {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Knob::Threaded => "threaded",
            Knob::DeferHardIrqs => "defer-hard-irqs",
            Knob::GroFlushTimeout => "gro-flush-timeout",
            Knob::IrqSuspendTimeout => "irq-suspend-timeout",
        })
    }
}

/// An open generic-netlink socket bound to the netdev family.
pub struct Netdev {
    fd: OwnedFd,
    family: u16,
    seq: u32,
}

fn put_attr(buf: &mut Vec<u8>, kind: u16, payload: &[u8]) {
    let len = 4 + payload.len();
    buf.extend_from_slice(&(len as u16).to_ne_bytes());
    buf.extend_from_slice(&kind.to_ne_bytes());
    buf.extend_from_slice(payload);
    buf.resize(buf.len().next_multiple_of(4), 0);
}

/// (type, payload) of each attribute in `data`.
fn attrs(mut data: &[u8]) -> Vec<(u16, &[u8])> {
    let mut out = Vec::new();
    while data.len() >= 4 {
        let len = u16::from_ne_bytes([data[0], data[1]]) as usize;
        let kind = u16::from_ne_bytes([data[2], data[3]]) & 0x3fff;
        if len < 4 || len > data.len() {
            break;
        }
        out.push((kind, &data[4..len]));
        data = &data[len.next_multiple_of(4).min(data.len())..];
    }
    out
}

/// An unsigned attribute of 1, 2, 4 or 8 bytes (the family's `uint`).
fn uint(payload: &[u8]) -> Option<u64> {
    Some(match payload.len() {
        1 => payload[0] as u64,
        2 => u16::from_ne_bytes(payload.try_into().ok()?) as u64,
        4 => u32::from_ne_bytes(payload.try_into().ok()?) as u64,
        8 => u64::from_ne_bytes(payload.try_into().ok()?),
        _ => return None,
    })
}

impl Netdev {
    /// Opens the socket and looks the family up. Exit 3 naming the kernel
    /// feature when the family (Linux 6.13's napi-get) is not there.
    pub fn open() -> Result<Netdev> {
        // SAFETY: plain socket(2); the fd is owned below.
        let raw = unsafe { libc::socket(libc::AF_NETLINK, libc::SOCK_RAW | libc::SOCK_CLOEXEC, NETLINK_GENERIC) };
        if raw < 0 {
            return Err(Error::io("opening a generic netlink socket", std::io::Error::last_os_error()));
        }
        // SAFETY: raw is a new, valid fd.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let mut nl = Netdev { fd, family: GENL_ID_CTRL, seq: 0 };
        let mut payload = Vec::new();
        put_attr(&mut payload, CTRL_ATTR_FAMILY_NAME, b"netdev\0");
        let replies = nl.request(CTRL_CMD_GETFAMILY, NLM_F_REQUEST, &payload).map_err(|e| match e {
            Error::Io { source, .. } if source.raw_os_error() == Some(libc::ENOENT) => Error::MissingKernelFeature {
                feature: "the netdev generic-netlink family".into(),
                detail: "per-NAPI settings need Linux 6.13 or later".into(),
            },
            e => e,
        })?;
        let family = replies
            .iter()
            .flat_map(|r| attrs(r))
            .find(|(k, _)| *k == CTRL_ATTR_FAMILY_ID)
            .and_then(|(_, p)| uint(p))
            .ok_or_else(|| Error::Failed("the kernel's family lookup named no id for netdev".into()))?;
        nl.family = family as u16;
        Ok(nl)
    }

    /// Sends one request and collects the payloads (after the genl header)
    /// of its answers; a netlink error becomes an io error with its errno.
    fn request(&mut self, cmd: u8, flags: u16, payload: &[u8]) -> Result<Vec<Vec<u8>>> {
        self.seq += 1;
        let mut msg = Vec::with_capacity(20 + payload.len());
        msg.extend_from_slice(&((20 + payload.len()) as u32).to_ne_bytes());
        msg.extend_from_slice(&self.family.to_ne_bytes());
        msg.extend_from_slice(&flags.to_ne_bytes());
        msg.extend_from_slice(&self.seq.to_ne_bytes());
        msg.extend_from_slice(&0u32.to_ne_bytes());
        msg.extend_from_slice(&[cmd, 1, 0, 0]);
        msg.extend_from_slice(payload);
        let what = || format!("netlink request {cmd} to family {}", self.family);
        // SAFETY: msg is a valid buffer; the fd is an unbound netlink socket
        // (the kernel answers to our port id).
        let sent = unsafe {
            let mut to: libc::sockaddr_nl = std::mem::zeroed();
            to.nl_family = libc::AF_NETLINK as u16;
            libc::sendto(
                self.fd.as_raw_fd(),
                msg.as_ptr().cast(),
                msg.len(),
                0,
                (&to as *const libc::sockaddr_nl).cast(),
                std::mem::size_of::<libc::sockaddr_nl>() as u32,
            )
        };
        if sent < 0 {
            return Err(Error::io(what(), std::io::Error::last_os_error()));
        }
        let dump = flags & NLM_F_DUMP == NLM_F_DUMP;
        let mut answers = Vec::new();
        let mut buf = vec![0u8; 65536];
        loop {
            // SAFETY: buf is writable for its length.
            let n = unsafe { libc::recv(self.fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
            if n < 0 {
                return Err(Error::io(what(), std::io::Error::last_os_error()));
            }
            let mut data = &buf[..n as usize];
            while data.len() >= 16 {
                let len = u32::from_ne_bytes(data[0..4].try_into().expect("4 bytes")) as usize;
                let kind = u16::from_ne_bytes([data[4], data[5]]);
                if len < 16 || len > data.len() {
                    return Err(Error::Failed(format!("{}: a malformed answer", what())));
                }
                let body = &data[16..len];
                match kind {
                    NLMSG_DONE => return Ok(answers),
                    NLMSG_ERROR => {
                        let errno = i32::from_ne_bytes(body[0..4].try_into().expect("4 bytes"));
                        if errno == 0 {
                            return Ok(answers);
                        }
                        return Err(Error::io(what(), std::io::Error::from_raw_os_error(-errno)));
                    }
                    _ if body.len() >= 4 => answers.push(body[4..].to_vec()),
                    _ => {}
                }
                data = &data[len.next_multiple_of(4).min(data.len())..];
            }
            if !dump && !answers.is_empty() && flags & NLM_F_ACK == 0 {
                return Ok(answers);
            }
        }
    }

    /// Every NAPI instance of the device `ifindex`.
    pub fn napis(&mut self, ifindex: u32) -> Result<Vec<Napi>> {
        let mut payload = Vec::new();
        put_attr(&mut payload, NAPI_IFINDEX, &ifindex.to_ne_bytes());
        let answers = self.request(NETDEV_CMD_NAPI_GET, NLM_F_REQUEST | NLM_F_DUMP, &payload)?;
        let mut found: Vec<Napi> = answers
            .iter()
            .filter_map(|a| {
                let mut n = Napi {
                    id: 0,
                    ifindex,
                    irq: None,
                    pid: None,
                    defer_hard_irqs: None,
                    gro_flush_timeout_ns: None,
                    irq_suspend_timeout_ns: None,
                    threaded: None,
                };
                for (kind, p) in attrs(a) {
                    let v = uint(p);
                    match kind {
                        NAPI_ID => n.id = v? as u32,
                        NAPI_IFINDEX => n.ifindex = v? as u32,
                        NAPI_IRQ => n.irq = v.map(|v| v as u32),
                        NAPI_PID => n.pid = v.map(|v| v as u32),
                        NAPI_DEFER_HARD_IRQS => n.defer_hard_irqs = v,
                        NAPI_GRO_FLUSH_TIMEOUT => n.gro_flush_timeout_ns = v,
                        NAPI_IRQ_SUSPEND_TIMEOUT => n.irq_suspend_timeout_ns = v,
                        NAPI_THREADED => n.threaded = v.map(|v| v != 0),
                        _ => {}
                    }
                }
                (n.ifindex == ifindex).then_some(n)
            })
            .collect();
        found.sort_by_key(|n| n.id);
        Ok(found)
    }

    /// The NAPI instance `id`, if it exists.
    pub fn napi(&mut self, ifindex: u32, id: u32) -> Result<Option<Napi>> {
        Ok(self.napis(ifindex)?.into_iter().find(|n| n.id == id))
    }

    /// Sets one knob of the NAPI instance `id`.
    pub fn set(&mut self, id: u32, knob: Knob, value: u64) -> Result<()> {
        let mut payload = Vec::new();
        put_attr(&mut payload, NAPI_ID, &id.to_ne_bytes());
        match knob {
            // u32 attributes in the family's spec.
            Knob::Threaded | Knob::DeferHardIrqs => put_attr(&mut payload, knob.attr(), &(value as u32).to_ne_bytes()),
            Knob::GroFlushTimeout | Knob::IrqSuspendTimeout => put_attr(&mut payload, knob.attr(), &value.to_ne_bytes()),
        }
        self.request(NETDEV_CMD_NAPI_SET, NLM_F_REQUEST | NLM_F_ACK, &payload).map(|_| ()).map_err(|e| match e {
            Error::Io { source, .. } if source.raw_os_error() == Some(libc::EPERM) => {
                Error::MissingPrivilege { capability: "CAP_NET_ADMIN", purpose: format!("set {knob} of NAPI {id}") }
            }
            Error::Io { source, .. } if source.raw_os_error() == Some(libc::EINVAL) => Error::Invalid(format!(
                "the kernel refused {knob} = {value} for NAPI {id} (EINVAL: out of its range, or not settable per NAPI on this kernel)"
            )),
            e => e,
        })
    }
}

/// The interface index of `dev`; exit 2 naming the devices that exist.
pub fn ifindex(dev: &str) -> Result<u32> {
    if let Ok(text) = std::fs::read_to_string(format!("/sys/class/net/{dev}/ifindex")) {
        if let Ok(i) = text.trim().parse() {
            return Ok(i);
        }
    }
    let mut devices: Vec<String> = std::fs::read_dir("/sys/class/net")
        .map(|d| d.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect())
        .unwrap_or_default();
    devices.sort();
    Err(Error::Invalid(format!("no network device `{dev}` (there are: {})", devices.join(", "))))
}

/// `dev`'s NAPI kthreads once threaded NAPI was switched on: the kernel
/// creates them asynchronously, so this waits up to 0.5 s for the first;
/// empty if none appeared.
pub fn wait_for_napi_kthreads(dev: &str) -> Vec<super::threads::Thread> {
    let napi = super::threads::Match::Napi(dev.to_string());
    for _ in 0..50 {
        if let Ok(found) = napi.resolve(&format!("napi:{dev}")) {
            return found;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    Vec::new()
}

/// `dev`'s receive work in softirq context on `cpu` (the papers' vanilla
/// kernel): threaded NAPI off and RPS steering queue 0's packets to
/// `cpu`, through the journal (the guards restore both).
pub fn softirq_receive_on(dev: &str, cpu: usize) -> Result<Vec<crate::journal::Applied>> {
    use crate::journal::{apply, Object, Value};
    Ok(vec![
        apply(Object::File { path: format!("/sys/class/net/{dev}/threaded") }, Value::Text { text: "0".into() })?,
        apply(
            Object::File { path: format!("/sys/class/net/{dev}/queues/rx-0/rps_cpus") },
            Value::Text { text: crate::rt::cpu_mask_hex(&[cpu]) },
        )?,
    ])
}

/// `dev`'s receive work in its NAPI kthreads: threaded NAPI switched on
/// through the journal (set again where it was on: the guard puts back
/// what it found), and the kthreads; exit 3 when the kernel or the device
/// refuses it or no kthread appears.
pub fn threaded_receive(dev: &str) -> Result<(crate::journal::Applied, Vec<super::threads::Thread>)> {
    let on = switch_threaded_on(dev)?;
    Ok((on, kthreads_appeared(dev)?))
}

/// The NAPI kthreads of `dev`, with threaded NAPI switched on through the
/// journal when it was off (the returned guard restores it).
pub fn napi_kthreads(dev: &str) -> Result<(Vec<super::threads::Thread>, Option<crate::journal::Applied>)> {
    let ifindex = ifindex(dev)?;
    if let Ok(napis) = Netdev::open().and_then(|mut n| n.napis(ifindex)) {
        if napis.is_empty() {
            return Err(Error::Invalid(format!(
                "{dev} has no NAPI instance: its packets are not polled by NAPI (e.g. lo, or veth without GRO/XDP)"
            )));
        }
    }
    if let Ok(found) = super::threads::Match::Napi(dev.to_string()).resolve(&format!("napi:{dev}")) {
        return Ok((found, None));
    }
    let on = switch_threaded_on(dev)?;
    Ok((kthreads_appeared(dev)?, Some(on)))
}

/// `/sys/class/net/DEV/threaded` set to 1 through the journal, each
/// refusal named: no privilege (exit 3), no threaded NAPI in this kernel
/// (exit 3), a device without NAPI (exit 2).
fn switch_threaded_on(dev: &str) -> Result<crate::journal::Applied> {
    crate::privilege::require(&[crate::privilege::Capability::NetAdmin], "switch threaded NAPI on")?;
    let path = format!("/sys/class/net/{dev}/threaded");
    if !std::path::Path::new(&path).exists() {
        return Err(Error::MissingKernelFeature {
            feature: "threaded NAPI".into(),
            detail: format!("{path} does not exist (Linux 5.12+)"),
        });
    }
    match crate::journal::apply(crate::journal::Object::File { path: path.clone() }, crate::journal::Value::Text { text: "1".into() }) {
        Ok(a) => Ok(a),
        Err(Error::Io { source, .. }) if source.raw_os_error() == Some(libc::EOPNOTSUPP) => {
            Err(Error::Invalid(format!("{dev} has no NAPI instance to thread ({path}: operation not supported)")))
        }
        Err(Error::Io { source, .. }) => {
            Err(Error::MissingKernelFeature { feature: "threaded NAPI".into(), detail: format!("{dev} refused it: {source}") })
        }
        Err(e) => Err(e),
    }
}

/// `dev`'s NAPI kthreads once threaded NAPI is on (the kernel creates
/// them asynchronously: [`wait_for_napi_kthreads`]), exit 3 when none
/// appeared.
fn kthreads_appeared(dev: &str) -> Result<Vec<super::threads::Thread>> {
    let found = wait_for_napi_kthreads(dev);
    if found.is_empty() {
        return Err(Error::MissingKernelFeature {
            feature: "threaded NAPI".into(),
            detail: format!("{dev} took threaded=1 but no napi/{dev}-* kthread appeared"),
        });
    }
    Ok(found)
}

/// Pins each of `threads` to `cpus` and sets `attr`, where given, each
/// change journalled (the guards in order: restored newest first). What a
/// run does with the NAPI kthreads it holds.
pub fn hold_kthreads(
    threads: &[super::threads::Thread],
    cpus: Option<&[usize]>,
    attr: Option<super::sched::SchedAttr>,
) -> Result<Vec<crate::journal::Applied>> {
    use crate::journal::{apply, Object, Value};
    let mut guards = Vec::new();
    for t in threads {
        if let Some(cpus) = cpus {
            guards.push(apply(Object::ThreadAffinity { thread: t.clone() }, Value::Cpus { cpus: cpus.to_vec() })?);
        }
        if let Some(attr) = attr {
            guards.push(apply(Object::ThreadSched { thread: t.clone() }, Value::Sched { attr })?);
        }
    }
    Ok(guards)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attributes_round_trip_with_padding() {
        let mut buf = Vec::new();
        put_attr(&mut buf, 2, b"netdev\0");
        put_attr(&mut buf, 7, &5u64.to_ne_bytes());
        put_attr(&mut buf, 3, &9u32.to_ne_bytes());
        assert_eq!(buf.len() % 4, 0);
        let parsed = attrs(&buf);
        assert_eq!(parsed.len(), 3);
        assert_eq!(parsed[0], (2, &b"netdev\0"[..]));
        assert_eq!(uint(parsed[1].1), Some(5));
        assert_eq!(uint(parsed[2].1), Some(9));
    }

    #[test]
    fn a_truncated_attribute_ends_the_list() {
        let mut buf = Vec::new();
        put_attr(&mut buf, 1, &1u32.to_ne_bytes());
        buf.extend_from_slice(&[40, 0, 2, 0]);
        assert_eq!(attrs(&buf).len(), 1);
    }

    #[test]
    fn an_unknown_device_names_the_ones_there_are() {
        let e = ifindex("no-such-dev0").unwrap_err().to_string();
        assert!(e.contains("no network device `no-such-dev0`") && e.contains("lo"), "{e}");
    }
}
