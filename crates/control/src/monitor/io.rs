//! The block requests of two classes of processes on one disk, as the
//! kernel issues and completes them (`bpf/io_watch.bpf.c`: the
//! `block_bio_queue`, `block_rq_issue` and `block_rq_complete`
//! tracepoints). The live idletime controller's observations: when the
//! foreground uses the disk, and when background requests are in flight.
//! A bio is classed by the process that queued it, so a request an I/O
//! scheduler issues later from a kworker keeps its class; dirty pages the
//! kernel's flusher writes back belong to no process and are not seen.
//! Some completions run no program on this kernel (see
//! `IO_COMPLETE_INFERRED` in the BPF source): such a request is reported
//! complete when its struct request is reused, or by the caller's own
//! bound on time in the device.
//!
//! The same object watches a network device instead ([`Target::Net`]):
//! the packets of the two classes of processes through its egress, queued
//! (`net_dev_queue`, before the qdisc) and taken by the driver
//! (`net_dev_start_xmit`) or dropped (`kfree_skb`); a GSO packet a qdisc
//! cuts into segments (`consume_skb` before the driver) becomes one request
//! of its socket until the last segment is taken. A packet is classed by
//! its socket, which takes the class of the process that sends on it
//! (`sock_send_length`), so the packets the kernel sends for that socket
//! from another context (TCP) keep it.

use irqlab_host::bpf::{self, err as bpf_err, Plain};
use irqlab_host::error::{Error, Result};
use libbpf_rs::skel::{OpenSkel, Skel, SkelBuilder};
use libbpf_rs::{MapCore, MapFlags, RingBuffer};
use serde::{Deserialize, Serialize};
use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;

irqlab_host::bpf_program!("io_watch");
use skel::{types, IoWatchSkel, IoWatchSkelBuilder};

// SAFETY: generated from the program's BTF: a #[repr(C)] struct of integers.
unsafe impl Plain for types::io_watch_event {}

pub use irqlab_policy::idletime::Class;

/// How many processes the classes map holds (`IO_WATCH_PROCESSES`).
pub const MAX_PROCESSES: usize = consts::IO_WATCH_PROCESSES as usize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// The request went to the driver.
    Issue,
    /// The driver completed all of it.
    Complete,
    /// Its completion ran no program; it was over by `ts_ns`, when its
    /// struct request (or sk_buff) was issued again.
    CompleteInferred,
    /// A packet dropped before the driver took it (it left the queue).
    Dropped,
}

/// What to watch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// A disk, by its major and first minor (the whole disk).
    Disk { major: u32, minor: u32 },
    /// A network device's egress, by its ifindex (in this namespace).
    Net { ifindex: u32 },
}

/// One request event of a classed process.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct IoEvent {
    /// CLOCK_MONOTONIC, ns (the clock of [`irqlab_host::rt::monotonic_ns`]).
    pub ts_ns: u64,
    pub class: Class,
    pub kind: Kind,
    pub bytes: u32,
    pub tgid: u32,
    /// The request: its first sector, or a packet's sk_buff address.
    pub sector: u64,
}

/// Decodes one ring record (`struct io_watch_event`).
fn decode(bytes: &[u8]) -> Option<IoEvent> {
    let e: types::io_watch_event = bpf::read(bytes)?;
    let class = match u64::from(e.class) {
        consts::IO_FOREGROUND => Class::Foreground,
        consts::IO_BACKGROUND => Class::Background,
        _ => return None,
    };
    let kind = match u64::from(e.kind) {
        consts::IO_ISSUE => Kind::Issue,
        consts::IO_COMPLETE => Kind::Complete,
        consts::IO_COMPLETE_INFERRED => Kind::CompleteInferred,
        consts::IO_DROPPED => Kind::Dropped,
        _ => return None,
    };
    Some(IoEvent { ts_ns: e.ts_ns, sector: e.sector, bytes: e.bytes, tgid: e.tgid, class, kind })
}

fn class_byte(class: Class) -> u8 {
    (match class {
        Class::Foreground => consts::IO_FOREGROUND,
        Class::Background => consts::IO_BACKGROUND,
    }) as u8
}

/// Room for the loaded BPF object; it must outlive the [`IoWatch`].
pub type Storage = bpf::Storage;

/// The programs of each half of the object (`io_watch.bpf.c`).
const DISK_PROGRAMS: &[&str] = &["on_bio_queue", "on_rq_issue", "on_rq_complete"];
const NET_PROGRAMS: &[&str] = &["on_net_queue", "on_sock_send", "on_net_xmit", "on_skb_consume", "on_skb_drop", BAND_PROGRAM];
/// The background band's classifier: loaded only for a band, attached by
/// [`IoWatch::attach_band`].
const BAND_PROGRAM: &str = "band_classify";

/// The program that learns a socket's class when its process sends, and
/// its tracepoint (absent before 6.2).
const SEND_PROGRAM: &str = "on_sock_send";
const SEND_TRACEPOINT: &str = "sock_send_length";

/// Whether the running kernel has raw tracepoint `name` (a tp_btf program
/// needs its `btf_trace_<name>` in the kernel's BTF); unreadable BTF says
/// yes, and the load then names what is wrong.
fn kernel_has_tracepoint(name: &str) -> bool {
    libbpf_rs::btf::Btf::from_vmlinux()
        .map(|btf| btf.type_by_name::<libbpf_rs::btf::BtfType>(&format!("btf_trace_{name}")).is_some())
        .unwrap_or(true)
}

/// A running watch of one disk's requests or one device's packets.
pub struct IoWatch<'obj> {
    skel: IoWatchSkel<'obj>,
    ring: RingBuffer<'static>,
    received: Rc<RefCell<Vec<IoEvent>>>,
    band_link: Option<libbpf_rs::Link>,
}

impl<'obj> IoWatch<'obj> {
    /// Loads and attaches the watch of `target`. The reader is woken only
    /// by a foreground issue `wake_gap_ns` or more after the previous one;
    /// it must look at the ring on its own timer otherwise. Exit 3 naming
    /// what is missing.
    ///
    /// `band_classid` (a network device only): load the background band's
    /// classifier, which sends background packets to that class
    /// (major:minor) of the qdisc it is attached to.
    pub fn start(storage: &'obj mut Storage, target: Target, wake_gap_ns: u64, band_classid: Option<u32>) -> Result<IoWatch<'obj>> {
        irqlab_host::privilege::require_bpf("load and attach the block-request and packet BPF programs")?;
        let mut open = IoWatchSkelBuilder::default().open(&mut storage.0).map_err(bpf_err("opening the block-request BPF object"))?;
        let rodata =
            open.maps.rodata_data.as_deref_mut().ok_or_else(|| Error::Failed("the block-request BPF object has no rodata".into()))?;
        rodata.wake_gap_ns = wake_gap_ns;
        let unused = match target {
            Target::Disk { major, minor } => {
                rodata.disk_major = major;
                rodata.disk_minor = minor;
                NET_PROGRAMS
            }
            Target::Net { ifindex } => {
                rodata.net_ifindex = ifindex;
                DISK_PROGRAMS
            }
        };
        rodata.band_classid = band_classid.unwrap_or(0);
        bpf::size_ring(&mut open.maps.events, "block-request events")?;
        let band = band_classid.is_some() && matches!(target, Target::Net { .. });
        // 6.1 has no sock_send_length: sockets are then classed only where
        // the classed process itself queues a packet (on_net_queue), and
        // packets the kernel sends for them later from another context
        // (TCP's ACK clock) go unclassed.
        let no_send_hook = !kernel_has_tracepoint(SEND_TRACEPOINT);
        for mut prog in open.open_object_mut().progs_mut() {
            if unused.iter().any(|u| prog.name() == *u)
                || (prog.name() == BAND_PROGRAM && !band)
                || (prog.name() == SEND_PROGRAM && no_send_hook)
            {
                prog.set_autoload(false);
            }
        }
        let mut skel = open.load().map_err(bpf_err("loading the block-request / packet BPF programs"))?;
        let (ring, received) = bpf::ring_sink(&skel.maps.events, "block-request events", decode)?;
        skel.attach().map_err(bpf_err(match target {
            Target::Disk { .. } => "attaching the block-request programs (block_bio_queue, block_rq_issue, block_rq_complete)",
            Target::Net { .. } => {
                "attaching the packet programs (net_dev_queue, sock_send_length, net_dev_start_xmit, consume_skb, kfree_skb)"
            }
        }))?;
        Ok(IoWatch { skel, ring, received, band_link: None })
    }

    /// Classes the requests process `tgid` queues from now on.
    pub fn set_class(&mut self, tgid: u32, class: Class) -> Result<()> {
        self.skel.maps.classes.update(&tgid.to_ne_bytes(), &[class_byte(class)], MapFlags::ANY).map_err(bpf_err("classing a process"))
    }

    /// Stops classing process `tgid` (it exited or left its class).
    pub fn forget(&mut self, tgid: u32) {
        let _ = self.skel.maps.classes.delete(&tgid.to_ne_bytes());
    }

    /// Waits up to `timeout` for a wake-up, then returns every event in the
    /// ring, oldest first. The wait is [`super::wait_readable`], to the
    /// nanosecond: with libbpf's millisecond poll a preemption interval
    /// under 1 ms made the controller spin at SCHED_FIFO 90 (a third of a
    /// CPU on a network foreground's bursts).
    pub fn poll(&mut self, timeout: Duration) -> Result<Vec<IoEvent>> {
        super::wait_readable(self.ring.epoll_fd(), timeout.as_nanos().min(u128::from(u64::MAX)) as u64)?;
        // Every record, woken or not (those submitted without a wake-up
        // wait for this).
        self.ring.consume().map_err(bpf_err("reading the block-request events"))?;
        Ok(std::mem::take(&mut *self.received.borrow_mut()))
    }

    /// Attaches the band's classifier (loaded by [`IoWatch::start`] with a
    /// class) at the IP egress of every socket: at `cgroup_root`, the
    /// cgroup v2 hierarchy's root. The background's packets to the watched
    /// device get the class as their priority. It stays attached while the
    /// watch lives.
    pub fn attach_band(&mut self, cgroup_root: &std::path::Path) -> Result<()> {
        let dir = std::fs::File::open(cgroup_root).map_err(|e| Error::io(format!("opening {}", cgroup_root.display()), e))?;
        let link = self
            .skel
            .progs
            .band_classify
            .attach_cgroup(std::os::fd::AsRawFd::as_raw_fd(&dir))
            .map_err(bpf_err("attaching the background band's classifier (cgroup_skb/egress at the cgroup v2 root)"))?;
        self.band_link = Some(link);
        Ok(())
    }

    /// Packets the band's classifier gave the background class.
    pub fn band_background_packets(&self) -> u64 {
        self.skel.maps.bss_data.as_ref().map_or(0, |b| b.band_background_packets)
    }

    /// Events the kernel could not deliver because user space fell behind.
    pub fn lost_events(&self) -> u64 {
        self.skel.maps.bss_data.as_ref().map_or(0, |b| b.lost_events)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_the_kernel_layout() {
        let record = types::io_watch_event { ts_ns: 5_000, sector: 2048, bytes: 4096, tgid: 77, class: 2, kind: 1, ..Default::default() };
        let mut b = bpf::bytes_of(&record).to_vec();
        assert_eq!(b.len(), 32, "struct io_watch_event as io_watch.h lays it out");
        let e = decode(&b).unwrap();
        assert_eq!(e, IoEvent { ts_ns: 5_000, sector: 2048, bytes: 4096, tgid: 77, class: Class::Background, kind: Kind::Issue });
        assert_eq!(decode(&b[..25]), None);
        b[25] = 4;
        assert_eq!(decode(&b).map(|e| e.kind), Some(Kind::Dropped));
        b[24] = 3;
        assert_eq!(decode(&b), None);
    }
}
