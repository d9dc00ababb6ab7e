//! The thread-watch BPF monitor against a thread whose behaviour is known:
//! it spins, sleeps and spins again; the events must say so in order, and
//! the on-CPU time they add up to must be the map's, and at least what the
//! thread's own CPU clock says (that clock leaves out IRQ time when the
//! kernel accounts it separately; the switches do not). Live: root.

use irqlab_live::monitor::thread::{Kind, Storage, ThreadWatch};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: valid out-pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

#[test]
fn events_follow_a_spinning_and_sleeping_thread() {
    if std::env::var("IRQLAB_LIVE_TESTS").as_deref() != Ok("1") {
        eprintln!("skipped: live test (set IRQLAB_LIVE_TESTS=1 and run as root: BPF)");
        return;
    }
    let tid = Arc::new(AtomicU32::new(0));
    let ready = Arc::new(Barrier::new(2));
    let go = Arc::new(Barrier::new(2));
    let worker = {
        let (tid, ready, go) = (tid.clone(), ready.clone(), go.clone());
        std::thread::spawn(move || {
            tid.store(nix::unistd::gettid().as_raw() as u32, Ordering::SeqCst);
            ready.wait();
            go.wait();
            let (cpu_before, started) = (thread_cpu_ns(), Instant::now());
            for _ in 0..3 {
                let until = Instant::now() + Duration::from_millis(20);
                while Instant::now() < until {
                    std::hint::spin_loop();
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            (thread_cpu_ns() - cpu_before, started.elapsed().as_nanos() as u64)
        })
    };
    ready.wait();
    let tid = tid.load(Ordering::SeqCst);
    let mut storage = Storage::default();
    let mut watch = ThreadWatch::start(&mut storage, &[tid]).expect("thread watch");
    let ran_before = watch.ran_ns(tid, irqlab_live::rt::monotonic_ns()).unwrap().unwrap();
    go.wait();
    let (cpu_ns, wall_ns) = worker.join().unwrap();
    std::thread::sleep(Duration::from_millis(20));
    let events: Vec<_> = watch.poll(Duration::from_millis(100)).unwrap().into_iter().filter(|e| e.tid == tid).collect();
    let ran_ns = watch.ran_ns(tid, irqlab_live::rt::monotonic_ns()).unwrap().unwrap() - ran_before;
    assert_eq!(watch.lost_events(), 0);

    // In and out alternate; the runs between them add up to the map's total.
    let mut summed = 0;
    let mut on_since = None;
    for e in &events {
        match e.kind {
            Kind::In => {
                assert!(on_since.is_none(), "switched in twice: {events:?}");
                on_since = Some(e.ts_ns);
            }
            Kind::Preempted | Kind::Blocked => {
                if let Some(t) = on_since.take() {
                    summed += e.ts_ns - t;
                }
            }
            Kind::Wakeup => {}
        }
    }
    let blocked = events.iter().filter(|e| e.kind == Kind::Blocked).count();
    let wakeups = events.iter().filter(|e| e.kind == Kind::Wakeup).count();
    eprintln!("{} events, {blocked} blocks, {wakeups} wake-ups; on CPU {ran_ns} ns by the switches, {cpu_ns} ns by the thread's clock", events.len());
    assert!(blocked >= 3 && wakeups >= 3, "{events:?}");
    // The first run began before the watch saw it switch in, so the events
    // can only be short of the map by that part.
    assert!(summed <= ran_ns, "events {summed} ns > map {ran_ns} ns");
    assert!(ran_ns >= cpu_ns * 99 / 100, "switches saw {ran_ns} ns on CPU, the thread's clock {cpu_ns} ns");
    // Never more than the thread existed (plus the spawn and exit around
    // the timed part: 5 ms).
    assert!(ran_ns <= wall_ns + 5_000_000, "{ran_ns} ns on CPU in {wall_ns} ns");
}
