//! `irqlab man --out DIR` (hidden; `make man`): one man page per command,
//! `irqlab.1` and `irqlab-<command>[-<subcommand>].1`, rendered by
//! `clap_mangen` from the same clap definitions that parse the flags, each
//! with an EXAMPLES section from `crate::examples`. Walks every subcommand,
//! so a new command gets its page without a change here.

use crate::error::{CliError, Status};
use crate::examples;
use std::path::{Path, PathBuf};

#[derive(clap::Args)]
pub struct Args {
    /// Directory for the pages (created if missing)
    #[arg(long, default_value = "out/man")]
    pub out: PathBuf,
}

pub fn run(args: Args, cli: clap::Command) -> Result<Status, CliError> {
    std::fs::create_dir_all(&args.out).map_err(|e| CliError::io(&args.out, e))?;
    let mut cli = cli.disable_help_subcommand(true);
    cli.build();
    let mut written = Vec::new();
    write_pages(&cli, "", &args.out, &mut written)?;
    crate::output::print(&format!("{} man pages in {}\n", written.len(), args.out.display()))?;
    Ok(Status::Success)
}

/// Writes the page of `cmd` (at `path`, its subcommand names) and of every
/// visible subcommand below it.
fn write_pages(cmd: &clap::Command, path: &str, dir: &Path, written: &mut Vec<PathBuf>) -> Result<(), CliError> {
    let page = render(cmd, path).map_err(|e| CliError::Failed(format!("rendering the man page of {path:?}: {e}")))?;
    let man = clap_mangen::Man::new(cmd.clone());
    let file = dir.join(man.get_filename());
    crate::output::write_text(&file, &page)?;
    written.push(file);
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        let sub_path = if path.is_empty() { sub.get_name().to_string() } else { format!("{path} {}", sub.get_name()) };
        write_pages(sub, &sub_path, dir, written)?;
    }
    Ok(())
}

/// clap_mangen's sections, then EXAMPLES and SEE ALSO.
pub fn render(cmd: &clap::Command, path: &str) -> std::io::Result<String> {
    let man = clap_mangen::Man::new(cmd.clone()).manual("irqlab manual");
    let mut out = Vec::new();
    man.render_title(&mut out)?;
    man.render_name_section(&mut out)?;
    man.render_synopsis_section(&mut out)?;
    man.render_description_section(&mut out)?;
    if cmd.get_arguments().any(|a| !a.is_hide_set()) {
        man.render_options_section(&mut out)?;
    }
    if cmd.get_subcommands().any(|s| !s.is_hide_set()) {
        man.render_subcommands_section(&mut out)?;
    }
    if cmd.get_after_long_help().is_some() || cmd.get_after_help().is_some() {
        man.render_extra_section(&mut out)?;
    }
    let mut text = String::from_utf8_lossy(&out).into_owned();
    let fallback = [(format!("irqlab {path} --help"), "the options above".to_string())];
    let examples: Vec<(String, String)> = match examples::for_path(path) {
        Some(list) => list.iter().map(|(l, w)| ((*l).to_string(), (*w).to_string())).collect(),
        None => fallback.to_vec(),
    };
    text.push_str(".SH EXAMPLES\n");
    for (line, what) in &examples {
        text.push_str(&format!(".TP\n\\fB{}\\fR\n{}\n", roff_escape(line), roff_escape(what)));
    }
    text.push_str(".SH SEE ALSO\n");
    // The parent's page, then the subcommands' pages.
    let page_of = |words: &[&str]| std::iter::once("irqlab").chain(words.iter().copied()).collect::<Vec<_>>().join("\\-");
    let words: Vec<&str> = path.split_whitespace().collect();
    let mut see: Vec<String> = words.split_last().map(|(_, parent)| format!("{}(1)", page_of(parent))).into_iter().collect();
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        let mut child = words.clone();
        child.push(sub.get_name());
        see.push(format!("{}(1)", page_of(&child)));
    }
    text.push_str(&see.join(", "));
    text.push_str("\n.PP\nREADME.md, ARCHITECTURE.md and docs/ in the irqlab sources.\n");
    let mut version = Vec::new();
    man.render_version_section(&mut version)?;
    text.push_str(&String::from_utf8_lossy(&version));
    Ok(text)
}

/// A line of running text for roff: backslashes and hyphens escaped (so a
/// copied `--flag` stays ASCII), a leading `.` or `'` neutralised.
fn roff_escape(text: &str) -> String {
    let escaped = text.replace('\\', "\\e").replace('-', "\\-");
    if escaped.starts_with('.') || escaped.starts_with('\'') {
        format!("\\&{escaped}")
    } else {
        escaped
    }
}
