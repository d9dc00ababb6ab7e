//! Ctrl-C: the first one asks the running measurement to stop and write what
//! it has (marked incomplete); a second one exits at once, except while a
//! result file is being written: then it exits as soon as that write is done
//! (an exit in the middle lost the result and left the hidden temp file).

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

static STOP: OnceLock<Arc<AtomicBool>> = OnceLock::new();
/// Result files being written now (see [`writing`]).
static WRITING: AtomicUsize = AtomicUsize::new(0);
/// A second signal came while a file was being written.
static EXIT_WHEN_WRITTEN: AtomicBool = AtomicBool::new(false);

/// The process-wide stop flag, set by Ctrl-C (SIGINT) or SIGTERM.
pub fn stop_flag() -> Arc<AtomicBool> {
    STOP.get_or_init(|| {
        let flag = Arc::new(AtomicBool::new(false));
        let handler_flag = flag.clone();
        // A failure here means another handler is installed; the flag then
        // simply never fires, which is safe.
        let _ = ctrlc::set_handler(move || on_signal(&handler_flag, || std::process::exit(130)));
        flag
    })
    .clone()
}

/// What a signal does: the first sets `stop`; a later one calls `exit`,
/// unless a result file is being written (then [`writing`] exits when it
/// is done).
fn on_signal(stop: &AtomicBool, exit: impl FnOnce()) {
    if !stop.swap(true, Ordering::SeqCst) {
        eprintln!("\nstopping: writing what was measured (Ctrl-C again to abort)");
        return;
    }
    // Announce first, then look: a write that starts after the look sees
    // the announcement and exits before creating anything.
    EXIT_WHEN_WRITTEN.store(true, Ordering::SeqCst);
    if WRITING.load(Ordering::SeqCst) == 0 {
        exit();
    } else {
        eprintln!("aborting once the file being written is complete");
    }
}

/// Runs `write` (one result file's atomic write) so that a second Ctrl-C
/// cannot cut it short: the exit it asks for happens after the file is
/// complete, or before it is begun.
pub fn writing<T>(write: impl FnOnce() -> T) -> T {
    writing_then(write, || std::process::exit(130))
}

fn writing_then<T>(write: impl FnOnce() -> T, exit: impl Fn()) -> T {
    WRITING.fetch_add(1, Ordering::SeqCst);
    if EXIT_WHEN_WRITTEN.load(Ordering::SeqCst) {
        WRITING.fetch_sub(1, Ordering::SeqCst);
        exit();
    }
    let out = write();
    if WRITING.fetch_sub(1, Ordering::SeqCst) == 1 && EXIT_WHEN_WRITTEN.load(Ordering::SeqCst) {
        exit();
    }
    out
}

/// Whether SIGINT or SIGTERM stopped this run (the flag was asked for and
/// set): its result is partial whatever the command made of it.
pub fn interrupted() -> bool {
    STOP.get().is_some_and(|flag| flag.load(Ordering::SeqCst))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    #[test]
    fn a_second_signal_during_a_write_waits_for_it() {
        let stop = AtomicBool::new(false);
        let exits = Cell::new(0);
        on_signal(&stop, || exits.set(exits.get() + 1));
        assert!(stop.load(Ordering::SeqCst) && exits.get() == 0, "the first signal only stops");
        let written = writing_then(
            || {
                on_signal(&stop, || exits.set(exits.get() + 1));
                assert_eq!(exits.get(), 0, "no exit in the middle of the write");
                "the whole file"
            },
            || exits.set(exits.get() + 1),
        );
        assert_eq!((written, exits.get()), ("the whole file", 1), "the exit comes once the write is done");
        // Afterwards (no write running) a signal exits at once, and a write
        // that would start now exits before it begins.
        on_signal(&stop, || exits.set(exits.get() + 1));
        assert_eq!(exits.get(), 2);
        writing_then(|| (), || exits.set(exits.get() + 1));
        assert_eq!(exits.get(), 3);
        EXIT_WHEN_WRITTEN.store(false, Ordering::SeqCst);
    }
}
