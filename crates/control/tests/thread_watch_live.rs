//! The thread-watch BPF monitor against a thread whose behaviour is known:
//! it spins, sleeps and spins again; the events must say so in order, the
//! runtime they carry must end at the map's total, and that total must be
//! at least what the thread's own CPU clock measured (both read the
//! scheduler's runtime clock). Live: root.

use irqlab_control::monitor::thread::{Kind, Storage, ThreadWatch};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: valid out-pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// A thread that runs `body` once released: its tid, the barrier that
/// releases it (a watch can attach between the two), and its handle.
fn worker<T: Send + 'static>(body: impl FnOnce() -> T + Send + 'static) -> (u32, Arc<Barrier>, std::thread::JoinHandle<T>) {
    let tid = Arc::new(AtomicU32::new(0));
    let (ready, go) = (Arc::new(Barrier::new(2)), Arc::new(Barrier::new(2)));
    let handle = {
        let (tid, ready, go) = (tid.clone(), ready.clone(), go.clone());
        std::thread::spawn(move || {
            tid.store(nix::unistd::gettid().as_raw() as u32, Ordering::SeqCst);
            ready.wait();
            go.wait();
            body()
        })
    };
    ready.wait();
    (tid.load(Ordering::SeqCst), go, handle)
}

#[test]
fn events_follow_a_spinning_and_sleeping_thread() {
    if std::env::var("IRQLAB_LIVE_TESTS").as_deref() != Ok("1") {
        eprintln!("skipped: live test (set IRQLAB_LIVE_TESTS=1 and run as root: BPF)");
        return;
    }
    let (tid, go, worker) = worker(|| {
        let (cpu_before, started) = (thread_cpu_ns(), Instant::now());
        for _ in 0..3 {
            let until = Instant::now() + Duration::from_millis(20);
            while Instant::now() < until {
                std::hint::spin_loop();
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        (thread_cpu_ns() - cpu_before, started.elapsed().as_nanos() as u64)
    });
    let mut storage = Storage::default();
    let mut watch = ThreadWatch::start(&mut storage, &[tid]).expect("thread watch");
    let ran_before = watch.ran_ns(tid, irqlab_host::rt::monotonic_ns()).unwrap().unwrap();
    go.wait();
    let (cpu_ns, wall_ns) = worker.join().unwrap();
    std::thread::sleep(Duration::from_millis(20));
    let events: Vec<_> = watch.poll(Duration::from_millis(100)).unwrap().into_iter().filter(|e| e.tid == tid).collect();
    let ran_ns = watch.ran_ns(tid, irqlab_host::rt::monotonic_ns()).unwrap().unwrap() - ran_before;
    assert_eq!(watch.lost_events(), 0);

    // In and out alternate, and the runtime each event carries never goes
    // back; the last one is the map's total (the thread has exited).
    let mut on = false;
    let mut last_ran = 0;
    for e in &events {
        match e.kind {
            Kind::In => {
                assert!(!on, "switched in twice: {events:?}");
                on = true;
            }
            Kind::Preempted | Kind::Blocked => on = false,
            Kind::Wakeup => {}
            Kind::Budget | Kind::Decision => panic!("a budget signal or waiter decision nobody asked for: {events:?}"),
        }
        assert!(e.ran_ns >= last_ran, "runtime went back: {events:?}");
        last_ran = e.ran_ns;
    }
    let blocked = events.iter().filter(|e| e.kind == Kind::Blocked).count();
    let wakeups = events.iter().filter(|e| e.kind == Kind::Wakeup).count();
    eprintln!(
        "{} events, {blocked} blocks, {wakeups} wake-ups; on CPU {ran_ns} ns by the watch, {cpu_ns} ns by the thread's clock",
        events.len()
    );
    assert!(blocked >= 3 && wakeups >= 3, "{events:?}");
    assert_eq!(events.last().map(|e| e.ran_ns - ran_before), Some(ran_ns), "the last event's runtime is not the map's");
    // The watch reads the scheduler's runtime clock, which the thread's CPU
    // clock also reads: the watch saw at least what the thread measured
    // inside its own window.
    assert!(ran_ns >= cpu_ns, "the watch saw {ran_ns} ns on CPU, the thread's clock {cpu_ns} ns");
    // Never more than the thread existed (plus the spawn and exit around
    // the timed part: 5 ms).
    assert!(ran_ns <= wall_ns + 5_000_000, "{ran_ns} ns on CPU in {wall_ns} ns");
}

/// The waiter filter (process-aware's monitor): a thread that sleeps in a
/// receive call is a waiter, at its scheduling's key; a sleep in another
/// call is not; one decision record per change of the highest waiter, none
/// of the other events.
#[test]
fn the_waiter_filter_signals_receive_waits_and_their_end() {
    if std::env::var("IRQLAB_LIVE_TESTS").as_deref() != Ok("1") {
        eprintln!("skipped: live test (set IRQLAB_LIVE_TESTS=1 and run as root: BPF)");
        return;
    }
    use irqlab_control::process_aware::{candidates::RECEIVE_CALLS, wait_key};
    use irqlab_host::journal::sched::SchedAttr;
    let socket = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let addr = socket.local_addr().unwrap();
    let (tid, go, worker) = worker(move || {
        // Not a receive call: no waiter.
        std::thread::sleep(Duration::from_millis(50));
        let mut buf = [0u8; 16];
        socket.recv(&mut buf).unwrap()
    });
    let mut storage = Storage::default();
    let mut watch = ThreadWatch::start(&mut storage, &[tid]).expect("thread watch");
    // A floor below the worker's SCHED_OTHER nice 0, so its wait changes
    // the highest key.
    let floor = wait_key(SchedAttr::Idle);
    watch.filter_waiters(floor, &RECEIVE_CALLS).unwrap();
    go.wait();
    std::thread::sleep(Duration::from_millis(30));
    assert_eq!(watch.waiting(tid).unwrap(), None, "a thread in nanosleep is no waiter");
    let deadline = Instant::now() + Duration::from_secs(2);
    while watch.waiting(tid).unwrap().is_none() {
        assert!(Instant::now() < deadline, "the worker never showed as waiting in recv");
        std::thread::sleep(Duration::from_millis(5));
    }
    let nice0 = wait_key(SchedAttr::Other { nice: 0 });
    assert_eq!(watch.waiting(tid).unwrap(), Some(nice0));
    std::net::UdpSocket::bind("127.0.0.1:0").unwrap().send_to(b"wake", addr).unwrap();
    assert_eq!(worker.join().unwrap(), 4);
    std::thread::sleep(Duration::from_millis(20));
    let events = watch.poll(Duration::from_millis(100)).unwrap();
    let keys: Vec<(Kind, i32)> = events.iter().map(|e| (e.kind, e.ran_ns as i64 as i32)).collect();
    assert_eq!(keys, [(Kind::Decision, nice0), (Kind::Decision, floor)], "{events:?}");
    assert_eq!(watch.waiting(tid).unwrap(), None);
    assert_eq!(watch.receive_waits(), 1);
}
