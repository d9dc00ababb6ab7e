//! Stop flags for threads that run until they are told to stop.
//!
//! `std::thread::scope` joins every thread before a panic leaves it. A
//! thread that loops until a flag is set, waiting for another thread that
//! panicked before setting it, then hangs the whole scope: the panic
//! never surfaces. The thread that owes the signal holds a
//! [`StopOnDrop`], which sets the flags on every way out, unwinding
//! included.

use std::sync::atomic::{AtomicBool, Ordering};

/// Sets every flag when dropped.
pub struct StopOnDrop<'a, const N: usize>(pub [&'a AtomicBool; N]);

impl<const N: usize> Drop for StopOnDrop<'_, N> {
    fn drop(&mut self) {
        for flag in self.0 {
            flag.store(true, Ordering::SeqCst);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panicking_thread_still_releases_the_waiting_one() {
        let done = AtomicBool::new(false);
        let outcome = std::thread::scope(|s| {
            let waiter = s.spawn(|| {
                while !done.load(Ordering::SeqCst) {
                    std::thread::yield_now();
                }
            });
            let worker = s.spawn(|| {
                let _done = StopOnDrop([&done]);
                panic!("worker fails before signalling");
            });
            (worker.join().is_err(), waiter.join().is_ok())
        });
        assert_eq!(outcome, (true, true));
    }
}
