//! When stimuli are sent: the thesis's adjustable trigger. Every pattern
//! keeps the mean rate the user asked for; `duty` is the fraction of each
//! cycle during which the trigger is active (burst, mmpp).

use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PatternKind {
    /// One stimulus every interval.
    Periodic,
    /// Exponential gaps with the interval as mean (random arrivals).
    Poisson,
    /// Cycles of `cycle` length: stimuli back to back (every
    /// `interval * duty`) for the first `duty` of each cycle, then silence.
    Burst,
    /// Markov-modulated Poisson with an ON and an OFF state: exponential
    /// sojourns with means `duty * cycle` and `(1 - duty) * cycle`, Poisson
    /// arrivals at mean gap `interval * duty` while ON, none while OFF.
    Mmpp,
}

impl PatternKind {
    pub fn name(self) -> &'static str {
        match self {
            PatternKind::Periodic => "periodic",
            PatternKind::Poisson => "poisson",
            PatternKind::Burst => "burst",
            PatternKind::Mmpp => "mmpp",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Pattern {
    pub kind: PatternKind,
    /// Mean time between stimuli.
    pub interval_ns: u64,
    /// Active fraction of a cycle, in (0, 1].
    pub duty: f64,
    /// Length of one ON/OFF cycle (burst, mmpp).
    pub cycle_ns: u64,
    pub seed: u64,
}

impl Pattern {
    pub fn periodic(interval_ns: u64) -> Pattern {
        Pattern { kind: PatternKind::Periodic, interval_ns, duty: 1.0, cycle_ns: 100_000_000, seed: 1 }
    }

    /// The shortest gap this pattern asks for between two sends.
    pub fn min_gap_ns(&self) -> u64 {
        match self.kind {
            PatternKind::Periodic | PatternKind::Poisson => self.interval_ns,
            PatternKind::Burst | PatternKind::Mmpp => (self.interval_ns as f64 * self.duty) as u64,
        }
    }

    pub fn validate(&self) -> Result<(), String> {
        if self.interval_ns == 0 {
            return Err("the interval between stimuli must be positive".into());
        }
        if !(self.duty > 0.0 && self.duty <= 1.0) {
            return Err(format!("duty {} is outside (0, 1]", self.duty));
        }
        if matches!(self.kind, PatternKind::Burst | PatternKind::Mmpp) && self.cycle_ns < self.interval_ns {
            return Err("the ON/OFF cycle must be at least one interval long".into());
        }
        Ok(())
    }

    pub fn schedule(&self) -> Schedule {
        let mut s =
            Schedule { pattern: *self, rng: Pcg64::seed_from_u64(self.seed), next_ns: 0, on: true, state_end_ns: 0, cycle_start_ns: 0 };
        if self.kind == PatternKind::Mmpp {
            s.state_end_ns = s.exp(self.duty * self.cycle_ns as f64);
            s.next_ns = s.exp(self.interval_ns as f64 * self.duty);
            s.settle_mmpp();
        }
        s
    }
}

/// Send times, in ns from the start of the run, non-decreasing.
pub struct Schedule {
    pattern: Pattern,
    rng: Pcg64,
    next_ns: u64,
    on: bool,
    state_end_ns: u64,
    cycle_start_ns: u64,
}

impl Schedule {
    fn exp(&mut self, mean: f64) -> u64 {
        let u: f64 = self.rng.gen_range(f64::MIN_POSITIVE..1.0);
        (-u.ln() * mean) as u64
    }

    /// Moves `next_ns` forward until it falls in an ON period.
    fn settle_mmpp(&mut self) {
        let p = self.pattern;
        let on_mean = p.duty * p.cycle_ns as f64;
        let off_mean = (1.0 - p.duty) * p.cycle_ns as f64;
        while self.next_ns >= self.state_end_ns {
            let end = self.state_end_ns;
            self.on = !self.on;
            self.state_end_ns = end + self.exp(if self.on { on_mean } else { off_mean }).max(1);
            if self.on {
                // Memoryless: the next arrival counts from the ON start.
                self.next_ns = end + self.exp(p.interval_ns as f64 * p.duty);
            } else {
                // Nothing is sent while OFF: skip to its end.
                self.next_ns = self.state_end_ns;
            }
        }
    }

    pub fn next_send_ns(&mut self) -> u64 {
        let p = self.pattern;
        let t = self.next_ns;
        match p.kind {
            PatternKind::Periodic => self.next_ns += p.interval_ns,
            PatternKind::Poisson => self.next_ns += self.exp(p.interval_ns as f64),
            PatternKind::Burst => {
                let gap = ((p.interval_ns as f64 * p.duty) as u64).max(1);
                let on_len = (p.cycle_ns as f64 * p.duty) as u64;
                self.next_ns += gap;
                if self.next_ns >= self.cycle_start_ns + on_len.max(gap) {
                    self.cycle_start_ns += p.cycle_ns;
                    self.next_ns = self.cycle_start_ns;
                }
            }
            PatternKind::Mmpp => {
                self.next_ns += self.exp(p.interval_ns as f64 * p.duty);
                self.settle_mmpp();
            }
        }
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mean_rate(p: Pattern, n: usize) -> f64 {
        let mut s = p.schedule();
        let times: Vec<u64> = (0..n).map(|_| s.next_send_ns()).collect();
        assert!(times.windows(2).all(|w| w[0] <= w[1]), "{:?}: times go backwards", p.kind);
        (n - 1) as f64 / ((times[n - 1] - times[0]) as f64 / 1e9)
    }

    #[test]
    fn every_pattern_keeps_the_mean_rate() {
        let base = Pattern { kind: PatternKind::Periodic, interval_ns: 1_000_000, duty: 0.25, cycle_ns: 20_000_000, seed: 7 };
        for kind in [PatternKind::Periodic, PatternKind::Poisson, PatternKind::Burst, PatternKind::Mmpp] {
            let rate = mean_rate(Pattern { kind, ..base }, 50_000);
            assert!((rate - 1000.0).abs() < 60.0, "{kind:?}: {rate} Hz");
        }
    }

    #[test]
    fn periodic_is_exact_and_burst_is_silent_off_duty() {
        let mut s = Pattern::periodic(500).schedule();
        assert_eq!((0..4).map(|_| s.next_send_ns()).collect::<Vec<_>>(), vec![0, 500, 1000, 1500]);
        let p = Pattern { kind: PatternKind::Burst, interval_ns: 1000, duty: 0.5, cycle_ns: 10_000, seed: 1 };
        let mut s = p.schedule();
        let times: Vec<u64> = (0..20).map(|_| s.next_send_ns()).collect();
        assert!(times.iter().all(|t| t % 10_000 < 5_000), "{times:?}");
        assert_eq!(&times[..3], &[0, 500, 1000]);
    }

    #[test]
    fn bad_patterns_are_rejected() {
        assert!(Pattern { duty: 0.0, ..Pattern::periodic(1000) }.validate().is_err());
        assert!(Pattern { duty: 1.5, ..Pattern::periodic(1000) }.validate().is_err());
        assert!(Pattern { interval_ns: 0, ..Pattern::periodic(1000) }.validate().is_err());
        assert!(Pattern::periodic(1000).validate().is_ok());
    }
}
