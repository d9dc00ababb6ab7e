//! Monitors: turn what the kernel does into the observations the live
//! policies decide on (tracepoints only: this kernel has no kprobes).

pub mod io;
pub mod napi;
pub mod thread;

use irqlab_host::error::{Error, Result};

/// Sleeps until `fd` (a ring buffer's epoll descriptor) is readable or
/// `timeout_ns` passed, to the nanosecond: ppoll(2), where libbpf's own
/// ring poll takes whole milliseconds (a wait under one returns at once,
/// and a controller waiting for a sub-millisecond interval spins). A
/// signal ends the wait early; the caller looks at its stop flag.
pub(crate) fn wait_readable(fd: i32, timeout_ns: u64) -> Result<()> {
    use nix::poll::{ppoll, PollFd, PollFlags};
    // SAFETY: the ring buffer (and its epoll fd) outlives this call.
    let fd = unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) };
    let mut fds = [PollFd::new(fd, PollFlags::POLLIN)];
    let timeout = nix::sys::time::TimeSpec::from_duration(std::time::Duration::from_nanos(timeout_ns));
    match ppoll(&mut fds, Some(timeout), None) {
        Ok(_) | Err(nix::errno::Errno::EINTR) => Ok(()),
        Err(e) => Err(Error::io("waiting for a ring buffer's events", std::io::Error::from(e))),
    }
}
