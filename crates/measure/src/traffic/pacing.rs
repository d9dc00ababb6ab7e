//! Paced sending: absolute send times on CLOCK_MONOTONIC, sleeping for the
//! long part of a wait and busy-waiting the last stretch, because a timer
//! wake-up on a normal thread is late by tens of microseconds (timer slack,
//! wake-up latency) while the intervals asked for go down to microseconds.

use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64;

/// Waits shorter than this are busy-waited; longer ones sleep until this
/// much before the deadline, then busy-wait.
pub const BUSY_WAIT_BELOW_NS: u64 = 200_000;

/// Current CLOCK_MONOTONIC in ns (vDSO: no system call).
pub fn now_ns() -> u64 {
    let ts = nix::time::clock_gettime(nix::time::ClockId::CLOCK_MONOTONIC).expect("CLOCK_MONOTONIC exists");
    ts.tv_sec() as u64 * 1_000_000_000 + ts.tv_nsec() as u64
}

/// Returns at (or just after) `deadline_ns`.
pub fn wait_until(deadline_ns: u64) {
    let now = now_ns();
    if deadline_ns > now + BUSY_WAIT_BELOW_NS {
        let wake = deadline_ns - BUSY_WAIT_BELOW_NS / 2;
        let ts = nix::sys::time::TimeSpec::new((wake / 1_000_000_000) as _, (wake % 1_000_000_000) as _);
        // An early return (signal) just means more busy-waiting below.
        let _ = nix::time::clock_nanosleep(nix::time::ClockId::CLOCK_MONOTONIC, nix::time::ClockNanosleepFlags::TIMER_ABSTIME, &ts);
    }
    while now_ns() < deadline_ns {
        std::hint::spin_loop();
    }
}

/// When to send: a fixed period, or a two-state Markov-modulated Poisson
/// process (exponential ON/OFF sojourns; Poisson sends at `interval` mean
/// while ON, none while OFF).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Schedule {
    Periodic { interval_ns: u64 },
    Mmpp { interval_ns: u64, mean_on_ns: u64, mean_off_ns: u64, seed: u64 },
}

/// Produces the send times of a [`Schedule`] from a start time.
pub struct Pacer {
    schedule: Schedule,
    next_ns: u64,
    state_ends_ns: u64,
    on: bool,
    rng: Pcg64,
}

impl Pacer {
    pub fn new(schedule: Schedule, start_ns: u64) -> Pacer {
        let seed = match schedule {
            Schedule::Mmpp { seed, .. } => seed,
            Schedule::Periodic { .. } => 0,
        };
        let mut p = Pacer { schedule, next_ns: start_ns, state_ends_ns: start_ns, on: false, rng: Pcg64::seed_from_u64(seed) };
        if let Schedule::Mmpp { mean_on_ns, .. } = schedule {
            p.on = true;
            p.state_ends_ns = start_ns + p.exp(mean_on_ns);
            p.next_ns = start_ns;
        }
        p
    }

    fn exp(&mut self, mean_ns: u64) -> u64 {
        let u: f64 = self.rng.gen_range(f64::MIN_POSITIVE..1.0);
        (-u.ln() * mean_ns as f64) as u64
    }

    /// The next send time (non-decreasing).
    pub fn next_send_ns(&mut self) -> u64 {
        match self.schedule {
            Schedule::Periodic { interval_ns } => {
                let t = self.next_ns;
                self.next_ns += interval_ns.max(1);
                t
            }
            Schedule::Mmpp { interval_ns, mean_on_ns, mean_off_ns, .. } => loop {
                if self.next_ns < self.state_ends_ns {
                    let t = self.next_ns;
                    self.next_ns += self.exp(interval_ns).max(1);
                    return t;
                }
                // Off period, then a new burst starting at its end.
                let off_end = self.state_ends_ns + self.exp(mean_off_ns);
                self.next_ns = off_end;
                self.state_ends_ns = off_end + self.exp(mean_on_ns).max(1);
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn periodic_times_are_evenly_spaced() {
        let mut p = Pacer::new(Schedule::Periodic { interval_ns: 10 }, 100);
        let times: Vec<u64> = (0..4).map(|_| p.next_send_ns()).collect();
        assert_eq!(times, vec![100, 110, 120, 130]);
    }

    #[test]
    fn mmpp_rate_matches_on_fraction() {
        // ON 1 ms, OFF 3 ms on average, 10 us mean interval while ON:
        // long-run rate = 0.25 * 100 per ms = 25 per ms.
        let s = Schedule::Mmpp { interval_ns: 10_000, mean_on_ns: 1_000_000, mean_off_ns: 3_000_000, seed: 7 };
        let mut p = Pacer::new(s, 0);
        let mut n = 0u64;
        let mut t = 0;
        while t < 4_000_000_000 {
            t = p.next_send_ns();
            n += 1;
        }
        let per_ms = n as f64 / 4000.0;
        assert!((per_ms - 25.0).abs() < 2.0, "{per_ms} sends per ms");
        // Bursty: many gaps much longer than the ON interval.
        let mut p = Pacer::new(s, 0);
        let mut prev = p.next_send_ns();
        let long = (0..10_000)
            .filter(|_| {
                let t = p.next_send_ns();
                let g = t - prev;
                prev = t;
                g > 500_000
            })
            .count();
        assert!(long > 20, "{long} off periods");
    }

    #[test]
    fn wait_until_does_not_return_early() {
        let target = now_ns() + 300_000;
        wait_until(target);
        assert!(now_ns() >= target);
    }
}
