//! One error type for the binary, and the exit codes of `docs/conventions.md`:
//! 0 ok, 1 "not schedulable" or a run failed, 2 bad input or usage,
//! 3 missing privilege or kernel feature.
//!
//! A run stopped by SIGINT or SIGTERM exits 1 ("the run did not complete"),
//! whatever the command: it still writes what it has, marked
//! `"complete": false`, and [`Status::exit_code`] is the one place that
//! turns the stop into the status, so no command can forget it.

use irqlab_analysis::InputError;
use std::path::{Path, PathBuf};

/// How a command that ran to the end came out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// Exit 0: schedulable, every relation held, measurement complete.
    Success,
    /// Exit 1: the analysis says "not schedulable", or a relation failed.
    Negative,
    /// A command run elsewhere (`lab run`'s guest) ended with this status.
    Exit(i32),
}

impl Status {
    pub fn from_ok(ok: bool) -> Self {
        if ok {
            Status::Success
        } else {
            Status::Negative
        }
    }

    /// The process's exit status: 1 for a run a signal stopped, even when
    /// the command itself saw nothing wrong with its partial result.
    pub fn exit_code(self) -> i32 {
        match self {
            Status::Success if !crate::signal::interrupted() => 0,
            Status::Exit(code) if !crate::signal::interrupted() => code,
            _ => 1,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// Bad input in a file or flag, with its place when known. Exit 2.
    #[error(transparent)]
    Input(#[from] InputError),
    /// A flag or argument that makes no sense. Exit 2.
    #[error("{0}")]
    Usage(String),
    /// Missing capability, privilege or kernel feature. Exit 3.
    #[error("{0}")]
    Privilege(String),
    /// The run itself failed. Exit 1.
    #[error("{0}")]
    Failed(String),
    /// Reading or writing a file failed.
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    /// Writing results to stdout failed (full disk, closed pipe). Exit 1.
    #[error("writing to stdout: {0}")]
    Stdout(std::io::Error),
}

/// A library error keeps its exit code: 3 for a missing capability,
/// kernel feature or tool, 2 for an argument that cannot be honoured, 1
/// otherwise.
fn by_exit_code(code: i32, text: String) -> CliError {
    match code {
        3 => CliError::Privilege(text),
        2 => CliError::Usage(text),
        _ => CliError::Failed(text),
    }
}

impl From<irqlab_host::Error> for CliError {
    fn from(err: irqlab_host::Error) -> Self {
        by_exit_code(err.exit_code(), err.to_string())
    }
}

impl From<irqlab_lab::Error> for CliError {
    fn from(err: irqlab_lab::Error) -> Self {
        by_exit_code(err.exit_code(), err.to_string())
    }
}

impl CliError {
    pub fn io(path: &Path, source: std::io::Error) -> Self {
        CliError::Io { path: path.to_path_buf(), source }
    }

    pub fn exit_code(&self) -> i32 {
        match self {
            CliError::Failed(_) | CliError::Stdout(_) => 1,
            CliError::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound => 2,
            CliError::Io { .. } => 1,
            CliError::Input(_) | CliError::Usage(_) => 2,
            CliError::Privilege(_) => 3,
        }
    }

    /// The message on stderr, values the user gave clipped to a line. A
    /// reader that went away (`| head`) is told nothing: it left on purpose.
    pub fn print(&self) {
        if let CliError::Stdout(e) = self {
            if e.kind() == std::io::ErrorKind::BrokenPipe {
                return;
            }
        }
        eprintln!("error: {}", irqlab_analysis::input::clip_echoes(&self.to_string()));
        if let CliError::Input(InputError { location: Some(loc), .. }) = self {
            eprintln!("  at {loc}");
        }
    }
}
