//! The measuring loop. It reads the clock as fast as it can and records
//! every jump above the threshold into a preallocated log. Inside the loop:
//! no allocation, no logging, no system call (the clock is the TSC or the
//! vDSO; the stop flag and progress are plain atomics).

use super::clock::Ticks;
use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

/// One preemption in raw ticks: started after the read at `start`
/// (relative to the loop's first read) and lasted `len` ticks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[repr(C)]
pub struct RawGap {
    pub start: u64,
    pub len: u64,
}

/// A fixed-capacity, single-writer, append-only gap log. The loop appends;
/// a monitor thread may read the published prefix at any time (the count
/// is stored with Release after the entry is written).
pub struct GapLog {
    slots: Box<[UnsafeCell<RawGap>]>,
    len: AtomicUsize,
    /// Ticks since the first read, published every few thousand rounds.
    elapsed: AtomicU64,
    /// Rounds of the loop so far, published with `elapsed`.
    rounds: AtomicU64,
}

// SAFETY: one writer (the loop) appends to slots beyond `len`; readers only
// read slots below the published `len`, which are never written again.
unsafe impl Sync for GapLog {}

impl GapLog {
    /// A log for `capacity` gaps, every page touched so the loop never
    /// page-faults on first write (with mlockall they stay resident).
    /// Fallible: a failed allocation would otherwise abort the process,
    /// and an abort runs no restore of what the run changed.
    pub fn with_capacity(capacity: usize) -> Result<GapLog, std::collections::TryReserveError> {
        let mut slots = Vec::new();
        slots.try_reserve_exact(capacity.max(1))?;
        slots.extend((0..capacity.max(1)).map(|_| UnsafeCell::new(RawGap::default())));
        let slots = slots.into_boxed_slice();
        Ok(GapLog { slots, len: AtomicUsize::new(0), elapsed: AtomicU64::new(0), rounds: AtomicU64::new(0) })
    }

    pub fn capacity(&self) -> usize {
        self.slots.len()
    }

    /// The gaps published so far.
    pub fn published(&self) -> &[RawGap] {
        let n = self.len.load(Ordering::Acquire);
        // SAFETY: the first n slots are fully written and never written again;
        // UnsafeCell<RawGap> has the layout of RawGap.
        unsafe { std::slice::from_raw_parts(self.slots.as_ptr().cast::<RawGap>(), n) }
    }

    /// (ticks since start, loop rounds) as last published by the loop.
    pub fn progress(&self) -> (u64, u64) {
        (self.elapsed.load(Ordering::Relaxed), self.rounds.load(Ordering::Relaxed))
    }
}

/// What the loop did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SpinOutcome {
    pub first: u64,
    pub last: u64,
    pub rounds: u64,
    /// The log filled up before the end.
    pub overflow: bool,
    /// Stopped by the stop flag rather than by the deadline.
    pub stopped: bool,
}

/// Spins until `end` ticks (absolute), `stop`, or a full log.
#[inline(never)]
pub fn spin<C: Ticks>(clock: &C, log: &GapLog, threshold: u64, end: u64, stop: &AtomicBool) -> SpinOutcome {
    let cap = log.slots.len();
    let slots = log.slots.as_ptr();
    let mut n = log.len.load(Ordering::Relaxed);
    let first = clock.now();
    let mut prev = first;
    let mut rounds: u64 = 0;
    let mut overflow = false;
    let mut stopped = false;
    loop {
        let now = clock.now();
        let delta = now.wrapping_sub(prev);
        if delta > threshold {
            if n == cap {
                overflow = true;
                break;
            }
            // SAFETY: n < cap; only this thread writes slots at or beyond `len`.
            unsafe { *(*slots.add(n)).get() = RawGap { start: prev - first, len: delta } };
            n += 1;
            log.len.store(n, Ordering::Release);
        }
        prev = now;
        rounds += 1;
        if rounds & 4095 == 0 {
            log.elapsed.store(now - first, Ordering::Relaxed);
            log.rounds.store(rounds, Ordering::Relaxed);
            if now >= end {
                break;
            }
            if stop.load(Ordering::Relaxed) {
                stopped = true;
                break;
            }
        }
    }
    log.elapsed.store(prev - first, Ordering::Relaxed);
    log.rounds.store(rounds, Ordering::Relaxed);
    SpinOutcome { first, last: prev, rounds, overflow, stopped }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    /// A scripted clock: returns the next value of a sequence, then keeps
    /// counting by 1 past the end.
    struct Script(Vec<u64>, Cell<usize>);
    impl Ticks for Script {
        fn now(&self) -> u64 {
            let i = self.1.get();
            self.1.set(i + 1);
            self.0.get(i).copied().unwrap_or_else(|| self.0.last().unwrap() + (i - self.0.len() + 1) as u64)
        }
    }

    #[test]
    fn an_impossible_log_is_an_error_not_an_abort() {
        assert!(GapLog::with_capacity(usize::MAX / 16).is_err());
    }

    #[test]
    fn records_jumps_above_threshold_only() {
        let clock = Script(vec![100, 101, 102, 150, 151, 152, 400, 401], Cell::new(0));
        let log = GapLog::with_capacity(10).unwrap();
        let out = spin(&clock, &log, 10, 5000, &AtomicBool::new(false));
        assert_eq!(log.published(), &[RawGap { start: 2, len: 48 }, RawGap { start: 52, len: 248 }]);
        assert!(!out.overflow && !out.stopped);
        assert_eq!(out.first, 100);
        assert!(out.last >= 5000);
    }

    #[test]
    fn a_full_log_stops_the_loop() {
        let clock = Script((0..100).map(|i| i * 100).collect(), Cell::new(0));
        let log = GapLog::with_capacity(3).unwrap();
        let out = spin(&clock, &log, 10, u64::MAX, &AtomicBool::new(false));
        assert!(out.overflow);
        assert_eq!(log.published().len(), 3);
    }

    #[test]
    fn the_stop_flag_ends_the_loop() {
        let clock = Script(vec![0], Cell::new(0));
        let log = GapLog::with_capacity(3).unwrap();
        let out = spin(&clock, &log, 10, u64::MAX, &AtomicBool::new(true));
        assert!(out.stopped);
        assert_eq!(out.rounds, 4096);
    }
}
