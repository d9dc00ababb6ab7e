//! `irqlab control process-aware` (issue 20): the NAPI kthread's priority
//! follows the receivers blocked waiting for the device's data, with the
//! reaction latency reported; its own setting is back afterwards; bad input
//! exits 2 naming it. Live parts: IRQLAB_LIVE_TESTS=1, as root.

mod common;

use common::{irqlab, json, live_tests_enabled};
use irqlab_host::journal::sched::{self, SchedAttr};
use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};
use std::process::{Child, Stdio};
use std::sync::mpsc;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The live tests share the testbed's NAPI kthread.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

#[test]
fn bad_input_exits_2_naming_it() {
    for (args, says) in [
        (vec!["--floor", "deadline:1ms/10ms", "irqlab-b"], "--floor deadline:1ms/10ms: takes other[:NICE]"),
        (vec!["--floor", "sporadic:1ms/10ms", "irqlab-b"], "--floor sporadic:1ms/10ms: takes other[:NICE]"),
        (vec!["--floor", "fifo:120", "irqlab-b"], "'fifo:120' for '--floor <POLICY>': priority `120` is outside 1..=99"),
        (vec!["no-such-device0"], "no-such-device0"),
        // `fifo` alone is a floor (SCHED_FIFO 50): the run goes on to the device.
        (vec!["--floor", "fifo", "no-such-device0"], "no-such-device0"),
    ] {
        let out = irqlab().args(["control", "process-aware"]).args(&args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
    }
}

fn root_addr_b() -> Ipv4Addr {
    let out = irqlab().args(["testbed", "status", "--json"]).output().unwrap();
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let host = doc["hosts"].as_array().unwrap().iter().find(|h| h["side"] == "b").expect("host b").clone();
    host["root_addr"].as_str().unwrap().parse().unwrap()
}

/// A receiver thread: bound now, at `priority` and blocked in recv once told
/// to, gone after its one datagram.
fn receiver(addr: Ipv4Addr, priority: i32) -> (u16, mpsc::Sender<()>, std::thread::JoinHandle<()>) {
    let socket = UdpSocket::bind(SocketAddrV4::new(addr, 0)).unwrap();
    let port = socket.local_addr().unwrap().port();
    let (go, wait) = mpsc::channel::<()>();
    let handle = std::thread::spawn(move || {
        wait.recv().unwrap();
        let param = libc::sched_param { sched_priority: priority };
        // SAFETY: this thread's own policy.
        assert_eq!(unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) }, 0);
        let mut buf = [0u8; 64];
        socket.recv_from(&mut buf).unwrap();
    });
    (port, go, handle)
}

fn wait_for(tid: i32, want: SchedAttr, what: &str) -> Duration {
    let start = Instant::now();
    while sched::get(tid).unwrap() != want {
        assert!(start.elapsed() < Duration::from_secs(5), "{what}: the kthread is {} not {want}", sched::get(tid).unwrap());
        std::thread::sleep(Duration::from_millis(5));
    }
    start.elapsed()
}

fn wait_exit(child: &mut Child) -> Option<i32> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            return s.code();
        }
        assert!(Instant::now() < deadline, "the controller did not stop");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn the_napi_thread_follows_the_waiting_receivers() {
    if !live_tests_enabled("the_napi_thread_follows_the_waiting_receivers") {
        return;
    }
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let made_testbed = !std::path::Path::new("/run/netns/irqlab-b").exists();
    let up = irqlab().args(["testbed", "up"]).output().unwrap();
    assert_eq!(up.status.code(), Some(0), "{}", String::from_utf8_lossy(&up.stderr));
    let napi = irqlab_host::testbed::napi_threads("irqlab-b").first().expect("a napi/irqlab-b-* kthread").pid;
    let original = sched::get(napi).unwrap();
    let addr = root_addr_b();
    let (port_low, go_low, low) = receiver(addr, 20);
    let (port_high, go_high, high) = receiver(addr, 40);
    let dir = tempfile::tempdir().unwrap();
    let report_path = dir.path().join("pa.json");
    let mut child = irqlab()
        // A --duration Ctrl-C cuts short: incomplete (`irqlab_host::run_end`).
        .args(["control", "process-aware", "irqlab-b", "--duration", "600s", "--json"])
        .arg(&report_path)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let floor = SchedAttr::Other { nice: 0 };
    wait_for(napi, floor, "at the start");
    // The controller scans and attaches after it set the floor.
    std::thread::sleep(Duration::from_millis(500));
    go_low.send(()).unwrap();
    let first = wait_for(napi, SchedAttr::Fifo { priority: 20 }, "the FIFO 20 receiver waits");
    go_high.send(()).unwrap();
    wait_for(napi, SchedAttr::Fifo { priority: 40 }, "the FIFO 40 receiver waits too");
    let sender = UdpSocket::bind("0.0.0.0:0").unwrap();
    sender.send_to(b"wake", SocketAddrV4::new(addr, port_high)).unwrap();
    high.join().unwrap();
    wait_for(napi, SchedAttr::Fifo { priority: 20 }, "the FIFO 40 receiver got its datagram");
    sender.send_to(b"wake", SocketAddrV4::new(addr, port_low)).unwrap();
    low.join().unwrap();
    wait_for(napi, floor, "nobody waits");
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    assert_eq!(wait_exit(&mut child), Some(1), "its --duration cut short by Ctrl-C: exit 1");
    assert_eq!(sched::get(napi).unwrap(), original, "the kthread's own setting is back");
    let report = json(&report_path);
    assert_eq!(report["schema"], "irqlab/process-aware/v1");
    assert_eq!(report["complete"], false);
    let me = std::process::id() as i64;
    assert!(
        report["candidates"].as_array().unwrap().iter().any(|c| c["pid"] == me),
        "the test process is a receiver: {}",
        report["candidates"]
    );
    let attrs: Vec<String> = report["changes"].as_array().unwrap().iter().map(|c| c["attr"].to_string()).collect();
    let want: Vec<String> = [SchedAttr::Fifo { priority: 20 }, SchedAttr::Fifo { priority: 40 }, SchedAttr::Fifo { priority: 20 }, floor]
        .iter()
        .map(|a| serde_json::to_value(a).unwrap().to_string())
        .collect();
    assert_eq!(attrs, want, "the changes, in order");
    let reaction = &report["reaction"];
    assert_eq!(reaction["count"].as_u64(), Some(4));
    let p99 = reaction["p99_ns"].as_u64().unwrap();
    eprintln!(
        "reaction p50 {} ns, p99 {p99} ns, max {} ns; the first change seen by this test after {first:?}",
        reaction["p50_ns"], reaction["max_ns"]
    );
    assert!(p99 > 0, "a reaction takes time");
    if made_testbed {
        let _ = irqlab().args(["testbed", "down"]).output();
    }
}

/// kill -9 leaves the kthread's scheduling as a named leftover that
/// `control revert --all` restores; a device without NAPI is exit 2, no
/// CAP_SYS_NICE exit 3, each naming it.
#[test]
fn after_kill_9_the_leftover_is_reverted_and_missing_rights_exit_3() {
    if !live_tests_enabled("after_kill_9_the_leftover_is_reverted_and_missing_rights_exit_3") {
        return;
    }
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let made_testbed = !std::path::Path::new("/run/netns/irqlab-b").exists();
    assert_eq!(irqlab().args(["testbed", "up"]).output().unwrap().status.code(), Some(0));
    let napi = irqlab_host::testbed::napi_threads("irqlab-b").first().expect("a napi/irqlab-b-* kthread").pid;
    let original = sched::get(napi).unwrap();
    let out = irqlab().args(["control", "process-aware", "lo", "--duration", "1s"]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "lo: {err}");
    assert!(err.contains("lo has no NAPI instance"), "{err}");
    if std::path::Path::new("/usr/bin/setpriv").exists() {
        let out = std::process::Command::new("setpriv")
            .args(["--inh-caps=-all", "--bounding-set=-sys_nice", env!("CARGO_BIN_EXE_irqlab"), "control", "process-aware", "irqlab-b"])
            .args(["--duration", "1s"])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(3), "{err}");
        assert!(err.contains("CAP_SYS_NICE"), "{err}");
    }
    // A floor the kthread does not have already, so the change shows.
    let mut child = irqlab()
        .args(["control", "process-aware", "irqlab-b", "--floor", "fifo:7"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_for(napi, SchedAttr::Fifo { priority: 7 }, "the floor applied");
    let owner = child.id();
    assert!(std::process::Command::new("kill").args(["-9", &owner.to_string()]).status().unwrap().success());
    let _ = child.wait();
    let status = irqlab().args(["control", "status", "--json", "-"]).output().unwrap();
    let doc: serde_json::Value = serde_json::from_slice(&status.stdout).unwrap();
    let leftover = doc["entries"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["object"]["thread"]["tid"] == napi && e["object"]["kind"] == "thread-sched")
        .unwrap_or_else(|| panic!("no entry for the kthread: {doc}"))
        .clone();
    assert_eq!((leftover["state"].as_str(), leftover["owner"]["pid"].as_u64()), (Some("leftover"), Some(u64::from(owner))));
    let revert = irqlab().args(["control", "revert", "--all"]).output().unwrap();
    assert_eq!(revert.status.code(), Some(0), "{}", String::from_utf8_lossy(&revert.stderr));
    assert_eq!(sched::get(napi).unwrap(), original, "revert --all restored it");
    if made_testbed {
        let _ = irqlab().args(["testbed", "down"]).output();
    }
}

/// `reproduce process-aware --live --quick`: Fig. 7 live, every kernel at
/// every rate, the network work done in the sleep phases; Fig. 8 live,
/// every burst gap with all its periods; the device's
/// settings back afterwards. Whether the paper's relations hold is this
/// machine's result (docs/performance.md), not asserted here.
#[test]
fn live_fig7_runs_every_kernel_at_every_rate_and_restores() {
    if !live_tests_enabled("live_fig7_runs_every_kernel_at_every_rate_and_restores") {
        return;
    }
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let threaded = "/sys/class/net/irqlab-b/threaded";
    let before = std::fs::read_to_string(threaded).ok();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.json");
    let out = irqlab().args(["reproduce", "process-aware", "--live", "--quick", "--json"]).arg(&path).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    eprintln!("{}{stderr}", String::from_utf8_lossy(&out.stdout));
    assert!(matches!(out.status.code(), Some(0 | 1)), "exit {:?}", out.status.code());
    let doc = json(&path);
    assert_eq!(doc["complete"], true);
    let points = doc["details"]["points"].as_array().unwrap();
    assert_eq!(points.len(), 9, "3 kernels x 3 rates");
    // The machine's own drift while the points ran: the work loop's speed
    // calibrated after them over before (this VM's host changed it by 7%
    // within a run: shares of 1.0695 and 1.0727 in two CI runs, the
    // second after the calibration took the median 100 ms window).
    let speed = |c: &serde_json::Value| c["iterations_per_us"].as_f64().unwrap();
    let drift = speed(&doc["details"]["calibration_after"]) / speed(&doc["details"]["calibration"]);
    eprintln!("the work loop's speed after the Fig. 7 points over before: {drift:.4}");
    for p in points {
        // Progress over the calibrated speed (a little above 1 if the
        // calibration ran slower than the sustained loop, more by the
        // machine's drift), and the kernel's charge of its CPU clock.
        let share = p["hog_share"].as_f64().unwrap();
        let charged = p["hog_charged_share"].as_f64().unwrap();
        assert!(p["complete"] == true && share > 0.0 && share <= 1.05 * drift.max(1.0) && (0.5..=1.0).contains(&charged), "{p}");
        assert!(p["received_sleep"].as_u64().unwrap() > 0, "nothing received in the sleep phase: {p}");
        // Fig. 6: the three charges of the CPU-bound thread, every kernel.
        let a = &p["accounting"];
        assert!(a["truth_ns"].as_u64().unwrap() > 0 && a["kernel_error"].is_f64() && a["compensation_error"].is_f64(), "{p}");
    }
    let bursty = doc["details"]["bursty"].as_array().unwrap();
    assert_eq!(bursty.len(), 8, "2 kernels x 4 burst gaps");
    for b in bursty {
        assert!(b["complete"] == true && b["jobs"] == 10 && b["sent"].as_u64().unwrap() > 0, "{b}");
    }
    assert_eq!(doc["rows"].as_array().unwrap().len(), 21 + 7 + 16 + 2);
    assert!(doc["details"]["kernel_note"].as_str().unwrap().starts_with("Measured by its progress, the CPU-bound process kept"));
    let left = irqlab().args(["control", "status", "--json", "-"]).output().unwrap();
    let status: serde_json::Value = serde_json::from_slice(&left.stdout).unwrap();
    assert!(status["entries"].as_array().unwrap().iter().all(|e| e["state"] == "persistent"), "{status}");
    assert_eq!(std::fs::read_to_string(threaded).ok(), before, "threaded NAPI setting restored");
}

/// A thread on `cpu` at `attr` receiving on a socket bound on `addr` until
/// `stop`; returns its port, and its tid through the channel.
fn looping_receiver(
    addr: Ipv4Addr,
    cpu: usize,
    attr: SchedAttr,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    tid: mpsc::Sender<i32>,
) -> (u16, std::thread::JoinHandle<u64>) {
    let socket = UdpSocket::bind(SocketAddrV4::new(addr, 0)).unwrap();
    socket.set_read_timeout(Some(Duration::from_millis(100))).unwrap();
    let port = socket.local_addr().unwrap().port();
    let handle = std::thread::spawn(move || {
        irqlab_host::rt::pin_to_cpu(cpu).unwrap();
        // SAFETY: this thread's own id.
        let me = unsafe { libc::gettid() };
        sched::set(me, attr).unwrap();
        tid.send(me).unwrap();
        let mut buf = [0u8; 2048];
        let mut got = 0;
        while !stop.load(std::sync::atomic::Ordering::SeqCst) {
            got += u64::from(socket.recv_from(&mut buf).is_ok());
        }
        got
    });
    (port, handle)
}

/// The controller's own observations on the testbed: two receivers (FIFO 20
/// and SCHED_OTHER) on CPU `focus` blocking and waking as host b sends to
/// both, the NAPI kthread pinned to CPU 0 and the receive work steered to `focus`
/// (rps_cpus, through the journal) so it runs in softirq context there, and a SCHED_FIFO 50 task
/// that runs 200 ms and sleeps 100 ms on `focus` (the work runs in its
/// context while it runs). `--record` writes the trace: both waiters'
/// blocks, bottom halves served to them, ticks charged to the CPU-bound
/// task; the compensation counted that work against it. With IRQLAB_RECORD_TRACE=FILE
/// the trace is kept there (`crates/control/tests/data/process_aware_live_trace.json`
/// came from such a run; `crates/control/tests/process_aware_decisions.rs`
/// replays it through the live adapter and the simulator's).
#[test]
fn the_controller_records_waiters_bottom_halves_and_ticks() {
    use irqlab_host::journal::{self, Object, Value};
    use irqlab_host::testbed::{Side, Testbed};
    use irqlab_measure::traffic::{self, Kind, Plan, Schedule};
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    if !live_tests_enabled("the_controller_records_waiters_bottom_halves_and_ticks") {
        return;
    }
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let bed = Testbed::up().unwrap();
    let focus = *irqlab_host::rt::online_cpus().unwrap().last().unwrap();
    let rps = journal::apply(
        Object::File { path: "/sys/class/net/irqlab-b/queues/rx-0/rps_cpus".into() },
        Value::Text { text: irqlab_host::rt::cpu_mask_hex(&[focus]) },
    )
    .unwrap();
    // The kthread polls on CPU 0; the controller is not pinned (no --cpu).
    let pinned: Vec<_> = irqlab_host::testbed::napi_threads("irqlab-b")
        .iter()
        .filter_map(|t| irqlab_host::journal::threads::Thread::of(t.pid))
        .map(|thread| journal::apply(Object::ThreadAffinity { thread }, Value::Cpus { cpus: vec![0] }).unwrap())
        .collect();
    let addr = bed.root_addr(Side::B);
    let stop = Arc::new(AtomicBool::new(false));
    let ((tid_a, rx_a), (tid_b, rx_b)) = (mpsc::channel(), mpsc::channel());
    let (port_a, a) = looping_receiver(addr, focus, SchedAttr::Fifo { priority: 20 }, stop.clone(), tid_a);
    let (port_b, b) = looping_receiver(addr, focus, SchedAttr::Other { nice: 0 }, stop.clone(), tid_b);
    let receivers = [rx_a.recv().unwrap(), rx_b.recv().unwrap()];
    let dir = tempfile::tempdir().unwrap();
    let (trace_path, report_path) = (dir.path().join("trace.json"), dir.path().join("pa.json"));
    let mut child = irqlab()
        .args(["control", "process-aware", "irqlab-b", "--account-cpu", &focus.to_string(), "--duration", "4s", "--record"])
        .arg(&trace_path)
        .arg("--json")
        .arg(&report_path)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(700));
    let senders: Vec<_> = [port_a, port_b]
        .into_iter()
        .map(|port| {
            let plan = Plan {
                kind: Kind::Udp { port },
                target: addr,
                schedule: Schedule::Periodic { interval_ns: 100_000 },
                size: 512,
                duration_ns: 3_000_000_000,
            };
            let stop = Arc::new(AtomicBool::new(false));
            bed.spawn_in(Side::B, move || {
                irqlab_host::rt::pin_to_cpu(0)?;
                traffic::send(&plan, &stop)
            })
            .unwrap()
        })
        .collect();
    let hog = std::thread::spawn(move || {
        irqlab_host::rt::pin_to_cpu(focus).unwrap();
        // SAFETY: this thread's own id.
        let me = unsafe { libc::gettid() };
        sched::set(me, SchedAttr::Fifo { priority: 50 }).unwrap();
        let start = Instant::now();
        while start.elapsed() < Duration::from_millis(3000) {
            let run = Instant::now();
            while run.elapsed() < Duration::from_millis(200) {
                std::hint::black_box(irqlab_measure::player::spin(20_000));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        me
    });
    let hog_tid = hog.join().unwrap();
    for s in senders {
        s.join().unwrap().unwrap();
    }
    assert_eq!(wait_exit(&mut child), Some(0), "ran its duration");
    stop.store(true, Ordering::SeqCst);
    let got = a.join().unwrap() + b.join().unwrap();
    rps.restore().unwrap();
    journal::restore_all(pinned).unwrap();
    drop(bed);
    if let Ok(keep) = std::env::var("IRQLAB_RECORD_TRACE") {
        std::fs::copy(&trace_path, keep).unwrap();
    }
    let report = json(&report_path);
    let acct = &report["accounting"];
    for t in acct["tasks"].as_array().unwrap() {
        eprintln!(
            "{} {} truth {} kernel {} compensation {} moved {}",
            t["tid"], t["comm"], t["truth_run_ns"], t["kernel_charged_ns"], t["compensation_charged_ns"], t["moved_ticks"]
        );
    }
    eprintln!(
        "receivers {receivers:?} received {got}, CPU-bound task {hog_tid}; waits {}, changes {}; accounting: {} ticks ({} late)",
        report["waits"], report["change_count"], acct["ticks"], acct["late_ticks"]
    );
    // The accounting's own thread is measured apart from the controller's
    // (issue 50): a thread of its own, its setup apart, CPU time over the run.
    let (controller, accounting) = (&report["overhead"], &report["accounting_overhead"]);
    eprintln!("controller {controller}, accounting {accounting}");
    assert_ne!(accounting["controller_tid"], controller["controller_tid"], "one thread for both: {accounting}");
    assert!(accounting["controller_cpu_ns"].as_u64().unwrap() > 0 && accounting["controlled_ns"].as_u64().unwrap() > 0, "{accounting}");
    let trace = json(&trace_path);
    let obs = trace["observations"].as_array().unwrap();
    let has = |f: &dyn Fn(&serde_json::Value) -> bool| obs.iter().any(f);
    for (tid, policy) in [(receivers[0], "fifo"), (receivers[1], "other")] {
        assert!(has(&|o| o["event"] == "block" && o["tid"] == tid && o["attr"]["policy"] == policy), "{tid} blocks ({policy})");
        assert!(has(&|o| o["event"] == "bh" && o["owner"] == tid), "bottom halves served to {tid}");
    }
    assert!(has(&|o| o["event"] == "tick" && o["charged"] == hog_tid), "ticks charged to the CPU-bound task");
    let hog_row = acct["tasks"].as_array().unwrap().iter().find(|t| t["tid"] == hog_tid).unwrap_or_else(|| panic!("{acct}"));
    eprintln!("the CPU-bound task's charges: {hog_row}");
    // The receivers' work in its context counted against it (x < 0, or
    // whole ticks already moved off it).
    assert!(
        hog_row["moved_ticks"].as_i64().unwrap() < 0 || hog_row["unaccounted"].as_i64().unwrap() < 0,
        "foreign work counted against it: {hog_row}"
    );
    assert!(hog_row["stolen_softirq_ns"].as_u64().unwrap() > 0, "{hog_row}");
}
