//! Progress bars for long work: drawn on a terminal, silent otherwise.

use indicatif::{ProgressBar, ProgressStyle};
use std::io::IsTerminal;

/// A bar of `len` steps labelled `what`; hidden when stderr is not a tty.
pub fn bar(len: u64, what: &str) -> ProgressBar {
    if !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(len);
    bar.set_style(
        ProgressStyle::with_template("{msg:>12} [{bar:40}] {percent:>3}% eta {eta}").expect("static template").progress_chars("=> "),
    );
    bar.set_message(what.to_string());
    bar
}
