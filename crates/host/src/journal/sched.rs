//! Scheduling attributes of any thread, read and set with the kernel's
//! `sched_getattr` / `sched_setattr` (the only calls that reach
//! SCHED_DEADLINE), and the words a user asks for a policy with, on the
//! command line or in a profile (`parse_policy`; `docs/commands.md`, "CPUs
//! and policies").

use crate::error::{Error, Result};
use irqlab_analysis::parse_duration_ns;
use serde::{Deserialize, Serialize};

const SCHED_OTHER: u32 = 0;
const SCHED_FIFO: u32 = 1;
const SCHED_RR: u32 = 2;
const SCHED_BATCH: u32 = 3;
const SCHED_IDLE: u32 = 5;
const SCHED_DEADLINE: u32 = 6;

/// `struct sched_attr` (SCHED_ATTR_SIZE_VER0: 48 bytes; the utilisation
/// clamps of VER1 are left alone).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
struct RawAttr {
    size: u32,
    policy: u32,
    flags: u64,
    nice: i32,
    priority: u32,
    runtime: u64,
    deadline: u64,
    period: u64,
}

/// A thread's scheduling class and its parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "policy", rename_all = "lowercase")]
pub enum SchedAttr {
    Other { nice: i32 },
    Batch { nice: i32 },
    Idle,
    Fifo { priority: u32 },
    Rr { priority: u32 },
    Deadline { runtime_ns: u64, deadline_ns: u64, period_ns: u64 },
}

impl std::fmt::Display for SchedAttr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        use irqlab_analysis::format_ns;
        match *self {
            SchedAttr::Other { nice } => write!(f, "SCHED_OTHER nice {nice}"),
            SchedAttr::Batch { nice } => write!(f, "SCHED_BATCH nice {nice}"),
            SchedAttr::Idle => write!(f, "SCHED_IDLE"),
            SchedAttr::Fifo { priority } => write!(f, "SCHED_FIFO {priority}"),
            SchedAttr::Rr { priority } => write!(f, "SCHED_RR {priority}"),
            SchedAttr::Deadline { runtime_ns, deadline_ns, period_ns } => {
                write!(f, "SCHED_DEADLINE {}/{}/{}", format_ns(runtime_ns), format_ns(deadline_ns), format_ns(period_ns))
            }
        }
    }
}

impl SchedAttr {
    /// Whether the two set the same class and real-time priority, nice
    /// values aside: what tuned's scheduler rules set (they set no nice).
    pub fn same_class_and_priority(&self, other: &SchedAttr) -> bool {
        match (self, other) {
            (SchedAttr::Other { .. }, SchedAttr::Other { .. }) | (SchedAttr::Batch { .. }, SchedAttr::Batch { .. }) => true,
            _ => self == other,
        }
    }

    /// The kernel's number of the policy (`SCHED_OTHER` 0 .. `SCHED_DEADLINE` 6).
    pub fn policy_number(self) -> u32 {
        self.raw().policy
    }

    fn raw(self) -> RawAttr {
        let mut a = RawAttr { size: std::mem::size_of::<RawAttr>() as u32, ..Default::default() };
        match self {
            SchedAttr::Other { nice } => (a.policy, a.nice) = (SCHED_OTHER, nice),
            SchedAttr::Batch { nice } => (a.policy, a.nice) = (SCHED_BATCH, nice),
            SchedAttr::Idle => a.policy = SCHED_IDLE,
            SchedAttr::Fifo { priority } => (a.policy, a.priority) = (SCHED_FIFO, priority),
            SchedAttr::Rr { priority } => (a.policy, a.priority) = (SCHED_RR, priority),
            SchedAttr::Deadline { runtime_ns, deadline_ns, period_ns } => {
                (a.policy, a.runtime, a.deadline, a.period) = (SCHED_DEADLINE, runtime_ns, deadline_ns, period_ns)
            }
        }
        a
    }

    fn from_raw(a: &RawAttr) -> Result<SchedAttr> {
        Ok(match a.policy {
            SCHED_OTHER => SchedAttr::Other { nice: a.nice },
            SCHED_BATCH => SchedAttr::Batch { nice: a.nice },
            SCHED_IDLE => SchedAttr::Idle,
            SCHED_FIFO => SchedAttr::Fifo { priority: a.priority },
            SCHED_RR => SchedAttr::Rr { priority: a.priority },
            SCHED_DEADLINE => SchedAttr::Deadline { runtime_ns: a.runtime, deadline_ns: a.deadline, period_ns: a.period },
            other => return Err(Error::Failed(format!("unknown scheduling policy {other}"))),
        })
    }
}

/// The thread's attributes now.
pub fn get(tid: i32) -> Result<SchedAttr> {
    let mut a = RawAttr::default();
    // SAFETY: sched_getattr writes at most `size` bytes into `a`.
    let rc = unsafe { libc::syscall(libc::SYS_sched_getattr, tid, &mut a as *mut RawAttr, std::mem::size_of::<RawAttr>() as u32, 0u32) };
    if rc != 0 {
        return Err(Error::io(format!("reading the scheduling attributes of thread {tid}"), std::io::Error::last_os_error()));
    }
    SchedAttr::from_raw(&a)
}

/// Sets the thread's attributes. Errors say what the kernel refused and
/// why it usually does (SCHED_DEADLINE's affinity and admission rules).
pub fn set(tid: i32, attr: SchedAttr) -> Result<()> {
    let a = attr.raw();
    // SAFETY: sched_setattr reads `a.size` bytes from `a`.
    let rc = unsafe { libc::syscall(libc::SYS_sched_setattr, tid, &a as *const RawAttr, 0u32) };
    if rc == 0 {
        return Ok(());
    }
    let err = std::io::Error::last_os_error();
    let deadline = matches!(attr, SchedAttr::Deadline { .. });
    Err(match err.raw_os_error() {
        Some(libc::EPERM) if deadline => Error::Invalid(format!(
            "thread {tid}: the kernel refused {attr} (EPERM): a SCHED_DEADLINE thread must be allowed on every CPU of its root domain, \
             and per-CPU kthreads (ksoftirqd, per-CPU irq threads) never are"
        )),
        Some(libc::EBUSY) if deadline => Error::Invalid(format!(
            "thread {tid}: the kernel refused {attr} (EBUSY): its bandwidth does not fit what SCHED_DEADLINE admission control has left"
        )),
        Some(libc::EPERM) => Error::MissingPrivilege { capability: "CAP_SYS_NICE", purpose: format!("set thread {tid} to {attr}") },
        Some(libc::ESRCH) => Error::Failed(format!("thread {tid} is gone")),
        _ => Error::io(format!("setting thread {tid} to {attr}"), err),
    })
}

/// The longest tick a kernel enforces SCHED_DEADLINE runtimes at without
/// HRTICK_DL (HZ=100).
const LONGEST_TICK_NS: u64 = 10_000_000;

/// How long after a thread leaves SCHED_DEADLINE (or exits) the kernel may
/// still hold its bandwidth in the root domain: until its 0-lag time, when
/// the inactive timer releases it (kernel/sched/deadline.c,
/// `task_non_contending`, `inactive_task_timer`). The 0-lag time is at most
/// the thread's absolute deadline, which is at most a period ahead plus
/// one period for each runtime its last overrun took from the future; an
/// overrun is at most a tick where the kernel enforces runtimes at the
/// tick. A root domain rebuilt before the release recounts without the
/// thread, and the late release then takes it off the new count, which
/// goes below zero and refuses every SCHED_DEADLINE admission and fair
/// server change until the next rebuild (seen on 6.12.117-rt:
/// `journal::sched_knobs::LostServerBandwidth`). Capped at 2 s.
pub fn deadline_release_bound(runtime_ns: u64, period_ns: u64) -> std::time::Duration {
    let overrun_periods = LONGEST_TICK_NS.div_ceil(runtime_ns.max(1));
    let ns = period_ns.saturating_mul(overrun_periods.saturating_add(1));
    std::time::Duration::from_nanos(ns.min(2_000_000_000))
}

/// What a fixed policy or a sporadic server asks for (`PolicyWords::resolve`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum PolicySpec {
    /// A fixed setting, applied once.
    Fixed { attr: SchedAttr },
    /// POSIX sporadic server: `high` while budget remains, `low` after
    /// (kept in user space: Linux has no SCHED_SPORADIC).
    Sporadic { budget_ns: u64, period_ns: u64, high: u32, low: Option<u32>, max_repl: u32 },
}

/// The priority of `fifo` or `rr` alone where irqlab sets other threads'
/// policy (`control threads`, a profile's `[[threads]]`, `control
/// process-aware --floor`): MAX_RT_PRIO / 2, the SCHED_FIFO priority the
/// kernel gives its own threaded IRQ handlers (`setup_irq_thread`,
/// kernel/irq/manage.c) and every kthread it sets with `sched_set_fifo()`
/// (kernel/sched/syscalls.c; kernel/sched/core.c before 6.10). A thread set
/// to `fifo` alone so runs beside them, not above or below.
pub const KERNEL_FIFO_PRIORITY: u32 = 50;

/// The policy words as given (`parse_policy`): every parameter given, or
/// `fifo` / `rr` without a priority, which is the command's to choose
/// ([`PolicyWords::resolve`]): [`KERNEL_FIFO_PRIORITY`] where irqlab sets
/// other threads, the command's own default where it runs its own (the
/// probe, latency threads).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PolicyWords {
    /// Everything given: `fifo:P`, `other`, `deadline:R/P`, `sporadic:...`, ...
    Given(PolicySpec),
    /// `fifo` alone: SCHED_FIFO at the command's default priority.
    Fifo,
    /// `rr` alone: SCHED_RR at the command's default priority.
    Rr,
}

impl PolicyWords {
    /// The policy, `fifo` / `rr` alone at `priority`.
    pub fn resolve(self, priority: u32) -> PolicySpec {
        match self {
            PolicyWords::Given(spec) => spec,
            PolicyWords::Fifo => PolicySpec::Fixed { attr: SchedAttr::Fifo { priority } },
            PolicyWords::Rr => PolicySpec::Fixed { attr: SchedAttr::Rr { priority } },
        }
    }
}

/// The words of every `--policy` and `--floor`, and of a profile's
/// `policy`, in one place: `background` (SCHED_IDLE), `foreground`
/// (SCHED_FIFO 99), `fifo[:PRIO]`, `rr[:PRIO]`, `other[:NICE]`, `idle`,
/// `deadline:RUNTIME/PERIOD[/DEADLINE]`,
/// `sporadic:BUDGET/PERIOD[:HIGH/LOW][:max-repl=N]`. An error
/// ([`Error::Invalid`], exit 2) says what is wrong with which part; the
/// caller names the flag or the file position.
pub fn parse_policy(text: &str) -> Result<PolicyWords> {
    let bad = Error::Invalid;
    let priority = |p: &str| -> Result<u32> {
        p.parse::<u32>().ok().filter(|p| (1..=99).contains(p)).ok_or_else(|| bad(format!("priority `{p}` is outside 1..=99")))
    };
    let duration = |d: &str| -> Result<u64> {
        parse_duration_ns(d).map_err(|e| bad(format!("`{d}`: {e}"))).and_then(|ns| {
            if ns == 0 {
                Err(bad(format!("`{d}` is zero")))
            } else {
                Ok(ns)
            }
        })
    };
    let (kind, rest) = match text.split_once(':') {
        Some((kind, rest)) => (kind, Some(rest)),
        None => (text, None),
    };
    let fixed = |attr| Ok(PolicyWords::Given(PolicySpec::Fixed { attr }));
    match (kind, rest) {
        ("background" | "idle", None) => fixed(SchedAttr::Idle),
        ("foreground", None) => fixed(SchedAttr::Fifo { priority: 99 }),
        ("fifo", None) => Ok(PolicyWords::Fifo),
        ("rr", None) => Ok(PolicyWords::Rr),
        ("fifo", Some(p)) => fixed(SchedAttr::Fifo { priority: priority(p)? }),
        ("rr", Some(p)) => fixed(SchedAttr::Rr { priority: priority(p)? }),
        ("other", None) => fixed(SchedAttr::Other { nice: 0 }),
        ("other", Some(n)) => {
            let nice =
                n.parse::<i32>().ok().filter(|n| (-20..=19).contains(n)).ok_or_else(|| bad(format!("nice `{n}` is outside -20..=19")))?;
            fixed(SchedAttr::Other { nice })
        }
        ("deadline", spec) => deadline(spec.unwrap_or(""), &duration).map(|attr| PolicyWords::Given(PolicySpec::Fixed { attr })),
        ("sporadic", spec) => sporadic(spec.unwrap_or(""), &duration, &priority).map(PolicyWords::Given),
        _ => Err(bad(format!("unknown policy; {POLICY_WORDS}"))),
    }
}

/// What [`parse_policy`] takes, for messages.
pub const POLICY_WORDS: &str = "expected background, foreground, fifo[:PRIO], rr[:PRIO], other[:NICE], idle, \
                                deadline:RUNTIME/PERIOD[/DEADLINE] or sporadic:BUDGET/PERIOD[:HIGH/LOW][:max-repl=N]";

/// `deadline:RUNTIME/PERIOD[/DEADLINE]`'s part after the colon.
fn deadline(spec: &str, duration: &dyn Fn(&str) -> Result<u64>) -> Result<SchedAttr> {
    let parts: Vec<&str> = spec.split('/').collect();
    let (runtime_ns, period_ns, deadline_ns) = match parts.as_slice() {
        [r, p] => (duration(r)?, duration(p)?, duration(p)?),
        [r, p, d] => (duration(r)?, duration(p)?, duration(d)?),
        _ => return Err(Error::Invalid("expected deadline:RUNTIME/PERIOD[/DEADLINE], e.g. deadline:1ms/10ms".into())),
    };
    if runtime_ns > deadline_ns || deadline_ns > period_ns {
        return Err(Error::Invalid("SCHED_DEADLINE needs runtime <= deadline <= period".into()));
    }
    // The kernel's own floor (sched_dl_period_min / 2^63 ceiling).
    if runtime_ns < 1_024 {
        return Err(Error::Invalid("runtime below the kernel's 1024 ns minimum".into()));
    }
    Ok(SchedAttr::Deadline { runtime_ns, deadline_ns, period_ns })
}

/// `sporadic:BUDGET/PERIOD[:HIGH/LOW][:max-repl=N]`'s part after the colon.
fn sporadic(spec: &str, duration: &dyn Fn(&str) -> Result<u64>, priority: &dyn Fn(&str) -> Result<u32>) -> Result<PolicySpec> {
    let bad = Error::Invalid;
    let mut fields = spec.split(':');
    let (budget, period) = fields
        .next()
        .and_then(|bp| bp.split_once('/'))
        .ok_or_else(|| bad("expected sporadic:BUDGET/PERIOD[:HIGH/LOW][:max-repl=N]".into()))?;
    let (budget_ns, period_ns) = (duration(budget)?, duration(period)?);
    if budget_ns > period_ns {
        return Err(bad("the budget must not exceed the period".into()));
    }
    let (mut high, mut low, mut max_repl) = (90, None, 2);
    for field in fields {
        if let Some(n) = field.strip_prefix("max-repl=") {
            max_repl = n
                .parse::<u32>()
                .ok()
                .filter(|n| (1..=1024).contains(n))
                .ok_or_else(|| bad(format!("max-repl `{n}` is outside 1..=1024")))?;
        } else if let Some((h, l)) = field.split_once('/') {
            high = priority(h)?;
            low = if l == "none" { None } else { Some(priority(l)?) };
        } else {
            return Err(bad(format!("unknown part `{field}` (HIGH/LOW or max-repl=N)")));
        }
    }
    if low.is_some_and(|l| l >= high) {
        return Err(bad("the low priority must be below the high one".into()));
    }
    Ok(PolicySpec::Sporadic { budget_ns, period_ns, high, low, max_repl })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_deadline_threads_bandwidth_is_waited_for_up_to_its_overrun_periods() {
        let ms = std::time::Duration::from_millis;
        // 1 ms / 10 ms (the root-domain test's thread): a 10 ms tick's
        // overrun takes 10 periods' runtime, plus the period itself.
        assert_eq!(deadline_release_bound(1_000_000, 10_000_000), ms(110));
        // bh-budget's deadline mode, 450 us of each 1 ms.
        assert_eq!(deadline_release_bound(450_000, 1_000_000), ms(24));
        assert_eq!(deadline_release_bound(1_000_000, 1_000_000_000), ms(2_000), "capped");
        assert_eq!(deadline_release_bound(0, 10_000_000), ms(2_000), "no runtime: capped, no division by zero");
    }

    #[test]
    fn policies_parse() {
        let fixed = |attr| PolicyWords::Given(PolicySpec::Fixed { attr });
        assert_eq!(parse_policy("background").unwrap(), fixed(SchedAttr::Idle));
        assert_eq!(parse_policy("foreground").unwrap(), fixed(SchedAttr::Fifo { priority: 99 }));
        assert_eq!(parse_policy("rr:5").unwrap(), fixed(SchedAttr::Rr { priority: 5 }));
        assert_eq!(parse_policy("other:-5").unwrap(), fixed(SchedAttr::Other { nice: -5 }));
        assert_eq!(
            parse_policy("deadline:1ms/10ms").unwrap(),
            fixed(SchedAttr::Deadline { runtime_ns: 1_000_000, deadline_ns: 10_000_000, period_ns: 10_000_000 })
        );
        assert_eq!(
            parse_policy("sporadic:1ms/10ms:50/10:max-repl=3").unwrap(),
            PolicyWords::Given(PolicySpec::Sporadic { budget_ns: 1_000_000, period_ns: 10_000_000, high: 50, low: Some(10), max_repl: 3 })
        );
    }

    #[test]
    fn fifo_and_rr_alone_leave_the_priority_to_the_command() {
        assert_eq!(parse_policy("fifo").unwrap(), PolicyWords::Fifo);
        assert_eq!(parse_policy("rr").unwrap(), PolicyWords::Rr);
        let at_kernel_default = |text| parse_policy(text).unwrap().resolve(KERNEL_FIFO_PRIORITY);
        assert_eq!(at_kernel_default("fifo"), PolicySpec::Fixed { attr: SchedAttr::Fifo { priority: 50 } });
        assert_eq!(at_kernel_default("rr"), PolicySpec::Fixed { attr: SchedAttr::Rr { priority: 50 } });
        // A priority given is kept.
        assert_eq!(at_kernel_default("fifo:80"), PolicySpec::Fixed { attr: SchedAttr::Fifo { priority: 80 } });
        assert_eq!(parse_policy("fifo").unwrap().resolve(80), PolicySpec::Fixed { attr: SchedAttr::Fifo { priority: 80 } });
    }

    #[test]
    fn bad_policies_name_the_value() {
        for (text, says) in [
            ("fifo:100", "priority `100` is outside 1..=99"),
            ("fifo:0", "priority `0` is outside 1..=99"),
            ("fifo:", "priority `` is outside 1..=99"),
            ("rr:x", "priority `x` is outside 1..=99"),
            ("other:30", "nice `30` is outside -20..=19"),
            ("deadline:10ms/1ms", "runtime <= deadline <= period"),
            ("deadline:1ms", "expected deadline:"),
            ("deadline", "expected deadline:"),
            ("deadline:1ms/10ms/20ms", "runtime <= deadline <= period"),
            ("sporadic:2ms/1ms", "must not exceed"),
            ("sporadic", "expected sporadic:"),
            ("sporadic:1ms/10ms:10/50", "below the high"),
            ("realtime", "unknown policy; expected background, foreground, fifo[:PRIO], rr[:PRIO], other[:NICE], idle, deadline:"),
            ("idle:5", "unknown policy"),
        ] {
            let e = parse_policy(text).unwrap_err();
            assert_eq!(e.exit_code(), 2, "{text}");
            assert!(e.to_string().contains(says), "{text}: {e}");
        }
    }

    #[test]
    fn reads_and_restores_this_threads_attributes() {
        let here = nix::unistd::gettid().as_raw();
        let before = get(here).unwrap();
        assert!(matches!(before, SchedAttr::Other { .. } | SchedAttr::Batch { .. } | SchedAttr::Idle), "{before:?}");
        // Lowering the nice value's priority is always allowed.
        set(here, SchedAttr::Other { nice: 19 }).unwrap();
        assert_eq!(get(here).unwrap(), SchedAttr::Other { nice: 19 });
        let _ = set(here, before);
    }
}
