//! Consistency of the BPF accounting on the running kernel (issue 7):
//! per CPU, run + stolen + idle adds up to wall time; total softirq time
//! matches a plain softirq_entry/exit sum; a CPU-bound thread's run +
//! stolen time matches what the scheduler says it consumed; loopback UDP
//! softirq work is served to the receiving thread.
//!
//! Runs only with IRQLAB_LIVE_TESTS=1 (as root: CAP_BPF + CAP_PERFMON).

use irqlab_measure::accounting::names::{softirq_name, NET_RX, SOFTIRQ_NAMES};
use irqlab_measure::accounting::procfs;
use irqlab_measure::accounting::raw::{RawSnapshot, ReferenceCpu};
use irqlab_measure::accounting::report::TaskReport;
use irqlab_measure::accounting::{Options, Report, Session, Storage};
use std::net::UdpSocket;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn live() -> bool {
    if std::env::var("IRQLAB_LIVE_TESTS").as_deref() == Ok("1") {
        true
    } else {
        eprintln!("skipped: live test (set IRQLAB_LIVE_TESTS=1 and run as root to load BPF programs)");
        false
    }
}

fn gettid() -> u32 {
    nix::unistd::gettid().as_raw() as u32
}

fn clock_ns(clock: nix::time::ClockId) -> u64 {
    let t = nix::time::clock_gettime(clock).unwrap();
    t.tv_sec() as u64 * 1_000_000_000 + t.tv_nsec() as u64
}

fn thread_cpu_ns() -> u64 {
    clock_ns(nix::time::ClockId::CLOCK_THREAD_CPUTIME_ID)
}

/// The scheduler's task clock of this thread's CPU (`rq_clock_task`: the
/// clock its CPU time is charged in, less paravirt steal and, where the
/// kernel accounts it, IRQ time) beside CLOCK_MONOTONIC (the clock of
/// `bpf_ktime_get_ns`, the accounting's), read together; with the span of
/// the reads, the most the two readings may be apart. Reading
/// `schedstat` brings the running thread's `se.exec_start` up to the
/// task clock's now (task_sched_runtime); `sched` then shows it. None
/// where the kernel does not show `se.exec_start`.
fn task_clock_and_monotonic_ns() -> Option<(u64, u64, u64)> {
    let before = clock_ns(nix::time::ClockId::CLOCK_MONOTONIC);
    std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    let sched = std::fs::read_to_string("/proc/thread-self/sched").ok()?;
    let after = clock_ns(nix::time::ClockId::CLOCK_MONOTONIC);
    // "se.exec_start   :   10779297.374982": ms with six decimals.
    let value = sched.lines().find(|l| l.starts_with("se.exec_start"))?.split(':').nth(1)?.trim();
    let (ms, ns) = value.split_once('.')?;
    let task_clock = ms.parse::<u64>().ok()? * 1_000_000 + ns.parse::<u64>().ok()?;
    Some((task_clock, after, after - before))
}

/// How much less the scheduler's task clock advanced than CLOCK_MONOTONIC
/// between two readings of `task_clock_and_monotonic_ns` on one CPU, and
/// the readings' combined uncertainty.
fn left_out_of_task_clock(start: (u64, u64, u64), end: (u64, u64, u64)) -> (i64, u64) {
    let monotonic = end.1 as i64 - start.1 as i64;
    let task_clock = end.0 as i64 - start.0 as i64;
    (monotonic - task_clock, start.2 + end.2)
}

struct Load {
    spinner_tid: u32,
    spinner_cpu_ns: u64,
    /// Wall time of the spinner thread's life outside its two CPU-clock
    /// reads (from before its spawn to after its join): run time the
    /// accounting sees and `spinner_cpu_ns` does not.
    spinner_outside_ns: u64,
    /// Over the spinner's life, on its CPU: how much less the scheduler's
    /// task clock advanced than CLOCK_MONOTONIC (paravirt steal, any rate
    /// difference between the two clocks), and the readings' uncertainty;
    /// None where the kernel does not show the task clock.
    spinner_left_out_ns: Option<(i64, u64)>,
    receiver_tid: u32,
    received: u64,
}

/// A CPU-bound thread for `d`, and a loopback UDP flood to a receiver.
fn run_load(d: Duration) -> Load {
    let stop = Arc::new(AtomicBool::new(false));
    let received = Arc::new(AtomicU64::new(0));
    let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
    rx.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
    let addr = rx.local_addr().unwrap();
    let (s2, r2) = (stop.clone(), received.clone());
    let receiver = std::thread::spawn(move || {
        let tid = gettid();
        let mut buf = [0u8; 2048];
        while !s2.load(Ordering::Relaxed) {
            if rx.recv(&mut buf).is_ok() {
                r2.fetch_add(1, Ordering::Relaxed);
            }
        }
        tid
    });
    let s3 = stop.clone();
    let sender = std::thread::spawn(move || {
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let payload = [0x5au8; 512];
        while !s3.load(Ordering::Relaxed) {
            for _ in 0..64 {
                let _ = tx.send_to(&payload, addr);
            }
            std::thread::sleep(Duration::from_micros(200));
        }
    });
    // On one CPU, so that one CPU's task clock is the one its CPU time is
    // charged in: the last the test may use (the flood's softirqs mostly
    // on the first).
    let spinner_cpu = nix::sched::sched_getaffinity(nix::unistd::Pid::from_raw(0))
        .ok()
        .and_then(|set| (0..nix::sched::CpuSet::count()).rfind(|&c| set.is_set(c).unwrap_or(false)))
        .unwrap_or(0);
    let spawned = Instant::now();
    let spinner = std::thread::spawn(move || {
        let tid = gettid();
        let mut only = nix::sched::CpuSet::new();
        only.set(spinner_cpu).unwrap();
        nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(0), &only).unwrap();
        // SCHED_FIFO 1: the test's own threads (the flood's sender and
        // receiver) do not preempt it. Each switch puts the schedule path
        // (16-20 us on this VM) on the switched-out thread in the
        // accounting (cut at sched_switch) and on the next one in the
        // scheduler's clock (cut at its clock update, earlier): a spinner
        // preempted a thousand times a second (a watch thread beside the
        // test) read 17-52 ms more than its CPU clock over 3 s.
        irqlab_measure::probe::sched::set_policy(irqlab_measure::probe::Policy::Fifo, 1).unwrap();
        let clocks_at_start = task_clock_and_monotonic_ns();
        let c0 = thread_cpu_ns();
        let t0 = Instant::now();
        let mut x = 1u64;
        while t0.elapsed() < d {
            for _ in 0..10_000 {
                x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            }
            std::hint::black_box(x);
        }
        let inside = t0.elapsed();
        let cpu_ns = thread_cpu_ns() - c0;
        let switches = std::fs::read_to_string("/proc/thread-self/status").unwrap_or_default();
        for line in switches.lines().filter(|l| l.contains("ctxt_switches")) {
            eprintln!("spinner: {}", line.split_whitespace().collect::<Vec<_>>().join(" "));
        }
        let left_out = clocks_at_start.zip(task_clock_and_monotonic_ns()).map(|(a, b)| left_out_of_task_clock(a, b));
        (tid, cpu_ns, inside, left_out)
    });
    let (spinner_tid, spinner_cpu_ns, inside, spinner_left_out_ns) = spinner.join().unwrap();
    let spinner_outside_ns = spawned.elapsed().saturating_sub(inside).as_nanos() as u64;
    stop.store(true, Ordering::Relaxed);
    sender.join().unwrap();
    let receiver_tid = receiver.join().unwrap();
    Load { spinner_tid, spinner_cpu_ns, spinner_outside_ns, spinner_left_out_ns, receiver_tid, received: received.load(Ordering::Relaxed) }
}

fn measure(d: Duration) -> (Report, RawSnapshot, Load) {
    let mut storage = Storage::default();
    let mut session = Session::start(&mut storage, Options { reference_softirq_sum: true }).expect("start accounting");
    let load = run_load(d);
    let raw = session.snapshot().expect("snapshot");
    let report = session.report_from(&raw, true);
    (report, raw, load)
}

/// How far the accounting's softirq time in `vectors` may legitimately
/// lie from the plain entry/exit sum, over `cpus`: (below, above).
///
/// Programs on a tracepoint run in the order they were attached: at each
/// softirq boundary the plain sum reads the clock first, the accounting
/// after it and the plain sum's second pair of programs last
/// (softirq_sum.bpf.c), so the accounting reads both of a softirq's
/// clocks inside the windows from the first read to the last. Its time
/// for that softirq is the plain sum's, shortened by at most its entry
/// window and lengthened by at most its exit window: the gap lies in
/// -window_in..+window_out. That is the bound used: it follows from the
/// attach order alone. (A tighter tolerance, the plain sum against itself
/// across the accounting's position, |window_out - window_in|, held on a
/// quiet machine but failed two runs of three with a CPU spinner and a
/// loopback flood beside the test: the accounting's own programs cost
/// more at exit than at entry under load, +0.15-0.19% where the two plain
/// sums differed by 0.06-0.1%. A fixed 1% once failed in CI at 1.04%.)
/// The windows are 7-8% of softirq time on the 2-vCPU VM: the check still
/// catches a vector dropped or counted twice, not a percent's drift.
/// Besides, one softirq per CPU may run across the start (the two objects'
/// start times are set one after the other) and one across the cut, where
/// the accounting's CPU states and the plain sum were read within
/// `cut_ns`; a softirq whose windows were not seen counts whole. `nested`
/// is hard-IRQ time inside softirqs, which the plain sum has in each
/// vector and the accounting reports only in total.
fn softirq_bounds(cpus: &[ReferenceCpu], vectors: std::ops::Range<usize>, cut_ns: u64, nested_ns: u64) -> (u64, u64) {
    let window = |f: fn(&ReferenceCpu) -> &[u64; 16]| cpus.iter().map(|c| f(c)[vectors.clone()].iter().sum::<u64>()).sum::<u64>();
    let (window_in, window_out) = (window(|c| &c.window_in_ns), window(|c| &c.window_out_ns));
    let edges: u64 = cpus
        .iter()
        .map(|c| (2 + c.count.saturating_sub(c.windows)) * c.max_ns[vectors.clone()].iter().copied().max().unwrap_or(0) + cut_ns)
        .sum();
    (window_in + nested_ns + edges, window_out + edges)
}

#[test]
fn accounting_is_consistent_on_this_kernel() {
    if !live() {
        return;
    }
    let (report, raw, load) = measure(Duration::from_secs(3));
    eprintln!("missing tracepoints: {:?}", report.missing_tracepoints);
    assert!(load.received > 1000, "loopback flood delivered only {} datagrams", load.received);
    // The snapshot closed every CPU's open segment (sync_cpu) and read the
    // maps within this span.
    let span_ns = raw.read_ns - raw.synced_ns;

    // 1. Per CPU: run + idle + hard IRQ + softirq = wall. The segments
    // tile each CPU's timeline, so only the cut can differ: an event after
    // `taken_ns` and before its CPU was read is counted beyond wall time,
    // and a segment charged while its CPU's state was being copied is torn
    // (read in one field, not yet in the other); each is no longer than
    // the snapshot's span, since sync_cpu closed the segments at its start.
    let cut_ns = 2 * span_ns;
    for c in &report.cpus {
        let err = c.unaccounted_ns.unsigned_abs() as f64 / c.wall_ns as f64;
        eprintln!(
            "cpu{}: wall {} run {} idle {} hardirq {} softirq {} unaccounted {} ({:.4}%, bound {} ns = 2 x snapshot span) anomalies {} hidden switches {}",
            c.cpu,
            c.wall_ns,
            c.time.run_ns,
            c.time.idle_ns,
            c.time.hardirq_ns,
            c.time.softirq_ns,
            c.unaccounted_ns,
            err * 100.0,
            cut_ns,
            c.anomalies,
            c.hidden_switches
        );
        assert!(c.wall_ns >= 3_000_000_000, "cpu{} wall {} shorter than the load", c.cpu, c.wall_ns);
        assert!(
            c.unaccounted_ns.unsigned_abs() <= cut_ns,
            "cpu{}: {} ns of wall time unaccounted, more than the cut allows ({cut_ns} ns)",
            c.cpu,
            c.unaccounted_ns
        );
    }

    // 2. Softirq time vs the plain entry/exit sum (which includes hard
    // IRQs nested in softirqs; the accounting reports those separately),
    // per CPU, in total and per vector, within what the two can
    // legitimately differ by (softirq_bounds).
    let reference = raw.reference_cpus.as_deref().expect("reference ran");
    assert!(report.totals.softirq_by_vector_ns.get("NET_RX").copied().unwrap_or(0) > 0, "the UDP flood caused no NET_RX time");
    let check = |what: &str, ours: u64, plain: u64, (below, above): (u64, u64)| {
        let gap = ours as i64 - plain as i64;
        eprintln!(
            "softirq {what}: accounting {ours} vs plain sum {plain}: gap {gap} ns ({:.4}%), allowed -{below}..+{above} ns",
            gap as f64 * 100.0 / plain.max(1) as f64
        );
        assert!(
            ours + below >= plain && ours <= plain + above,
            "softirq {what}: accounting {ours} ns vs plain sum {plain} ns, outside -{below}..+{above} ns"
        );
    };
    let cut_ns = raw.read_ns - raw.taken_ns;
    let all = 0..SOFTIRQ_NAMES.len();
    for (c, r) in report.cpus.iter().zip(reference) {
        eprintln!(
            "cpu{}: {} softirqs ({} windowed), longest {} ns, entry windows {} ns, exit windows {} ns, nested hard IRQ {} ns, cut {cut_ns} ns",
            c.cpu,
            r.count,
            r.windows,
            r.longest_ns(),
            r.window_in_total_ns(),
            r.window_out_total_ns(),
            c.hardirq_in_softirq_ns
        );
        let bounds = softirq_bounds(std::slice::from_ref(r), all.clone(), cut_ns, 0);
        check(&format!("cpu{}", c.cpu), c.time.softirq_ns + c.hardirq_in_softirq_ns, r.total_ns(), bounds);
    }
    let nested: u64 = report.cpus.iter().map(|c| c.hardirq_in_softirq_ns).sum();
    let plain: u64 = reference.iter().map(ReferenceCpu::total_ns).sum();
    check("total", report.totals.time.softirq_ns + nested, plain, softirq_bounds(reference, all.clone(), cut_ns, 0));
    // By vector the accounting leaves nested hard IRQs out: a vector may
    // be below its plain sum by all of them.
    for v in all {
        let plain: u64 = reference.iter().map(|c| c.sum_ns[v]).sum();
        let ours = report.totals.softirq_by_vector_ns.get(&softirq_name(v)).copied().unwrap_or(0);
        if plain == 0 && ours == 0 {
            continue;
        }
        check(&softirq_name(v), ours, plain, softirq_bounds(reference, v..v + 1, cut_ns, nested));
    }

    // 3. The spinner: what it ran plus what was stolen while it was current
    // is what the scheduler charged its thread CPU clock. Legitimately
    // apart: hypervisor steal, which the accounting's wall-clock segments
    // contain and the scheduler's clock leaves out (paravirt steal time;
    // /proc/stat has it in ticks, so up to one tick more per CPU), and the
    // thread's life outside its two clock reads (spawn, exit). /proc/stat
    // shows steal in 10 ms ticks (a 2.8 ms steal read as 0 here), so the
    // spinner also reads its CPU's task clock against CLOCK_MONOTONIC over
    // its life: what the scheduler's clock did not count there, steal or
    // a slewed monotonic clock alike, by the kernel's own clock; the
    // larger of the two readings is allowed. (A CI run once read 34 ms
    // apart with the spinner at SCHED_OTHER beside the flood: its switches,
    // not steal; see the spinner's set-up.) That holds
    // where the scheduler's clock reads the clocksource's counter (tsc,
    // kvm-clock); an emulated guest (QEMU TCG) marks its TSC unstable and
    // keeps time with the HPET while the scheduler's clock still counts
    // the TSC: the two drift apart by a rate nothing bounds (1.3% seen on
    // 6.1), so there the check is skipped, saying why.
    let spinner = report.task(load.spinner_tid).expect("spinner accounted");
    let clocksource = std::fs::read_to_string("/sys/devices/system/clocksource/clocksource0/current_clocksource").unwrap_or_default();
    if !matches!(clocksource.trim(), "tsc" | "kvm-clock") {
        eprintln!("spinner check skipped: clocksource {} is not the scheduler clock's counter", clocksource.trim());
    } else {
        check_spinner(&report, &load, spinner);
    }
    assert!(spinner.exited, "the spinner thread has exited by the time of the report");

    // 4. The receiver was served most of the NET_RX work.
    let receiver = report.task(load.receiver_tid).expect("receiver accounted");
    let net_rx = report.totals.softirq_by_vector_ns.get("NET_RX").copied().unwrap_or(0);
    let served = receiver.served_by_softirq_ns.get("NET_RX").copied().unwrap_or(0);
    eprintln!("NET_RX total {net_rx}, served to receiver {served}, orphan {:?}", report.orphan.softirq_by_vector_ns.get("NET_RX"));
    // Where the rest went, to tell a failure's cause from its output.
    let mut others: Vec<(u64, &str, u32)> = report
        .tasks
        .iter()
        .map(|t| (t.served_by_softirq_ns.get("NET_RX").copied().unwrap_or(0), t.comm.as_str(), t.tid))
        .filter(|&(ns, _, tid)| ns > 0 && tid != load.receiver_tid)
        .collect();
    others.sort_unstable_by(|a, b| b.cmp(a));
    others.truncate(5);
    eprintln!("NET_RX served to others: {others:?}");
    for c in &report.cpus {
        eprintln!(
            "cpu{}: socket events {}, without a known owner {}, outside softirqs {}",
            c.cpu, c.socket_events, c.socket_events_no_owner, c.socket_events_outside
        );
    }
    assert!(served as f64 >= 0.8 * net_rx as f64, "receiver served {served} of {net_rx} ns NET_RX");
    let _ = NET_RX;
}

/// The spinner's run plus stolen time against its thread CPU clock, within
/// steal, ticks and its life outside its clock reads (see the caller).
fn check_spinner(report: &Report, load: &Load, spinner: &TaskReport) {
    let seen = spinner.time.run_ns + spinner.time.stolen_ns;
    let tick_ns = 1_000_000_000 / procfs::ticks_per_second().max(1);
    let steal_ns: u64 = report.cpus.iter().map(|c| c.steal_ns + tick_ns).sum();
    let (left_out_ns, reads_ns) = load.spinner_left_out_ns.map_or((0, 0), |(ns, reads)| (ns.unsigned_abs(), reads));
    let allowed = steal_ns.max(left_out_ns + reads_ns) + load.spinner_outside_ns;
    let gap = seen as i64 - load.spinner_cpu_ns as i64;
    eprintln!(
        "spinner: run {} stolen {} vs thread cputime {}: gap {gap} ns ({:.3}%), allowed {allowed} ns (the larger of steal + ticks {steal_ns} and the task clock's {:?} ns left out, read within {reads_ns} ns; outside its clock reads {})",
        spinner.time.run_ns,
        spinner.time.stolen_ns,
        load.spinner_cpu_ns,
        gap as f64 * 100.0 / load.spinner_cpu_ns as f64,
        load.spinner_left_out_ns.map(|(ns, _)| ns),
        load.spinner_outside_ns
    );
    assert!(gap.unsigned_abs() <= allowed, "spinner run+stolen differs from its CPU clock by {gap} ns, more than {allowed} ns");
}
