//! Known interference for tests and cross-checks: a SCHED_FIFO thread on
//! one CPU that busy-runs `run_ns` at the start of every `period_ns`.

use super::clock::monotonic_ns;
use super::sched::{set_policy, Policy};
use irqlab_host::error::{Error, Result};
use irqlab_host::rt::pin_to_cpu;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

/// A running injector; stops (and joins) when dropped.
pub struct Injector {
    stop: Arc<AtomicBool>,
    activations: Arc<AtomicU64>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Injector {
    /// Starts the thread; returns once it runs at its priority on `cpu`.
    pub fn start(cpu: usize, priority: i32, run_ns: u64, period_ns: u64) -> Result<Injector> {
        if run_ns >= period_ns {
            return Err(Error::Invalid("injected run time must be shorter than its period".into()));
        }
        let stop = Arc::new(AtomicBool::new(false));
        let activations = Arc::new(AtomicU64::new(0));
        let (tx, rx) = std::sync::mpsc::channel();
        let (s, a) = (stop.clone(), activations.clone());
        let thread = std::thread::Builder::new()
            .name("irqlab-inject".into())
            .spawn(move || {
                let ready = pin_to_cpu(cpu).and_then(|_| set_policy(Policy::Fifo, priority));
                let ok = ready.is_ok();
                let _ = tx.send(ready);
                if ok {
                    run(&s, &a, run_ns, period_ns);
                }
            })
            .map_err(|e| Error::io("spawning the injector", e))?;
        match rx.recv() {
            Ok(Ok(())) => Ok(Injector { stop, activations, thread: Some(thread) }),
            Ok(Err(e)) => Err(e),
            Err(_) => Err(Error::Failed("the injector thread died".into())),
        }
    }

    /// How many times it has run so far.
    pub fn activations(&self) -> u64 {
        self.activations.load(Ordering::Relaxed)
    }
}

fn run(stop: &AtomicBool, activations: &AtomicU64, run_ns: u64, period_ns: u64) {
    let mut next = monotonic_ns() + period_ns;
    while !stop.load(Ordering::Relaxed) {
        let ts = libc::timespec { tv_sec: (next / 1_000_000_000) as _, tv_nsec: (next % 1_000_000_000) as _ };
        // SAFETY: absolute sleep with a valid timespec.
        unsafe { libc::clock_nanosleep(libc::CLOCK_MONOTONIC, libc::TIMER_ABSTIME, &ts, std::ptr::null_mut()) };
        let until = monotonic_ns().max(next) + run_ns;
        while monotonic_ns() < until {
            std::hint::spin_loop();
        }
        activations.fetch_add(1, Ordering::Relaxed);
        next += period_ns;
    }
}

impl Drop for Injector {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
