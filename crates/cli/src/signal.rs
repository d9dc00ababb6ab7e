//! Ctrl-C: the first one asks the running measurement to stop and write what
//! it has (marked incomplete); a second one exits at once.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

static STOP: OnceLock<Arc<AtomicBool>> = OnceLock::new();

/// The process-wide stop flag, set by Ctrl-C (SIGINT) or SIGTERM.
pub fn stop_flag() -> Arc<AtomicBool> {
    STOP.get_or_init(|| {
        let flag = Arc::new(AtomicBool::new(false));
        let handler_flag = flag.clone();
        // A failure here means another handler is installed; the flag then
        // simply never fires, which is safe.
        let _ = ctrlc::set_handler(move || {
            if handler_flag.swap(true, Ordering::SeqCst) {
                std::process::exit(130);
            }
            eprintln!("\nstopping: writing what was measured (Ctrl-C again to abort)");
        });
        flag
    })
    .clone()
}

/// Whether SIGINT or SIGTERM stopped this run (the flag was asked for and
/// set): its result is partial whatever the command made of it.
pub fn interrupted() -> bool {
    STOP.get().is_some_and(|flag| flag.load(Ordering::SeqCst))
}
