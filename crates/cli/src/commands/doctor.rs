//! `irqlab doctor`: which live commands can run on this machine (each
//! line is the command's own pre-measurement check), and the kernel
//! settings that shape what they measure. `--snapshot` / `--diff`: the
//! machine's controllable state (`irqlab_host::machine_state`), written
//! down, or compared with one written before.

use crate::error::{CliError, Status};
use crate::output;
use crate::output::json_or_summary;
use irqlab_control::doctor::{self, Report};
use irqlab_host::machine_state::{self, Diff, MachineState};
use irqlab_report::html::Table;
use std::path::{Path, PathBuf};

#[derive(clap::Args)]
pub struct Args {
    /// Write the irqlab/doctor/v1 document here ("-": to stdout, instead of the summary)
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// First undo what killed irqlab runs left changed (the leftovers `irqlab
    /// control status` lists; persisted changes stay), then report
    #[arg(long)]
    pub repair: bool,
    /// Exit 1 also when a killed run left something behind (a leftover);
    /// without it only a journal entry that cannot be read does
    #[arg(long)]
    pub strict: bool,
    /// Write the machine's controllable state (every thread's policy,
    /// priority and affinity, IRQ affinities, RPS/XPS masks, NAPI settings,
    /// net.core sysctls, qdiscs, block schedulers, irqlab's cgroups, RT
    /// throttling) as an irqlab/machine-state/v1 document here ("-": to
    /// stdout), for a later --diff
    #[arg(long, value_name = "FILE", conflicts_with_all = ["diff", "json", "repair", "strict"])]
    pub snapshot: Option<PathBuf>,
    /// Compare the machine now with a --snapshot FILE taken before: print
    /// each setting that differs (threads and IRQs that came or went are
    /// not differences) and exit 1 if any does, 0 if none; --json writes
    /// the differences as an irqlab/machine-state-diff/v1 document
    #[arg(long, value_name = "FILE", conflicts_with_all = ["repair", "strict"])]
    pub diff: Option<PathBuf>,
}

/// What `--diff --json` writes.
#[derive(serde::Serialize)]
struct DiffDoc<'a> {
    schema: &'static str,
    snapshot: String,
    #[serde(flatten)]
    diff: &'a Diff,
}

/// Exit 0 whatever it finds (it is a report), except for a journal that
/// cannot be read (exit 1), and leftovers with `--strict`.
pub fn run(args: Args) -> Result<Status, CliError> {
    if let Some(path) = &args.snapshot {
        return snapshot(path);
    }
    if let Some(path) = &args.diff {
        return diff(path, args.json.as_deref());
    }
    if args.repair {
        // Said on stderr: the report (or `--json -`) owns stdout.
        for line in crate::commands::control::revert_leftovers()? {
            eprint!("repaired: {line}");
        }
    }
    let report = doctor::examine();
    json_or_summary(args.json.as_deref(), &report, text)?;
    // A journal that cannot be read leaves what irqlab changed unknown: the
    // machine is not ready, as `control status` says too. Leftovers are
    // named and fail only --strict (`control revert --all` undoes them).
    let ready = report.problems.is_empty();
    let left_behind = !report.leftovers.is_empty();
    Ok(Status::from_ok(ready && !(args.strict && left_behind)))
}

fn snapshot(path: &Path) -> Result<Status, CliError> {
    let state = machine_state::take();
    if path.as_os_str() == "-" {
        let mut text = serde_json::to_string_pretty(&state).map_err(|e| CliError::Failed(format!("serialising the document: {e}")))?;
        text.push('\n');
        output::print(&text)?;
    } else {
        output::write_json(path, &state)?;
        output::print(&format!(
            "machine state: {} threads, {} IRQs, {} network devices, {} irqlab cgroups; written to {}\n",
            state.threads.len(),
            state.irq_affinity.len(),
            state.net_devices.len(),
            state.irqlab_cgroups.len(),
            path.display()
        ))?;
    }
    Ok(Status::Success)
}

/// Reads a snapshot: a file that is missing, unreadable or not an
/// irqlab/machine-state/v1 document is bad input (exit 2), named.
fn read_snapshot(path: &Path) -> Result<MachineState, CliError> {
    let text = output::read_text(path)?;
    let bad = |what: String| CliError::Usage(format!("{}: not an {} document: {what}", path.display(), machine_state::SCHEMA));
    let value: serde_json::Value = serde_json::from_str(&text).map_err(|e| bad(e.to_string()))?;
    match value.get("schema").and_then(|s| s.as_str()) {
        Some(machine_state::SCHEMA) => {}
        Some(other) => return Err(bad(format!("its schema is {other}"))),
        None => return Err(bad("it has no schema".into())),
    }
    serde_json::from_value(value).map_err(|e| bad(e.to_string()))
}

fn diff(path: &Path, json: Option<&Path>) -> Result<Status, CliError> {
    output::refuse_clashes(&[("--diff", Some(path))], &[("--json", json)])?;
    let before = read_snapshot(path)?;
    let result = machine_state::diff(&before, &machine_state::take());
    let doc = DiffDoc { schema: machine_state::DIFF_SCHEMA, snapshot: path.display().to_string(), diff: &result };
    json_or_summary(json, &doc, |doc| {
        let notes: String = doc.diff.notes.iter().map(|n| format!("note: {n}\n")).collect();
        if doc.diff.differences.is_empty() {
            format!("{notes}no difference from {}\n", doc.snapshot)
        } else {
            let lines: String = doc.diff.differences.iter().map(|d| format!("  {d}\n")).collect();
            format!("{notes}{} difference(s) from {}:\n{lines}", doc.diff.differences.len(), doc.snapshot)
        }
    })?;
    Ok(Status::from_ok(result.differences.is_empty()))
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
    let cmdline = &report.command_line;
    let mut boot = format!("\n  BOOT\n  running with: {}\n", cmdline.running);
    if let Some(w) = &cmdline.written {
        let list = |o: &[String]| if o.is_empty() { "none".to_string() } else { o.join(" ") };
        boot.push_str(&format!(
            "  irqlab's {} (entry {}): in force: {}; taken at the next boot: {}\n",
            w.file,
            w.entry,
            list(&w.in_force),
            list(&w.pending)
        ));
    }
    let mut tools = String::new();
    if !report.other_tools.is_empty() {
        tools.push_str("\n  OTHER TOOLS ON THE MACHINE\n");
        for t in &report.other_tools {
            let state = match (&t.running[..], &t.installed) {
                ([], Some(at)) => format!("installed ({at}), not running"),
                ([], None) => "in force".to_string(),
                (pids, _) => format!("running (pid {})", pids.iter().map(i32::to_string).collect::<Vec<_>>().join(", ")),
            };
            tools.push_str(&format!("  {}: {state}", t.name));
            if let Some(d) = &t.detail {
                tools.push_str(&format!("; {d}"));
            }
            tools.push_str(&format!("\n    shares with irqlab: {}\n", t.shares));
            if let Some(w) = &t.warning {
                tools.push_str(&format!("    WARNING: {w}\n"));
            }
        }
    }
    if let Some(beside) = &report.beside_tuned {
        let mut lines = beside.lines().into_iter();
        tools.push_str(&format!("\n  TUNED BESIDE THE INSTALLED PROFILE\n  {}\n", lines.next().unwrap_or_default()));
        tools.extend(lines.map(|l| format!("    {l}\n")));
    }
    format!("kernel {}\n\n{}\n  SETTING\n{settings}{boot}{tools}{leftovers}{problems}", report.kernel, commands.to_text())
}
