//! Writing results: every file goes through the report crate's atomic writer.
//!
//! The `--json FILE|-` convention, the same in every command: with a file,
//! the document goes there and the text summary to stdout; with "-", the
//! document goes to stdout *instead of* the summary (and of any live view
//! drawn on stdout), so a pipe gets one JSON document and nothing else.
//! Progress bars and diagnostics stay on stderr either way. The other
//! document flags (`--html`, `--svg`, `--trace`, ...) take a file only:
//! they parse with [`file_only`], which refuses "-".
//!
//! Every result text reaches stdout through [`print`], which returns write
//! errors instead of panicking as `print!` does. SIGPIPE stays ignored
//! (Rust's default) on purpose: its default action would kill irqlab in
//! the middle of a write, before the guards that undo its changes to the
//! machine have run. A closed pipe (`| head -c1`) comes back as EPIPE
//! instead and ends the run with exit 1 and no message; any other failure
//! (`> /dev/full`) with exit 1 and `error: writing to stdout: ...`.

use crate::error::CliError;
use irqlab_analysis::{input, InputError, Location};
use std::io::Write;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

pub fn write_json<T: serde::Serialize>(path: &Path, value: &T) -> Result<(), CliError> {
    let value = WithLab::new(value);
    crate::signal::writing(|| irqlab_report::write_json(path, &value)).map_err(|e| CliError::io(path, e))
}

/// A document written inside an `irqlab lab run` guest carries the guest's
/// `lab` block (kernel, accel, icount; from `IRQLAB_LAB`), after its own
/// fields: timings under emulation are not the hardware's, and a reader
/// must be able to tell. Outside a guest the document is unchanged.
#[derive(serde::Serialize)]
struct WithLab<'a, T> {
    #[serde(flatten)]
    doc: &'a T,
    #[serde(skip_serializing_if = "Option::is_none")]
    lab: Option<serde_json::Value>,
}

impl<'a, T: serde::Serialize> WithLab<'a, T> {
    fn new(doc: &'a T) -> Self {
        WithLab { doc, lab: lab_block() }
    }
}

/// The `lab` block of the guest this runs in (`IRQLAB_LAB`), if any.
fn lab_block() -> Option<serde_json::Value> {
    std::env::var("IRQLAB_LAB").ok().and_then(|text| serde_json::from_str(&text).ok())
}

/// For text outputs (Markdown, pages): where this ran when it ran in an
/// `irqlab lab` guest, and that an emulated CPU's timings are not the
/// hardware's; `None` outside a guest.
pub fn lab_sentence() -> Option<String> {
    lab_block().map(|lab| sentence_of(&lab))
}

fn sentence_of(lab: &serde_json::Value) -> String {
    let kernel = lab["kernel"].as_str().unwrap_or("a guest kernel");
    let release = lab["release"].as_str().unwrap_or("");
    if lab["emulated"].as_bool() == Some(true) {
        let icount = if lab["icount"].as_bool() == Some(true) { ", clock driven by executed instructions (-icount)" } else { "" };
        format!(
            "Run in an `irqlab lab` guest, {kernel} ({release}), under QEMU's software emulation (TCG{icount}): every timing is an emulated CPU's, not this hardware's."
        )
    } else {
        format!("Run in an `irqlab lab` guest, {kernel} ({release}), under {}.", lab["accel"].as_str().unwrap_or("KVM"))
    }
}

pub fn write_text(path: &Path, text: &str) -> Result<(), CliError> {
    crate::signal::writing(|| irqlab_report::write_atomic(path, text.as_bytes())).map_err(|e| CliError::io(path, e))
}

/// Whether stdout is free for text (summaries, tables, live views): not
/// when `--json -` puts the document there. The one place "-" is decided.
pub fn text_on_stdout(json: Option<&Path>) -> bool {
    json.is_none_or(|path| path.as_os_str() != "-")
}

/// The end of every command with a `--json FILE|-` flag: "-" prints the
/// document on stdout instead of the text summary; a file gets the
/// document and stdout the summary (printed first, so a failed write still
/// leaves the results on the terminal); no flag, only the summary.
pub fn json_or_summary<T: serde::Serialize>(json: Option<&Path>, value: &T, summary: impl FnOnce(&T) -> String) -> Result<(), CliError> {
    if !text_on_stdout(json) {
        let mut text =
            serde_json::to_string_pretty(&WithLab::new(value)).map_err(|e| CliError::Failed(format!("serialising the document: {e}")))?;
        text.push('\n');
        return print(&text);
    }
    print(&summary(value))?;
    if let Some(path) = json {
        write_json(path, value)?;
    }
    Ok(())
}

/// Value parser of the document flags that take a file only: "-" is a
/// usage error (exit 2) naming the flag, not a file named "-".
pub fn file_only() -> impl clap::builder::TypedValueParser<Value = PathBuf> {
    use clap::builder::TypedValueParser;
    clap::builder::PathBufValueParser::new().try_map(|path: PathBuf| {
        if path.as_os_str() == "-" {
            Err(String::from("only --json writes to stdout (\"-\"); give a file name"))
        } else {
            Ok(path)
        }
    })
}

/// Writes result text to stdout and flushes it (see the module comment).
pub fn print(text: &str) -> Result<(), CliError> {
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes()).and_then(|()| out.flush()).map_err(CliError::Stdout)
}

/// Reads a user's input file as text. Everything that makes it unusable
/// as input (missing, unreadable, a directory, not UTF-8) is bad input,
/// exit 2, located as far as it can be; only the I/O failing midway is a
/// failed run.
pub fn read_text(path: &Path) -> Result<String, CliError> {
    let shown = path.display().to_string();
    let bad = |what: String| CliError::Input(InputError::at(what, Location::file_only(&shown)));
    if path.is_dir() {
        return Err(bad("is a directory, not a file".into()));
    }
    let bytes = std::fs::read(path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound | std::io::ErrorKind::PermissionDenied => bad(e.to_string()),
        _ => CliError::io(path, e),
    })?;
    input::utf8(&shown, &bytes)?;
    // Checked just above; the conversion only takes ownership.
    String::from_utf8(bytes).map_err(|e| bad(e.to_string()))
}

/// Reads the file a flag names and parses it; bad input in it (unreadable,
/// not UTF-8, or refused by `parse`) is exit 2 with the flag before the
/// message (`--compare: FILE:3:7: ...`).
pub fn read_flag_file<T>(flag: &str, path: &Path, parse: impl FnOnce(&str, &str) -> Result<T, InputError>) -> Result<T, CliError> {
    let under_flag = |mut e: InputError| {
        e.message = format!("{flag}: {}", e.message);
        CliError::Input(e)
    };
    let text = read_text(path).map_err(|e| match e {
        CliError::Input(e) => under_flag(e),
        other => other,
    })?;
    parse(&path.display().to_string(), &text).map_err(under_flag)
}

/// Refuses (exit 2) an output that would overwrite an input or another
/// output: `fit c.json --json c.json` would destroy its own input, and
/// `--json a --html a` would keep only the last. Each command calls it
/// once, before it writes anything (and before a long run), with its
/// inputs and output flags by name; `None` is a flag not given.
///
/// Two paths are one file when they reach the same inode (hard links,
/// symbolic links, `./x` vs `x`), or, for files not there yet, the same
/// canonical path. Outputs that are devices or FIFOs are left out: they
/// are written through, not replaced, so sharing one (`/dev/null`) loses
/// nothing. "-" (stdout) is not a file.
pub fn refuse_clashes(inputs: &[(&str, Option<&Path>)], outputs: &[(&str, Option<&Path>)]) -> Result<(), CliError> {
    let named = |list: &[(&str, Option<&Path>)]| -> Vec<(String, PathBuf, FileId)> {
        list.iter()
            .filter_map(|&(name, path)| {
                let path = path.filter(|p| p.as_os_str() != "-")?;
                Some((name.to_string(), path.to_path_buf(), file_id(path)?))
            })
            .collect()
    };
    let (inputs, outputs) = (named(inputs), named(outputs));
    for (k, (flag, path, id)) in outputs.iter().enumerate() {
        if let Some((input, _, _)) = inputs.iter().find(|(_, _, i)| i == id) {
            return Err(CliError::Usage(format!(
                "{flag} {} is the input {input}: writing it would destroy the input; give {flag} another file",
                path.display()
            )));
        }
        if let Some((other, _, _)) = outputs[..k].iter().find(|(_, _, o)| o == id) {
            return Err(CliError::Usage(format!(
                "{other} and {flag} both write {}: only the last would be kept; give each its own file",
                path.display()
            )));
        }
    }
    Ok(())
}

/// What makes two paths one file (see [`refuse_clashes`]); `None` for a
/// path that is not, and will not become, a regular file.
#[derive(PartialEq, Eq)]
enum FileId {
    Inode(u64, u64),
    Path(PathBuf),
}

fn file_id(path: &Path) -> Option<FileId> {
    let target = irqlab_report::follow_links(path).unwrap_or_else(|_| path.to_path_buf());
    match std::fs::metadata(&target) {
        Ok(meta) if meta.is_file() => Some(FileId::Inode(meta.dev(), meta.ino())),
        Ok(_) => None,
        Err(_) => {
            // Not there yet: its directory may be, under another spelling.
            let name = target.file_name()?;
            let dir = match target.parent() {
                Some(d) if !d.as_os_str().is_empty() => d,
                _ => Path::new("."),
            };
            let dir = std::fs::canonicalize(dir).or_else(|_| std::path::absolute(dir)).ok()?;
            Some(FileId::Path(dir.join(name)))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_guests_text_outputs_say_where_they_ran_and_whether_its_cpu_was_emulated() {
        let tcg = serde_json::json!({"kernel": "debian:6.12-rt", "release": "6.12.117+deb12-rt-amd64", "accel": "tcg", "emulated": true, "icount": true});
        let text = sentence_of(&tcg);
        assert!(text.contains("debian:6.12-rt (6.12.117+deb12-rt-amd64)"), "{text}");
        assert!(text.contains("software emulation (TCG, clock driven by executed instructions (-icount))"), "{text}");
        assert!(text.ends_with("not this hardware's."), "{text}");
        let kvm =
            serde_json::json!({"kernel": "debian:6.1", "release": "6.1.0-40-amd64", "accel": "kvm", "emulated": false, "icount": false});
        assert_eq!(sentence_of(&kvm), "Run in an `irqlab lab` guest, debian:6.1 (6.1.0-40-amd64), under kvm.");
    }
}
