//! Monitors: turn what the kernel does into the observations the live
//! policies decide on (tracepoints only: this kernel has no kprobes).

pub mod io;
pub mod napi;
pub mod thread;
