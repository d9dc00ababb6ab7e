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

/// CPUs as a flag gives them (a newtype: clap reads a bare `Vec` as a
/// repeated flag).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CpuList(pub Vec<usize>);

impl std::fmt::Display for CpuList {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&irqlab_host::rt::format_cpu_list(&self.0))
    }
}

/// Value parser of every `--cpu` that takes CPUs (`1`, `0-3,6`; `--cpus`
/// is its alias where a command takes several): the CPUs, at least one.
/// Whether they are online is the command's check (it names the ones that are).
pub fn cpu_list(text: &str) -> Result<CpuList, String> {
    let cpus = irqlab_host::rt::parse_cpu_list(text)?;
    if cpus.is_empty() {
        return Err("no CPU in the list".into());
    }
    Ok(CpuList(cpus))
}

/// Value parser of a `--cpu` where one CPU is meant (the probe's CPU, a
/// thread pinned to one): the same LIST syntax, naming exactly one CPU.
pub fn one_cpu(text: &str) -> Result<usize, String> {
    match cpu_list(text)?.0.as_slice() {
        [cpu] => Ok(*cpu),
        many => Err(format!("this takes one CPU; `{text}` names {}", many.len())),
    }
}

/// The scheduling of a thread irqlab runs itself (a probe, a latency
/// thread, a responder): `--policy fifo:PRIO` or `--policy other`, the
/// spelling `irqlab control threads --policy` takes for the same two
/// policies; `fifo` alone keeps the command's default priority.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ThreadPolicy {
    Fifo(Option<u8>),
    Other,
}

/// Value parser of `--policy fifo[:PRIO]|other`.
pub fn thread_policy(text: &str) -> Result<ThreadPolicy, String> {
    match text.split_once(':') {
        None if text == "fifo" => Ok(ThreadPolicy::Fifo(None)),
        None if text == "other" => Ok(ThreadPolicy::Other),
        Some(("fifo", p)) => p
            .parse::<u8>()
            .ok()
            .filter(|p| (1..=99).contains(p))
            .map(|p| ThreadPolicy::Fifo(Some(p)))
            .ok_or_else(|| format!("priority `{p}` is outside SCHED_FIFO's 1..=99")),
        _ => Err("expected fifo, fifo:PRIO (1..=99) or other".into()),
    }
}

/// `--policy` with the old `--priority P` beside it (0 = SCHED_OTHER),
/// which is still taken, with a note saying the new spelling: `fifo` plus
/// `--priority P` is `fifo:P`; a priority beside `fifo:P` or `other` is
/// a usage error. `None`: neither given.
pub fn policy_and_priority(policy: Option<ThreadPolicy>, priority: Option<u8>) -> Result<Option<ThreadPolicy>, crate::error::CliError> {
    let Some(p) = priority else { return Ok(policy) };
    let spelled = match p {
        0 => ThreadPolicy::Other,
        p if p <= 99 => ThreadPolicy::Fifo(Some(p)),
        p => return Err(crate::error::CliError::Usage(format!("--priority {p}: outside SCHED_FIFO's 1..=99 (0: SCHED_OTHER)"))),
    };
    match policy {
        None | Some(ThreadPolicy::Fifo(None)) => {
            let new = match spelled {
                ThreadPolicy::Fifo(Some(p)) => format!("fifo:{p}"),
                _ => "other".into(),
            };
            eprintln!("note: --priority {p} is spelled --policy {new} now (the old spelling is still taken)");
            Ok(Some(spelled))
        }
        Some(other) => Err(crate::error::CliError::Usage(format!(
            "--priority {p} beside --policy {}: give the priority in --policy (fifo:PRIO) alone",
            match other {
                ThreadPolicy::Fifo(Some(q)) => format!("fifo:{q}"),
                _ => "other".into(),
            }
        ))),
    }
}

#[cfg(test)]
mod shape_tests {
    use super::*;

    #[test]
    fn one_cpu_and_cpu_lists_share_a_syntax() {
        assert_eq!(cpu_list("0-2,5").unwrap(), CpuList(vec![0, 1, 2, 5]));
        assert_eq!(cpu_list("0-2,5").unwrap().to_string(), "0-2,5");
        assert_eq!(one_cpu("3").unwrap(), 3);
        assert!(one_cpu("0-1").unwrap_err().contains("names 2"));
        assert!(cpu_list("x").is_err());
    }

    #[test]
    fn thread_policies_read_as_control_threads_spells_them() {
        assert_eq!(thread_policy("fifo:80").unwrap(), ThreadPolicy::Fifo(Some(80)));
        assert_eq!(thread_policy("fifo").unwrap(), ThreadPolicy::Fifo(None));
        assert_eq!(thread_policy("other").unwrap(), ThreadPolicy::Other);
        assert!(thread_policy("fifo:0").is_err() && thread_policy("rr:5").is_err());
        // The old spelling.
        assert_eq!(policy_and_priority(None, Some(0)).unwrap(), Some(ThreadPolicy::Other));
        assert_eq!(policy_and_priority(Some(ThreadPolicy::Fifo(None)), Some(49)).unwrap(), Some(ThreadPolicy::Fifo(Some(49))));
        assert!(policy_and_priority(Some(ThreadPolicy::Fifo(Some(5))), Some(49)).is_err());
        assert!(policy_and_priority(None, Some(120)).is_err());
        assert_eq!(policy_and_priority(Some(ThreadPolicy::Other), None).unwrap(), Some(ThreadPolicy::Other));
    }
}
