//! flock(2) on files under /run/irqlab: how irqlab processes coordinate
//! what they share on the machine (the testbed, a lifted RT limit).

use std::fs::{File, OpenOptions};
use std::os::fd::AsRawFd;

/// Opens (creating) a lock file; its content is never read.
pub(crate) fn open(path: &str) -> std::io::Result<File> {
    OpenOptions::new().create(true).truncate(false).read(true).write(true).open(path)
}

/// `flock(file, op)`, retried when a signal interrupts it.
pub(crate) fn flock(file: &File, op: libc::c_int) -> std::io::Result<()> {
    loop {
        // SAFETY: flock on a descriptor the caller owns.
        if unsafe { libc::flock(file.as_raw_fd(), op) } == 0 {
            return Ok(());
        }
        let err = std::io::Error::last_os_error();
        if err.kind() != std::io::ErrorKind::Interrupted {
            return Err(err);
        }
    }
}
