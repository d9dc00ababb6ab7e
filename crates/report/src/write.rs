//! Atomic output: every regular file irqlab writes appears whole or not at
//! all, and nothing that is not a regular file is ever replaced.
//!
//! What an output path may be, and what happens:
//! - a regular file, or nothing yet: a temporary file in the same directory
//!   is written, synced and renamed over it. A new file gets the mode the
//!   umask gives (0666 & !umask), as `>` in a shell would; a replaced file
//!   keeps its mode and, where the writer may set it (root), its owner.
//! - a device node, FIFO or socket: written through, in place. Renaming
//!   over `/dev/null` (as root) would destroy it, and a FIFO's reader is
//!   waiting on that FIFO, not on a new file of the same name.
//! - a symbolic link: followed. The link stays; its final target is
//!   handled as above (a regular target is replaced atomically in its own
//!   directory, a device written through). Refusing links would break the
//!   common `results/latest.json -> run-42.json` layout.
//! - a directory: refused.

use std::fs::{Metadata, Permissions};
use std::io::Write;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// The kernel's own limit on links followed in one lookup (MAXSYMLINKS).
const MAX_LINKS: usize = 40;

/// Writes `bytes` to `path` as the module documentation describes.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let target = follow_links(path)?;
    match std::fs::metadata(&target) {
        Ok(meta) if meta.is_file() => replace(&target, bytes, Some(&meta)),
        Ok(meta) if meta.is_dir() => Err(std::io::Error::other("is a directory")),
        Ok(_) => std::fs::OpenOptions::new().write(true).open(&target)?.write_all(bytes),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => replace(&target, bytes, None),
        Err(e) => Err(e),
    }
}

/// Serialises `value` as pretty JSON with a trailing newline and writes it
/// atomically.
pub fn write_json<T: serde::Serialize>(path: &Path, value: &T) -> std::io::Result<()> {
    let mut text = serde_json::to_string_pretty(value).map_err(std::io::Error::other)?;
    text.push('\n');
    write_atomic(path, text.as_bytes())
}

/// The path a write to `path` lands on: its chain of symbolic links
/// followed to the end (which need not exist yet). Only the last component
/// matters: a rename replaces the last component, and links in the
/// directories above it are resolved by the kernel on every access.
pub fn follow_links(path: &Path) -> std::io::Result<PathBuf> {
    let mut current = path.to_path_buf();
    for _ in 0..MAX_LINKS {
        match std::fs::symlink_metadata(&current) {
            Ok(meta) if meta.file_type().is_symlink() => {
                let target = std::fs::read_link(&current)?;
                current = match current.parent() {
                    Some(dir) if target.is_relative() => dir.join(target),
                    _ => target,
                };
            }
            _ => return Ok(current),
        }
    }
    Err(std::io::Error::other(format!("more than {MAX_LINKS} symbolic links in a chain")))
}

/// Temp file + rename over `target` (a regular file or nothing).
fn replace(target: &Path, bytes: &[u8], existing: Option<&Metadata>) -> std::io::Result<()> {
    let dir = match target.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    std::fs::create_dir_all(dir)?;
    // The mode goes to open(2), which applies the umask: a new file ends up
    // as a shell redirection would make it, not tempfile's private 0600.
    let mut tmp = tempfile::Builder::new().prefix(".irqlab-").permissions(Permissions::from_mode(0o666)).tempfile_in(dir)?;
    if let Some(meta) = existing {
        // Owner first: chown clears set-id bits, the chmod puts them back.
        // Only root may give a file away; anyone else replacing another
        // user's file (in a directory they may write) ends up owning the
        // new one, as with any editor's save.
        match std::os::unix::fs::fchown(tmp.as_file(), Some(meta.uid()), Some(meta.gid())) {
            Err(e) if e.kind() != std::io::ErrorKind::PermissionDenied => return Err(e),
            _ => {}
        }
        tmp.as_file().set_permissions(Permissions::from_mode(meta.mode() & 0o7777))?;
    }
    tmp.write_all(bytes)?;
    tmp.as_file().sync_all()?;
    tmp.persist(target).map_err(|e| e.error)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::FileTypeExt;

    fn umask() -> u32 {
        let status = std::fs::read_to_string("/proc/self/status").unwrap();
        let line = status.lines().find_map(|l| l.strip_prefix("Umask:")).unwrap();
        u32::from_str_radix(line.trim(), 8).unwrap()
    }

    fn mode(path: &Path) -> u32 {
        std::fs::metadata(path).unwrap().mode() & 0o7777
    }

    #[test]
    fn writes_whole_file_and_replaces_old_one() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/out.json");
        write_json(&path, &serde_json::json!({"a": 1})).unwrap();
        write_atomic(&path, b"new").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"new");
        assert_eq!(std::fs::read_dir(path.parent().unwrap()).unwrap().count(), 1);
    }

    #[test]
    fn new_files_get_the_umask_mode_and_replaced_files_keep_theirs() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.txt");
        write_atomic(&path, b"1").unwrap();
        assert_eq!(mode(&path), 0o666 & !umask());
        std::fs::set_permissions(&path, Permissions::from_mode(0o640)).unwrap();
        write_atomic(&path, b"2").unwrap();
        assert_eq!(mode(&path), 0o640);
    }

    #[test]
    fn links_are_followed_and_kept() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("real.txt");
        std::fs::write(&real, b"old").unwrap();
        std::fs::set_permissions(&real, Permissions::from_mode(0o604)).unwrap();
        let link = dir.path().join("link.txt");
        std::os::unix::fs::symlink("real.txt", &link).unwrap();
        write_atomic(&link, b"new").unwrap();
        assert!(std::fs::symlink_metadata(&link).unwrap().file_type().is_symlink());
        assert_eq!(std::fs::read(&real).unwrap(), b"new");
        assert_eq!(mode(&real), 0o604);
        // A dangling link is followed too: the file appears at its target.
        let dangling = dir.path().join("dangling");
        std::os::unix::fs::symlink("sub/made.txt", &dangling).unwrap();
        write_atomic(&dangling, b"x").unwrap();
        assert_eq!(std::fs::read(dir.path().join("sub/made.txt")).unwrap(), b"x");
        // A loop is an error, not a hang.
        std::os::unix::fs::symlink("loop", dir.path().join("loop")).unwrap();
        assert!(write_atomic(&dir.path().join("loop"), b"x").is_err());
    }

    #[test]
    fn devices_are_written_through_and_directories_refused() {
        write_atomic(Path::new("/dev/null"), b"discarded").unwrap();
        assert!(std::fs::metadata("/dev/null").unwrap().file_type().is_char_device());
        let dir = tempfile::tempdir().unwrap();
        assert!(write_atomic(dir.path(), b"x").is_err());
    }
}
