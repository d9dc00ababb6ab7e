//! `irqlab stimulus ...`: external stimulus/response latency.

use crate::error::{CliError, Status};

#[derive(clap::Subcommand)]
pub enum Command {
    /// Target side: answer each stimulus at once
    Respond {},
    /// Generator side: send stimuli and time the responses
    Run {},
}

pub fn run(_command: Command) -> Result<Status, CliError> {
    Err(CliError::Failed("this command is not built yet".into()))
}
