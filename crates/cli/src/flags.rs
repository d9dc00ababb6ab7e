//! Flag values the commands share, parsed with the flag named in every
//! error (exit 2): durations with units ("10ms", "1.5s") and rates with an
//! optional k/M suffix ("50000", "100k", "1.5M").

use crate::error::CliError;

/// The most threads a count flag (`--threads`, `--groups`) may start. A
/// thread that cannot be spawned panics in `std::thread::scope`, and
/// thousands of threads measure the scheduler, not the load asked for.
pub const MAX_THREADS: usize = 1024;

/// Value parser of a thread-count flag: 1 to [`MAX_THREADS`], exit 2
/// naming the flag and the range otherwise.
pub fn thread_count() -> clap::builder::RangedU64ValueParser<usize> {
    clap::builder::RangedU64ValueParser::new().range(1..=MAX_THREADS as u64)
}

/// A duration flag in nanoseconds; 0 allowed.
pub fn duration(flag: &str, text: &str) -> Result<u64, CliError> {
    irqlab_analysis::parse_duration_ns(text).map_err(|e| CliError::Usage(format!("--{flag}: {e}")))
}

/// A duration flag that must be longer than 0.
pub fn positive_duration(flag: &str, text: &str) -> Result<u64, CliError> {
    match duration(flag, text)? {
        0 => Err(CliError::Usage(format!("--{flag} must be longer than 0"))),
        ns => Ok(ns),
    }
}

/// A rate flag in events per second: a positive number, optionally with a
/// k (10^3) or M (10^6) suffix.
fn rate_per_second(flag: &str, text: &str) -> Result<f64, CliError> {
    let t = text.trim();
    let (number, scale) = match t.chars().last() {
        Some('k' | 'K') => (&t[..t.len() - 1], 1e3),
        Some('M') => (&t[..t.len() - 1], 1e6),
        _ => (t, 1.0),
    };
    number
        .parse::<f64>()
        .ok()
        .map(|r| r * scale)
        .filter(|r| r.is_finite() && *r > 0.0)
        .ok_or_else(|| CliError::Usage(format!("--{flag} `{text}`: expected a positive rate per second, e.g. 50000 or 100k")))
}

/// A rate flag as the interval between events, in nanoseconds (at least 1).
pub fn rate_to_interval_ns(flag: &str, text: &str) -> Result<u64, CliError> {
    let interval = (1e9 / rate_per_second(flag, text)?).round();
    if interval < 1.0 {
        return Err(CliError::Usage(format!("--{flag} `{text}` is above one per nanosecond")));
    }
    Ok(interval as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_take_k_and_m_suffixes() {
        assert_eq!(rate_per_second("rate", "50000").unwrap(), 50_000.0);
        assert_eq!(rate_per_second("rate", "100k").unwrap(), 100_000.0);
        assert_eq!(rate_per_second("rate", "1.5M").unwrap(), 1_500_000.0);
        assert_eq!(rate_to_interval_ns("rate", "1k").unwrap(), 1_000_000);
        for bad in ["0", "-5", "lots", "k", "inf", "NaN", ""] {
            let err = rate_per_second("rate", bad).unwrap_err().to_string();
            assert!(err.starts_with("--rate `"), "{bad}: {err}");
        }
        assert!(rate_to_interval_ns("rate", "5000M").unwrap_err().to_string().contains("above one per nanosecond"));
    }

    #[test]
    fn durations_name_the_flag() {
        assert_eq!(duration("interval", "0").unwrap(), 0);
        assert_eq!(positive_duration("duration", "1.5ms").unwrap(), 1_500_000);
        assert_eq!(positive_duration("duration", "0s").unwrap_err().to_string(), "--duration must be longer than 0");
        assert!(duration("threshold", "fast").unwrap_err().to_string().starts_with("--threshold: "));
    }
}
