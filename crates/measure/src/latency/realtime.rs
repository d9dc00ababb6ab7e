//! The real-time set-up that every latency thread does the same way as
//! cyclictest: pin to a CPU, SCHED_FIFO at a priority, all memory locked
//! (the toolkit in [`irqlab_host::rt`]), and `/dev/cpu_dma_latency` held at 0 so
//! deep C-states cannot add their exit latency to what is measured.

use irqlab_host::error::{Error, Result};
use irqlab_host::rt::{lock_memory, set_fifo, unlock_memory};
use std::fs::File;
use std::io::Write;

/// What a measuring thread needs, tried for real and undone: lock memory
/// (then unlock it) and take SCHED_FIFO `priority` in a scratch thread
/// that ends at once. Exit 3 naming what is missing. A trial, not a
/// capability check, because RLIMIT_RTPRIO / RLIMIT_MEMLOCK can grant
/// either without a capability.
pub fn check_prerequisites(priority: u8) -> Result<()> {
    lock_memory()?;
    unlock_memory();
    std::thread::spawn(move || set_fifo(priority))
        .join()
        .unwrap_or_else(|_| Err(Error::Failed("the SCHED_FIFO trial thread panicked".into())))
}

/// Holds `/dev/cpu_dma_latency` at 0 us while alive; the kernel drops the
/// request when the file is closed, so dropping this restores the system.
pub struct DmaLatencyHold {
    _file: File,
}

impl DmaLatencyHold {
    /// `Ok(None)` when the file does not exist (kernel without PM QoS).
    pub fn zero() -> Result<Option<Self>> {
        let path = "/dev/cpu_dma_latency";
        let mut file = match std::fs::OpenOptions::new().write(true).open(path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
                return Err(Error::MissingPrivilege {
                    capability: "CAP_DAC_OVERRIDE",
                    purpose: "hold /dev/cpu_dma_latency at 0 (it is root's file)".into(),
                })
            }
            Err(e) => return Err(Error::io(format!("opening {path}"), e)),
        };
        file.write_all(&0i32.to_ne_bytes()).map_err(|e| Error::io(format!("writing {path}"), e))?;
        Ok(Some(DmaLatencyHold { _file: file }))
    }
}
