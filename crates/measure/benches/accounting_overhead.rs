//! Overhead of the BPF accounting (issue 7): UDP flood throughput with
//! nothing attached, with `irqlab`'s accounting running, and with the
//! bpftrace one-liner that sums softirq time per vector (what bcc's
//! `softirqs` does).
//!
//! Floods of 512-byte datagrams (the process-aware paper's size):
//! - `loopback`: one thread pinned to the last CPU sends 32 datagrams to a
//!   loopback socket and receives them. Every datagram goes through its own
//!   NET_RX softirq run, socket queueing and recv, so every hook the
//!   accounting has fires per datagram on a ~2.6 us path: the worst case.
//! - `testbed`: a sender inside `irqlab-b` (pinned to CPU 0) floods as
//!   fast as it can over the veth link to a UDP server in the root
//!   namespace (pinned to the last CPU); the rate is what the server
//!   receives. The NAPI thread (pinned with the server by default) does
//!   the receive work in its own context, so there is hardly a softirq for
//!   the bpftrace one-liner to time.
//! - `fig6`: the Fig. 6 layout at a fixed rate (`IRQLAB_BENCH_RATE`,
//!   default 50,000/s, the top rate of `irqlab measure accounting --fig6`):
//!   RPS steers received packets to the server's CPU, whose NET_RX softirq
//!   does the IP and UDP work in batches of a few packets; the NAPI thread
//!   and the paced sender run on CPU 0. Nothing is lost, so the overhead
//!   is the extra CPU time per datagram (busy = wall x CPUs - idle -
//!   steal).
//!   `fig6-max` is the same layout with the sender as fast as it goes.
//!
//! The three configurations are measured in interleaved rounds (none,
//! irqlab, bpftrace, rotating which goes first), not one after another:
//! on a shared 2-core VM the background load drifts over minutes, and a
//! sequential run mostly measures that drift. Each configuration's
//! overhead is the median over rounds of 1 - rate/rate_none within the same
//! round (and of the extra CPU time per datagram), printed with a 95%
//! confidence interval of that median and the range over rounds.
//!
//! Needs root; prints why and does nothing otherwise. Knobs:
//! `IRQLAB_BENCH_ROUNDS` (default 8), `IRQLAB_BENCH_SLOT_MS` (default 3000),
//! `IRQLAB_BENCH_FLOODS` (default `loopback,testbed,fig6,fig6-max`),
//! `IRQLAB_BENCH_NAPI` (testbed flood: pin the NAPI thread to the `server`'s
//! CPU, the default, or the `sender`'s, or `float`), `IRQLAB_BENCH_RATE`,
//! `IRQLAB_BENCH_PROFILE=1` (after the rounds, one more slot of each
//! tracing configuration with `kernel.bpf_stats_enabled`: runs per
//! datagram and ns per run of every BPF program).
//!
//! Run: `cargo bench -p irqlab-measure --bench accounting_overhead`.

use irqlab_host::journal::threads::Thread;
use irqlab_host::journal::{self, Applied, Object, Value};
use irqlab_host::testbed::{Side, Testbed};
use irqlab_measure::accounting::procfs::{cpu_time_ns, CpuTime};
use irqlab_measure::accounting::{Options, Session, Storage};
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::net::UdpSocket;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const BATCH: usize = 32;
const PAYLOAD: [u8; 512] = [0x5a; 512];
const PORT: u16 = 9_717;

/// The reference: per-vector softirq time, as a plain entry/exit sum.
const BPFTRACE_SOFTIRQ_SUM: &str = "tracepoint:irq:softirq_entry { @start[cpu] = nsecs; } \
     tracepoint:irq:softirq_exit /@start[cpu]/ { @ns[args->vec] = sum(nsecs - @start[cpu]); delete(@start[cpu]); }";

#[derive(Clone, Copy, Debug, PartialEq)]
enum Config {
    None,
    Irqlab,
    Bpftrace,
}

const CONFIGS: [Config; 3] = [Config::None, Config::Irqlab, Config::Bpftrace];

impl Config {
    fn name(self) -> &'static str {
        match self {
            Config::None => "no tracing",
            Config::Irqlab => "irqlab accounting",
            Config::Bpftrace => "bpftrace softirq sum",
        }
    }
}

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// Online CPUs of the machine (not of the caller's affinity mask: the
/// loopback flood measures from a pinned thread).
fn cpus() -> usize {
    // SAFETY: sysconf reads a constant.
    let online = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    usize::try_from(online).unwrap_or(1).max(1)
}

fn pin_to(cpu: usize) {
    // SAFETY: a zeroed cpu_set_t is the empty set; the calls only read it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

/// The testbed's NAPI threads for the flood's device pinned to one CPU
/// for the whole run through the control journal, their affinity
/// restored when the guards drop (or at exit). Left to float, the NAPI thread lands on the sender's or the
/// server's CPU from one slot to the next, and the flood's rate jumps with
/// it.
fn pin_napi(bed: &Testbed, cpu: usize) -> Vec<Applied> {
    let Ok(layout) = bed.layout() else { return Vec::new() };
    let mut pinned = Vec::new();
    for host in layout.hosts.iter().filter(|h| h.side == Side::B) {
        for t in irqlab_host::testbed::napi_threads(&host.root_device) {
            let Some(thread) = Thread::of(t.pid) else { continue };
            match journal::apply(Object::ThreadAffinity { thread }, Value::Cpus { cpus: vec![cpu] }) {
                Ok(guard) => pinned.push(guard),
                Err(e) => eprintln!("{} not pinned: {e}", t.comm),
            }
        }
    }
    pinned
}

/// tracefs, which bpftrace's tracepoint probes need; mounted here (and
/// unmounted after) when the machine has not mounted it.
struct Tracefs {
    mounted_here: bool,
}

impl Tracefs {
    fn ensure() -> Tracefs {
        if std::path::Path::new("/sys/kernel/tracing/events").exists() {
            return Tracefs { mounted_here: false };
        }
        let (src, dir, fs) = (c"nodev", c"/sys/kernel/tracing", c"tracefs");
        // SAFETY: NUL-terminated strings and no data argument.
        let r = unsafe { libc::mount(src.as_ptr(), dir.as_ptr(), fs.as_ptr(), 0, std::ptr::null()) };
        Tracefs { mounted_here: r == 0 }
    }
}

impl Drop for Tracefs {
    fn drop(&mut self) {
        if self.mounted_here {
            // SAFETY: NUL-terminated path.
            unsafe { libc::umount(c"/sys/kernel/tracing".as_ptr()) };
        }
    }
}

/// bpftrace running the one-liner, killed (by pid) on drop.
struct Bpftrace(Child);

impl Bpftrace {
    fn start() -> Option<Bpftrace> {
        let mut child =
            Command::new("bpftrace").args(["-e", BPFTRACE_SOFTIRQ_SUM]).stdout(Stdio::piped()).stderr(Stdio::null()).spawn().ok()?;
        // bpftrace prints "Attaching N probes..." once its programs are in.
        let stdout = child.stdout.take()?;
        let mut line = String::new();
        let attached = BufReader::new(stdout).read_line(&mut line).is_ok() && line.starts_with("Attaching");
        if !attached {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(Duration::from_millis(200));
        Some(Bpftrace(child))
    }
}

impl Drop for Bpftrace {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// What one flood slot gave: datagrams per second, and the CPU time the
/// whole machine was busy per datagram.
#[derive(Clone, Copy, Debug)]
struct Sample {
    rate: f64,
    busy_ns_per_datagram: f64,
}

/// Time all CPUs were not busy so far (idle + iowait + stolen by the
/// hypervisor), from /proc/stat, in ns. With NOHZ idle the kernel measures
/// idle time at each idle entry and exit rather than sampling ticks, so
/// busy = wall x CPUs - this is exact to /proc/stat's 10 ms unit, and a
/// host stall (steal) is not counted as work.
fn not_busy_ns() -> f64 {
    cpu_time_ns(None, &[CpuTime::Idle, CpuTime::Iowait, CpuTime::Steal]) as f64
}

/// Counts what a slot's flood delivers against the machine's busy time.
struct Meter {
    start: Instant,
    not_busy0: f64,
}

impl Meter {
    fn start() -> Meter {
        Meter { start: Instant::now(), not_busy0: not_busy_ns() }
    }

    fn sample(&self, datagrams: u64) -> Sample {
        let elapsed = self.start.elapsed().as_secs_f64();
        let busy = elapsed * 1e9 * cpus() as f64 - (not_busy_ns() - self.not_busy0);
        let n = datagrams as f64;
        Sample { rate: n / elapsed, busy_ns_per_datagram: busy / n.max(1.0) }
    }
}

/// Datagrams per second of the loopback flood over `slot`.
fn loopback_rate(slot: Duration) -> Sample {
    let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
    let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
    tx.connect(rx.local_addr().unwrap()).unwrap();
    rx.set_read_timeout(Some(Duration::from_millis(100))).unwrap();
    let mut buf = [0u8; 1024];
    let meter = Meter::start();
    let mut n = 0u64;
    while meter.start.elapsed() < slot {
        for _ in 0..BATCH {
            tx.send(&PAYLOAD).unwrap();
        }
        for _ in 0..BATCH {
            if rx.recv(&mut buf).is_ok() {
                n += 1;
            }
        }
    }
    meter.sample(n)
}

/// How the sender in `irqlab-b` sends.
#[derive(Clone, Copy)]
enum Pace {
    /// As fast as it can.
    Flat,
    /// This many datagrams per second, a burst every millisecond with
    /// sleeps in between.
    Rate(u64),
}

/// Datagrams per second the root-side server (pinned to the last CPU)
/// receives from a sender in `irqlab-b` (pinned to CPU 0) over `slot`.
fn testbed_flood(bed: &Testbed, slot: Duration, pace: Pace) -> Sample {
    let server_addr = bed.root_addr(Side::B);
    let rx = UdpSocket::bind((server_addr, PORT)).expect("binding the server socket");
    rx.set_read_timeout(Some(Duration::from_millis(20))).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let received = Arc::new(AtomicU64::new(0));
    let last = cpus() - 1;
    let server = {
        let (stop, received) = (stop.clone(), received.clone());
        std::thread::spawn(move || {
            pin_to(last);
            let mut buf = [0u8; 2048];
            while !stop.load(Ordering::Relaxed) {
                if rx.recv(&mut buf).is_ok() {
                    received.fetch_add(1, Ordering::Relaxed);
                }
            }
        })
    };
    let sender = {
        let stop = stop.clone();
        bed.spawn_in(Side::B, move || {
            pin_to(0);
            let tx = UdpSocket::bind("0.0.0.0:0").expect("binding the sender socket");
            tx.connect((server_addr, PORT)).expect("connecting the sender socket");
            let (burst, period) = match pace {
                Pace::Flat => (BATCH as u64, None),
                Pace::Rate(rate) => ((rate / 1000).max(1), Some(Duration::from_millis(1))),
            };
            let mut next = Instant::now();
            while !stop.load(Ordering::Relaxed) {
                for _ in 0..burst {
                    let _ = tx.send(&PAYLOAD);
                }
                if let Some(period) = period {
                    next += period;
                    let now = Instant::now();
                    if next > now {
                        std::thread::sleep(next - now);
                    } else {
                        next = now;
                    }
                }
            }
        })
        .expect("starting the sender in irqlab-b")
    };
    // Let both sides reach their steady state before counting.
    std::thread::sleep(Duration::from_millis(200));
    let before = received.load(Ordering::Relaxed);
    let meter = Meter::start();
    std::thread::sleep(slot);
    let sample = meter.sample(received.load(Ordering::Relaxed) - before);
    stop.store(true, Ordering::Relaxed);
    let _ = sender.join();
    let _ = server.join();
    sample
}

/// Runs `flood` with `config` attached; None when the config cannot run.
fn measure(config: Config, flood: &dyn Fn() -> Sample) -> Option<Sample> {
    match config {
        Config::None => Some(flood()),
        Config::Irqlab => {
            let mut storage = Storage::default();
            let rate = match Session::start(&mut storage, Options::default()) {
                Ok(_session) => Some(flood()),
                Err(e) => {
                    eprintln!("irqlab accounting not measured: {e}");
                    None
                }
            };
            rate
        }
        Config::Bpftrace => {
            let _tracefs = Tracefs::ensure();
            match Bpftrace::start() {
                Some(_bpftrace) => Some(flood()),
                None => {
                    eprintln!("bpftrace not measured: it did not attach (scripts/install-deps.sh installs it)");
                    None
                }
            }
        }
    }
}

/// Runs and run time of every loaded BPF program, by id.
fn program_counters() -> BTreeMap<u32, (String, u64, u64)> {
    libbpf_rs::query::ProgInfoIter::default().map(|p| (p.id, (p.name.to_string_lossy().into_owned(), p.run_cnt, p.run_time_ns))).collect()
}

/// `kernel.bpf_stats_enabled` on for a profile slot, restored on drop. The
/// statistics cost two clock reads per program run, so the overhead
/// rounds run without them.
struct BpfStats(Option<String>);

impl BpfStats {
    const PATH: &'static str = "/proc/sys/kernel/bpf_stats_enabled";

    fn enable() -> BpfStats {
        let old = std::fs::read_to_string(Self::PATH).ok();
        let _ = std::fs::write(Self::PATH, "1");
        BpfStats(old)
    }
}

impl Drop for BpfStats {
    fn drop(&mut self) {
        if let Some(old) = &self.0 {
            let _ = std::fs::write(Self::PATH, old.trim());
        }
    }
}

/// One more slot of each tracing configuration with the kernel's per-program
/// statistics on: how often each program ran per datagram and how long
/// each run took (the statistics' own two clock reads included).
fn profile(flood: &dyn Fn() -> Sample) {
    let _stats = BpfStats::enable();
    for config in [Config::Irqlab, Config::Bpftrace] {
        // Programs loaded before this configuration started are not its own.
        let others: Vec<u32> = program_counters().into_keys().collect();
        let counted = std::cell::RefCell::new(None);
        let profiled = || {
            let before = program_counters();
            let start = Instant::now();
            let sample = flood();
            let seconds = start.elapsed().as_secs_f64();
            *counted.borrow_mut() = Some((before, program_counters(), seconds));
            sample
        };
        let Some(sample) = measure(config, &profiled) else { continue };
        let Some((before, after, seconds)) = counted.into_inner() else { continue };
        println!("  per-program cost, {} (kernel.bpf_stats_enabled, one {seconds:.1} s slot):", config.name());
        let mut total_ns_per_datagram = 0.0;
        for (id, (name, runs, ns)) in &after {
            if others.contains(id) {
                continue;
            }
            let (runs0, ns0) = before.get(id).map_or((0, 0), |(_, r, n)| (*r, *n));
            let (runs, ns) = (runs.saturating_sub(runs0), ns.saturating_sub(ns0));
            if runs == 0 {
                continue;
            }
            let per_datagram = runs as f64 / seconds / sample.rate.max(1.0);
            total_ns_per_datagram += ns as f64 / seconds / sample.rate.max(1.0);
            println!(
                "    {name:<20} {:>9.0} runs/s {per_datagram:>6.2} per datagram {:>7.1} ns per run",
                runs as f64 / seconds,
                ns as f64 / runs as f64
            );
        }
        println!(
            "    all programs: {total_ns_per_datagram:.0} ns per datagram of {:.0} ns busy ({:.1}%)",
            sample.busy_ns_per_datagram,
            100.0 * total_ns_per_datagram / sample.busy_ns_per_datagram
        );
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    if n == 0 {
        f64::NAN
    } else if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// A distribution-free 95% confidence interval of the median: the order
/// statistics at ranks n/2 -/+ 0.98 sqrt(n) (the normal approximation to
/// the binomial(n, 1/2) count of values below the median). None below 6
/// values, where it would span everything.
fn median_ci(values: &[f64]) -> Option<(f64, f64)> {
    let n = values.len();
    if n < 6 {
        return None;
    }
    let mut v = values.to_vec();
    v.sort_by(|a, b| a.total_cmp(b));
    let half = 0.98 * (n as f64).sqrt();
    let lo = ((n as f64 / 2.0 - half).floor() as usize).clamp(1, n) - 1;
    let hi = ((n as f64 / 2.0 + half).ceil() as usize).clamp(1, n) - 1;
    Some((v[lo], v[hi]))
}

/// "median over rounds [95% CI of the median] (lowest .. highest)" of a
/// per-round overhead.
fn summary(overheads: &[f64]) -> String {
    let lo = overheads.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = overheads.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let ci = match median_ci(overheads) {
        Some((a, b)) => format!(" [CI {:.1}% .. {:.1}%]", a * 100.0, b * 100.0),
        None => String::new(),
    };
    format!("{:>6.1}%{ci} ({:.1}% .. {:.1}%)", median(overheads.to_vec()) * 100.0, lo * 100.0, hi * 100.0)
}

// `round` indexes the second dimension while configurations rotate over
// the first, which an iterator would hide.
#[allow(clippy::needless_range_loop)]
fn run(name: &str, rounds: usize, flood: &dyn Fn() -> Sample) {
    println!("{name}: {rounds} interleaved rounds");
    // samples[config][round]
    let mut samples: Vec<Vec<Option<Sample>>> = vec![vec![None; rounds]; CONFIGS.len()];
    for round in 0..rounds {
        for k in 0..CONFIGS.len() {
            let c = (round + k) % CONFIGS.len();
            samples[c][round] = measure(CONFIGS[c], flood);
        }
        let line: Vec<String> = CONFIGS
            .iter()
            .enumerate()
            .map(|(c, cfg)| match samples[c][round] {
                Some(x) => format!("{} {:.1} k/s {:.0} ns busy/datagram", cfg.name(), x.rate / 1e3, x.busy_ns_per_datagram),
                None => format!("{} -", cfg.name()),
            })
            .collect();
        println!("  round {:>2}: {}", round + 1, line.join(", "));
    }
    for (c, cfg) in CONFIGS.iter().enumerate() {
        let own: Vec<Sample> = samples[c].iter().flatten().copied().collect();
        if own.is_empty() {
            continue;
        }
        let paired: Vec<(Sample, Sample)> = (0..rounds).filter_map(|r| Some((samples[c][r]?, samples[0][r]?))).collect();
        let throughput: Vec<f64> = paired.iter().map(|(x, base)| 1.0 - x.rate / base.rate).collect();
        let cpu: Vec<f64> = paired.iter().map(|(x, base)| x.busy_ns_per_datagram / base.busy_ns_per_datagram - 1.0).collect();
        println!(
            "  {:<22} median {:>7.1} k datagrams/s, {:>6.0} ns busy/datagram | overhead: throughput {}, CPU per datagram {}",
            cfg.name(),
            median(own.iter().map(|x| x.rate).collect()) / 1e3,
            median(own.iter().map(|x| x.busy_ns_per_datagram).collect()),
            summary(&throughput),
            summary(&cpu)
        );
    }
    if env_or("IRQLAB_BENCH_PROFILE", 0) == 1 {
        profile(flood);
    }
}

fn main() {
    // `cargo bench` passes --bench; `cargo test --benches` passes nothing
    // and must not spend minutes here.
    if !std::env::args().any(|a| a == "--bench") {
        return;
    }
    if !nix::unistd::geteuid().is_root() {
        eprintln!("skipped accounting_overhead: needs root (CAP_BPF, CAP_PERFMON) to load BPF programs");
        return;
    }
    let rounds = env_or("IRQLAB_BENCH_ROUNDS", 8) as usize;
    let slot = Duration::from_millis(env_or("IRQLAB_BENCH_SLOT_MS", 3000));
    let floods = std::env::var("IRQLAB_BENCH_FLOODS").unwrap_or_else(|_| "loopback,testbed,fig6,fig6-max".into());
    for flood in floods.split(',') {
        match flood.trim() {
            "loopback" => {
                let worker = std::thread::spawn(move || {
                    pin_to(cpus() - 1);
                    run("loopback flood (one pinned thread, 32 datagrams sent then received)", rounds, &|| loopback_rate(slot));
                });
                let _ = worker.join();
            }
            "fig6" | "fig6-max" => match Testbed::up() {
                Ok(bed) => {
                    let (pace, what) = match flood.trim() {
                        "fig6" => {
                            let rate = env_or("IRQLAB_BENCH_RATE", 50_000);
                            (Pace::Rate(rate), format!("{rate} datagrams/s paced"))
                        }
                        _ => (Pace::Flat, "as fast as it goes".to_string()),
                    };
                    let last = cpus() - 1;
                    let device = bed.layout().ok().and_then(|l| l.hosts.into_iter().find(|h| h.side == Side::B)).map(|h| h.root_device);
                    let rps = |d: String| Object::File { path: format!("/sys/class/net/{d}/queues/rx-0/rps_cpus") };
                    let _rps =
                        device.and_then(|d| match journal::apply(rps(d), Value::Text { text: irqlab_host::rt::cpu_mask_hex(&[last]) }) {
                            Ok(guard) => Some(guard),
                            Err(e) => {
                                eprintln!("RPS not set: {e}");
                                None
                            }
                        });
                    let _napi = pin_napi(&bed, 0);
                    let title =
                        format!("Fig. 6 flood ({what} from irqlab-b, RPS to the server's CPU {last}, NAPI thread and sender on CPU 0)");
                    run(&title, rounds, &|| testbed_flood(&bed, slot, pace))
                }
                Err(e) => eprintln!("Fig. 6 flood not measured: {e}"),
            },
            "testbed" => match Testbed::up() {
                Ok(bed) => {
                    let napi = std::env::var("IRQLAB_BENCH_NAPI").unwrap_or_else(|_| "server".into());
                    let _pinned = match napi.as_str() {
                        "sender" => Some(pin_napi(&bed, 0)),
                        "server" => Some(pin_napi(&bed, cpus() - 1)),
                        _ => None,
                    };
                    let title = format!("testbed flood (irqlab-b -> server in the root namespace, NAPI thread: {napi})");
                    run(&title, rounds, &|| testbed_flood(&bed, slot, Pace::Flat))
                }
                Err(e) => eprintln!("testbed flood not measured: {e}"),
            },
            other => eprintln!("unknown flood {other:?} in IRQLAB_BENCH_FLOODS (loopback, testbed, fig6, fig6-max)"),
        }
    }
}
