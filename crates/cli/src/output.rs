//! Writing results: every file goes through the report crate's atomic writer.

use crate::error::CliError;
use std::path::Path;

pub fn write_json<T: serde::Serialize>(path: &Path, value: &T) -> Result<(), CliError> {
    irqlab_report::write_json(path, value).map_err(|e| CliError::io(path, e))
}

pub fn write_text(path: &Path, text: &str) -> Result<(), CliError> {
    irqlab_report::write_atomic(path, text.as_bytes()).map_err(|e| CliError::io(path, e))
}

/// The `--json FILE|-` convention: "-" prints the document on stdout
/// instead of the text summary (for pipes); a file gets the document, and
/// stdout the summary; no flag, only the summary.
pub fn json_or_summary<T: serde::Serialize>(json: Option<&Path>, value: &T, summary: impl FnOnce(&T) -> String) -> Result<(), CliError> {
    match json {
        Some(path) if path.as_os_str() == "-" => println!("{}", serde_json::to_string_pretty(value).expect("serialisable")),
        json => {
            if let Some(path) = json {
                write_json(path, value)?;
            }
            print!("{}", summary(value));
        }
    }
    Ok(())
}

/// Reads a user file, mapping "not there" to a clear exit-2 error.
pub fn read_text(path: &Path) -> Result<String, CliError> {
    std::fs::read_to_string(path).map_err(|e| CliError::io(path, e))
}
