//! Who receives from a device: the processes owning a UDP or TCP socket
//! whose local address is one of the device's IPv4 addresses or the
//! wildcard, and their threads.
//!
//! Found from `/proc/net/udp` and `/proc/net/tcp` (local address and the
//! socket's inode) and each process's fd table (`socket:[INODE]` links).
//! Chosen over BPF socket hooks because it needs no program and no kprobe,
//! and sees sockets bound before the controller started. What it misses:
//! IPv6 sockets, raw and packet sockets, and a socket bound to another
//! address that still receives from the device (routing through it); the
//! controller rescans every few hundred milliseconds (TCP once a second,
//! [`Finder`]), so a receiver that binds later is found then.

use irqlab_host::error::{Error, Result};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};
use std::net::Ipv4Addr;

/// One receiving socket and its owner.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Candidate {
    pub pid: i32,
    pub comm: String,
    pub protocol: &'static str,
    pub local: String,
    pub inode: u64,
}

/// The IPv4 addresses of `dev`.
pub fn device_addrs(dev: &str) -> Result<Vec<Ipv4Addr>> {
    let addrs = nix::ifaddrs::getifaddrs().map_err(|e| Error::io("listing the interface addresses", std::io::Error::from(e)))?;
    Ok(addrs.filter(|a| a.interface_name == dev).filter_map(|a| a.address.and_then(|s| s.as_sockaddr_in().map(|v4| v4.ip()))).collect())
}

/// (local address, port, inode) of each socket of a `/proc/net/{udp,tcp}`
/// table (IPv4 addresses are written as little-endian hex words).
pub fn parse_proc_net(text: &str) -> Vec<(Ipv4Addr, u16, u64)> {
    text.lines()
        .skip(1)
        .filter_map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            let (addr, port) = f.get(1)?.split_once(':')?;
            let ip = Ipv4Addr::from(u32::from_str_radix(addr, 16).ok()?.swap_bytes());
            let port = u16::from_str_radix(port, 16).ok()?;
            let inode = f.get(9)?.parse().ok()?;
            Some((ip, port, inode))
        })
        .collect()
}

/// The socket inodes among `wanted` that the fd table of `pid` holds.
fn sockets_of(pid: i32, wanted: &BTreeSet<u64>) -> Vec<u64> {
    let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else { return Vec::new() };
    fds.flatten()
        .filter_map(|fd| {
            let link = std::fs::read_link(fd.path()).ok()?;
            link.to_str()?.strip_prefix("socket:[")?.strip_suffix(']')?.parse().ok()
        })
        .filter(|inode| wanted.contains(inode))
        .collect()
}

fn pids() -> BTreeSet<i32> {
    irqlab_host::procs::pids().into_iter().collect()
}

/// The receivers of a device, found again on each [`Finder::find`] at a
/// cost that does not grow with every fd of every process: the fd tables
/// are read in full only when a new receiving socket appeared (a process
/// that was there may own it), else only the new processes' (a fork shares
/// its parent's sockets). Reading them all cost ~7 ms a time on a quiet
/// 2-CPU VM, 3% of a CPU at a 250 ms rescan (issue 42). Missed: a socket
/// passed to a process that was already there (SCM_RIGHTS), until the
/// next new socket; a process whose PID was reused in between.
///
/// `/proc/net/tcp` is read at most every [`TCP_LOOK_NS`]: the kernel walks
/// its whole established-connection hash for it (262,144 buckets on this
/// 24 GiB VM: 5.1 ms a read with one socket open, against 65 us for
/// `/proc/net/udp`), which alone was 2% of a CPU at a 250 ms rescan
/// (issue 42). A TCP receiver is found within a second, a UDP one at the
/// next rescan.
#[derive(Debug, Default)]
pub struct Finder {
    /// The wanted socket inodes at the last look.
    wanted: BTreeSet<u64>,
    /// The processes whose fd tables were read, and the wanted sockets each held.
    scanned: BTreeMap<i32, Vec<u64>>,
    /// The TCP table's sockets at its last read, and when that was.
    tcp: Vec<(Ipv4Addr, u16, u64)>,
    tcp_read_at: Option<u64>,
}

/// How often [`Finder`] reads `/proc/net/tcp`.
pub const TCP_LOOK_NS: u64 = 1_000_000_000;

impl Finder {
    /// The receivers of `dev` now (one entry per socket and owner).
    pub fn find(&mut self, dev: &str) -> Result<Vec<Candidate>> {
        let addrs = device_addrs(dev)?;
        let now_ns = irqlab_host::rt::monotonic_ns();
        if self.tcp_read_at.is_none_or(|at| now_ns.saturating_sub(at) >= TCP_LOOK_NS) {
            self.tcp = parse_proc_net(&std::fs::read_to_string("/proc/net/tcp").unwrap_or_default());
            self.tcp_read_at = Some(now_ns);
        }
        let udp = parse_proc_net(&std::fs::read_to_string("/proc/net/udp").unwrap_or_default());
        let mut sockets = Vec::new();
        for (protocol, table) in [("udp", &udp), ("tcp", &self.tcp)] {
            for &(ip, port, inode) in table {
                if inode != 0 && (ip.is_unspecified() || addrs.contains(&ip)) {
                    sockets.push((protocol, format!("{ip}:{port}"), inode));
                }
            }
        }
        let wanted: BTreeSet<u64> = sockets.iter().map(|s| s.2).collect();
        let now = pids();
        if !wanted.is_subset(&self.wanted) {
            self.scanned.clear();
        }
        self.scanned.retain(|pid, _| now.contains(pid));
        for pid in now {
            self.scanned.entry(pid).or_insert_with(|| sockets_of(pid, &wanted));
        }
        self.wanted = wanted;
        let mut found = Vec::new();
        for (protocol, local, inode) in sockets {
            for (&pid, _) in self.scanned.iter().filter(|(_, held)| held.contains(&inode)) {
                let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default().trim_end().to_string();
                found.push(Candidate { pid, comm, protocol, local: local.clone(), inode });
            }
        }
        Ok(found)
    }
}

/// The receivers of `dev` now, found once.
pub fn find(dev: &str) -> Result<Vec<Candidate>> {
    Finder::default().find(dev)
}

/// System calls a thread blocks in while it waits for data from a socket
/// (x86_64 numbers): read, poll, select, recvfrom, recvmsg, epoll_wait,
/// pselect6, ppoll, epoll_pwait, recvmmsg, epoll_pwait2.
/// (The thread watch's waiter filter matches them in the kernel.)
pub const RECEIVE_CALLS: [u64; 11] = [0, 7, 23, 45, 47, 232, 270, 271, 281, 299, 441];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_net_lines_give_address_port_and_inode() {
        let text = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode ref pointer drops\n\
                    \x20 123: 0500D50A:1389 00000000:0000 07 00000000:00000000 00:00000000 00000000     0        0 4242 2 0000000000000000 0\n\
                    \x20 124: 00000000:0035 00000000:0000 07 00000000:00000000 00:00000000 00000000     0        0 77 2 0000000000000000 0\n";
        assert_eq!(parse_proc_net(text), vec![(Ipv4Addr::new(10, 213, 0, 5), 5001, 4242), (Ipv4Addr::UNSPECIFIED, 53, 77)]);
        assert!(parse_proc_net("header only\n").is_empty());
    }

    #[test]
    fn this_process_owns_the_socket_it_binds_on_loopback() {
        let s = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let port = s.local_addr().unwrap().port();
        let found = find("lo").unwrap();
        let me = std::process::id() as i32;
        assert!(found.iter().any(|c| c.pid == me && c.protocol == "udp" && c.local == format!("127.0.0.1:{port}")), "{found:?}");
        assert!(irqlab_host::procs::tids(me).contains(&me));
    }

    #[test]
    fn a_finder_finds_a_socket_bound_after_its_first_look_by_a_process_it_had_read() {
        let mut finder = Finder::default();
        finder.find("lo").unwrap();
        let me = std::process::id() as i32;
        assert!(finder.scanned.contains_key(&me), "this process's fd table was read");
        let s = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let local = format!("127.0.0.1:{}", s.local_addr().unwrap().port());
        let found = finder.find("lo").unwrap();
        assert!(found.iter().any(|c| c.pid == me && c.local == local), "{found:?}");
    }
}
