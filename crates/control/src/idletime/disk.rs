//! Which disk `--resource disk[:DEV]` means: a block device by name
//! (`vda`, or a partition `vda1`, whose disk is taken), or by default the
//! disk under the root file system.

use irqlab_host::error::{Error, Result};
use std::path::Path;

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Disk {
    pub name: String,
    pub major: u32,
    pub minor: u32,
}

fn parse_dev(text: &str) -> Option<(u32, u32)> {
    let (a, b) = text.trim().split_once(':')?;
    Some((a.parse().ok()?, b.parse().ok()?))
}

/// The whole disk of the block device whose sysfs directory is `dir`.
fn disk_of_sysfs(dir: &Path) -> Result<Disk> {
    let dir = std::fs::canonicalize(dir).map_err(|e| Error::io(format!("reading {}", dir.display()), e))?;
    // A partition's directory sits inside its disk's.
    let disk_dir = if dir.join("partition").exists() { dir.parent().map(Path::to_path_buf).unwrap_or(dir) } else { dir };
    let dev = std::fs::read_to_string(disk_dir.join("dev")).map_err(|e| Error::io(format!("reading {}/dev", disk_dir.display()), e))?;
    let (major, minor) =
        parse_dev(&dev).ok_or_else(|| Error::Failed(format!("{}/dev: unreadable `{}`", disk_dir.display(), dev.trim())))?;
    let name = disk_dir.file_name().and_then(|n| n.to_str()).unwrap_or("?").to_string();
    Ok(Disk { name, major, minor })
}

/// The disk named `name`, or (None) the one under `/`. A name that is no
/// block device is an error naming it and the devices there are (exit 2).
pub fn resolve(name: Option<&str>) -> Result<Disk> {
    match name {
        Some(name) => {
            let dir = Path::new("/sys/class/block").join(name);
            if name.contains('/') || !dir.exists() {
                let mut known: Vec<String> = std::fs::read_dir("/sys/block")
                    .map(|d| d.flatten().filter_map(|e| e.file_name().to_str().map(String::from)).collect())
                    .unwrap_or_default();
                known.sort();
                return Err(Error::Invalid(format!("--resource disk:{name}: no block device {name} here (disks: {})", known.join(", "))));
            }
            disk_of_sysfs(&dir)
        }
        None => {
            use std::os::unix::fs::MetadataExt;
            let dev = std::fs::metadata("/").map_err(|e| Error::io("stat /", e))?.dev();
            let (major, minor) = (nix::sys::stat::major(dev) as u32, nix::sys::stat::minor(dev) as u32);
            let dir = format!("/sys/dev/block/{major}:{minor}");
            if !Path::new(&dir).exists() {
                return Err(Error::Invalid(format!(
                    "--resource disk: the root file system is on device {major}:{minor}, which is no block device; name one (disk:DEV)"
                )));
            }
            disk_of_sysfs(Path::new(&dir))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_disk_is_named() {
        let e = resolve(Some("nosuchdisk0")).unwrap_err();
        assert_eq!(e.exit_code(), 2);
        assert!(e.to_string().contains("disk:nosuchdisk0: no block device nosuchdisk0"), "{e}");
        assert_eq!(parse_dev("254:0\n"), Some((254, 0)));
    }
}
