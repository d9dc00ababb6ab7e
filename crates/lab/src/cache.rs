//! Where fetched kernels live: the user's cache directory, never the
//! repository. `IRQLAB_CACHE_DIR` overrides, then `XDG_CACHE_HOME/irqlab`,
//! then `~/.cache/irqlab`. A fetched kernel is a directory with the
//! unpacked package (`root/boot`, `root/lib/modules`) and `manifest.json`.

use crate::catalog::Known;
use crate::{Error, Result};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

pub fn root() -> PathBuf {
    if let Some(dir) = std::env::var_os("IRQLAB_CACHE_DIR") {
        return PathBuf::from(dir);
    }
    if let Some(dir) = std::env::var_os("XDG_CACHE_HOME").filter(|d| !d.is_empty()) {
        return PathBuf::from(dir).join("irqlab");
    }
    let home = std::env::var_os("HOME").map_or_else(|| PathBuf::from("/root"), PathBuf::from);
    home.join(".cache").join("irqlab")
}

pub fn kernel_dir(known: &Known) -> PathBuf {
    root().join("kernels").join(known.slug())
}

/// What was fetched for a known kernel.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Manifest {
    pub name: String,
    pub package: String,
    /// The package's Debian version (`6.1.192-2`).
    pub package_version: String,
    pub release: String,
    pub version: String,
    /// The image, relative to the kernel's directory.
    pub image: PathBuf,
    /// Seconds since the epoch.
    pub fetched_at: u64,
}

impl Manifest {
    pub fn image_path(&self, dir: &Path) -> PathBuf {
        dir.join(&self.image)
    }
}

/// The manifest of a fetched kernel, or None if it was never fetched (or
/// its fetch did not finish: the manifest is written last).
pub fn read_manifest(known: &Known) -> Result<Option<Manifest>> {
    let path = kernel_dir(known).join("manifest.json");
    match std::fs::read_to_string(&path) {
        Ok(text) => serde_json::from_str(&text)
            .map(Some)
            .map_err(|e| Error::Failed(format!("{}: {e} (remove the directory and fetch again)", path.display()))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(Error::io("reading", &path, e)),
    }
}

pub fn write_manifest(dir: &Path, manifest: &Manifest) -> Result<()> {
    let path = dir.join("manifest.json");
    let tmp = dir.join(".manifest.json.tmp");
    let text = serde_json::to_string_pretty(manifest).map_err(|e| Error::Failed(e.to_string()))?;
    std::fs::write(&tmp, text + "\n").map_err(|e| Error::io("writing", &tmp, e))?;
    std::fs::rename(&tmp, &path).map_err(|e| Error::io("renaming", &path, e))
}
