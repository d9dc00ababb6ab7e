//! Writing results: every file goes through the report crate's atomic writer.
//!
//! The `--json FILE|-` convention, the same in every command: with a file,
//! the document goes there and the text summary to stdout; with "-", the
//! document goes to stdout *instead of* the summary (and of any live view
//! drawn on stdout), so a pipe gets one JSON document and nothing else.
//! Progress bars and diagnostics stay on stderr either way. The other
//! document flags (`--html`, `--svg`, `--trace`, ...) take a file only:
//! they parse with [`file_only`], which refuses "-".

use crate::error::CliError;
use std::io::Write;
use std::path::{Path, PathBuf};

pub fn write_json<T: serde::Serialize>(path: &Path, value: &T) -> Result<(), CliError> {
    irqlab_report::write_json(path, value).map_err(|e| CliError::io(path, e))
}

pub fn write_text(path: &Path, text: &str) -> Result<(), CliError> {
    irqlab_report::write_atomic(path, text.as_bytes()).map_err(|e| CliError::io(path, e))
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
        let text = serde_json::to_string_pretty(value).map_err(|e| CliError::Failed(format!("serialising the document: {e}")))?;
        let mut out = std::io::stdout().lock();
        return writeln!(out, "{text}")
            .and_then(|()| out.flush())
            .map_err(|e| CliError::Failed(format!("writing the document to stdout: {e}")));
    }
    print!("{}", summary(value));
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

/// Reads a user file, mapping "not there" to a clear exit-2 error.
pub fn read_text(path: &Path) -> Result<String, CliError> {
    std::fs::read_to_string(path).map_err(|e| CliError::io(path, e))
}
