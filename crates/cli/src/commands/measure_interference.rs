//! Placeholder until this command is built; see the open issues.

use crate::error::{CliError, Status};

#[derive(clap::Args)]
pub struct Args {}

pub fn run(_args: Args) -> Result<Status, CliError> {
    Err(CliError::Failed("this command is not built yet".into()))
}
