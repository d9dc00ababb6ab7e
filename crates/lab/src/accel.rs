//! KVM or emulation. `/dev/kvm` opening is not enough: on this project's
//! VM it opens, but a nested guest hangs before its kernel prints its
//! banner. So KVM counts as usable only when a bounded probe boot's kernel
//! prints "Linux version" on its serial console within [`PROBE_WAIT`]; the answer is kept for the host's
//! boot (`cache/accel.json`, keyed by boot_id), so the probe costs once.

use crate::{cache, Error, Result};
use serde::{Deserialize, Serialize};
use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

pub const PROBE_WAIT: Duration = Duration::from_secs(8);

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Accel {
    Kvm,
    /// QEMU's software emulation (TCG): an emulated CPU's timings.
    Tcg,
}

impl Accel {
    pub fn label(self) -> &'static str {
        match self {
            Accel::Kvm => "KVM",
            Accel::Tcg => "emulation (TCG)",
        }
    }
}

/// `--accel`: what the user asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Choice {
    Auto,
    Kvm,
    Tcg,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Decision {
    pub accel: Accel,
    /// Why (shown on stderr and kept in the run's `lab` block).
    pub reason: String,
}

#[derive(Serialize, Deserialize)]
struct Cached {
    boot_id: String,
    decision: Decision,
}

/// The accelerator a guest of `image` would run under.
pub fn decide(choice: Choice, qemu: &Path, image: &Path) -> Result<Decision> {
    match choice {
        Choice::Tcg => Ok(Decision { accel: Accel::Tcg, reason: "--accel tcg".into() }),
        Choice::Kvm => match kvm_opens() {
            Ok(()) => Ok(Decision { accel: Accel::Kvm, reason: "--accel kvm".into() }),
            Err(why) => Err(Error::Missing(format!("--accel kvm: {why}"))),
        },
        Choice::Auto => auto(qemu, image),
    }
}

/// What the last probe on this boot found, without probing.
pub fn cached() -> Option<Decision> {
    let text = std::fs::read_to_string(cache::root().join("accel.json")).ok()?;
    let cached: Cached = serde_json::from_str(&text).ok()?;
    (cached.boot_id == boot_id()).then_some(cached.decision)
}

fn auto(qemu: &Path, image: &Path) -> Result<Decision> {
    if let Err(why) = kvm_opens() {
        return Ok(Decision { accel: Accel::Tcg, reason: why });
    }
    if let Some(decision) = cached() {
        return Ok(decision);
    }
    let decision = if probe_prints(qemu, image) {
        Decision { accel: Accel::Kvm, reason: "a KVM probe guest's kernel printed its banner on its console".into() }
    } else {
        Decision {
            accel: Accel::Tcg,
            reason: format!(
                "/dev/kvm opens but a KVM probe guest's kernel printed no banner in {} s (nested virtualization does not run here)",
                PROBE_WAIT.as_secs()
            ),
        }
    };
    let text = serde_json::to_string(&Cached { boot_id: boot_id(), decision: decision.clone() }).unwrap_or_default();
    let dir = cache::root();
    if std::fs::create_dir_all(&dir).is_ok() {
        let tmp = dir.join(".accel.json.tmp");
        if std::fs::write(&tmp, text).is_ok() {
            let _ = std::fs::rename(tmp, dir.join("accel.json"));
        }
    }
    Ok(decision)
}

fn kvm_opens() -> std::result::Result<(), String> {
    std::fs::OpenOptions::new().read(true).write(true).open("/dev/kvm").map(drop).map_err(|e| format!("/dev/kvm: {e}"))
}

fn boot_id() -> String {
    std::fs::read_to_string("/proc/sys/kernel/random/boot_id").unwrap_or_default().trim().to_string()
}

/// What the kernel proper prints first on an early serial console. The
/// bzImage's real-mode setup prints before it ("Probing EDD ... ok"), and
/// on this project's VM it does so under a nested KVM guest that then hangs
/// (seen 2026-11-29: the probe took that line for a working KVM, and every
/// guest's boot stalled); so the probe waits for the kernel's banner.
const KERNEL_BANNER: &[u8] = b"Linux version";

/// Boots `image` under KVM with its console on stdout and waits for the
/// kernel's banner; the guest is killed either way.
fn probe_prints(qemu: &Path, image: &Path) -> bool {
    let child = Command::new(qemu)
        .args(["-enable-kvm", "-cpu", "host", "-m", "256", "-nodefaults", "-nographic", "-no-reboot", "-serial", "stdio"])
        .arg("-kernel")
        .arg(image)
        .args(["-append", "console=ttyS0 earlyprintk=serial panic=-1"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn();
    let Ok(mut child) = child else { return false };
    let Some(mut stdout) = child.stdout.take() else { return false };
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut seen = Vec::new();
        let mut chunk = [0u8; 512];
        while let Ok(n) = stdout.read(&mut chunk) {
            if n == 0 {
                break;
            }
            seen.extend_from_slice(&chunk[..n]);
            if seen.windows(KERNEL_BANNER.len()).any(|w| w == KERNEL_BANNER) {
                let _ = tx.send(true);
                return;
            }
        }
        let _ = tx.send(false);
    });
    let printed = rx.recv_timeout(PROBE_WAIT).unwrap_or(false);
    let _ = child.kill();
    let _ = child.wait();
    printed
}
