//! Files the next boot reads ([`super::Object::BootFile`]): a GRUB
//! drop-in that adds kernel command-line options, a systemd unit. Unlike
//! every other object they outlast the boot, so their entries live in the
//! durable journal ([`super::DURABLE_DIR`]) and a revert after a reboot
//! still finds them. The value is the whole content, or absent.

use crate::error::{Error, Result};
use std::io::Write;
use std::path::Path;

/// Where GRUB on Debian and its derivatives takes drop-ins from
/// (`/etc/default/grub` sources `grub.d/*.cfg`).
pub const GRUB_DROP_IN_DIR: &str = "/etc/default/grub.d";

/// The file's content, or `None` when there is no such file.
pub fn read(path: &str) -> Result<Option<String>> {
    match std::fs::read_to_string(path) {
        Ok(text) => Ok(Some(text)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(Error::io(format!("reading {path}"), e)),
    }
}

/// Writes the content atomically (temp file, fsync, rename: a crash
/// leaves the old file or the new one) or removes the file; then, for a
/// GRUB drop-in, regenerates GRUB's configuration where `update-grub` is
/// installed, so that the next boot takes the change (and its undo).
pub fn write(path: &str, content: Option<&str>) -> Result<()> {
    let file = Path::new(path);
    match content {
        None => match std::fs::remove_file(file) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(Error::io(format!("removing {path}"), e)),
        },
        Some(text) => {
            let tmp = file.with_extension("irqlab-tmp");
            let write = || -> std::io::Result<()> {
                if let Some(dir) = file.parent() {
                    std::fs::create_dir_all(dir)?;
                }
                let mut f = std::fs::File::create(&tmp)?;
                f.write_all(text.as_bytes())?;
                f.sync_all()?;
                std::fs::rename(&tmp, file)
            };
            write().map_err(|e| Error::io(format!("writing {path}"), e))?;
        }
    }
    if is_grub_drop_in(path) {
        regenerate_grub()?;
    }
    Ok(())
}

pub fn is_grub_drop_in(path: &str) -> bool {
    Path::new(path).parent() == Some(Path::new(GRUB_DROP_IN_DIR))
}

/// `update-grub`, where installed (on a machine whose kernel is started
/// by something else, e.g. a QEMU guest given `-kernel`, there is none and
/// the drop-in waits for one).
pub fn regenerate_grub() -> Result<()> {
    let Some(update) = crate::privilege::on_path("update-grub") else { return Ok(()) };
    let out = std::process::Command::new(&update).output().map_err(|e| Error::io(format!("running {}", update.display()), e))?;
    if !out.status.success() {
        return Err(Error::Failed(format!(
            "{} failed ({}): {}",
            update.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(())
}

/// How a content shows in a table: `absent`, or its first line and size.
pub fn describe(content: &Option<String>) -> String {
    match content {
        None => "absent".into(),
        Some(text) => {
            let first = text.lines().find(|l| !l.trim().is_empty() && !l.starts_with('#')).unwrap_or("");
            format!("`{first}` ({} lines)", text.lines().count())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_is_written_whole_and_removed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/irqlab.cfg").display().to_string();
        assert_eq!(read(&path).unwrap(), None);
        write(&path, Some("# a comment\nA=\"b\"\n")).unwrap();
        assert_eq!(read(&path).unwrap().as_deref(), Some("# a comment\nA=\"b\"\n"));
        assert_eq!(describe(&read(&path).unwrap()), "`A=\"b\"` (2 lines)");
        write(&path, None).unwrap();
        assert_eq!(read(&path).unwrap(), None);
        // Removing what is not there is not an error: a revert is idempotent.
        write(&path, None).unwrap();
        assert_eq!(describe(&None), "absent");
    }

    #[test]
    fn only_files_in_grubs_drop_in_directory_regenerate_grub() {
        assert!(is_grub_drop_in("/etc/default/grub.d/irqlab.cfg"));
        assert!(!is_grub_drop_in("/etc/default/grub"));
        assert!(!is_grub_drop_in("/etc/systemd/system/irqlab-profile.service"));
    }
}
