//! `irqlab doctor`: which live commands can run on this machine (each
//! line is the command's own pre-measurement check), and the kernel
//! settings that shape what they measure.

use crate::error::{CliError, Status};
use crate::output::json_or_summary;
use irqlab_control::doctor::{self, Report};
use irqlab_report::html::Table;
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct Args {
    /// Write the irqlab/doctor/v1 document here ("-": to stdout, instead of the summary)
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// First undo what killed irqlab runs left changed (the leftovers `irqlab
    /// control status` lists; persisted changes stay), then report
    #[arg(long)]
    pub repair: bool,
    /// Exit 1 when irqlab left something behind: a leftover of a killed run
    /// or a journal entry that cannot be read
    #[arg(long)]
    pub strict: bool,
}

/// Exit 0 whatever it finds (it is a report), unless `--strict`.
pub fn run(args: Args) -> Result<Status, CliError> {
    if args.repair {
        // Said on stderr: the report (or `--json -`) owns stdout.
        for line in crate::commands::control::revert_leftovers()? {
            eprint!("repaired: {line}");
        }
    }
    let report = doctor::examine();
    json_or_summary(args.json.as_deref(), &report, text)?;
    let left_behind = !report.leftovers.is_empty() || !report.problems.is_empty();
    Ok(Status::from_ok(!(args.strict && left_behind)))
}

fn text(report: &Report) -> String {
    let mut commands = Table::new(["COMMAND", "READY"]);
    for c in &report.commands {
        let ready = match (&c.missing, &c.note) {
            (None, None) => "yes".to_string(),
            (None, Some(note)) => format!("yes; {note}"),
            (Some(missing), _) => format!("no: {missing}"),
        };
        commands = commands.row([c.command.to_string(), ready]);
    }
    // Setting and value on one line, why it matters on the next: three
    // columns would not fit a terminal.
    let width = report.settings.iter().map(|s| s.name.len()).max().unwrap_or(0);
    let mut settings = String::new();
    for s in &report.settings {
        settings.push_str(&format!("  {:width$}  {}\n  {:width$}  why: {}\n", s.name, s.value, "", s.why));
    }
    let leftovers: String = if report.leftovers.is_empty() {
        String::new()
    } else {
        let lines: String = report.leftovers.iter().map(|l| format!("  {l}\n")).collect();
        format!("\n  LEFT BY KILLED IRQLAB RUNS\n{lines}")
    };
    let problems: String = report.problems.iter().map(|p| format!("\n  PROBLEM: {p}\n")).collect();
    format!("kernel {}\n\n{}\n  SETTING\n{settings}{leftovers}{problems}", report.kernel, commands.to_text())
}
