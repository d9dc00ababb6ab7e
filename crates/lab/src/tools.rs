//! The host programs a guest needs, found or named with the package that
//! brings them (exit 3): QEMU and busybox from Debian, virtme-ng from PyPI
//! (the install step `make lab-deps` puts it in `.venv/lab`).

use crate::{Error, Result};
use std::path::{Path, PathBuf};

pub const QEMU: &str = "qemu-system-x86_64";

/// A program on PATH.
pub fn on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).map(|dir| dir.join(name)).find(|p| is_executable(p))
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    path.metadata().is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

pub fn qemu() -> Result<PathBuf> {
    on_path(QEMU)
        .ok_or_else(|| Error::Missing(format!("{QEMU} not found: install Debian's package qemu-system-x86 (`make lab-deps` does)")))
}

pub fn busybox() -> Result<PathBuf> {
    on_path("busybox").ok_or_else(|| {
        Error::Missing(
            "busybox not found: virtme-ng builds the guest's init with it; install Debian's package busybox-static (`make lab-deps` does)"
                .into(),
        )
    })
}

/// virtme-ng's `vng`: `IRQLAB_VNG`, then PATH, then `.venv/lab/bin/vng` in
/// the checkout the running binary was built in (target/*/irqlab).
pub fn vng() -> Result<PathBuf> {
    if let Some(path) = std::env::var_os("IRQLAB_VNG").map(PathBuf::from) {
        return if is_executable(&path) {
            Ok(path)
        } else {
            Err(Error::Missing(format!("IRQLAB_VNG={}: not an executable", path.display())))
        };
    }
    if let Some(path) = on_path("vng") {
        return Ok(path);
    }
    let exe = std::env::current_exe().ok();
    let beside_checkout =
        exe.iter().flat_map(|e| e.ancestors().skip(1)).map(|dir| dir.join(".venv/lab/bin/vng")).find(|p| is_executable(p));
    beside_checkout.ok_or_else(|| {
        Error::Missing(
            "virtme-ng (vng) not found: `make lab-deps` installs it into .venv/lab (PyPI package virtme-ng), or set IRQLAB_VNG".into(),
        )
    })
}

/// Every tool a guest run needs, checked before anything starts.
pub fn check_all() -> Result<(PathBuf, PathBuf)> {
    let qemu = qemu()?;
    busybox()?;
    if on_path("depmod").is_none() && !Path::new("/sbin/depmod").exists() {
        return Err(Error::Missing("depmod not found: install Debian's package kmod".into()));
    }
    Ok((qemu, vng()?))
}
