//! A profile for every boot (`irqlab control install PROFILE`): a copy of
//! the profile in `/etc/irqlab/`, a systemd unit that holds it from boot
//! (`control apply --allow-missing --follow`: threads that start later are
//! taken, a value something else changes is set back, each logged), and a
//! drop-in that makes `multi-user.target` want the unit. Each file is a
//! journalled change of the durable journal ([`journal::boot_file`]):
//! `control uninstall` stops the unit (which restores what it held, as any
//! `control apply` does at SIGTERM) and reverts them.

use irqlab_host::error::{Error, Result};
use irqlab_host::journal::{self, Object, Value};
use std::path::Path;

/// The unit's name.
pub const SERVICE: &str = "irqlab-profile.service";
/// Where the installed profile lives.
pub const PROFILE: &str = "/etc/irqlab/profile.toml";
pub const UNIT: &str = "/etc/systemd/system/irqlab-profile.service";
/// `multi-user.target` wants the unit: a drop-in (a plain file the
/// journal can hold) rather than `systemctl enable`'s symlink.
pub const WANTS: &str = "/etc/systemd/system/multi-user.target.d/irqlab-profile.conf";

/// The files an install writes, in the order written.
pub const FILES: [&str; 3] = [PROFILE, UNIT, WANTS];

/// The unit: after the daemons that set the same knobs at boot (their
/// values are what the profile's restore would put back, and irqlab's
/// are set over theirs), restarted if it fails. `Type=notify`: `control
/// apply` says READY once every setting is in force, so units ordered
/// after this one start on a tuned machine.
pub fn unit_text(irqlab: &Path) -> String {
    format!(
        "# Written by irqlab control install; `irqlab control uninstall` stops it and removes it.\n\
         [Unit]\n\
         Description=irqlab profile {PROFILE} (IRQ affinities, thread policies, NAPI and RPS)\n\
         After=irqbalance.service tuned.service systemd-udev-settle.service\n\
         \n\
         [Service]\n\
         Type=notify\n\
         NotifyAccess=main\n\
         ExecStart={} control apply {PROFILE} --allow-missing --follow\n\
         Restart=on-failure\n\
         RestartSec=5\n\
         TimeoutStopSec=30\n",
        irqlab.display()
    )
}

pub fn wants_text() -> String {
    format!("# Written by irqlab control install: start {SERVICE} at every boot.\n[Unit]\nWants={SERVICE}\n")
}

/// Whether systemd runs as init (sd_booted(3): its runtime directory).
pub fn systemd_runs() -> bool {
    Path::new("/run/systemd/system").is_dir()
}

/// Exit 3 naming what is missing when no systemd runs to take a unit.
pub fn require_systemd() -> Result<std::path::PathBuf> {
    let missing = |feature: &str| Error::MissingKernelFeature {
        feature: feature.to_string(),
        detail: "control install hands the profile to systemd for every boot; nothing was written".into(),
    };
    if !systemd_runs() {
        return Err(missing("systemd as init (/run/systemd/system: this machine was not booted with systemd)"));
    }
    irqlab_host::privilege::on_path("systemctl").ok_or_else(|| missing("systemctl"))
}

fn systemctl(systemctl: &Path, args: &[&str]) -> Result<()> {
    let out = std::process::Command::new(systemctl)
        .args(args)
        .output()
        .map_err(|e| Error::io(format!("running systemctl {}", args.join(" ")), e))?;
    if !out.status.success() {
        return Err(Error::Failed(format!(
            "systemctl {} failed ({}): {}",
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(())
}

/// The journal entries of an install, by file: its three files, and the
/// GRUB drop-in when it holds the installed profile's `[boot]` options
/// (its header names the profile it came from: `boot::grub_drop_in`).
pub fn installed() -> Vec<journal::Entry> {
    journal::entries().into_iter().filter(is_part_of_install).collect()
}

fn is_part_of_install(e: &journal::Entry) -> bool {
    let Object::BootFile { path } = &e.object else { return false };
    if FILES.contains(&path.as_str()) {
        return true;
    }
    path == crate::boot::GRUB_DROP_IN && matches!(&e.new, Value::Content { content: Some(text) } if written_from_installed_profile(text))
}

/// Whether a drop-in's header names the installed profile as its source.
fn written_from_installed_profile(text: &str) -> bool {
    text.lines().next().is_some_and(|header| header.contains(&format!(" {PROFILE})")))
}

/// What `install` did.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Installed {
    pub files: Vec<String>,
    pub entries: Vec<String>,
    pub service: &'static str,
}

/// Installs `profile_text` (already checked) for every boot and starts it
/// now. Refused before anything is written where no systemd runs (exit
/// 3) or a profile is installed already (exit 2).
pub fn install(profile_text: &str, irqlab: &Path) -> Result<Installed> {
    let systemctl_path = require_systemd()?;
    if let Some(e) = installed().first() {
        return Err(Error::Invalid(format!(
            "a profile is installed already ({}, entry {}): `irqlab control uninstall` first",
            e.object, e.id
        )));
    }
    let mut kept = Vec::new();
    for (path, text) in [(PROFILE, profile_text.to_string()), (UNIT, unit_text(irqlab)), (WANTS, wants_text())] {
        let applied = journal::apply(Object::BootFile { path: path.into() }, Value::Content { content: Some(text) })?;
        kept.push(applied);
    }
    // Written: now kept, for every boot.
    let mut entries = Vec::new();
    for applied in kept {
        entries.push(applied.persist()?.id);
    }
    systemctl(&systemctl_path, &["daemon-reload"])?;
    systemctl(&systemctl_path, &["start", SERVICE])?;
    Ok(Installed { files: FILES.iter().map(|f| f.to_string()).collect(), entries, service: SERVICE })
}

/// Stops the unit (it restores what it held), removes the files through
/// their journal entries (the GRUB drop-in of its `[boot]` options too:
/// GRUB's configuration is regenerated where update-grub is), and
/// reloads systemd. Exit 2 when nothing is
/// installed.
pub fn uninstall() -> Result<Vec<String>> {
    let entries = installed();
    if entries.is_empty() {
        return Err(Error::Invalid("no profile is installed (`irqlab control status` lists the journal)".into()));
    }
    let systemctl_path = irqlab_host::privilege::on_path("systemctl");
    if let (true, Some(s)) = (systemd_runs(), &systemctl_path) {
        systemctl(s, &["stop", SERVICE])?;
    }
    let mut removed = Vec::new();
    for e in entries.iter().rev() {
        journal::revert(&e.id, true)?;
        removed.push(e.object.to_string());
    }
    if let (true, Some(s)) = (systemd_runs(), &systemctl_path) {
        systemctl(s, &["daemon-reload"])?;
    }
    Ok(removed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_drop_in_of_the_installed_profile_is_part_of_the_install() {
        let options = crate::boot::check("rcu_nocbs=1", &[0, 1]).unwrap();
        assert!(written_from_installed_profile(&crate::boot::grub_drop_in(&options, PROFILE)));
        assert!(!written_from_installed_profile(&crate::boot::grub_drop_in(&options, "/root/profile.toml")));
    }

    #[test]
    fn the_unit_holds_the_installed_profile_and_follows_it() {
        let unit = unit_text(Path::new("/usr/local/bin/irqlab"));
        assert!(
            unit.contains("ExecStart=/usr/local/bin/irqlab control apply /etc/irqlab/profile.toml --allow-missing --follow\n"),
            "{unit}"
        );
        assert!(unit.contains("After=irqbalance.service tuned.service"), "{unit}");
        assert!(wants_text().ends_with("[Unit]\nWants=irqlab-profile.service\n"));
    }
}
