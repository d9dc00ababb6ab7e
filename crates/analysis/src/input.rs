//! Errors in user input that point at the place: `file:line:col`.
//!
//! Every parser of user files (task sets, scenarios, curves) reports through
//! [`InputError`]; the CLI prints it as `error: <what>` and `  at
//! <file>:<line>:<col>` and exits 2.

use std::fmt;
use std::ops::Range;

/// A place in an input file. Lines and columns count from 1; the column
/// counts characters, as editors do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Location {
    pub file: String,
    pub line: usize,
    pub col: usize,
}

impl Location {
    /// The location of byte offset `offset` in `source`.
    pub fn at_offset(file: &str, source: &str, offset: usize) -> Self {
        let offset = offset.min(source.len());
        let before = &source[..floor_char_boundary(source, offset)];
        let line = before.matches('\n').count() + 1;
        let line_start = before.rfind('\n').map_or(0, |i| i + 1);
        let col = before[line_start..].chars().count() + 1;
        Location { file: file.to_string(), line, col }
    }

    /// The location of the start of a byte span (as `toml::Spanned` gives).
    pub fn at_span(file: &str, source: &str, span: Range<usize>) -> Self {
        Self::at_offset(file, source, span.start)
    }

    /// A location for a file as a whole (e.g. it could not be read).
    pub fn file_only(file: &str) -> Self {
        Location { file: file.to_string(), line: 0, col: 0 }
    }
}

fn floor_char_boundary(s: &str, mut i: usize) -> usize {
    while i > 0 && !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line == 0 {
            write!(f, "{}", self.file)
        } else {
            write!(f, "{}:{}:{}", self.file, self.line, self.col)
        }
    }
}

/// Bad user input: what is wrong, and where (when it is known).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct InputError {
    pub message: String,
    pub location: Option<Location>,
}

impl InputError {
    pub fn new(message: impl Into<String>) -> Self {
        InputError { message: message.into(), location: None }
    }

    pub fn at(message: impl Into<String>, location: Location) -> Self {
        InputError { message: message.into(), location: Some(location) }
    }

    /// Converts a `toml` parse or deserialisation error into a located one.
    pub fn from_toml(file: &str, source: &str, err: &toml::de::Error) -> Self {
        let location = err.span().map(|span| Location::at_span(file, source, span));
        InputError { message: err.message().trim().to_string(), location }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_map_to_line_and_column() {
        let src = "a = 1\nbb = \"x\"\n";
        assert_eq!(Location::at_offset("f", src, 0).to_string(), "f:1:1");
        assert_eq!(Location::at_offset("f", src, 8).to_string(), "f:2:3");
        assert_eq!(Location::file_only("f").to_string(), "f");
    }

    #[test]
    fn toml_errors_are_located() {
        let src = "[[task]]\nname = \n";
        let err = toml::from_str::<toml::Value>(src).unwrap_err();
        let e = InputError::from_toml("t.toml", src, &err);
        assert_eq!(e.location.unwrap().line, 2);
    }
}
