//! `irqlab control export PROFILE --tuned DIR`: the profile as a tuned
//! profile directory. The mapping is `irqlab_control::tuned_export`; here
//! the tuned it is for, the directory, and what the user does next.

use crate::error::{CliError, Status};
use crate::output;
use irqlab_control::tuned_export::{self, Exported, Target, TunedVersion};
use irqlab_control::{boot, profile};
use std::path::{Path, PathBuf};

#[derive(clap::Args)]
pub struct Args {
    /// The profile (TOML, schema irqlab/profile/v1)
    #[arg(value_name = "PROFILE")]
    profile: PathBuf,
    /// Write it as a tuned profile into this directory: tuned.conf, and
    /// script.sh for what tuned has no plugin for (made if missing; an
    /// earlier export there is replaced, other files are refused)
    #[arg(long, value_name = "DIR")]
    tuned: PathBuf,
    /// The tuned it is for, X.Y: 2.23 and later take IRQs by number in
    /// their irq plugin (default: `tuned-adm --version` here, else 2.20,
    /// Debian 12's)
    #[arg(long, value_name = "X.Y", value_parser = TunedVersion::parse)]
    tuned_version: Option<TunedVersion>,
    /// The tuned profile's name (default: DIR's last component)
    #[arg(long, value_name = "NAME")]
    name: Option<String>,
}

pub fn run(args: Args) -> Result<Status, CliError> {
    let file = args.profile.display().to_string();
    let text = output::read_text(&args.profile)?;
    let profile = profile::Profile::parse(&file, &text)?;
    let name = profile_name(&args)?;
    let (tuned, whence) = match args.tuned_version {
        Some(v) => (v, "--tuned-version".to_string()),
        None => match installed_tuned() {
            Some(v) => (v, "tuned-adm --version here".to_string()),
            None => (TunedVersion::DEBIAN_12, "no tuned-adm here: Debian 12's; --tuned-version X.Y for another".to_string()),
        },
    };
    let cpus = boot::machine_cpus()?;
    let exported = tuned_export::export(&profile, &file, &text, &Target { name: &name, tuned, cpus: &cpus })?;
    if profile.is_empty() {
        eprintln!("{file}: the profile declares no setting: tuned.conf has only its summary");
    }
    let earlier = ready(&args.tuned)?;
    write(&args.tuned, &exported, earlier)?;
    for l in &exported.left_out {
        eprintln!("warning: {} left out: {}", l.setting, l.why);
    }
    for note in &exported.notes {
        eprintln!("note: {note}");
    }
    let dir = shown(&args.tuned);
    eprintln!("written for tuned {tuned} ({whence})");
    eprintln!(
        "next: sudo cp -r {dir}/. /etc/tuned/{name} && sudo tuned-adm profile {name} (tuned finds profiles in /etc/tuned and \
         /usr/lib/tuned); then `sudo tuned-adm verify`"
    );
    Ok(Status::Success)
}

/// `--name`, or DIR's last component; exit 2 for a name tuned does not load.
fn profile_name(args: &Args) -> Result<String, CliError> {
    let name = match &args.name {
        Some(name) => name.clone(),
        None => args.tuned.file_name().map(|n| n.to_string_lossy().into_owned()).ok_or_else(|| {
            CliError::Usage(format!("--tuned {}: no last component to name the profile by; give --name", args.tuned.display()))
        })?,
    };
    tuned_export::check_name(&name).map_err(|e| CliError::Usage(format!("{e}; give --name")))?;
    Ok(name)
}

/// The version `tuned-adm --version` says, if it runs here.
fn installed_tuned() -> Option<TunedVersion> {
    let out = std::process::Command::new("tuned-adm").arg("--version").output().ok()?;
    // Older tuned-adm printed its version on stderr.
    let said = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    TunedVersion::parse(said.lines().next()?).ok()
}

/// Makes DIR ready: created when missing; an existing one must be empty
/// or an earlier export (its tuned.conf starts with irqlab's header), so
/// no one's own tuned profile is written over. True for an earlier export.
fn ready(dir: &Path) -> Result<bool, CliError> {
    if dir.exists() && !dir.is_dir() {
        return Err(CliError::Usage(format!("--tuned {}: not a directory", dir.display())));
    }
    if !dir.exists() {
        std::fs::create_dir_all(dir).map_err(|e| CliError::io(dir, e))?;
        return Ok(false);
    }
    let mut names: Vec<String> =
        std::fs::read_dir(dir).map_err(|e| CliError::io(dir, e))?.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect();
    if names.is_empty() {
        return Ok(false);
    }
    if std::fs::read_to_string(dir.join("tuned.conf")).is_ok_and(|c| tuned_export::is_export(&c)) {
        return Ok(true);
    }
    names.sort();
    Err(CliError::Usage(format!(
        "--tuned {}: holds files `irqlab control export` did not write ({}); give a new or empty directory",
        dir.display(),
        names.join(", ")
    )))
}

/// Writes the files, each atomically: script.sh before the tuned.conf
/// that names it; an earlier export's script.sh goes when this one has none.
fn write(dir: &Path, exported: &Exported, earlier: bool) -> Result<(), CliError> {
    let script = dir.join("script.sh");
    match &exported.script {
        Some(text) => {
            output::write_text(&script, text)?;
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).map_err(|e| CliError::io(&script, e))?;
            eprintln!("wrote {} (tuned runs it with start, stop and verify)", script.display());
        }
        None if earlier && script.exists() => {
            std::fs::remove_file(&script).map_err(|e| CliError::io(&script, e))?;
            eprintln!("removed {} (the earlier export's; tuned's plugins take every setting now)", script.display());
        }
        None => {}
    }
    let conf = dir.join("tuned.conf");
    output::write_text(&conf, &exported.tuned_conf)?;
    eprintln!("wrote {}", conf.display());
    Ok(())
}

/// A path as a shell word.
fn shown(path: &Path) -> String {
    let text = path.display().to_string();
    let text = text.trim_end_matches('/');
    if !text.is_empty() && text.chars().all(|c| c.is_ascii_alphanumeric() || "/._-+@:,".contains(c)) {
        text.to_string()
    } else {
        format!("'{}'", text.replace('\'', r"'\''"))
    }
}
