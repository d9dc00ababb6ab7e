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
        let mut message = err.message().trim().to_string();
        if message.is_empty() {
            // toml 0.8 has no words for a bad character in a comment (a NUL,
            // a bare CR): name the character it points at.
            let found = err.span().and_then(|span| source.get(span.start..)).and_then(|rest| rest.chars().next());
            message = match found {
                Some(c) if c.is_control() => {
                    format!("control character U+{:04X} is not allowed in TOML, not even in a comment", c as u32)
                }
                Some(c) => format!("unexpected `{}` in TOML", c.escape_default()),
                None => "the TOML ends too early".to_string(),
            };
        }
        InputError { message, location }
    }
}

/// Reads a JSON document of `schema` (its `schema` field): a JSON error
/// is located at its line and column, another kind of document is named
/// by its schema.
pub fn json_document<T: serde::de::DeserializeOwned>(file: &str, text: &str, schema: &str) -> Result<T, InputError> {
    #[derive(serde::Deserialize)]
    struct Head {
        schema: Option<String>,
    }
    let wrong_schema = |found: &str| {
        let offset = text.find("\"schema\"").unwrap_or(0);
        InputError::at(format!("schema is `{found}`, expected `{schema}`"), Location::at_offset(file, text, offset))
    };
    if let Ok(Head { schema: Some(found) }) = serde_json::from_str::<Head>(text) {
        if found != schema {
            return Err(wrong_schema(&found));
        }
    }
    serde_json::from_str::<T>(text).map_err(|e| {
        // serde_json counts a line's columns from 1 but says 0 for an
        // error found at a line's very start.
        let location = Location { file: file.to_string(), line: e.line(), col: e.column().max(1) };
        InputError::at(format!("not an {schema} document: {e}"), location)
    })
}

/// An input file's bytes as text, or where the first byte that is not
/// UTF-8 sits (every parser here reads UTF-8 only).
pub fn utf8<'a>(file: &str, bytes: &'a [u8]) -> Result<&'a str, InputError> {
    std::str::from_utf8(bytes).map_err(|e| {
        let valid = std::str::from_utf8(&bytes[..e.valid_up_to()]).unwrap_or_default();
        InputError::at(
            format!("byte 0x{:02x} is not UTF-8: irqlab reads UTF-8 text only", bytes[e.valid_up_to()]),
            Location::at_offset(file, valid, valid.len()),
        )
    })
}

/// The longest quoted value an error message echoes, in characters.
pub const ECHO_LIMIT: usize = 80;

/// `message` with every value quoted in backticks or double quotes cut to
/// [`ECHO_LIMIT`] characters and marked with `…`: a 100 KB bad value in a
/// file is worth its first line on the terminal, not 100 KB of it.
pub fn clip_echoes(message: &str) -> String {
    clip_quoted(message, &['`', '"'])
}

/// [`clip_echoes`] for a message that quotes values in any of `quotes`
/// (clap's own errors quote them in single quotes).
pub fn clip_quoted(message: &str, quotes: &[char]) -> String {
    let mut out = String::with_capacity(message.len().min(4096));
    let clipped = |out: &mut String, value: &str| match value.char_indices().nth(ECHO_LIMIT) {
        Some((cut, _)) => {
            out.push_str(&value[..cut]);
            out.push('…');
        }
        None => out.push_str(value),
    };
    let mut rest = message;
    while let Some(open) = rest.find(quotes) {
        let quote = &rest[open..=open];
        out.push_str(&rest[..=open]);
        rest = &rest[open + 1..];
        let Some(close) = rest.find(quote) else {
            // An unclosed quote: the rest is one value.
            clipped(&mut out, rest);
            return out;
        };
        clipped(&mut out, &rest[..close]);
        out.push_str(quote);
        rest = &rest[close + 1..];
    }
    out.push_str(rest);
    out
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

    #[test]
    fn control_characters_in_toml_comments_are_named() {
        for (src, code) in [("# a\0b\nx = 1\n", "U+0000"), ("# a\rb\nx = 1\n", "U+000D")] {
            let err = toml::from_str::<toml::Value>(src).unwrap_err();
            let e = InputError::from_toml("t.toml", src, &err);
            assert!(e.message.contains(code), "{src:?}: {}", e.message);
            assert_eq!(e.location.unwrap().to_string(), "t.toml:1:4");
        }
    }

    #[test]
    fn non_utf8_bytes_are_located() {
        assert_eq!(utf8("f", b"ok").unwrap(), "ok");
        let e = utf8("f", b"a = 1\nb = \"\xff\"").unwrap_err();
        assert_eq!(e.location.unwrap().to_string(), "f:2:6");
        assert!(e.message.contains("0xff"), "{}", e.message);
    }

    #[test]
    fn long_echoed_values_are_clipped() {
        let long = "x".repeat(100_000);
        let clipped = clip_echoes(&format!("period: duration `{long}` is bad; \"{long}\" too"));
        assert_eq!(clipped, format!("period: duration `{}…` is bad; \"{}…\" too", "x".repeat(80), "x".repeat(80)));
        assert_eq!(clip_echoes("short `v` and \"w\""), "short `v` and \"w\"");
        assert_eq!(clip_echoes(&long), long);
        assert_eq!(clip_echoes(&format!("open `{long}")), format!("open `{}…", "x".repeat(80)));
        assert_eq!(clip_echoes(&format!("`{}`", "é".repeat(81))), format!("`{}…`", "é".repeat(80)));
    }
}
