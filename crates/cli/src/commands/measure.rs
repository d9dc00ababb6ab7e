//! `irqlab measure ...`: live measurements on this machine.

use super::{measure_accounting, measure_interference, measure_latency};
use crate::error::{CliError, Status};

#[derive(clap::Subcommand)]
pub enum Command {
    /// Interference over every window length (the load-bounds paper's probe)
    Interference(measure_interference::Args),
    /// Per-process hard-IRQ and softirq accounting with BPF
    Accounting(measure_accounting::Args),
    /// Timer latency, cyclictest's method
    Latency(measure_latency::Args),
}

pub fn run(command: Command) -> Result<Status, CliError> {
    match command {
        Command::Interference(a) => measure_interference::run(a),
        Command::Accounting(a) => measure_accounting::run(a),
        Command::Latency(a) => measure_latency::run(a),
    }
}

/// A library error names the parameter (`cpu 3: not an online CPU`); the
/// user typed a flag, so the message names that instead (`--cpu 3: ...`).
/// `flags` pairs parameter names with their flags.
pub(super) fn name_flags(err: irqlab_host::Error, flags: &[(&str, &str)]) -> irqlab_host::Error {
    match err {
        irqlab_host::Error::Invalid(message) => {
            let renamed = flags.iter().find_map(|(parameter, flag)| {
                message.strip_prefix(parameter).filter(|rest| rest.starts_with(' ')).map(|rest| format!("{flag}{rest}"))
            });
            irqlab_host::Error::Invalid(renamed.unwrap_or(message))
        }
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::name_flags;
    use irqlab_host::Error;

    #[test]
    fn parameters_become_flags_in_messages() {
        let flags = [("cpu", "--cpu"), ("max_gaps", "--max-gaps")];
        let named = |m: &str| name_flags(Error::Invalid(m.into()), &flags).to_string();
        assert_eq!(named("cpu 3: not an online CPU (online: 0-1)"), "--cpu 3: not an online CPU (online: 0-1)");
        assert_eq!(named("max_gaps 9: needs 1 MB"), "--max-gaps 9: needs 1 MB");
        // Only a whole word at the start.
        assert_eq!(named("cpus are busy"), "cpus are busy");
        assert_eq!(name_flags(Error::Failed("cpu 3 gone".into()), &flags).to_string(), "cpu 3 gone");
    }
}
