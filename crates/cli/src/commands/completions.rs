//! `irqlab completions SHELL`: the shell's completion script on stdout,
//! generated from the same clap definitions that parse the flags, so it
//! cannot drift from them.

use crate::error::{CliError, Status};
use clap_complete::Shell;

#[derive(clap::Args)]
#[command(after_help = "Install, e.g.:\n  \
    bash: irqlab completions bash > /etc/bash_completion.d/irqlab\n  \
    zsh:  irqlab completions zsh > \"${fpath[1]}/_irqlab\"\n  \
    fish: irqlab completions fish > ~/.config/fish/completions/irqlab.fish")]
pub struct Args {
    /// The shell to write the completion script for
    #[arg(value_enum)]
    pub shell: Shell,
}

pub fn run(args: Args, cli: &mut clap::Command) -> Result<Status, CliError> {
    let mut script = Vec::new();
    clap_complete::generate(args.shell, cli, "irqlab", &mut script);
    crate::output::print(&String::from_utf8_lossy(&script))?;
    Ok(Status::Success)
}
