//! Where tuned's active profile and an irqlab profile set the same thing
//! differently, and which of the two the next boot keeps (issue 54):
//! `doctor` for the installed profile, `control apply` for the one it
//! applies.
//!
//! Compared, as tuned 2.20 (Debian 12's) applies its profile:
//! - **boot options**: tuned's `[bootloader] cmdline*` (or, once tuned
//!   applied it, its own evaluation in `/etc/tuned/bootcmdline`) against
//!   the profile's `[boot] cmdline`, option by option. GRUB puts irqlab's
//!   drop-in (`GRUB_CMDLINE_LINUX`) before tuned's `$tuned_params` (which
//!   tuned appends to `GRUB_CMDLINE_LINUX_DEFAULT`); the kernel takes the
//!   last value of most options, but keeps the first `isolcpus=` /
//!   `nohz_full=` mask and refuses a different later one
//!   (`housekeeping_setup`: "Housekeeping: nohz_full= must match
//!   isolcpus=").
//! - **thread policies and affinities**: tuned's `[scheduler]`
//!   `group.NAME=RULE_PRIO:SCHED:PRIO:AFFINITY:REGEX` rules, matched as
//!   tuned matches them (REGEX against `ps -eo cmd`: a kernel thread as
//!   `[name]`; rules in RULE_PRIO order, the last that sets a value wins),
//!   against the threads each `[[threads]]` MATCH names now.
//! - **isolated CPUs**: tuned's `[scheduler] isolated_cores` moves every
//!   IRQ and every thread it may off those CPUs when it starts: an irqlab
//!   IRQ or thread placed on one of them disagrees.
//!
//! Run-time settings at the next boot: tuned applies its profile at every
//! boot; irqlab's installed unit starts after `tuned.service` and holds
//! its profile, setting back what changes (`--follow`), so an installed
//! profile keeps its values and one applied for this boot only does not.

use crate::profile::{fixed_policy, Profile};
use irqlab_host::journal::threads::{Match, Thread};
use irqlab_host::rt::format_cpu_list;
use irqlab_host::tuned_profile::{self, Merged, Roots};
use serde::Serialize;

/// A thread as tuned's scheduler plugin sees it.
#[derive(Debug, Clone)]
pub struct PsThread {
    pub tid: i32,
    pub comm: String,
    /// What tuned matches its rules against (`ps -eo cmd`): `[comm]` for a
    /// kernel thread, else its process's command line.
    pub cmd: String,
}

/// One setting the two profiles set differently.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Disagreement {
    /// The irqlab setting (`boot isolcpus`, `threads comm:kswapd0`, `irq 25`).
    pub setting: String,
    /// What irqlab's profile sets.
    pub irqlab: String,
    /// What tuned's sets, and where.
    pub tuned: String,
    pub tuned_from: String,
    /// Which of the two the next boot keeps.
    pub next_boot_keeps: Keeps,
    /// Why, for people.
    pub next_boot: String,
}

/// Whose value a setting has after the next boot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Keeps {
    Irqlab,
    Tuned,
}

/// tuned's active profile beside an irqlab profile.
#[derive(Debug, Clone, Serialize)]
pub struct BesideTuned {
    /// tuned's active profile, and the profiles it merges.
    pub tuned_profile: String,
    pub tuned_merges: Vec<String>,
    pub irqlab_profile: String,
    /// Whether the irqlab profile is the installed one (`control install`).
    pub installed: bool,
    pub disagreements: Vec<Disagreement>,
    /// What of tuned's profile irqlab could not evaluate: a disagreement
    /// may hide there.
    pub unresolved: Vec<String>,
}

impl BesideTuned {
    /// Its heading and one line per disagreement and per part of tuned's
    /// profile not evaluated, for a terminal (`doctor`, `control apply`).
    pub fn lines(&self) -> Vec<String> {
        let merges = if self.tuned_merges.len() > 1 { format!(" (merging {})", self.tuned_merges.join(", ")) } else { String::new() };
        let mut lines = vec![format!(
            "tuned's profile {}{merges} beside {}: {} setting(s) set differently",
            self.tuned_profile,
            self.irqlab_profile,
            self.disagreements.len()
        )];
        for d in &self.disagreements {
            lines.push(format!(
                "{}: irqlab sets {}, tuned {} ({}); at the next boot: {}",
                d.setting, d.irqlab, d.tuned, d.tuned_from, d.next_boot
            ));
        }
        lines.extend(self.unresolved.iter().map(|u| format!("not evaluated: {u}")));
        lines
    }
}

/// What the comparison takes from the machine.
pub struct Inputs<'a> {
    pub tuned_profile: &'a str,
    pub merged: &'a Merged,
    /// `/etc/tuned/bootcmdline`'s options, where tuned wrote them.
    pub tuned_boot: Option<&'a str>,
    pub irqlab_profile: &'a str,
    pub installed: bool,
    /// Whether irqlab's `[boot]` options are written for the next boot.
    pub boot_written: bool,
    pub threads: &'a [PsThread],
}

/// The comparison, pure.
pub fn compare(profile: &Profile, inputs: &Inputs) -> BesideTuned {
    let mut unresolved = inputs.merged.unresolved.clone();
    let mut disagreements = boot_options(profile, inputs);
    let rules = tuned_profile::scheduler_rules(inputs.merged, &mut unresolved);
    disagreements.extend(thread_policies(profile, inputs, &rules, &mut unresolved));
    disagreements.extend(isolated_cores(profile, inputs, &mut unresolved));
    BesideTuned {
        tuned_profile: inputs.tuned_profile.to_string(),
        tuned_merges: inputs.merged.profiles.clone(),
        irqlab_profile: inputs.irqlab_profile.to_string(),
        installed: inputs.installed,
        disagreements,
        unresolved,
    }
}

/// The boot option's key (`isolcpus` of `isolcpus=1-3`).
fn key(word: &str) -> &str {
    word.split_once('=').map_or(word, |(k, _)| k)
}

fn boot_options(profile: &Profile, inputs: &Inputs) -> Vec<Disagreement> {
    let Some(boot) = &profile.boot else { return Vec::new() };
    let tuned: Vec<(String, String)> = match inputs.tuned_boot {
        Some(line) => line.split_whitespace().map(|w| (w.to_string(), "/etc/tuned/bootcmdline (tuned's own evaluation)".into())).collect(),
        None => tuned_profile::bootloader_cmdline(inputs.merged),
    };
    let mut out = Vec::new();
    for ours in boot.cmdline.get_ref().split_whitespace() {
        for (theirs, from) in tuned.iter().filter(|(w, _)| key(w) == key(ours) && w != ours) {
            if tuned_profile::has_reference(theirs) || theirs.contains("<unresolved>") {
                continue;
            }
            let k = key(ours);
            let (next_boot_keeps, next_boot) = if !inputs.boot_written {
                (
                    Keeps::Tuned,
                    "tuned's: irqlab's [boot] options are not written for the next boot (`irqlab control apply PROFILE --boot`)"
                        .to_string(),
                )
            } else if matches!(k, "isolcpus" | "nohz_full") {
                (
                    Keeps::Irqlab,
                    format!(
                        "irqlab's: GRUB puts irqlab's options before tuned's, and the kernel keeps the first {k}= mask and refuses a \
                         different later one (\"Housekeeping: nohz_full= must match isolcpus=\")"
                    ),
                )
            } else {
                (Keeps::Tuned, format!("tuned's: GRUB puts tuned's options after irqlab's, and the kernel takes the last {k}="))
            };
            out.push(Disagreement {
                setting: format!("boot {k}"),
                irqlab: ours.to_string(),
                tuned: theirs.clone(),
                tuned_from: from.clone(),
                next_boot_keeps,
                next_boot,
            });
        }
    }
    out
}

fn run_time_next_boot(inputs: &Inputs) -> (Keeps, String) {
    if inputs.installed {
        (
            Keeps::Irqlab,
            "irqlab's: its unit (irqlab-profile.service) starts after tuned.service and holds the profile, setting back what \
             tuned changes"
                .into(),
        )
    } else {
        (
            Keeps::Tuned,
            "tuned's: it applies its profile at every boot, and this irqlab profile is applied for this boot only (`irqlab \
             control install` keeps it)"
                .into(),
        )
    }
}

fn thread_policies(profile: &Profile, inputs: &Inputs, rules: &[tuned_profile::Rule], unresolved: &mut Vec<String>) -> Vec<Disagreement> {
    let mut out: Vec<Disagreement> = Vec::new();
    for s in &profile.threads {
        let (Ok(matched), Ok(ours)) = (Match::parse(s.matched.get_ref()), fixed_policy(s.policy.get_ref())) else { continue };
        let pin = s.cpus.as_ref().and_then(|c| irqlab_host::rt::parse_cpu_list(c.get_ref()).ok());
        for t in inputs.threads.iter().filter(|t| matched.matches(&Thread { tid: t.tid, comm: t.comm.clone(), start_ticks: 0 })) {
            let (policy, affinity) = tuned_profile::deciding_rules(rules, &t.cmd, unresolved);
            let setting = format!("threads {}", s.matched.get_ref());
            let thread = format!("{} ({})", t.comm, t.tid);
            if let Some(rule) = policy.filter(|r| r.policy.as_ref().is_some_and(|p| !ours.same_class_and_priority(p))) {
                let theirs = rule.policy.as_ref().map(ToString::to_string).unwrap_or_default();
                add(
                    &mut out,
                    &setting,
                    &thread,
                    ours.to_string(),
                    theirs,
                    format!("[scheduler] group.{} ({})", rule.name, rule.from),
                    inputs,
                );
            }
            if let (Some(pin), Some(rule)) = (&pin, affinity) {
                let theirs = rule.affinity.clone().unwrap_or_default();
                if &theirs != pin {
                    let from = format!("[scheduler] group.{} ({})", rule.name, rule.from);
                    add(
                        &mut out,
                        &setting,
                        &thread,
                        format!("CPUs {}", format_cpu_list(pin)),
                        format!("CPUs {}", format_cpu_list(&theirs)),
                        from,
                        inputs,
                    );
                }
            }
        }
    }
    out
}

/// Adds a thread's disagreement, folded into one of the same setting,
/// values and rule (a glob naming many threads is one line).
fn add(out: &mut Vec<Disagreement>, setting: &str, thread: &str, irqlab: String, tuned: String, from: String, inputs: &Inputs) {
    if let Some(d) =
        out.iter_mut().find(|d| d.setting.starts_with(setting) && d.irqlab == irqlab && d.tuned == tuned && d.tuned_from == from)
    {
        d.setting.insert_str(d.setting.len() - 1, &format!(", {thread}"));
        return;
    }
    let (next_boot_keeps, next_boot) = run_time_next_boot(inputs);
    out.push(Disagreement { setting: format!("{setting} ({thread})"), irqlab, tuned, tuned_from: from, next_boot_keeps, next_boot });
}

fn isolated_cores(profile: &Profile, inputs: &Inputs, unresolved: &mut Vec<String>) -> Vec<Disagreement> {
    let Some(isolated) = inputs.merged.option("scheduler", "isolated_cores") else { return Vec::new() };
    if isolated.value.trim().is_empty() {
        return Vec::new();
    }
    let Ok(cores) = irqlab_host::rt::parse_cpu_list(isolated.value.trim()) else {
        unresolved.push(format!("{}: [scheduler] isolated_cores {:?} is not a CPU list", isolated.from, isolated.value));
        return Vec::new();
    };
    let from = format!("[scheduler] isolated_cores ({})", isolated.from);
    let tuned = format!("every IRQ and thread off CPUs {}", format_cpu_list(&cores));
    let mut out = Vec::new();
    let mut check = |setting: String, cpus: &str| {
        let Ok(cpus) = irqlab_host::rt::parse_cpu_list(cpus) else { return };
        let on: Vec<usize> = cpus.iter().copied().filter(|c| cores.contains(c)).collect();
        if !on.is_empty() {
            let (next_boot_keeps, next_boot) = run_time_next_boot(inputs);
            out.push(Disagreement {
                setting,
                irqlab: format!("CPUs {} ({} of them isolated by tuned)", format_cpu_list(&cpus), format_cpu_list(&on)),
                tuned: tuned.clone(),
                tuned_from: from.clone(),
                next_boot_keeps,
                next_boot,
            });
        }
    };
    if let Some(d) = &profile.default_irq {
        check("default IRQ affinity".into(), d.cpus.get_ref());
    }
    for s in &profile.irqs {
        check(format!("irq {}", s.irq.get_ref()), s.cpus.get_ref());
    }
    for s in &profile.threads {
        if let Some(cpus) = &s.cpus {
            check(format!("threads {}", s.matched.get_ref()), cpus.get_ref());
        }
    }
    out
}

/// Every thread as tuned's scheduler plugin sees it.
pub fn ps_threads() -> Vec<PsThread> {
    irqlab_host::journal::threads::all_threads()
        .into_iter()
        .map(|t| PsThread { cmd: tuned_profile::ps_cmd(t.tid, &t.comm), tid: t.tid, comm: t.comm })
        .collect()
}

/// tuned's active profile beside `profile` on this machine; None where
/// tuned has no active profile.
pub fn on_this_machine(profile: &Profile, file: &str) -> Option<BesideTuned> {
    let roots = Roots::system();
    let active = roots.active()?;
    let merged = tuned_profile::load(&active, &roots, &tuned_profile::Machine::read());
    let tuned_boot = roots.boot_cmdline();
    let same = |a: &str, b: &str| std::fs::canonicalize(a).ok().zip(std::fs::canonicalize(b).ok()).is_some_and(|(a, b)| a == b);
    let inputs = Inputs {
        tuned_profile: &active,
        merged: &merged,
        tuned_boot: tuned_boot.as_deref(),
        irqlab_profile: file,
        // Installed: `control install`'s copy, with its unit.
        installed: same(file, crate::install::PROFILE) && std::path::Path::new(crate::install::UNIT).exists(),
        boot_written: crate::boot::command_line().written.is_some(),
        threads: &ps_threads(),
    };
    Some(compare(profile, &inputs))
}

/// The installed irqlab profile (`control install`) beside tuned's active
/// one (`doctor`); None where either is missing. A profile that does not
/// parse is said as unresolved.
pub fn installed_beside_tuned() -> Option<BesideTuned> {
    let text = std::fs::read_to_string(crate::install::PROFILE).ok()?;
    match Profile::parse(crate::install::PROFILE, &text) {
        Ok(profile) => on_this_machine(&profile, crate::install::PROFILE),
        Err(e) => {
            let active = Roots::system().active()?;
            Some(BesideTuned {
                tuned_profile: active,
                tuned_merges: Vec::new(),
                irqlab_profile: crate::install::PROFILE.into(),
                installed: true,
                disagreements: Vec::new(),
                unresolved: vec![format!("the installed irqlab profile does not parse: {e}")],
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use irqlab_host::tuned_profile::Setting;

    fn merged(units: &[(&str, &[(&str, &str)])]) -> Merged {
        let mut m = Merged { profiles: vec!["rt".into()], ..Merged::default() };
        for (unit, options) in units {
            let options = options
                .iter()
                .enumerate()
                .map(|(i, (k, v))| (k.to_string(), Setting { value: v.to_string(), from: format!("rt/tuned.conf:{}", i + 1) }))
                .collect();
            m.units.insert(unit.to_string(), options);
        }
        m
    }

    fn thread(tid: i32, comm: &str, kernel: bool) -> PsThread {
        PsThread { tid, comm: comm.into(), cmd: if kernel { format!("[{comm}]") } else { format!("/usr/bin/{comm} --serve") } }
    }

    const PROFILE: &str = r#"schema = "irqlab/profile/v1"

[[irq]]
irq = "eth0"
cpus = "0"

[[threads]]
match = "comm:kswapd0"
policy = "fifo:20"
all_matching = true

[[threads]]
match = "comm:ktimers/*"
policy = "fifo:3"
cpus = "1"
all_matching = true

[boot]
cmdline = "nohz_full=1 rcu_nocbs=1 irqaffinity=0"
"#;

    fn inputs<'a>(merged: &'a Merged, threads: &'a [PsThread], installed: bool) -> Inputs<'a> {
        Inputs { tuned_profile: "rt", merged, tuned_boot: None, irqlab_profile: "p.toml", installed, boot_written: true, threads }
    }

    #[test]
    fn each_setting_set_differently_is_named_with_who_wins_at_the_next_boot() {
        let profile = Profile::parse("p.toml", PROFILE).unwrap();
        let m = merged(&[
            ("bootloader", &[("cmdline_rt", "+nohz_full=2-3 rcu_nocbs=2-3 skew_tick=1 irqaffinity=0")]),
            (
                "scheduler",
                &[
                    ("group.late", "5:f:9:*:^\\[kswapd"),
                    ("group.kswapd", "0:f:7:*:^\\[kswapd0\\]$"),
                    ("group.ktimers", "0:f:3:00000004:^\\[ktimers/"),
                    ("isolated_cores", "0"),
                ],
            ),
        ]);
        let threads =
            [thread(40, "kswapd0", true), thread(17, "ktimers/0", true), thread(18, "ktimers/1", true), thread(99, "kswapd0", false)];
        let b = compare(&profile, &inputs(&m, &threads, false));
        let found: Vec<(&str, &str, &str)> =
            b.disagreements.iter().map(|d| (d.setting.as_str(), d.irqlab.as_str(), d.tuned.as_str())).collect();
        assert_eq!(
            found,
            [
                ("boot nohz_full", "nohz_full=1", "nohz_full=2-3"),
                ("boot rcu_nocbs", "rcu_nocbs=1", "rcu_nocbs=2-3"),
                // The later rule by RULE_PRIO decides; the user process
                // named kswapd0 matches no rule (tuned sees its command).
                ("threads comm:kswapd0 (kswapd0 (40))", "SCHED_FIFO 20", "SCHED_FIFO 9"),
                ("threads comm:ktimers/* (ktimers/0 (17), ktimers/1 (18))", "CPUs 1", "CPUs 2"),
                ("irq eth0", "CPUs 0 (0 of them isolated by tuned)", "every IRQ and thread off CPUs 0"),
            ]
        );
        assert_eq!(b.disagreements[0].next_boot_keeps, Keeps::Irqlab, "the first nohz_full= mask stays");
        assert_eq!(b.disagreements[1].next_boot_keeps, Keeps::Tuned, "the last rcu_nocbs= wins");
        assert_eq!(b.disagreements[2].next_boot_keeps, Keeps::Tuned, "not installed: tuned applies at every boot");
        assert_eq!(b.disagreements[2].tuned_from, "[scheduler] group.late (rt/tuned.conf:1)");
        let installed = compare(&profile, &inputs(&m, &threads, true));
        assert_eq!(installed.disagreements[2].next_boot_keeps, Keeps::Irqlab, "{:?}", installed.disagreements[2]);
    }

    #[test]
    fn tuneds_own_evaluation_is_preferred_and_what_it_cannot_read_is_said() {
        let profile = Profile::parse("p.toml", PROFILE).unwrap();
        let m = merged(&[
            ("bootloader", &[("cmdline", "nohz_full=${isolated_cores}")]),
            ("scheduler", &[("group.bad", "0:x:1:*:.*"), ("group.re", "0:f:1:*:([")]),
        ]);
        let mut i = inputs(&m, &[], true);
        let b = compare(&profile, &i);
        assert!(b.disagreements.is_empty(), "an unexpanded value is not compared: {:?}", b.disagreements);
        assert_eq!(b.unresolved.len(), 2, "{:?}", b.unresolved);
        i.tuned_boot = Some("nohz_full=3 rcu_nocbs=1");
        let b = compare(&profile, &i);
        assert_eq!(b.disagreements.len(), 1);
        assert_eq!(b.disagreements[0].tuned_from, "/etc/tuned/bootcmdline (tuned's own evaluation)");
        i.boot_written = false;
        assert_eq!(compare(&profile, &i).disagreements[0].next_boot_keeps, Keeps::Tuned, "not written yet");
    }
}
