//! Flag values the commands share, parsed by clap before a command runs
//! (`#[arg(value_parser = flags::duration)]`), so a bad value is a usage
//! error (exit 2) naming the flag and the value: durations with units
//! ("10ms", "1.5s") and rates with an optional k/M suffix ("50000", "100k",
//! "1.5M"). Commands receive typed values (nanoseconds), never text; a
//! range flag's parser (`--windows 10us..1s`) calls [`duration_ns`] on
//! each half.

/// The most threads a count flag (`--threads`, `--groups`) may start. A
/// thread that cannot be spawned panics in `std::thread::scope`, and
/// thousands of threads measure the scheduler, not the load asked for.
pub const MAX_THREADS: usize = 1024;

/// Value parser of a thread-count flag: 1 to [`MAX_THREADS`], exit 2
/// naming the flag and the range otherwise.
pub fn thread_count() -> clap::builder::RangedU64ValueParser<usize> {
    clap::builder::RangedU64ValueParser::new().range(1..=MAX_THREADS as u64)
}

/// A duration flag's value when its default comes from a library
/// `Config::default()`: parsed like [`duration_ns`], shown as a duration
/// ("3s", not 3000000000) in `--help`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Duration(pub u64);

impl std::fmt::Display for Duration {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&irqlab_analysis::format_ns(self.0))
    }
}

impl std::str::FromStr for Duration {
    type Err = String;
    fn from_str(text: &str) -> Result<Self, String> {
        duration_ns(text).map(Duration)
    }
}

/// Value parser of a [`Duration`] that must be longer than 0.
pub fn positive(text: &str) -> Result<Duration, String> {
    positive_duration_ns(text).map(Duration)
}

/// Value parser of a duration flag, in nanoseconds; 0 allowed.
pub fn duration_ns(text: &str) -> Result<u64, String> {
    irqlab_analysis::parse_duration_ns(text).map_err(|e| e.to_string())
}

/// Value parser of a duration flag that must be longer than 0.
pub fn positive_duration_ns(text: &str) -> Result<u64, String> {
    match duration_ns(text)? {
        0 => Err("must be longer than 0".into()),
        ns => Ok(ns),
    }
}

/// Value parser of a rate flag (events per second: a positive number,
/// optionally with a k (10^3) or M (10^6) suffix), as the interval between
/// events in nanoseconds (at least 1).
pub fn rate_as_interval(text: &str) -> Result<u64, String> {
    let interval = (1e9 / rate_per_second(text)?).round();
    if interval < 1.0 {
        return Err("above one per nanosecond".into());
    }
    Ok(interval as u64)
}

fn rate_per_second(text: &str) -> Result<f64, String> {
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
        .ok_or_else(|| "expected a positive rate per second, e.g. 50000 or 100k".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_take_k_and_m_suffixes() {
        assert_eq!(rate_per_second("50000").unwrap(), 50_000.0);
        assert_eq!(rate_per_second("100k").unwrap(), 100_000.0);
        assert_eq!(rate_per_second("1.5M").unwrap(), 1_500_000.0);
        assert_eq!(rate_as_interval("1k").unwrap(), 1_000_000);
        for bad in ["0", "-5", "lots", "k", "inf", "NaN", ""] {
            assert!(rate_as_interval(bad).unwrap_err().starts_with("expected a positive rate"), "{bad}");
        }
        assert!(rate_as_interval("5000M").unwrap_err().contains("above one per nanosecond"));
    }

    #[test]
    fn durations() {
        assert_eq!(duration_ns("0").unwrap(), 0);
        assert_eq!(positive_duration_ns("1.5ms").unwrap(), 1_500_000);
        assert_eq!(positive_duration_ns("0s").unwrap_err(), "must be longer than 0");
        assert!(duration_ns("fast").is_err());
        // Shown in --help as written, parsed back to the same value.
        let d: Duration = "2.5ms".parse().unwrap();
        assert_eq!((d.0, d.to_string().parse::<Duration>().unwrap()), (2_500_000, d));
        assert_eq!(positive("0").unwrap_err(), "must be longer than 0");
    }
}
