//! `irqlab control export PROFILE --tuned DIR`: a profile as a tuned
//! profile, for machines whose tuning lives in tuned rather than in
//! `control install`'s unit. Pure: a parsed profile and the tuned it is for
//! in, the files of the profile directory out (`tuned.conf` and, where
//! tuned has no plugin for a setting, `script.sh`).
//!
//! The mapping, read off tuned 2.20's plugins (Debian 12's tuned):
//! - `[[threads]]` → `[scheduler]` `group.NAME=RULE_PRIO:SCHED:PRIO:AFFINITY:REGEX`,
//!   REGEX matched against `ps -eo cmd` (a kernel thread as `[name]`, a
//!   process by its command line, the same line for all its threads),
//!   AFFINITY a hex mask. A `pid:N` has no stable form and SCHED_DEADLINE
//!   no letter: left out, said in tuned.conf and to the caller.
//! - `[default_irq]` → `[irqbalance] banned_cpus` (the other CPUs: kept
//!   free of balanced IRQs).
//! - `[[napi]]`, `[[rps]]` → `[sysfs]` (the plugin globs paths, so every
//!   receive queue is one line).
//! - `[boot] cmdline` → `[bootloader]`.
//! - IRQ affinities (`[default_irq]`, `[[irq]]`) → `[script]`: tuned 2.20's
//!   only IRQ knob is the scheduler's `isolated_cores`, which also moves
//!   every process. From tuned 2.23 the `irq` plugin takes them, by number
//!   only, so a profile naming an IRQ by its name keeps the script.

use crate::boot;
use crate::profile::{self, Profile};
use irqlab_analysis::input::{InputError, Location};
use irqlab_host::journal::sched::SchedAttr;
use irqlab_host::journal::threads::Match;
use irqlab_host::rt;
use std::ops::Range;
use toml::Spanned;

/// tuned.conf's first line: how `control export` knows a directory it
/// may write over (an earlier export) from someone else's.
pub const HEADER: &str = "# tuned profile written by `irqlab control export`";

/// Where the script keeps what `start` changed, under the profile's name.
pub const STATE_DIR: &str = "/run/irqlab-tuned";

/// The script's template; `export` fills in its `@...@` places.
const SCRIPT: &str = include_str!("tuned_script.sh");

/// A tuned release, as far as the plugins differ (major.minor).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct TunedVersion {
    pub major: u32,
    pub minor: u32,
}

impl TunedVersion {
    /// Debian 12's tuned, the default where no tuned-adm says otherwise.
    pub const DEBIAN_12: TunedVersion = TunedVersion { major: 2, minor: 20 };
    /// The first release with the `irq` plugin (tuned commit 1aeb223,
    /// "feat: add plugin_irq", first tagged v2.23.0). A `kthread` plugin
    /// exists only as an unreleased commit: no release to target.
    pub const IRQ_PLUGIN: TunedVersion = TunedVersion { major: 2, minor: 23 };

    /// `2.20`, `2.20.0`, or `tuned-adm --version`'s `tuned-adm 2.20.0`.
    pub fn parse(text: &str) -> Result<TunedVersion, String> {
        let word = text.split_whitespace().last().unwrap_or("");
        let mut parts = word.split('.');
        let number = |part: Option<&str>| part.and_then(|p| p.parse::<u32>().ok());
        match (number(parts.next()), number(parts.next())) {
            (Some(major), Some(minor)) => Ok(TunedVersion { major, minor }),
            _ => Err(format!("`{}`: expected a tuned version, X.Y (e.g. 2.20)", text.trim())),
        }
    }

    pub fn has_irq_plugin(self) -> bool {
        self >= TunedVersion::IRQ_PLUGIN
    }
}

impl std::fmt::Display for TunedVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

/// What the profile is exported for.
#[derive(Debug, Clone)]
pub struct Target<'a> {
    /// The tuned profile's name (its directory under /etc/tuned, the
    /// script's state directory).
    pub name: &'a str,
    pub tuned: TunedVersion,
    /// The machine's CPUs (`boot::machine_cpus`): every CPU list is checked
    /// against them, as `control apply --boot` checks `[boot]`.
    pub cpus: &'a [usize],
}

/// A setting with no tuned form: not in the export.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeftOut {
    /// `threads pid:4242`, as `control apply` names settings.
    pub setting: String,
    pub why: String,
}

/// The files of the tuned profile directory.
#[derive(Debug, Clone)]
pub struct Exported {
    pub tuned_conf: String,
    /// `script.sh`, to be executable; `None` when tuned's plugins take everything.
    pub script: Option<String>,
    pub left_out: Vec<LeftOut>,
    /// What the user should know to make it work (irqbalance, the next boot).
    pub notes: Vec<String>,
}

/// Whether `name` is a profile name tuned loads (its loader's `safe_name`).
pub fn check_name(name: &str) -> Result<(), String> {
    if !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || "_.-".contains(c)) {
        Ok(())
    } else {
        Err(format!("tuned profile name `{name}`: tuned loads only names of letters, digits, `_`, `.` and `-`"))
    }
}

/// Whether a tuned.conf is one `export` wrote.
pub fn is_export(tuned_conf: &str) -> bool {
    tuned_conf.lines().next() == Some(HEADER)
}

/// The profile (read from `file`, whose `text` locates errors) as a tuned
/// profile for `target`. Exit-2 errors as `Profile::plan` gives them, at
/// file:line:col: a bad MATCH, policy, CPU list, duration, device name or
/// boot option. Nothing of the machine is read but `target.cpus`.
pub fn export(profile: &Profile, file: &str, text: &str, target: &Target) -> Result<Exported, InputError> {
    check_name(target.name).map_err(InputError::new)?;
    let input = Input { file, text, cpus: target.cpus };
    let mut out = Out::default();
    out.sysfs(profile, &input)?;
    out.scheduler(profile, &input)?;
    out.irqbalance(profile, &input)?;
    let irqs = irq_settings(profile, &input)?;
    let script = if irqs.is_empty() {
        None
    } else if target.tuned.has_irq_plugin() && irqs.iter().all(|s| s.device().is_some()) {
        out.irq_plugin(&irqs, target.tuned);
        None
    } else {
        Some(out.script(&irqs, file, target))
    };
    out.bootloader(profile, &input)?;
    Ok(Exported { tuned_conf: out.render(file, target), script, left_out: out.left_out, notes: out.notes })
}

/// The profile's text, to locate errors, and the machine's CPUs.
struct Input<'a> {
    file: &'a str,
    text: &'a str,
    cpus: &'a [usize],
}

impl Input<'_> {
    fn error(&self, span: Range<usize>, message: impl Into<String>) -> InputError {
        InputError::at(message, Location::at_span(self.file, self.text, span))
    }

    /// A CPU list of this machine's CPUs, as `control apply` takes it.
    fn cpus(&self, list: &Spanned<String>) -> Result<Vec<usize>, InputError> {
        let cpus = rt::parse_cpu_list(list.get_ref()).map_err(|e| self.error(list.span(), format!("cpus: {e}")))?;
        if cpus.is_empty() {
            return Err(self.error(list.span(), "cpus: no CPU"));
        }
        if let Some(cpu) = cpus.iter().find(|c| !self.cpus.contains(c)) {
            return Err(
                self.error(list.span(), format!("cpus: CPU {cpu} is not one of this machine's (CPUs {})", rt::format_cpu_list(self.cpus)))
            );
        }
        Ok(cpus)
    }

    /// A network device's name, as it goes into sysfs paths: what the
    /// kernel allows (no `/`, `:` or blank) less the characters tuned's
    /// sysfs plugin would take as a glob.
    fn dev<'s>(&self, dev: &'s Spanned<String>) -> Result<&'s str, InputError> {
        let name = dev.get_ref();
        let fine = |c: char| c.is_ascii_alphanumeric() || "_.@+-".contains(c);
        if name.is_empty() || name.len() > 15 || name == "." || name == ".." || !name.chars().all(fine) {
            return Err(self.error(
                dev.span(),
                format!("dev `{name}`: not a network device name tuned's sysfs paths can take (letters, digits, `_.@+-`, at most 15)"),
            ));
        }
        Ok(name)
    }
}

/// One section of tuned.conf: comment lines and `key=value` lines.
struct Section {
    name: String,
    lead: Vec<String>,
    lines: Vec<String>,
}

impl Section {
    fn new(name: &str, lead: &str) -> Section {
        Section { name: name.to_string(), lead: comment(lead), lines: Vec::new() }
    }
}

/// tuned.conf as it is built.
#[derive(Default)]
struct Out {
    sections: Vec<Section>,
    left_out: Vec<LeftOut>,
    notes: Vec<String>,
}

/// One IRQ affinity of the profile: `default`, `*`, a number or a name.
struct IrqWant {
    spec: String,
    cpus: Vec<usize>,
    because: Option<String>,
}

impl IrqWant {
    /// The `irq` plugin's device for it, where it has one (by number only).
    fn device(&self) -> Option<String> {
        match self.spec.as_str() {
            "default" => Some("DEFAULT".into()),
            "*" => Some("irq*".into()),
            n if n.parse::<u32>().is_ok() => Some(format!("irq{n}")),
            _ => None,
        }
    }
}

/// The IRQ affinities in the order `Profile::plan` takes them.
fn irq_settings(profile: &Profile, input: &Input) -> Result<Vec<IrqWant>, InputError> {
    let mut wants = Vec::new();
    if let Some(d) = &profile.default_irq {
        wants.push(IrqWant { spec: "default".into(), cpus: input.cpus(&d.cpus)?, because: d.because.clone() });
    }
    for s in &profile.irqs {
        if s.irq.get_ref().trim().is_empty() {
            return Err(input.error(s.irq.span(), "irq: empty; a number, a handler or device name, `*` or `default`"));
        }
        wants.push(IrqWant { spec: s.irq.get_ref().clone(), cpus: input.cpus(&s.cpus)?, because: s.because.clone() });
    }
    Ok(wants)
}

impl Out {
    fn left_out(&mut self, setting: String, why: String) {
        self.left_out.push(LeftOut { setting, why });
    }

    fn push(&mut self, section: Section) {
        if !section.lines.is_empty() {
            self.sections.push(section);
        }
    }

    /// `[sysfs]`: NAPI and RPS. Before `[scheduler]`, as tuned applies
    /// sections in file order: the NAPI threads `threaded=1` makes exist
    /// when the scheduler's rules are first applied.
    fn sysfs(&mut self, profile: &Profile, input: &Input) -> Result<(), InputError> {
        // (path, lines): a later setting of the same file decides, as in `control apply`.
        let mut entries: Vec<(String, Vec<String>)> = Vec::new();
        let mut put = |path: String, value: String, note: String| {
            entries.retain(|(p, _)| *p != path);
            let mut lines = comment(&note);
            lines.push(format!("{path}={value}"));
            entries.push((path, lines));
        };
        for s in &profile.napi {
            let dev = input.dev(&s.dev)?;
            let why = because(&s.because);
            if let Some(on) = s.threaded {
                put(format!("/sys/class/net/{dev}/threaded"), u8::from(on).to_string(), format!("napi {dev}: threaded NAPI{why}"));
            }
            if let Some(n) = s.defer_hard_irqs {
                put(format!("/sys/class/net/{dev}/napi_defer_hard_irqs"), n.to_string(), format!("napi {dev}: defer_hard_irqs{why}"));
            }
            if let Some(d) = &s.gro_flush_timeout {
                let ns = irqlab_analysis::units::parse_duration_ns(d.get_ref())
                    .map_err(|e| input.error(d.span(), format!("gro_flush_timeout `{}`: {e}", d.get_ref())))?;
                let note = format!("napi {dev}: gro_flush_timeout {}, in nanoseconds{why}", d.get_ref());
                put(format!("/sys/class/net/{dev}/gro_flush_timeout"), ns.to_string(), note);
            }
        }
        for s in &profile.rps {
            let dev = input.dev(&s.dev)?;
            let cpus = input.cpus(&s.cpus)?;
            let note = format!("rps {dev}: CPUs {} on every receive queue{}", rt::format_cpu_list(&cpus), because(&s.because));
            put(format!("/sys/class/net/{dev}/queues/rx-*/rps_cpus"), tuned_mask(&cpus), note);
        }
        let mut section = Section::new(
            "sysfs",
            "Threaded NAPI and RPS (the sysfs plugin; a path may be a glob). Before [scheduler]: tuned applies the sections in \
             this order, and its rules take the NAPI threads that threaded=1 makes only once they exist.",
        );
        section.lines = entries.into_iter().flat_map(|(_, lines)| lines).collect();
        self.push(section);
        Ok(())
    }

    /// `[scheduler]`: a group per `[[threads]]` setting that has a stable
    /// tuned form.
    fn scheduler(&mut self, profile: &Profile, input: &Input) -> Result<(), InputError> {
        let mut section = Section::new(
            "scheduler",
            "Thread policies (the scheduler plugin): group.NAME=RULE_PRIO:SCHED:PRIO:AFFINITY:REGEX, REGEX matched against \
             `ps -eo cmd`: a kernel thread as [name], a process by its command line, the same line for each of its threads; \
             AFFINITY a hex CPU mask, * for none. Where two rules match one thread, the later one decides when the profile \
             starts, the earlier one for a thread that starts later (tuned's runtime lookup): the rules are in the irqlab \
             profile's order.",
        );
        let width = profile.threads.len().to_string().len();
        for (i, s) in profile.threads.iter().enumerate() {
            let setting = format!("threads {}", s.matched.get_ref());
            let matched = Match::parse(s.matched.get_ref()).map_err(|e| input.error(s.matched.span(), e.to_string()))?;
            let attr = profile::fixed_policy(s.policy.get_ref()).map_err(|e| input.error(s.policy.span(), e.to_string()))?;
            let cpus = s.cpus.as_ref().map(|c| input.cpus(c)).transpose()?;
            let Some(regex) = thread_regex(&matched, s.all_matching) else {
                self.left_out(
                    setting,
                    "a pid names a thread of one boot only, and tuned's rules name threads by their command: name it by \
                     comm:NAME in the profile"
                        .into(),
                );
                continue;
            };
            let (letter, priority) = match sched_letter(&attr) {
                Ok(sched) => sched,
                Err(why) => {
                    self.left_out(setting, why);
                    continue;
                }
            };
            if let SchedAttr::Other { nice } | SchedAttr::Batch { nice } = attr {
                if nice != 0 {
                    let why = format!("nice {nice}: tuned's scheduler plugin sets the policy and priority, not the nice value");
                    self.left_out(format!("{setting} (its nice value)"), why);
                }
            }
            let affinity = cpus.as_deref().map_or("*".to_string(), tuned_mask);
            let on = cpus.as_deref().map(|c| format!(" on CPUs {}", rt::format_cpu_list(c))).unwrap_or_default();
            let mut note = format!("{setting}: {attr}{on}{}", because(&s.because));
            if matches!(matched, Match::Comm(_)) {
                note.push_str(
                    ". For a process tuned matches its command line, not a thread's name: this rule takes every thread of \
                     a process started as that name",
                );
            }
            section.lines.extend(comment(&note));
            let name = format!("irqlab-{}-{}", i + 1, slug(s.matched.get_ref()));
            section.lines.push(format!("group.{name}={:0width$}:{letter}:{priority}:{affinity}:{regex}", i + 1));
        }
        if section.lines.iter().any(|l| l.starts_with("group.")) {
            self.notes.push(SCHEDULER_NEEDS_PERF.to_string());
        }
        self.push(section);
        Ok(())
    }

    /// `[irqbalance] banned_cpus`: the CPUs the default IRQ affinity leaves
    /// out, worked out by tuned on the machine (its `cpulist_invert` of the
    /// online CPUs), so the profile fits a machine with more CPUs too.
    fn irqbalance(&mut self, profile: &Profile, input: &Input) -> Result<(), InputError> {
        let Some(d) = &profile.default_irq else { return Ok(()) };
        let cpus = input.cpus(&d.cpus)?;
        let list = rt::format_cpu_list(&cpus);
        let rest: Vec<usize> = input.cpus.iter().copied().filter(|c| !cpus.contains(c)).collect();
        if rest.is_empty() {
            return Ok(());
        }
        let mut section = Section::new(
            "irqbalance",
            &format!(
                "irqbalance keeps the IRQs it balances off the CPUs the default IRQ affinity ({list}) leaves out: CPUs {} on \
                 the machine exported on{}.",
                rt::format_cpu_list(&rest),
                because(&d.because)
            ),
        );
        section.lines.push(format!("banned_cpus=${{f:cpulist_invert:{list}}}"));
        self.push(section);
        Ok(())
    }

    /// tuned 2.23's `irq` plugin: one instance per setting, the later
    /// setting first, as tuned gives an IRQ to the first instance that
    /// names it and irqlab to the profile's later setting.
    fn irq_plugin(&mut self, wants: &[IrqWant], tuned: TunedVersion) {
        for (i, w) in wants.iter().enumerate().rev() {
            let device = w.device().expect("checked by the caller");
            let what = if w.spec == "default" { "default IRQ affinity".to_string() } else { format!("irq {}", w.spec) };
            let mut section = Section::new(
                &format!("irqlab-irq-{}", i + 1),
                &format!("{what}: CPUs {} (tuned {tuned}'s irq plugin){}", rt::format_cpu_list(&w.cpus), because(&w.because)),
            );
            section.lines.extend([
                "type=irq".to_string(),
                format!("devices={device}"),
                format!("affinity={}", rt::format_cpu_list(&w.cpus)),
            ]);
            self.push(section);
        }
        self.notes.push(irqbalance_note());
    }

    /// `[script]` and the script's text.
    fn script(&mut self, wants: &[IrqWant], file: &str, target: &Target) -> String {
        let mut section = Section::new(
            "script",
            &format!(
                "IRQ affinities: tuned {} has no plugin that sets one IRQ's (its scheduler's isolated_cores moves every \
                 process too{}), and IRQ numbers differ from boot to boot: script.sh finds each IRQ by name when the \
                 profile starts. {}",
                target.tuned,
                if target.tuned.has_irq_plugin() { "; its irq plugin takes IRQ numbers only" } else { "" },
                SCRIPT_BANS
            ),
        );
        section.lines.push("script=${i:PROFILE_DIR}/script.sh".into());
        self.push(section);
        self.notes.push(SCRIPT_BANS.to_string());
        let default = wants.iter().rev().find(|w| w.spec == "default");
        let mut wanted = Vec::new();
        for w in wants.iter().filter(|w| w.spec != "default") {
            for line in comment(&format!("irq {}{}", w.spec, because(&w.because))) {
                wanted.push(format!("    {line}"));
            }
            wanted.push(format!("    want {} {}", sh_quote(&w.spec), sh_quote(&rt::format_cpu_list(&w.cpus))));
        }
        if wanted.is_empty() {
            wanted.push("    :".into());
        }
        SCRIPT
            .replace("@SOURCE@", &one_line(file))
            .replace("@TUNED@", &target.tuned.to_string())
            .replace("@STATE@", &format!("{STATE_DIR}/{}", target.name))
            .replace("@DEFAULT_MASK@", &default.map(|w| tuned_mask(&w.cpus)).unwrap_or_default())
            .replace("@WANTED@", &wanted.join("\n"))
    }

    /// `[bootloader]`: the `[boot]` options, checked as `control apply --boot` checks them.
    fn bootloader(&mut self, profile: &Profile, input: &Input) -> Result<(), InputError> {
        let Some(b) = &profile.boot else { return Ok(()) };
        let options = boot::check(b.cmdline.get_ref(), input.cpus).map_err(|r| {
            // The span starts at the opening quote of a basic string.
            InputError::at(r.message, Location::at_offset(input.file, input.text, b.cmdline.span().start + 1 + r.offset))
        })?;
        if options.is_empty() {
            return Ok(());
        }
        let mut section = Section::new(
            "bootloader",
            "Kernel command-line options, for the next boot: tuned adds them to GRUB's configuration. Named cmdline_irqlab so \
             that a profile including this one adds its own options instead of replacing these.",
        );
        for o in &options {
            let why = profile.boot_because(&o.key).or(boot::what_it_does(&o.key)).unwrap_or("");
            section.lines.extend(comment(&format!("{}: {why}", o.text)));
        }
        let words: Vec<&str> = options.iter().map(|o| o.text.as_str()).collect();
        section.lines.push(format!("cmdline_irqlab={}", words.join(" ")));
        self.push(section);
        self.notes.push("the [bootloader] options take effect at the next boot after tuned applies the profile".into());
        Ok(())
    }

    fn render(&self, file: &str, target: &Target) -> String {
        let mut text = format!("{HEADER}\n");
        for line in comment(&format!(
            "from the irqlab profile {} for tuned {}: export it again rather than edit this file.",
            one_line(file),
            target.tuned
        )) {
            text.push_str(&line);
            text.push('\n');
        }
        let source = std::path::Path::new(file).file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        text.push_str(&format!("\n[main]\nsummary=irqlab profile {} (irqlab control export)\n", summary_text(&source)));
        for s in &self.sections {
            text.push('\n');
            for line in s.lead.iter().chain(std::iter::once(&format!("[{}]", s.name))).chain(&s.lines) {
                text.push_str(line);
                text.push('\n');
            }
        }
        if !self.left_out.is_empty() {
            text.push_str("\n# Left out (no tuned form):\n");
            for l in &self.left_out {
                for line in comment(&format!("- {}: {}", l.setting, l.why)) {
                    text.push_str(&line);
                    text.push('\n');
                }
            }
        }
        text
    }
}

/// tuned's scheduler plugin imports Python's `perf` module, which Debian
/// ships in linux-perf and its tuned package does not depend on: without
/// it tuned 2.20 loads the profile and skips every thread rule (seen in a
/// Debian 12 guest: the threads kept their policies, `tuned-adm verify`
/// failed).
const SCHEDULER_NEEDS_PERF: &str = "the [scheduler] rules need Python's perf module where tuned runs (Debian: \
     apt install linux-perf; tuned does not pull it in): without it tuned skips them";

/// What script.sh does about irqbalance (tried against Debian's tuned and
/// irqbalance in a guest: without the bans irqbalance moved the IRQ the
/// profile set back within seconds, and `tuned-adm verify` failed).
const SCRIPT_BANS: &str = "irqbalance balances every IRQ it is not told to leave alone: while the profile is active, \
     script.sh bans the IRQs it sets (--banirq=N in IRQBALANCE_ARGS of /etc/default/irqbalance, after your own \
     arguments) and restarts a running irqbalance; stop takes the bans out";

fn irqbalance_note() -> String {
    "irqbalance, where it runs, balances every IRQ it is not told to leave alone, these too: ban them \
     (IRQBALANCE_ARGS=\"--banirq=N\" in /etc/default/irqbalance) or stop irqbalance; tuned-adm verify shows an IRQ it moved"
        .into()
}

/// The regular expression of tuned's scheduler rule for a MATCH, as the
/// MATCH names threads in `threads::Match::matches` (by the kernel's
/// 15-byte name); `None` for a pid.
fn thread_regex(matched: &Match, all_matching: bool) -> Option<String> {
    let kernel = |inner: String| format!(r"^\[{inner}\]$");
    Some(match matched {
        Match::Napi(dev) => kernel(format!("napi/{}-.*", re_literal(dev))),
        Match::IrqNumber(n) => kernel(format!("irq/{n}-.*")),
        Match::IrqName(name) => kernel(format!("irq/[0-9]+-{}", re_literal(name))),
        Match::Ksoftirqd(cpu) => kernel(format!("ksoftirqd/{cpu}")),
        Match::Pid(_) => return None,
        Match::Comm(glob) => comm_regex(glob.as_str(), all_matching),
    })
}

/// The kernel's own per-CPU threads no MATCH takes (`threads::is_protected`,
/// and ksoftirqd but by `ksoftirqd:N`), kept out of a glob's rule.
const PROTECTED: &str = r"(?!\[(?:migration/|cpuhp/|idle_inject/|watchdog/|rcu|watchdogd\]|ksoftirqd/))";

/// `comm:GLOB`: a process whose command is GLOB (by path or not, with any
/// arguments), and with `all_matching` a kernel thread named GLOB too, as
/// `control apply` takes kernel threads for a glob only then.
fn comm_regex(glob: &str, all_matching: bool) -> String {
    let mut command = re_glob(glob, r"\S*", r"\S");
    // The kernel keeps 15 bytes of a name: a name that long may be the
    // start of a longer command.
    if glob.len() == 15 {
        command.push_str(r"\S*");
    }
    let process = format!(r"(?:\S*/)?{command}(?:\s.*)?");
    if !all_matching {
        return format!("^{process}$");
    }
    format!(r"^{PROTECTED}(?:\[{}\]|{process})$", re_glob(glob, ".*", "."))
}

/// tuned's scheduler letter and priority for a fixed policy.
fn sched_letter(attr: &SchedAttr) -> Result<(char, u32), String> {
    match *attr {
        SchedAttr::Fifo { priority } => Ok(('f', priority)),
        SchedAttr::Rr { priority } => Ok(('r', priority)),
        // tuned checks the priority against the policy's range: 0 for these.
        SchedAttr::Other { .. } => Ok(('o', 0)),
        SchedAttr::Batch { .. } => Ok(('b', 0)),
        SchedAttr::Idle => Ok(('i', 0)),
        SchedAttr::Deadline { .. } => {
            Err("SCHED_DEADLINE: tuned's scheduler plugin sets only fifo, rr, other, batch and idle (sched_setscheduler)".into())
        }
    }
}

/// A CPU mask as tuned's `cpulist2hex` writes one (32-bit words of 8 hex
/// digits, commas between): the form its verify reads back equal to the
/// kernel's, whatever the kernel's width.
fn tuned_mask(cpus: &[usize]) -> String {
    let words = cpus.iter().max().map_or(1, |max| max / 32 + 1);
    let mut mask = vec![0u32; words];
    for cpu in cpus {
        mask[cpu / 32] |= 1 << (cpu % 32);
    }
    mask.iter().rev().map(|w| format!("{w:08x}")).collect::<Vec<_>>().join(",")
}

/// `c` in a Python regular expression, literally; safe in a tuned.conf
/// value (no ` #` to start a comment, no `${` to expand).
fn re_char(c: char) -> String {
    match c {
        c if c.is_ascii_alphanumeric() || "_-/@:,=%<>!~&'\";".contains(c) => c.to_string(),
        '\\' | '.' | '^' | '$' | '*' | '+' | '?' | '{' | '}' | '[' | ']' | '|' | '(' | ')' | '#' => format!("\\{c}"),
        c if c.is_ascii() => format!("\\x{:02x}", c as u32),
        c => c.to_string(),
    }
}

fn re_literal(text: &str) -> String {
    text.chars().map(re_char).collect()
}

/// A glob (the `glob` crate's syntax, as `comm:` takes it) as a regular
/// expression, `*` and `?` as `any` and `one`.
fn re_glob(glob: &str, any: &str, one: &str) -> String {
    let chars: Vec<char> = glob.chars().collect();
    let mut out = String::new();
    let mut i = 0;
    while i < chars.len() {
        match chars[i] {
            '*' => {
                out.push_str(any);
                while chars.get(i + 1) == Some(&'*') {
                    i += 1;
                }
            }
            '?' => out.push_str(one),
            '[' => match class_end(&chars, i) {
                Some(end) => {
                    out.push_str(&re_class(&chars[i + 1..end]));
                    i = end;
                }
                None => out.push_str(r"\["),
            },
            c => out.push_str(&re_char(c)),
        }
        i += 1;
    }
    out
}

/// The `]` closing the class opened at `open` (a `]` first in it is one of its characters).
fn class_end(chars: &[char], open: usize) -> Option<usize> {
    let mut j = open + 1;
    if chars.get(j) == Some(&'!') {
        j += 1;
    }
    if chars.get(j) == Some(&']') {
        j += 1;
    }
    (j..chars.len()).find(|&k| chars[k] == ']')
}

fn re_class(inner: &[char]) -> String {
    let (negated, inner) = match inner.first() {
        Some('!') => (true, &inner[1..]),
        _ => (false, inner),
    };
    let mut out = String::from(if negated { "[^" } else { "[" });
    for &c in inner {
        match c {
            '-' => out.push('-'),
            '\\' | '[' | ']' | '^' | '#' => out.push_str(&format!("\\{c}")),
            c if c.is_ascii_alphanumeric() || !c.is_ascii() => out.push(c),
            c => out.push_str(&format!("\\x{:02x}", c as u32)),
        }
    }
    out.push(']');
    out
}

/// A MATCH as part of a group's name.
fn slug(text: &str) -> String {
    let mut out = String::new();
    for c in text.chars().map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_lowercase() } else { '-' }) {
        if !(c == '-' && (out.is_empty() || out.ends_with('-'))) {
            out.push(c);
        }
    }
    out.trim_end_matches('-').chars().take(40).collect()
}

/// Single-quoted for sh.
fn sh_quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}

fn because(because: &Option<String>) -> String {
    because.as_deref().map(|b| format!(" (why: {})", one_line(b))).unwrap_or_default()
}

fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Free of what tuned.conf would take as a comment or a variable.
fn summary_text(text: &str) -> String {
    one_line(text).replace('#', "").replace("${", "$ {")
}

/// `text` as `# ` lines of at most 100 columns.
fn comment(text: &str) -> Vec<String> {
    let mut lines = Vec::new();
    let mut line = String::from("#");
    for word in text.split_whitespace() {
        if line.len() > 1 && line.len() + 1 + word.len() > 100 {
            lines.push(std::mem::replace(&mut line, String::from("#")));
        }
        line.push(' ');
        line.push_str(word);
    }
    if line.len() > 1 {
        lines.push(line);
    }
    lines
}

#[cfg(test)]
mod tests {
    //! What tuned makes of an export was checked with tuned 2.20's own
    //! loader (Debian 12's tuned, in a Debian 12 root at /tmp/sysroot):
    //!
    //! ```sh
    //! irqlab control export P --tuned /tmp/sysroot/tmp/irqlab-export
    //! chroot /tmp/sysroot python3 -c '
    //! import tuned.profiles as p, tuned.profiles.variables as v
    //! loader = p.Loader(p.Locator(["/tmp"]), p.Factory(), p.Merger(), None, v.Variables())
    //! for name, unit in loader.load("irqlab-export").units.items():
    //!     print(name, unit.type, dict(unit.options))'
    //! ```
    use super::*;

    /// A profile with every kind of setting.
    const EVERY: &str = r#"schema = "irqlab/profile/v1"

[default_irq]
cpus = "0"
because = "quiet-cpu: CPU 1 measures"

[[irq]]
irq = "*"
cpus = "0"

[[irq]]
irq = "virtio2"
cpus = "1"
because = "the NIC's IRQs beside its NAPI thread"

[[threads]]
match = "napi:eth0"
policy = "fifo:50"
cpus = "1"

[[threads]]
match = "comm:myapp"
policy = "rr:20"

[[threads]]
match = "irq:virtio2-input.0"
policy = "fifo"

[[threads]]
match = "comm:kworker*"
policy = "idle"
all_matching = true

[[threads]]
match = "pid:4242"
policy = "fifo:10"
this_boot = true

[[threads]]
match = "comm:dl"
policy = "deadline:1ms/10ms"

[[threads]]
match = "comm:nice"
policy = "other:5"

[[napi]]
dev = "eth0"
threaded = true
defer_hard_irqs = 2
gro_flush_timeout = "200us"

[[rps]]
dev = "eth0"
cpus = "0-1"

[boot]
cmdline = "nohz_full=1 rcu_nocbs=1"
"#;

    const CPUS: &[usize] = &[0, 1, 2, 3];

    fn export_for(text: &str, tuned: TunedVersion) -> Result<Exported, InputError> {
        let profile = Profile::parse("p.toml", text).unwrap();
        export(&profile, "p.toml", text, &Target { name: "irqlab-test", tuned, cpus: CPUS })
    }

    /// The `key=value` lines of section `name` (comments left out).
    fn section<'a>(conf: &'a str, name: &str) -> Vec<&'a str> {
        let header = format!("[{name}]");
        let mut lines = conf.lines().skip_while(|l| *l != header);
        assert!(lines.next().is_some(), "no {header} in:\n{conf}");
        lines.take_while(|l| !l.is_empty()).filter(|l| !l.starts_with('#')).collect()
    }

    #[test]
    fn every_kind_of_setting_becomes_its_tuned_line() {
        let e = export_for(EVERY, TunedVersion::DEBIAN_12).unwrap();
        let conf = &e.tuned_conf;
        assert_eq!(conf.lines().next(), Some(HEADER));
        assert!(is_export(conf));
        assert_eq!(section(conf, "main"), ["summary=irqlab profile p.toml (irqlab control export)"]);
        assert_eq!(
            section(conf, "sysfs"),
            [
                "/sys/class/net/eth0/threaded=1",
                "/sys/class/net/eth0/napi_defer_hard_irqs=2",
                "/sys/class/net/eth0/gro_flush_timeout=200000",
                "/sys/class/net/eth0/queues/rx-*/rps_cpus=00000003",
            ]
        );
        assert_eq!(
            section(conf, "scheduler"),
            [
                r"group.irqlab-1-napi-eth0=1:f:50:00000002:^\[napi/eth0-.*\]$",
                r"group.irqlab-2-comm-myapp=2:r:20:*:^(?:\S*/)?myapp(?:\s.*)?$",
                r"group.irqlab-3-irq-virtio2-input-0=3:f:50:*:^\[irq/[0-9]+-virtio2-input\.0\]$",
                r"group.irqlab-4-comm-kworker=4:i:0:*:^(?!\[(?:migration/|cpuhp/|idle_inject/|watchdog/|rcu|watchdogd\]|ksoftirqd/))(?:\[kworker.*\]|(?:\S*/)?kworker\S*(?:\s.*)?)$",
                r"group.irqlab-7-comm-nice=7:o:0:*:^(?:\S*/)?nice(?:\s.*)?$",
            ]
        );
        assert_eq!(section(conf, "irqbalance"), ["banned_cpus=${f:cpulist_invert:0}"]);
        assert!(conf.replace("\n# ", " ").contains("leaves out: CPUs 1-3 on the machine exported on"), "{conf}");
        assert_eq!(section(conf, "script"), ["script=${i:PROFILE_DIR}/script.sh"]);
        assert_eq!(section(conf, "bootloader"), ["cmdline_irqlab=nohz_full=1 rcu_nocbs=1"]);
        // Applied in file order: the NAPI threads exist before the rules that take them.
        let at = |s: &str| conf.find(&format!("\n[{s}]\n")).unwrap();
        assert!(at("main") < at("sysfs") && at("sysfs") < at("scheduler") && at("scheduler") < at("script"));
        // The script: the default affinity as a mask, the IRQs in the profile's order.
        let script = e.script.unwrap();
        assert!(script.starts_with("#!/bin/sh\n"));
        assert!(script.contains("\ndefault_mask='00000001'\n"), "{script}");
        assert!(script.contains("state=${IRQLAB_TUNED_STATE:-/run/irqlab-tuned/irqlab-test}\n"), "{script}");
        let wanted: Vec<&str> = script.lines().map(str::trim).filter(|l| l.starts_with("want ")).collect();
        assert_eq!(wanted, ["want '*' '0'", "want 'virtio2' '1'"]);
        assert!(script.contains("    # irq virtio2 (why: the NIC's IRQs beside its NAPI thread)\n"), "{script}");
        for place in ["@SOURCE@", "@TUNED@", "@STATE@", "@DEFAULT_MASK@", "@WANTED@"] {
            assert!(!script.contains(place), "{place} left unfilled:\n{script}");
        }
    }

    #[test]
    fn settings_without_a_tuned_form_are_left_out_and_said() {
        let e = export_for(EVERY, TunedVersion::DEBIAN_12).unwrap();
        let left: Vec<&str> = e.left_out.iter().map(|l| l.setting.as_str()).collect();
        assert_eq!(left, ["threads pid:4242", "threads comm:dl", "threads comm:nice (its nice value)"]);
        assert!(e.left_out[0].why.contains("one boot only"), "{:?}", e.left_out);
        assert!(e.left_out[1].why.starts_with("SCHED_DEADLINE"), "{:?}", e.left_out);
        assert!(e.tuned_conf.contains("\n# Left out (no tuned form):\n# - threads pid:4242: a pid names a thread of one boot"));
        assert!(!e.tuned_conf.contains("4242="), "{}", e.tuned_conf);
        assert!(!e.tuned_conf.contains("comm-dl"), "{}", e.tuned_conf);
        assert!(e.notes.iter().any(|n| n.contains("--banirq=N in IRQBALANCE_ARGS")), "{:?}", e.notes);
        assert!(e.notes.iter().any(|n| n.contains("linux-perf")), "{:?}", e.notes);
    }

    #[test]
    fn tuned_reads_the_file_and_its_rules_take_the_threads_irqlab_names() {
        // tuned's own parsing, with Python's configparser and re as tuned
        // 2.20 calls them (profiles/loader.py, plugin_scheduler.py).
        let check = r#"
import configparser, json, re, sys
conf = configparser.ConfigParser(delimiters=('='), inline_comment_prefixes=('#'), strict=False)
conf.optionxform = str
conf.read_string(sys.stdin.read())
sched = dict(conf.items('scheduler', raw=True))
rules = [v.split(':', 4)[4] for k, v in sched.items() if re.match(r'group\.', k)]
# The runtime lookup of threads that start later (utils/commands.py re_lookup_compile).
re.compile('(%s)' % ')|('.join(re.sub(r'(?<!\\)\((?!\?)', '(?:', r) for r in rules))
samples = json.loads(sys.argv[1])
print(json.dumps({'sections': {s: dict(conf.items(s, raw=True)) for s in conf.sections()},
                  'matches': [re.search(sched[g].split(':', 4)[4], cmd) is not None for g, cmd in samples]}))
"#;
        let e = export_for(EVERY, TunedVersion::DEBIAN_12).unwrap();
        let (napi, app, irq, kworker) =
            ("group.irqlab-1-napi-eth0", "group.irqlab-2-comm-myapp", "group.irqlab-3-irq-virtio2-input-0", "group.irqlab-4-comm-kworker");
        let samples = [
            (napi, "[napi/eth0-8193]", true),
            (napi, "[napi/eth01-8193]", false),
            (napi, "[napi/eth0]", false),
            (app, "/usr/bin/myapp --port 9", true),
            (app, "myapp", true),
            (app, "myapp2", false),
            (app, "/opt/notmyapp", false),
            (app, "[myapp]", false),
            (irq, "[irq/38-virtio2-input.0]", true),
            (irq, "[irq/38-virtio2-input00]", false),
            (kworker, "[kworker/0:1-events]", true),
            (kworker, "/usr/local/bin/kworker-sim -v", true),
            (kworker, "[migration/0]", false),
            (kworker, "[rcu_preempt]", false),
            (kworker, "[ksoftirqd/1]", false),
        ];
        let args: Vec<(&str, &str)> = samples.iter().map(|(g, c, _)| (*g, *c)).collect();
        let child = std::process::Command::new("python3")
            .args(["-c", check, &serde_json::to_string(&args).unwrap()])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn();
        let Ok(mut child) = child else {
            eprintln!("tuned_reads_the_file_and_its_rules_take_the_threads_irqlab_names: skipped: no python3");
            return;
        };
        use std::io::Write;
        child.stdin.take().unwrap().write_all(e.tuned_conf.as_bytes()).unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stdout));
        let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(doc["sections"]["scheduler"][napi], r"1:f:50:00000002:^\[napi/eth0-.*\]$");
        assert_eq!(doc["sections"]["sysfs"]["/sys/class/net/eth0/queues/rx-*/rps_cpus"], "00000003");
        assert_eq!(doc["sections"]["irqbalance"]["banned_cpus"], "${f:cpulist_invert:0}");
        assert_eq!(doc["sections"]["bootloader"]["cmdline_irqlab"], "nohz_full=1 rcu_nocbs=1");
        let matched: Vec<bool> = doc["matches"].as_array().unwrap().iter().map(|m| m.as_bool().unwrap()).collect();
        let expected: Vec<bool> = samples.iter().map(|s| s.2).collect();
        for ((group, cmd, want), got) in samples.iter().zip(&matched) {
            assert_eq!(want, got, "{group} on `{cmd}`");
        }
        assert_eq!(matched, expected);
    }

    #[test]
    fn a_newer_tuned_takes_irqs_by_number_in_its_irq_plugin() {
        let text = "schema = \"irqlab/profile/v1\"\n[default_irq]\ncpus = \"0\"\n\n[[irq]]\nirq = \"*\"\ncpus = \"0\"\n\n\
                    [[irq]]\nirq = \"38\"\ncpus = \"1-2\"\n";
        let e = export_for(text, TunedVersion::IRQ_PLUGIN).unwrap();
        assert!(e.script.is_none());
        assert!(!e.tuned_conf.contains("[script]"), "{}", e.tuned_conf);
        // The later setting first: tuned gives an IRQ to the first instance naming it.
        let sections: Vec<&str> = e.tuned_conf.lines().filter(|l| l.starts_with("[irqlab-irq-")).collect();
        assert_eq!(sections, ["[irqlab-irq-3]", "[irqlab-irq-2]", "[irqlab-irq-1]"]);
        assert_eq!(section(&e.tuned_conf, "irqlab-irq-3"), ["type=irq", "devices=irq38", "affinity=1-2"]);
        assert_eq!(section(&e.tuned_conf, "irqlab-irq-2"), ["type=irq", "devices=irq*", "affinity=0"]);
        assert_eq!(section(&e.tuned_conf, "irqlab-irq-1"), ["type=irq", "devices=DEFAULT", "affinity=0"]);
        // A name has no irq-plugin form: every IRQ setting stays in the script, in order.
        let named = format!("{text}\n[[irq]]\nirq = \"virtio2\"\ncpus = \"1\"\n");
        let e = export_for(&named, TunedVersion { major: 2, minor: 26 }).unwrap();
        assert_eq!(section(&e.tuned_conf, "script"), ["script=${i:PROFILE_DIR}/script.sh"]);
        assert!(!e.tuned_conf.contains("type=irq"), "{}", e.tuned_conf);
        let script = e.script.unwrap();
        let wanted: Vec<&str> = script.lines().map(str::trim).filter(|l| l.starts_with("want ")).collect();
        assert_eq!(wanted, ["want '*' '0'", "want '38' '1-2'", "want 'virtio2' '1'"]);
    }

    #[test]
    fn rule_priorities_sort_as_text_in_the_profile_order() {
        // tuned sorts rules by RULE_PRIO as a string: 10 must not come before 9.
        let mut text = String::from("schema = \"irqlab/profile/v1\"\n");
        for i in 0..10 {
            text.push_str(&format!("\n[[threads]]\nmatch = \"comm:app{i}\"\npolicy = \"fifo:{}\"\n", i + 1));
        }
        let e = export_for(&text, TunedVersion::DEBIAN_12).unwrap();
        let prios: Vec<&str> =
            section(&e.tuned_conf, "scheduler").iter().map(|l| l.split_once('=').unwrap().1.split(':').next().unwrap()).collect();
        assert_eq!(prios, ["01", "02", "03", "04", "05", "06", "07", "08", "09", "10"]);
    }

    #[test]
    fn bad_settings_are_refused_at_their_place() {
        for (from, to, line_col, says) in [
            ("policy = \"fifo:50\"", "policy = \"fifo:100\"", (18, 10), "outside 1..=99"),
            ("match = \"napi:eth0\"", "match = \"nap:eth0\"", (17, 9), "unknown kind"),
            ("cpus = \"0-1\"", "cpus = \"0-9\"", (55, 8), "CPU 4 is not one of this machine's (CPUs 0-3)"),
            ("gro_flush_timeout = \"200us\"", "gro_flush_timeout = \"fast\"", (51, 21), "gro_flush_timeout `fast`"),
            ("[[rps]]\ndev = \"eth0\"", "[[rps]]\ndev = \"eth*\"", (54, 7), "dev `eth*`"),
            ("nohz_full=1 rcu_nocbs=1", "nohz_full=1 fast=1", (58, 24), "`fast`: not one irqlab knows"),
        ] {
            assert!(EVERY.contains(from), "{from}");
            let text = EVERY.replacen(from, to, 1);
            let e = export_for(&text, TunedVersion::DEBIAN_12).unwrap_err();
            assert!(e.message.contains(says), "{e}");
            assert_eq!(e.location.as_ref().map(|l| (l.line, l.col)), Some(line_col), "{e}");
        }
        let profile = Profile::parse("p.toml", EVERY).unwrap();
        let target = Target { name: "no/slash", tuned: TunedVersion::DEBIAN_12, cpus: CPUS };
        assert!(export(&profile, "p.toml", EVERY, &target).unwrap_err().message.contains("tuned profile name `no/slash`"));
    }

    #[test]
    fn versions_read_as_tuned_adm_says_them() {
        assert_eq!(TunedVersion::parse("2.20"), Ok(TunedVersion::DEBIAN_12));
        assert_eq!(TunedVersion::parse("tuned-adm 2.20.0\n"), Ok(TunedVersion::DEBIAN_12));
        assert_eq!(TunedVersion::parse("2.23.0-rc.1"), Ok(TunedVersion::IRQ_PLUGIN));
        assert!(TunedVersion::parse("two").unwrap_err().contains("X.Y"));
        assert!(!TunedVersion::parse("2.22").unwrap().has_irq_plugin());
        assert!(TunedVersion::parse("3.0").unwrap().has_irq_plugin());
    }

    #[test]
    fn masks_are_written_as_tuned_writes_them() {
        assert_eq!(tuned_mask(&[0]), "00000001");
        assert_eq!(tuned_mask(&[0, 1]), "00000003");
        assert_eq!(tuned_mask(&[40]), "00000100,00000000");
        assert_eq!(re_glob("a[!b-c]?*x.y", ".*", "."), r"a[^b-c]..*x\.y");
        assert_eq!(re_literal("a b#${c}"), r"a\x20b\#\$\{c\}");
    }

    /// A directory of its own under the system's temporary one, removed at the end.
    struct Scratch(std::path::PathBuf);

    impl Scratch {
        fn new(name: &str) -> Scratch {
            let dir = std::env::temp_dir().join(format!("irqlab-{name}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).unwrap();
            Scratch(dir)
        }

        fn put(&self, path: &str, text: &str) {
            let path = self.0.join(path);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }

        fn read(&self, path: &str) -> String {
            std::fs::read_to_string(self.0.join(path)).unwrap().trim().to_string()
        }
    }

    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    #[test]
    fn the_script_starts_verifies_and_stops_on_a_model_of_proc_and_sys() {
        let text = "schema = \"irqlab/profile/v1\"\n[default_irq]\ncpus = \"0\"\n\n[[irq]]\nirq = \"*\"\ncpus = \"0\"\n\n\
                    [[irq]]\nirq = \"eth0\"\ncpus = \"1\"\n";
        let script = export_for(text, TunedVersion::DEBIAN_12).unwrap().script.unwrap();
        let t = Scratch::new("tuned-script");
        t.put("script.sh", &script);
        t.put("proc/irq/default_smp_affinity", "f\n");
        for (irq, action) in [("24", "ACPI:Ged"), ("38", "virtio2-input.0"), ("39", "virtio2-output.0")] {
            t.put(&format!("proc/irq/{irq}/smp_affinity_list"), "0-3\n");
            t.put(&format!("sys/kernel/irq/{irq}/actions"), &format!("{action}\n"));
        }
        // IRQ 0's file refuses writes (EIO), as the kernel refuses to move a per-CPU IRQ.
        std::fs::create_dir_all(t.0.join("proc/irq/0")).unwrap();
        std::os::unix::fs::symlink("/proc/version", t.0.join("proc/irq/0/smp_affinity_list")).unwrap();
        t.put("sys/kernel/irq/0/actions", "timer\n");
        // eth0's bus device is virtio2: its IRQs are the ones named after it.
        std::fs::create_dir_all(t.0.join("sys/devices/pci0000:00/virtio2")).unwrap();
        std::fs::create_dir_all(t.0.join("sys/class/net/eth0")).unwrap();
        std::os::unix::fs::symlink(t.0.join("sys/devices/pci0000:00/virtio2"), t.0.join("sys/class/net/eth0/device")).unwrap();
        let run = |args: &str| {
            let out = std::process::Command::new("sh")
                .arg(t.0.join("script.sh"))
                .args(args.split(' '))
                .env("IRQLAB_TUNED_PROC", t.0.join("proc"))
                .env("IRQLAB_TUNED_SYS", t.0.join("sys"))
                .env("IRQLAB_TUNED_STATE", t.0.join("state"))
                .env("IRQLAB_TUNED_IRQBALANCE_ENV", t.0.join("etc/default/irqbalance"))
                .env("IRQLAB_TUNED_SYSTEMCTL", "true")
                .output()
                .unwrap();
            (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned())
        };
        // irqbalance's environment file, with the user's own arguments.
        let irqbalance_env = "# irqbalance's settings\nIRQBALANCE_ARGS=\"--journal\"\n";
        t.put("etc/default/irqbalance", irqbalance_env);
        assert_eq!(run("start"), (Some(0), String::new()));
        assert_eq!(
            t.read("etc/default/irqbalance").lines().last(),
            Some("IRQBALANCE_ARGS=\"--journal --banirq=0 --banirq=24 --banirq=38 --banirq=39\""),
            "every IRQ the profile sets is left alone by irqbalance, after the user's arguments"
        );
        assert_eq!(t.read("proc/irq/default_smp_affinity"), "00000001");
        assert_eq!(
            ["24", "38", "39"].map(|n| t.read(&format!("proc/irq/{n}/smp_affinity_list"))),
            ["0", "1", "1"],
            "IRQ 24 by '*', 38 and 39 by eth0 (the later setting)"
        );
        assert_eq!(t.read("state/old/38"), "0-3");
        assert_eq!(run("verify"), (Some(0), String::new()), "IRQ 0, kept by the kernel under '*', is no failure");
        // Something moves IRQ 24: verify says so.
        t.put("proc/irq/24/smp_affinity_list", "2\n");
        assert_eq!(run("verify"), (Some(1), "IRQ 24 is on CPUs 2, the profile sets CPUs 0\n".to_string()));
        assert_eq!(run("stop"), (Some(0), String::new()));
        assert_eq!(t.read("etc/default/irqbalance"), irqbalance_env.trim(), "stop takes the bans out again");
        assert_eq!(t.read("proc/irq/default_smp_affinity"), "f");
        assert_eq!(["24", "38", "39"].map(|n| t.read(&format!("proc/irq/{n}/smp_affinity_list"))), ["0-3", "0-3", "0-3"]);
        assert!(!t.0.join("state").exists());
        let (code, said) = run("verify");
        assert_eq!(code, Some(1));
        assert!(said.contains("the default IRQ affinity is f, the profile sets 00000001"), "{said}");
        // A name that takes no IRQ: an error, unless tuned's verify ignores what is missing.
        let missing = text.replace("irq = \"eth0\"", "irq = \"nosuch\"");
        t.put("script.sh", &export_for(&missing, TunedVersion::DEBIAN_12).unwrap().script.unwrap());
        assert_eq!(run("start"), (Some(1), "no IRQ is named nosuch now\n".to_string()));
        assert_eq!(run("verify"), (Some(1), "no IRQ is named nosuch now\n".to_string()));
        assert_eq!(run("verify ignore_missing"), (Some(0), String::new()));
        assert_eq!(run("stop full_rollback"), (Some(0), String::new()));
        assert_eq!(t.read("proc/irq/24/smp_affinity_list"), "0-3");
    }
}
