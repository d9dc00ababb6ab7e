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
