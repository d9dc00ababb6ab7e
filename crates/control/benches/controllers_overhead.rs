//! What the live controllers themselves cost (issue 42): the CPU time of
//! each controller's own thread per second of control (its report's
//! `overhead.cpu_share`), under the same testbed flood, at its default
//! settings and at two others, with its reaction latency beside it (the
//! trade-off made visible). The BPF programs run in the watched threads'
//! context and are not in the controller's time. First, two rows of an
//! empty loop set up as a controller thread that only wakes on a timer:
//! what a wake-up alone costs on this machine, the floor under each
//! controller's figure.
//!
//! Setup: the testbed, a UDP flood of 50-byte datagrams from `irqlab-b`
//! (sender pinned to CPU 0, as fast as it goes) into a receiving process
//! (python3) pinned to the last CPU, where each controller pins the NAPI
//! kthread.
//! `IRQLAB_BENCH_ROUNDS` rounds (default 3), each running every setting for
//! `IRQLAB_BENCH_SLOT_MS` (default 4000) in turn, so the VM's drifting
//! background load hits all of them alike; medians and ranges over rounds.
//! The idletime gate is not here: it controls a foreground and a
//! background class of requests, not the NAPI kthread this flood loads;
//! its figure comes from its reproduction (docs/performance.md).
//! Linux charges the interrupts and softirqs that run while a thread is
//! on the CPU to that thread's CPU time (this kernel has no IRQ time
//! accounting), so the controller's figure includes interrupt work that
//! is not its own: each setting also runs a second time with irqlab's BPF
//! accounting on (`measure accounting`'s programs), which splits the
//! controller thread's time into its own and the hard IRQs and softirqs
//! that ran in its context. The plain run gives the figure; the accounted
//! run, the split (the accounting's programs cost a little themselves).
//! Needs root; prints why and does nothing otherwise.
//!
//! Run: `cargo bench -p irqlab-control --bench controllers_overhead`
//! (`make bench` runs it); `IRQLAB_BENCH_ONLY=bh-budget` runs the
//! settings whose label starts so.

use irqlab_control::{bh_budget, controller_thread, process_aware, set_threads};
use irqlab_host::journal::sched::{PolicySpec, SchedAttr};
use irqlab_host::journal::threads::Thread;
use irqlab_host::journal::{self, Object, Value};
use irqlab_host::rt;
use irqlab_host::testbed::{Side, Testbed};
use irqlab_measure::latency::stats::{LatencyStats, StatsSummary};
use irqlab_measure::traffic::{self, Kind, Plan, Schedule};
use std::net::SocketAddrV4;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

const PORT: u16 = 9_719;
const DEV: &str = "irqlab-b";

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn range(v: &[f64]) -> (f64, f64) {
    (v.iter().copied().fold(f64::INFINITY, f64::min), v.iter().copied().fold(0.0, f64::max))
}

/// One controller at one setting.
#[derive(Clone, Copy)]
enum Setting {
    /// Not a controller: a thread set up as one (SCHED_FIFO 99, off the
    /// measured CPU, memory locked) that only sleeps to the next multiple
    /// of `period_ns` and wakes, doing nothing: what a wake-up costs on this
    /// machine, the floor under every controller's figure.
    EmptyLoop {
        period_ns: u64,
    },
    BhBudget {
        period_ns: u64,
    },
    Sporadic {
        budget_ns: u64,
        period_ns: u64,
    },
    /// With `receiver_fifo`, the receiver runs at that SCHED_FIFO priority
    /// for the run: the kthreads' scheduling then follows each of its
    /// waits (the floor is SCHED_OTHER), the policy's costliest case.
    ProcessAware {
        rescan_ns: u64,
        receiver_fifo: Option<u32>,
    },
}

/// The receiving process (set once, before the first run).
static RECEIVER: std::sync::OnceLock<i32> = std::sync::OnceLock::new();

impl Setting {
    fn label(&self) -> String {
        let ms = |ns: u64| irqlab_analysis::format_ns(ns);
        match *self {
            Setting::EmptyLoop { period_ns } => format!("empty loop woken every {}", ms(period_ns)),
            Setting::BhBudget { period_ns } => format!("bh-budget, period {}", ms(period_ns)),
            Setting::Sporadic { budget_ns, period_ns } => format!("sporadic server, {}/{}", ms(budget_ns), ms(period_ns)),
            Setting::ProcessAware { rescan_ns, receiver_fifo: None } => format!("process-aware, rescan {}", ms(rescan_ns)),
            Setting::ProcessAware { rescan_ns, receiver_fifo: Some(p) } => {
                format!("process-aware, rescan {}, receiver SCHED_FIFO {p}", ms(rescan_ns))
            }
        }
    }

    /// Runs it for `slot_ns` on `cpu`: the controller's cost (share of a
    /// CPU, thread id), its reaction latency, and what else its report says
    /// of its cost.
    fn run(&self, cpu: usize, slot_ns: u64) -> (controller_thread::Overhead, StatsSummary, String) {
        let stop = AtomicBool::new(false);
        match *self {
            Setting::EmptyLoop { period_ns } => {
                let off = [cpu];
                let setup = controller_thread::Setup { priority: 99, off: &off, lock_memory: true };
                let (wakeups, cost) = controller_thread::run("empty-loop", setup, || {
                    controller_thread::control_starts();
                    let start = rt::monotonic_ns();
                    let (mut next, mut wakeups) = (start + period_ns, 0u64);
                    while next <= start + slot_ns {
                        rt::sleep_until_ns(next);
                        wakeups += 1;
                        next += period_ns;
                    }
                    Ok(wakeups)
                })
                .expect("the empty loop");
                let overhead = controller_thread::Overhead::of(cost);
                let per_wake_us = overhead.controller_cpu_ns as f64 / 1e3 / wakeups.max(1) as f64;
                (overhead, LatencyStats::new().summary(1_000, 1), format!("; {wakeups} wake-ups, {per_wake_us:.1} us of CPU each"))
            }
            Setting::BhBudget { period_ns } => {
                let config = bh_budget::Config {
                    dev: DEV.into(),
                    cpu: Some(cpu),
                    duration_ns: Some(slot_ns),
                    period_ns,
                    ..bh_budget::Config::default()
                };
                let out = bh_budget::run(&config, &stop, |_| {}).expect("bh-budget run");
                let setattr = &out.report.overhead.setattr;
                let us = |v: Option<u64>| v.map_or(f64::NAN, |ns| ns as f64 / 1e3);
                let note = format!(
                    "; {:.1} wake-ups per period; sched_setattr p50 {:.1} us, p99 {:.1} us ({} calls)",
                    out.report.overhead.wakeups_per_period,
                    us(setattr.p50_ns),
                    us(setattr.p99_ns),
                    setattr.count
                );
                (out.report.overhead.controller, out.report.figures.reaction, note)
            }
            Setting::Sporadic { budget_ns, period_ns } => {
                let config = set_threads::Config {
                    matched: format!("napi:{DEV}"),
                    policy: PolicySpec::Sporadic { budget_ns, period_ns, high: 50, low: None, max_repl: 2 },
                    duration_ns: Some(slot_ns),
                    persist: false,
                    cpus: Some(vec![cpu]),
                    all_matching: false,
                };
                let report = set_threads::run(&config, &stop, |_, _, _| {}).expect("sporadic server run");
                let server = report.server.expect("a sporadic server's report");
                let reaction = server.threads.into_iter().next().expect("a served thread").reaction;
                let per_s = server.wakeups as f64 * 1e9 / server.overhead.controlled_ns.max(1) as f64;
                (server.overhead, reaction, format!("; {per_s:.0} wake-ups/s"))
            }
            Setting::ProcessAware { rescan_ns, receiver_fifo } => {
                // Raised through the journal: restored when the guard
                // drops, named by `control status` after a kill.
                let _raised = receiver_fifo.map(|priority| {
                    let receiver = *RECEIVER.get().expect("the receiver started");
                    let thread = Thread::of(receiver).expect("the receiver is alive");
                    journal::apply(Object::ThreadSched { thread }, Value::Sched { attr: SchedAttr::Fifo { priority } })
                        .expect("raising the receiver")
                });
                let config = process_aware::Config {
                    dev: DEV.into(),
                    cpu: Some(cpu),
                    duration_ns: Some(slot_ns),
                    rescan_ns,
                    ..process_aware::Config::default()
                };
                let report = process_aware::run(&config, &stop, |_| {}).expect("process-aware run");
                (report.overhead, report.reaction, format!("; {} priority changes", report.change_count))
            }
        }
    }
}

/// The receiver, killed however the bench ends (a panic included).
struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// What the accounted run measured: the controller's share of a CPU and
/// the part of it that was hard IRQs and softirqs in its context.
struct Split {
    share: f64,
    interrupts: f64,
}

/// Runs `setting` with the BPF accounting on and splits its controller
/// thread's time. The accounting counts from its start, a little before
/// the controller's setup (~60 ms of a 4 s slot), which the share leaves
/// out: the interrupt part is over the whole thread's life, per second of
/// control.
fn accounted(setting: &Setting, cpu: usize, slot_ns: u64) -> Split {
    use irqlab_measure::accounting::{Options, Session, Storage};
    let mut storage = Storage::default();
    let mut session = Session::start(&mut storage, Options::default()).expect("the BPF accounting");
    let (overhead, _, _) = setting.run(cpu, slot_ns);
    let raw = session.snapshot().expect("the accounting's maps");
    let counters = raw.tasks.get(&overhead.controller_tid).expect("the controller thread in the accounting");
    let interrupt_ns: u64 = counters.iter().map(|c| c.hardirq_ns + c.softirq_total()).sum();
    Split { share: overhead.cpu_share, interrupts: interrupt_ns as f64 / slot_ns as f64 }
}

fn main() {
    if !nix::unistd::geteuid().is_root() {
        eprintln!("controllers_overhead: skipped (needs root: testbed, BPF, sched_setattr on a kthread)");
        return;
    }
    let (rounds, slot_ms) = (env_or("IRQLAB_BENCH_ROUNDS", 3).max(1), env_or("IRQLAB_BENCH_SLOT_MS", 4_000));
    let settings = [
        Setting::EmptyLoop { period_ns: 1_000_000 },
        Setting::EmptyLoop { period_ns: 500_000 },
        Setting::BhBudget { period_ns: 1_000_000 },
        Setting::BhBudget { period_ns: 2_000_000 },
        Setting::BhBudget { period_ns: 5_000_000 },
        Setting::Sporadic { budget_ns: 500_000, period_ns: 1_000_000 },
        Setting::Sporadic { budget_ns: 1_000_000, period_ns: 2_000_000 },
        Setting::Sporadic { budget_ns: 2_500_000, period_ns: 5_000_000 },
        Setting::ProcessAware { rescan_ns: 250_000_000, receiver_fifo: None },
        Setting::ProcessAware { rescan_ns: 50_000_000, receiver_fifo: None },
        Setting::ProcessAware { rescan_ns: 1_000_000_000, receiver_fifo: None },
        Setting::ProcessAware { rescan_ns: 250_000_000, receiver_fifo: Some(20) },
    ];
    // IRQLAB_BENCH_ONLY=bh-budget (a prefix of the labels): those settings alone.
    let only = std::env::var("IRQLAB_BENCH_ONLY").unwrap_or_default();
    let settings: Vec<Setting> = settings.into_iter().filter(|s| s.label().starts_with(&only)).collect();
    let cpus = rt::online_cpus().expect("online CPUs");
    let focus = *cpus.last().unwrap();
    let bed = Testbed::up().expect("testbed");
    let bind = SocketAddrV4::new(bed.root_addr(Side::B), PORT);
    // The receiver is a process of its own: process-aware serves the
    // processes that wait on the device's sockets, never its own.
    let receiver = format!(
        "import socket\ns = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\ns.bind(('{}', {PORT}))\nwhile True:\n    s.recv(2048)\n",
        bind.ip()
    );
    let _sink = KillOnDrop(
        std::process::Command::new("taskset")
            .args(["-c", &focus.to_string(), "python3", "-c", &receiver])
            .spawn()
            .expect("the receiver (taskset, python3)"),
    );
    // taskset execs python3 in place: the child's pid is the receiver's.
    RECEIVER.set(_sink.0.id() as i32).expect("one receiver");
    let flood_stop = Arc::new(AtomicBool::new(false));
    let plan = Plan {
        kind: Kind::Udp { port: PORT },
        target: *bind.ip(),
        schedule: Schedule::Periodic { interval_ns: 1_000 },
        size: 50,
        duration_ns: u64::MAX / 2,
    };
    let sender_cpu = cpus.first().copied().filter(|&c| c != focus);
    let flood = {
        let stop = flood_stop.clone();
        bed.spawn_in(Side::B, move || {
            if let Some(cpu) = sender_cpu {
                rt::pin_to_cpu(cpu)?;
            }
            traffic::send(&plan, &stop)
        })
        .expect("flood")
    };
    std::thread::sleep(std::time::Duration::from_millis(300));
    // Per setting: its share of a CPU and its reaction p99 (us) per round.
    let mut shares = vec![Vec::new(); settings.len()];
    let mut p99s = vec![Vec::new(); settings.len()];
    let mut splits: Vec<Vec<Split>> = settings.iter().map(|_| Vec::new()).collect();
    for round in 0..rounds {
        for (i, setting) in settings.iter().enumerate() {
            let split = accounted(setting, focus, slot_ms * 1_000_000);
            eprintln!(
                "round {}: {}: accounted: controller {:.2}% of a CPU, of which hard IRQs and softirqs in its context {:.2}%",
                round + 1,
                setting.label(),
                split.share * 100.0,
                split.interrupts * 100.0
            );
            splits[i].push(split);
            let (overhead, reaction, note) = setting.run(focus, slot_ms * 1_000_000);
            let share = overhead.cpu_share;
            let p99_us = reaction.p99_ns.map_or(f64::NAN, |ns| ns as f64 / 1e3);
            eprintln!(
                "round {}: {}: controller {:.2}% of a CPU, reaction p99 {p99_us:.1} us ({} reactions){note}",
                round + 1,
                setting.label(),
                share * 100.0,
                reaction.count
            );
            shares[i].push(share * 100.0);
            p99s[i].push(p99_us);
        }
    }
    flood_stop.store(true, Ordering::SeqCst);
    let _ = flood.join();
    println!("controllers under a flood into CPU {focus}, {rounds} rounds of {slot_ms} ms per setting (median, range over rounds):");
    println!("| controller, setting | controller CPU, % of one CPU | reaction p99, us | accounted run: controller CPU | of it, IRQs + softirqs in its context | its own |");
    println!("|---|---|---|---|---|---|");
    let pct = |v: Vec<f64>| {
        let (lo, hi) = range(&v);
        format!("{:.2} ({lo:.2}-{hi:.2})", median(v))
    };
    for (i, setting) in settings.iter().enumerate() {
        let finite: Vec<f64> = p99s[i].iter().copied().filter(|v| v.is_finite()).collect();
        let p99 = if finite.is_empty() { "none".to_string() } else { format!("{:.1}", median(finite)) };
        let of = |f: fn(&Split) -> f64| pct(splits[i].iter().map(|s| f(s) * 100.0).collect());
        println!(
            "| {} | {} | {p99} | {} | {} | {} |",
            setting.label(),
            pct(shares[i].clone()),
            of(|s| s.share),
            of(|s| s.interrupts),
            of(|s| s.share - s.interrupts)
        );
    }
}
