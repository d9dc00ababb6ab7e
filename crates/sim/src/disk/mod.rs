//! A single-actuator disk drive with seek, rotation and transfer times, and
//! the C-LOOK elevator that orders its queue (FreeBSD's `bufqdisksort`).
//!
//! Calibrated to the idletime dissertation's drive (§6.1): a Western Digital
//! Caviar AC28200, 8.2 GB, manufacturer's 15 ms maximum mean seek and 5 ms
//! mean latency, measured mean random service time ≈ 19 ms (§4.4.2).
//! [`device`] puts the drive into the kernel path (`[disk]` in a scenario).

pub mod clook;
pub mod device;
pub mod drive;

pub use clook::CLookQueue;
pub use device::{DiskCosts, DiskDevice};
pub use drive::{DiskGeometry, Drive};
