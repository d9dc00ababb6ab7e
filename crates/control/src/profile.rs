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

use crate::boot;
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
    /// The boot the profile was surveyed in (`/proc/sys/kernel/random/boot_id`):
    /// its `this_boot` settings name that boot's pids.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub boot_id: Option<String>,
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
    /// Kernel command-line options, for the next boot (`control apply --boot`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub boot: Option<BootSetting>,
}

/// `[boot]`: kernel command-line options (`boot::check` knows which), with
/// the reason for each by its key.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BootSetting {
    pub cmdline: Spanned<String>,
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub because: std::collections::BTreeMap<String, String>,
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
    /// The MATCH names a thread only in the boot the profile was surveyed
    /// in (`pid:N`: nothing stable named it): on another boot it is missing.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub this_boot: bool,
    /// How many threads the MATCH named when surveyed: more now is
    /// reported, as a MATCH naming nothing is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub surveyed: Option<usize>,
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
            boot_id: None,
            default_irq: None,
            irqs: Vec::new(),
            threads: Vec::new(),
            napi: Vec::new(),
            rps: Vec::new(),
            boot: None,
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
        self.default_irq.is_none()
            && self.irqs.is_empty()
            && self.threads.is_empty()
            && self.napi.is_empty()
            && self.rps.is_empty()
            && self.boot.is_none()
    }

    /// Every change, resolved against the machine now (IRQs by name,
    /// threads by MATCH, online CPUs), or the first setting that cannot be
    /// honoured, at its place in `text`. A `[[threads]]` MATCH that names
    /// nothing now, or more threads than when surveyed, is refused with
    /// all such settings listed, unless `allow_missing` (then each is a
    /// row of the plan and sets nothing).
    pub fn plan(&self, file: &str, text: &str, allow_missing: bool) -> std::result::Result<Plan, InputError> {
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
        let this_boot_id = current_boot_id();
        for s in &self.threads {
            let policy = fixed_policy(s.policy.get_ref()).map_err(located(s.policy.span()))?;
            let pin = s.cpus.as_ref().map(cpus_of).transpose()?;
            let matched = Match::parse(s.matched.get_ref()).map_err(located(s.matched.span()))?;
            // A thread the survey saw may have exited since, a device's
            // threads may be gone with it, a pid may be another boot's, a
            // name may now be taken by more threads than were surveyed.
            let missing = |why: String| {
                (at(s.matched.span()), Row::absent(format!("threads {}", s.matched.get_ref()), s.policy.get_ref(), why, s.because.clone()))
            };
            if s.this_boot {
                if let (Some(surveyed), Some(now)) = (&self.boot_id, &this_boot_id) {
                    if surveyed != now {
                        absent.push(missing(format!(
                            "MATCH {} is a pid of the boot surveyed ({surveyed}), not of this one ({now})",
                            s.matched.get_ref()
                        )));
                        continue;
                    }
                }
            }
            let found = match matched.resolve(s.matched.get_ref()) {
                Ok(found) => found,
                Err(e) => {
                    absent.push(missing(e.to_string()));
                    continue;
                }
            };
            if let Some(surveyed) = s.surveyed.filter(|&n| found.len() > n) {
                let names: Vec<String> = found.iter().take(8).map(|t| format!("{} ({})", t.comm, t.tid)).collect();
                absent.push(missing(format!(
                    "MATCH {} names {} threads now ({}), {surveyed} when surveyed",
                    s.matched.get_ref(),
                    found.len(),
                    names.join(", ")
                )));
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
        if !absent.is_empty() && !allow_missing {
            let lines: Vec<String> = absent.iter().map(|(at, row)| format!("  {at}: {}", row.why.as_deref().unwrap_or(""))).collect();
            return Err(InputError::at(
                format!(
                    "{} setting(s) of the profile name no thread on this machine as surveyed; nothing was changed \
                     (--allow-missing applies the rest):\n{}",
                    absent.len(),
                    lines.join("\n")
                ),
                absent[0].0.clone(),
            ));
        }
        let boot = match &self.boot {
            None => Vec::new(),
            Some(b) => {
                let cpus = boot::machine_cpus().map_err(|e| InputError::new(e.to_string()))?;
                boot::check(b.cmdline.get_ref(), &cpus).map_err(|r| {
                    // The span starts at the opening quote of a basic string.
                    let offset = b.cmdline.span().start + 1 + r.offset;
                    InputError::at(r.message, Location::at_offset(file, text, offset))
                })?
            }
        };
        Ok(Plan { changes: last_word(planned), absent: absent.into_iter().map(|(_, row)| row).collect(), boot })
    }

    /// How many settings `control apply` makes at run time (everything
    /// but `[boot]`).
    pub fn run_time_settings(&self) -> usize {
        usize::from(self.default_irq.is_some()) + self.irqs.len() + self.threads.len() + self.napi.len() + self.rps.len()
    }

    /// Why the profile asks for boot option `key`.
    pub fn boot_because(&self, key: &str) -> Option<&str> {
        self.boot.as_ref().and_then(|b| b.because.get(key)).map(String::as_str)
    }
}

/// This boot's id, to tell a pid of this boot from another's.
pub fn current_boot_id() -> Option<String> {
    std::fs::read_to_string("/proc/sys/kernel/random/boot_id").ok().map(|t| t.trim().to_string())
}

/// A profile resolved against the machine: the changes, and the settings
/// that name nothing now (a thread that exited).
#[derive(Debug, Clone, Default)]
pub struct Plan {
    pub changes: Vec<Planned>,
    pub absent: Vec<Row>,
    /// The `[boot]` options, checked (applied only by `control apply --boot`).
    pub boot: Vec<boot::BootOption>,
}

impl Plan {
    /// The plan made to hold beside a running irqbalance: each irqbalance
    /// is told first (through its socket, journalled like the rest) to
    /// leave the IRQs the plan moves alone, and given its own list back
    /// after them (restores run newest first). An irqbalance without the
    /// socket would move them back at its next pass: exit 3 before
    /// anything changes, naming the choices, unless `ignore` (then a
    /// warning: the journal will show the IRQs as drifted).
    pub fn beside_irqbalance(self, ignore: bool) -> Result<Plan> {
        self.with_bans(|why| match ignore {
            true => {
                eprintln!("warning: {why}");
                Ok(())
            }
            false => Err(Error::MissingKernelFeature { feature: "irqbalance's socket".into(), detail: why }),
        })
    }

    /// [`Plan::beside_irqbalance`] for a hold that follows the machine
    /// (`--follow`, the installed unit): an irqbalance that started since
    /// (restarted, upgraded: a new pid, its own banned list) is asked in
    /// turn, before the drift it caused is set again; one without a socket
    /// is passed over in silence (the drift then names it). The changes.
    pub fn beside_new_irqbalance(self) -> Vec<Planned> {
        let changes = self.changes.clone();
        self.with_bans(|_| Ok(())).map_or(changes, |p| p.changes)
    }

    fn with_bans(mut self, socketless: impl Fn(String) -> Result<()>) -> Result<Plan> {
        let mut moved: Vec<u32> = self
            .changes
            .iter()
            .filter_map(|p| match p.object {
                Object::IrqAffinity { irq, .. } => Some(irq),
                _ => None,
            })
            .collect();
        moved.sort_unstable();
        if moved.is_empty() {
            return Ok(self);
        }
        let mut first = Vec::new();
        for daemon in irqlab_host::irqbalance::running() {
            if !daemon.has_socket() {
                let why = format!(
                    "irqbalance (pid {}) runs and would move IRQs {} back at its next pass; irqlab asks it to leave them alone \
                     through its socket, {}, which is not there (irqbalance before 1.7, or no /run/irqbalance): stop irqbalance \
                     for the hold, or pass --ignore-irqbalance",
                    daemon.pid,
                    irqlab_host::irqbalance::format_irqs(&moved),
                    daemon.socket().display()
                );
                socketless(why)?;
                continue;
            }
            let banned = daemon.banned()?;
            let mut wanted = banned.clone();
            wanted.extend(&moved);
            wanted.sort_unstable();
            wanted.dedup();
            if wanted != banned {
                first.push(Planned {
                    setting: "irqbalance".into(),
                    object: Object::IrqbalanceBans { pid: daemon.pid },
                    new: Value::Irqs { irqs: wanted },
                    because: Some("irqbalance runs: it leaves the IRQs irqlab moves where irqlab puts them".into()),
                    may_be_refused: false,
                });
            }
        }
        first.append(&mut self.changes);
        self.changes = first;
        Ok(self)
    }
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
pub(crate) fn fixed_policy(text: &str) -> Result<sched::SchedAttr> {
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
    /// `absent` (its MATCH names no thread now: nothing set); told while
    /// held, not kept in the report: `drift` (see `Report::drifts`).
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
    fn absent(setting: String, new: &str, why: String, because: Option<String>) -> Row {
        Row {
            setting,
            object: String::new(),
            old: String::new(),
            new: new.to_string(),
            effective: None,
            outcome: "absent",
            why: Some(why),
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
    /// Held values something else changed while held, as found (set
    /// again with `follow`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub drifts: Vec<Drift>,
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
        drifts: Vec::new(),
    })
}

/// A value something else changed while the profile held it (set back
/// with `--follow`).
pub use irqlab_host::journal::hold::Drift;

/// One change in force: its row's index and its journal guard.
struct Held {
    row: usize,
    applied: journal::Applied,
}

/// Applies every change (all or nothing), holds them until `stop` or the
/// duration, then restores them newest first, or keeps them (`persist`);
/// `on_applied` is told each row as it takes effect. With `follow`
/// (`Config::follow`, what `control install`'s unit runs) the hold checks
/// every second for threads that now match (their changes, from
/// `follow`, are applied and held too) and for held values something
/// else changed, which are set again and reported as drift.
pub fn apply(
    config: &Config,
    plan: Plan,
    follow: Option<&dyn Fn() -> Vec<Planned>>,
    stop: &AtomicBool,
    mut on_applied: impl FnMut(&Row),
) -> Result<Report> {
    privilege::require(&[Capability::SysNice, Capability::SysAdmin], "set thread policies and IRQ affinities")?;
    let mut held: Vec<Held> = Vec::new();
    let mut rows: Vec<(Row, Object)> = Vec::new();
    for row in &plan.absent {
        on_applied(row);
    }
    for p in plan.changes {
        match apply_one(p, &mut rows, &mut on_applied) {
            Ok(Some(applied)) => held.push(Held { row: rows.len() - 1, applied }),
            Ok(None) => {}
            Err((e, what)) => {
                // All or nothing: what was applied goes back, newest first.
                let undone = match held.len() {
                    0 => String::new(),
                    n => format!("; the {n} change(s) applied before it were undone"),
                };
                journal::restore_all(held.into_iter().map(|h| h.applied).collect())?;
                return Err(with_context(e, &format!("{what}{undone}")));
            }
        }
    }
    // x86 moves an IRQ when it next fires: give the busy ones a moment
    // before reading where the kernel delivers them.
    if rows.iter().any(|(_, o)| matches!(o, Object::IrqAffinity { .. })) {
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    for (row, object) in &mut rows {
        if row.outcome != "refused" {
            row.effective = effective_of(object);
        }
    }
    // Threads the profile itself brings (threaded NAPI's) are taken now,
    // before the profile is said to be in force.
    if let Some(follow) = follow {
        take_late_threads(follow, &mut rows, &mut held, &mut on_applied);
    }
    // Under systemd (`control install`'s unit is Type=notify) the units
    // ordered after irqlab's start once the profile is in force, not
    // while it is being applied. Without NOTIFY_SOCKET this does nothing.
    let status = format!("STATUS=holding {} setting(s)", held.len());
    let _ = sd_notify::notify(false, &[sd_notify::NotifyState::Ready, sd_notify::NotifyState::Custom(&status)]);
    // Read back every second: a drift is a row as it is found, set again
    // when following.
    let mut watch = hold::DriftWatch::new(false);
    let (held_ns, ended_by) = hold::wait_while(stop, config.duration_ns, config.persist, || {
        if !watch.due() {
            return None;
        }
        if let Some(follow) = follow {
            take_late_threads(follow, &mut rows, &mut held, &mut on_applied);
        }
        for h in &held {
            let Some(drift) = watch.check(&h.applied, follow.is_some()) else { continue };
            let mut row = rows[h.row].0.clone();
            row.outcome = "drift";
            row.why = Some(format!("found {}{}; {}", drift.found, drift.by_whom(), drift.outcome()));
            on_applied(&row);
        }
        None
    });
    let drifts = watch.drifts;
    let complete = ended_by.complete(config.duration_ns, 0);
    let indices: Vec<usize> = held.iter().map(|h| h.row).collect();
    let settled = hold::settle(held.into_iter().map(|h| h.applied).collect(), config.persist)?;
    let mut rows: Vec<Row> = rows.into_iter().map(|(row, _)| row).collect();
    for (i, s) in indices.into_iter().zip(settled) {
        rows[i].restored = s.restored;
        if !config.persist {
            rows[i].entry.clear();
        }
    }
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
        drifts,
    })
}

/// Applies the changes `follow` plans now for threads not yet held (late
/// threads: started after the plan, or brought by the profile itself).
fn take_late_threads(
    follow: &dyn Fn() -> Vec<Planned>,
    rows: &mut Vec<(Row, Object)>,
    held: &mut Vec<Held>,
    on_applied: &mut impl FnMut(&Row),
) {
    for p in follow() {
        if rows.iter().any(|(_, o)| *o == p.object) {
            continue;
        }
        match apply_one(p, rows, on_applied) {
            Ok(Some(applied)) => held.push(Held { row: rows.len() - 1, applied }),
            Ok(None) => {}
            // A late thread that exited between the walk and the change, or
            // one the kernel refuses: said, and the hold goes on.
            Err((e, what)) => eprintln!("warning: {what}: {e}"),
        }
    }
}

/// Applies one change, adding its row (told to `on_applied`): the guard
/// when it changed something, `None` when it was already so or the kernel
/// kept it (a wildcard's IRQ); the error with what was being changed.
fn apply_one(
    p: Planned,
    rows: &mut Vec<(Row, Object)>,
    on_applied: &mut impl FnMut(&Row),
) -> std::result::Result<Option<journal::Applied>, (Error, String)> {
    let what = format!("{} ({})", p.setting, p.object);
    let now = journal::read(&p.object).map_err(|e| (e, what.clone()))?;
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
        rows.push((row, p.object));
        return Ok(None);
    }
    match journal::apply(p.object.clone(), p.new.clone()) {
        Ok(a) => {
            // The journal read the value again when it took it: its
            // reading is the one a revert puts back.
            row.old = a.entry().old.to_string();
            row.entry = a.entry().id.clone();
            on_applied(&row);
            rows.push((row, p.object));
            Ok(Some(a))
        }
        Err(e @ Error::MissingKernelFeature { .. }) if p.may_be_refused => {
            row.outcome = "refused";
            row.why = Some(e.to_string());
            on_applied(&row);
            rows.push((row, p.object));
            Ok(None)
        }
        Err(e) => Err((e, what)),
    }
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
            let e = p.plan("p.toml", &text, false).unwrap_err();
            assert!(e.message.contains(says), "{e}");
            assert_eq!(e.location.as_ref().map(|l| l.line), Some(line), "{e:?}");
        }
    }

    #[test]
    fn settings_that_name_no_thread_as_surveyed_are_refused_together_unless_allowed() {
        let me = std::process::id();
        // A pid no thread has (beyond the largest pid_max), this process
        // named by more threads than surveyed, and pid 1 of another boot.
        let text = format!(
            "schema = \"irqlab/profile/v1\"\nboot_id = \"00000000-0000-0000-0000-000000000000\"\n\n\
             [[threads]]\nmatch = \"pid:4194304\"\npolicy = \"fifo:50\"\n\n\
             [[threads]]\nmatch = \"pid:{me}\"\npolicy = \"fifo:50\"\nsurveyed = 0\n\n\
             [[threads]]\nmatch = \"pid:1\"\npolicy = \"fifo:50\"\nthis_boot = true\n"
        );
        let p = Profile::parse("p.toml", &text).unwrap();
        let e = p.plan("p.toml", &text, false).unwrap_err();
        assert!(e.message.starts_with("3 setting(s)"), "{e}");
        assert!(e.message.contains("p.toml:5:9: MATCH pid:4194304"), "{e}");
        assert!(e.message.contains(&format!("p.toml:9:9: MATCH pid:{me} names 1 threads now")), "{e}");
        assert!(e.message.contains("p.toml:14:9: MATCH pid:1 is a pid of the boot surveyed"), "{e}");
        assert_eq!(e.location.as_ref().map(|l| l.line), Some(5));
        let plan = p.plan("p.toml", &text, true).unwrap();
        assert_eq!(plan.absent.len(), 3);
        assert!(plan.changes.is_empty());
        assert!(plan.absent.iter().all(|r| r.outcome == "absent"));
    }

    #[test]
    fn boot_options_are_checked_at_their_place_in_the_file() {
        let text = "schema = \"irqlab/profile/v1\"\n\n[boot]\ncmdline = \"nohz_full=0 fast=1\"\n";
        let p = Profile::parse("p.toml", text).unwrap();
        let e = p.plan("p.toml", text, false).unwrap_err();
        assert!(e.message.contains("`fast`: not one irqlab knows"), "{e}");
        assert_eq!(e.location.as_ref().map(|l| (l.line, l.col)), Some((4, 24)), "{e:?}");
        let text = text.replace(" fast=1", "").replace("[boot]", "[boot]\nbecause = { nohz_full = \"the tick\" }");
        let p = Profile::parse("p.toml", &text).unwrap();
        if boot::machine_cpus().unwrap().len() > 1 {
            let plan = p.plan("p.toml", &text, false).unwrap();
            assert_eq!(plan.boot.len(), 1);
            assert_eq!(p.boot_because("nohz_full"), Some("the tick"));
        }
        let again = Profile::parse("p.toml", &p.to_toml("again")).unwrap();
        assert_eq!(again.boot.unwrap().cmdline.get_ref(), "nohz_full=0");
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
