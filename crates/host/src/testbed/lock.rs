//! Cross-process coordination of testbed users with flock(2): one lock
//! serialises setup and teardown, another counts users (each guard holds it
//! shared; whoever can upgrade it to exclusive is the last one).

use crate::error::{Error, Result};
use crate::flock::flock;
use std::fs::File;

const SETUP: &str = "/run/irqlab/testbed.setup.lock";
const USERS: &str = "/run/irqlab/testbed.users";

fn open(path: &str) -> Result<File> {
    crate::flock::open(path).map_err(|e| Error::io(format!("opening {path}"), e))
}

/// Held while the testbed is created or removed.
pub struct SetupLock(#[allow(dead_code)] File); // held, never read: closing releases it

impl SetupLock {
    pub fn acquire() -> Result<SetupLock> {
        let file = open(SETUP)?;
        flock(&file, libc::LOCK_EX).map_err(|e| Error::io(format!("locking {SETUP}"), e))?;
        Ok(SetupLock(file))
    }

    /// A shared hold, to look at the testbed while nobody creates or
    /// removes it (None while someone does). Lookers share it, so two
    /// processes inspecting at once do not make each other see nothing.
    pub fn try_inspect() -> Option<SetupLock> {
        let file = open(SETUP).ok()?;
        flock(&file, libc::LOCK_SH | libc::LOCK_NB).ok()?;
        Some(SetupLock(file))
    }
}

/// One user's share of the testbed (released when dropped: closing the
/// file releases the lock).
#[derive(Debug)]
pub struct UsersLock(File);

impl UsersLock {
    pub fn join() -> Result<UsersLock> {
        let file = open(USERS)?;
        flock(&file, libc::LOCK_SH).map_err(|e| Error::io(format!("locking {USERS}"), e))?;
        Ok(UsersLock(file))
    }

    /// Whether no other guard (in any process) still uses the testbed.
    pub fn last_user(self) -> bool {
        flock(&self.0, libc::LOCK_EX | libc::LOCK_NB).is_ok()
    }
}

/// Whether some guard (in any process) holds the testbed right now.
pub fn in_use() -> bool {
    match open(USERS) {
        Ok(file) => flock(&file, libc::LOCK_EX | libc::LOCK_NB).is_err(),
        Err(_) => false,
    }
}
