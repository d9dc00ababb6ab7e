//! The probe's clock: the TSC where it is constant and keeps running in
//! idle states (`constant_tsc` + `nonstop_tsc`), calibrated against
//! CLOCK_MONOTONIC over the run; otherwise clock_gettime(CLOCK_MONOTONIC)
//! through the vDSO (slower per read, so a coarser probe).

use serde::Serialize;

/// Which clock the loop reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ClockKind {
    Tsc,
    ClockGettime,
}

/// A clock the busy loop reads in raw ticks.
pub trait Ticks {
    fn now(&self) -> u64;
}

/// Time-stamp counter (x86_64 `rdtsc`).
pub struct Tsc;

impl Ticks for Tsc {
    #[inline(always)]
    fn now(&self) -> u64 {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: rdtsc has no preconditions on x86_64.
        unsafe {
            core::arch::x86_64::_rdtsc()
        }
        #[cfg(not(target_arch = "x86_64"))]
        monotonic_ns()
    }
}

/// CLOCK_MONOTONIC in ns; ticks are nanoseconds.
pub struct Monotonic;

impl Ticks for Monotonic {
    #[inline(always)]
    fn now(&self) -> u64 {
        monotonic_ns()
    }
}

pub use irqlab_host::rt::monotonic_ns;

pub use irqlab_host::machine::tsc_usable;

/// A (ticks, CLOCK_MONOTONIC ns) pair read back to back; the pair with the
/// shortest bracketing read out of a few is kept so a preemption between
/// the two reads does not skew the calibration.
pub fn pair(clock: &impl Ticks) -> (u64, u64) {
    let mut best = (0, 0, u64::MAX);
    for _ in 0..16 {
        let a = clock.now();
        let ns = monotonic_ns();
        let b = clock.now();
        if b - a < best.2 {
            best = (a + (b - a) / 2, ns, b - a);
        }
    }
    (best.0, best.1)
}

/// Ticks per ns between two pairs.
pub fn rate(start: (u64, u64), end: (u64, u64)) -> f64 {
    let ns = end.1.saturating_sub(start.1).max(1) as f64;
    end.0.saturating_sub(start.0) as f64 / ns
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tsc_calibrates_against_monotonic() {
        if let Err(why) = tsc_usable() {
            eprintln!("tsc_calibrates_against_monotonic: skipped: {why}");
            return;
        }
        let a = pair(&Tsc);
        std::thread::sleep(std::time::Duration::from_millis(30));
        let b = pair(&Tsc);
        let r = rate(a, b);
        // Any real TSC runs between 0.5 and 10 GHz.
        assert!((0.5..10.0).contains(&r), "{r} ticks/ns");
    }
}
