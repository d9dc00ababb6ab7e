//! `lab run --root DIR`: a guest that boots a root file system of its own
//! with systemd as init, so that what irqlab installs for every boot
//! (`control install`) meets a real boot, and a second `lab run` of the
//! same root is a reboot.
//!
//! virtme-ng boots it (`--root DIR --rw --systemd`): the directory is the
//! guest's `/`, shared writable over 9p, so whatever the guest writes
//! outside its tmpfs mounts (`/run`, `/tmp`, `/var/log`, `/var/cache`) is
//! there at the next boot. Nothing runs the command for us under systemd,
//! so before the boot this module writes into the root:
//!
//! - this `irqlab` executable as `/usr/local/bin/irqlab` (the guest runs
//!   the build under test, whatever the root was made with);
//! - the kernel's modules under `/lib/modules/RELEASE` (virtme-ng looks
//!   for them in the guest's root), hard-linked from the cache;
//! - a run directory under [`RUNS`] (the host streams its files as the
//!   guest writes them) and a unit, [`UNIT`], wanted by
//!   `multi-user.target` and ordered after it and after irqlab's own
//!   installed unit, that runs the command and then powers the guest off
//!   (a clean shutdown: services are stopped, as at a real reboot).
//!
//! The unit and run directory are removed when the guest has ended, so
//! the root boots without them next time.

use crate::{Error, Result};
use std::path::{Path, PathBuf};

/// The unit that runs the command, inside the root.
pub const UNIT: &str = "etc/systemd/system/irqlab-lab-command.service";
/// `multi-user.target` wants it (a symlink, as `systemctl enable` makes).
pub const WANTS: &str = "etc/systemd/system/multi-user.target.wants/irqlab-lab-command.service";
/// Run directories, inside the root (not a tmpfs in the guest).
pub const RUNS: &str = "var/lib/irqlab-lab";

/// A root prepared for one boot; dropping it removes the unit and the
/// run directory.
pub struct PreparedRoot {
    pub dir: PathBuf,
    /// The run directory as the host sees it.
    pub share: tempfile::TempDir,
    /// The same directory as the guest sees it.
    pub guest_share: PathBuf,
}

impl Drop for PreparedRoot {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(self.dir.join(WANTS));
        let _ = std::fs::remove_file(self.dir.join(UNIT));
    }
}

/// Checks that `dir` is a root file system systemd can boot: exit 2
/// naming what is missing otherwise.
pub fn check(dir: &Path) -> Result<PathBuf> {
    let canonical = std::fs::canonicalize(dir).map_err(|e| Error::Usage(format!("--root {}: {e}", dir.display())))?;
    if canonical == Path::new("/") {
        return Err(Error::Usage(
            "--root /: this machine's own root cannot be booted writable; give a root made for guests (`make lab-root`)".into(),
        ));
    }
    for needed in ["lib/systemd/systemd", "sbin/init", "bin/sh"] {
        if std::fs::symlink_metadata(canonical.join(needed)).is_err() {
            return Err(Error::Usage(format!(
                "--root {}: not a root file system with systemd (no {needed} in it); `make lab-root` builds one",
                dir.display()
            )));
        }
    }
    Ok(canonical)
}

/// Writes what the boot needs into `dir` (see the module's doc) and
/// returns the run directory.
pub fn prepare(dir: &Path, modules: Option<&Path>, release: &str) -> Result<PreparedRoot> {
    install_irqlab(dir)?;
    if let Some(modules) = modules {
        install_modules(dir, modules, release)?;
    }
    let runs = dir.join(RUNS);
    std::fs::create_dir_all(&runs).map_err(|e| Error::io("creating", &runs, e))?;
    let share =
        tempfile::Builder::new().prefix("run-").tempdir_in(&runs).map_err(|e| Error::io("creating a run directory in", &runs, e))?;
    let guest_share = Path::new("/").join(RUNS).join(share.path().file_name().unwrap_or_default());
    let prepared = PreparedRoot { dir: dir.to_path_buf(), share, guest_share };
    write_file(&dir.join(UNIT), &unit_text(&prepared.guest_share.join("guest.sh")))?;
    let wants = dir.join(WANTS);
    if let Some(parent) = wants.parent() {
        std::fs::create_dir_all(parent).map_err(|e| Error::io("creating", parent, e))?;
    }
    let _ = std::fs::remove_file(&wants);
    std::os::unix::fs::symlink(Path::new("/").join(UNIT), &wants).map_err(|e| Error::io("linking", &wants, e))?;
    Ok(prepared)
}

/// The unit: after everything a boot starts (multi-user.target, and
/// irqlab's installed unit, which is ready once its profile is in force),
/// so the command sees the machine as a boot leaves it.
fn unit_text(script: &Path) -> String {
    format!(
        "# Written by irqlab lab run --root for one boot; removed when the guest ends.\n\
         [Unit]\n\
         Description=irqlab lab run: the command\n\
         After=multi-user.target irqlab-profile.service\n\
         \n\
         [Service]\n\
         Type=oneshot\n\
         ExecStart=/bin/sh {}\n\
         TimeoutStartSec=infinity\n\
         StandardOutput=journal+console\n",
        script.display()
    )
}

/// This executable, as `/usr/local/bin/irqlab` in the root (atomically:
/// a guest never sees half of it).
fn install_irqlab(dir: &Path) -> Result<()> {
    let me = std::env::current_exe().map_err(|e| Error::Failed(format!("finding this executable: {e}")))?;
    let bin = dir.join("usr/local/bin");
    std::fs::create_dir_all(&bin).map_err(|e| Error::io("creating", &bin, e))?;
    let tmp = bin.join(".irqlab.tmp");
    std::fs::copy(&me, &tmp).map_err(|e| Error::io("copying irqlab into", &bin, e))?;
    std::fs::rename(&tmp, bin.join("irqlab")).map_err(|e| Error::io("installing irqlab in", &bin, e))
}

/// The kernel's modules under the root's `/lib/modules/RELEASE`:
/// hard links where the cache is on the same file system, else copies.
fn install_modules(dir: &Path, modules: &Path, release: &str) -> Result<()> {
    let target = dir.join("lib/modules").join(release);
    if target.join("modules.dep").is_file() {
        return Ok(());
    }
    let tmp = dir.join("lib/modules").join(format!(".{release}.tmp"));
    let _ = std::fs::remove_dir_all(&tmp);
    link_tree(modules, &tmp)?;
    std::fs::rename(&tmp, &target).map_err(|e| Error::io("installing modules in", &target, e))
}

fn link_tree(from: &Path, to: &Path) -> Result<()> {
    std::fs::create_dir_all(to).map_err(|e| Error::io("creating", to, e))?;
    for entry in std::fs::read_dir(from).map_err(|e| Error::io("reading", from, e))? {
        let entry = entry.map_err(|e| Error::io("reading", from, e))?;
        let (src, dst) = (entry.path(), to.join(entry.file_name()));
        let kind = entry.file_type().map_err(|e| Error::io("reading", &src, e))?;
        if kind.is_dir() {
            link_tree(&src, &dst)?;
        } else if kind.is_symlink() {
            let link = std::fs::read_link(&src).map_err(|e| Error::io("reading", &src, e))?;
            std::os::unix::fs::symlink(link, &dst).map_err(|e| Error::io("linking", &dst, e))?;
        } else if std::fs::hard_link(&src, &dst).is_err() {
            std::fs::copy(&src, &dst).map_err(|e| Error::io("copying", &src, e))?;
        }
    }
    Ok(())
}

fn write_file(path: &Path, text: &str) -> Result<()> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(|e| Error::io("creating", parent, e))?;
    }
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text).map_err(|e| Error::io("writing", &tmp, e))?;
    std::fs::rename(&tmp, path).map_err(|e| Error::io("writing", path, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fake_root() -> tempfile::TempDir {
        let root = tempfile::tempdir().unwrap();
        for f in ["lib/systemd/systemd", "sbin/init", "bin/sh"] {
            let p = root.path().join(f);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, "").unwrap();
        }
        root
    }

    #[test]
    fn a_directory_without_systemd_is_refused_naming_what_is_missing() {
        let root = tempfile::tempdir().unwrap();
        let err = check(root.path()).unwrap_err();
        assert_eq!(err.exit_code(), 2);
        assert!(err.to_string().contains("no lib/systemd/systemd"), "{err}");
        assert_eq!(check(Path::new("/")).unwrap_err().exit_code(), 2);
    }

    #[test]
    fn prepare_writes_the_unit_and_the_modules_and_drop_removes_the_unit() {
        let root = fake_root();
        let dir = check(root.path()).unwrap();
        let modules = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(modules.path().join("kernel/net")).unwrap();
        std::fs::write(modules.path().join("kernel/net/x.ko"), "ko").unwrap();
        std::fs::write(modules.path().join("modules.dep"), "").unwrap();
        let prepared = prepare(&dir, Some(modules.path()), "6.12.0-test").unwrap();
        assert!(dir.join("usr/local/bin/irqlab").is_file());
        assert_eq!(std::fs::read_to_string(dir.join("lib/modules/6.12.0-test/kernel/net/x.ko")).unwrap(), "ko");
        let unit = std::fs::read_to_string(dir.join(UNIT)).unwrap();
        let script = prepared.guest_share.join("guest.sh");
        assert!(prepared.guest_share.to_string_lossy().starts_with("/var/lib/irqlab-lab/run-"), "{}", prepared.guest_share.display());
        assert_eq!(dir.join(prepared.guest_share.strip_prefix("/").unwrap()), prepared.share.path());
        assert!(unit.contains(&format!("ExecStart=/bin/sh {}", script.display())), "{unit}");
        assert_eq!(std::fs::read_link(dir.join(WANTS)).unwrap(), Path::new("/").join(UNIT));
        let share = prepared.share.path().to_path_buf();
        drop(prepared);
        assert!(!dir.join(UNIT).exists() && std::fs::symlink_metadata(dir.join(WANTS)).is_err() && !share.exists());
    }
}
