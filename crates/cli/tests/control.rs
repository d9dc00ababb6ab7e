//! `irqlab control` as a user runs it: bad policies and matches exit 2
//! naming the value, and (live: IRQLAB_LIVE_TESTS=1, as root) the testbed's
//! NAPI kthread under SCHED_DEADLINE while the command runs, back to its
//! own policy after SIGINT, after SIGTERM, and after a real SIGKILL
//! followed by `irqlab control revert --all`, with the leftover named by
//! `control status` and `doctor` in between.

use irqlab_host::journal::sched::{self, SchedAttr};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

mod common;
use common::{irqlab, live_tests_enabled};

/// The live tests control the same kthread: one at a time.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

#[test]
fn bad_policies_and_matches_exit_2_naming_the_value() {
    for (args, says) in [
        (
            vec!["threads", "napi:x", "--policy", "fifo:100"],
            "invalid value 'fifo:100' for '--policy <POLICY>': priority `100` is outside 1..=99",
        ),
        (vec!["threads", "napi:x", "--policy", "deadline:10ms/1ms"], "runtime <= deadline <= period"),
        (vec!["threads", "napi:x", "--policy", "turbo"], "invalid value 'turbo' for '--policy <POLICY>': unknown policy"),
        (vec!["threads", "nic0", "--policy", "idle"], "MATCH nic0: expected napi:DEV"),
        (vec!["threads", "ksoftirqd:100000", "--policy", "idle"], "ksoftirqd/0"),
        (vec!["threads", "pid:2147483647", "--policy", "idle"], "no thread 2147483647"),
        (vec!["revert", "no-such-entry"], "no control journal entry no-such-entry"),
        (vec!["threads", "napi:x", "--policy", "sporadic:1ms/10ms", "--persist"], "the server lives only while irqlab runs"),
        (vec!["threads", "napi:x", "--policy", "idle", "--cpu", "9999"], "--cpu 9999: not an online CPU"),
        (vec!["threads", "napi:x", "--policy", "idle", "--cpu", "1-0"], "'1-0' for '--cpu <LIST>'"),
        (vec!["napi", "nope0"], "no network device `nope0` (there are: "),
        (vec!["napi", "lo", "--budget", "0"], "--budget"),
        (vec!["napi", "lo", "--defer-hard-irqs", "3000000000"], "--defer-hard-irqs"),
        (vec!["napi", "lo", "--gro-flush-timeout", "soon"], "--gro-flush-timeout"),
        (vec!["napi", "lo", "--duration", "1s"], "need a setting to hold"),
        (vec!["bh-budget", "lo", "--period", "50us"], "--period 50us: must be between 100us and 1s"),
        (vec!["bh-budget", "lo", "--period", "2s"], "--period 2s: must be between 100us and 1s"),
        (vec!["bh-budget", "lo", "--gain", "0"], "--gain 0: must be in (0, 1]"),
        (vec!["bh-budget", "lo", "--gain", "1.5"], "--gain 1.5: must be in (0, 1]"),
        (vec!["bh-budget", "lo", "--gain", "fast"], "--gain"),
        (vec!["bh-budget", "lo", "--min", "2ms"], "--min 2ms"),
        (vec!["bh-budget", "lo", "--enforce", "edf"], "--enforce"),
        (vec!["bh-budget", "lo", "--trace", "-"], "--trace"),
        (vec!["bh-budget", "lo", "--enforce", "deadline", "--cpu", "0"], "--cpu with --enforce deadline"),
        (vec!["bh-budget", "nope0"], "no network device `nope0` (there are: "),
        (vec!["bh-budget", "lo"], "lo has no NAPI instance"),
    ] {
        let out = irqlab().arg("control").args(&args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.starts_with("error: ") && err.contains(says), "{args:?}: {err}");
    }
    let out = irqlab().args(["control", "revert"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "revert needs an ID or --all");
}

#[test]
fn without_cap_sys_nice_it_exits_3_naming_it() {
    if !common::is_root() || !std::path::Path::new("/usr/bin/setpriv").exists() {
        eprintln!("without_cap_sys_nice_it_exits_3_naming_it: NOT CHECKED: needs root and setpriv");
        return;
    }
    let me = std::process::id().to_string();
    let out = Command::new("setpriv")
        .args(["--inh-caps=-all", "--bounding-set=-sys_nice", env!("CARGO_BIN_EXE_irqlab"), "control", "threads"])
        .arg(format!("pid:{me}"))
        .args(["--policy", "fifo:10", "--duration", "1s"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert!(err.contains("CAP_SYS_NICE"), "{err}");
}

/// The testbed's `napi/irqlab-b-*` kthread, with the testbed up (made here
/// if it was not, and then removed by the returned guard).
struct Napi {
    tid: i32,
    made_testbed: bool,
}

impl Napi {
    fn up() -> Napi {
        let made_testbed = !std::path::Path::new("/run/netns/irqlab-b").exists();
        let out = irqlab().args(["testbed", "up"]).output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
        let tid = irqlab_host::testbed::napi_threads("irqlab-b").first().expect("a napi/irqlab-b-* kthread").pid;
        Napi { tid, made_testbed }
    }

    fn attr(&self) -> SchedAttr {
        sched::get(self.tid).unwrap()
    }

    /// Waits until the kthread's policy is `want` (the command applies it
    /// right after it starts).
    fn wait_for(&self, want: impl Fn(SchedAttr) -> bool, what: &str) {
        let start = Instant::now();
        while !want(self.attr()) {
            assert!(start.elapsed() < Duration::from_secs(10), "{what}: still {}", self.attr());
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Napi {
    fn drop(&mut self) {
        if self.made_testbed {
            let _ = irqlab().args(["testbed", "down"]).output();
        }
    }
}

fn is_deadline(a: SchedAttr) -> bool {
    a == SchedAttr::Deadline { runtime_ns: 1_000_000, deadline_ns: 10_000_000, period_ns: 10_000_000 }
}

fn control_deadline() -> Child {
    irqlab()
        .args(["control", "threads", "napi:irqlab-b", "--policy", "deadline:1ms/10ms"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

fn wait_at_most(child: &mut Child, limit: Duration) -> std::process::ExitStatus {
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        assert!(start.elapsed() < limit, "irqlab control did not end within {limit:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn deadline_on_the_napi_thread_is_undone_after_sigint_and_sigterm() {
    if !live_tests_enabled("deadline_on_the_napi_thread_is_undone_after_sigint_and_sigterm") {
        return;
    }
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let napi = Napi::up();
    let original = napi.attr();
    assert!(!is_deadline(original));
    for signal in [libc::SIGINT, libc::SIGTERM] {
        let mut child = control_deadline();
        napi.wait_for(is_deadline, "under control");
        // A second controller of the same thread is refused, naming the first.
        let second = irqlab().args(["control", "threads", "napi:irqlab-b", "--policy", "fifo:10"]).output().unwrap();
        let err = String::from_utf8_lossy(&second.stderr);
        assert_eq!(second.status.code(), Some(2), "{err}");
        assert!(err.contains(&format!("irqlab process {}", child.id())), "{err}");
        // SAFETY: signalling our own child.
        unsafe { libc::kill(child.id() as i32, signal) };
        wait_at_most(&mut child, Duration::from_secs(10));
        assert_eq!(napi.attr(), original, "not restored after signal {signal}");
    }
}

#[test]
fn after_sigkill_the_leftover_is_named_and_reverted() {
    if !live_tests_enabled("after_sigkill_the_leftover_is_named_and_reverted") {
        return;
    }
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let napi = Napi::up();
    let original = napi.attr();
    let mut child = control_deadline();
    napi.wait_for(is_deadline, "under control");
    let owner = child.id();
    // A real kill -9: no handler, no destructor, no exit hook runs.
    let killed = Command::new("kill").args(["-9", &owner.to_string()]).status().unwrap();
    assert!(killed.success());
    wait_at_most(&mut child, Duration::from_secs(5));
    assert!(is_deadline(napi.attr()), "SIGKILL cannot have restored it");

    let status = irqlab().args(["control", "status", "--json", "-"]).output().unwrap();
    let doc: serde_json::Value = serde_json::from_slice(&status.stdout).unwrap();
    let leftover = doc["entries"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["object"]["thread"]["tid"] == napi.tid)
        .unwrap_or_else(|| panic!("no entry for tid {}: {doc}", napi.tid));
    assert_eq!(leftover["state"], "leftover", "{leftover}");
    assert_eq!(leftover["owner"]["pid"], owner);
    assert_eq!(leftover["new"]["attr"]["policy"], "deadline");

    let doctor = common::doctor_report();
    let named = doctor["leftovers"].as_array().unwrap().iter().any(|l| l.as_str().unwrap().contains(&format!("tid {}", napi.tid)));
    assert!(named, "doctor does not name the leftover: {}", doctor["leftovers"]);

    let revert = irqlab().args(["control", "revert", "--all"]).output().unwrap();
    assert_eq!(revert.status.code(), Some(0), "{}", String::from_utf8_lossy(&revert.stderr));
    assert_eq!(napi.attr(), original, "revert --all did not restore it");
    let after = irqlab().args(["control", "status", "--json", "-"]).output().unwrap();
    let doc: serde_json::Value = serde_json::from_slice(&after.stdout).unwrap();
    assert!(doc["entries"].as_array().unwrap().iter().all(|e| e["object"]["thread"]["tid"] != napi.tid), "{doc}");
}

/// A controlled thread that exits ends the hold: reported, not a crash.
#[test]
fn a_thread_that_exits_mid_run_is_reported() {
    if !live_tests_enabled("a_thread_that_exits_mid_run_is_reported") {
        return;
    }
    let mut sleeper = Command::new("sleep").arg("1").spawn().unwrap();
    let out =
        irqlab().args(["control", "threads", &format!("pid:{}", sleeper.id()), "--policy", "other:10", "--json", "-"]).output().unwrap();
    let _ = sleeper.wait();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["schema"], "irqlab/control/v1");
    assert_eq!(doc["ended_by"], "threads exited");
    assert_eq!(doc["threads"][0]["exited"], true);
}

/// Issue 44: a persisted change someone else changed since is seen. After
/// `control threads pid:N --policy fifo:10 --persist` and `chrt -o -p 0 N`
/// (SCHED_OTHER again, by hand), `control status` marks the entry drifted
/// with what the thread has now, `revert` refuses naming it (exit 1), and
/// `revert --force` puts the old policy back.
#[test]
fn a_persisted_change_changed_by_hand_is_drifted_and_reverted_only_with_force() {
    if !live_tests_enabled("a_persisted_change_changed_by_hand_is_drifted_and_reverted_only_with_force") {
        return;
    }
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    struct Sleeper(Child);
    impl Drop for Sleeper {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    // SCHED_BATCH, so that the old value differs from what the hand sets
    // (SCHED_OTHER) as well as from irqlab's (FIFO 10): a hand that puts
    // the old value back is shown as such, not as drift.
    let sleeper = Sleeper(Command::new("chrt").args(["-b", "0", "sleep", "60"]).spawn().expect("chrt (util-linux)"));
    std::thread::sleep(Duration::from_millis(200));
    let pid = sleeper.0.id() as i32;
    let persist = irqlab().args(["control", "threads", &format!("pid:{pid}"), "--policy", "fifo:10", "--persist"]).output().unwrap();
    assert!(persist.status.success(), "{}", String::from_utf8_lossy(&persist.stderr));
    assert_eq!(sched::get(pid).unwrap(), SchedAttr::Fifo { priority: 10 });
    let entry = |status: &serde_json::Value| {
        status["entries"].as_array().unwrap().iter().find(|e| e["object"]["thread"]["tid"] == pid).cloned().expect("the entry")
    };
    let status = || -> serde_json::Value {
        let o = irqlab().args(["control", "status", "--json", "-"]).output().unwrap();
        serde_json::from_slice(&o.stdout).unwrap()
    };
    let e = entry(&status());
    assert_eq!((e["state"].as_str(), e["now"].as_str()), (Some("persistent"), Some("as-set")), "{e}");
    let id = e["id"].as_str().unwrap().to_string();

    let chrt = Command::new("chrt").args(["-o", "-p", "0", &pid.to_string()]).status().expect("chrt (util-linux)");
    assert!(chrt.success());
    let e = entry(&status());
    assert_eq!(e["now"], "drifted", "{e}");
    assert_eq!(e["value"]["attr"], serde_json::json!({"policy": "other", "nice": 0}), "{e}");
    let text = irqlab().args(["control", "status"]).output().unwrap();
    assert!(String::from_utf8_lossy(&text.stdout).contains("DRIFTED: now SCHED_OTHER nice 0"), "{}", String::from_utf8_lossy(&text.stdout));

    let refused = irqlab().args(["control", "revert", &id]).output().unwrap();
    let err = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(1), "{err}");
    assert!(err.contains(&id) && err.contains("drifted") && err.contains("--force"), "{err}");
    assert_eq!(sched::get(pid).unwrap(), SchedAttr::Other { nice: 0 }, "a refused revert changes nothing");

    let forced = irqlab().args(["control", "revert", &id, "--force"]).output().unwrap();
    assert!(forced.status.success(), "{}", String::from_utf8_lossy(&forced.stderr));
    assert_eq!(sched::get(pid).unwrap(), SchedAttr::Batch { nice: 0 });
    assert!(status()["entries"].as_array().unwrap().iter().all(|e| e["object"]["thread"]["tid"] != pid));
    drop(sleeper);
}

/// Issue 50: a value something else changes while a run holds it is said
/// while the run goes on (stderr, within the hold's one-second read-back),
/// not only by `control status` after, and the report lists it; the end
/// of the run restores the old value all the same.
#[test]
fn a_drift_while_held_is_said_as_it_happens_and_reported() {
    if !live_tests_enabled("a_drift_while_held_is_said_as_it_happens_and_reported") {
        return;
    }
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let mut sleeper = Command::new("chrt").args(["-b", "0", "sleep", "60"]).spawn().expect("chrt (util-linux)");
    std::thread::sleep(Duration::from_millis(200));
    let pid = sleeper.id() as i32;
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("held.json");
    let mut held = irqlab()
        .args(["control", "threads", &format!("pid:{pid}"), "--policy", "fifo:10", "--duration", "5s", "--json"])
        .arg(&out)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = held.stderr.take().unwrap();
    let (lines, said) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        use std::io::BufRead;
        for line in std::io::BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = lines.send((Instant::now(), line));
        }
    });
    let deadline = Instant::now() + Duration::from_secs(3);
    while sched::get(pid).unwrap() != (SchedAttr::Fifo { priority: 10 }) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(sched::get(pid).unwrap(), SchedAttr::Fifo { priority: 10 });
    let chrt = Command::new("chrt").args(["-f", "-p", "20", &pid.to_string()]).status().expect("chrt (util-linux)");
    assert!(chrt.success());
    let changed = Instant::now();
    // Said while the run holds (it ends 5 s after it began).
    let drift = loop {
        let (at, line) = said.recv_timeout(Duration::from_secs(4)).expect("no drift said within 4 s of the change");
        if line.starts_with("drift:") {
            break (at, line);
        }
    };
    assert!(held.try_wait().unwrap().is_none(), "the drift was said only once the run ended: {}", drift.1);
    assert!(drift.0.duration_since(changed) < Duration::from_millis(2500), "said {:?} after the change", drift.0.duration_since(changed));
    assert!(drift.1.contains(&format!("tid {pid}")), "{}", drift.1);
    assert!(drift.1.contains("SCHED_FIFO 20") && drift.1.contains("SCHED_FIFO 10"), "{}", drift.1);
    let status = wait_at_most(&mut held, Duration::from_secs(10));
    assert!(status.success(), "{status:?}");
    let report: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    let drifts = report["drifts"].as_array().expect("drifts in the report");
    assert_eq!(drifts.len(), 1, "said once, not every second: {drifts:?}");
    assert_eq!((drifts[0]["found"].as_str(), drifts[0]["set_back"].as_bool()), (Some("SCHED_FIFO 20"), Some(false)), "{}", drifts[0]);
    // The end restores what was there before irqlab, drift or not.
    assert_eq!(sched::get(pid).unwrap(), SchedAttr::Batch { nice: 0 });
    let _ = sleeper.kill();
    let _ = sleeper.wait();
}

/// Issue 44: an open-ended `control threads comm:GLOB` started before any
/// matching thread exists takes the ones that appear while it holds
/// (journalled, reported) and restores them at the end.
#[test]
fn a_glob_hold_takes_threads_that_appear_later_and_restores_them() {
    if !live_tests_enabled("a_glob_hold_takes_threads_that_appear_later_and_restores_them") {
        return;
    }
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let control = irqlab()
        .args(["control", "threads", "comm:irqlab-probe-*", "--policy", "fifo:5", "--duration", "3s", "--json", "-"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    // Two processes whose comm matches (a command's comm is the name it was
    // run by: a symlink to sleep named irqlab-probe-N; irqlab's own probe
    // thread is `irqlab-probe`, which the glob does not match).
    struct Late(Child);
    impl Drop for Late {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let late: Vec<Late> = (1..=2)
        .map(|n| {
            let link = dir.path().join(format!("irqlab-probe-{n}"));
            std::os::unix::fs::symlink("/bin/sleep", &link).unwrap();
            Late(Command::new(&link).arg("30").spawn().unwrap())
        })
        .collect();
    // Within the 3 s hold, started 0.5 s ago.
    let deadline = Instant::now() + Duration::from_secs(2);
    while !late.iter().all(|l| sched::get(l.0.id() as i32).unwrap() == SchedAttr::Fifo { priority: 5 }) {
        assert!(Instant::now() < deadline, "the late threads did not get the policy while the hold ran");
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = control.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("no thread matches comm:irqlab-probe-* yet"), "{err}");
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["ended_by"], "duration", "{doc}");
    let threads = doc["threads"].as_array().unwrap();
    assert_eq!(threads.len(), 2, "{doc}");
    assert!(threads.iter().all(|t| t["restored"] == true && t["thread"]["comm"].as_str().unwrap().starts_with("irqlab-probe-")), "{doc}");
    for l in &late {
        assert_eq!(sched::get(l.0.id() as i32).unwrap(), SchedAttr::Other { nice: 0 }, "restored after the hold");
    }
    let status = common::run(&["control", "status", "--json", "-"]);
    let status: serde_json::Value = serde_json::from_slice(&status.stdout).unwrap();
    assert!(status["entries"]
        .as_array()
        .unwrap()
        .iter()
        .all(|e| !e["object"]["thread"]["comm"].as_str().unwrap_or("").starts_with("irqlab-probe-")));
}

/// A busy loop (SCHED_OTHER) pinned to one CPU, killed on drop: it keeps
/// a served thread's low level (SCHED_IDLE) from running much, and it
/// starves nothing (an RT hog would make the kernel's fair server stop
/// every RT thread on that CPU, the served one included, for up to 50 ms a
/// second).
struct Hog(Child);

impl Hog {
    fn on(cpu: &str) -> Hog {
        let child = Command::new("taskset").args(["-c", cpu, "sh", "-c", "while :; do :; done"]).spawn().expect("taskset (util-linux)");
        Hog(child)
    }
}

impl Drop for Hog {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// One stretch on a CPU; `high` when it began or ended at a real-time
/// priority (the served thread's high level: a stretch cut short by the
/// server's demotion begins high and ends low, and counts as high).
#[derive(Debug, Clone, Copy)]
struct Stretch {
    start: u64,
    end: u64,
    high: bool,
    /// Began high and ended low: the server's demotion at an exhaustion.
    demoted: bool,
}

/// bpftrace on sched_switch for one thread: the independent trace (the
/// kernel's own tracepoint through another tool, not irqlab's monitor).
/// tracefs, which bpftrace's tracepoint probes need, is mounted in a
/// private mount namespace of its own: nothing on the machine changes.
struct SwitchTrace {
    child: Child,
    lines: std::sync::mpsc::Receiver<String>,
}

impl SwitchTrace {
    fn start(tid: i32) -> SwitchTrace {
        let script = format!(
            "tracepoint:sched:sched_switch /args->prev_pid == {tid} || args->next_pid == {tid}/ \
             {{ printf(\"%llu %d %d %d %d\\n\", nsecs, args->prev_pid, args->prev_prio, args->next_pid, args->next_prio); }} \
             tracepoint:sched:sched_wakeup /args->pid == {tid}/ {{ printf(\"%llu\\n\", nsecs); }} \
             tracepoint:syscalls:sys_enter_sched_setattr /args->pid == {tid}/ {{ printf(\"%llu S\\n\", nsecs); }}"
        );
        let mut child = Command::new("unshare")
            .args(["--mount", "sh", "-c", "mount -t tracefs nodev /sys/kernel/tracing && exec bpftrace -e \"$0\""])
            .arg(script)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("unshare (util-linux)");
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            use std::io::BufRead;
            for line in std::io::BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let first = lines.recv_timeout(Duration::from_secs(60)).expect("bpftrace did not start (scripts/install-deps.sh installs it)");
        assert!(first.starts_with("Attaching"), "bpftrace: {first}");
        SwitchTrace { child, lines }
    }

    /// Stops the trace; the thread's stretches on a CPU, cut at the
    /// server's level changes ([`split_stretch`]), how long it waited to run
    /// after each wake-up, and (apart) how long it ran on at the low level
    /// after each demotion (monotonic ns).
    fn stop(mut self, tid: i32) -> (TraceDump, Vec<u64>) {
        // SAFETY: signalling our own child; bpftrace prints what it has and exits.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGINT) };
        let start = Instant::now();
        while self.child.try_wait().unwrap().is_none() {
            if start.elapsed() > Duration::from_secs(20) {
                let _ = self.child.kill();
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        // Kernel priorities below 100 are the real-time ones.
        let rt = |prio: i32| prio < 100;
        // bpftrace prints each CPU's events from that CPU's buffer: the
        // server's sched_setattr (on its own CPU) and the wake-ups can come
        // out after the switch events (on the thread's CPU) that follow them
        // in time. Seen in CI: a demotion's call printed after the switch
        // out that ended the stretch it cut, which was then read as high
        // from end to end (1.28 ms in a window). Events are put in time
        // order first (`nsecs` is one clock on every CPU).
        let mut events: Vec<(u64, Vec<i64>, bool)> = self
            .lines
            .try_iter()
            .filter_map(|line| {
                // Lines of ours start with the time; bpftrace's own do not.
                let ts = line.split_whitespace().next()?.parse::<u64>().ok()?;
                let f: Vec<i64> = line.split_whitespace().filter_map(|x| x.parse().ok()).collect();
                Some((ts, f, line.ends_with(" S")))
            })
            .collect();
        events.sort_by_key(|e| e.0);
        let sets: Vec<u64> = events.iter().filter(|e| e.2).map(|e| e.0).collect();
        let (mut stretches, mut waits, mut ran_on) = (Vec::new(), Vec::new(), Vec::new());
        let (mut on, mut woke) = (None, None);
        for (ts, f, set) in events {
            if set {
                continue;
            }
            if let [_] = f.as_slice() {
                woke = woke.or(Some(ts));
                continue;
            }
            let [_, prev, prev_prio, next, next_prio] = f.as_slice() else { continue };
            if *prev == tid as i64 {
                if let Some((start, began_high)) = on.take() {
                    let (parts, after_demotions) = split_stretch(start, ts, began_high, rt(*prev_prio as i32), &sets);
                    stretches.extend(parts);
                    ran_on.extend(after_demotions);
                }
            }
            if *next == tid as i64 {
                on = Some((ts, rt(*next_prio as i32)));
                if let Some(w) = woke.take() {
                    waits.push((w, ts.saturating_sub(w)));
                }
            }
        }
        (TraceDump { stretches, waits, sets }, ran_on)
    }
}

/// One time on the CPU, `[start, end)`, cut at the server's
/// `sched_setattr` calls inside it (`sets`): each call switches the
/// thread's level, from `began_high` on (a demotion at an exhaustion, and
/// the thread, not preemptible at once in a BH-disabled poll, runs on at
/// the low level; a replenishment that promotes it while it runs; both
/// in one stretch when a replenishment comes right after a demotion).
/// Returns the parts, the high ones that a call ended marked `demoted`,
/// and how long it ran at the low level after each demotion. With no call
/// inside, the switch events' priorities decide: high when either end was.
fn split_stretch(start: u64, end: u64, began_high: bool, ended_high: bool, sets: &[u64]) -> (Vec<Stretch>, Vec<u64>) {
    let calls: Vec<u64> = sets.iter().copied().filter(|&at| at > start && at < end).collect();
    if calls.is_empty() {
        return (vec![Stretch { start, end, high: began_high || ended_high, demoted: began_high && !ended_high }], Vec::new());
    }
    let (mut parts, mut ran_on) = (Vec::new(), Vec::new());
    let (mut high, mut from) = (began_high, start);
    for (i, to) in calls.iter().copied().chain([end]).enumerate() {
        let cut_by_a_call = i < calls.len();
        parts.push(Stretch { start: from, end: to, high, demoted: high && cut_by_a_call });
        if !high && i > 0 {
            ran_on.push(to - from);
        }
        high ^= cut_by_a_call;
        from = to;
    }
    (parts, ran_on)
}

#[test]
fn a_stretch_is_cut_at_every_level_change() {
    let parts = |began, ended, sets: &[u64]| {
        let (p, ran_on) = split_stretch(100, 200, began, ended, sets);
        (p.iter().map(|s| (s.start, s.end, s.high, s.demoted)).collect::<Vec<_>>(), ran_on)
    };
    // Demoted at 150, ran on 50 at the low level.
    assert_eq!(parts(true, false, &[150]), (vec![(100, 150, true, true), (150, 200, false, false)], vec![50]));
    // Promoted at 130.
    assert_eq!(parts(false, true, &[130]), (vec![(100, 130, false, false), (130, 200, true, false)], vec![]));
    // Demoted at 150 and promoted again at 165 while it ran: the 15 between
    // is not high (the old reading counted all 100 as high).
    assert_eq!(
        parts(true, true, &[90, 150, 165, 250]),
        (vec![(100, 150, true, true), (150, 165, false, false), (165, 200, true, false)], vec![15])
    );
    // Promoted and demoted within one stretch that began and ended low.
    assert_eq!(parts(false, false, &[120, 180]).0, vec![(100, 120, false, false), (120, 180, true, true), (180, 200, false, false)]);
    // No call inside: the ends decide.
    assert_eq!(parts(true, true, &[]).0, vec![(100, 200, true, false)]);
}

/// One window of the trace: its high-level execution, the demotions
/// (exhaustions the server reacted to) in it, and how long the thread
/// waited to run after the wake-ups of the period before it and of the
/// window itself.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct Window {
    start: u64,
    executed: u64,
    demotions: u64,
    waited: u64,
}

/// Every window of `len` within [from, to) that starts where a high
/// stretch starts (where the most execution a window can hold is found).
/// `waits`: (wake-up time, wait until it ran).
fn windows(stretches: &[Stretch], waits: &[(u64, u64)], len: u64, from: u64, to: u64) -> Vec<Window> {
    let high: Vec<Stretch> = stretches
        .iter()
        .filter(|s| s.high)
        .map(|s| Stretch { start: s.start.max(from), end: s.end.min(to), ..*s })
        .filter(|s| s.start < s.end)
        .collect();
    high.iter()
        .map(|w| {
            let inside = high.iter().filter(|s| s.end > w.start && s.start < w.start + len);
            Window {
                start: w.start,
                executed: inside.clone().map(|s| s.end.min(w.start + len) - s.start.max(w.start)).sum(),
                demotions: inside.filter(|s| s.demoted).count() as u64,
                waited: waits.iter().filter(|&&(at, _)| at + len >= w.start && at < w.start + len).map(|&(_, wait)| wait).sum(),
            }
        })
        .collect()
}

#[test]
fn windows_sum_exactly() {
    let st = |start, end, demoted| Stretch { start, end, high: true, demoted };
    let low = Stretch { start: 6, end: 9, high: false, demoted: false };
    let trace = [st(0, 3, false), low, st(5, 6, true), st(12, 20, true)];
    let waits = [(4, 1), (30, 2)];
    let most = |len, from, to| windows(&trace, &waits, len, from, to).iter().map(|w| w.executed).max().unwrap();
    // [12, 22) holds all of the last stretch; low stretches never count.
    assert_eq!(most(10, 0, 100), 8);
    // [0, 7) holds the first two, one of them cut by a demotion.
    // The wake-up at 4 lies in it; the one at 30 neither in it nor in the 7 before.
    assert_eq!(windows(&trace, &waits, 7, 0, 10)[0], Window { start: 0, executed: 4, demotions: 1, waited: 1 });
    // Only what lies in [from, to) counts.
    assert_eq!(most(10, 13, 100), 7);
}

/// One flood, the NAPI thread on the hog's CPU, under `policy` for 3 s:
/// the control document and the trace's 10 ms windows while the policy
/// held (a server's own span, which leaves
/// out the thread's time under its own policy before and after).
/// The trace's events around a window, for a failure's message: every
/// stretch (high or low), wake-up wait and `sched_setattr` from one
/// period before it to one after, relative to its start (us).
struct TraceDump {
    stretches: Vec<Stretch>,
    waits: Vec<(u64, u64)>,
    sets: Vec<u64>,
}

impl TraceDump {
    fn around(&self, w: &Window, len: u64) -> String {
        let near = |t: u64| t + len >= w.start && t < w.start + 2 * len;
        let rel = |t: u64| (t as i64 - w.start as i64) as f64 / 1e3;
        let mut out = String::new();
        for s in self.stretches.iter().filter(|s| near(s.start) || near(s.end)) {
            out += &format!(
                "\n  on {:.1}..{:.1} us {}{}",
                rel(s.start),
                rel(s.end),
                if s.high { "high" } else { "low" },
                if s.demoted { " demoted" } else { "" }
            );
        }
        for &(at, wait) in self.waits.iter().filter(|(at, _)| near(*at)) {
            out += &format!("\n  woke {:.1} us, waited {wait} ns", rel(at));
        }
        for &at in self.sets.iter().filter(|&&at| near(at)) {
            out += &format!("\n  sched_setattr {:.1} us", rel(at));
        }
        out
    }
}

fn napi_under_flood(napi: &Napi, cpu: &str, policy: &str) -> (serde_json::Value, Vec<Window>, TraceDump) {
    let trace = SwitchTrace::start(napi.tid);
    let mut flood = irqlab()
        .args(["traffic", "udp", "--from", "b", "--rate", "200k", "--duration", "6s"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    let from = irqlab_host::rt::monotonic_ns();
    let out = irqlab()
        .args(["control", "threads", "napi:irqlab-b", "--policy", policy, "--cpu", cpu, "--duration", "3s", "--json", "-"])
        .output()
        .unwrap();
    let to = irqlab_host::rt::monotonic_ns();
    let _ = flood.kill();
    let _ = flood.wait();
    let (dump, ran_on) = trace.stop(napi.tid);
    let (stretches, waits) = (&dump.stretches, &dump.waits);
    if let Some(max) = ran_on.iter().max() {
        eprintln!("{policy}: after {} demotions on the CPU, it ran on for at most {max} ns before it left", ran_on.len());
    }
    assert_eq!(out.status.code(), Some(0), "{policy}: {}", String::from_utf8_lossy(&out.stderr));
    let low: u64 = stretches.iter().filter(|s| !s.high && s.start >= from && s.end <= to).map(|s| s.end - s.start).sum();
    eprintln!("{policy}: {} stretches on the CPU, {low} ns of them at the low level", stretches.len());
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let (from, to) = match (doc["server"]["start_ns"].as_u64(), doc["server"]["end_ns"].as_u64()) {
        (Some(start), Some(end)) => (start, end),
        _ => (from, to),
    };
    let windows = windows(stretches, waits, 10_000_000, from, to);
    (doc, windows, dump)
}

/// The live POSIX sporadic server (budget 1 ms, period 10 ms, at most 2
/// pending replenishments, SCHED_FIFO 90 / SCHED_IDLE) holds the testbed's NAPI
/// thread, under a UDP flood, to its budget plus the reaction latency it
/// reports, in every 10 ms window of an independent bpftrace trace. The
/// same flood under plain SCHED_FIFO 90 first shows that the thread would
/// take more than the budget without the server (else the check proves
/// nothing).
#[test]
fn sporadic_server_holds_the_napi_thread_to_its_budget_under_a_flood() {
    if !live_tests_enabled("sporadic_server_holds_the_napi_thread_to_its_budget_under_a_flood") {
        return;
    }
    let online = std::fs::read_to_string("/sys/devices/system/cpu/online").unwrap();
    let cpu = online.trim().rsplit(['-', ',']).next().unwrap().to_string();
    if cpu == "0" {
        eprintln!("sporadic_server_holds_the_napi_thread_to_its_budget_under_a_flood: NOT CHECKED: needs 2 CPUs (one is hogged)");
        return;
    }
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let napi = Napi::up();
    let original = napi.attr();
    let _hog = Hog::on(&cpu);
    const BUDGET: u64 = 1_000_000;

    let most = |w: &[Window]| w.iter().map(|w| w.executed).max().unwrap_or(0);

    let (_, unserved, _) = napi_under_flood(&napi, &cpu, "fifo:90");
    eprintln!("SCHED_FIFO 90: most execution in a 10 ms window {} ns", most(&unserved));
    if most(&unserved) <= 2 * BUDGET {
        // Seen on this VM kind after hours of uptime: with a busy loop on
        // its CPU the NAPI thread stopped being woken at all (state S, 0 ms
        // in 3 s, at SCHED_FIFO 90 too) while the sender's datagrams were
        // dropped at the veth ring; the flood then loads nothing to serve.
        eprintln!(
            "sporadic_server_holds_the_napi_thread_to_its_budget_under_a_flood: NOT CHECKED: the flood kept the NAPI thread \
             only {} ns busy in its busiest 10 ms at SCHED_FIFO 90 (it must exceed 2 ms to test a 1 ms budget)",
            most(&unserved)
        );
        return;
    }

    let (doc, served, trace) = napi_under_flood(&napi, &cpu, "sporadic:1ms/10ms");
    let th = &doc["server"]["threads"][0];
    let reaction = &th["reaction"];
    eprintln!(
        "sporadic 1ms/10ms: most high-level execution in a 10 ms window {} ns; exhaustions {}, reaction p50/p99/max {}/{}/{} ns, \
         served per period p50/max {}/{} ns, lost events {}",
        most(&served),
        th["exhaustions"],
        reaction["p50_ns"],
        reaction["p99_ns"],
        reaction["max_ns"],
        th["served_per_period"]["p50_ns"],
        th["served_per_period"]["max_ns"],
        doc["server"]["lost_events"]
    );
    assert_eq!(doc["server"]["lost_events"], 0);
    assert!(th["exhaustions"].as_u64().unwrap() > 0, "the budget never ran out under the flood: {th}");
    // The server allows its budget in any window of one period, plus:
    // what the thread ran past each exhaustion in the window (at most the
    // reaction latency the server reports), and, since POSIX dates an
    // activation from the wake-up, how long the thread waited to run after
    // the wake-ups whose replenishments can fall in the window (those of
    // the period before it and of the window itself): a replenishment comes
    // back that much early (the premature replenishment of Stanovich et
    // al., RTAS 2010).
    let reaction_max = reaction["max_ns"].as_u64().unwrap();
    let bound = |w: &Window| BUDGET + w.demotions * reaction_max + w.waited;
    let tightest = served.iter().min_by_key(|w| bound(w).saturating_sub(w.executed));
    eprintln!("the window closest to its bound: {tightest:?}, bound {:?} ns", tightest.map(bound));
    let over: Vec<&Window> = served.iter().filter(|w| w.executed > bound(w)).collect();
    assert!(
        over.is_empty(),
        "{} windows hold more than the budget {BUDGET} ns + their demotions x reaction max {reaction_max} ns + the waits \
         after wake-ups, e.g. {:?}; the trace around it:{}",
        over.len(),
        over.iter().max_by_key(|w| w.executed),
        over.iter().max_by_key(|w| w.executed).map_or(String::new(), |w| trace.around(w, 10_000_000))
    );
    assert_eq!(napi.attr(), original, "not restored");
}

/// A killed sporadic server leaves the thread at whichever level it had and
/// pinned: both changes are leftovers, and `doctor --repair` restores its
/// own policy and CPUs.
#[test]
fn a_killed_sporadic_server_leaves_leftovers_that_doctor_repair_restores() {
    if !live_tests_enabled("a_killed_sporadic_server_leaves_leftovers_that_doctor_repair_restores") {
        return;
    }
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let napi = Napi::up();
    let (original, original_cpus) = (napi.attr(), irqlab_host::rt::affinity(napi.tid).unwrap());
    let mut child = irqlab()
        .args(["control", "threads", "napi:irqlab-b", "--policy", "sporadic:1ms/10ms", "--cpu", "0"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    napi.wait_for(|a| a != original, "under the server");
    std::thread::sleep(Duration::from_millis(300));
    let killed = Command::new("kill").args(["-9", &child.id().to_string()]).status().unwrap();
    assert!(killed.success());
    wait_at_most(&mut child, Duration::from_secs(5));
    assert_eq!(irqlab_host::rt::affinity(napi.tid).unwrap(), vec![0], "SIGKILL cannot have restored the CPUs");

    let status = irqlab().args(["control", "status", "--json", "-"]).output().unwrap();
    let doc: serde_json::Value = serde_json::from_slice(&status.stdout).unwrap();
    let kinds: Vec<&str> = doc["entries"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["object"]["thread"]["tid"] == napi.tid && e["state"] == "leftover")
        .map(|e| e["object"]["kind"].as_str().unwrap())
        .collect();
    assert!(kinds.contains(&"thread-sched") && kinds.contains(&"thread-affinity"), "{doc}");

    // The other way back (the deadline test uses `control revert --all`).
    let repair = irqlab().args(["doctor", "--repair", "--json", "-"]).output().unwrap();
    assert_eq!(repair.status.code(), Some(0), "{}", String::from_utf8_lossy(&repair.stderr));
    let said = String::from_utf8_lossy(&repair.stderr);
    assert!(said.contains(&format!("tid {}", napi.tid)) && said.contains("repaired:"), "doctor --repair said: {said}");
    let doctor: serde_json::Value = serde_json::from_slice(&repair.stdout).unwrap();
    let still = doctor["leftovers"].as_array().unwrap().iter().any(|l| l.as_str().unwrap().contains(&format!("tid {}", napi.tid)));
    assert!(!still, "doctor --repair still reports the leftover: {}", doctor["leftovers"]);
    assert_eq!(napi.attr(), original);
    assert_eq!(irqlab_host::rt::affinity(napi.tid).unwrap(), original_cpus);
}

/// The testbed device's NAPI instance as `control napi` lists it (netlink).
fn napi_listing() -> serde_json::Value {
    let out = irqlab().args(["control", "napi", "irqlab-b", "--json", "-"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    doc["napis"][0].clone()
}

fn netdev_budget() -> String {
    std::fs::read_to_string("/proc/sys/net/core/netdev_budget").unwrap().trim().to_string()
}

/// `control napi` on the testbed's device: the listing names the NAPI
/// instance's polling kthread; settings hold while the command runs and
/// are back after SIGINT, and after SIGKILL + `control revert --all`.
#[test]
fn napi_settings_hold_and_are_restored() {
    if !live_tests_enabled("napi_settings_hold_and_are_restored") {
        return;
    }
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let napi = Napi::up();
    let before = napi_listing();
    if before.is_null() {
        eprintln!("napi_settings_hold_and_are_restored: NOT CHECKED: no per-NAPI netlink view on this kernel");
        return;
    }
    assert_eq!(before["pid"], napi.tid, "the listing's thread is not the testbed's NAPI kthread: {before}");
    let budget = netdev_budget();
    let hold = || {
        irqlab()
            .args(["control", "napi", "irqlab-b", "--defer-hard-irqs", "2", "--gro-flush-timeout", "20us", "--budget", "64"])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    // The settings are applied one after another (the NAPI's over netlink,
    // then the budget sysctl): wait for all three, not just the first (CI
    // once read the budget between the two).
    let wait_held = || {
        let start = Instant::now();
        loop {
            let now = napi_listing();
            if now["defer_hard_irqs"] == 2 && now["gro_flush_timeout_ns"] == 20_000 && netdev_budget() == "64" {
                break;
            }
            assert!(start.elapsed() < Duration::from_secs(10), "the settings never all showed: {now}, netdev_budget {}", netdev_budget());
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    let assert_restored = |how: &str| {
        let now = napi_listing();
        for key in ["defer_hard_irqs", "gro_flush_timeout_ns", "irq_suspend_timeout_ns", "threaded"] {
            assert_eq!(now[key], before[key], "{key} not restored after {how}: {now}");
        }
        assert_eq!(netdev_budget(), budget, "netdev_budget not restored after {how}");
    };

    let mut child = hold();
    wait_held();
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    wait_at_most(&mut child, Duration::from_secs(10));
    assert_restored("SIGINT");

    let mut child = hold();
    wait_held();
    assert!(Command::new("kill").args(["-9", &child.id().to_string()]).status().unwrap().success());
    wait_at_most(&mut child, Duration::from_secs(5));
    assert_eq!(napi_listing()["defer_hard_irqs"], 2, "SIGKILL cannot have restored it");
    let status = irqlab().args(["control", "status", "--json", "-"]).output().unwrap();
    let doc: serde_json::Value = serde_json::from_slice(&status.stdout).unwrap();
    let kinds: Vec<&str> = doc["entries"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["state"] == "leftover")
        .map(|e| e["object"]["kind"].as_str().unwrap())
        .collect();
    assert!(kinds.contains(&"napi") && kinds.contains(&"file"), "{doc}");
    let revert = irqlab().args(["control", "revert", "--all"]).output().unwrap();
    assert_eq!(revert.status.code(), Some(0), "{}", String::from_utf8_lossy(&revert.stderr));
    assert_restored("SIGKILL and revert --all");
}

fn is_bh_budget_level(a: SchedAttr) -> bool {
    matches!(a, SchedAttr::Fifo { priority: 50 } | SchedAttr::Idle)
}

fn read_json(path: &std::path::Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))).unwrap()
}

/// `control bh-budget` on the testbed's NAPI kthread (CPU 1, a SCHED_OTHER
/// busy loop there, the flood sent from CPU 0) for 4 s: a period per ms in
/// the trace, every threshold within [min, period], the kthread dropped only
/// once it had run its threshold (C(k) >= T(k) in a throttled period), and
/// its scheduling back at the end. How near the BH time stays to the
/// threshold is printed, not asserted: the poll in progress at the drop runs
/// to its end (bottom halves off), SCHED_IDLE still runs the kthread on a
/// CPU the busy loop leaves, and this VM's host stops vCPUs for ms.
#[test]
fn bh_budget_holds_the_napi_thread_to_thresholds_under_a_flood() {
    if !live_tests_enabled("bh_budget_holds_the_napi_thread_to_thresholds_under_a_flood") {
        return;
    }
    if irqlab_host::rt::online_cpus().unwrap().len() < 2 {
        eprintln!("bh_budget_holds_the_napi_thread_to_thresholds_under_a_flood: NOT CHECKED: needs 2 CPUs");
        return;
    }
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let napi = Napi::up();
    let original = napi.attr();
    let original_cpus = irqlab_host::rt::affinity(napi.tid).unwrap();
    let _hog = Hog::on("1");
    let mut flood = irqlab()
        .args(["traffic", "udp", "--from", "b", "--interval", "2us", "--port", "9", "--cpu", "0", "--duration", "7s"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    let dir = tempfile::tempdir().unwrap();
    let (trace_path, summary_path) = (dir.path().join("trace.json"), dir.path().join("summary.json"));
    let out = irqlab()
        .args(["control", "bh-budget", "irqlab-b", "--cpu", "1", "--duration", "4s", "--trace"])
        .arg(&trace_path)
        .arg("--json")
        .arg(&summary_path)
        .output()
        .unwrap();
    let _ = flood.kill();
    let _ = flood.wait();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    eprintln!("{}", String::from_utf8_lossy(&out.stdout));
    assert_eq!(napi.attr(), original, "scheduling not restored");
    assert_eq!(irqlab_host::rt::affinity(napi.tid).unwrap(), original_cpus, "CPUs not restored");
    let trace = read_json(&trace_path);
    let summary = read_json(&summary_path);
    assert_eq!(trace["schema"], "irqlab/bh-budget-trace/v1");
    assert_eq!((trace["complete"].as_bool(), summary["complete"].as_bool()), (Some(true), Some(true)));
    let rows = trace["periods"].as_array().unwrap();
    // One per ms; a vCPU stall restarts the grid, so a few may be missing.
    assert!((3_000..=4_001).contains(&rows.len()), "{} periods in 4 s", rows.len());
    assert_eq!(summary["figures"]["periods"], rows.len());
    let (min, period) = (50_000.0, 1_000_000.0);
    let (mut beyond, mut throttled, mut reactions, mut revised) = (0, 0, Vec::new(), 0usize);
    for r in rows {
        let (t, t_next, c) = (r["t_ns"].as_f64().unwrap(), r["t_next_ns"].as_f64().unwrap(), r["c_ns"].as_f64().unwrap());
        assert!((min..=period).contains(&t) && (min..=period).contains(&t_next), "threshold out of [min, period]: {r}");
        if r["throttled"] == true {
            throttled += 1;
            // Dropped only once it had run its threshold, by the count the
            // controller had at the drop (the count read at the period's
            // end can come out lower when the monitor had extrapolated a
            // run whose end it saw late: counted in `revised`).
            let counted = r["counted_at_drop_ns"].as_f64().unwrap();
            assert!(counted >= t, "throttled before reaching its threshold: {r}");
            revised += usize::from(c < counted);
            let reaction = r["reaction_ns"].as_f64().unwrap();
            reactions.push(reaction);
            if c > t + reaction + r["ran_on_ns"].as_f64().unwrap_or(0.0) + 1_000.0 {
                beyond += 1;
            }
        } else if c > t + 1_000.0 {
            beyond += 1;
        }
    }
    // The kthread under this flood reaches its threshold in most periods
    // (2700-3900 of 4000 in four runs by hand, 2026-11-25): a controller
    // that never heard the kernel's budget signal would throttle none.
    assert!(throttled >= rows.len() / 10, "throttled in {throttled} of {} periods", rows.len());
    reactions.sort_by(f64::total_cmp);
    let q = |f: f64| reactions.get(((reactions.len() as f64 * f) as usize).min(reactions.len().saturating_sub(1))).copied().unwrap_or(0.0);
    eprintln!(
        "bh-budget under a flood: {} periods, {throttled} throttled ({revised} with the period's count below the count at the drop); reaction p50/p99/max {:.0}/{:.0}/{:.0} ns; \
         then on the CPU (rest of the poll) p50/p99/max {}/{}/{} ns; {beyond} periods ({:.1}%) ran beyond T(k) + reaction + rest of \
         poll (by more than 1 us); BH per ms mean {} range {}..{}; {} packets/s",
        rows.len(),
        q(0.5),
        q(0.99),
        q(1.0),
        summary["figures"]["ran_on"]["p50_ns"],
        summary["figures"]["ran_on"]["p99_ns"],
        summary["figures"]["ran_on"]["max_ns"],
        100.0 * beyond as f64 / rows.len() as f64,
        summary["figures"]["bh_per_ms"]["mean_ns"],
        summary["figures"]["bh_per_ms"]["min_ns"],
        summary["figures"]["bh_per_ms"]["max_ns"],
        summary["figures"]["packets_per_s"]
    );
}

/// Ctrl-C mid-run: exit 1, the trace and the summary written with
/// `complete: false`, the kthread's scheduling restored.
#[test]
fn bh_budget_after_sigint_writes_an_incomplete_trace_and_restores() {
    if !live_tests_enabled("bh_budget_after_sigint_writes_an_incomplete_trace_and_restores") {
        return;
    }
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let napi = Napi::up();
    let original = napi.attr();
    let dir = tempfile::tempdir().unwrap();
    let (trace_path, summary_path) = (dir.path().join("trace.json"), dir.path().join("summary.json"));
    let mut child = irqlab()
        // A --duration Ctrl-C cuts short: incomplete (`irqlab_host::run_end`).
        .args(["control", "bh-budget", "irqlab-b", "--duration", "600s", "--trace"])
        .arg(&trace_path)
        .arg("--json")
        .arg(&summary_path)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    napi.wait_for(is_bh_budget_level, "under bh-budget");
    std::thread::sleep(Duration::from_millis(1_000));
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let status = wait_at_most(&mut child, Duration::from_secs(10));
    assert_eq!(status.code(), Some(1), "a --duration Ctrl-C cut short exits 1");
    assert_eq!(napi.attr(), original, "not restored after SIGINT");
    let trace = read_json(&trace_path);
    assert_eq!(trace["complete"], false);
    assert!(!trace["periods"].as_array().unwrap().is_empty(), "no period in 1 s");
    let summary = read_json(&summary_path);
    assert_eq!((summary["complete"].as_bool(), summary["ended_by"].as_str()), (Some(false), Some("stopped")));
}

/// SIGKILL mid-run: `control status` names the kthread's scheduling as a
/// leftover, `control revert --all` restores it.
#[test]
fn bh_budget_after_sigkill_leaves_a_leftover_that_revert_restores() {
    if !live_tests_enabled("bh_budget_after_sigkill_leaves_a_leftover_that_revert_restores") {
        return;
    }
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let napi = Napi::up();
    let original = napi.attr();
    let mut child = irqlab().args(["control", "bh-budget", "irqlab-b"]).stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
    napi.wait_for(is_bh_budget_level, "under bh-budget");
    let owner = child.id();
    assert!(Command::new("kill").args(["-9", &owner.to_string()]).status().unwrap().success());
    wait_at_most(&mut child, Duration::from_secs(5));
    let status = irqlab().args(["control", "status", "--json", "-"]).output().unwrap();
    let doc: serde_json::Value = serde_json::from_slice(&status.stdout).unwrap();
    let leftover = doc["entries"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["object"]["thread"]["tid"] == napi.tid && e["object"]["kind"] == "thread-sched")
        .unwrap_or_else(|| panic!("no entry for tid {}: {doc}", napi.tid));
    assert_eq!(leftover["state"], "leftover", "{leftover}");
    assert_eq!(leftover["owner"]["pid"], owner);
    let revert = irqlab().args(["control", "revert", "--all"]).output().unwrap();
    assert_eq!(revert.status.code(), Some(0), "{}", String::from_utf8_lossy(&revert.stderr));
    assert_eq!(napi.attr(), original, "revert --all did not restore it");
}

/// Two threads of this test named `irqlab-pingpong` that hand a token back
/// and forth until dropped: each hand-over is a switch out and in of both,
/// tens of thousands a second, for a monitor to record.
struct PingPong {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl PingPong {
    const NAME: &'static str = "irqlab-pingpong";

    fn start() -> PingPong {
        use std::sync::atomic::{AtomicBool, Ordering};
        use std::sync::mpsc::sync_channel;
        let stop = std::sync::Arc::new(AtomicBool::new(false));
        let (to_b, from_a) = sync_channel::<u64>(0);
        let (to_a, from_b) = sync_channel::<u64>(0);
        let s = stop.clone();
        let a = std::thread::Builder::new()
            .name(Self::NAME.into())
            .spawn(move || {
                let mut n = 0;
                while !s.load(Ordering::Relaxed) && to_b.send(n).is_ok() {
                    let Ok(back) = from_b.recv() else { break };
                    n = back + 1;
                }
            })
            .unwrap();
        let b = std::thread::Builder::new()
            .name(Self::NAME.into())
            .spawn(move || {
                while let Ok(n) = from_a.recv() {
                    if to_a.send(n).is_err() {
                        break;
                    }
                }
            })
            .unwrap();
        // A thread takes its name as it starts: wait until both have.
        let since = Instant::now();
        while pingpong_tids().len() < 2 {
            assert!(since.elapsed() < Duration::from_secs(5), "the ping-pong threads did not start");
            std::thread::sleep(Duration::from_millis(10));
        }
        PingPong { stop, threads: vec![a, b] }
    }
}

impl Drop for PingPong {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// A sporadic server whose monitor lost ring events served blind for a
/// while: its run is incomplete (exit 1, `complete: false`, the lost
/// events counted), by the one end-of-run rule. The ring is shrunk to a
/// page (IRQLAB_RING_BYTES) so that two threads switching tens of
/// thousands of times a second overflow it between the server's lazy
/// wake-ups on any machine; the loss is the kernel's own (a failed
/// `bpf_ringbuf_reserve`), not injected.
#[test]
fn a_sporadic_server_that_lost_ring_events_reports_its_run_incomplete() {
    if !live_tests_enabled("a_sporadic_server_that_lost_ring_events_reports_its_run_incomplete") {
        return;
    }
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let pingpong = PingPong::start();
    let before: Vec<SchedAttr> = pingpong_tids().iter().map(|&t| sched::get(t).unwrap()).collect();
    let out = irqlab()
        .args(["control", "threads", &format!("comm:{}", PingPong::NAME), "--policy", "sporadic:1ms/100ms", "--duration", "2s"])
        .args(["--json", "-"])
        .env(irqlab_host::bpf::RING_BYTES_VAR, "4096")
        .output()
        .unwrap();
    let after: Vec<SchedAttr> = pingpong_tids().iter().map(|&t| sched::get(t).unwrap()).collect();
    drop(pingpong);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {stderr}"));
    let server = &doc["server"];
    eprintln!(
        "lost events {}, wake-ups {}, exhaustions {:?}, ended by {}, complete {}",
        server["lost_events"],
        server["wakeups"],
        server["threads"].as_array().unwrap().iter().map(|t| t["exhaustions"].clone()).collect::<Vec<_>>(),
        doc["ended_by"],
        doc["complete"]
    );
    assert_eq!(doc["threads"].as_array().unwrap().len(), 2, "both ping-pong threads served: {doc}");
    assert!(server["lost_events"].as_u64().unwrap() > 0, "a one-page ring lost nothing: {server}");
    assert_eq!(doc["ended_by"], "duration");
    assert_eq!(doc["complete"], false, "events were lost");
    assert_eq!(out.status.code(), Some(1), "an incomplete run exits 1: {stderr}");
    assert_eq!(after, before, "the threads' policies restored");
}

fn pingpong_tids() -> Vec<i32> {
    let tasks = std::fs::read_dir("/proc/self/task").unwrap();
    let mut tids: Vec<i32> = tasks
        .filter_map(|t| t.ok()?.file_name().to_str()?.parse().ok())
        .filter(|tid| std::fs::read_to_string(format!("/proc/self/task/{tid}/comm")).is_ok_and(|c| c.trim() == PingPong::NAME))
        .collect();
    tids.sort_unstable();
    tids
}
