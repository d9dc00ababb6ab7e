//! The dissertation's load generators (§6, Fig. 6.1).
//!
//! Foreground at intensity i: "the fraction of each CPU quantum a process
//! spends generating resource requests". Each cycle the process issues
//! requests back to back while it is inside its active phase of i · 100 ms
//! (always at least one request per quantum, §6: "The benchmark processes
//! will generate at least one resource request per CPU quantum"), then
//! sleeps (1 − i) · 100 ms. Background is greedy: it issues its next request
//! as soon as the previous one finished.

use irqlab_analysis::Nanos;

/// The CPU quantum of the benchmark processes, t_max = 100 ms (§4.4.1, §6).
pub const QUANTUM_NS: Nanos = 100_000_000;

/// The active/sleep rhythm of the foreground process.
#[derive(Debug, Clone, Copy)]
pub struct IntensityPhase {
    pub intensity: f64,
    active_until: Nanos,
}

impl IntensityPhase {
    pub fn new(intensity: f64) -> Self {
        IntensityPhase { intensity: intensity.clamp(0.0, 1.0), active_until: 0 }
    }

    /// Starts an active phase at `now`.
    pub fn begin(&mut self, now: Nanos) {
        self.active_until = now + (self.intensity * QUANTUM_NS as f64).round() as Nanos;
    }

    /// Whether the process is still generating requests at `now`.
    pub fn active(&self, now: Nanos) -> bool {
        now < self.active_until
    }

    /// The sleep that follows an active phase: (1 − i) · quantum.
    pub fn sleep_ns(&self) -> Nanos {
        ((1.0 - self.intensity) * QUANTUM_NS as f64).round() as Nanos
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn phase_lengths_follow_intensity() {
        let mut ph = IntensityPhase::new(0.3);
        ph.begin(1_000);
        assert!(ph.active(1_000 + 29_999_999));
        assert!(!ph.active(1_000 + 30_000_000));
        assert_eq!(ph.sleep_ns(), 70_000_000);
    }
}
