//! Repeated live runs: a figure's mean and spread over the repeats, and
//! whether two means differ by more than the repeats' own noise. The live
//! reproductions repeat their runs in rounds because one run on this VM
//! moves with the host (stalls, a disk or link shared with other guests).

use serde::Serialize;

/// Mean and sample standard deviation of a figure over repeated runs.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Spread {
    pub mean: f64,
    pub sd: f64,
    pub n: usize,
}

impl Spread {
    pub fn of(values: &[f64]) -> Spread {
        let n = values.len();
        let mean = if n == 0 { f64::NAN } else { values.iter().sum::<f64>() / n as f64 };
        let sd = if n < 2 { 0.0 } else { (values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1) as f64).sqrt() };
        Spread { mean, sd, n }
    }

    /// How far `other`'s mean may lie on the wrong side of this one's
    /// before the difference is more than the repeats' own noise: the 95%
    /// two-sided t quantile times the standard error of the difference
    /// (Welch's, with the pooled degrees of freedom); 0 when the noise
    /// was not measured (a single repeat).
    pub fn tolerance(&self, other: &Spread) -> f64 {
        let df = (self.n + other.n).saturating_sub(2);
        if self.n < 2 || other.n < 2 {
            return 0.0;
        }
        t_975(df) * (self.sd.powi(2) / self.n as f64 + other.sd.powi(2) / other.n as f64).sqrt()
    }

    /// This mean is at most `other`'s, or above it by no more than the
    /// measured noise.
    pub fn at_most(&self, other: &Spread) -> bool {
        self.mean <= other.mean + self.tolerance(other)
    }
}

/// The two-sided 95% quantile of Student's t with `df` degrees of freedom.
pub fn t_975(df: usize) -> f64 {
    const T: [f64; 10] = [12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228];
    match df {
        0 => f64::INFINITY,
        1..=10 => T[df - 1],
        11..=20 => 2.145,
        21..=60 => 2.042,
        _ => 1.96,
    }
}

impl Spread {
    /// The standard error of the mean; `None` from a single run.
    pub fn se(&self) -> Option<f64> {
        (self.n >= 2).then(|| self.sd / (self.n as f64).sqrt())
    }

    /// The standard error of the ratio of this mean to `other`'s (first
    /// order: the relative errors add in quadrature); `None` unless both
    /// were repeated.
    pub fn ratio_se(&self, other: &Spread) -> Option<f64> {
        let (a, b) = (self.se()?, other.se()?);
        let ratio = self.mean / other.mean;
        Some(ratio.abs() * ((a / self.mean).powi(2) + (b / other.mean).powi(2)).sqrt())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ratio_s_error_adds_the_relative_errors() {
        let (a, b) = (Spread::of(&[90.0, 100.0, 110.0]), Spread::of(&[190.0, 200.0, 210.0]));
        assert!((a.se().unwrap() - 10.0 / 3f64.sqrt()).abs() < 1e-12);
        let expected = 0.5 * ((a.se().unwrap() / 100.0).powi(2) + (b.se().unwrap() / 200.0).powi(2)).sqrt();
        assert!((a.ratio_se(&b).unwrap() - expected).abs() < 1e-12);
        assert_eq!(Spread::of(&[1.0]).se(), None);
        assert_eq!(a.ratio_se(&Spread::of(&[1.0])), None);
    }
}
