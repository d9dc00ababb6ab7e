//! Kernel command-line options a profile asks for (`[boot] cmdline`):
//! checked one by one against the options irqlab knows, never isolating
//! every CPU, and written where the boot loader takes them (`control apply
//! --boot`: a GRUB drop-in, journalled in the durable journal, removed by
//! `control revert`). They take effect at the next boot; `doctor` shows
//! the running kernel's command line beside them.

use irqlab_host::error::{Error, Result};
use irqlab_host::journal::{self, Object, Value};
use irqlab_host::rt;

/// The drop-in irqlab writes (GRUB on Debian sources `grub.d/*.cfg` after
/// `/etc/default/grub`, so it adds to the machine's own options).
pub const GRUB_DROP_IN: &str = "/etc/default/grub.d/irqlab.cfg";
/// GRUB's own settings: there is a GRUB to take the drop-in when it exists.
const GRUB_DEFAULTS: &str = "/etc/default/grub";

/// What an option's value must be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Takes {
    /// A CPU list (`1-3,5`).
    Cpus,
    /// `isolcpus=[FLAG,]...CPUS`, FLAG one of nohz, domain, managed_irq.
    IsolCpus,
    /// No value (`threadirqs`).
    Nothing,
    /// A whole number.
    Number,
    /// One of these words.
    Word(&'static [&'static str]),
}

/// The options irqlab writes or accepts in a profile, with what each does
/// (Documentation/admin-guide/kernel-parameters.txt), for `because` and
/// for the error that lists them.
const KNOWN: &[(&str, Takes, &str)] = &[
    (
        "isolcpus",
        Takes::IsolCpus,
        "keeps the scheduler's load balancing (domain), managed IRQs (managed_irq) and the tick (nohz) off these CPUs",
    ),
    ("nohz_full", Takes::Cpus, "stops the timer tick on these CPUs while one task runs there"),
    ("rcu_nocbs", Takes::Cpus, "runs these CPUs' RCU callbacks in rcuo kthreads, which can run elsewhere"),
    ("irqaffinity", Takes::Cpus, "the CPUs IRQs start on (what /proc/irq/default_smp_affinity holds at boot)"),
    ("kthread_cpus", Takes::Cpus, "the CPUs unbound kernel threads start on"),
    ("rcu_nocb_poll", Takes::Nothing, "the rcuo kthreads poll instead of being woken from the offloaded CPUs"),
    ("threadirqs", Takes::Nothing, "IRQ handlers run in kernel threads (irq/N-NAME) on a kernel without PREEMPT_RT"),
    ("nosoftlockup", Takes::Nothing, "no soft-lockup watchdog thread and timer"),
    ("nmi_watchdog", Takes::Number, "0: no NMI watchdog"),
    ("skew_tick", Takes::Number, "1: the CPUs' ticks are offset from each other"),
    ("nohz", Takes::Word(&["on", "off"]), "the idle tickless mode"),
    ("tsc", Takes::Word(&["reliable", "nowatchdog", "noirqtime", "unstable", "recalibrate"]), "how the TSC clocksource is trusted"),
    ("idle", Takes::Word(&["poll", "halt", "nomwait"]), "how an idle CPU waits"),
    ("intel_idle.max_cstate", Takes::Number, "the deepest C-state intel_idle enters"),
    ("processor.max_cstate", Takes::Number, "the deepest C-state the ACPI idle driver enters"),
    ("rcutree.kthread_prio", Takes::Number, "the SCHED_FIFO priority of RCU's kthreads"),
    ("rcupdate.rcu_normal_after_boot", Takes::Number, "1: no expedited grace periods (no IPIs to every CPU) after boot"),
    ("preempt", Takes::Word(&["none", "voluntary", "full", "lazy"]), "the preemption model of a PREEMPT_DYNAMIC kernel"),
];

const ISOLCPUS_FLAGS: &[&str] = &["nohz", "domain", "managed_irq"];

/// One checked option.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BootOption {
    /// As written (`nohz_full=1`).
    pub text: String,
    pub key: String,
    /// The CPUs it names, for the CPU-list options.
    pub cpus: Vec<usize>,
}

/// A bad option: what is wrong, and its byte offset in the command line
/// (for the profile's file:line:col).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    pub message: String,
    pub offset: usize,
}

/// Checks `cmdline` (space-separated options) against [`KNOWN`] and
/// `cpus`, the machine's CPUs: each CPU list within them, and at least one
/// CPU left neither in `isolcpus` nor in `nohz_full` (the housekeeping
/// CPU every isolating layout needs: the kernel keeps its own work, the
/// IRQs and the unbound threads there).
pub fn check(cmdline: &str, cpus: &[usize]) -> std::result::Result<Vec<BootOption>, Refused> {
    let mut options = Vec::new();
    let mut offset = 0;
    for word in cmdline.split(' ') {
        let at = offset;
        offset += word.len() + 1;
        if word.is_empty() {
            continue;
        }
        let refused = |message: String| Refused { message, offset: at };
        let (key, value) = match word.split_once('=') {
            Some((k, v)) => (k, Some(v)),
            None => (word, None),
        };
        let Some(&(_, takes, _)) = KNOWN.iter().find(|(k, _, _)| *k == key) else {
            let known: Vec<&str> = KNOWN.iter().map(|(k, _, _)| *k).collect();
            return Err(refused(format!("boot option `{key}`: not one irqlab knows (known: {})", known.join(", "))));
        };
        let cpu_list = |list: &str| -> std::result::Result<Vec<usize>, Refused> {
            let named = rt::parse_cpu_list(list).map_err(|e| refused(format!("boot option `{word}`: {e}")))?;
            if let Some(bad) = named.iter().find(|c| !cpus.contains(c)) {
                return Err(refused(format!(
                    "boot option `{word}`: CPU {bad} is not one of this machine's (CPUs {})",
                    rt::format_cpu_list(cpus)
                )));
            }
            Ok(named)
        };
        let named = match (takes, value) {
            (Takes::Nothing, None) => Vec::new(),
            (Takes::Nothing, Some(_)) => return Err(refused(format!("boot option `{word}`: `{key}` takes no value"))),
            (_, None | Some("")) => return Err(refused(format!("boot option `{word}`: `{key}` needs a value"))),
            (Takes::Cpus, Some(list)) => cpu_list(list)?,
            (Takes::IsolCpus, Some(v)) => {
                let items: Vec<&str> = v.split(',').collect();
                let flags = items.iter().take_while(|i| i.chars().all(|c| c.is_ascii_alphabetic() || c == '_')).count();
                if let Some(bad) = items[..flags].iter().find(|f| !ISOLCPUS_FLAGS.contains(f)) {
                    return Err(refused(format!("boot option `{word}`: flag `{bad}` is not one of {}", ISOLCPUS_FLAGS.join(", "))));
                }
                if flags == items.len() {
                    return Err(refused(format!("boot option `{word}`: no CPU list after the flags")));
                }
                cpu_list(&items[flags..].join(","))?
            }
            (Takes::Number, Some(n)) => {
                n.parse::<u64>().map_err(|_| refused(format!("boot option `{word}`: `{n}` is not a whole number")))?;
                Vec::new()
            }
            (Takes::Word(words), Some(w)) => {
                if !words.contains(&w) {
                    return Err(refused(format!("boot option `{word}`: `{w}` is not one of {}", words.join(", "))));
                }
                Vec::new()
            }
        };
        if options.iter().any(|o: &BootOption| o.key == key) {
            return Err(refused(format!("boot option `{key}` is given twice")));
        }
        options.push(BootOption { text: word.to_string(), key: key.to_string(), cpus: named });
    }
    let isolated: std::collections::BTreeSet<usize> =
        options.iter().filter(|o| o.key == "isolcpus" || o.key == "nohz_full").flat_map(|o| o.cpus.iter().copied()).collect();
    if !cpus.is_empty() && cpus.iter().all(|c| isolated.contains(c)) {
        let at = cmdline.find("isolcpus").or_else(|| cmdline.find("nohz_full")).unwrap_or(0);
        return Err(Refused {
            message: format!(
                "the boot options isolate every CPU ({}): at least one must stay for the kernel's own work, the IRQs and the \
                 unbound threads",
                rt::format_cpu_list(cpus)
            ),
            offset: at,
        });
    }
    for o in options.iter().filter(|o| o.key == "irqaffinity" || o.key == "kthread_cpus") {
        if o.cpus.iter().all(|c| isolated.contains(c)) {
            let at = cmdline.find(&o.text).unwrap_or(0);
            return Err(Refused {
                message: format!(
                    "boot option `{}` names only isolated CPUs: it would put that work where the isolation keeps it off",
                    o.text
                ),
                offset: at,
            });
        }
    }
    Ok(options)
}

/// What each option does, for `control apply` and the page.
pub fn what_it_does(key: &str) -> Option<&'static str> {
    KNOWN.iter().find(|(k, _, _)| *k == key).map(|(_, _, does)| *does)
}

/// The machine's CPUs as the command line may name them: the possible
/// ones (an offline CPU may be isolated for when it comes up), else the
/// online ones.
pub fn machine_cpus() -> Result<Vec<usize>> {
    match std::fs::read_to_string("/sys/devices/system/cpu/possible") {
        Ok(text) => rt::parse_cpu_list(text.trim()).map_err(|e| Error::Failed(format!("/sys/devices/system/cpu/possible: {e}"))),
        Err(_) => rt::online_cpus(),
    }
}

/// The running kernel's command line (`/proc/cmdline`), word by word.
pub fn running() -> Result<String> {
    std::fs::read_to_string("/proc/cmdline").map(|t| t.trim().to_string()).map_err(|e| Error::io("reading /proc/cmdline", e))
}

/// Which of `options` the running kernel was booted with (the same
/// `key=value`) and which not.
pub fn in_force<'a>(options: &'a [BootOption], running: &str) -> (Vec<&'a BootOption>, Vec<&'a BootOption>) {
    let words: Vec<&str> = running.split_whitespace().collect();
    options.iter().partition(|o| words.contains(&o.text.as_str()))
}

/// The drop-in's text: the options added to GRUB's own.
pub fn grub_drop_in(options: &[BootOption], source: &str) -> String {
    let words: Vec<&str> = options.iter().map(|o| o.text.as_str()).collect();
    format!(
        "# Written by irqlab (control apply --boot {source}); `irqlab control revert` removes it.\n\
         GRUB_CMDLINE_LINUX=\"$GRUB_CMDLINE_LINUX {}\"\n",
        words.join(" ")
    )
}

/// Exit 3 naming GRUB, and the options to add by hand, where there is no
/// GRUB to take a drop-in.
pub fn require_grub(options: &[BootOption]) -> Result<()> {
    if std::path::Path::new(GRUB_DEFAULTS).exists() {
        return Ok(());
    }
    let words: Vec<&str> = options.iter().map(|o| o.text.as_str()).collect();
    Err(Error::MissingKernelFeature {
        feature: format!("GRUB ({GRUB_DEFAULTS})"),
        detail: format!(
            "irqlab writes boot options as a GRUB drop-in; add `{}` to this machine's boot loader's kernel command line by hand",
            words.join(" ")
        ),
    })
}

/// What `apply` did.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Written {
    pub file: String,
    pub entry: String,
    pub options: Vec<String>,
    /// `update-grub` ran (else: the command to run is named).
    pub grub_updated: bool,
}

/// Writes the options as GRUB's drop-in through the durable journal and
/// keeps it (a persistent entry: `control revert ID` removes it and
/// regenerates GRUB's configuration). Exit 3 naming what is missing where
/// there is no GRUB to take it, before anything is written.
pub fn apply(options: &[BootOption], source: &str) -> Result<Written> {
    require_grub(options)?;
    let object = Object::BootFile { path: GRUB_DROP_IN.into() };
    let new = Value::Content { content: Some(grub_drop_in(options, source)) };
    let entry = journal::apply(object, new)?.persist()?;
    Ok(Written {
        file: GRUB_DROP_IN.into(),
        entry: entry.id,
        options: options.iter().map(|o| o.text.clone()).collect(),
        grub_updated: irqlab_host::privilege::on_path("update-grub").is_some(),
    })
}

/// The kernel command line: the running one, and the options irqlab's
/// drop-in asks for (`doctor`).
#[derive(Debug, Clone, serde::Serialize)]
pub struct CommandLine {
    pub running: String,
    /// irqlab's GRUB drop-in, when a journal entry keeps one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub written: Option<DropIn>,
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct DropIn {
    pub file: String,
    pub entry: String,
    /// Options the running kernel was booted with.
    pub in_force: Vec<String>,
    /// Options the next boot takes.
    pub pending: Vec<String>,
}

/// The running command line beside irqlab's drop-in, if one is kept.
pub fn command_line() -> CommandLine {
    let running = running().unwrap_or_default();
    let written = journal::entries().into_iter().find_map(|e| {
        let Object::BootFile { path } = &e.object else { return None };
        let Value::Content { content: Some(text) } = &e.new else { return None };
        let options = drop_in_options(text);
        let words: Vec<&str> = running.split_whitespace().collect();
        let (in_force, pending) = options.into_iter().partition(|o| words.contains(&o.as_str()));
        Some(DropIn { file: path.clone(), entry: e.id.clone(), in_force, pending })
    });
    CommandLine { running, written }
}

/// The options a drop-in of [`grub_drop_in`]'s form adds.
fn drop_in_options(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|l| l.strip_prefix("GRUB_CMDLINE_LINUX=\"$GRUB_CMDLINE_LINUX "))
        .flat_map(|rest| rest.trim_end_matches('"').split_whitespace().map(String::from).collect::<Vec<_>>())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const CPUS: &[usize] = &[0, 1, 2, 3];

    #[test]
    fn known_options_pass_with_their_cpus() {
        let o = check("isolcpus=managed_irq,domain,1-3 nohz_full=2,3 rcu_nocbs=1-3 irqaffinity=0 threadirqs nohz=on", CPUS).unwrap();
        assert_eq!(o.len(), 6);
        assert_eq!((o[0].key.as_str(), o[0].cpus.as_slice()), ("isolcpus", &[1, 2, 3][..]));
        assert_eq!(o[1].cpus, vec![2, 3]);
        assert!(o[4].cpus.is_empty());
        // Extra spaces are no options.
        assert_eq!(check("  nohz_full=1  ", CPUS).unwrap().len(), 1);
    }

    #[test]
    fn each_bad_option_is_named_at_its_place() {
        for (cmdline, offset, says) in [
            ("nohz_full=1 isolate=2", 12, "`isolate`: not one irqlab knows"),
            ("nohz_full=7", 0, "CPU 7 is not one of this machine's"),
            ("threadirqs=1", 0, "takes no value"),
            ("irqaffinity=0 rcu_nocbs", 14, "needs a value"),
            ("isolcpus=fast,1", 0, "flag `fast`"),
            ("isolcpus=domain", 0, "no CPU list"),
            ("nohz=maybe", 0, "`maybe` is not one of on, off"),
            ("skew_tick=x", 0, "not a whole number"),
            ("nohz_full=1 nohz_full=2", 12, "given twice"),
            ("nohz_full=3-1", 0, "runs backwards"),
        ] {
            let e = check(cmdline, CPUS).unwrap_err();
            assert!(e.message.contains(says), "{cmdline}: {}", e.message);
            assert_eq!(e.offset, offset, "{cmdline}: {}", e.message);
        }
    }

    #[test]
    fn isolating_every_cpu_is_refused() {
        let e = check("rcu_nocbs=0-3 isolcpus=0-1 nohz_full=2-3", CPUS).unwrap_err();
        assert!(e.message.contains("isolate every CPU (0-3)"), "{}", e.message);
        assert_eq!(e.offset, 14);
        // rcu_nocbs on every CPU isolates nothing: a common setting.
        assert!(check("rcu_nocbs=0-3 nohz_full=1-3", CPUS).is_ok());
        let e = check("nohz_full=1-3 irqaffinity=2", CPUS).unwrap_err();
        assert!(e.message.contains("only isolated CPUs"), "{}", e.message);
    }

    #[test]
    fn the_running_command_line_is_compared_option_by_option() {
        let o = check("nohz_full=1 rcu_nocbs=1", CPUS).unwrap();
        let (yes, no) = in_force(&o, "BOOT_IMAGE=/vmlinuz root=/dev/vda nohz_full=1 quiet");
        assert_eq!(yes.iter().map(|o| o.text.as_str()).collect::<Vec<_>>(), ["nohz_full=1"]);
        assert_eq!(no.iter().map(|o| o.text.as_str()).collect::<Vec<_>>(), ["rcu_nocbs=1"]);
    }

    #[test]
    fn the_drop_in_adds_to_grubs_own_options() {
        let o = check("nohz_full=1 rcu_nocbs=1", CPUS).unwrap();
        let text = grub_drop_in(&o, "p.toml");
        assert!(text.ends_with("GRUB_CMDLINE_LINUX=\"$GRUB_CMDLINE_LINUX nohz_full=1 rcu_nocbs=1\"\n"), "{text}");
        assert!(text.starts_with("# Written by irqlab"));
        assert_eq!(drop_in_options(&text), ["nohz_full=1", "rcu_nocbs=1"]);
    }
}
