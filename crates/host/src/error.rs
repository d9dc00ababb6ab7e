//! The live crates' one error type. The CLI maps it onto the exit codes of `docs/conventions.md`
//! through [`Error::exit_code`]: 3 for a missing capability or kernel
//! feature, 2 for an argument the machine cannot honour, 1 for a run that
//! failed.

use std::io;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The process lacks a capability the operation needs. Exit 3.
    #[error("missing capability {capability}: needed to {purpose} (run as root or grant {capability})")]
    MissingPrivilege {
        /// Kernel name of the capability, e.g. `CAP_SYS_NICE`.
        capability: &'static str,
        /// What it was needed for, phrased as "to ...".
        purpose: String,
    },
    /// The kernel (or a tool it needs) lacks a feature. Exit 3.
    #[error("missing kernel feature {feature}: {detail}")]
    MissingKernelFeature { feature: String, detail: String },
    /// An argument that makes no sense on this machine (CPU out of range,
    /// target outside the testbed, ...). Exit 2.
    #[error("{0}")]
    Invalid(String),
    /// The run itself failed. Exit 1.
    #[error("{0}")]
    Failed(String),
    /// A system call or file access failed. Exit 1.
    #[error("{what}: {source}")]
    Io { what: String, source: io::Error },
}

impl Error {
    /// Wraps an I/O error with what was being done.
    pub fn io(what: impl Into<String>, source: io::Error) -> Self {
        Error::Io { what: what.into(), source }
    }

    /// Wraps an errno from `nix` with what was being done; EPERM/EACCES
    /// from an unprivileged call stay I/O errors (the capability checks in
    /// [`crate::privilege`] run first and name the capability).
    pub fn sys(what: impl Into<String>, errno: nix::errno::Errno) -> Self {
        Error::Io { what: what.into(), source: io::Error::from_raw_os_error(errno as i32) }
    }

    /// The exit code of `docs/conventions.md` for this error.
    pub fn exit_code(&self) -> i32 {
        match self {
            Error::MissingPrivilege { .. } | Error::MissingKernelFeature { .. } => 3,
            Error::Invalid(_) => 2,
            Error::Failed(_) | Error::Io { .. } => 1,
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
