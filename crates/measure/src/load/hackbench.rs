//! A hackbench-like load: pairs of threads passing 100-byte messages back
//! and forth over Unix socket pairs, so the scheduler does a wake-up and a
//! context switch for every message.

use irqlab_host::error::{Error, Result};
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::sync::atomic::AtomicBool;

const MESSAGE: usize = 100;

pub fn run(groups: usize, duration_ns: u64, stop: &AtomicBool) -> Result<super::Done> {
    if groups == 0 {
        return Err(Error::Invalid("hackbench-like load needs at least one group".into()));
    }
    let deadline = super::deadline(duration_ns);
    let pairs: Vec<(UnixStream, UnixStream)> =
        (0..groups).map(|_| UnixStream::pair()).collect::<std::io::Result<_>>().map_err(|e| Error::io("making socket pairs", e))?;
    let messages = std::thread::scope(|s| {
        let workers: Vec<_> = pairs
            .into_iter()
            .map(|(mut a, mut b)| {
                let echo = s.spawn(move || {
                    let mut buf = [0u8; MESSAGE];
                    while b.read_exact(&mut buf).is_ok() {
                        if b.write_all(&buf).is_err() {
                            break;
                        }
                    }
                });
                s.spawn(move || {
                    let mut buf = [7u8; MESSAGE];
                    let mut n = 0u64;
                    while super::running(deadline, stop) {
                        if a.write_all(&buf).is_err() || a.read_exact(&mut buf).is_err() {
                            break;
                        }
                        n += 1;
                    }
                    // Closing our end ends the echo thread.
                    drop(a);
                    let _ = echo.join();
                    n
                })
            })
            .collect();
        workers.into_iter().map(|w| w.join().unwrap_or(0)).sum()
    });
    Ok(super::Done::new(messages, "round trips", format!("{groups} thread pairs over Unix sockets")))
}
