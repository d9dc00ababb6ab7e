//! `irqlab bench sim`: the simulator's speed on its built-in benchmark
//! (100 s of a ping every 10 us plus two periodic RT tasks): events per
//! second and simulated seconds per wall second. The criterion bench
//! (`crates/sim/benches/ping_flood.rs`) runs the same scenario.

use crate::error::{CliError, Status};
use crate::output::json_or_summary;
use irqlab_analysis::format_ns;
use irqlab_sim::bench::{run_speed, BENCH_DURATION_NS};
use irqlab_sim::RunError;
use std::path::PathBuf;

#[derive(clap::Subcommand)]
pub enum Command {
    /// Simulator speed on the 100 s ping-flood benchmark scenario
    Sim(SimArgs),
}

#[derive(clap::Args)]
pub struct SimArgs {
    /// Simulated duration, e.g. "10s" (default: the benchmark's 100 s)
    #[arg(long, value_name = "D", value_parser = crate::flags::positive_duration_ns)]
    pub duration: Option<u64>,
    /// Also write the figures as JSON (irqlab/bench-sim/v1) ("-": to
    /// stdout, instead of the summary)
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
}

pub fn run(cmd: Command) -> Result<Status, CliError> {
    match cmd {
        Command::Sim(a) => sim(a),
    }
}

fn sim(args: SimArgs) -> Result<Status, CliError> {
    let duration = args.duration.unwrap_or(BENCH_DURATION_NS);
    let stop = crate::signal::stop_flag();
    let bar = crate::progress::bar(duration / 1_000_000, "simulating");
    let report = run_speed(duration, &stop, |now| bar.set_position(now / 1_000_000)).map_err(|e| match e {
        RunError::Input(e) => CliError::Input(e),
        RunError::Sim(e) => CliError::Failed(e.to_string()),
    })?;
    bar.finish_and_clear();
    json_or_summary(args.json.as_deref(), &report, |r| {
        format!(
            "ping-flood {}: {} events in {:.3} s wall = {:.2} M events/s, {:.1} simulated s per wall s{}\n",
            format_ns(r.simulated_ns),
            r.events,
            r.wall_ns as f64 / 1e9,
            r.events_per_second / 1e6,
            r.simulated_seconds_per_wall_second,
            if r.complete { "" } else { " (stopped early)" }
        )
    })?;
    Ok(Status::Success)
}
