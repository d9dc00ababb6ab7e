//! The generator against the loopback's own limit, interleaved in one run
//! (root for both paths and SCHED_FIFO; otherwise UDP only, SCHED_OTHER):
//!
//! - `generator at 100k/s`: 100,000 stimuli per second on each path at once
//!   (ICMP echo and the UDP responder, in this process) for `SECONDS`, every
//!   record logged (JSON lines): sent, lost, records logged, elapsed;
//! - `anchor`: a bare UDP echo pair, one client thread (sendmmsg, then
//!   recvmmsg, a window of datagrams in flight) and one echo thread
//!   (recvmmsg, sendmmsg back), no timestamps, no log: echoes per second;
//! - `generator at its maximum`: the same run asking for more than it can
//!   send (`MAX_ASK` per path), so it sends as fast as it can and says how
//!   far behind it fell: answered stimuli per second, both paths together.
//!
//! Rounds alternate the three so a change in the machine's load hits all of
//! them; the summary gives medians and ranges, and the ratio of the
//! generator's maximum (both paths) to the anchor. Timings are printed, not
//! asserted: the run fails only if a record is missing from the log.
//! `ROUNDS` and `SECONDS` come from the environment (defaults 5 and 2).

use irqlab_host::privilege::{has, Capability};
use irqlab_measure::stimulus::{generator, responder, GeneratorConfig, PathKind, Pattern, ResponderConfig, StimulusReport};
use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

const RATE: u64 = 100_000;
const MAX_ASK: u64 = 400_000;

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

struct GenRun {
    /// Per path: sent, lost, answered.
    paths: Vec<(PathKind, u64, u64, u64)>,
    logged: u64,
    elapsed_s: f64,
    behind_ms: f64,
    late_sends: u64,
    complete: bool,
}

impl GenRun {
    fn answered_per_s(&self) -> f64 {
        self.paths.iter().map(|p| p.3).sum::<u64>() as f64 / self.elapsed_s
    }
    fn lost(&self) -> u64 {
        self.paths.iter().map(|p| p.2).sum()
    }
}

fn run_generator(port: u16, paths: &[PathKind], rate: u64, seconds: u64, priority: u8, log: &std::path::Path) -> GenRun {
    let config = GeneratorConfig {
        target: Ipv4Addr::LOCALHOST,
        udp_port: port,
        paths: paths.to_vec(),
        pattern: Pattern::periodic(1_000_000_000 / rate),
        count: None,
        duration_ns: Some(seconds * 1_000_000_000),
        timeout_ns: 1_000_000_000,
        preflight: false,
        sender_priority: priority,
        log: Some(log.to_path_buf()),
    };
    let report: StimulusReport = generator::measure(&config, &AtomicBool::new(false), |_| {}).expect("generator run");
    let logged = std::fs::read_to_string(log).unwrap().lines().count() as u64;
    std::fs::remove_file(log).unwrap();
    let answered: u64 = report.paths.iter().map(|p| p.answered).sum();
    assert_eq!(logged, answered, "records missing from the log");
    GenRun {
        paths: report.paths.iter().map(|p| (p.path, p.sent, p.lost, p.answered)).collect(),
        logged,
        elapsed_s: report.elapsed_ns as f64 / 1e9,
        behind_ms: report.behind_ns as f64 / 1e6,
        late_sends: report.late_sends,
        complete: report.complete,
    }
}

const WINDOW: usize = 512;
const BATCH: usize = 64;

/// mmsghdrs over `bufs`, with `names` as the addresses (read or written).
fn headers(bufs: &mut [[u8; 64]], iovs: &mut [libc::iovec], names: &mut [libc::sockaddr_in], len: usize) -> Vec<libc::mmsghdr> {
    (0..bufs.len())
        .map(|i| {
            iovs[i] = libc::iovec { iov_base: bufs[i].as_mut_ptr() as *mut libc::c_void, iov_len: len };
            // SAFETY: a zeroed mmsghdr is valid; pointers set below.
            let mut m: libc::mmsghdr = unsafe { std::mem::zeroed() };
            m.msg_hdr.msg_iov = &mut iovs[i];
            m.msg_hdr.msg_iovlen = 1;
            m.msg_hdr.msg_name = &mut names[i] as *mut libc::sockaddr_in as *mut libc::c_void;
            m.msg_hdr.msg_namelen = std::mem::size_of::<libc::sockaddr_in>() as u32;
            m
        })
        .collect()
}

/// The bare echo pair for `seconds`: echoes per second and datagrams lost.
fn run_anchor(seconds: u64, priority: u8) -> (f64, u64) {
    let server = UdpSocket::bind("127.0.0.1:0").unwrap();
    server.set_read_timeout(Some(Duration::from_millis(100))).unwrap();
    let client = UdpSocket::bind("127.0.0.1:0").unwrap();
    // recvmmsg's own timeout is checked only between datagrams: the
    // socket's bounds the wait for the first.
    client.set_read_timeout(Some(Duration::from_millis(100))).unwrap();
    // Queues as deep as the generator's (8 MB), so the window never
    // overflows them.
    for sock in [&server, &client] {
        let size: libc::c_int = 8 << 20;
        // SAFETY: setsockopt with an int option on our socket.
        unsafe {
            libc::setsockopt(
                sock.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_RCVBUFFORCE,
                &size as *const libc::c_int as *const libc::c_void,
                std::mem::size_of::<libc::c_int>() as u32,
            )
        };
    }
    client.connect(server.local_addr().unwrap()).unwrap();
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        s.spawn(|| {
            if priority > 0 {
                irqlab_host::rt::set_fifo(priority).unwrap();
            }
            let mut bufs = [[0u8; 64]; BATCH];
            let mut iovs: [libc::iovec; BATCH] = unsafe { std::mem::zeroed() };
            let mut names: [libc::sockaddr_in; BATCH] = unsafe { std::mem::zeroed() };
            while !stop.load(Ordering::Relaxed) {
                let mut msgs = headers(&mut bufs, &mut iovs, &mut names, 64);
                // SAFETY: msgs point at live buffers.
                let n = unsafe {
                    libc::recvmmsg(server.as_raw_fd(), msgs.as_mut_ptr(), BATCH as u32, libc::MSG_WAITFORONE, std::ptr::null_mut())
                };
                if n <= 0 {
                    continue;
                }
                for m in msgs.iter_mut().take(n as usize) {
                    // SAFETY: msg_iov points at iovs.
                    unsafe { (*m.msg_hdr.msg_iov).iov_len = m.msg_len as usize };
                }
                let mut at = 0;
                while at < n as usize {
                    // SAFETY: as above.
                    let rc = unsafe { libc::sendmmsg(server.as_raw_fd(), msgs[at..].as_mut_ptr(), (n as usize - at) as u32, 0) };
                    at += rc.max(1) as usize;
                }
            }
        });
        if priority > 0 {
            irqlab_host::rt::set_fifo(priority).unwrap();
        }
        let fd = client.as_raw_fd();
        let mut out_bufs = [[7u8; 64]; BATCH];
        let mut in_bufs = [[0u8; 64]; BATCH];
        let (mut out_iovs, mut in_iovs): ([libc::iovec; BATCH], [libc::iovec; BATCH]) = unsafe { std::mem::zeroed() };
        let (mut out_names, mut in_names): ([libc::sockaddr_in; BATCH], [libc::sockaddr_in; BATCH]) = unsafe { std::mem::zeroed() };
        let mut out = headers(&mut out_bufs, &mut out_iovs, &mut out_names, 32);
        for m in &mut out {
            m.msg_hdr.msg_name = std::ptr::null_mut();
            m.msg_hdr.msg_namelen = 0;
        }
        let (mut sent, mut received, mut in_flight) = (0u64, 0u64, 0usize);
        let start = Instant::now();
        let end = start + Duration::from_secs(seconds);
        let mut now = start;
        while now < end || in_flight > 0 {
            if now < end && in_flight < WINDOW {
                let k = (WINDOW - in_flight).min(BATCH);
                // SAFETY: out points at live buffers.
                let rc = unsafe { libc::sendmmsg(fd, out.as_mut_ptr(), k as u32, 0) };
                if rc > 0 {
                    sent += rc as u64;
                    in_flight += rc as usize;
                }
            }
            let mut msgs = headers(&mut in_bufs, &mut in_iovs, &mut in_names, 64);
            let flags = if in_flight >= WINDOW || now >= end { libc::MSG_WAITFORONE } else { libc::MSG_DONTWAIT };
            // SAFETY: msgs point at live buffers.
            let n = unsafe { libc::recvmmsg(fd, msgs.as_mut_ptr(), BATCH as u32, flags, std::ptr::null_mut()) };
            if n > 0 {
                received += n as u64;
                in_flight -= n as usize;
            } else if now >= end && flags == libc::MSG_WAITFORONE && n <= 0 && start.elapsed() > Duration::from_secs(seconds + 1) {
                break; // the rest is lost
            }
            now = Instant::now();
        }
        let elapsed = start.elapsed().as_secs_f64();
        stop.store(true, Ordering::Relaxed);
        (received as f64 / elapsed, sent - received)
    })
}

fn median_and_range(mut v: Vec<f64>) -> (f64, f64, f64) {
    v.sort_by(f64::total_cmp);
    (v[v.len() / 2], v[0], v[v.len() - 1])
}

fn describe(label: &str, r: &GenRun) {
    let per_path: Vec<String> = r.paths.iter().map(|(k, sent, lost, _)| format!("{} sent {sent} lost {lost}", k.name())).collect();
    println!(
        "  {label}: {} in {:.3} s ({:.0} answered/s), {} records logged, behind {:.1} ms, {} late sends, complete {}",
        per_path.join(", "),
        r.elapsed_s,
        r.answered_per_s(),
        r.logged,
        r.behind_ms,
        r.late_sends,
        r.complete
    );
}

fn main() {
    // `cargo bench` passes --bench; a plain `cargo test --benches` run
    // passes nothing and must stay short.
    if !std::env::args().any(|a| a == "--bench") {
        println!("stimulus_rate: run with `cargo bench --bench stimulus_rate` (root for both paths)");
        return;
    }
    let rounds = env_or("ROUNDS", 5) as usize;
    let seconds = env_or("SECONDS", 2);
    // The responder as `irqlab stimulus respond` runs it: SCHED_FIFO 80
    // when allowed, and the generator's threads likewise (`--priority`).
    let priority = if has(Capability::SysNice) { 80 } else { 0 };
    let r = responder::bind(&ResponderConfig { bind: SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0), priority, cpu: None })
        .expect("bind the responder");
    let port = r.local_addr().unwrap().port();
    let paths = if has(Capability::NetRaw) { vec![PathKind::Icmp, PathKind::Udp] } else { vec![PathKind::Udp] };
    let stop = AtomicBool::new(false);
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("records.jsonl");
    let (mut at_rate, mut anchors, mut maxima) = (Vec::new(), Vec::new(), Vec::new());
    std::thread::scope(|s| {
        s.spawn(|| r.serve(&stop));
        for round in 0..rounds {
            println!("round {}/{rounds} (load average {})", round + 1, load_average());
            let g = run_generator(port, &paths, RATE, seconds, priority, &log);
            describe(&format!("generator at {}k/s per path", RATE / 1000), &g);
            let (anchor, anchor_lost) = run_anchor(seconds, priority);
            println!("  anchor (sendmmsg/recvmmsg echo pair): {anchor:.0} echoes/s, {anchor_lost} lost");
            let m = run_generator(port, &paths, MAX_ASK, seconds, priority, &log);
            describe(&format!("generator asked for {}k/s per path", MAX_ASK / 1000), &m);
            println!("  ratio generator max (all paths) / anchor: {:.2}", m.answered_per_s() / anchor);
            at_rate.push(g);
            anchors.push(anchor);
            maxima.push(m);
        }
        stop.store(true, Ordering::Relaxed);
    });

    println!("summary over {rounds} rounds of {seconds} s (median, range):");
    let per_path_rate = |runs: &[GenRun], k: PathKind| {
        median_and_range(runs.iter().map(|r| r.paths.iter().find(|p| p.0 == k).map_or(0.0, |p| p.1 as f64 / r.elapsed_s)).collect())
    };
    for &k in &paths {
        let (m, lo, hi) = per_path_rate(&at_rate, k);
        println!("  at {}k/s: {} sent {m:.0}/s ({lo:.0}-{hi:.0})", RATE / 1000, k.name());
    }
    let lost: u64 = at_rate.iter().map(GenRun::lost).sum();
    let logged: u64 = at_rate.iter().map(|r| r.logged).sum();
    let incomplete = at_rate.iter().filter(|r| !r.complete).count();
    println!("  at {}k/s: {lost} lost, {logged} records logged in all, {incomplete} incomplete runs", RATE / 1000);
    let (a, alo, ahi) = median_and_range(anchors.clone());
    println!("  anchor: {a:.0} echoes/s ({alo:.0}-{ahi:.0})");
    let (g, glo, ghi) = median_and_range(maxima.iter().map(GenRun::answered_per_s).collect());
    println!(
        "  generator maximum, all paths: {g:.0} answered/s ({glo:.0}-{ghi:.0}), lost {}",
        maxima.iter().map(GenRun::lost).sum::<u64>()
    );
    for &k in &paths {
        let (m, lo, hi) = per_path_rate(&maxima, k);
        println!("  generator maximum, {}: {m:.0}/s ({lo:.0}-{hi:.0})", k.name());
    }
    let (ratio, rlo, rhi) = median_and_range(maxima.iter().zip(&anchors).map(|(m, a)| m.answered_per_s() / a).collect());
    println!("  ratio generator maximum (all paths) / anchor, per round: median {ratio:.2} ({rlo:.2}-{rhi:.2})");
    let (ratio100, r100lo, r100hi) = median_and_range(at_rate.iter().zip(&anchors).map(|(m, a)| m.answered_per_s() / a).collect());
    println!(
        "  ratio generator at {}k/s per path (all paths) / anchor, per round: median {ratio100:.2} ({r100lo:.2}-{r100hi:.2})",
        RATE / 1000
    );
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg").map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" ")).unwrap_or_default()
}
