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
        let machine = Machine::read();
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
}

impl Machine {
    /// Reads the kernel's identity, command line and configuration.
    pub fn read() -> Machine {
        let release = read("/proc/sys/kernel/osrelease").unwrap_or_else(|| "unknown".into());
        Machine {
            version: read("/proc/sys/kernel/version").unwrap_or_default(),
            cmdline: read("/proc/cmdline").unwrap_or_default(),
            config: kernel_config(&release),
            release,
        }
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

    /// Every setting that shapes what the live commands measure, read now.
    pub fn settings(&self) -> Vec<Setting> {
        settings(self)
    }
}

fn settings(m: &Machine) -> Vec<Setting> {
    vec![
        Setting {
            name: "preemption",
            value: preemption(m),
            why: "how long a woken high-priority task can wait for the kernel to reach a preemption point",
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

fn preemption(m: &Machine) -> String {
    preemption_from(m, read("/sys/kernel/realtime").as_deref(), read("/sys/kernel/debug/sched/preempt").as_deref())
}

/// The preemption model from /sys/kernel/realtime and debugfs's
/// sched/preempt when the machine has them, else from the configuration,
/// boot options and version string.
fn preemption_from(m: &Machine, realtime: Option<&str>, debugfs_modes: Option<&str>) -> String {
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
        (None, Some(mode), true) => format!("{mode} (dynamic, the built-in default; debugfs would show a change)"),
        (_, Some(mode), false) => mode.to_string(),
        (_, None, _) if m.version.contains("PREEMPT_RT") => "rt".into(),
        (_, None, true) => "dynamic, mode unknown (no kernel config, debugfs not mounted)".into(),
        (_, None, false) => "unknown (no kernel config)".into(),
    }
}

fn rt_throttling() -> String {
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

fn threaded_irqs(m: &Machine) -> String {
    let threads = std::fs::read_dir("/proc")
        .map(|dir| {
            dir.flatten()
                .filter(|e| e.file_name().to_string_lossy().bytes().all(|b| b.is_ascii_digit()))
                .filter(|e| read(e.path().join("comm")).is_some_and(|c| c.starts_with("irq/")))
                .count()
        })
        .unwrap_or(0);
    let forced = m.boot_param("threadirqs").is_some() || read("/sys/kernel/realtime").as_deref() == Some("1");
    format!("{}, {threads} irq/ threads running", if forced { "forced (threadirqs)" } else { "only where a driver asks" })
}

fn isolation(m: &Machine) -> String {
    let list = |path: &str| read(path).filter(|s| !s.is_empty()).unwrap_or_else(|| "none".into());
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

/// The kernel's tick rate (CONFIG_HZ), when its configuration is readable.
pub fn kernel_hz() -> Option<u64> {
    Machine::read().config("HZ")?.parse().ok()
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
        };
        let preemption = |m: &Machine| preemption_from(m, None, None);
        assert_eq!(preemption(&machine("CONFIG_PREEMPT_VOLUNTARY=y\n", "", "#1 SMP")), "voluntary");
        let dynamic = "CONFIG_PREEMPT_VOLUNTARY=y\nCONFIG_PREEMPT_DYNAMIC=y\n";
        assert!(preemption(&machine(dynamic, "preempt=full", "#1 SMP PREEMPT_DYNAMIC")).starts_with("full (dynamic, boot option"));
        assert!(preemption(&machine(dynamic, "", "#1 SMP PREEMPT_DYNAMIC")).starts_with("voluntary (dynamic, the built-in default"));
        assert_eq!(preemption(&machine("", "", "#1 SMP PREEMPT_RT")), "rt");
        // debugfs's current mode and /sys/kernel/realtime decide before the
        // configuration.
        let m = machine(dynamic, "preempt=full", "#1 SMP PREEMPT_DYNAMIC");
        assert_eq!(preemption_from(&m, None, Some("none voluntary (full) lazy\n")), "full (dynamic, from debugfs)");
        assert_eq!(preemption_from(&m, Some("0"), Some("(none) voluntary full\n")), "none (dynamic, from debugfs)");
        assert!(preemption_from(&m, Some("1"), Some("none (voluntary) full")).starts_with("PREEMPT_RT"));
    }

    #[test]
    fn tsc_flags_are_required() {
        assert!(tsc_flags_ok("flags\t: fpu constant_tsc nonstop_tsc rdtscp\n").is_ok());
        assert!(tsc_flags_ok("flags\t: fpu constant_tsc\n").unwrap_err().contains("nonstop_tsc"));
        assert!(tsc_flags_ok("flags\t: fpu\n").unwrap_err().contains("constant_tsc"));
    }
}
