//! Deterministic discrete-event simulator of a Linux-like kernel: hard IRQs,
//! softirqs, NAPI, ksoftirqd, threaded IRQs, schedulers and servers.
