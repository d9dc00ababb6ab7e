//! Durations as strings with units (`"10ms"`, `"2.5us"`, `"1s"`), integer
//! nanoseconds inside. One parser for every input file and flag.

/// Time in integer nanoseconds, the unit used everywhere inside irqlab.
pub type Nanos = u64;

/// Why a duration string was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DurationError {
    #[error("empty duration")]
    Empty,
    #[error("duration `{0}` has no unit (use ns, us, ms, s, min or h, e.g. \"10ms\")")]
    NoUnit(String),
    #[error("duration `{0}` is negative")]
    Negative(String),
    #[error("duration `{0}` has an unknown unit `{1}` (use ns, us, ms, s, min or h)")]
    UnknownUnit(String, String),
    #[error("duration `{0}` is not a number followed by a unit")]
    Malformed(String),
    #[error("duration `{0}` is not a whole number of nanoseconds")]
    Fractional(String),
    #[error("duration `{0}` is too large")]
    Overflow(String),
}

const UNITS: &[(&str, u64)] =
    &[("ns", 1), ("us", 1_000), ("µs", 1_000), ("ms", 1_000_000), ("s", 1_000_000_000), ("min", 60_000_000_000), ("h", 3_600_000_000_000)];

/// Parses `"10ms"`, `"2.5us"`, `"1s"`, `"0"` into nanoseconds.
///
/// A bare `0` is accepted without unit (zero is zero in every unit); any
/// other number needs one. The result must be a whole number of
/// nanoseconds, so `"0.5ns"` is rejected rather than silently rounded.
pub fn parse_duration_ns(text: &str) -> Result<Nanos, DurationError> {
    let s = text.trim();
    if s.is_empty() {
        return Err(DurationError::Empty);
    }
    if s == "0" {
        return Ok(0);
    }
    if s.starts_with('-') {
        return Err(DurationError::Negative(s.to_string()));
    }
    let split = s.find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '_')).unwrap_or(s.len());
    let (number, unit) = (s[..split].replace('_', ""), s[split..].trim());
    if number.is_empty() {
        return Err(DurationError::Malformed(s.to_string()));
    }
    if unit.is_empty() {
        return Err(DurationError::NoUnit(s.to_string()));
    }
    let scale = UNITS
        .iter()
        .find(|(name, _)| *name == unit)
        .map(|(_, scale)| *scale)
        .ok_or_else(|| DurationError::UnknownUnit(s.to_string(), unit.to_string()))?;
    scale_decimal(&number, scale).ok_or_else(|| {
        if number.matches('.').count() > 1 || number == "." {
            DurationError::Malformed(s.to_string())
        } else if number.contains('.') && !overflowed(&number, scale) {
            DurationError::Fractional(s.to_string())
        } else {
            DurationError::Overflow(s.to_string())
        }
    })
}

fn overflowed(number: &str, scale: u64) -> bool {
    let int = number.split('.').next().unwrap_or("0");
    let int: u128 = int.parse().unwrap_or(0);
    int * scale as u128 > u64::MAX as u128
}

/// Exact decimal × scale in integers, so "2.5us" is exactly 2500 ns.
fn scale_decimal(number: &str, scale: u64) -> Option<u64> {
    let mut parts = number.splitn(2, '.');
    let int_part = parts.next()?;
    let frac_part = parts.next().unwrap_or("");
    if frac_part.contains('.') || (int_part.is_empty() && frac_part.is_empty()) {
        return None;
    }
    let int: u128 = if int_part.is_empty() { 0 } else { int_part.parse().ok()? };
    let mut total = int.checked_mul(scale as u128)?;
    if !frac_part.is_empty() {
        let digits = frac_part.trim_end_matches('0');
        if !digits.is_empty() {
            let frac: u128 = digits.parse().ok()?;
            let denom = 10u128.checked_pow(digits.len() as u32)?;
            let num = frac.checked_mul(scale as u128)?;
            if num % denom != 0 {
                return None;
            }
            total += num / denom;
        }
    }
    u64::try_from(total).ok()
}

/// Formats nanoseconds with the largest unit that keeps it readable:
/// `1500000` → `"1.5ms"`. Round-trips through [`parse_duration_ns`] for
/// values with up to three significant decimals.
pub fn format_ns(ns: Nanos) -> String {
    let (scale, unit) = match ns {
        0 => return "0".to_string(),
        n if n >= 1_000_000_000 => (1_000_000_000u64, "s"),
        n if n >= 1_000_000 => (1_000_000, "ms"),
        n if n >= 1_000 => (1_000, "us"),
        _ => (1, "ns"),
    };
    let whole = ns / scale;
    let frac = ns % scale;
    if frac == 0 {
        return format!("{whole}{unit}");
    }
    let width = scale.ilog10() as usize;
    let frac = format!("{frac:0width$}");
    format!("{whole}.{}{unit}", frac.trim_end_matches('0'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_unit() {
        assert_eq!(parse_duration_ns("10ms"), Ok(10_000_000));
        assert_eq!(parse_duration_ns("2.5us"), Ok(2_500));
        assert_eq!(parse_duration_ns("1s"), Ok(1_000_000_000));
        assert_eq!(parse_duration_ns("7ns"), Ok(7));
        assert_eq!(parse_duration_ns("2min"), Ok(120_000_000_000));
        assert_eq!(parse_duration_ns("1h"), Ok(3_600_000_000_000));
        assert_eq!(parse_duration_ns(" 0 "), Ok(0));
        assert_eq!(parse_duration_ns("0.001s"), Ok(1_000_000));
        assert_eq!(parse_duration_ns("1_000us"), Ok(1_000_000));
        assert_eq!(parse_duration_ns(".5ms"), Ok(500_000));
    }

    #[test]
    fn rejects_bad_input_with_reason() {
        assert!(matches!(parse_duration_ns("10"), Err(DurationError::NoUnit(_))));
        assert!(matches!(parse_duration_ns("-1ms"), Err(DurationError::Negative(_))));
        assert!(matches!(parse_duration_ns("3 weeks"), Err(DurationError::UnknownUnit(..))));
        assert!(matches!(parse_duration_ns("ms"), Err(DurationError::Malformed(_))));
        assert!(matches!(parse_duration_ns("1.2.3ms"), Err(DurationError::Malformed(_))));
        assert!(matches!(parse_duration_ns("0.5ns"), Err(DurationError::Fractional(_))));
        assert!(matches!(parse_duration_ns("99999999999h"), Err(DurationError::Overflow(_))));
        assert_eq!(parse_duration_ns(""), Err(DurationError::Empty));
    }

    #[test]
    fn formats_readably_and_round_trips() {
        for ns in [0, 1, 999, 1_000, 1_500, 2_500_000, 10_000_000, 1_250_000_000] {
            assert_eq!(parse_duration_ns(&format_ns(ns)), Ok(ns), "{}", format_ns(ns));
        }
        assert_eq!(format_ns(1_500_000), "1.5ms");
        assert_eq!(format_ns(10_000), "10us");
    }
}
