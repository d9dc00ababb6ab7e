//! What a watched thread does, as the kernel sees it: each switch in, switch
//! out (preempted or blocked) and wake-up, with the kernel's timestamp, and
//! its total on-CPU time (`bpf/thread_watch.bpf.c`, `sched_switch` and
//! `sched_wakeup` tracepoints). A live server's controller turns these
//! events into the observations of the shared policy code.
//!
//! Each thread's state lives in the program's mapped data (`slots`), read
//! here with plain loads: no system call per read.

use irqlab_host::bpf::{self, Plain};
use irqlab_host::error::{Error, Result};
use libbpf_rs::skel::{OpenSkel, Skel, SkelBuilder};
use libbpf_rs::{MapCore, MapFlags, RingBuffer};
use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;

irqlab_host::bpf_program!("thread_watch");
use skel::{types, ThreadWatchSkel, ThreadWatchSkelBuilder};

// SAFETY: generated from the program's BTF: #[repr(C)] structs of integers.
unsafe impl Plain for types::watched {}
unsafe impl Plain for types::watch_event {}

/// How many threads one watch can follow (`WATCH_MAX` in thread_watch.h).
pub const MAX_THREADS: usize = consts::WATCH_MAX as usize;

/// What happened to a watched thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// Switched in: it runs from `ts_ns`.
    In,
    /// Switched out while still runnable.
    Preempted,
    /// Switched out to sleep (or to exit).
    Blocked,
    /// Woken: runnable from `ts_ns`.
    Wakeup,
    /// The watched threads' summed time reached the budget user space set
    /// ([`ThreadWatch::signal_at`]); `ran_ns` is that sum, at a NAPI poll's
    /// end.
    Budget,
    /// The waiter filter's key changed ([`ThreadWatch::filter_waiters`]):
    /// `ran_ns` holds the new key, as `u64` of an `i32`.
    Decision,
}

/// One event of a watched thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Event {
    /// CLOCK_MONOTONIC, ns (the clock of [`irqlab_host::rt::monotonic_ns`]).
    pub ts_ns: u64,
    pub tid: u32,
    pub kind: Kind,
    pub cpu: u32,
    /// The thread's completed on-CPU time after this event.
    pub ran_ns: u64,
}

/// Room for the loaded BPF object; it must outlive the [`ThreadWatch`].
pub type Storage = bpf::Storage;

/// Watches `tid` (again from scratch if it was): a free slot of the
/// program's `slots` is filled first (no time yet, not running; its runtime
/// clock now is the base), then the thread is added to `slot_of`, so the
/// program never sees a half-made slot. `taken`: the thread in each slot
/// (0: free). Exit 2 when every slot is taken.
fn insert(skel: &mut ThreadWatchSkel, taken: &mut [u32], tid: u32) -> Result<()> {
    let i = slot_for(taken, tid)?;
    let bss = skel.maps.bss_data.as_deref_mut().ok_or_else(|| Error::Failed("the thread-watch program has no mapped data".into()))?;
    let value = types::watched { base_rt: runtime_clock(tid), ..Default::default() };
    // SAFETY: points into the program's mapped data, live while the
    // skeleton is; the program does not read this slot until `slot_of`
    // names it, after the fence.
    unsafe { std::ptr::write_volatile(&mut bss.slots[i], value) };
    std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
    skel.maps
        .slot_of
        .update(&tid.to_ne_bytes(), &(i as u32).to_ne_bytes(), MapFlags::ANY)
        .map_err(bpf_err("adding a thread to the watch"))?;
    taken[i] = tid;
    Ok(())
}

/// The slot `tid` takes: its own if it has one, else the first free one.
fn slot_for(taken: &[u32], tid: u32) -> Result<usize> {
    match taken.iter().position(|&t| t == tid) {
        Some(i) => Ok(i),
        None => taken.iter().position(|&t| t == 0).ok_or_else(|| Error::Invalid(format!("more than {MAX_THREADS} threads to watch"))),
    }
}

/// A running watch over some threads.
pub struct ThreadWatch<'obj> {
    skel: ThreadWatchSkel<'obj>,
    ring: RingBuffer<'static>,
    received: Rc<RefCell<Vec<Event>>>,
    /// The watched thread in each of the program's `slots` (0: free).
    taken: [u32; MAX_THREADS],
}

use irqlab_host::bpf::err as bpf_err;

/// Decodes one ring-buffer record (`struct watch_event`).
fn decode(bytes: &[u8]) -> Option<Event> {
    let e: types::watch_event = bpf::read(bytes)?;
    let kind = match u64::from(e.kind) {
        consts::WATCH_IN => Kind::In,
        consts::WATCH_PREEMPTED => Kind::Preempted,
        consts::WATCH_BLOCKED => Kind::Blocked,
        consts::WATCH_WAKEUP => Kind::Wakeup,
        consts::WATCH_BUDGET => Kind::Budget,
        consts::WATCH_DECISION => Kind::Decision,
        _ => return None,
    };
    Some(Event { ts_ns: e.ts, ran_ns: e.ran_ns, tid: e.tid, kind, cpu: e.cpu })
}

/// A thread's scheduler runtime clock (`se.sum_exec_runtime`, ns): the
/// first field of /proc/TID/schedstat; 0 when it cannot be read.
fn runtime_clock(tid: u32) -> u64 {
    irqlab_host::procs::schedstat(tid as i32).map_or(0, |s| s.run_ns)
}

/// Loads the thread-watch BPF programs as `start` does, attaches nothing and unloads them:
/// whether this kernel's verifier accepts them (doctor's readiness). Exit
/// 3 naming the program it rejects and why.
pub fn check_loads() -> Result<()> {
    irqlab_host::bpf_trial::load_skel("the thread-watch BPF programs", ThreadWatchSkelBuilder::default())
}

impl<'obj> ThreadWatch<'obj> {
    /// Loads and attaches the watch for `tids` (at most [`MAX_THREADS`]).
    /// Exit 3 naming what is missing (BTF, CAP_BPF, CAP_PERFMON).
    pub fn start(storage: &'obj mut Storage, tids: &[u32]) -> Result<ThreadWatch<'obj>> {
        irqlab_host::privilege::require_bpf("load and attach the thread-watch BPF program")?;
        if tids.len() > MAX_THREADS {
            return Err(Error::Invalid(format!("{} threads to watch: at most {MAX_THREADS}", tids.len())));
        }
        let mut open = ThreadWatchSkelBuilder::default().open(&mut storage.0).map_err(bpf_err("opening the thread-watch BPF object"))?;
        bpf::size_ring(&mut open.maps.events, "thread-watch events")?;
        let mut skel = open.load().map_err(bpf_err("loading the thread-watch BPF programs"))?;
        let mut taken = [0; MAX_THREADS];
        for &tid in tids {
            insert(&mut skel, &mut taken, tid)?;
        }
        let (ring, received) = bpf::ring_sink(&skel.maps.events, "thread-watch events", decode)?;
        skel.attach().map_err(bpf_err("attaching the thread-watch programs"))?;
        let mut watch = ThreadWatch { skel, ring, received, taken };
        for &tid in tids {
            watch.count_a_run_in_progress(tid)?;
        }
        Ok(watch)
    }

    /// A thread on a CPU when the watch attached shows no switch in until it
    /// next leaves the CPU, and its run so far would be lost: a thread the
    /// kernel calls runnable ('R') and that has not been seen switching is
    /// counted as running from now. Were it only waiting on a run queue,
    /// its switch in overwrites this start before any time is added.
    fn count_a_run_in_progress(&mut self, tid: u32) -> Result<()> {
        let runnable = irqlab_host::task_stat::of(tid as i32).is_some_and(|s| s.state == 'R');
        let (Some(i), Some(w)) = (self.slot(tid), self.entry(tid)) else { return Ok(()) };
        if runnable && w.on_since == 0 && w.switches_in == 0 {
            if let Some(bss) = self.skel.maps.bss_data.as_deref_mut() {
                // SAFETY: points into the program's mapped data, live while
                // the skeleton is; one aligned u64 store.
                unsafe { std::ptr::write_volatile(&mut bss.slots[i].on_since, irqlab_host::rt::monotonic_ns()) };
            }
        }
        Ok(())
    }

    /// `tid`'s slot in the program's `slots`.
    fn slot(&self, tid: u32) -> Option<usize> {
        self.taken.iter().position(|&t| t == tid && tid != 0)
    }

    /// `tid`'s state now, read from the mapped data (no system call); None
    /// when it is not watched. The program updates a thread's fields one by
    /// one at its switches, as it did in a map's value: a read during one
    /// may see some fields from before it.
    fn entry(&self, tid: u32) -> Option<types::watched> {
        let i = self.slot(tid)?;
        let bss = self.skel.maps.bss_data.as_deref()?;
        // SAFETY: points into the program's mapped data, live while the
        // skeleton is; plain integers, any bit pattern valid.
        Some(unsafe { std::ptr::read_volatile(&bss.slots[i]) })
    }

    /// Waits up to `timeout` for events and returns those that came, oldest
    /// first (possibly none).
    pub fn poll(&mut self, timeout: Duration) -> Result<Vec<Event>> {
        self.ring.poll(timeout).map_err(bpf_err("polling the thread-watch events"))?;
        Ok(std::mem::take(&mut *self.received.borrow_mut()))
    }

    /// The ring buffer's epoll fd: readable while events wait, for a
    /// caller that sleeps with its own (ns-precision) timeout.
    pub fn ring_epoll_fd(&self) -> i32 {
        self.ring.epoll_fd()
    }

    /// Takes the events already delivered, without waiting.
    pub fn drain(&mut self) -> Result<Vec<Event>> {
        let mut events = Vec::new();
        self.drain_into(&mut events)?;
        Ok(events)
    }

    /// Replaces `events` with the events already delivered, without
    /// waiting. Both buffers keep their memory, so a controller draining
    /// at every wake-up does not allocate (allocating afresh each time was
    /// a fifth of the sporadic server's time under a flood; issue 42).
    pub fn drain_into(&mut self, events: &mut Vec<Event>) -> Result<()> {
        self.ring.consume().map_err(bpf_err("reading the thread-watch events"))?;
        events.clear();
        events.append(&mut self.received.borrow_mut());
        Ok(())
    }

    /// `tid`'s on-CPU time so far, the current run included, as of `now_ns`
    /// (CLOCK_MONOTONIC); None when `tid` is not watched.
    pub fn ran_ns(&self, tid: u32, now_ns: u64) -> Result<Option<u64>> {
        let w = self.entry(tid);
        Ok(w.map(|w| w.ran_ns + if w.on_since > 0 { now_ns.saturating_sub(w.on_since) } else { 0 }))
    }

    /// Whether `tid` is on a CPU right now, as the last switch left it.
    pub fn running(&self, tid: u32) -> Result<bool> {
        let w = self.entry(tid);
        Ok(w.is_some_and(|w| w.on_since > 0))
    }

    /// Watches one more thread from now on (at most [`MAX_THREADS`] in all).
    pub fn add(&mut self, tid: u32) -> Result<()> {
        insert(&mut self.skel, &mut self.taken, tid)?;
        self.count_a_run_in_progress(tid)
    }

    /// Marks `at_ns` (CLOCK_MONOTONIC): from then on the kernel keeps each
    /// watched thread's first switch out ([`ThreadWatch::left_after_mark`]).
    /// A write to the program's mapped data: no system call.
    pub fn mark(&mut self, at_ns: u64) {
        if let Some(bss) = self.skel.maps.bss_data.as_deref_mut() {
            bss.mark_ns = at_ns;
        }
    }

    /// When `tid` first left a CPU since the mark; None while it has not
    /// (or when it is not watched, or nothing was marked).
    pub fn left_after_mark(&self, tid: u32) -> Result<Option<u64>> {
        let mark = self.skel.maps.bss_data.as_ref().map_or(0, |b| b.mark_ns);
        let w = self.entry(tid);
        Ok(w.map(|w| w.off_after_mark).filter(|&t| mark > 0 && t >= mark))
    }

    /// Asks for one [`Kind::Budget`] event (sent even when silenced) at the
    /// end of the first NAPI poll of a watched thread after which the
    /// watched threads' summed on-CPU time ([`ThreadWatch::ran_ns`] added
    /// up) is `sum_ns` or more; 0: none. Writes to the program's mapped
    /// data: no system call.
    pub fn signal_at(&mut self, sum_ns: u64) {
        if let Some(bss) = self.skel.maps.bss_data.as_deref_mut() {
            // The new sum before the flag is cleared: a poll in between
            // sees the flag still set, never the old sum unsignalled
            // (volatile stores, a fence between them).
            // SAFETY: both point into the program's mapped data, live
            // while the skeleton is.
            unsafe { std::ptr::write_volatile(&mut bss.budget_at_ns, sum_ns) };
            std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
            unsafe { std::ptr::write_volatile(&mut bss.budget_signalled, 0) };
        }
    }

    /// Turns on the waiter filter: a watched thread that sleeps inside one
    /// of `calls` (system call numbers) waits, and one [`Kind::Decision`]
    /// event comes when the highest waiting key (see [`ThreadWatch::waiting`])
    /// changes, `floor_key` when nobody waits. The other events stop
    /// ([`ThreadWatch::silence`]). Exit 2 for more calls than the program
    /// holds.
    pub fn filter_waiters(&mut self, floor_key: i32, calls: &[u64]) -> Result<()> {
        if calls.len() > consts::WATCH_MAX_CALLS as usize {
            return Err(Error::Invalid(format!("{} system calls to match: at most {}", calls.len(), consts::WATCH_MAX_CALLS)));
        }
        if let Some(bss) = self.skel.maps.bss_data.as_deref_mut() {
            for (slot, &nr) in bss.receive_calls.iter_mut().zip(calls) {
                *slot = nr as i64;
            }
            bss.receive_calls_n = calls.len() as u32;
            bss.floor_key = floor_key;
            bss.signalled_key = floor_key;
            bss.silent = 1;
            std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
            // SAFETY: points into the program's mapped data, live while the
            // skeleton is; the program reads it on every switch.
            unsafe { std::ptr::write_volatile(&mut bss.waiter_filter, 1) };
        }
        Ok(())
    }

    /// The waiter filter's view of `tid`: Some(key of its scheduling)
    /// while it sleeps in a matched call, None otherwise (or unwatched).
    pub fn waiting(&self, tid: u32) -> Result<Option<i32>> {
        let w = self.entry(tid);
        Ok(w.filter(|w| w.waiting != 0).map(|w| w.wait_key))
    }

    /// Lazy mode: events are delivered without waking the reader, who
    /// reads them at its next wake-up ([`ThreadWatch::drain`]), except the
    /// wake-up and the switch in of a thread [`ThreadWatch::wake_on_start`]
    /// names.
    pub fn set_lazy(&mut self) {
        if let Some(bss) = self.skel.maps.bss_data.as_deref_mut() {
            bss.lazy = 1;
        }
    }

    /// In lazy mode, whether the start of `tid`'s runs (its wake-ups and
    /// switch ins) wakes the reader. A write to the program's mapped data:
    /// no system call. Exit 2 when every slot is taken ([`MAX_THREADS`]).
    pub fn wake_on_start(&mut self, tid: u32, wake: bool) -> Result<()> {
        let Some(bss) = self.skel.maps.bss_data.as_deref_mut() else { return Ok(()) };
        let slots = &mut bss.wake_on_start;
        let at = slots.iter().position(|&t| t == tid);
        let target = match (wake, at) {
            (true, Some(_)) | (false, None) => return Ok(()),
            (true, None) => slots.iter().position(|&t| t == 0).ok_or_else(|| Error::Invalid(format!("more than {MAX_THREADS} threads")))?,
            (false, Some(i)) => i,
        };
        // SAFETY: points into the program's mapped data, live while the
        // skeleton is; one aligned u32 store the program reads whole.
        unsafe { std::ptr::write_volatile(&mut slots[target], if wake { tid } else { 0 }) };
        Ok(())
    }

    /// How many waits the waiter filter saw begin.
    pub fn receive_waits(&self) -> u64 {
        self.skel.maps.bss_data.as_ref().map_or(0, |b| b.receive_waits)
    }

    /// Stops the events (and the reader's wake-ups): for a reader that only
    /// needs [`ThreadWatch::ran_ns`] and [`ThreadWatch::running`], which
    /// read the mapped data.
    pub fn silence(&mut self) {
        if let Some(bss) = self.skel.maps.bss_data.as_deref_mut() {
            bss.silent = 1;
        }
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
    fn a_thread_keeps_its_slot_and_a_new_one_takes_the_first_free() {
        let mut taken = [0u32; 4];
        taken[0] = 7;
        taken[2] = 9;
        assert_eq!(slot_for(&taken, 9).unwrap(), 2, "watched again: the same slot");
        assert_eq!(slot_for(&taken, 11).unwrap(), 1);
        taken[1] = 11;
        taken[3] = 12;
        let full = slot_for(&taken, 13).unwrap_err();
        assert_eq!(full.exit_code(), 2, "{full}");
    }

    #[test]
    fn decodes_the_kernel_layout() {
        let e = types::watch_event { ts: 1_000, ran_ns: 250, tid: 42, kind: consts::WATCH_BLOCKED as u32, cpu: 1, ..Default::default() };
        let bytes = bpf::bytes_of(&e).to_vec();
        assert_eq!(bytes.len(), 32, "struct watch_event as thread_watch.h lays it out");
        assert_eq!(decode(&bytes), Some(Event { ts_ns: 1_000, tid: 42, kind: Kind::Blocked, cpu: 1, ran_ns: 250 }));
        assert_eq!(decode(&bytes[..20]), None);
        let odd = types::watch_event { kind: 9, ..e };
        assert_eq!(decode(bpf::bytes_of(&odd)), None);
        assert_eq!(std::mem::size_of::<types::watched>(), 48);
        let d = types::watch_event { kind: consts::WATCH_DECISION as u32, ran_ns: (-3_i64) as u64, ..e };
        assert_eq!(decode(bpf::bytes_of(&d)).map(|e| (e.kind, e.ran_ns as i64 as i32)), Some((Kind::Decision, -3)));
    }
}
