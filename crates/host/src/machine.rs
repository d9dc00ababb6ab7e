//! The machine a live measurement runs on: the kernel and the settings
//! that shape interference and latency, read from /proc, /sys and the
//! kernel configuration (never changed). Every live document records them
//! under `machine` ([`MachineContext`]); `irqlab doctor` lists them with
//! why each matters ([`Setting`]). Also the machine-wide readers other
//! modules share: whether the TSC is usable, /proc/stat's CPU times.
//!
//! Imports no measurement module (probe, latency, accounting): they import
//! this one, and `doctor` imports all of them.

use crate::rt_limit::{self, RtBandwidth};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io::Read;
use std::path::Path;

/// What a measurement document records of the machine it was taken on:
/// the kernel and the settings `irqlab doctor` shows, by name (no readiness
/// trials). Curves from two kernels can then be told apart by their files.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MachineContext {
    pub kernel: String,
    pub settings: BTreeMap<String, String>,
}

impl MachineContext {
    /// The context of this machine, now.
    pub fn read() -> MachineContext {
        MachineContext::of(&Machine::read())
    }

    /// The context of `machine`, its settings read now.
    pub fn of(machine: &Machine) -> MachineContext {
        MachineContext {
            kernel: machine.kernel(),
            settings: machine.settings().into_iter().map(|s| (s.name.to_string(), s.value)).collect(),
        }
    }
}

/// One kernel or machine setting that changes what is measured.
#[derive(Debug, Clone, Serialize)]
pub struct Setting {
    pub name: &'static str,
    pub value: String,
    /// Why it matters to interference and latency measurements.
    pub why: &'static str,
}

/// What the settings are read from, gathered once.
pub struct Machine {
    release: String,
    version: String,
    cmdline: String,
    /// The kernel's build configuration, when /proc/config.gz or
    /// /boot/config-<release> is readable.
    config: Option<String>,
    /// Read with the rest: it copies the whole kernel log and probes
    /// debugfs, too slow to repeat for every settings list.
    lockdown: Lockdown,
}

/// The processes (thread-group leaders) whose name is `comm`, by pid:
/// how a daemon that manages the same knobs is found running.
pub fn processes_named(comm: &str) -> Vec<i32> {
    let Ok(all) = procfs::process::all_processes() else { return Vec::new() };
    all.flatten().filter(|p| p.stat().is_ok_and(|s| s.comm == comm)).map(|p| p.pid).collect()
}

impl Machine {
    /// Reads the kernel's identity, command line, configuration and
    /// lockdown (mounts nothing).
    pub fn read() -> Machine {
        let release = read("/proc/sys/kernel/osrelease").unwrap_or_else(|| "unknown".into());
        let cmdline = read("/proc/cmdline").unwrap_or_default();
        let config = kernel_config(&release);
        let lockdown = Lockdown::read(config.as_deref(), &cmdline);
        Machine { version: read("/proc/sys/kernel/version").unwrap_or_default(), cmdline, config, lockdown, release }
    }

    /// Release and build string of the running kernel.
    pub fn kernel(&self) -> String {
        format!("{} {}", self.release, self.version)
    }

    /// `CONFIG_<key>`'s value ("y", "m", a number...); None when it is not
    /// set or the configuration is unknown.
    fn config(&self, key: &str) -> Option<&str> {
        config_value(self.config.as_deref()?, key)
    }

    /// The value of boot parameter `key` ("" for a bare flag).
    fn boot_param(&self, key: &str) -> Option<&str> {
        boot_param(&self.cmdline, key)
    }

    /// Every setting that shapes what the live commands measure, read now
    /// (the lockdown as read with the machine).
    pub fn settings(&self) -> Vec<Setting> {
        settings(self)
    }

    /// The kernel's lockdown and what it leaves of debugfs, as read with
    /// the machine.
    pub fn lockdown(&self) -> &Lockdown {
        &self.lockdown
    }

    /// The kernel's tick rate (CONFIG_HZ), when its configuration is readable.
    pub fn hz(&self) -> Option<u64> {
        self.config("HZ")?.parse().ok()
    }
}

fn settings(m: &Machine) -> Vec<Setting> {
    let lockdown = m.lockdown();
    vec![
        Setting {
            name: "preemption",
            value: preemption(m, lockdown),
            why: "how long a woken high-priority task can wait for the kernel to reach a preemption point",
        },
        Setting {
            name: "kernel lockdown",
            value: lockdown.describe(),
            why: "debugfs alone holds sched/features (HRTICK_DL: SCHED_DEADLINE runtimes enforced by an hrtimer, not the tick), \
                  sched/fair_server (the fair class's deadline server) and sched/preempt; under lockdown (integrity or \
                  confidentiality) every debugfs file refuses reads and writes",
        },
        Setting {
            name: "threaded IRQs",
            value: threaded_irqs(m),
            why: "device handlers as schedulable irq/ threads (the load-bounds paper's threaded kernel) or in hard-IRQ context",
        },
        Setting {
            name: "IRQ time accounting",
            value: match (m.config.is_some(), m.config("IRQ_TIME_ACCOUNTING")) {
                (_, Some("y")) => "on (CONFIG_IRQ_TIME_ACCOUNTING)".into(),
                (true, _) => "off: interrupt time is charged to the task it interrupted".into(),
                (false, _) => "unknown (no /proc/config.gz or /boot/config-*)".into(),
            },
            why: "off, Linux charges IRQ and softirq time to whoever ran (the process-aware paper); measure accounting's /PROC column shows it",
        },
        Setting {
            name: "tick",
            value: match m.config("HZ") {
                Some(hz) => format!(
                    "{hz} Hz{}",
                    if m.config("NO_HZ_FULL") == Some("y") {
                        ", stopped on nohz_full CPUs"
                    } else if m.config("NO_HZ_IDLE") == Some("y") {
                        ", stopped when idle"
                    } else {
                        ", periodic"
                    }
                ),
                None => "unknown (no kernel config)".into(),
            },
            why: "/proc charges CPU time a tick at a time, and every tick is a timer interrupt on a busy CPU",
        },
        Setting { name: "isolated CPUs", value: isolation(m), why: "CPUs kept free of other tasks, ticks or RCU callbacks for time-critical work" },
        Setting {
            name: "default IRQ affinity",
            value: read("/proc/irq/default_smp_affinity").map(|mask| format!("mask {mask}")).unwrap_or_else(|| "unknown".into()),
            why: "the CPUs new interrupts are steered to, and so whom they rob",
        },
        Setting {
            name: "RT throttling",
            value: rt_throttling(),
            why: "the throttle shows up as interference in a SCHED_FIFO probe (measure interference --lift-rt-limit lifts it for the run)",
        },
        Setting { name: "virtualised", value: virtualisation(), why: "a hypervisor takes CPU time that no kernel tracepoint sees (STEAL in measure accounting)" },
        Setting { name: "clock", value: clock_source(), why: "the probe samples the TSC; without constant and nonstop TSC it reads clock_gettime" },
        Setting {
            name: "idle states (cpu0)",
            value: idle_states(),
            why: "a wake-up from a deep state adds its exit latency to what is measured (measure latency holds /dev/cpu_dma_latency at 0)",
        },
        Setting {
            name: "CPU frequency governor",
            value: read("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor")
                .unwrap_or_else(|| "none (no cpufreq: fixed, or set by the host)".into()),
            why: "a changing clock changes what every handler costs",
        },
        Setting { name: "threaded NAPI", value: threaded_napi(), why: "receive work in napi/ kthreads that can be prioritised, instead of NET_RX softirq" },
        Setting {
            name: "NET_RX budget",
            value: format!(
                "{} packets or {} us per softirq run, backlog {} packets",
                read("/proc/sys/net/core/netdev_budget").unwrap_or_else(|| "?".into()),
                read("/proc/sys/net/core/netdev_budget_usecs").unwrap_or_else(|| "?".into()),
                read("/proc/sys/net/core/netdev_max_backlog").unwrap_or_else(|| "?".into()),
            ),
            why: "how much receive work one softirq run does before the rest waits for ksoftirqd",
        },
    ]
}

fn read(path: impl AsRef<Path>) -> Option<String> {
    std::fs::read_to_string(path).ok().map(|s| s.trim().to_string())
}

fn kernel_config(release: &str) -> Option<String> {
    if let Ok(file) = std::fs::File::open("/proc/config.gz") {
        let mut text = String::new();
        if flate2::read::GzDecoder::new(file).read_to_string(&mut text).is_ok() {
            return Some(text);
        }
    }
    std::fs::read_to_string(format!("/boot/config-{release}")).ok()
}

fn config_value<'a>(config: &'a str, key: &str) -> Option<&'a str> {
    let prefix = format!("CONFIG_{key}=");
    config.lines().find_map(|l| l.strip_prefix(prefix.as_str()))
}

fn boot_param<'a>(cmdline: &'a str, key: &str) -> Option<&'a str> {
    // Parameters after a lone "--" go to init, not to the kernel.
    cmdline.split_whitespace().take_while(|w| *w != "--").find_map(|w| match w.split_once('=') {
        Some((k, v)) if k == key => Some(v),
        None if w == key => Some(""),
        _ => None,
    })
}

fn preemption(m: &Machine, lockdown: &Lockdown) -> String {
    let modes = match &lockdown.debugfs {
        Debugfs::Readable { mount } => read(Path::new(mount).join("sched/preempt")),
        _ => None,
    };
    preemption_from(m, read("/sys/kernel/realtime").as_deref(), modes.as_deref(), &lockdown.debugfs_unread())
}

/// The preemption model from /sys/kernel/realtime and debugfs's
/// sched/preempt when the machine has them, else from the configuration,
/// boot options and version string. `unread`: why debugfs was not read
/// (the run-time mode shows only there).
fn preemption_from(m: &Machine, realtime: Option<&str>, debugfs_modes: Option<&str>, unread: &str) -> String {
    if realtime == Some("1") {
        return "PREEMPT_RT: fully preemptible, interrupt handlers threaded".into();
    }
    // debugfs shows the current mode of a dynamic kernel as "none (full) ...".
    if let Some(modes) = debugfs_modes {
        if let Some(current) = modes.split_whitespace().find(|w| w.starts_with('(')) {
            return format!("{} (dynamic, from debugfs)", current.trim_matches(['(', ')']));
        }
    }
    let built =
        [("PREEMPT_RT", "rt"), ("PREEMPT", "full"), ("PREEMPT_LAZY", "lazy"), ("PREEMPT_VOLUNTARY", "voluntary"), ("PREEMPT_NONE", "none")]
            .into_iter()
            .find(|(key, _)| m.config(key) == Some("y"))
            .map(|(_, mode)| mode);
    let dynamic = m.config("PREEMPT_DYNAMIC") == Some("y") || m.version.contains("PREEMPT_DYNAMIC");
    match (m.boot_param("preempt"), built, dynamic) {
        (Some(mode), _, true) => format!("{mode} (dynamic, boot option preempt={mode})"),
        (None, Some(mode), true) => {
            format!(
                "{mode} (dynamic, the built-in default); a change at run time would show only in debugfs's sched/preempt, unread: {unread}"
            )
        }
        (_, Some(mode), false) => mode.to_string(),
        (_, None, _) if m.version.contains("PREEMPT_RT") => "rt".into(),
        (_, None, true) => format!("dynamic, mode unknown (no kernel config); debugfs's sched/preempt unread: {unread}"),
        (_, None, false) => "unknown (no kernel config)".into(),
    }
}

/// Where securityfs shows the lockdown level ("none [integrity]
/// confidentiality"), when securityfs is mounted.
const SECURITYFS_LOCKDOWN: &str = "/sys/kernel/security/lockdown";

/// The kernel lockdown level (kernel_lockdown(7)). Integrity and
/// confidentiality both shut debugfs: its files refuse every open (EPERM).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum LockdownLevel {
    None,
    Integrity,
    Confidentiality,
    /// Locked down, the level not shown (at least integrity).
    LockedDown,
    Unknown,
}

impl LockdownLevel {
    fn parse(word: &str) -> Option<LockdownLevel> {
        match word {
            "none" => Some(LockdownLevel::None),
            "integrity" => Some(LockdownLevel::Integrity),
            "confidentiality" => Some(LockdownLevel::Confidentiality),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            LockdownLevel::None => "none",
            LockdownLevel::Integrity => "integrity",
            LockdownLevel::Confidentiality => "confidentiality",
            LockdownLevel::LockedDown => "integrity or confidentiality",
            LockdownLevel::Unknown => "unknown",
        }
    }

    /// Whether debugfs's files refuse reads and writes (None: unknown).
    pub fn shuts_debugfs(self) -> Option<bool> {
        match self {
            LockdownLevel::None => Some(false),
            LockdownLevel::Unknown => None,
            _ => Some(true),
        }
    }
}

/// debugfs as found, without mounting it.
#[derive(Debug, Clone, PartialEq)]
pub enum Debugfs {
    NotMounted,
    /// Mounted, and sched/features could be opened.
    Readable {
        mount: String,
    },
    /// Mounted, and opening sched/features failed with EPERM: lockdown.
    Refused {
        mount: String,
    },
    /// Mounted, and opening sched/features failed otherwise.
    Unreadable {
        mount: String,
        error: String,
    },
}

impl Debugfs {
    /// What opening `<mount>/sched/features` said.
    fn from_open(mount: &str, opened: std::io::Result<()>) -> Debugfs {
        let mount = mount.to_string();
        match opened {
            Ok(()) => Debugfs::Readable { mount },
            Err(e) if e.raw_os_error() == Some(libc::EPERM) => Debugfs::Refused { mount },
            Err(e) => Debugfs::Unreadable { mount, error: e.to_string() },
        }
    }
}

/// The kernel lockdown and debugfs: whether the scheduler knobs that only
/// debugfs holds (sched/features' HRTICK_DL, sched/fair_server,
/// sched/preempt) can be read or set here.
#[derive(Debug, Clone, PartialEq)]
pub struct Lockdown {
    pub level: LockdownLevel,
    /// Where the level was read.
    pub source: String,
    pub debugfs: Debugfs,
}

impl Lockdown {
    /// This machine's, now, given its kernel configuration and command
    /// line (mounts nothing).
    fn read(config: Option<&str>, cmdline: &str) -> Lockdown {
        let debugfs = debugfs_access();
        let securityfs = read(SECURITYFS_LOCKDOWN);
        let log = kernel_log();
        let (level, source) = lockdown_level(securityfs.as_deref(), log.as_deref(), config, cmdline, &debugfs);
        Lockdown { level, source, debugfs }
    }

    /// Whether debugfs's files refuse reads and writes (None: unknown).
    pub fn shuts_debugfs(&self) -> Option<bool> {
        match &self.debugfs {
            Debugfs::Refused { .. } => Some(true),
            Debugfs::Readable { .. } => Some(false),
            _ => self.level.shuts_debugfs(),
        }
    }

    /// Why debugfs's scheduler files were not read: "debugfs is locked
    /// down (lockdown=integrity)", "debugfs not mounted", ...
    pub fn debugfs_unread(&self) -> String {
        match (&self.debugfs, self.shuts_debugfs()) {
            (Debugfs::Readable { mount }, _) => format!("debugfs at {mount} readable"),
            (Debugfs::Unreadable { mount, error }, _) => format!("debugfs at {mount} not readable: {error}"),
            (_, Some(true)) => format!("debugfs is locked down (lockdown={})", self.level.name()),
            (_, _) => "debugfs not mounted".into(),
        }
    }

    /// The `kernel lockdown` setting's value.
    pub fn describe(&self) -> String {
        let consequence = match self.shuts_debugfs() {
            Some(true) => {
                ": debugfs's sched/features (HRTICK_DL), sched/fair_server and sched/preempt cannot be read or set, so \
                 SCHED_DEADLINE runtimes are enforced at the tick"
            }
            Some(false) => ": debugfs's scheduler knobs are open to root",
            None => "",
        };
        let debugfs = match &self.debugfs {
            Debugfs::NotMounted => "debugfs not mounted".to_string(),
            Debugfs::Readable { mount } => format!("debugfs at {mount}, readable"),
            Debugfs::Refused { mount } => format!("debugfs at {mount}, its files refuse reads (EPERM)"),
            Debugfs::Unreadable { mount, error } => format!("debugfs at {mount}, not readable: {error}"),
        };
        format!("{} ({}){consequence}; {debugfs}", self.level.name(), self.source)
    }
}

/// The bracketed (current) level of securityfs's lockdown file.
fn securityfs_level(text: &str) -> Option<LockdownLevel> {
    text.split_whitespace().find_map(|w| w.strip_prefix('[')?.strip_suffix(']')).and_then(LockdownLevel::parse)
}

/// What the kernel log says of lockdown.
#[derive(Debug, Default, PartialEq)]
struct LogLockdown {
    /// Each "Kernel is locked down from <where>" message's where.
    locked_from: Vec<String>,
    /// "Lockdown: <comm>: debugfs access is restricted" messages.
    debugfs_refusals: usize,
    /// Whether the log reaches back to boot ("Linux version ...").
    from_boot: bool,
}

/// Reads /dev/kmsg records ("6,123,104895,-;text") or dmesg/syslog(2)
/// lines ("<5>[    0.104895] text"): the text after the prefix decides.
fn log_lockdown(log: &str) -> LogLockdown {
    let mut found = LogLockdown::default();
    for line in log.lines() {
        if let Some((_, rest)) = line.split_once("Kernel is locked down from ") {
            found.locked_from.push(rest.split(';').next().unwrap_or(rest).trim().to_string());
        } else if line.contains("Lockdown: ") && line.contains(": debugfs access is restricted") {
            found.debugfs_refusals += 1;
        } else if line.contains("Linux version ") {
            found.from_boot = true;
        }
    }
    found
}

/// The lockdown level and where it was read: securityfs's file when
/// mounted; else the kernel log's "locked down from" messages (their level
/// from CONFIG_LOCK_DOWN_KERNEL_FORCE_* or the lockdown= boot option);
/// else what debugfs did; else a kernel built without the lockdown LSM, or
/// a log since boot with no lockdown message in it; else (log unreadable or
/// wrapped) CONFIG_LOCK_DOWN_KERNEL_FORCE_* or the lockdown= boot option.
fn lockdown_level(
    securityfs: Option<&str>,
    log: Option<&str>,
    config: Option<&str>,
    cmdline: &str,
    debugfs: &Debugfs,
) -> (LockdownLevel, String) {
    if let Some(level) = securityfs.and_then(securityfs_level) {
        return (level, SECURITYFS_LOCKDOWN.into());
    }
    let have_log = log.is_some();
    let log = log.map(log_lockdown).unwrap_or_default();
    if !log.locked_from.is_empty() {
        let mut sources = Vec::new();
        let mut level = LockdownLevel::LockedDown;
        for from in &log.locked_from {
            let (stated, why) = match from.as_str() {
                "Kernel configuration" => forced_level(config).unzip(),
                "command line" => {
                    let option = boot_param(cmdline, "lockdown");
                    (option.and_then(LockdownLevel::parse), option.map(|l| format!("lockdown={l}")))
                }
                _ => (None, None),
            };
            sources.push(match why {
                Some(why) => format!("\"locked down from {from}\", {why}"),
                None => format!("\"locked down from {from}\""),
            });
            // Each message raised the level (the kernel never lowers it).
            level = match (stated, level) {
                (Some(stated), LockdownLevel::LockedDown) => stated,
                (Some(stated), known) => stated.max(known),
                (None, LockdownLevel::Integrity) => LockdownLevel::Confidentiality,
                (None, known) => known,
            };
        }
        return (level, format!("kernel log {}", sources.join("; ")));
    }
    match debugfs {
        Debugfs::Readable { .. } => return (LockdownLevel::None, "debugfs readable".into()),
        Debugfs::Refused { .. } => return (LockdownLevel::LockedDown, "debugfs refuses reads".into()),
        _ => {}
    }
    if log.debugfs_refusals > 0 {
        return (LockdownLevel::LockedDown, "kernel log: \"debugfs access is restricted\"".into());
    }
    if config.is_some_and(|c| config_value(c, "SECURITY_LOCKDOWN_LSM") != Some("y")) {
        return (LockdownLevel::None, "built without CONFIG_SECURITY_LOCKDOWN_LSM".into());
    }
    if log.from_boot {
        return (LockdownLevel::None, "no lockdown message in the kernel log since boot".into());
    }
    // The log unreadable or wrapped: what the kernel was told to do.
    if let Some(forced) = forced_level(config) {
        return forced;
    }
    if let Some(level) = boot_param(cmdline, "lockdown").and_then(LockdownLevel::parse) {
        return (level, format!("boot option lockdown={}", level.name()));
    }
    let log = if have_log { "no lockdown message in the kernel log" } else { "kernel log not readable" };
    (LockdownLevel::Unknown, format!("no {SECURITYFS_LOCKDOWN}, {log}"))
}

/// The level CONFIG_LOCK_DOWN_KERNEL_FORCE_* sets at boot, and its name.
fn forced_level(config: Option<&str>) -> Option<(LockdownLevel, String)> {
    let config = config?;
    [
        (LockdownLevel::Confidentiality, "LOCK_DOWN_KERNEL_FORCE_CONFIDENTIALITY"),
        (LockdownLevel::Integrity, "LOCK_DOWN_KERNEL_FORCE_INTEGRITY"),
    ]
    .into_iter()
    .find(|(_, key)| config_value(config, key) == Some("y"))
    .map(|(level, key)| (level, format!("CONFIG_{key}")))
}

/// The first debugfs mount point in /proc/mounts' text.
fn debugfs_mount(mounts: &str) -> Option<&str> {
    mounts.lines().find_map(|l| {
        let mut fields = l.split_whitespace();
        let (_, mount, fstype) = (fields.next()?, fields.next()?, fields.next()?);
        (fstype == "debugfs").then_some(mount)
    })
}

/// Whether debugfs is mounted and its scheduler files open (a read-only
/// open of sched/features; mounts nothing).
fn debugfs_access() -> Debugfs {
    let mounts = read("/proc/mounts").unwrap_or_default();
    let Some(mount) = debugfs_mount(&mounts) else { return Debugfs::NotMounted };
    let mount = mount.replace("\\040", " ");
    Debugfs::from_open(&mount, std::fs::File::open(Path::new(&mount).join("sched/features")).map(drop))
}

/// The kernel log as far back as its buffer goes: /dev/kmsg read without
/// blocking (every record still held, none consumed), else syslog(2)'s
/// READ_ALL (what dmesg prints). None when neither is permitted.
fn kernel_log() -> Option<String> {
    use std::os::unix::fs::OpenOptionsExt;
    let mut log = String::new();
    if let Ok(mut kmsg) = std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK).open("/dev/kmsg") {
        let mut record = vec![0u8; 16 * 1024];
        // One record per read; EAGAIN at the end, EPIPE for records
        // overwritten while reading. The bound is a guard only.
        for _ in 0..1_000_000 {
            match kmsg.read(&mut record) {
                Ok(0) => break,
                Ok(n) => {
                    log.push_str(&String::from_utf8_lossy(&record[..n]));
                    if !log.ends_with('\n') {
                        log.push('\n');
                    }
                }
                Err(e) if e.raw_os_error() == Some(libc::EPIPE) || e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(_) => break,
            }
        }
        if !log.is_empty() {
            return Some(log);
        }
    }
    const SYSLOG_ACTION_READ_ALL: libc::c_int = 3;
    const SYSLOG_ACTION_SIZE_BUFFER: libc::c_int = 10;
    // SAFETY: SIZE_BUFFER ignores the buffer; READ_ALL writes at most
    // `size` bytes into a buffer of that length.
    let size = unsafe { libc::klogctl(SYSLOG_ACTION_SIZE_BUFFER, std::ptr::null_mut(), 0) };
    if size <= 0 {
        return None;
    }
    let mut buf = vec![0u8; size as usize];
    let n = unsafe { libc::klogctl(SYSLOG_ACTION_READ_ALL, buf.as_mut_ptr().cast(), size) };
    (n > 0).then(|| String::from_utf8_lossy(&buf[..n as usize]).into_owned())
}

fn rt_throttling() -> String {
    if let Some(not_read) = rt_runtime_without_rebuild() {
        return not_read;
    }
    let bw = match RtBandwidth::read() {
        Ok(bw) => bw,
        Err(e) => return format!("unknown: {e}"),
    };
    if bw.limits() {
        return format!(
            "{} of every {} us for RT tasks: a spinning SCHED_FIFO task is stopped {} ms per period",
            bw.runtime_us,
            bw.period_us,
            bw.throttled_ns_per_period() / 1_000_000
        );
    }
    match (rt_limit::lifted_by_irqlab(), rt_limit::abandoned_lift()) {
        (Some(original), _) => format!("off for now: lifted by a running irqlab measurement (sched_rt_runtime_us {original} otherwise)"),
        (None, Some(original)) => format!(
            "off: left lifted by an irqlab run that was killed; the next `irqlab measure interference` restores sched_rt_runtime_us {original}"
        ),
        (None, None) => "off (sched_rt_runtime_us = -1)".into(),
    }
}

/// On a kernel with a fair server whose bandwidth the kernel still
/// accounts, the RT limit is not read: reading sched_rt_runtime_us there
/// rebuilds the sched domains and makes the kernel forget the servers'
/// bandwidth (`journal::sched_knobs::LostServerBandwidth`), and no other
/// file shows it without RT group scheduling. `None`: read the sysctl (no
/// fair server, debugfs not mounted, or the share already forgotten).
pub(crate) fn rt_runtime_without_rebuild() -> Option<String> {
    use crate::journal::sched_knobs::{debugfs_mount, lost_server_bandwidth_at};
    let mount = debugfs_mount()?;
    if !mount.join("sched/fair_server/cpu0").is_dir() || lost_server_bandwidth_at(&mount, 0).is_some() {
        return None;
    }
    Some(
        "not read: on this kernel (it has fair servers) a read of kernel.sched_rt_runtime_us makes the kernel forget the fair \
         servers' deadline bandwidth, after which it refuses to lower one; `irqlab measure interference` reads it when it runs"
            .into(),
    )
}

fn threaded_irqs(m: &Machine) -> String {
    let threads = crate::procs::named("irq/").len();
    let forced = m.boot_param("threadirqs").is_some() || read("/sys/kernel/realtime").as_deref() == Some("1");
    format!("{}, {threads} irq/ threads running", if forced { "forced (threadirqs)" } else { "only where a driver asks" })
}

fn isolation(m: &Machine) -> String {
    // An empty file, or "(null)" (nohz_full on a kernel booted without it), is none.
    let list = |path: &str| read(path).filter(|s| !s.is_empty() && s != "(null)").unwrap_or_else(|| "none".into());
    let mut parts = vec![
        format!("isolated {}", list("/sys/devices/system/cpu/isolated")),
        format!("nohz_full {}", list("/sys/devices/system/cpu/nohz_full")),
    ];
    if let Some(cpus) = m.boot_param("rcu_nocbs") {
        parts.push(format!("rcu_nocbs {cpus}"));
    }
    parts.join(", ")
}

fn virtualisation() -> String {
    let cpuinfo = read("/proc/cpuinfo").unwrap_or_default();
    let flagged = cpuinfo.lines().filter(|l| l.starts_with("flags")).any(|l| l.split_whitespace().any(|f| f == "hypervisor"));
    if !flagged {
        return "no hypervisor flag (bare metal)".into();
    }
    let steal_s = cpu_time_ns(None, &[CpuTime::Steal]) as f64 / 1e9;
    format!("yes (hypervisor flag); {steal_s:.1} s stolen since boot")
}

fn clock_source() -> String {
    let source = read("/sys/devices/system/clocksource/clocksource0/current_clocksource").unwrap_or_else(|| "unknown".into());
    match tsc_usable() {
        Ok(()) => format!("clocksource {source}; TSC constant and nonstop"),
        Err(why) => format!("clocksource {source}; TSC not usable: {why}"),
    }
}

fn idle_states() -> String {
    let driver = read("/sys/devices/system/cpu/cpuidle/current_driver");
    let dir = Path::new("/sys/devices/system/cpu/cpu0/cpuidle");
    let mut states: Vec<(u32, String)> = std::fs::read_dir(dir)
        .map(|d| {
            d.flatten()
                .filter_map(|e| {
                    let index = e.file_name().to_string_lossy().strip_prefix("state")?.parse().ok()?;
                    let name = read(e.path().join("name"))?;
                    let latency = read(e.path().join("latency")).unwrap_or_else(|| "?".into());
                    let disabled = read(e.path().join("disable")).as_deref() == Some("1");
                    Some((index, format!("{name} {latency} us{}", if disabled { " (disabled)" } else { "" })))
                })
                .collect()
        })
        .unwrap_or_default();
    states.sort();
    match (driver, states.is_empty()) {
        (None, true) => "no cpuidle (the CPU halts or polls as the kernel's idle loop decides)".into(),
        (driver, _) => format!(
            "{}: {}",
            driver.unwrap_or_else(|| "no driver".into()),
            states.into_iter().map(|(_, s)| s).collect::<Vec<_>>().join(", ")
        ),
    }
}

fn threaded_napi() -> String {
    let mut devices: Vec<String> = std::fs::read_dir("/sys/class/net")
        .map(|d| {
            d.flatten()
                .filter_map(|e| {
                    let name = e.file_name().to_string_lossy().into_owned();
                    let threaded = read(e.path().join("threaded"))?;
                    (name != "lo").then(|| format!("{name} {}", if threaded == "0" { "off" } else { "on" }))
                })
                .collect()
        })
        .unwrap_or_default();
    devices.sort();
    if devices.is_empty() {
        "no network devices with NAPI".into()
    } else {
        devices.join(", ")
    }
}

/// Whether the TSC can be used, and if not, why.
pub fn tsc_usable() -> Result<(), String> {
    if !cfg!(target_arch = "x86_64") {
        return Err("not an x86_64 machine".into());
    }
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").map_err(|e| format!("cannot read /proc/cpuinfo: {e}"))?;
    tsc_flags_ok(&cpuinfo)
}

fn tsc_flags_ok(cpuinfo: &str) -> Result<(), String> {
    let flags = cpuinfo.lines().find(|l| l.starts_with("flags")).unwrap_or("");
    let has = |f: &str| flags.split_whitespace().any(|w| w == f);
    match (has("constant_tsc"), has("nonstop_tsc")) {
        (true, true) => Ok(()),
        (false, _) => Err("the CPU lacks constant_tsc (TSC rate changes with frequency)".into()),
        (_, false) => Err("the CPU lacks nonstop_tsc (TSC stops in idle states)".into()),
    }
}

/// Clock ticks per second, the unit of utime/stime.
pub fn ticks_per_second() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if hz > 0 {
        hz as u64
    } else {
        100
    }
}

/// Columns of a CPU line of /proc/stat, in the kernel's order.
#[derive(Debug, Clone, Copy)]
pub enum CpuTime {
    User = 0,
    Nice,
    System,
    Idle,
    Iowait,
    Irq,
    Softirq,
    Steal,
}

/// The sum of `columns` of /proc/stat's line for `cpu` (None: the line of
/// all CPUs), in ns; 0 when the line or a column is missing.
pub fn cpu_time_ns(cpu: Option<usize>, columns: &[CpuTime]) -> u64 {
    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let name = cpu.map_or("cpu".to_string(), |c| format!("cpu{c}"));
    let Some(line) = stat.lines().find(|l| l.split_whitespace().next() == Some(name.as_str())) else { return 0 };
    let fields: Vec<u64> = line.split_whitespace().skip(1).map(|v| v.parse().unwrap_or(0)).collect();
    let ticks: u64 = columns.iter().map(|&c| fields.get(c as usize).copied().unwrap_or(0)).sum();
    ticks * 1_000_000_000 / ticks_per_second()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_values_and_unset_options() {
        let config = "# comment\nCONFIG_PREEMPT=y\n# CONFIG_PREEMPT_RT is not set\nCONFIG_HZ=1000\n";
        assert_eq!(config_value(config, "PREEMPT"), Some("y"));
        assert_eq!(config_value(config, "PREEMPT_RT"), None);
        assert_eq!(config_value(config, "HZ"), Some("1000"));
        // A key is not a prefix match.
        assert_eq!(config_value(config, "PRE"), None);
    }

    #[test]
    fn boot_params_stop_at_init_arguments() {
        let cmdline = "console=ttyS0 threadirqs isolcpus=2-3 preempt=full -- --init-flag preempt=none";
        assert_eq!(boot_param(cmdline, "threadirqs"), Some(""));
        assert_eq!(boot_param(cmdline, "preempt"), Some("full"));
        assert_eq!(boot_param(cmdline, "isolcpus"), Some("2-3"));
        assert_eq!(boot_param(cmdline, "nohz_full"), None);
        assert_eq!(boot_param("quiet -- threadirqs", "threadirqs"), None);
    }

    #[test]
    fn preemption_from_config_and_boot_option() {
        let machine = |config: &str, cmdline: &str, version: &str| Machine {
            release: "6.1".into(),
            version: version.into(),
            cmdline: cmdline.into(),
            config: Some(config.into()),
            lockdown: Lockdown { level: LockdownLevel::Unknown, source: "?".into(), debugfs: Debugfs::NotMounted },
        };
        let preemption = |m: &Machine| preemption_from(m, None, None, "debugfs not mounted");
        assert_eq!(preemption(&machine("CONFIG_PREEMPT_VOLUNTARY=y\n", "", "#1 SMP")), "voluntary");
        let dynamic = "CONFIG_PREEMPT_VOLUNTARY=y\nCONFIG_PREEMPT_DYNAMIC=y\n";
        assert!(preemption(&machine(dynamic, "preempt=full", "#1 SMP PREEMPT_DYNAMIC")).starts_with("full (dynamic, boot option"));
        assert!(preemption(&machine(dynamic, "", "#1 SMP PREEMPT_DYNAMIC")).starts_with("voluntary (dynamic, the built-in default"));
        // Why debugfs was not read is said.
        let unread =
            preemption_from(&machine(dynamic, "", "#1 SMP PREEMPT_DYNAMIC"), None, None, "debugfs is locked down (lockdown=integrity)");
        assert!(unread.ends_with("sched/preempt, unread: debugfs is locked down (lockdown=integrity)"), "{unread}");
        assert_eq!(preemption(&machine("", "", "#1 SMP PREEMPT_RT")), "rt");
        // debugfs's current mode and /sys/kernel/realtime decide before the
        // configuration.
        let m = machine(dynamic, "preempt=full", "#1 SMP PREEMPT_DYNAMIC");
        assert_eq!(preemption_from(&m, None, Some("none voluntary (full) lazy\n"), ""), "full (dynamic, from debugfs)");
        assert_eq!(preemption_from(&m, Some("0"), Some("(none) voluntary full\n"), ""), "none (dynamic, from debugfs)");
        assert!(preemption_from(&m, Some("1"), Some("none (voluntary) full"), "").starts_with("PREEMPT_RT"));
    }

    #[test]
    fn lockdown_level_from_securityfs() {
        assert_eq!(securityfs_level("none [integrity] confidentiality\n"), Some(LockdownLevel::Integrity));
        assert_eq!(securityfs_level("[none] integrity confidentiality"), Some(LockdownLevel::None));
        assert_eq!(securityfs_level("none integrity [confidentiality]"), Some(LockdownLevel::Confidentiality));
        assert_eq!(securityfs_level(""), None);
        // The file decides over everything else.
        let (level, source) = lockdown_level(Some("none [integrity] confidentiality"), Some(""), None, "", &Debugfs::NotMounted);
        assert_eq!((level, source.as_str()), (LockdownLevel::Integrity, SECURITYFS_LOCKDOWN));
    }

    #[test]
    fn kernel_log_lockdown_messages() {
        // /dev/kmsg records and dmesg lines alike.
        let kmsg = "6,0,0,-;Linux version 6.18.44 (builder@sandboxing) #1 SMP PREEMPT_DYNAMIC\n\
                    5,61,104895,-;Kernel is locked down from Kernel configuration; see man kernel_lockdown.7\n\
                    6,62,254797,-;LSM: initializing lsm=lockdown,capability,landlock,bpf\n\
                    5,900,50494071815,-;Lockdown: cat: debugfs access is restricted; see man kernel_lockdown.7\n\
                    \x20SUBSYSTEM=lockdown\n";
        let log = log_lockdown(kmsg);
        assert_eq!(log.locked_from, ["Kernel configuration"]);
        assert_eq!(log.debugfs_refusals, 1);
        assert!(log.from_boot);
        let dmesg = "[    0.104895] Kernel is locked down from command line; see man kernel_lockdown.7\n\
                     [50495.909932] Lockdown: irqlab: debugfs access is restricted; see man kernel_lockdown.7\n\
                     [50495.913924] Lockdown: cat: debugfs access is restricted; see man kernel_lockdown.7\n";
        let log = log_lockdown(dmesg);
        assert_eq!(log.locked_from, ["command line"]);
        assert_eq!(log.debugfs_refusals, 2);
        assert!(!log.from_boot);
        // Other lockdown refusals are not debugfs's.
        assert_eq!(log_lockdown("Lockdown: x: unsigned module loading is restricted\n"), LogLockdown::default());
    }

    #[test]
    fn lockdown_level_from_the_kernel_log_and_its_cause() {
        let none = Debugfs::NotMounted;
        let forced = "CONFIG_SECURITY_LOCKDOWN_LSM=y\nCONFIG_LOCK_DOWN_KERNEL_FORCE_INTEGRITY=y\n";
        let boot = "[0.000000] Linux version 6.18\n[0.104895] Kernel is locked down from Kernel configuration; see man\n";
        let (level, source) = lockdown_level(None, Some(boot), Some(forced), "", &none);
        assert_eq!(level, LockdownLevel::Integrity);
        assert!(source.contains("CONFIG_LOCK_DOWN_KERNEL_FORCE_INTEGRITY"), "{source}");
        // The configuration unknown: locked down, level not known.
        assert_eq!(lockdown_level(None, Some(boot), None, "", &none).0, LockdownLevel::LockedDown);
        // The boot option gives the level of "from command line".
        let cmdline = "[0.1] Kernel is locked down from command line; see man\n";
        assert_eq!(lockdown_level(None, Some(cmdline), None, "quiet lockdown=confidentiality", &none).0, LockdownLevel::Confidentiality);
        // A later raise through securityfs from integrity can only be to
        // confidentiality.
        let raised = format!("{boot}[9.0] Kernel is locked down from securityfs; see man\n");
        assert_eq!(lockdown_level(None, Some(&raised), Some(forced), "", &none).0, LockdownLevel::Confidentiality);
        // Only refusals in the log, or debugfs refusing: locked down.
        let refusal = "[5.0] Lockdown: cat: debugfs access is restricted; see man kernel_lockdown.7\n";
        assert_eq!(lockdown_level(None, Some(refusal), None, "", &none).0, LockdownLevel::LockedDown);
        let refused = Debugfs::Refused { mount: "/sys/kernel/debug".into() };
        assert_eq!(lockdown_level(None, None, None, "", &refused).0, LockdownLevel::LockedDown);
        let readable = Debugfs::Readable { mount: "/sys/kernel/debug".into() };
        assert_eq!(lockdown_level(None, None, None, "", &readable).0, LockdownLevel::None);
        // No lockdown built, or a log since boot without a message: none.
        assert_eq!(lockdown_level(None, None, Some("CONFIG_HZ=250\n"), "", &none).0, LockdownLevel::None);
        assert_eq!(lockdown_level(None, Some("[0.0] Linux version 6.18\n"), Some(forced), "", &none).0, LockdownLevel::None);
        // The log unreadable or wrapped: the configuration's forced level,
        // or the boot option.
        let (level, source) = lockdown_level(None, None, Some(forced), "", &none);
        assert_eq!((level, source.as_str()), (LockdownLevel::Integrity, "CONFIG_LOCK_DOWN_KERNEL_FORCE_INTEGRITY"));
        let lsm = Some("CONFIG_SECURITY_LOCKDOWN_LSM=y\n");
        assert_eq!(lockdown_level(None, Some("[9.0] late\n"), lsm, "lockdown=confidentiality", &none).0, LockdownLevel::Confidentiality);
        // Nothing to go by.
        let (level, source) = lockdown_level(None, None, lsm, "", &none);
        assert_eq!(level, LockdownLevel::Unknown);
        assert!(source.ends_with("kernel log not readable"), "{source}");
        assert_eq!(lockdown_level(None, Some("[9.0] late message\n"), None, "", &none).0, LockdownLevel::Unknown);
    }

    #[test]
    fn debugfs_mount_and_access() {
        let mounts = "proc /proc proc rw 0 0\nnone /sys/kernel/debug debugfs rw,relatime 0 0\n";
        assert_eq!(debugfs_mount(mounts), Some("/sys/kernel/debug"));
        assert_eq!(debugfs_mount("tracefs /sys/kernel/tracing tracefs rw 0 0\n"), None);
        let eperm = Debugfs::from_open("/d", Err(std::io::Error::from_raw_os_error(libc::EPERM)));
        assert_eq!(eperm, Debugfs::Refused { mount: "/d".into() });
        assert!(matches!(Debugfs::from_open("/d", Err(std::io::Error::from_raw_os_error(libc::ENOENT))), Debugfs::Unreadable { .. }));
        assert_eq!(Debugfs::from_open("/d", Ok(())), Debugfs::Readable { mount: "/d".into() });
    }

    #[test]
    fn lockdown_descriptions() {
        let locked = Lockdown { level: LockdownLevel::Integrity, source: "kernel log".into(), debugfs: Debugfs::NotMounted };
        assert_eq!(locked.shuts_debugfs(), Some(true));
        assert_eq!(locked.debugfs_unread(), "debugfs is locked down (lockdown=integrity)");
        let text = locked.describe();
        assert!(text.starts_with("integrity (kernel log): debugfs's sched/features (HRTICK_DL)"), "{text}");
        assert!(text.ends_with("at the tick; debugfs not mounted"), "{text}");
        // Unknown level: debugfs refusing decides.
        let refused =
            Lockdown { level: LockdownLevel::Unknown, source: "?".into(), debugfs: Debugfs::Refused { mount: "/sys/kernel/debug".into() } };
        assert_eq!(refused.shuts_debugfs(), Some(true));
        let open = Lockdown { level: LockdownLevel::None, source: "?".into(), debugfs: Debugfs::NotMounted };
        assert_eq!(open.debugfs_unread(), "debugfs not mounted");
        assert!(!open.describe().contains("cannot"));
        let unknown = Lockdown { level: LockdownLevel::Unknown, source: "?".into(), debugfs: Debugfs::NotMounted };
        assert_eq!(unknown.shuts_debugfs(), None);
        assert_eq!(unknown.debugfs_unread(), "debugfs not mounted");
    }

    #[test]
    fn tsc_flags_are_required() {
        assert!(tsc_flags_ok("flags\t: fpu constant_tsc nonstop_tsc rdtscp\n").is_ok());
        assert!(tsc_flags_ok("flags\t: fpu constant_tsc\n").unwrap_err().contains("nonstop_tsc"));
        assert!(tsc_flags_ok("flags\t: fpu\n").unwrap_err().contains("constant_tsc"));
    }
}
