//! The scheduler's debugfs knobs as journalled controls: a feature of
//! `sched/features` (`HRTICK_DL`: SCHED_DEADLINE runtimes enforced by an
//! hrtimer instead of the tick) and the fair class's deadline server
//! (`sched/fair_server/cpuN/{runtime,period}`, Linux 6.12+). debugfs is the
//! only place the kernel offers them, so:
//! - a kernel in lockdown (integrity or confidentiality) refuses them: exit
//!   3 naming the level, before anything is changed;
//! - debugfs is mounted at [`DEFAULT_MOUNT`] when it is not mounted anywhere,
//!   as a journal object of its own ([`Object::DebugfsMount`]), so it is
//!   unmounted again on every exit path and named after a kill -9;
//! - a knob the kernel lacks (no `sched/fair_server` before 6.12) is exit 3
//!   naming the file.
//!
//! The journal's read and write of a knob find debugfs themselves and, when
//! it is not mounted (a leftover reverted after its mount's entry), mount it
//! for that one access: a revert never depends on another entry's order.
//! The commands that hold them (`control sched-feature`, `control
//! fair-server`) are controls like the others: `irqlab_control::sched_knobs`.

use crate::error::{Error, Result};
use crate::journal::{self, Applied, Object, Value};
use crate::privilege::{self, Capability};
use serde::Serialize;
use std::ffi::CString;
use std::path::{Path, PathBuf};

/// Where debugfs goes when irqlab mounts it (where every distribution has it).
pub const DEFAULT_MOUNT: &str = "/sys/kernel/debug";

/// The kernel's bounds on a fair server's period
/// (kernel/sched/debug.c, `fair_server_period_{min,max}`: 100 us and 2^22 us).
pub const FAIR_SERVER_PERIOD_MIN_NS: u64 = 100_000;
pub const FAIR_SERVER_PERIOD_MAX_NS: u64 = (1 << 22) * 1_000;

/// debugfs's mount point in /proc/self/mountinfo's text (field 5; the
/// filesystem type follows the " - " separator), octal escapes undone.
fn mountinfo_debugfs(text: &str) -> Option<PathBuf> {
    text.lines().find_map(|line| {
        let (mount, fstype) = line.split_once(" - ")?;
        let fstype = fstype.split_whitespace().next()?;
        let point = mount.split_whitespace().nth(4)?;
        (fstype == "debugfs").then(|| PathBuf::from(unescape(point)))
    })
}

/// mountinfo's `\040`-style escapes (space, tab, newline, backslash).
fn unescape(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let octal = bytes.get(i + 1..i + 4).is_some_and(|d| d.iter().all(|b| (b'0'..=b'7').contains(b)));
        if bytes[i] == b'\\' && octal {
            if let Ok(v) = u8::from_str_radix(&field[i + 1..i + 4], 8) {
                out.push(v);
                i += 4;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Where debugfs is mounted now, if anywhere.
pub fn debugfs_mount() -> Option<PathBuf> {
    mountinfo_debugfs(&std::fs::read_to_string("/proc/self/mountinfo").ok()?)
}

fn is_mounted_at(path: &str) -> bool {
    std::fs::read_to_string("/proc/self/mountinfo").is_ok_and(|text| {
        text.lines().any(|line| {
            line.split_once(" - ").is_some_and(|(mount, fstype)| {
                fstype.split_whitespace().next() == Some("debugfs")
                    && mount.split_whitespace().nth(4).map(unescape).as_deref() == Some(path)
            })
        })
    })
}

fn mount_debugfs(path: &str) -> Result<()> {
    let c = |s: &str| CString::new(s).map_err(|_| Error::Invalid(format!("{s}: a path with a NUL byte")));
    let (source, target, fstype) = (c("debugfs")?, c(path)?, c("debugfs")?);
    // SAFETY: NUL-terminated strings that outlive the call; no data argument.
    let rc = unsafe { libc::mount(source.as_ptr(), target.as_ptr(), fstype.as_ptr(), 0, std::ptr::null()) };
    if rc != 0 {
        return Err(Error::io(format!("mounting debugfs at {path}"), std::io::Error::last_os_error()));
    }
    Ok(())
}

fn unmount_debugfs(path: &str) -> Result<()> {
    let target = CString::new(path).map_err(|_| Error::Invalid(format!("{path}: a path with a NUL byte")))?;
    // SAFETY: a NUL-terminated string that outlives the call.
    if unsafe { libc::umount2(target.as_ptr(), 0) } != 0 {
        return Err(Error::io(format!("unmounting debugfs from {path}"), std::io::Error::last_os_error()));
    }
    Ok(())
}

/// The journal's view of a debugfs mount irqlab makes: `mounted` or `unmounted`.
pub(crate) fn read_mount(path: &str) -> Value {
    Value::Text { text: if is_mounted_at(path) { "mounted" } else { "unmounted" }.into() }
}

pub(crate) fn write_mount(path: &str, value: &Value) -> Result<()> {
    match value {
        Value::Text { text } if text == "mounted" => {
            if is_mounted_at(path) {
                Ok(())
            } else {
                mount_debugfs(path)
            }
        }
        Value::Text { text } if text == "unmounted" => {
            if is_mounted_at(path) {
                unmount_debugfs(path)
            } else {
                Ok(())
            }
        }
        other => Err(Error::Failed(format!("debugfs at {path} cannot be set to {other}"))),
    }
}

/// Runs `f` on debugfs's mount point, mounting it for the call alone when
/// it is not mounted (a journal revert after the run's own mount was undone).
fn with_debugfs<T>(f: impl FnOnce(&Path) -> Result<T>) -> Result<T> {
    if let Some(mount) = debugfs_mount() {
        return f(&mount);
    }
    mount_debugfs(DEFAULT_MOUNT)?;
    let out = f(Path::new(DEFAULT_MOUNT));
    let _ = unmount_debugfs(DEFAULT_MOUNT);
    out
}

/// The features `sched/features` lists, each with whether it is on (a
/// feature shows as NAME when on, NO_NAME when off).
pub fn parse_features(text: &str) -> Vec<(String, bool)> {
    text.split_whitespace()
        .map(|w| match w.strip_prefix("NO_") {
            Some(name) => (name.to_string(), false),
            None => (w.to_string(), true),
        })
        .collect()
}

fn read_file(path: &Path) -> Result<String> {
    std::fs::read_to_string(path).map_err(|e| file_error(path, "reading", e))
}

fn write_file(path: &Path, text: &str) -> Result<()> {
    std::fs::write(path, text).map_err(|e| file_error(path, &format!("writing `{text}` to"), e))
}

/// A missing file is a kernel without the knob (exit 3); EPERM is lockdown.
fn file_error(path: &Path, doing: &str, e: std::io::Error) -> Error {
    match e.raw_os_error() {
        Some(libc::ENOENT) => Error::MissingKernelFeature {
            feature: path.display().to_string(),
            detail: format!("this kernel ({}) has no such file", kernel_release()),
        },
        Some(libc::EPERM) => {
            locked_down(crate::machine::Machine::read().lockdown(), Some(&format!("{doing} {} was refused (EPERM)", path.display())))
        }
        // The fair server is admitted like a SCHED_DEADLINE task: the
        // kernel refuses a change its bandwidth accounting does not admit.
        // `write_fair_server` names the known cause when it is this one
        // (LostServerBandwidth).
        Some(libc::EBUSY) => Error::Failed(format!(
            "{doing} {}: the kernel's deadline bandwidth admission refused it (EBUSY); nothing was left changed",
            path.display()
        )),
        _ => Error::io(format!("{doing} {}", path.display()), e),
    }
}

/// The running kernel's release (`uname -r`), as reports name it.
pub fn kernel_release() -> String {
    std::fs::read_to_string("/proc/sys/kernel/osrelease").map_or_else(|_| "release unknown".into(), |r| r.trim().to_string())
}

/// The exit-3 error of a kernel whose lockdown shuts debugfs, naming the
/// level; `seen`: what showed it, when it was not the level alone.
fn locked_down(lockdown: &crate::machine::Lockdown, seen: Option<&str>) -> Error {
    Error::MissingKernelFeature {
        feature: "debugfs's scheduler knobs (sched/features, sched/fair_server)".into(),
        detail: format!(
            "the kernel is locked down (lockdown={}, from {}){}: debugfs's files refuse every read and write under lockdown, \
             and only a kernel booted without it (lockdown=none) lets them be set",
            lockdown.level.name(),
            lockdown.source,
            seen.map_or(String::new(), |s| format!("; {s}"))
        ),
    }
}

/// A feature's state now: `on` or `off`.
pub(crate) fn read_feature(name: &str) -> Result<Value> {
    with_debugfs(|mount| {
        let path = mount.join("sched/features");
        let features = parse_features(&read_file(&path)?);
        let on = features.iter().find(|(n, _)| n == name).map(|(_, on)| *on).ok_or_else(|| Error::MissingKernelFeature {
            feature: format!("scheduler feature {name}"),
            detail: format!("{} does not list it", path.display()),
        })?;
        Ok(Value::Text { text: if on { "on" } else { "off" }.into() })
    })
}

pub(crate) fn write_feature(name: &str, value: &Value) -> Result<()> {
    let on = match value {
        Value::Text { text } if text == "on" => true,
        Value::Text { text } if text == "off" => false,
        other => return Err(Error::Failed(format!("scheduler feature {name} cannot be set to {other}"))),
    };
    with_debugfs(|mount| write_file(&mount.join("sched/features"), &if on { name.to_string() } else { format!("NO_{name}") }))
}

fn fair_server_dir(mount: &Path, cpu: usize) -> PathBuf {
    mount.join(format!("sched/fair_server/cpu{cpu}"))
}

fn read_ns(path: &Path) -> Result<u64> {
    let text = read_file(path)?;
    text.trim().parse().map_err(|_| Error::Failed(format!("{}: `{}` is not a number of ns", path.display(), text.trim())))
}

/// A CPU's fair server now.
pub(crate) fn read_fair_server(cpu: usize) -> Result<Value> {
    with_debugfs(|mount| {
        let dir = fair_server_dir(mount, cpu);
        Ok(Value::DlServer { runtime_ns: read_ns(&dir.join("runtime"))?, period_ns: read_ns(&dir.join("period"))? })
    })
}

/// Sets a CPU's fair server. The kernel checks runtime <= period after each
/// of the two writes, so a period that grows is written first and one that
/// shrinks last: every step between two valid settings is valid.
pub(crate) fn write_fair_server(cpu: usize, value: &Value) -> Result<()> {
    let &Value::DlServer { runtime_ns, period_ns } = value else {
        return Err(Error::Failed(format!("the fair server of CPU {cpu} cannot be set to {value}")));
    };
    with_debugfs(|mount| {
        let dir = fair_server_dir(mount, cpu);
        let (runtime, period) = (dir.join("runtime"), dir.join("period"));
        let old_period = read_ns(&period)?;
        let steps = if period_ns >= old_period {
            [(&period, period_ns), (&runtime, runtime_ns)]
        } else {
            [(&runtime, runtime_ns), (&period, period_ns)]
        };
        // The journal takes a failed write for "nothing changed": a first
        // write that went through is undone when the second fails.
        let mut done: Vec<(&PathBuf, u64)> = Vec::new();
        for (path, ns) in steps {
            let old = read_ns(path)?;
            if old == ns {
                continue;
            }
            if let Err(e) = write_file(path, &ns.to_string()) {
                for (path, old) in done.into_iter().rev() {
                    let _ = write_file(path, &old.to_string());
                }
                return Err(match lost_server_bandwidth_at(mount, cpu) {
                    Some(lost) => lost.error(),
                    None => e,
                });
            }
            done.push((path, old));
        }
        Ok(())
    })
}

/// Linux's fixed point for deadline bandwidth (kernel/sched/sched.h,
/// `BW_SHIFT`): 1 << 20 is a whole CPU.
const BW_SHIFT: u32 = 20;

/// A server's bandwidth as the kernel computes it (`to_ratio`).
fn to_ratio(period_ns: u64, runtime_ns: u64) -> u64 {
    if period_ns == 0 {
        return 0;
    }
    ((u128::from(runtime_ns) << BW_SHIFT) / u128::from(period_ns)) as u64
}

/// The deadline bandwidth the kernel accounts to CPU `cpu`'s root domain:
/// `.dl_bw->total_bw` of its `dl_rq[N]` block in debugfs `sched/debug`.
/// Signed, as the kernel prints it (`%lld`): a count that went below zero
/// reads as a negative number.
fn root_domain_total_bw(debug: &str, cpu: usize) -> Option<i64> {
    let header = format!("dl_rq[{cpu}]:");
    let lines = debug.lines().skip_while(|l| l.trim() != header).skip(1);
    lines
        .take_while(|l| l.starts_with(char::is_whitespace))
        .find_map(|l| l.trim().strip_prefix(".dl_bw->total_bw")?.trim().strip_prefix(':')?.trim().parse().ok())
}

/// A root domain that accounts less deadline bandwidth than one of its
/// CPUs' fair servers holds alone. Linux 6.12 (seen in 6.12.117-rt) gets
/// there in two ways:
/// - **forgotten**: it clears a root domain's `total_bw` when it rebuilds
///   the sched domains without replacing them, re-adds its SCHED_DEADLINE
///   tasks but not its fair servers, and does such a rebuild on every read
///   or write of `/proc/sys/kernel/sched_rt_{runtime,period}_us`
///   (`sched_rt_handler` calls `rebuild_sched_domains`, seen with bpftrace
///   in a guest);
/// - **below zero**: a thread that leaves SCHED_DEADLINE keeps its
///   bandwidth in the root domain until its 0-lag time (the inactive
///   timer releases it then); a root domain rebuilt before that recounts
///   without it, and the late release subtracts it from the new count
///   (seen: `total_bw` -1, the two servers' 104856 less a 1 ms / 10 ms
///   thread's 104857, after a cpuset partition was removed right after its
///   thread was reverted; the journal now waits out that time,
///   `journal::restore`).
///
/// Lowering a server then computes `total_bw - old + new` below zero,
/// which wraps: admission refuses it (EBUSY). A rebuild that replaces the
/// root domain (a cpuset partition made or removed, a CPU taken offline)
/// counts everything again, and so does a reboot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LostServerBandwidth {
    pub cpu: usize,
    /// What the root domain accounts (BW_SHIFT fixed point; negative when
    /// the count went below zero).
    pub total_bw: i64,
    /// CPU `cpu`'s fair server alone.
    pub server_bw: u64,
}

impl LostServerBandwidth {
    /// Exit 3: the kernel cannot take the change until its accounting is
    /// put right, which only the kernel can do.
    pub fn error(&self) -> Error {
        let why = if self.total_bw < 0 {
            "its count went below zero, and the kernel refuses to lower one. It gets there when a thread's SCHED_DEADLINE \
             bandwidth is released after the sched domains were rebuilt without it (a thread taken out of SCHED_DEADLINE less than \
             its deadline before a cpuset partition was removed)"
        } else {
            "so the kernel has forgotten its fair servers' share and refuses to lower one. This kernel forgets it whenever it \
             rebuilds its sched domains in place, which every read or write of /proc/sys/kernel/sched_rt_runtime_us or \
             sched_rt_period_us does (`sysctl -a`, and irqlab measure interference's RT-limit lift)"
        };
        Error::MissingKernelFeature {
            feature: "a fair server whose bandwidth the kernel still accounts".into(),
            detail: format!(
                "this kernel ({}) refused it (EBUSY): CPU {}'s root domain accounts {} of deadline bandwidth (dl_bw->total_bw in \
                 sched/debug; 1048576 is a CPU), less than the {} of CPU {}'s fair server alone: {why}. Nothing was changed. Making \
                 or removing a cpuset partition, or taking a CPU offline and back, makes the kernel count its deadline bandwidth \
                 again; so does a reboot",
                kernel_release(),
                self.cpu,
                self.total_bw,
                self.server_bw,
                self.cpu
            ),
        }
    }
}

/// Whether the kernel accounts less than CPU `cpu`'s fair server's
/// bandwidth in its root domain, forgotten or below zero (`None` too where
/// debugfs does not show it).
pub fn lost_server_bandwidth(cpu: usize) -> Option<LostServerBandwidth> {
    lost_server_bandwidth_at(&debugfs_mount()?, cpu)
}

pub(crate) fn lost_server_bandwidth_at(mount: &Path, cpu: usize) -> Option<LostServerBandwidth> {
    let dir = fair_server_dir(mount, cpu);
    let server_bw = to_ratio(read_ns(&dir.join("period")).ok()?, read_ns(&dir.join("runtime")).ok()?);
    let total_bw = root_domain_total_bw(&std::fs::read_to_string(mount.join("sched/debug")).ok()?, cpu)?;
    (total_bw < i64::try_from(server_bw).ok()?).then_some(LostServerBandwidth { cpu, total_bw, server_bw })
}

/// debugfs made ready for the scheduler knobs: not locked down, mounted
/// (by irqlab, journalled, when it was not), its features file writable.
pub struct Debugfs {
    pub mount: PathBuf,
    /// irqlab's mount, undone when dropped or restored.
    pub mounted: Option<Applied>,
}

/// Checks lockdown and mounts debugfs if needed: exit 3 naming the lockdown
/// level when the kernel shuts debugfs, before anything is changed.
pub fn open() -> Result<Debugfs> {
    privilege::require(&[Capability::SysAdmin], "mount debugfs and write the scheduler's debugfs knobs")?;
    let machine = crate::machine::Machine::read();
    let lockdown = machine.lockdown();
    if lockdown.shuts_debugfs() == Some(true) {
        return Err(locked_down(lockdown, None));
    }
    let (mount, mounted) = match debugfs_mount() {
        Some(mount) => (mount, None),
        None => {
            let applied = journal::apply(Object::DebugfsMount { path: DEFAULT_MOUNT.into() }, Value::Text { text: "mounted".into() })?;
            (PathBuf::from(DEFAULT_MOUNT), Some(applied))
        }
    };
    // Lockdown not shown anywhere (no securityfs, no log) still shows here:
    // an open for writing is refused with EPERM. Nothing is written.
    let features = mount.join("sched/features");
    std::fs::OpenOptions::new().write(true).open(&features).map_err(|e| file_error(&features, "opening for writing", e))?;
    Ok(Debugfs { mount, mounted })
}

impl Debugfs {
    /// The features this kernel lists.
    pub fn features(&self) -> Result<Vec<(String, bool)>> {
        Ok(parse_features(&read_file(&self.mount.join("sched/features"))?))
    }

    /// Sets a feature through the journal; a name the kernel does not list
    /// is refused (exit 2) with the names it does.
    pub fn set_feature(&self, name: &str, on: bool) -> Result<Applied> {
        let features = self.features()?;
        if !features.iter().any(|(n, _)| n == name) {
            let names: Vec<&str> = features.iter().map(|(n, _)| n.as_str()).collect();
            return Err(Error::Invalid(format!(
                "unknown scheduler feature `{name}`: this kernel ({}) lists {}",
                kernel_release(),
                names.join(", ")
            )));
        }
        journal::apply(Object::SchedFeature { name: name.into() }, Value::Text { text: if on { "on" } else { "off" }.into() })
    }

    /// The CPUs with a fair server; exit 3 naming the directory on a kernel
    /// without one (before 6.12).
    pub fn fair_server_cpus(&self) -> Result<Vec<usize>> {
        let dir = self.mount.join("sched/fair_server");
        if !dir.is_dir() {
            return Err(Error::MissingKernelFeature {
                feature: dir.display().to_string(),
                detail: format!(
                    "this kernel ({}) has no fair server (the fair class's deadline server arrived in Linux 6.12): nothing to set",
                    kernel_release()
                ),
            });
        }
        let mut cpus: Vec<usize> = std::fs::read_dir(&dir)
            .map_err(|e| file_error(&dir, "listing", e))?
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.strip_prefix("cpu")?.parse().ok())
            .collect();
        cpus.sort_unstable();
        Ok(cpus)
    }

    /// Sets a CPU's fair server through the journal (`period_ns` None:
    /// keep its period).
    pub fn set_fair_server(&self, cpu: usize, runtime_ns: u64, period_ns: Option<u64>) -> Result<Applied> {
        let cpus = self.fair_server_cpus()?;
        if !cpus.contains(&cpu) {
            return Err(Error::Invalid(format!(
                "CPU {cpu} has no fair server (this kernel has one for CPUs {})",
                crate::rt::format_cpu_list(&cpus)
            )));
        }
        let period_ns = match period_ns {
            Some(p) => p,
            None => read_ns(&fair_server_dir(&self.mount, cpu).join("period"))?,
        };
        check_fair_server(runtime_ns, period_ns)?;
        journal::apply(Object::FairServer { cpu }, Value::DlServer { runtime_ns, period_ns })
    }
}

/// The kernel's own checks of a fair server setting, made first so that a
/// bad value is exit 2 naming it rather than the kernel's bare EINVAL.
pub fn check_fair_server(runtime_ns: u64, period_ns: u64) -> Result<()> {
    use irqlab_analysis::format_ns;
    if !(FAIR_SERVER_PERIOD_MIN_NS..=FAIR_SERVER_PERIOD_MAX_NS).contains(&period_ns) {
        return Err(Error::Invalid(format!(
            "--period {}: the kernel takes a fair server period from {} to {}",
            format_ns(period_ns),
            format_ns(FAIR_SERVER_PERIOD_MIN_NS),
            format_ns(FAIR_SERVER_PERIOD_MAX_NS)
        )));
    }
    if runtime_ns > period_ns {
        return Err(Error::Invalid(format!(
            "--runtime {} is longer than the period {}: a server cannot run more than its period",
            format_ns(runtime_ns),
            format_ns(period_ns)
        )));
    }
    Ok(())
}

/// What `irqlab control sched-feature` / `control fair-server` change.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Change {
    SchedFeature {
        name: String,
        on: bool,
    },
    /// `cpus` None: every CPU with a fair server; `period_ns` None: each keeps its own.
    FairServer {
        cpus: Option<Vec<usize>>,
        runtime_ns: u64,
        period_ns: Option<u64>,
    },
}

/// The knobs set for a run (a reproduction's `--hrtick-dl` or
/// `--fair-server off`): restored newest first, then debugfs unmounted if
/// irqlab mounted it, when dropped.
pub struct Held {
    pub changes: Vec<Applied>,
    pub debugfs: Debugfs,
}

impl Held {
    /// What was set, one line per knob ("HRTICK_DL: off -> on").
    pub fn describe(&self) -> Vec<String> {
        let mut lines: Vec<String> =
            self.changes.iter().map(|a| format!("{}: {} -> {}", a.entry().object, a.entry().old, a.entry().new)).collect();
        if self.debugfs.mounted.is_some() {
            lines.push(format!("debugfs mounted at {} for the run", self.debugfs.mount.display()));
        }
        lines
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        // The knobs before the mount they are written through.
        while let Some(a) = self.changes.pop() {
            drop(a);
        }
    }
}

/// Applies a change (after the lockdown check and mounting debugfs when
/// needed) and returns it held.
pub fn apply(change: &Change) -> Result<Held> {
    let debugfs = open()?;
    let mut changes = Vec::new();
    match change {
        Change::SchedFeature { name, on } => changes.push(debugfs.set_feature(name, *on)?),
        Change::FairServer { cpus, runtime_ns, period_ns } => {
            let cpus = match cpus {
                Some(c) => c.clone(),
                None => {
                    let online = crate::rt::online_cpus()?;
                    debugfs.fair_server_cpus()?.into_iter().filter(|c| online.contains(c)).collect()
                }
            };
            for cpu in cpus {
                changes.push(debugfs.set_fair_server(cpu, *runtime_ns, *period_ns)?);
            }
        }
    }
    Ok(Held { changes, debugfs })
}

/// Whether the knobs can be set here, for `irqlab doctor` (mounts and
/// writes nothing): root, no lockdown, and, where debugfs is mounted, the
/// file. `fair_server`: the fair-server row (else sched/features' HRTICK_DL).
pub fn check_prerequisites(machine: &crate::machine::Machine, fair_server: bool) -> Result<Option<String>> {
    privilege::require(&[Capability::SysAdmin], "mount debugfs and write the scheduler's debugfs knobs")?;
    let lockdown = machine.lockdown();
    if lockdown.shuts_debugfs() == Some(true) {
        return Err(locked_down(lockdown, None));
    }
    let Some(mount) = debugfs_mount() else {
        return Ok(Some(format!("debugfs not mounted: irqlab mounts it at {DEFAULT_MOUNT} for the run and unmounts it after")));
    };
    if fair_server {
        let dir = mount.join("sched/fair_server");
        if !dir.is_dir() {
            return Err(Error::MissingKernelFeature {
                feature: dir.display().to_string(),
                detail: format!("this kernel ({}) has no fair server (Linux 6.12+)", kernel_release()),
            });
        }
        if let Some(lost) = lost_server_bandwidth_at(&mount, 0) {
            return Err(lost.error());
        }
        let cpu0 = read_fair_server(0).map(|v| v.to_string()).unwrap_or_else(|e| format!("unread: {e}"));
        return Ok(Some(format!("debugfs at {}; CPU 0's fair server: {cpu0}", mount.display())));
    }
    let features = parse_features(&read_file(&mount.join("sched/features"))?);
    match features.iter().find(|(n, _)| n == "HRTICK_DL") {
        Some((_, on)) => Ok(Some(format!("debugfs at {}; HRTICK_DL is {}", mount.display(), if *on { "on" } else { "off" }))),
        None => Err(Error::MissingKernelFeature {
            feature: "scheduler feature HRTICK_DL".into(),
            detail: format!("{} does not list it", mount.join("sched/features").display()),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_root_domains_bandwidth_is_read_from_sched_debug() {
        // As a 6.12.117-rt guest printed it after `irqlab doctor` had read
        // sched_rt_runtime_us: both fair servers (52428 each) forgotten.
        let debug = "rt_rq[0]:\n  .rt_runtime                    : 950.000000\n\ndl_rq[0]:\n  .dl_nr_running                 : 0\n  \
                     .dl_bw->bw                     : 996147\n  .dl_bw->total_bw               : 0\n\ndl_rq[1]:\n  \
                     .dl_nr_running                 : 0\n  .dl_bw->bw                     : 996147\n  .dl_bw->total_bw               : 104856\n";
        assert_eq!(root_domain_total_bw(debug, 0), Some(0));
        assert_eq!(root_domain_total_bw(debug, 1), Some(104856));
        assert_eq!(root_domain_total_bw(debug, 2), None);
        // A 6.12.117-rt guest after a partition was removed right after its
        // SCHED_DEADLINE thread (1 ms / 10 ms) was reverted.
        let below = "dl_rq[0]:\n  .dl_bw->bw                     : 996147\n  .dl_bw->total_bw               : -1\n";
        assert_eq!(root_domain_total_bw(below, 0), Some(-1));
        let lost = LostServerBandwidth { cpu: 0, total_bw: -1, server_bw: 52428 };
        assert!(lost.error().to_string().contains("went below zero"), "{}", lost.error());
        let forgotten = LostServerBandwidth { total_bw: 0, ..lost };
        assert!(forgotten.error().to_string().contains("forgotten"), "{}", forgotten.error());
        assert_eq!(to_ratio(1_000_000_000, 50_000_000), 52428, "the kernel's own figure for a 50 ms / 1 s server");
    }

    #[test]
    fn debugfs_is_found_in_mountinfo() {
        let text = "22 1 0:21 / /sys rw,nosuid - sysfs sysfs rw\n\
                    35 22 0:7 / /sys/kernel/debug rw,nosuid,nodev,noexec,relatime shared:15 - debugfs debugfs rw\n";
        assert_eq!(mountinfo_debugfs(text), Some(PathBuf::from("/sys/kernel/debug")));
        assert_eq!(mountinfo_debugfs("22 1 0:21 / /sys rw - sysfs sysfs rw\n"), None);
        let spaced = "35 22 0:7 / /mnt/my\\040debug rw - debugfs none rw\n";
        assert_eq!(mountinfo_debugfs(spaced), Some(PathBuf::from("/mnt/my debug")));
    }

    #[test]
    fn features_read_as_on_and_off() {
        let f = parse_features("GENTLE_FAIR_SLEEPERS NO_HRTICK NO_HRTICK_DL NONTASK_CAPACITY\n");
        assert_eq!(
            f,
            vec![
                ("GENTLE_FAIR_SLEEPERS".to_string(), true),
                ("HRTICK".to_string(), false),
                ("HRTICK_DL".to_string(), false),
                ("NONTASK_CAPACITY".to_string(), true)
            ]
        );
    }

    #[test]
    fn fair_server_settings_are_checked_as_the_kernel_does() {
        assert!(check_fair_server(0, 1_000_000_000).is_ok());
        assert!(check_fair_server(50_000_000, 1_000_000_000).is_ok());
        let long = check_fair_server(2_000_000_000, 1_000_000_000).unwrap_err();
        assert_eq!(long.exit_code(), 2);
        assert!(long.to_string().contains("--runtime"), "{long}");
        let short = check_fair_server(0, 10_000).unwrap_err();
        assert!(short.to_string().contains("--period"), "{short}");
    }
}
