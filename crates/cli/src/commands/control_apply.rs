//! `irqlab control apply`, `install` and `uninstall`: a profile applied as one change, or installed for every boot.

use super::control::{hold_plan, HoldArgs};
use crate::error::{CliError, Status};
use crate::output;
use irqlab_control::{boot, profile};
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct Args {
    /// The profile (TOML, schema irqlab/profile/v1; `irqlab survey --out DIR` writes DIR/profile.toml)
    #[arg(value_name = "PROFILE")]
    profile: PathBuf,
    /// Apply the settings whose MATCH names no thread now (or more threads
    /// than surveyed) as nothing to set, instead of refusing the profile
    #[arg(long)]
    allow_missing: bool,
    /// Write the profile's [boot] kernel command-line options for the next
    /// boot (a GRUB drop-in, kept in the journal until `control revert`),
    /// instead of applying its run-time settings
    #[arg(long, conflicts_with_all = ["duration", "persist", "json", "follow"])]
    boot: bool,
    /// While holding, check every second for threads that now match the
    /// profile (a service started later) and take them, and set back any
    /// value something else changed (drift), each said as it happens; what
    /// `control install`'s unit runs
    #[arg(long, conflicts_with_all = ["persist", "dry_run"])]
    follow: bool,
    /// First predict what the profile changes on each CPU: the simulator
    /// runs the survey beside PROFILE (its directory's survey.json) with
    /// the profile applied in the model, and keeps the prediction in that
    /// directory's sim/from-survey.json, where `irqlab survey --compare
    /// DIR` shows it beside what is measured after
    #[arg(long, conflicts_with = "boot")]
    predict: bool,
    #[command(flatten)]
    hold: HoldArgs,
}

#[derive(clap::Args)]
pub struct InstallArgs {
    /// The profile (TOML, schema irqlab/profile/v1)
    #[arg(value_name = "PROFILE")]
    profile: PathBuf,
}

/// `control apply --predict`: the prediction of the profile from the
/// survey that wrote it, before anything changes.
fn predict(profile: &std::path::Path, json: Option<&std::path::Path>) -> Result<(), CliError> {
    if json.is_some_and(|j| j.as_os_str() == "-") {
        return Err(CliError::Usage("--predict prints its table on stdout, which --json - takes: give --json a file".into()));
    }
    let survey = profile.parent().unwrap_or(std::path::Path::new(".")).join("survey.json");
    if !survey.exists() {
        return Err(CliError::Usage(format!(
            "--predict: no {} beside the profile (the survey that wrote it); predict another way with `irqlab sim --from-survey SURVEY --profile {}`",
            survey.display(),
            profile.display()
        )));
    }
    let request =
        super::sim_from_survey::Request { from: &survey, spread_from: None, profile: Some(profile), out: None, seed: None, json: None };
    match super::sim_from_survey::run(request)? {
        Status::Success => Ok(()),
        _ => Err(CliError::Failed("the prediction did not complete; nothing was applied".into())),
    }
}

pub fn run(args: Args) -> Result<Status, CliError> {
    let file = args.profile.display().to_string();
    let text = output::read_text(&args.profile)?;
    let profile = profile::Profile::parse(&file, &text)?;
    let plan = profile.plan(&file, &text, args.allow_missing)?;
    tell_beside_tuned(&profile, &file);
    if args.boot {
        return apply_boot(&profile, &plan, &file, args.hold.dry_run);
    }
    if args.predict {
        predict(&args.profile, args.hold.json.as_deref())?;
    }
    if !plan.boot.is_empty() {
        let words: Vec<&str> = plan.boot.iter().map(|o| o.text.as_str()).collect();
        eprintln!(
            "note: the profile's [boot] options ({}) take effect only at a boot: `irqlab control apply {file} --boot` writes them \
             for the next one",
            words.join(" ")
        );
    }
    for s in profile.threads.iter().filter(|s| s.this_boot) {
        eprintln!(
            "note: threads {} names a thread by its pid, this boot's only (nothing stable named it when surveyed)",
            s.matched.get_ref()
        );
    }
    if plan.changes.is_empty() && plan.absent.is_empty() && plan.boot.is_empty() {
        eprintln!("{file}: the profile declares no setting: nothing to apply");
    }
    // Followed: the profile resolved again against the threads there are
    // now (a setting that names nothing now is nothing to add), and every
    // irqbalance running now asked to leave its IRQs alone (one restarted
    // since has forgotten).
    let replan = || profile.plan(&file, &text, true).map(|p| p.beside_new_irqbalance()).unwrap_or_default();
    hold_plan(file.clone(), plan, args.follow.then_some(&replan as &dyn Fn() -> Vec<profile::Planned>), args.hold)
}

/// Each setting tuned's active profile sets differently, before anything
/// changes: which one holds now is whichever applied last, and the lines
/// say which the next boot keeps.
fn tell_beside_tuned(profile: &profile::Profile, file: &str) {
    let Some(beside) = irqlab_control::beside_tuned::on_this_machine(profile, file) else { return };
    if beside.disagreements.is_empty() && beside.unresolved.is_empty() {
        return;
    }
    for line in beside.lines() {
        eprintln!("note: {line}");
    }
}

/// `control install`: the profile checked (its threads may start only
/// later: a MATCH naming nothing now is no error), then handed to systemd,
/// with its `[boot]` options for the boot loader.
pub fn install(args: InstallArgs) -> Result<Status, CliError> {
    let file = args.profile.display().to_string();
    let text = output::read_text(&args.profile)?;
    let profile = profile::Profile::parse(&file, &text)?;
    let plan = profile.plan(&file, &text, true)?;
    // Both checked before anything is written.
    irqlab_control::install::require_systemd()?;
    if !plan.boot.is_empty() {
        boot::require_grub(&plan.boot)?;
    }
    let irqlab = std::env::current_exe().map_err(|e| CliError::from(irqlab_host::Error::io("finding irqlab's own path", e)))?;
    let installed = irqlab_control::install::install(&text, &irqlab)?;
    for (file, entry) in installed.files.iter().zip(&installed.entries) {
        eprintln!("wrote {file} (journal entry {entry})");
    }
    eprintln!("started {}: it applies {} now and at every boot", installed.service, irqlab_control::install::PROFILE);
    if let Some(beside) = irqlab_control::beside_tuned::installed_beside_tuned().filter(|b| !b.disagreements.is_empty()) {
        beside.lines().iter().for_each(|l| eprintln!("note: {l}"));
    }
    // Written from the installed copy: its header names that copy, which
    // makes the drop-in part of the install (`uninstall` removes it).
    if !plan.boot.is_empty() {
        apply_boot(&profile, &plan, irqlab_control::install::PROFILE, false)?;
    }
    Ok(Status::Success)
}

pub fn uninstall() -> Result<Status, CliError> {
    for removed in irqlab_control::install::uninstall()? {
        eprintln!("removed {removed}");
    }
    // A drop-in written by `control apply --boot` from another file is not
    // the install's: it stays, and is named.
    if let Some(w) = boot::command_line().written {
        eprintln!("the boot options of {} stay (entry {}): `irqlab control revert {}` removes them", w.file, w.entry, w.entry);
    }
    Ok(Status::Success)
}

/// `control apply --boot`: the `[boot]` options, each beside the running
/// kernel's command line, written for the next boot.
fn apply_boot(profile: &profile::Profile, plan: &profile::Plan, file: &str, dry_run: bool) -> Result<Status, CliError> {
    if plan.boot.is_empty() {
        return Err(CliError::Input(irqlab_analysis::InputError::new(format!(
            "{file}: the profile has no [boot] cmdline: nothing for --boot to write"
        ))));
    }
    let running = boot::running()?;
    let (now, _) = boot::in_force(&plan.boot, &running);
    for o in &plan.boot {
        let state = if now.contains(&o) { "in force now" } else { "not in force now" };
        let why = profile.boot_because(&o.key).or(boot::what_it_does(&o.key)).unwrap_or("");
        eprintln!("{}: {state}; {why}", o.text);
    }
    if dry_run {
        eprintln!("dry run: {} would hold:", boot::GRUB_DROP_IN);
        output::print(&boot::grub_drop_in(&plan.boot, file))?;
        return Ok(Status::Success);
    }
    let written = boot::apply(&plan.boot, file)?;
    eprintln!("wrote {} (journal entry {}: `irqlab control revert {}` removes it)", written.file, written.entry, written.entry);
    if written.grub_updated {
        eprintln!("update-grub ran: the options take effect at the next boot");
    } else {
        eprintln!(
            "no update-grub on this machine: the options take effect at the next boot once the boot loader's configuration is \
             regenerated (grub-mkconfig -o /boot/grub/grub.cfg)"
        );
    }
    Ok(Status::Success)
}
