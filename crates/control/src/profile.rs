//! A profile: a declared layout of IRQ affinities, thread policies, NAPI
//! and RPS settings (what tuned's realtime profile or NI's rtgroups
//! declare), applied at once through the journal by `irqlab control apply`
//! and written by `irqlab survey` from its recommendations. `control irq`
//! is a one-setting profile made from its flags.
//!
//! The whole profile is read, checked and resolved against the machine
//! (IRQs, threads, CPUs) before anything changes; a bad one is exit 2 at
//! file:line:col. Applying is one transaction: a setting the kernel refuses
//! undoes the ones applied before it (except where a wildcard `irq = "*"`
//! meets an IRQ the kernel does not move: that one is listed as kept).

use irqlab_analysis::input::{InputError, Location};
use irqlab_host::error::{Error, Result};
use irqlab_host::journal::hold::{self, EndedBy};
use irqlab_host::journal::sched::{self, PolicySpec};
use irqlab_host::journal::threads::Match;
use irqlab_host::journal::{self, irq, Object, Value};
use irqlab_host::privilege::{self, Capability};
use irqlab_host::rt;
use serde::{Deserialize, Serialize};
use std::sync::atomic::AtomicBool;
use toml::Spanned;

/// The profile file's schema.
pub const PROFILE_SCHEMA: &str = "irqlab/profile/v1";
/// The report of `control apply` and `control irq`.
pub const SCHEMA: &str = "irqlab/control-apply/v1";

/// `profile.toml`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Profile {
    pub schema: Spanned<String>,
    /// `/proc/irq/default_smp_affinity`: where IRQs registered later start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_irq: Option<DefaultIrq>,
    #[serde(default, rename = "irq", skip_serializing_if = "Vec::is_empty")]
    pub irqs: Vec<IrqSetting>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub threads: Vec<ThreadsSetting>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub napi: Vec<NapiSetting>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rps: Vec<RpsSetting>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DefaultIrq {
    pub cpus: Spanned<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub because: Option<String>,
}

/// `[[irq]]`: an IRQ by number, handler name or device (`journal::irq::resolve`),
/// or `*` for every numbered IRQ, steered to `cpus`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IrqSetting {
    pub irq: Spanned<String>,
    pub cpus: Spanned<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub because: Option<String>,
}

/// `[[threads]]`: a MATCH as `control threads` takes it, a fixed policy
/// (`fifo:50`, `deadline:Q/P`, `other`, ...), optionally pinned to `cpus`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ThreadsSetting {
    #[serde(rename = "match")]
    pub matched: Spanned<String>,
    pub policy: Spanned<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpus: Option<Spanned<String>>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub all_matching: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub because: Option<String>,
}

/// `[[napi]]`: a device's NAPI settings, through its sysfs files.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NapiSetting {
    pub dev: Spanned<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub threaded: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub defer_hard_irqs: Option<u64>,
    /// A duration (`200us`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gro_flush_timeout: Option<Spanned<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub because: Option<String>,
}

/// `[[rps]]`: receive packet steering of every receive queue of `dev`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RpsSetting {
    pub dev: Spanned<String>,
    pub cpus: Spanned<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub because: Option<String>,
}

impl Default for Profile {
    fn default() -> Profile {
        Profile::new()
    }
}

/// A value for a profile written by a program: no place in any file.
pub fn unplaced<T>(value: T) -> Spanned<T> {
    Spanned::new(0..0, value)
}

/// One change the profile asks for, resolved against the machine.
#[derive(Debug, Clone)]
pub struct Planned {
    /// Which setting asked (`irq 38`, `threads comm:foo`), for people.
    pub setting: String,
    pub object: Object,
    pub new: Value,
    pub because: Option<String>,
    /// The kernel may refuse it without failing the profile (an IRQ taken
    /// by `irq = "*"` that the kernel does not move).
    pub may_be_refused: bool,
}

impl Profile {
    /// An empty profile, to fill in.
    pub fn new() -> Profile {
        Profile {
            schema: unplaced(PROFILE_SCHEMA.to_string()),
            default_irq: None,
            irqs: Vec::new(),
            threads: Vec::new(),
            napi: Vec::new(),
            rps: Vec::new(),
        }
    }

    /// Reads a profile; `file` names it in errors.
    pub fn parse(file: &str, text: &str) -> std::result::Result<Profile, InputError> {
        let profile: Profile = toml::from_str(text).map_err(|e| InputError::from_toml(file, text, &e))?;
        if profile.schema.get_ref() != PROFILE_SCHEMA {
            let at = Location::at_span(file, text, profile.schema.span());
            return Err(InputError::at(format!("schema `{}`: expected `{PROFILE_SCHEMA}`", profile.schema.get_ref()), at));
        }
        Ok(profile)
    }

    /// The profile as TOML, a header comment first.
    pub fn to_toml(&self, header: &str) -> String {
        let body = toml::to_string(self).expect("profiles serialise");
        let comment: String = header.lines().map(|l| format!("# {l}\n")).collect();
        format!("{comment}{body}")
    }

    pub fn is_empty(&self) -> bool {
        self.default_irq.is_none() && self.irqs.is_empty() && self.threads.is_empty() && self.napi.is_empty() && self.rps.is_empty()
    }

    /// Every change, resolved against the machine now (IRQs by name,
    /// threads by MATCH, online CPUs), or the first setting that cannot be
    /// honoured, at its place in `text`.
    pub fn plan(&self, file: &str, text: &str) -> std::result::Result<Plan, InputError> {
        let at = |span: std::ops::Range<usize>| Location::at_span(file, text, span);
        let located = |span: std::ops::Range<usize>| move |e: Error| InputError::at(e.to_string(), at(span.clone()));
        let cpus_of = |s: &Spanned<String>| cpus(s.get_ref()).map_err(located(s.span()));
        let mut planned = Vec::new();
        let mut absent = Vec::new();
        let irqs = if self.irqs.is_empty() { Vec::new() } else { irq::list().map_err(|e| InputError::new(e.to_string()))? };
        if let Some(d) = &self.default_irq {
            planned.extend(plan_irq("default", &cpus_of(&d.cpus)?, d.because.clone(), &irqs).map_err(located(d.cpus.span()))?);
        }
        for s in &self.irqs {
            let cpus = cpus_of(&s.cpus)?;
            planned.extend(plan_irq(s.irq.get_ref(), &cpus, s.because.clone(), &irqs).map_err(located(s.irq.span()))?);
        }
        for s in &self.threads {
            let policy = fixed_policy(s.policy.get_ref()).map_err(located(s.policy.span()))?;
            let pin = s.cpus.as_ref().map(cpus_of).transpose()?;
            let matched = Match::parse(s.matched.get_ref()).map_err(located(s.matched.span()))?;
            // A thread the survey saw may have exited since (a pid), a
            // device's threads may be gone with it: nothing to set, said.
            if let Err(e) = matched.resolve(s.matched.get_ref()) {
                absent.push(Row::absent(format!("threads {}", s.matched.get_ref()), s.policy.get_ref(), e, s.because.clone()));
                continue;
            }
            let threads = matched.resolve_guarded(s.matched.get_ref(), s.all_matching).map_err(located(s.matched.span()))?;
            for thread in threads {
                let setting = format!("threads {}", s.matched.get_ref());
                if let Some(cpus) = &pin {
                    planned.push(Planned {
                        setting: setting.clone(),
                        object: Object::ThreadAffinity { thread: thread.clone() },
                        new: Value::Cpus { cpus: cpus.clone() },
                        because: s.because.clone(),
                        may_be_refused: false,
                    });
                }
                planned.push(Planned {
                    setting,
                    object: Object::ThreadSched { thread },
                    new: Value::Sched { attr: policy },
                    because: s.because.clone(),
                    may_be_refused: false,
                });
            }
        }
        for s in &self.napi {
            let dev = s.dev.get_ref();
            let dir = device_dir(dev).map_err(located(s.dev.span()))?;
            let flush = match &s.gro_flush_timeout {
                Some(d) => Some(
                    irqlab_analysis::units::parse_duration_ns(d.get_ref())
                        .map_err(|e| InputError::at(format!("gro_flush_timeout `{}`: {e}", d.get_ref()), at(d.span())))?,
                ),
                None => None,
            };
            for (file_name, value) in
                [("threaded", s.threaded.map(u64::from)), ("napi_defer_hard_irqs", s.defer_hard_irqs), ("gro_flush_timeout", flush)]
            {
                let Some(value) = value else { continue };
                let path = format!("{dir}/{file_name}");
                if !std::path::Path::new(&path).exists() {
                    let e = Error::MissingKernelFeature { feature: path.clone(), detail: "this kernel has no such per-device file".into() };
                    return Err(InputError::at(e.to_string(), at(s.dev.span())));
                }
                planned.push(Planned {
                    setting: format!("napi {dev}"),
                    object: Object::File { path },
                    new: Value::Text { text: value.to_string() },
                    because: s.because.clone(),
                    may_be_refused: false,
                });
            }
        }
        for s in &self.rps {
            let dev = s.dev.get_ref();
            let dir = device_dir(dev).map_err(located(s.dev.span()))?;
            let mask = rt::cpu_mask_hex(&cpus_of(&s.cpus)?);
            let mut queues: Vec<String> = std::fs::read_dir(format!("{dir}/queues"))
                .map(|d| d.flatten().filter_map(|e| e.file_name().to_str().map(String::from)).filter(|q| q.starts_with("rx-")).collect())
                .unwrap_or_default();
            queues.sort();
            for queue in queues {
                planned.push(Planned {
                    setting: format!("rps {dev}"),
                    object: Object::File { path: format!("{dir}/queues/{queue}/rps_cpus") },
                    new: Value::Text { text: mask.clone() },
                    because: s.because.clone(),
                    may_be_refused: false,
                });
            }
        }
        Ok(Plan { changes: last_word(planned), absent })
    }
}

/// A profile resolved against the machine: the changes, and the settings
/// that name nothing now (a thread that exited).
#[derive(Debug, Clone, Default)]
pub struct Plan {
    pub changes: Vec<Planned>,
    pub absent: Vec<Row>,
}

/// One change per object: where two settings name the same object (an IRQ
/// in `*` and by its number), the later one decides, as in the file.
pub fn last_word(plan: Vec<Planned>) -> Vec<Planned> {
    let mut kept: Vec<Planned> = Vec::new();
    for p in plan {
        kept.retain(|k| k.object != p.object);
        kept.push(p);
    }
    kept
}

/// `/sys/class/net/DEV`, or exit 2 naming the devices there are.
fn device_dir(dev: &str) -> Result<String> {
    let dir = format!("/sys/class/net/{dev}");
    if std::path::Path::new(&dir).exists() {
        return Ok(dir);
    }
    let mut devs: Vec<String> = std::fs::read_dir("/sys/class/net")
        .map(|d| d.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect())
        .unwrap_or_default();
    devs.sort();
    Err(Error::Invalid(format!("no network device `{dev}` (devices: {})", devs.join(", "))))
}

/// A CPU list of online CPUs.
pub fn cpus(list: &str) -> Result<Vec<usize>> {
    let cpus = rt::parse_cpu_list(list).map_err(|e| Error::Invalid(format!("cpus: {e}")))?;
    for &cpu in &cpus {
        rt::require_online(cpu, "cpus: CPU")?;
    }
    if cpus.is_empty() {
        return Err(Error::Invalid("cpus: no CPU".into()));
    }
    Ok(cpus)
}

/// A `[[threads]]` policy: the words of `control threads --policy`
/// (`sched::parse_policy`), `fifo` / `rr` alone at
/// [`sched::KERNEL_FIFO_PRIORITY`] as there; fixed policies only.
fn fixed_policy(text: &str) -> Result<sched::SchedAttr> {
    let words = sched::parse_policy(text).map_err(|e| Error::Invalid(format!("policy {text}: {e}")))?;
    match words.resolve(sched::KERNEL_FIFO_PRIORITY) {
        PolicySpec::Fixed { attr } => Ok(attr),
        PolicySpec::Sporadic { .. } => Err(Error::Invalid(format!(
            "policy {text}: a sporadic server lives only while `irqlab control threads` runs; a profile takes fixed policies \
             (deadline:Q/P is the kernel's own server)"
        ))),
    }
}

/// The changes for `irq = SPEC` (`*`: every numbered IRQ, each of which the
/// kernel may refuse to move; `default`: the default affinity).
pub fn plan_irq(spec: &str, cpus: &[usize], because: Option<String>, irqs: &[irq::Irq]) -> Result<Vec<Planned>> {
    if spec == "default" {
        let new = Value::Cpus { cpus: cpus.to_vec() };
        return Ok(vec![Planned {
            setting: "default_irq".into(),
            object: Object::IrqDefaultAffinity,
            new,
            because,
            may_be_refused: false,
        }]);
    }
    let (chosen, wildcard) = if spec == "*" { (irqs.to_vec(), true) } else { (irq::resolve(spec, irqs)?, false) };
    Ok(chosen
        .into_iter()
        .map(|i| Planned {
            setting: format!("irq {spec}"),
            object: Object::IrqAffinity { irq: i.number, name: i.actions.clone() },
            new: Value::Cpus { cpus: cpus.to_vec() },
            because: because.clone(),
            may_be_refused: wildcard,
        })
        .collect())
}

/// One row of the report.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    pub setting: String,
    pub object: String,
    pub old: String,
    pub new: String,
    /// An IRQ's effective affinity as the kernel reports it 100 ms after the
    /// change (the CPU x86 delivers to; an IRQ that has not fired since may
    /// still show its old CPU: x86 moves it at its next interrupt).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub effective: Option<String>,
    /// What happened: `applied`, `already` (it was so: nothing changed),
    /// `refused` (a wildcard IRQ the kernel does not move), `dry-run`,
    /// `absent` (its MATCH names no thread now: nothing set).
    pub outcome: &'static str,
    /// The kernel's refusal, for `refused`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
    /// The journal entry (kept only with `persist`).
    pub entry: String,
    pub restored: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub because: Option<String>,
}

impl Row {
    fn absent(setting: String, new: &str, why: Error, because: Option<String>) -> Row {
        Row {
            setting,
            object: String::new(),
            old: String::new(),
            new: new.to_string(),
            effective: None,
            outcome: "absent",
            why: Some(why.to_string()),
            entry: String::new(),
            restored: false,
            because,
        }
    }
}

/// The `irqlab/control-apply/v1` document.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub schema: &'static str,
    /// The profile file, or the command (`control irq 38 --cpu 1`).
    pub source: String,
    pub dry_run: bool,
    pub persist: bool,
    pub rows: Vec<Row>,
    pub held_ns: u64,
    pub ended_by: Option<EndedBy>,
    pub complete: bool,
}

#[derive(Debug, Clone)]
pub struct Config {
    pub source: String,
    pub duration_ns: Option<u64>,
    pub persist: bool,
}

fn effective_of(object: &Object) -> Option<String> {
    match object {
        Object::IrqAffinity { irq, .. } => irq::effective(*irq).map(|c| rt::format_cpu_list(&c)),
        _ => None,
    }
}

/// `--dry-run`: each change as old -> new, nothing written.
pub fn dry_run(config: &Config, plan: &Plan) -> Result<Report> {
    let mut rows = plan.absent.clone();
    for p in &plan.changes {
        let old = journal::read(&p.object)?;
        let outcome = if old.same_setting(&p.new) { "already" } else { "dry-run" };
        rows.push(Row {
            setting: p.setting.clone(),
            object: p.object.to_string(),
            old: old.to_string(),
            new: p.new.to_string(),
            effective: None,
            outcome,
            why: None,
            entry: String::new(),
            restored: false,
            because: p.because.clone(),
        });
    }
    Ok(Report {
        schema: SCHEMA,
        source: config.source.clone(),
        dry_run: true,
        persist: config.persist,
        rows,
        held_ns: 0,
        ended_by: None,
        complete: true,
    })
}

/// Applies every change (all or nothing), holds them until `stop` or the
/// duration, then restores them newest first, or keeps them (`persist`);
/// `on_applied` is told each row as it takes effect.
pub fn apply(config: &Config, plan: Plan, stop: &AtomicBool, mut on_applied: impl FnMut(&Row)) -> Result<Report> {
    privilege::require(&[Capability::SysNice, Capability::SysAdmin], "set thread policies and IRQ affinities")?;
    let mut applied = Vec::new();
    let mut rows: Vec<(Row, Option<usize>, Object)> = Vec::new();
    for row in &plan.absent {
        on_applied(row);
    }
    for p in plan.changes {
        let now = journal::read(&p.object)?;
        let mut row = Row {
            setting: p.setting.clone(),
            object: p.object.to_string(),
            old: now.to_string(),
            new: p.new.to_string(),
            effective: None,
            outcome: "applied",
            why: None,
            entry: String::new(),
            restored: false,
            because: p.because.clone(),
        };
        if now.same_setting(&p.new) {
            row.outcome = "already";
            on_applied(&row);
            rows.push((row, None, p.object));
            continue;
        }
        match journal::apply(p.object.clone(), p.new.clone()) {
            Ok(a) => {
                // The journal read the value again when it took it: its
                // reading is the one a revert puts back.
                row.old = a.entry().old.to_string();
                row.entry = a.entry().id.clone();
                on_applied(&row);
                rows.push((row, Some(applied.len()), p.object));
                applied.push(a);
            }
            Err(e @ Error::MissingKernelFeature { .. }) if p.may_be_refused => {
                row.outcome = "refused";
                row.why = Some(e.to_string());
                on_applied(&row);
                rows.push((row, None, p.object));
            }
            Err(e) => {
                // All or nothing: what was applied goes back, newest first.
                let undone = match applied.len() {
                    0 => String::new(),
                    n => format!("; the {n} change(s) applied before it were undone"),
                };
                journal::restore_all(applied)?;
                return Err(with_context(e, &format!("{} ({}){undone}", p.setting, p.object)));
            }
        }
    }
    // x86 moves an IRQ when it next fires: give the busy ones a moment
    // before reading where the kernel delivers them.
    if rows.iter().any(|(_, _, o)| matches!(o, Object::IrqAffinity { .. })) {
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    for (row, _, object) in &mut rows {
        if row.outcome != "refused" {
            row.effective = effective_of(object);
        }
    }
    let (held_ns, ended_by) = hold::wait(stop, config.duration_ns, config.persist);
    let complete = ended_by.complete(config.duration_ns, 0);
    let settled = hold::settle(applied, config.persist)?;
    let rows = rows
        .into_iter()
        .map(|(mut row, index, _)| {
            if let Some(i) = index {
                row.restored = settled[i].restored;
                if !config.persist {
                    row.entry.clear();
                }
            }
            row
        })
        .collect::<Vec<Row>>();
    let rows = plan.absent.into_iter().chain(rows).collect();
    Ok(Report {
        schema: SCHEMA,
        source: config.source.clone(),
        dry_run: false,
        persist: config.persist,
        rows,
        held_ns,
        ended_by: Some(ended_by),
        complete,
    })
}

/// The same error (and exit code) with what was being done in front.
fn with_context(e: Error, context: &str) -> Error {
    match e {
        Error::MissingKernelFeature { feature, detail } => {
            Error::MissingKernelFeature { feature, detail: format!("{detail}; at {context}") }
        }
        Error::Invalid(m) => Error::Invalid(format!("{context}: {m}")),
        Error::Failed(m) => Error::Failed(format!("{context}: {m}")),
        other => Error::Failed(format!("{context}: {other}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PROFILE: &str = r#"schema = "irqlab/profile/v1"

[default_irq]
cpus = "0"

[[irq]]
irq = "*"
cpus = "0"
because = "quietest-cpu: CPU 1 has the least interference"

[[threads]]
match = "pid:4242"
policy = "fifo:50"
cpus = "0"
"#;

    #[test]
    fn a_profile_reads_and_writes_back() {
        let p = Profile::parse("p.toml", PROFILE).unwrap();
        assert_eq!(p.irqs.len(), 1);
        assert_eq!(p.threads[0].matched.get_ref(), "pid:4242");
        assert_eq!(p.default_irq.as_ref().unwrap().cpus.get_ref(), "0");
        let again = Profile::parse("p.toml", &p.to_toml("written by a test")).unwrap();
        assert_eq!(again.threads[0].policy.get_ref(), "fifo:50");
        assert_eq!(again.irqs[0].because.as_deref(), Some("quietest-cpu: CPU 1 has the least interference"));
    }

    #[test]
    fn bad_profiles_are_refused_at_their_place() {
        let unknown = PROFILE.replace("cpus = \"0\"\nbecause", "cpu = \"0\"\nbecause");
        let e = Profile::parse("p.toml", &unknown).unwrap_err();
        assert!(e.message.contains("cpu"), "{e}");
        assert_eq!(e.location.as_ref().map(|l| l.line), Some(8), "{e:?}");
        let schema = PROFILE.replace("irqlab/profile/v1", "irqlab/profile/v9");
        let e = Profile::parse("p.toml", &schema).unwrap_err();
        assert_eq!(e.location.as_ref().map(|l| (l.line, l.col)), Some((1, 10)), "{e:?}");
        // Checked against the machine: a CPU that is not online, a bad MATCH, a sporadic policy.
        for (from, to, line, says) in [
            ("cpus = \"0\"\n\n[[irq]]", "cpus = \"4095\"\n\n[[irq]]", 4, "4095"),
            ("pid:4242", "pod:4242", 12, "unknown kind"),
            ("fifo:50", "sporadic:1ms/10ms:50/1", 13, "fixed policies"),
        ] {
            let text = PROFILE.replace(from, to);
            let p = Profile::parse("p.toml", &text).unwrap();
            let e = p.plan("p.toml", &text).unwrap_err();
            assert!(e.message.contains(says), "{e}");
            assert_eq!(e.location.as_ref().map(|l| l.line), Some(line), "{e:?}");
        }
    }

    #[test]
    fn a_threads_policy_takes_control_threads_words() {
        use irqlab_host::journal::sched::SchedAttr;
        // `fifo` alone: the kernel's own threads' priority, as `control threads`.
        assert_eq!(fixed_policy("fifo").unwrap(), SchedAttr::Fifo { priority: sched::KERNEL_FIFO_PRIORITY });
        assert_eq!(fixed_policy("rr").unwrap(), SchedAttr::Rr { priority: 50 });
        assert_eq!(fixed_policy("fifo:80").unwrap(), SchedAttr::Fifo { priority: 80 });
        assert_eq!(fixed_policy("background").unwrap(), SchedAttr::Idle);
        let e = fixed_policy("fifo:100").unwrap_err().to_string();
        assert_eq!(e, "policy fifo:100: priority `100` is outside 1..=99");
        assert!(fixed_policy("sporadic:1ms/10ms").unwrap_err().to_string().contains("fixed policies"));
    }

    #[test]
    fn the_later_setting_of_an_object_decides() {
        let irqs = irq::parse_interrupts("  CPU0 CPU1\n 24: 1 0 IO-APIC 5-edge ACPI:Ged\n 38: 0 9 PCI-MSIX 1-edge virtio2-input.0\n");
        let mut plan = plan_irq("*", &[1], None, &irqs).unwrap();
        plan.extend(plan_irq("38", &[0], None, &irqs).unwrap());
        let plan = last_word(plan);
        assert_eq!(plan.len(), 2);
        assert_eq!((plan[1].setting.as_str(), &plan[1].new), ("irq 38", &Value::Cpus { cpus: vec![0] }));
        assert_eq!(plan[0].object, Object::IrqAffinity { irq: 24, name: "ACPI:Ged".into() });
    }

    #[test]
    fn a_wildcard_irq_takes_every_irq_and_may_be_refused() {
        let irqs = irq::parse_interrupts("  CPU0 CPU1\n 24: 1 0 IO-APIC 5-edge ACPI:Ged\n 38: 0 9 PCI-MSIX 1-edge virtio2-input.0\n");
        let plan = plan_irq("*", &[0], None, &irqs).unwrap();
        assert_eq!(plan.len(), 2);
        assert!(plan.iter().all(|p| p.may_be_refused));
        let one = plan_irq("virtio2", &[1], None, &irqs).unwrap();
        assert_eq!(one.len(), 1);
        assert!(!one[0].may_be_refused);
        assert_eq!(one[0].object, Object::IrqAffinity { irq: 38, name: "virtio2-input.0".into() });
    }
}
