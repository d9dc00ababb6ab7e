//! Helpers shared by the live tests.

use std::sync::atomic::{AtomicBool, Ordering};

/// Sets every flag when dropped, also while unwinding from a failed
/// assertion: a `std::thread::scope` waits for its threads before the panic
/// leaves it, so threads that run until told to stop must be told, or the
/// test hangs instead of failing.
pub struct StopOnDrop<'a, const N: usize>(pub [&'a AtomicBool; N]);

impl<const N: usize> Drop for StopOnDrop<'_, N> {
    fn drop(&mut self) {
        for flag in self.0 {
            flag.store(true, Ordering::Relaxed);
        }
    }
}
