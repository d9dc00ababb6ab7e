//! The active tuned profile as tuned merges it, read rather than run:
//! which of its settings touch what irqlab sets (`irqlab_control::beside_tuned`,
//! and the journal's drift, which names tuned's rule where one set the
//! value).
//!
//! Read off tuned's loader and merger (`tuned/profiles/loader.py`,
//! `merger.py`, `variables.py`, `functions/`; the same in 2.20, Debian 12's,
//! and 2.28):
//! - a profile is `NAME/tuned.conf` in `/etc/tuned` (first), `/usr/lib/tuned`
//!   or `/usr/lib/tuned/profiles`; `/etc/tuned/active_profile` names the
//!   active ones, several separated by spaces, merged in that order;
//! - `[main] include = A, B` loads A and B first, then the profile over
//!   them: a later unit's options replace an earlier one's by name (all of
//!   them with `replace = 1`), `drop = K1,K2` removes options;
//! - `[variables]` (with `include = FILE` of plain `key = value` lines)
//!   are merged the same way and expanded in every option: `${name}`,
//!   and `${f:FUNCTION:ARG:...}` where this module knows the function
//!   (the CPU-list ones, `regex_search_ternary`, `cpuinfo_check`, the
//!   assertions); any other, or `exec`, which is never run, leaves the
//!   value unresolved and said so.

use crate::journal::sched::SchedAttr;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Where tuned keeps its profiles and state.
#[derive(Debug, Clone)]
pub struct Roots {
    /// `/etc/tuned`: the user's profiles, `active_profile`, `bootcmdline`.
    pub etc: PathBuf,
    /// `/usr/lib/tuned`: the packaged profiles.
    pub lib: PathBuf,
}

impl Roots {
    pub fn system() -> Roots {
        Roots { etc: "/etc/tuned".into(), lib: "/usr/lib/tuned".into() }
    }

    /// The active profile names (`tuned-adm profile A B` merges both), or
    /// None where tuned has none.
    pub fn active(&self) -> Option<String> {
        let text = std::fs::read_to_string(self.etc.join("active_profile")).ok()?;
        Some(text.trim().to_string()).filter(|t| !t.is_empty())
    }

    /// The command-line options tuned's bootloader plugin put in place for
    /// the next boot (`/etc/tuned/bootcmdline`, `TUNED_BOOT_CMDLINE=`):
    /// tuned's own evaluation of its profile, written when it applied one
    /// with a `[bootloader]` section.
    pub fn boot_cmdline(&self) -> Option<String> {
        let text = std::fs::read_to_string(self.etc.join("bootcmdline")).ok()?;
        // Empty where tuned applied no [bootloader] yet (the package ships
        // the file so): then nothing is known from it.
        text.lines()
            .find_map(|l| l.trim().strip_prefix("TUNED_BOOT_CMDLINE="))
            .map(|v| v.trim().trim_matches('"').to_string())
            .filter(|v| !v.is_empty())
    }

    fn profile_file(&self, name: &str) -> Option<PathBuf> {
        [self.etc.join(name), self.lib.join(name), self.lib.join("profiles").join(name)]
            .into_iter()
            .map(|d| d.join("tuned.conf"))
            .find(|f| f.is_file())
    }
}

/// One option's value, and where it was set (`realtime/tuned.conf:42`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Setting {
    pub value: String,
    pub from: String,
}

/// What the machine gives tuned's functions.
#[derive(Debug, Clone, Default)]
pub struct Machine {
    pub online: Vec<usize>,
    pub present: Vec<usize>,
    pub cpuinfo: String,
    /// Each CPU's package (`topology/physical_package_id`), where sysfs
    /// shows one.
    pub packages: Vec<(usize, String)>,
}

impl Machine {
    pub fn read() -> Machine {
        let list = |f: &str| {
            std::fs::read_to_string(format!("/sys/devices/system/cpu/{f}"))
                .ok()
                .and_then(|t| crate::rt::parse_cpu_list(t.trim()).ok())
                .unwrap_or_default()
        };
        let packages = list("possible")
            .into_iter()
            .filter_map(|cpu| {
                let id = std::fs::read_to_string(format!("/sys/devices/system/cpu/cpu{cpu}/topology/physical_package_id")).ok()?;
                Some((cpu, id.trim().to_string()))
            })
            .collect();
        Machine {
            online: list("online"),
            present: list("present"),
            cpuinfo: std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default(),
            packages,
        }
    }
}

/// The merged profile, its variables expanded.
#[derive(Debug, Clone, Default)]
pub struct Merged {
    /// Every profile read, in the order merged.
    pub profiles: Vec<String>,
    /// Units by name (`[scheduler]`, `[bootloader]`, ...), options in
    /// tuned's order.
    pub units: BTreeMap<String, Vec<(String, Setting)>>,
    /// What could not be read or evaluated, each said once.
    pub unresolved: Vec<String>,
}

impl Merged {
    /// The options of a unit, in order (none where it has no such unit).
    pub fn unit(&self, name: &str) -> &[(String, Setting)] {
        self.units.get(name).map_or(&[], Vec::as_slice)
    }

    /// One option of a unit.
    pub fn option(&self, unit: &str, key: &str) -> Option<&Setting> {
        self.unit(unit).iter().find(|(k, _)| k == key).map(|(_, s)| s)
    }
}

/// One `tuned.conf` or variables file: sections of `key = value` lines.
#[derive(Debug, Clone, Default)]
struct Ini {
    sections: Vec<(String, Vec<(String, Setting)>)>,
}

impl Ini {
    /// tuned's reading (configparser, `=` only, `#` and `;` comments on
    /// lines of their own and `#` after a blank in a value); lines before
    /// any section go to `default` (a variables file has none).
    fn parse(text: &str, label: &str, default: &str) -> Ini {
        let mut ini = Ini::default();
        let mut current = default.to_string();
        for (i, raw) in text.lines().enumerate() {
            let line = raw.trim();
            if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
                continue;
            }
            if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
                current = name.trim().to_string();
                continue;
            }
            let Some((key, value)) = line.split_once('=') else { continue };
            let value = value.split(" #").next().unwrap_or_default().trim().to_string();
            let setting = Setting { value, from: format!("{label}:{}", i + 1) };
            match ini.sections.iter_mut().find(|(n, _)| *n == current) {
                Some((_, options)) => options.push((key.trim().to_string(), setting)),
                None => ini.sections.push((current.clone(), vec![(key.trim().to_string(), setting)])),
            }
        }
        ini
    }

    fn section(&self, name: &str) -> &[(String, Setting)] {
        self.sections.iter().find(|(n, _)| n == name).map_or(&[], |(_, o)| o.as_slice())
    }
}

/// Sets `key` in an ordered option list: in its place if there, else last
/// (a Python dict's update, which tuned's merge is).
fn set(options: &mut Vec<(String, Setting)>, key: &str, setting: Setting) {
    match options.iter_mut().find(|(k, _)| k == key) {
        Some((_, s)) => *s = setting,
        None => options.push((key.to_string(), setting)),
    }
}

/// Options of a unit that steer tuned's merge rather than set anything.
const MERGE_KEYS: [&str; 3] = ["replace", "drop", "prepend"];

/// Loads and merges the profiles `names` (space separated, as in
/// `active_profile`) from `roots`, expanding variables for `machine`.
pub fn load(names: &str, roots: &Roots, machine: &Machine) -> Merged {
    let mut merged = Merged::default();
    let mut variables: Vec<(String, Setting)> = Vec::new();
    for name in names.split_whitespace() {
        load_one(name, roots, &mut merged, &mut variables, 0);
    }
    // As tuned's `add_from_cfg`: in the merged order, each variable's
    // value expanded with those before it, `include` read where it stands.
    let mut expander = Expander { variables: Vec::new(), machine };
    let mut unresolved = Vec::new();
    for (key, setting) in &variables {
        if key == "include" {
            for (key, s) in read_variables_file(&setting.value, &mut merged) {
                let value = expander.expand(&s.value, &s.from, &mut unresolved);
                set(&mut expander.variables, &key, Setting { value, from: s.from });
            }
        } else {
            let value = expander.expand(&setting.value, &setting.from, &mut unresolved);
            set(&mut expander.variables, key, Setting { value, from: setting.from.clone() });
        }
    }
    for options in merged.units.values_mut() {
        for (_, s) in options.iter_mut() {
            s.value = expander.expand(&s.value, &s.from, &mut unresolved);
            if has_reference(&s.value) {
                unresolved.push(format!("{}: {} names a variable the profile does not set", s.from, s.value));
            }
        }
    }
    for u in unresolved {
        if !merged.unresolved.contains(&u) {
            merged.unresolved.push(u);
        }
    }
    merged
}

/// Whether a value still holds an unescaped `${...}`.
pub fn has_reference(value: &str) -> bool {
    value.match_indices("${").any(|(at, _)| !value[..at].ends_with('\\'))
}

fn load_one(name: &str, roots: &Roots, merged: &mut Merged, variables: &mut Vec<(String, Setting)>, depth: usize) {
    if depth > 16 {
        merged.unresolved.push(format!("profile {name}: includes nest deeper than 16"));
        return;
    }
    let Some(file) = roots.profile_file(name) else {
        merged.unresolved.push(format!("profile {name}: no {name}/tuned.conf under {} or {}", roots.etc.display(), roots.lib.display()));
        return;
    };
    // `${i:PROFILE_DIR}`: the profile's own directory, put in as tuned's
    // loader does when it reads the file.
    let dir = file.parent().map(|d| d.display().to_string()).unwrap_or_default();
    let text = std::fs::read_to_string(&file).unwrap_or_default().replace("${i:PROFILE_DIR}", &dir);
    let ini = Ini::parse(&text, &format!("{name}/tuned.conf"), "main");
    if let Some((_, include)) = ini.section("main").iter().find(|(k, _)| k == "include") {
        // tuned expands an include with the variables known when it loads
        // the profile; one named by a variable is left unread, and said.
        for included in include.value.split([',', ';']).map(str::trim).filter(|n| !n.is_empty()) {
            if included.contains('$') {
                merged.unresolved.push(format!("{}: include {included} names a profile by a variable (not read)", include.from));
            } else {
                load_one(included, roots, merged, variables, depth + 1);
            }
        }
    }
    merged.profiles.push(name.to_string());
    for (unit, options) in &ini.sections {
        if unit == "main" {
            continue;
        }
        let flag = |key: &str| options.iter().any(|(k, s)| k == key && matches!(s.value.as_str(), "1" | "true" | "True" | "yes"));
        let target = if unit == "variables" { &mut *variables } else { merged.units.entry(unit.clone()).or_default() };
        if flag("replace") {
            target.clear();
        }
        if let Some((_, drop)) = options.iter().find(|(k, _)| k == "drop") {
            let dropped: Vec<&str> = drop.value.split(',').map(str::trim).collect();
            target.retain(|(k, _)| !dropped.contains(&k.as_str()));
        }
        for (key, setting) in options.iter().filter(|(k, _)| !MERGE_KEYS.contains(&k.as_str())) {
            set(target, key, setting.clone());
        }
    }
}

/// A variables file's `key = value` lines (tuned reads it as one section).
fn read_variables_file(path: &str, merged: &mut Merged) -> Vec<(String, Setting)> {
    match std::fs::read_to_string(path) {
        Ok(text) => Ini::parse(&text, path, "variables").section("variables").to_vec(),
        Err(e) => {
            merged.unresolved.push(format!("variables file {path}: {e}"));
            Vec::new()
        }
    }
}

/// Expands `${name}` and `${f:...}` in a value, as tuned's `variables.py`
/// does: the variables known so far (their values expanded when they were
/// set), then functions, innermost first. `\${` stays as written.
struct Expander<'a> {
    variables: Vec<(String, Setting)>,
    machine: &'a Machine,
}

impl Expander<'_> {
    fn expand(&self, value: &str, from: &str, unresolved: &mut Vec<String>) -> String {
        let mut text = self.expand_variables(value);
        // Bounded: each turn replaces one call.
        for _ in 0..64 {
            let Some((start, end)) = innermost_function(&text) else { break };
            let call = &text[start + 4..end];
            let result = match self.function(call) {
                Ok(result) => result,
                Err(why) => {
                    unresolved.push(format!("{from}: ${{f:{call}}}: {why}"));
                    "<unresolved>".to_string()
                }
            };
            text = format!("{}{result}{}", &text[..start], &text[end + 1..]);
        }
        text
    }

    fn expand_variables(&self, text: &str) -> String {
        let mut out = String::new();
        let mut rest = text;
        while let Some(at) = rest.find("${") {
            let Some(close) = rest[at..].find('}') else { break };
            let name = &rest[at + 2..at + close];
            out.push_str(&rest[..at]);
            // A call (`${f:...}`) is left to the functions; what it holds
            // is looked at next.
            if name.starts_with("f:") || name.contains("${") {
                out.push_str("${");
                rest = &rest[at + 2..];
                continue;
            }
            let escaped = rest[..at].ends_with('\\');
            match self.variables.iter().find(|(k, _)| k == name).filter(|_| !escaped) {
                Some((_, s)) => out.push_str(&s.value),
                None => out.push_str(&rest[at..at + close + 1]),
            }
            rest = &rest[at + close + 1..];
        }
        out.push_str(rest);
        out
    }

    /// One call, `NAME:ARG:...` with `\:` an escaped colon.
    fn function(&self, call: &str) -> Result<String, String> {
        let args = split_args(call);
        let (name, args) = args.split_first().ok_or("no function named")?;
        let arg = |i: usize| args.get(i).map(String::as_str).unwrap_or("");
        let cpus = |text: &str| crate::rt::parse_cpu_list(text.trim()).map_err(|e| format!("CPU list {text:?}: {e}"));
        let joined = |cpus: Vec<usize>| cpus.iter().map(usize::to_string).collect::<Vec<_>>().join(",");
        let invert = |list: &[usize]| self.machine.online.iter().copied().filter(|c| !list.contains(c)).collect::<Vec<_>>();
        Ok(match name.as_str() {
            "cpulist_unpack" => joined(cpus(&args.join(","))?),
            "cpulist_pack" => crate::rt::format_cpu_list(&cpus(&args.join(","))?),
            "cpulist_invert" => crate::rt::format_cpu_list(&invert(&cpus(&args.join(","))?)),
            "cpulist2hex" => hex_mask(&cpus(&args.join(","))?),
            "cpulist2hex_invert" => hex_mask(&invert(&cpus(&args.join(","))?)),
            "hex2cpulist" => crate::rt::format_cpu_list(&hex_cpus(arg(0))?),
            "cpulist_online" => joined(cpus(&args.join(","))?.into_iter().filter(|c| self.machine.online.contains(c)).collect()),
            "cpulist_present" => joined(cpus(&args.join(","))?.into_iter().filter(|c| self.machine.present.contains(c)).collect()),
            "strip" => args.concat().trim().to_string(),
            "calc_isolated_cores" => {
                // Every CPU but the first `reserve` of each package.
                let reserve: usize =
                    if arg(0).is_empty() { 1 } else { arg(0).parse().map_err(|_| format!("{:?} is not a count", arg(0)))? };
                let mut packages: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
                for (cpu, package) in &self.machine.packages {
                    packages.entry(package.as_str()).or_default().push(*cpu);
                }
                let mut isolated: Vec<usize> = packages
                    .into_values()
                    .flat_map(|mut cpus| {
                        cpus.sort_unstable();
                        cpus.into_iter().skip(reserve)
                    })
                    .collect();
                isolated.sort_unstable();
                joined(isolated)
            }
            "regex_search_ternary" => {
                let re = fancy_regex::Regex::new(arg(1)).map_err(|e| format!("regex {:?}: {e}", arg(1)))?;
                if re.is_match(arg(0)).unwrap_or(false) { arg(2) } else { arg(3) }.to_string()
            }
            "cpuinfo_check" => {
                // REGEX1:VALUE1:REGEX2:VALUE2:...:DEFAULT.
                let mut found = None;
                for pair in args.chunks(2) {
                    match pair {
                        [re, value] => {
                            let re = fancy_regex::Regex::new(re).map_err(|e| format!("regex {re:?}: {e}"))?;
                            if re.is_match(&self.machine.cpuinfo).unwrap_or(false) {
                                found = Some(value.clone());
                                break;
                            }
                        }
                        [default] => found = Some(default.clone()),
                        _ => {}
                    }
                }
                found.unwrap_or_default()
            }
            "assertion" if arg(1) != arg(2) => return Err(format!("tuned refuses the profile: {} ({} != {})", arg(0), arg(1), arg(2))),
            "assertion_non_equal" if arg(1) == arg(2) => return Err(format!("tuned refuses the profile: {} (unset)", arg(0))),
            "assertion" | "assertion_non_equal" => String::new(),
            "exec" => return Err("irqlab does not run a profile's commands".into()),
            other => return Err(format!("function {other} is not evaluated by irqlab")),
        })
    }
}

/// The span of the innermost `${f:...}` (its `$` and its `}`): a call with
/// no unescaped `${` inside it.
fn innermost_function(text: &str) -> Option<(usize, usize)> {
    text.match_indices("${f:").map(|(at, _)| at).filter(|&at| !text[..at].ends_with('\\')).find_map(|at| {
        let close = matching_brace(text, at + 2)?;
        (!has_reference(&text[at + 2..close])).then_some((at, close))
    })
}

/// The `}` closing the `${` whose body starts at `from`, counting every
/// `${` inside (escaped ones too: they close as well).
fn matching_brace(text: &str, from: usize) -> Option<usize> {
    let mut depth = 1;
    let bytes = text.as_bytes();
    let mut i = from;
    while i < bytes.len() {
        if bytes[i] == b'$' && bytes.get(i + 1) == Some(&b'{') {
            depth += 1;
            i += 1;
        } else if bytes[i] == b'}' {
            depth -= 1;
            if depth == 0 {
                return Some(i);
            }
        }
        i += 1;
    }
    None
}

fn split_args(call: &str) -> Vec<String> {
    let mut args = vec![String::new()];
    let mut chars = call.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' if chars.peek() == Some(&':') => {
                args.last_mut().unwrap().push(':');
                chars.next();
            }
            ':' => args.push(String::new()),
            c => args.last_mut().unwrap().push(c),
        }
    }
    args
}

/// tuned's hex CPU mask: 32-bit words of 8 digits, comma separated, most
/// significant first.
pub fn hex_mask(cpus: &[usize]) -> String {
    let words = cpus.iter().max().map_or(1, |m| m / 32 + 1);
    (0..words)
        .rev()
        .map(|w| {
            let word: u32 = cpus.iter().filter(|&&c| c / 32 == w).fold(0, |acc, c| acc | 1 << (c % 32));
            format!("{word:08x}")
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// The CPUs of a hex mask (`0000000f`, `ff,00000000`, `0x3`).
pub fn hex_cpus(mask: &str) -> Result<Vec<usize>, String> {
    let digits: String = mask.trim().trim_start_matches("0x").chars().filter(|&c| c != ',').collect();
    let mut cpus = Vec::new();
    for (i, c) in digits.chars().rev().enumerate() {
        let nibble = c.to_digit(16).ok_or_else(|| format!("hex mask {mask:?}: {c:?} is not a hex digit"))?;
        cpus.extend((0..4).filter(|b| nibble & (1 << b) != 0).map(|b| i * 4 + b));
    }
    Ok(cpus)
}

/// The options `[bootloader]`'s `cmdline*` keys put on the kernel command
/// line, in order, as tuned's bootloader plugin joins them
/// (`_get_effective_options`): `+WORDS` and plain values are appended,
/// `-WORDS` removes those words from what came before.
pub fn bootloader_cmdline(merged: &Merged) -> Vec<(String, String)> {
    let mut words: Vec<(String, String)> = Vec::new();
    for (key, s) in merged.unit("bootloader").iter().filter(|(k, _)| k.starts_with("cmdline")) {
        let value = s.value.trim();
        let from = format!("[bootloader] {key} ({})", s.from);
        if let Some(removed) = value.strip_prefix('-') {
            let removed: Vec<&str> = removed.split_whitespace().collect();
            words.retain(|(w, _)| !removed.contains(&w.as_str()));
        } else {
            let added = value.strip_prefix('+').unwrap_or(value);
            words.extend(added.split_whitespace().map(|w| (w.to_string(), from.clone())));
        }
    }
    words
}

/// One `[scheduler] group.` rule.
pub struct Rule {
    pub name: String,
    /// Where it is written (`realtime/tuned.conf:12`).
    pub from: String,
    pub priority: i64,
    /// The policy it sets; None for `*`.
    pub policy: Option<SchedAttr>,
    /// The CPUs it pins to; None for `*`.
    pub affinity: Option<Vec<usize>>,
    pub regex: fancy_regex::Regex,
}

/// The rules in the order tuned applies them (by RULE_PRIO, then as
/// written); a rule irqlab cannot read is said, not guessed.
pub fn scheduler_rules(merged: &Merged, unresolved: &mut Vec<String>) -> Vec<Rule> {
    let mut rules = Vec::new();
    for (key, s) in merged.unit("scheduler") {
        let Some(name) = key.strip_prefix("group.") else { continue };
        match parse_rule(&s.value) {
            Ok((priority, policy, affinity, regex)) => {
                rules.push(Rule { name: name.to_string(), from: s.from.clone(), priority, policy, affinity, regex })
            }
            Err(why) => unresolved.push(format!("{}: [scheduler] {key}: {why}", s.from)),
        }
    }
    rules.sort_by_key(|r| r.priority);
    rules
}

type ParsedRule = (i64, Option<SchedAttr>, Option<Vec<usize>>, fancy_regex::Regex);

fn parse_rule(value: &str) -> Result<ParsedRule, String> {
    let parts: Vec<&str> = value.splitn(5, ':').collect();
    let [priority, sched, prio, affinity, regex] = parts[..] else {
        return Err(format!("{value:?} is not RULE_PRIO:SCHED:PRIO:AFFINITY:REGEX"));
    };
    let priority = priority.trim().parse().map_err(|_| format!("rule priority {priority:?} is not a number"))?;
    let number = |p: &str| p.trim().parse::<u32>().map_err(|_| format!("priority {p:?} is not a number"));
    let policy = match sched.trim() {
        "*" => None,
        "f" => Some(SchedAttr::Fifo { priority: number(prio)? }),
        "r" => Some(SchedAttr::Rr { priority: number(prio)? }),
        "o" => Some(SchedAttr::Other { nice: 0 }),
        "b" => Some(SchedAttr::Batch { nice: 0 }),
        "i" => Some(SchedAttr::Idle),
        other => return Err(format!("scheduler {other:?} is none of f, r, o, b, i, *")),
    };
    let affinity = match affinity.trim() {
        "*" => None,
        mask => Some(hex_cpus(mask)?),
    };
    let regex = fancy_regex::Regex::new(regex).map_err(|e| format!("regex {regex:?}: {e}"))?;
    Ok((priority, policy, affinity, regex))
}

/// The rules that decide a thread's policy and its CPUs when tuned applies
/// its profile (`cmd` as `ps -eo cmd` shows it): of those matching, the
/// last in `rules`' order that sets each. A rule whose regex fails on
/// `cmd` is said in `unresolved`.
pub fn deciding_rules<'r>(rules: &'r [Rule], cmd: &str, unresolved: &mut Vec<String>) -> (Option<&'r Rule>, Option<&'r Rule>) {
    let mut policy = None;
    let mut affinity = None;
    for rule in rules {
        match rule.regex.is_match(cmd) {
            Ok(true) => {
                policy = if rule.policy.is_some() { Some(rule) } else { policy };
                affinity = if rule.affinity.is_some() { Some(rule) } else { affinity };
            }
            Ok(false) => {}
            Err(e) => unresolved.push(format!("{}: group.{}: {e}", rule.from, rule.name)),
        }
    }
    (policy, affinity)
}

/// What tuned's scheduler plugin matches a thread by (`ps -eo cmd`):
/// `[comm]` for a kernel thread, else its process's command line.
pub fn ps_cmd(tid: i32, comm: &str) -> String {
    let cmdline = std::fs::read(format!("/proc/{tid}/cmdline")).unwrap_or_default();
    let words: Vec<String> =
        cmdline.split(|&b| b == 0).filter(|w| !w.is_empty()).map(|w| String::from_utf8_lossy(w).into_owned()).collect();
    if words.is_empty() {
        format!("[{comm}]")
    } else {
        words.join(" ")
    }
}

/// The profile directory a test or a guest root holds tuned in.
pub fn roots_under(root: &Path) -> Roots {
    Roots { etc: root.join("etc/tuned"), lib: root.join("usr/lib/tuned") }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(root: &Path, file: &str, text: &str) {
        let path = root.join(file);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    fn machine() -> Machine {
        Machine {
            online: (0..4).collect(),
            present: (0..4).collect(),
            cpuinfo: "vendor_id\t: GenuineIntel\n".into(),
            packages: vec![(0, "0".into()), (1, "0".into()), (2, "1".into()), (3, "1".into())],
        }
    }

    /// Debian's realtime profile in small: an include, a variables file,
    /// the functions it calls, a later profile overriding an option.
    #[test]
    fn a_realtime_like_profile_merges_and_expands_as_tuned_does() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        write(
            root,
            "usr/lib/tuned/network-latency/tuned.conf",
            "[main]\nsummary=x\n\n[sysctl]\nkernel.a = 1\nkernel.b = 2\n\n[bootloader]\ncmdline_network_latency=skew_tick=1 tsc=reliable\n",
        );
        let vars = root.join("etc/tuned/realtime-variables.conf");
        write(root, "etc/tuned/realtime-variables.conf", "# the user's\nisolated_cores=2-3\nisolate_managed_irq=Y\n");
        write(
            root,
            "usr/lib/tuned/realtime/tuned.conf",
            &format!(
                "[main]\ninclude = network-latency\n\n[variables]\ninclude = {}\nisolated_cores = ${{isolated_cores}}\n\
                 not_isolated_cpumask = ${{f:cpulist2hex_invert:${{isolated_cores}}}}\n\
                 managed_irq=${{f:regex_search_ternary:${{isolate_managed_irq}}:\\b[y,Y,1,t,T]\\b:managed_irq,domain,:}}\n\
                 pstate = ${{f:cpuinfo_check:GenuineIntel:intel_pstate=disable:AuthenticAMD:amd_pstate=disable:}}\n\n\
                 [sysctl]\nkernel.b = 3  # a comment\n\n[bootloader]\ncmdline_realtime=+isolcpus=${{managed_irq}}${{isolated_cores}} ${{pstate}} nosoftlockup\n\
                 cmdline_drop=-tsc=reliable\n\n[scheduler]\nisolated_cores=${{isolated_cores}}\ngroup.ksoftirqd=0:f:2:*:^\\[ksoftirqd\n\
                 mask=${{not_isolated_cpumask}}\nodd=${{f:calc_isolated_cores:1}}\nnever=${{f:exec:/bin/true}}\n\
                 script=${{i:PROFILE_DIR}}/script.sh\n\
                 check=${{f:assertion_non_equal:isolated_cores are set:${{isolated_cores}}:\\${{isolated_cores}}}}\n",
                vars.display()
            ),
        );
        let merged = load("realtime", &roots_under(root), &machine());
        assert_eq!(merged.profiles, ["network-latency", "realtime"]);
        let sysctl: Vec<(&str, &str)> = merged.unit("sysctl").iter().map(|(k, s)| (k.as_str(), s.value.as_str())).collect();
        assert_eq!(sysctl, [("kernel.a", "1"), ("kernel.b", "3")], "the later profile's value, in the earlier's place");
        assert_eq!(merged.option("sysctl", "kernel.b").unwrap().from, "realtime/tuned.conf:12");
        assert_eq!(merged.option("scheduler", "isolated_cores").unwrap().value, "2-3");
        assert_eq!(merged.option("scheduler", "mask").unwrap().value, "00000003");
        assert_eq!(merged.option("scheduler", "odd").unwrap().value, "1,3", "all but the first CPU of each package");
        assert_eq!(merged.option("scheduler", "check").unwrap().value, "", "an assertion that holds is empty");
        assert_eq!(merged.option("scheduler", "never").unwrap().value, "<unresolved>");
        let profile_dir = root.join("usr/lib/tuned/realtime");
        assert_eq!(merged.option("scheduler", "script").unwrap().value, format!("{}/script.sh", profile_dir.display()));
        assert!(merged.unresolved.iter().any(|u| u.contains("f:exec:")), "{:?}", merged.unresolved);
        let words: Vec<String> = bootloader_cmdline(&merged).into_iter().map(|(w, _)| w).collect();
        assert_eq!(words, ["skew_tick=1", "isolcpus=managed_irq,domain,2-3", "intel_pstate=disable", "nosoftlockup"]);
    }

    #[test]
    fn replace_and_drop_and_a_missing_profile() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        write(root, "usr/lib/tuned/base/tuned.conf", "[sysctl]\na=1\nb=2\nc=3\n");
        write(root, "etc/tuned/mine/tuned.conf", "[main]\ninclude=base,gone\n[sysctl]\ndrop=a\nc=4\n");
        write(root, "etc/tuned/other/tuned.conf", "[sysctl]\nreplace=1\nz=9\n");
        let merged = load("mine", &roots_under(root), &machine());
        let keys: Vec<(&str, &str)> = merged.unit("sysctl").iter().map(|(k, s)| (k.as_str(), s.value.as_str())).collect();
        assert_eq!(keys, [("b", "2"), ("c", "4")]);
        assert!(merged.unresolved.iter().any(|u| u.starts_with("profile gone:")), "{:?}", merged.unresolved);
        let both = load("mine other", &roots_under(root), &machine());
        assert_eq!(both.unit("sysctl").len(), 1, "replace = 1 drops what came before");
    }

    #[test]
    fn masks_both_ways_and_tuneds_boot_cmdline_file() {
        assert_eq!(hex_mask(&[0, 1, 33]), "00000002,00000003");
        assert_eq!(hex_cpus("00000002,00000003").unwrap(), [0, 1, 33]);
        assert_eq!(hex_cpus("0xf").unwrap(), [0, 1, 2, 3]);
        assert!(hex_cpus("0xg").is_err());
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "etc/tuned/bootcmdline", "TUNED_BOOT_CMDLINE=\"isolcpus=2-3 nohz_full=2-3\"\nTUNED_BOOT_INITRD_ADD=\n");
        write(dir.path(), "etc/tuned/active_profile", "realtime\n");
        let roots = roots_under(dir.path());
        assert_eq!(roots.boot_cmdline().as_deref(), Some("isolcpus=2-3 nohz_full=2-3"));
        assert_eq!(roots.active().as_deref(), Some("realtime"));
    }
}
