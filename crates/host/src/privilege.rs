//! Capability checks done before any live operation touches the machine, so
//! a command without privilege says exactly what is missing and exits 3
//! instead of half-running.
//!
//! ```no_run
//! use irqlab_host::privilege::{require, Capability};
//! require(&[Capability::SysNice, Capability::IpcLock], "run the probe at SCHED_FIFO with locked memory")?;
//! # Ok::<(), irqlab_host::Error>(())
//! ```
//!
//! The effective set is read from `/proc/self/status` (`CapEff`), which is
//! what the kernel checks; being uid 0 alone is not enough (containers and
//! `setpriv` drop capabilities from root).

use crate::error::{Error, Result};
use std::path::Path;

/// The capabilities irqlab's live commands need (bit numbers from
/// `include/uapi/linux/capability.h`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Capability {
    /// Network namespaces, veth, sysctls under net/, threaded NAPI.
    NetAdmin,
    /// Raw ICMP sockets (ping flood).
    NetRaw,
    /// mlockall beyond RLIMIT_MEMLOCK.
    IpcLock,
    /// setns into a network namespace, mounting, generic admin.
    SysAdmin,
    /// SCHED_FIFO / SCHED_DEADLINE and changing other threads' policies.
    SysNice,
    /// Tracing and perf events (BPF tracepoint programs).
    Perfmon,
    /// Loading BPF programs and maps.
    Bpf,
    /// Writing sysctls such as kernel.sched_rt_runtime_us.
    SysResource,
}

impl Capability {
    /// The kernel's name, as users see it in documentation and `capsh`.
    pub fn name(self) -> &'static str {
        match self {
            Capability::NetAdmin => "CAP_NET_ADMIN",
            Capability::NetRaw => "CAP_NET_RAW",
            Capability::IpcLock => "CAP_IPC_LOCK",
            Capability::SysAdmin => "CAP_SYS_ADMIN",
            Capability::SysNice => "CAP_SYS_NICE",
            Capability::Perfmon => "CAP_PERFMON",
            Capability::Bpf => "CAP_BPF",
            Capability::SysResource => "CAP_SYS_RESOURCE",
        }
    }

    /// Bit number in the capability sets.
    pub fn bit(self) -> u32 {
        match self {
            Capability::NetAdmin => 12,
            Capability::NetRaw => 13,
            Capability::IpcLock => 14,
            Capability::SysAdmin => 21,
            Capability::SysNice => 23,
            Capability::SysResource => 24,
            Capability::Perfmon => 38,
            Capability::Bpf => 39,
        }
    }
}

/// The effective capability set of this process (bit i = capability i).
pub fn effective() -> Result<u64> {
    let status = std::fs::read_to_string("/proc/self/status").map_err(|e| Error::io("reading /proc/self/status", e))?;
    parse_cap_eff(&status).ok_or_else(|| Error::MissingKernelFeature {
        feature: "CapEff in /proc/self/status".into(),
        detail: "cannot tell which capabilities this process has".into(),
    })
}

fn parse_cap_eff(status: &str) -> Option<u64> {
    status.lines().find_map(|l| l.strip_prefix("CapEff:")).and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok())
}

/// Whether this process holds `cap` in its effective set.
pub fn has(cap: Capability) -> bool {
    effective().map(|set| set & (1u64 << cap.bit()) != 0).unwrap_or(false)
}

/// Succeeds when every capability in `caps` is held; otherwise names the
/// first missing one and `purpose` ("to ..." without the "to").
pub fn require(caps: &[Capability], purpose: &str) -> Result<()> {
    let set = effective()?;
    match caps.iter().find(|c| set & (1u64 << c.bit()) == 0) {
        None => Ok(()),
        Some(c) => Err(Error::MissingPrivilege { capability: c.name(), purpose: purpose.to_string() }),
    }
}

/// What loading and attaching CO-RE BPF programs needs (the accounting,
/// the thread-watch monitor): the kernel's BTF, CAP_BPF and CAP_PERFMON.
/// Exit 3 naming the first that is missing; `purpose` as for [`require`].
pub fn require_bpf(purpose: &str) -> Result<()> {
    require_path(Path::new("/sys/kernel/btf/vmlinux"), "BTF (CONFIG_DEBUG_INFO_BTF, /sys/kernel/btf/vmlinux)")?;
    require(&[Capability::Bpf, Capability::Perfmon], purpose)
}

/// Succeeds when `path` exists; otherwise reports the kernel feature it
/// stands for (e.g. `/sys/kernel/btf/vmlinux` for "BTF").
pub fn require_path(path: &Path, feature: &str) -> Result<()> {
    if path.exists() {
        Ok(())
    } else {
        Err(Error::MissingKernelFeature { feature: feature.to_string(), detail: format!("{} does not exist", path.display()) })
    }
}

/// An executable program on PATH (the lab's finder, shared).
pub use irqlab_lab::tools::on_path;

/// Succeeds when the external program `name` is on PATH; otherwise a
/// missing-feature error pointing at `scripts/install-deps.sh`.
pub fn require_program(name: &str) -> Result<()> {
    let found = std::env::var_os("PATH").map(|paths| std::env::split_paths(&paths).any(|p| p.join(name).is_file())).unwrap_or(false);
    if found {
        Ok(())
    } else {
        Err(Error::MissingKernelFeature {
            feature: format!("program `{name}`"),
            detail: "not on PATH (scripts/install-deps.sh installs it)".into(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_cap_eff_line() {
        let status = "Name:\tx\nCapInh:\t0000000000000000\nCapEff:\t000001ffffffffff\nCapBnd:\t0\n";
        assert_eq!(parse_cap_eff(status), Some(0x1ff_ffff_ffff));
        assert_eq!(parse_cap_eff("Name: x\n"), None);
    }

    #[test]
    fn missing_capability_is_named_and_exits_3() {
        // Decide from the real effective set which branch must be taken.
        let set = effective().unwrap();
        let held = set & (1 << Capability::SysNice.bit()) != 0;
        let r = require(&[Capability::SysNice], "raise priority");
        match r {
            Ok(()) => assert!(held),
            Err(e) => {
                assert!(!held);
                assert_eq!(e.exit_code(), 3);
                assert!(e.to_string().contains("CAP_SYS_NICE"), "{e}");
            }
        }
    }

    #[test]
    fn error_message_names_the_capability() {
        let e = Error::MissingPrivilege { capability: "CAP_NET_ADMIN", purpose: "create namespaces".into() };
        assert_eq!(e.exit_code(), 3);
        assert!(e.to_string().contains("CAP_NET_ADMIN"));
        assert!(e.to_string().contains("create namespaces"));
    }

    #[test]
    fn missing_path_is_a_kernel_feature() {
        let e = require_path(Path::new("/nonexistent/irqlab"), "X").unwrap_err();
        assert_eq!(e.exit_code(), 3);
        assert!(require_path(Path::new("/proc"), "procfs").is_ok());
    }
}
