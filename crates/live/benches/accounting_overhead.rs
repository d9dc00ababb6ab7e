//! Overhead of the BPF accounting (issue 7): throughput of a loopback UDP
//! flood (512-byte datagrams, the process-aware paper's size) with nothing
//! attached, with `irqlab`'s accounting running, and with the bpftrace
//! one-liner that sums softirq time per vector (what bcc's `softirqs`
//! does). Loopback puts each datagram through NET_RX softirq processing,
//! socket queueing and the receiver's recv, so every hook the accounting
//! uses (softirq entry/exit, sk_data_ready, sock_recv_length) fires per
//! datagram. Needs root; prints why and does nothing otherwise.
//!
//! Run: `cargo bench -p irqlab-live --bench accounting_overhead`.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use irqlab_live::accounting::{Options, Session, Storage};
use std::io::{BufRead, BufReader};
use std::net::UdpSocket;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

const BATCH: usize = 32;
const PAYLOAD: [u8; 512] = [0x5a; 512];

/// The reference: per-vector softirq time, as a plain entry/exit sum.
const BPFTRACE_SOFTIRQ_SUM: &str = "tracepoint:irq:softirq_entry { @start[cpu] = nsecs; } \
     tracepoint:irq:softirq_exit /@start[cpu]/ { @ns[args->vec] = sum(nsecs - @start[cpu]); delete(@start[cpu]); }";

struct Pair {
    tx: UdpSocket,
    rx: UdpSocket,
}

impl Pair {
    fn new() -> Pair {
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        tx.connect(rx.local_addr().unwrap()).unwrap();
        rx.set_read_timeout(Some(Duration::from_millis(100))).unwrap();
        Pair { tx, rx }
    }

    /// Sends a batch and receives it back (loopback delivers during send).
    fn pump(&self) {
        let mut buf = [0u8; 1024];
        for _ in 0..BATCH {
            self.tx.send(&PAYLOAD).unwrap();
        }
        for _ in 0..BATCH {
            self.rx.recv(&mut buf).unwrap();
        }
    }
}

/// Loopback delivers in the sender's context, so sender, receiver and
/// their softirq all run where this thread runs; pinning it keeps
/// migrations (and the other CPU's noise) out of the comparison.
fn pin_to_last_cpu() {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    // SAFETY: a zeroed cpu_set_t is the empty set; the calls only read it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpus - 1, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}

/// tracefs, which bpftrace's tracepoint probes need; mounted here (and
/// unmounted after) when the machine has not mounted it.
struct Tracefs {
    mounted_here: bool,
}

impl Tracefs {
    const DIR: &'static str = "/sys/kernel/tracing";

    fn ensure() -> Tracefs {
        if std::path::Path::new(Self::DIR).join("events").exists() {
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
        let mut child = Command::new("bpftrace")
            .args(["-e", BPFTRACE_SOFTIRQ_SUM])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .ok()?;
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

fn overhead(c: &mut Criterion) {
    if !is_root() {
        eprintln!("skipped accounting_overhead: needs root (CAP_BPF, CAP_PERFMON) to load BPF programs");
        return;
    }
    pin_to_last_cpu();
    let pair = Pair::new();
    let mut group = c.benchmark_group("udp_loopback_flood");
    group.throughput(Throughput::Elements(BATCH as u64));
    group.sample_size(100).warm_up_time(Duration::from_secs(2)).measurement_time(Duration::from_secs(10));

    group.bench_function("no_tracing", |b| b.iter(|| pair.pump()));

    {
        let mut storage = Storage::default();
        match Session::start(&mut storage, Options::default()) {
            Ok(_session) => {
                group.bench_function("irqlab_accounting", |b| b.iter(|| pair.pump()));
            }
            Err(e) => eprintln!("skipped irqlab_accounting: {e}"),
        };
    }

    {
        let _tracefs = Tracefs::ensure();
        match Bpftrace::start() {
            Some(_bpftrace) => {
                group.bench_function("bpftrace_softirq_sum", |b| b.iter(|| pair.pump()));
            }
            None => eprintln!("skipped bpftrace_softirq_sum: bpftrace did not attach (scripts/install-deps.sh installs it)"),
        };
    }
    group.finish();
}

criterion_group!(benches, overhead);
criterion_main!(benches);
