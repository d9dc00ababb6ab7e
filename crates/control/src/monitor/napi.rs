//! What a threaded-NAPI kthread's polls did (`bpf/napi_watch.bpf.c`, the
//! `napi:napi_poll` tracepoint): per watched kthread the polls, the packets
//! they processed, the polls that used their whole budget, and, on veth,
//! the packets left in the receive ring right after the last poll. Only
//! polls the kthread itself makes are counted (its tid is the key), so
//! busy-polling sockets or a softirq poll of the same NAPI are not.
//! Nothing is sent per event: [`NapiWatch::totals`] reads the map.

use irqlab_host::bpf::{self, err as bpf_err, Plain};
use irqlab_host::error::{Error, Result};
use libbpf_rs::skel::{OpenSkel, Skel, SkelBuilder};
use libbpf_rs::{MapCore, MapFlags};

irqlab_host::bpf_program!("napi_watch");
use skel::{types, NapiWatchSkel, NapiWatchSkelBuilder};

// SAFETY: generated from the program's BTF: a #[repr(C)] struct of integers.
unsafe impl Plain for types::napi_polls {}

/// How many kthreads one watch follows (`NAPI_WATCH_MAX` in napi_watch.h).
pub const MAX_THREADS: usize = consts::NAPI_WATCH_MAX as usize;

/// The polls of the watched kthreads so far, summed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct Polls {
    pub polls: u64,
    /// Packets processed (`work` summed).
    pub work: u64,
    /// Polls that used their whole budget: the NAPI had more pending.
    pub full_polls: u64,
    /// When the latest poll of any watched kthread ended (CLOCK_MONOTONIC ns; 0: none yet).
    pub last_ts_ns: u64,
    /// Whether that latest poll used its whole budget, and the budget.
    pub last_full: bool,
    pub last_budget: u32,
    /// veth: packets left in the rings right after each kthread's last
    /// poll, summed; None when no watched NAPI is a veth one.
    pub ring_left: Option<u64>,
}

/// Room for the loaded BPF object; it must outlive the [`NapiWatch`].
pub type Storage = bpf::Storage;

/// A running count of some kthreads' NAPI polls.
pub struct NapiWatch<'obj> {
    skel: NapiWatchSkel<'obj>,
    tids: Vec<u32>,
}

/// Sums the kthreads' counters.
fn sum(raws: &[types::napi_polls]) -> Polls {
    let mut p = Polls::default();
    let mut ring: Option<u64> = None;
    for r in raws {
        p.polls += r.polls;
        p.work += r.work;
        p.full_polls += r.full_polls;
        if r.last_ts >= p.last_ts_ns && r.polls > 0 {
            p.last_ts_ns = r.last_ts;
            p.last_full = r.last_budget > 0 && r.last_work >= r.last_budget;
            p.last_budget = r.last_budget;
        }
        if r.last_ring >= 0 {
            ring = Some(ring.unwrap_or(0) + r.last_ring as u64);
        }
    }
    p.ring_left = ring;
    p
}

/// The address of a kernel function, from /proc/kallsyms (root sees real
/// addresses; others zeros, read as unknown).
pub fn kernel_symbol(name: &str) -> Option<u64> {
    let text = std::fs::read_to_string("/proc/kallsyms").ok()?;
    text.lines().find_map(|line| {
        let mut f = line.split_whitespace();
        let (addr, _kind, sym) = (f.next()?, f.next()?, f.next()?);
        if sym != name {
            return None;
        }
        u64::from_str_radix(addr, 16).ok().filter(|&a| a != 0)
    })
}

/// Loads the NAPI-poll BPF program as `start` does, attaches nothing and unloads them:
/// whether this kernel's verifier accepts them (doctor's readiness). Exit
/// 3 naming the program it rejects and why.
pub fn check_loads() -> Result<()> {
    irqlab_host::bpf_trial::load_skel("the NAPI-poll BPF program", NapiWatchSkelBuilder::default())
}

impl<'obj> NapiWatch<'obj> {
    /// Loads and attaches the count for the kthreads `tids`. Exit 3 naming
    /// what is missing (BTF, CAP_BPF, the tracepoint).
    pub fn start(storage: &'obj mut Storage, tids: &[u32]) -> Result<NapiWatch<'obj>> {
        irqlab_host::privilege::require_bpf("load and attach the NAPI-poll BPF program")?;
        if tids.len() > MAX_THREADS {
            return Err(Error::Invalid(format!("{} NAPI threads to watch: at most {MAX_THREADS}", tids.len())));
        }
        let open = NapiWatchSkelBuilder::default().open(&mut storage.0).map_err(bpf_err("opening the NAPI-poll BPF object"))?;
        let mut skel = open.load().map_err(bpf_err("loading the NAPI-poll BPF program"))?;
        if let (Some(bss), Some(addr)) = (skel.maps.bss_data.as_deref_mut(), kernel_symbol("veth_poll")) {
            bss.veth_poll_addr = addr;
        }
        for &tid in tids {
            // The ring's occupancy unknown until a veth poll says.
            let value = types::napi_polls { last_ring: -1, ..Default::default() };
            skel.maps
                .polls
                .update(&tid.to_ne_bytes(), bpf::bytes_of(&value), MapFlags::ANY)
                .map_err(bpf_err("adding a NAPI thread to the count"))?;
        }
        skel.attach().map_err(bpf_err("attaching the NAPI-poll program (napi:napi_poll)"))?;
        Ok(NapiWatch { skel, tids: tids.to_vec() })
    }

    /// The counters now, summed over the watched kthreads.
    pub fn totals(&self) -> Result<Polls> {
        let mut raws = Vec::with_capacity(self.tids.len());
        for tid in &self.tids {
            if let Some(bytes) =
                self.skel.maps.polls.lookup(&tid.to_ne_bytes(), MapFlags::ANY).map_err(bpf_err("reading the NAPI-poll count"))?
            {
                raws.extend(bpf::read::<types::napi_polls>(&bytes));
            }
        }
        Ok(sum(&raws))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(polls: u64, work: u64, last_ts: u64, last_work: u32, last_ring: i64) -> types::napi_polls {
        types::napi_polls { polls, work, full_polls: polls / 2, last_ts, last_work, last_budget: 64, last_ring }
    }

    #[test]
    fn decodes_and_sums_the_kernel_layout() {
        assert_eq!(std::mem::size_of::<types::napi_polls>(), 48, "struct napi_polls as napi_watch.h lays it out");
        let a = bpf::read::<types::napi_polls>(bpf::bytes_of(&raw(10, 300, 5_000, 64, 17))).unwrap();
        let b = raw(4, 20, 4_000, 3, -1);
        assert_eq!(a.last_ring, 17);
        assert!(bpf::read::<types::napi_polls>(&bpf::bytes_of(&a)[..40]).is_none());
        let p = sum(&[a, b]);
        assert_eq!((p.polls, p.work, p.full_polls), (14, 320, 7));
        // The latest poll is a's, and it used its whole budget.
        assert_eq!((p.last_ts_ns, p.last_full, p.last_budget), (5_000, true, 64));
        assert_eq!(p.ring_left, Some(17));
        assert_eq!(sum(&[b]).ring_left, None);
    }
}
