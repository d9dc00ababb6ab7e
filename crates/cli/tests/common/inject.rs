//! Known interference for the live tests: a SCHED_FIFO thread of the
//! test's own on one CPU that wakes at each multiple of `period_ns` and
//! spins `run_ns` of wall time from its wake-up. Unlike `probe::Injector`
//! it does not catch up on periods it missed (a vCPU stall of several
//! periods would otherwise be followed by back-to-back bursts, and one run
//! showed 979 us of injector in a 1 ms window): every burst is exactly one
//! `run_ns` long, whatever the hypervisor does.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

pub struct Injector {
    stop: Arc<AtomicBool>,
    bursts: Arc<AtomicU64>,
    /// Each burst's [start, end), CLOCK_MONOTONIC ns (the last 1,000).
    spans: Arc<std::sync::Mutex<std::collections::VecDeque<(u64, u64)>>>,
    tid: u32,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Injector {
    /// Starts the thread, named `name` (its comm), on `cpu` at SCHED_FIFO
    /// `priority`; returns once it runs there.
    pub fn start(name: &str, cpu: usize, priority: i32, run_ns: u64, period_ns: u64) -> Injector {
        let stop = Arc::new(AtomicBool::new(false));
        let bursts = Arc::new(AtomicU64::new(0));
        let spans = Arc::new(std::sync::Mutex::new(std::collections::VecDeque::new()));
        let (halt, count, log) = (stop.clone(), bursts.clone(), spans.clone());
        let (tx, rx) = std::sync::mpsc::channel();
        let thread = std::thread::Builder::new()
            .name(name.into())
            .spawn(move || {
                irqlab_host::rt::pin_to_cpu(cpu).unwrap();
                irqlab_measure::probe::sched::set_policy(irqlab_measure::probe::Policy::Fifo, priority).unwrap();
                // SAFETY: gettid has no preconditions.
                tx.send(unsafe { libc::gettid() } as u32).unwrap();
                let now = irqlab_host::rt::monotonic_ns;
                let mut next = now() / period_ns * period_ns + period_ns;
                while !halt.load(Ordering::Relaxed) {
                    let ts = libc::timespec { tv_sec: (next / 1_000_000_000) as _, tv_nsec: (next % 1_000_000_000) as _ };
                    // SAFETY: absolute sleep with a valid timespec.
                    unsafe { libc::clock_nanosleep(libc::CLOCK_MONOTONIC, libc::TIMER_ABSTIME, &ts, std::ptr::null_mut()) };
                    let began = now();
                    let until = began + run_ns;
                    while now() < until {
                        std::hint::spin_loop();
                    }
                    count.fetch_add(1, Ordering::Relaxed);
                    let mut log = log.lock().unwrap();
                    if log.len() == 1_000 {
                        log.pop_front();
                    }
                    log.push_back((began, now()));
                    drop(log);
                    // The next period boundary still ahead: missed ones are skipped.
                    next = now() / period_ns * period_ns + period_ns;
                }
            })
            .unwrap();
        let tid = rx.recv().expect("the injector thread started");
        Injector { stop, bursts, spans, tid, thread: Some(thread) }
    }

    /// How many bursts it has run.
    pub fn bursts(&self) -> u64 {
        self.bursts.load(Ordering::Relaxed)
    }

    /// Each burst's [start, end), CLOCK_MONOTONIC ns (the last 1,000).
    pub fn spans(&self) -> Vec<(u64, u64)> {
        self.spans.lock().unwrap().iter().copied().collect()
    }

    /// Its thread id: what `irqlab control threads pid:N` takes.
    pub fn tid(&self) -> u32 {
        self.tid
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
