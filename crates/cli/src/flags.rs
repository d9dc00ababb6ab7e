//! Flag values the commands share, parsed by clap before a command runs
//! (`#[arg(value_parser = flags::duration)]`), so a bad value is a usage
//! error (exit 2) naming the flag and the value: durations with units
//! ("10ms", "1.5s") and rates with an optional k/M suffix ("50000", "100k",
//! "1.5M"). Commands receive typed values (nanoseconds), never text; a
//! range flag's parser (`--windows 10us..1s`) calls [`duration_ns`] on
//! each half. CPUs and scheduling policies have one spelling each, here
//! ([`cpu_list`], [`one_cpu`], [`policy`]).

use crate::error::CliError;
use irqlab_host::journal::sched;

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

/// Value parser of every flag that takes CPUs (`1`, `0-3,6`): the CPUs,
/// at least one. Every such flag is `--cpu` with `--cpus` as its visible
/// alias (`--account-cpu` / `--account-cpus`), whether it takes one CPU
/// or several; a flag named for its use (`export --probe CPU`) takes the
/// same syntax (`docs/commands.md`, "CPUs and policies";
/// `tests/flag_grammar.rs` holds every command to it). Whether they are
/// online is the command's check (it names the ones that are).
pub fn cpu_list(text: &str) -> Result<CpuList, String> {
    let cpus = irqlab_host::rt::parse_cpu_list(text)?;
    if cpus.is_empty() {
        return Err("no CPU in the list".into());
    }
    Ok(CpuList(cpus))
}

/// Value parser of a CPU flag where one CPU is meant (the probe's CPU, a
/// thread pinned to one): the same LIST syntax, naming exactly one CPU.
pub fn one_cpu(text: &str) -> Result<usize, String> {
    match cpu_list(text)?.0.as_slice() {
        [cpu] => Ok(*cpu),
        many => Err(format!("this takes one CPU; `{text}` names {}", many.len())),
    }
}

/// A `--policy` or `--floor` as given: its words
/// (`irqlab_host::journal::sched::parse_policy`, the one parser of them)
/// and its text, for messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policy {
    pub words: sched::PolicyWords,
    text: String,
}

impl std::fmt::Display for Policy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}

/// Value parser of every `--policy` and `--floor` (value name POLICY):
/// `background`, `foreground`, `fifo[:PRIO]`, `rr[:PRIO]`,
/// `other[:NICE]`, `idle`, `deadline:RUNTIME/PERIOD[/DEADLINE]`,
/// `sporadic:BUDGET/PERIOD[:HIGH/LOW][:max-repl=N]`; `fifo` and `rr`
/// alone leave the priority to the command. What a command cannot do with
/// the words it refuses after parsing ([`own_threads`],
/// [`Policy::fixed_on_other_threads`]), exit 2 naming the flag and value.
pub fn policy(text: &str) -> Result<Policy, String> {
    sched::parse_policy(text).map(|words| Policy { words, text: text.to_string() }).map_err(|e| e.to_string())
}

impl Policy {
    /// The policy where irqlab sets other threads' scheduling (`control
    /// threads`, `control process-aware --floor`): `fifo` / `rr` alone at
    /// [`sched::KERNEL_FIFO_PRIORITY`] (50), as the kernel sets its own
    /// threaded IRQ handlers.
    pub fn on_other_threads(&self) -> sched::PolicySpec {
        self.words.resolve(sched::KERNEL_FIFO_PRIORITY)
    }

    /// [`Policy::on_other_threads`] where only a fixed policy other than
    /// SCHED_DEADLINE can be set (`control process-aware --floor`):
    /// anything else exits 2 naming `flag`, the value and what it takes.
    pub fn fixed_on_other_threads(&self, flag: &str) -> Result<sched::SchedAttr, CliError> {
        match self.on_other_threads() {
            sched::PolicySpec::Fixed { attr } if !matches!(attr, sched::SchedAttr::Deadline { .. }) => Ok(attr),
            _ => Err(CliError::Usage(format!(
                "{flag} {self}: takes other[:NICE], idle (background), fifo[:PRIO] (foreground: fifo:99) or rr[:PRIO]"
            ))),
        }
    }

    /// As the scheduling of threads irqlab runs itself, which run under
    /// SCHED_FIFO or SCHED_OTHER only: `fifo[:PRIO]` (`foreground`:
    /// `fifo:99`) or `other`; anything else exits 2 naming `flag`, the
    /// value and what it takes.
    fn fifo_or_other(&self, flag: &str) -> Result<ThreadPolicy, CliError> {
        match self.words {
            sched::PolicyWords::Fifo => Ok(ThreadPolicy::Fifo(None)),
            sched::PolicyWords::Given(sched::PolicySpec::Fixed { attr: sched::SchedAttr::Fifo { priority } }) => {
                // Within 1..=99 by the parser.
                Ok(ThreadPolicy::Fifo(Some(priority as u8)))
            }
            sched::PolicyWords::Given(sched::PolicySpec::Fixed { attr: sched::SchedAttr::Other { nice: 0 } }) => Ok(ThreadPolicy::Other),
            _ => Err(CliError::Usage(format!(
                "{flag} {self}: this command's own threads run under SCHED_FIFO or SCHED_OTHER only: it takes fifo, fifo:PRIO or other"
            ))),
        }
    }
}

/// The scheduling of a thread irqlab runs itself (a probe, a latency
/// thread, a responder, a sender): SCHED_FIFO at a priority (`None`:
/// `fifo` alone, the command's default) or SCHED_OTHER.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ThreadPolicy {
    Fifo(Option<u8>),
    Other,
}

impl std::fmt::Display for ThreadPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ThreadPolicy::Fifo(Some(p)) => write!(f, "fifo:{p}"),
            ThreadPolicy::Fifo(None) => f.write_str("fifo"),
            ThreadPolicy::Other => f.write_str("other"),
        }
    }
}

/// `--policy` of a command whose own threads run under it (measure
/// interference and latency, stimulus respond and run), with the old
/// `--priority P` beside it (0 = SCHED_OTHER), which is still taken, with
/// a note saying the new spelling: `fifo` plus `--priority P` is `fifo:P`;
/// a priority beside `fifo:P` or `other` is a usage error. `None`: neither
/// given.
pub fn own_threads(policy: Option<&Policy>, priority: Option<u8>) -> Result<Option<ThreadPolicy>, CliError> {
    let policy = policy.map(|p| p.fifo_or_other("--policy")).transpose()?;
    let Some(p) = priority else { return Ok(policy) };
    let spelled = match p {
        0 => ThreadPolicy::Other,
        p if p <= 99 => ThreadPolicy::Fifo(Some(p)),
        p => return Err(CliError::Usage(format!("--priority {p}: outside SCHED_FIFO's 1..=99 (0: SCHED_OTHER)"))),
    };
    match policy {
        None | Some(ThreadPolicy::Fifo(None)) => {
            eprintln!("note: --priority {p} is spelled --policy {spelled} now (the old spelling is still taken)");
            Ok(Some(spelled))
        }
        Some(other) => {
            Err(CliError::Usage(format!("--priority {p} beside --policy {other}: give the priority in --policy (fifo:PRIO) alone")))
        }
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
        assert_eq!(one_cpu("3-3").unwrap(), 3);
        assert!(one_cpu("0-1").unwrap_err().contains("names 2"));
        assert!(cpu_list("x").unwrap_err().contains("is not a CPU number"));
        assert!(one_cpu("x").unwrap_err().contains("is not a CPU number"));
    }

    fn parsed(text: &str) -> Policy {
        policy(text).unwrap()
    }

    #[test]
    fn one_parser_reads_every_policy_word() {
        for text in ["background", "foreground", "fifo", "fifo:80", "rr", "rr:5", "other", "other:-5", "idle", "deadline:1ms/10ms"] {
            assert_eq!(parsed(text).to_string(), text);
        }
        assert!(policy("sporadic:1ms/10ms:50/10").is_ok());
        assert!(policy("turbo").unwrap_err().starts_with("unknown policy; expected background, foreground, fifo[:PRIO]"));
        assert_eq!(policy("fifo:0").unwrap_err(), "priority `0` is outside 1..=99");
    }

    #[test]
    fn fifo_alone_is_priority_50_on_other_threads() {
        use sched::{PolicySpec, SchedAttr};
        assert_eq!(parsed("fifo").on_other_threads(), PolicySpec::Fixed { attr: SchedAttr::Fifo { priority: 50 } });
        assert_eq!(parsed("rr").on_other_threads(), PolicySpec::Fixed { attr: SchedAttr::Rr { priority: 50 } });
        assert_eq!(parsed("fifo:7").fixed_on_other_threads("--floor").unwrap(), SchedAttr::Fifo { priority: 7 });
        assert_eq!(parsed("fifo").fixed_on_other_threads("--floor").unwrap(), SchedAttr::Fifo { priority: 50 });
        assert_eq!(parsed("background").fixed_on_other_threads("--floor").unwrap(), SchedAttr::Idle);
        for refused in ["deadline:1ms/10ms", "sporadic:1ms/10ms"] {
            let e = parsed(refused).fixed_on_other_threads("--floor").unwrap_err().to_string();
            assert!(e.starts_with(&format!("--floor {refused}: takes other[:NICE]")), "{e}");
        }
    }

    #[test]
    fn own_threads_run_under_fifo_or_other() {
        let own = |text: &str| own_threads(Some(&parsed(text)), None);
        assert_eq!(own("fifo").unwrap(), Some(ThreadPolicy::Fifo(None)));
        assert_eq!(own("fifo:80").unwrap(), Some(ThreadPolicy::Fifo(Some(80))));
        assert_eq!(own("foreground").unwrap(), Some(ThreadPolicy::Fifo(Some(99))));
        assert_eq!(own("other").unwrap(), Some(ThreadPolicy::Other));
        for refused in ["rr", "rr:5", "other:5", "idle", "background", "deadline:1ms/10ms", "sporadic:1ms/10ms"] {
            let e = own(refused).unwrap_err();
            assert!(matches!(e, CliError::Usage(_)), "{refused}");
            assert!(
                e.to_string().starts_with(&format!("--policy {refused}: ")) && e.to_string().contains("fifo, fifo:PRIO or other"),
                "{e}"
            );
        }
        assert_eq!(own_threads(None, None).unwrap(), None);
    }

    #[test]
    fn the_old_priority_is_still_taken() {
        assert_eq!(own_threads(None, Some(0)).unwrap(), Some(ThreadPolicy::Other));
        assert_eq!(own_threads(Some(&parsed("fifo")), Some(49)).unwrap(), Some(ThreadPolicy::Fifo(Some(49))));
        assert!(own_threads(Some(&parsed("fifo:5")), Some(49)).is_err());
        assert!(own_threads(None, Some(120)).is_err());
        assert_eq!(own_threads(Some(&parsed("other")), None).unwrap(), Some(ThreadPolicy::Other));
    }
}
