//! `irqlab lab`: the kernels irqlab's users run, booted in a QEMU guest over
//! this machine's root file system (virtme-ng), so that irqlab can be run
//! and tested on each of them from one host.
//!
//! - [`catalog`]: the kernels it knows by name (`debian:6.1-rt`, ...) and
//!   kernel images given by path;
//! - [`image`]: what a kernel image says of itself (bzImage header);
//! - [`fetch`]: Debian's packages through apt, unpacked into the cache;
//! - [`accel`]: whether KVM actually runs a guest here, or emulation must;
//! - [`run`]: one command in one guest, its output streamed back and its
//!   exit status returned;
//! - [`root`]: a root file system of its own booted with systemd as init
//!   (`lab run --root`), where a second boot is a reboot;
//! - [`guest_group`]: the guest dies with the `lab run` that started it;
//!   a record of it under `/run/irqlab/lab` while it runs.
//!
//! Nothing on the host changes but the cache (`cache::root`) and that
//! record, removed when the guest ends.

pub mod accel;
pub mod cache;
pub mod catalog;
pub mod fetch;
pub mod guest_group;
pub mod image;
pub mod root;
pub mod run;
pub mod tools;

/// What can go wrong, with the exit code of `docs/conventions.md`.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A kernel name, path or option that makes no sense. Exit 2.
    #[error("{0}")]
    Usage(String),
    /// A missing tool or an unreachable archive. Exit 3.
    #[error("{0}")]
    Missing(String),
    /// The guest or a step of the host's work failed. Exit 1.
    #[error("{0}")]
    Failed(String),
}

impl Error {
    pub fn exit_code(&self) -> i32 {
        match self {
            Error::Usage(_) => 2,
            Error::Missing(_) => 3,
            Error::Failed(_) => 1,
        }
    }

    fn io(what: &str, path: &std::path::Path, err: std::io::Error) -> Self {
        Error::Failed(format!("{what} {}: {err}", path.display()))
    }
}

pub type Result<T> = std::result::Result<T, Error>;
