//! Undo actions that must run even when the process exits without
//! unwinding (a second Ctrl-C calls `exit(130)`, which runs no destructors).
//!
//! A guard that changes the machine (the control journal's `Applied`,
//! testbed namespaces) registers here what its `Drop` would undo and
//! holds the returned [`Registration`]; dropping the guard normally
//! unregisters it. Whatever is still registered when the process exits runs
//! from an `atexit` hook, newest first.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, Once};

type Undo = Box<dyn FnOnce() + Send>;

static PENDING: Mutex<Vec<(u64, Undo)>> = Mutex::new(Vec::new());
/// Held by a guard while its `Drop` undoes; the exit hook waits for it, so
/// an exit from another thread (second Ctrl-C) cannot cut a removal short.
static BUSY: Mutex<()> = Mutex::new(());
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// Keeps an undo action registered; dropping it unregisters the action
/// without running it (the guard's own `Drop` does the undoing then).
#[derive(Debug)]
pub struct Registration(u64);

impl Drop for Registration {
    fn drop(&mut self) {
        let mut pending = PENDING.lock().unwrap_or_else(|p| p.into_inner());
        pending.retain(|(id, _)| *id != self.0);
    }
}

/// Runs `undo` at process exit unless the returned registration is dropped
/// first.
pub fn at_exit(undo: impl FnOnce() + Send + 'static) -> Registration {
    static HOOK: Once = Once::new();
    // SAFETY: registering a plain extern "C" function with no arguments.
    HOOK.call_once(|| unsafe {
        libc::atexit(run_pending_at_exit);
    });
    let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
    PENDING.lock().unwrap_or_else(|p| p.into_inner()).push((id, Box::new(undo)));
    Registration(id)
}

/// Held while a guard undoes its changes in `Drop`.
pub fn busy() -> std::sync::MutexGuard<'static, ()> {
    BUSY.lock().unwrap_or_else(|p| p.into_inner())
}

/// Runs every registered undo action now, newest first, after any undoing
/// in progress on another thread.
pub fn run_pending() {
    let _busy = busy();
    let actions = std::mem::take(&mut *PENDING.lock().unwrap_or_else(|p| p.into_inner()));
    for (_, undo) in actions.into_iter().rev() {
        undo();
    }
}

extern "C" fn run_pending_at_exit() {
    run_pending();
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;
    use std::sync::Arc;

    #[test]
    fn dropped_registrations_do_not_run_and_kept_ones_run_newest_first() {
        let log = Arc::new(Mutex::new(Vec::new()));
        let ran = Arc::new(AtomicUsize::new(0));
        let (l1, l2, r) = (log.clone(), log.clone(), ran.clone());
        let first = at_exit(move || l1.lock().unwrap().push(1));
        let second = at_exit(move || l2.lock().unwrap().push(2));
        let dropped = at_exit(move || {
            r.fetch_add(1, Ordering::SeqCst);
        });
        drop(dropped);
        run_pending();
        assert_eq!(*log.lock().unwrap(), vec![2, 1]);
        assert_eq!(ran.load(Ordering::SeqCst), 0);
        // Already run: running again does nothing.
        run_pending();
        assert_eq!(log.lock().unwrap().len(), 2);
        drop((first, second));
    }
}
