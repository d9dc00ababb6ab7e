//! `irqlab`: argument parsing and wiring only. Every command lives in
//! `commands/<name>.rs`, turns its flags into calls on the library crates, and
//! writes their results; no analysis, simulation or measurement logic here.

mod commands;
mod error;
mod examples;
mod flags;
mod output;
mod progress;
mod signal;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};
use commands::*;

/// Measure, model and simulate the CPU time that interrupts steal from
/// time-critical tasks on Linux.
#[derive(Parser)]
#[command(name = "irqlab", version, long_about = None, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Schedulability analysis of a task set (RTA, load test, EDF)
    Analyze(analyze::Args),
    /// Demand and load bounds of one periodic task over a window range
    Bound(bound::Args),
    /// Fit the load-bounds paper's hyperbola to a measured interference curve
    Fit(fit::Args),
    /// Run a simulation scenario
    Sim(sim::Args),
    /// Speed benchmarks (the simulator on its 100 s ping-flood scenario)
    #[command(subcommand)]
    Bench(bench::Command),
    /// Reproduce a paper's experiments in simulation, paper beside simulated
    Reproduce(reproduce::Args),
    /// Measure on this machine: interference, IRQ accounting, latency
    #[command(subcommand)]
    Measure(measure::Command),
    /// Timer latency for as long as asked, each spike past --threshold
    /// explained by what ran (a flight recorder of every measured CPU)
    Watch(watch::Args),
    /// The network-namespace testbed (hosts irqlab-a and irqlab-b)
    Testbed(testbed::Args),
    /// Send traffic between testbed hosts
    Traffic(traffic::Args),
    /// External stimulus/response latency measurement
    #[command(subcommand)]
    Stimulus(stimulus::Command),
    /// Put load on this machine (cpu, net, disk, hackbench-like)
    Load(load::Args),
    /// The idletime throughput model (foreground/background vs p and i)
    IdletimeModel(idletime_model::Args),
    /// What this machine lets irqlab measure, and the kernel settings that shape it
    Doctor(doctor::Args),
    /// How much interrupts take from tasks on this machine, where, and what
    /// to change: every measurement in one run, one page of findings
    Survey(survey::Args),
    /// Serve the BPF accounting's figures on /metrics for Prometheus (and
    /// optionally the probe's max load and timer latency, measured beside it)
    Export(export::Args),
    /// Change the machine through the journal (driver threads under a
    /// policy), see what irqlab changed, undo what a killed run left
    #[command(subcommand)]
    Control(control::Command),
    /// Boot the kernels irqlab's users run (Debian 6.1, 6.12, PREEMPT_RT) in
    /// a QEMU guest and run irqlab inside
    #[command(subcommand)]
    Lab(lab::Command),
    /// Shell completion script (bash, zsh, fish, elvish, powershell) on stdout
    Completions(completions::Args),
    /// Man pages of irqlab and every subcommand (`make man`)
    #[command(hide = true)]
    Man(man::Args),
}

fn main() {
    // Each command's `--help` ends with its examples (`examples.rs`).
    let parsed = examples::attach(Cli::command()).try_get_matches().and_then(|m| Cli::from_arg_matches(&m));
    let cli = match parsed {
        Ok(cli) => cli,
        // A bad flag value is echoed in single quotes: clipped like every
        // other echo, so a 100 KB value costs a line, not 100 KB (exit 2).
        Err(e) if e.use_stderr() => {
            eprint!("{}", irqlab_analysis::input::clip_quoted(&e.render().to_string(), &['\'', '`', '"']));
            std::process::exit(e.exit_code());
        }
        Err(e) => e.exit(), // --help, --version
    };
    let result = match cli.command {
        Command::Analyze(a) => analyze::run(a),
        Command::Bound(a) => bound::run(a),
        Command::Fit(a) => fit::run(a),
        Command::Sim(a) => sim::run(a),
        Command::Bench(c) => bench::run(c),
        Command::Reproduce(a) => reproduce::run(a),
        Command::Measure(c) => measure::run(c),
        Command::Watch(a) => watch::run(a),
        Command::Testbed(a) => testbed::run(a),
        Command::Traffic(a) => traffic::run(a),
        Command::Stimulus(c) => stimulus::run(c),
        Command::Load(a) => load::run(a),
        Command::IdletimeModel(a) => idletime_model::run(a),
        Command::Doctor(a) => doctor::run(a),
        Command::Survey(a) => survey::run(a),
        Command::Export(a) => export::run(a),
        Command::Control(c) => control::run(c),
        Command::Lab(c) => lab::run(c),
        Command::Completions(a) => completions::run(a, &mut Cli::command()),
        Command::Man(a) => man::run(a, Cli::command()),
    };
    let code = match result {
        Ok(status) => status.exit_code(),
        Err(err) => {
            err.print();
            err.exit_code()
        }
    };
    std::process::exit(code);
}
