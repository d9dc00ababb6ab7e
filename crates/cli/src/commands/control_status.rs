//! `irqlab control status` and `revert`: what irqlab changed on this machine, and undoing what a killed run left.

use crate::error::{CliError, Status};
use crate::output::{self, json_or_summary};
use irqlab_host::journal::{self, Entry, Restored, State};
use irqlab_report::html::Table;
use serde::Serialize;
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct StatusArgs {
    /// Write the entries as JSON ("-": to stdout, instead of the table)
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
}

#[derive(clap::Args)]
pub struct RevertArgs {
    /// The entry to undo (from `irqlab control status`)
    #[arg(value_name = "ID", required_unless_present = "all", conflicts_with = "all")]
    id: Option<String>,
    /// Undo every leftover of a killed run and every persisted change
    #[arg(long)]
    all: bool,
    /// Also revert a persisted change someone changed since (DRIFTED in
    /// `control status`): its old value goes back over their change
    #[arg(long)]
    force: bool,
}

#[derive(Serialize)]
struct StatusDoc {
    schema: &'static str,
    entries: Vec<StatusEntry>,
    /// Entry files that cannot be read: what they changed is unknown.
    unreadable: Vec<journal::Unreadable>,
}

#[derive(Serialize)]
struct StatusEntry {
    #[serde(flatten)]
    entry: Entry,
    state: State,
    /// What the object holds now: as set, back to old, drifted, gone.
    #[serde(flatten)]
    now: journal::Now,
}

pub fn status(args: StatusArgs) -> Result<Status, CliError> {
    let entries: Vec<StatusEntry> =
        journal::entries().into_iter().map(|entry| StatusEntry { state: entry.state(), now: entry.now(), entry }).collect();
    let doc = StatusDoc { schema: "irqlab/control-status/v1", entries, unreadable: journal::unreadable() };
    json_or_summary(args.json.as_deref(), &doc, |d| {
        let unreadable: String = d.unreadable.iter().map(|u| format!("UNREADABLE: {u}\n")).collect();
        if d.entries.is_empty() {
            if !unreadable.is_empty() {
                return format!("irqlab's journal has entries it cannot read; what they changed is unknown:\n{unreadable}");
            }
            return "irqlab has changed nothing on this machine\n".to_string();
        }
        let mut t = Table::new(["ID", "OBJECT", "OLD -> NEW", "NOW", "BY", "STATE"]);
        for e in &d.entries {
            let state = match e.state {
                State::Active => "active (its owner restores it)".to_string(),
                State::Persistent => "persistent".to_string(),
                State::Leftover => "LEFTOVER: owner gone; `irqlab control revert --all`".to_string(),
            };
            t = t.row([
                e.entry.id.clone(),
                e.entry.object.to_string(),
                format!("{} -> {}", e.entry.old, e.entry.new),
                e.now.to_string(),
                by(&e.entry.owner),
                state,
            ]);
        }
        t.to_text() + &unreadable
    })?;
    Ok(Status::Success)
}

/// Who made a change: the installed profile's unit by name, others by pid.
fn by(owner: &journal::Owner) -> String {
    if owner.command.contains(irqlab_control::install::PROFILE) {
        format!("{} (pid {})", irqlab_control::install::SERVICE, owner.pid)
    } else if owner.pid > 0 {
        format!("pid {}", owner.pid)
    } else {
        owner.describe()
    }
}

pub fn revert(args: RevertArgs) -> Result<Status, CliError> {
    let ids: Vec<String> = match &args.id {
        Some(id) => vec![id.clone()],
        // Newest first, the reverse of the order the changes were made in
        // (a thread leaves an irqlab cgroup before the cgroup is removed).
        None => journal::entries().into_iter().rev().filter(|e| e.state() != State::Active).map(|e| e.id).collect(),
    };
    // With --all each entry on its own: one refused (drifted) or failed
    // does not keep the others in place; the run then exits 1 naming it.
    // One ID's error is the command's (a bad ID exits 2).
    let mut text = String::new();
    let mut refused = Vec::new();
    if args.id.is_some() {
        text = revert_ids(&ids, args.force)?.concat();
    } else {
        for id in &ids {
            match revert_ids(std::slice::from_ref(id), args.force) {
                Ok(lines) => text.push_str(&lines.concat()),
                Err(e) => refused.push(e.to_string()),
            }
        }
    }
    let unreadable = journal::unreadable();
    if ids.is_empty() && unreadable.is_empty() {
        text.push_str("nothing to revert\n");
    }
    for u in &unreadable {
        text.push_str(&format!("not reverted: {u}\n"));
    }
    output::print(&text)?;
    if !refused.is_empty() {
        return Err(CliError::Failed(format!("not reverted: {}", refused.join("; "))));
    }
    Ok(Status::Success)
}

/// Undoes what killed runs left (not the persisted changes): `irqlab doctor
/// --repair`. One line per entry, as `control revert` prints them.
pub fn revert_leftovers() -> Result<Vec<String>, CliError> {
    let ids: Vec<String> = journal::entries().into_iter().rev().filter(|e| e.state() == State::Leftover).map(|e| e.id).collect();
    revert_ids(&ids, false)
}

fn revert_ids(ids: &[String], force: bool) -> Result<Vec<String>, CliError> {
    let mut lines = Vec::new();
    for id in ids {
        let (entry, outcome) = journal::revert(id, force)?;
        lines.push(match outcome {
            Restored::Restored => format!("{}: back to {}\n", entry.object, entry.old),
            Restored::Gone => format!("{}: gone, nothing to restore\n", entry.object),
        });
    }
    Ok(lines)
}
