//! `irqlab control idletime` (issue 21): background processes held back
//! until the disk (or a network device's egress) has had no foreground
//! request for the preemption interval. Bad input exits 2 naming it. Live parts
//! (IRQLAB_LIVE_TESTS=1, as root): the gate follows the interval on a real
//! disk (O_DIRECT readers from `irqlab load reads`), and every change is
//! undone after a normal end, after Ctrl-C, and after kill -9 by
//! `irqlab control revert --all`.

mod common;

use common::live::{disk_resource, enabled_as_root, entries_of, scratch_on_disk, start_with_stderr, wait_at_most, wait_for_line};
use common::{irqlab, json, path_str};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::sync::Mutex;
use std::time::Duration;

/// The live tests share the disk and the journal.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn run_idletime(args: &[&str]) -> (Option<i32>, String) {
    let out = irqlab().args(["control", "idletime"]).args(args).output().unwrap();
    (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn bad_input_exits_2_naming_it() {
    let me = std::process::id().to_string();
    let pid_me = format!("pid:{me}");
    for (args, says) in [
        (vec!["--resource", "disk:nosuchdisk0", "--foreground", "pid:1", "--background", "pid:1", "--interval", "1ms"], "disk:nosuchdisk0"),
        (vec!["--resource", "tape", "--foreground", "pid:1", "--background", "pid:1", "--interval", "1ms"], "--resource tape"),
        (vec!["--resource", "net:nosuchdev0", "--foreground", "pid:1", "--background", "pid:1", "--interval", "1ms"], "net:nosuchdev0"),
        (vec!["--resource", "net:", "--foreground", "pid:1", "--background", "pid:1", "--interval", "1ms"], "--resource net:"),
        (
            vec!["--resource", "net:lo", "--gate", "throttle", "--foreground", "pid:1", "--background", "pid:1", "--interval", "1ms"],
            "--gate throttle",
        ),
        (vec!["--resource", "disk", "--foreground", "pid:1", "--background", "pid:1", "--interval=-5ms"], "--interval"),
        (
            vec!["--resource", "disk", "--foreground", "comm:no-such-process-xyz", "--background", "pid:1", "--interval", "1ms"],
            "--foreground comm:no-such-process-xyz matches no process",
        ),
        (
            vec!["--resource", "disk", "--foreground", &pid_me, "--background", "pid:2147483647", "--interval", "1ms"],
            "--background pid:2147483647 matches no process",
        ),
        (vec!["--resource", "disk", "--foreground", "fio", "--background", "pid:1", "--interval", "1ms"], "--foreground fio"),
        (
            vec!["--resource", "disk", "--foreground", "/nonexistent/cgroup", "--background", "pid:1", "--interval", "1ms"],
            "not a cgroup directory",
        ),
        (vec!["--resource", "disk", "--foreground", "pid:1", "--interval", "1ms"], "--background"),
        (vec!["--resource", "disk", "--foreground", "pid:1", "--background", "--interval", "1ms"], "no SELECTOR and no command"),
        (
            vec!["--resource", "disk", "--foreground", "pid:1", "--background", "pid:1", "--interval", "1ms", "--", "true"],
            "name the background one way",
        ),
    ] {
        let (code, err) = run_idletime(&args);
        assert_eq!(code, Some(2), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
    }
    // An interval of 0 is allowed, and said to be plain priority (here the
    // run stops at the missing disk, after the note).
    let (code, err) =
        run_idletime(&["--resource", "disk:nosuchdisk0", "--foreground", "pid:1", "--background", "pid:1", "--interval", "0"]);
    assert!(err.contains("--interval 0: a plain two-class priority"), "{err}");
    assert_eq!(code, Some(2), "{err}");
}

/// A file of `mib` MiB on the disk, synced so reads reach the device.
fn data_file(dir: &Path, name: &str, mib: usize) -> PathBuf {
    irqlab_measure::load::write_data_file(dir, name, mib).unwrap()
}

/// `irqlab load reads` on `file`: random 4 KiB reads `gap` apart, or
/// sequential 256 KiB reads back to back.
fn reader(file: &Path, gap: Option<&str>, seconds: u32) -> Child {
    let mut cmd = irqlab();
    cmd.args(["load", "reads", "--file", path_str(file), "--duration", &format!("{seconds}s")]);
    match gap {
        Some(g) => cmd.args(["--gap", g]),
        None => cmd.args(["--sequential", "--block", "256k"]),
    };
    cmd.stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap()
}

fn scratch() -> tempfile::TempDir {
    scratch_on_disk("irqlab-idletime-test")
}

fn live(test: &str) -> bool {
    enabled_as_root(test)
}

fn idletime_entries() -> Vec<serde_json::Value> {
    entries_of("control idletime")
}

/// The gate's cgroups left in the v1 freezer and blkio hierarchies or the
/// v2 one (`/sys/fs/cgroup` on a v2-only machine).
fn no_idletime_cgroups() -> Vec<String> {
    let mut left = Vec::new();
    for h in ["/sys/fs/cgroup/freezer", "/sys/fs/cgroup/blkio", "/sys/fs/cgroup/unified", "/sys/fs/cgroup"] {
        if let Ok(dir) = std::fs::read_dir(h) {
            left.extend(dir.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).filter(|n| n.starts_with("irqlab-idletime-")));
        }
    }
    left
}

/// Whether the freezer gate works in the v2 hierarchy here (no v1 freezer).
fn freezer_is_v2() -> bool {
    !std::fs::read_to_string("/proc/self/mountinfo").unwrap().lines().any(|l| l.contains(" - cgroup ") && l.ends_with(",freezer"))
}

/// The cgroup the freezer gate moves `pid` between: its v1 freezer
/// cgroup, or on a v2-only machine its v2 cgroup.
fn freezer_cgroup(pid: u32) -> String {
    let text = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap();
    let line = if freezer_is_v2() { "0::" } else { ":freezer:" };
    text.lines().find_map(|l| l.split_once(line).map(|(_, p)| p.to_string())).unwrap_or_else(|| panic!("no {line} line in {text}"))
}

#[test]
fn the_gate_follows_the_interval_on_a_real_disk() {
    if !live("the_gate_follows_the_interval_on_a_real_disk") {
        return;
    }
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let dir = scratch();
    let (fg_file, bg_file) = (data_file(dir.path(), "fg", 64), data_file(dir.path(), "bg", 256));
    let mut reports = Vec::new();
    // p below the foreground's inter-arrival time (a read every ~2.2 ms):
    // background runs in the gaps. p above it: background stalls (the
    // dissertation's landmark), whatever the gate.
    for (interval, gate) in [("500us", "freezer"), ("500us", "throttle"), ("20ms", "freezer")] {
        let mut fg = reader(&fg_file, Some("2ms"), 8);
        std::thread::sleep(Duration::from_millis(300));
        let out = dir.path().join(format!("report-{interval}-{gate}.json"));
        // The command notes its own scheduling policy first: the
        // controller's thread starts it, and its SCHED_FIFO 90 must not
        // pass on (SCHED_RESET_ON_FORK).
        let policy_file = dir.path().join(format!("policy-{interval}-{gate}"));
        let bg_cmd = format!(
            "grep -m1 '^policy' /proc/$$/sched > {0}.part && mv {0}.part {0}; exec {1} load reads --file {2} --sequential --block 256k --duration 60s",
            path_str(&policy_file),
            env!("CARGO_BIN_EXE_irqlab"),
            path_str(&bg_file)
        );
        let status = irqlab()
            .args([
                "control",
                "idletime",
                "--resource",
                &disk_resource(),
                "--foreground",
                &format!("pid:{}", fg.id()),
                "--interval",
                interval,
            ])
            .args(["--gate", gate, "--duration", "3s", "--json", path_str(&out), "--background", "--", "sh", "-c", &bg_cmd])
            .status()
            .unwrap();
        let _ = fg.kill();
        let _ = fg.wait();
        assert!(status.success(), "p = {interval}, {gate}: {status}");
        let r = json(&out);
        eprintln!(
            "p = {interval}, {gate}: fg {} completed ({} taken when the disk was idle, {} of them late), bg {:.1} MB/s, gate open {:.2}, \
             closes {}, reaction p50 {} ns, counters {}",
            r["foreground"]["completed"],
            r["foreground"]["completions_disk_idle"],
            r["foreground"]["completions_late"],
            r["background"]["bytes_per_s"].as_f64().unwrap() / 1e6,
            r["gate"]["open_fraction"],
            r["gate"]["closes"],
            r["gate"]["close_reaction"]["p50_ns"],
            r["counters"]
        );
        assert_eq!(r["complete"], true, "{r}");
        assert!(r["foreground"]["completed"].as_u64().unwrap() > 300, "the foreground read: {r}");
        // At p = 20 ms the gate is shut from the first foreground read
        // on, and the command may be frozen before its first line runs.
        match std::fs::read_to_string(&policy_file) {
            Ok(policy) => {
                assert_eq!(
                    policy.split(':').nth(1).map(str::trim),
                    Some("0"),
                    "p = {interval}: the background command's policy (0: SCHED_OTHER): {policy}"
                )
            }
            Err(e) => assert!(interval == "20ms", "p = {interval}: the background command never noted its policy: {e}"),
        }
        reports.push(r);
        assert!(idletime_entries().is_empty(), "journal after p = {interval}: {:?}", idletime_entries());
        assert!(no_idletime_cgroups().is_empty(), "{:?}", no_idletime_cgroups());
    }
    for r in &reports[..2] {
        let g = &r["gate"];
        // Closed at each foreground burst, opened again after each interval.
        assert!(g["closes"].as_u64().unwrap() > 100 && g["opens"].as_u64().unwrap() > 100, "{g}");
        assert!(r["counters"]["P[t]"].as_u64().unwrap() > 100 && r["counters"]["B[f]"].as_u64().unwrap() > 100, "{}", r["counters"]);
        // Of each foreground cycle (a 2 ms gap plus the read), the gate is
        // closed for the interval (0.5 ms) and its opening's lateness (p99
        // under 1 ms here): open about half the time or more (85-89% on
        // this VM). A foreground completion that ran no BPF program once
        // held it closed for a second (open 16% in a CI run), until the
        // disk's own in-flight count was asked.
        assert!(g["open_fraction"].as_f64().unwrap() > 0.3, "{g}");
    }
    let bg = |r: &serde_json::Value| r["background"]["bytes_per_s"].as_f64().unwrap();
    let (short, long) = (&reports[0], &reports[2]);
    assert!(long["gate"]["open_fraction"].as_f64().unwrap() < 0.2, "p = 20ms: {}", long["gate"]);
    assert!(bg(short) > 3.0 * bg(long), "background with p = 500us {} against 20ms {}", bg(short), bg(long));
}

/// Starts the controller on an existing background process; returns it
/// once the gate has closed at least once (stderr of --verbose).
fn controller_on(fg: u32, bg: u32, out: &Path) -> (Child, std::sync::mpsc::Receiver<String>) {
    let args: Vec<String> = [
        "control",
        "idletime",
        "--resource",
        &disk_resource(),
        "--interval",
        "50ms",
        "--duration",
        "600s",
        "--verbose",
        "--json",
        path_str(out),
    ]
    .into_iter()
    .map(String::from)
    .chain(["--foreground".into(), format!("pid:{fg}"), "--background".into(), format!("pid:{bg}")])
    .collect();
    let args: Vec<&std::ffi::OsStr> = args.iter().map(|a| a.as_ref()).collect();
    let (child, rx) = start_with_stderr(&args);
    // 30 s: a 6.1-rt guest under emulation (TCG), its host busy, had
    // printed nothing after 10 s (the fresh-clone CI of 2026-11-29).
    wait_for_line(&rx, "gate closed", Duration::from_secs(30));
    (child, rx)
}

#[test]
fn ctrl_c_and_kill_9_leave_nothing_behind() {
    if !live("ctrl_c_and_kill_9_leave_nothing_behind") {
        return;
    }
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let dir = scratch();
    let (fg_file, bg_file) = (data_file(dir.path(), "fg", 64), data_file(dir.path(), "bg", 256));
    let mut fg = reader(&fg_file, Some("2ms"), 60);
    let mut bg = reader(&bg_file, None, 12);
    let home = freezer_cgroup(bg.id());

    // Ctrl-C: the report is written, marked incomplete, and everything is back.
    let out = dir.path().join("ctrl-c.json");
    let (mut ctl, _rx) = controller_on(fg.id(), bg.id(), &out);
    assert!(freezer_cgroup(bg.id()).starts_with("/irqlab-idletime-"), "moved behind the gate");
    // SAFETY: signalling our own child.
    unsafe { libc::kill(ctl.id() as i32, libc::SIGINT) };
    let status = wait_at_most(&mut ctl, Duration::from_secs(10));
    assert_eq!(status.code(), Some(1), "its --duration cut short: not complete");
    let r = json(&out);
    assert_eq!(r["complete"], false);
    assert_eq!(r["ended_by"], "stopped");
    assert!(idletime_entries().is_empty(), "{:?}", idletime_entries());
    assert_eq!(freezer_cgroup(bg.id()), home, "back in its own cgroup");
    assert!(no_idletime_cgroups().is_empty());

    // kill -9 while the gate holds the background frozen: the leftovers are
    // named, and `control revert --all` thaws it and puts it back.
    let out = dir.path().join("kill.json");
    let (mut ctl, _rx) = controller_on(fg.id(), bg.id(), &out);
    ctl.kill().unwrap();
    ctl.wait().unwrap();
    let left = idletime_entries();
    let objects: Vec<String> = left.iter().map(|e| e["object"].to_string()).collect();
    assert!(left.iter().all(|e| e["state"] == "leftover"), "{left:?}");
    if freezer_is_v2() {
        // v2: the cgroup (cgroup.freeze), the process moved into it.
        assert!(objects.iter().any(|o| o.contains("\"cgroup\"") && o.contains("/sys/fs/cgroup/irqlab-idletime-")), "{objects:?}");
        assert!(objects.iter().any(|o| o.contains("cgroup2-member")), "{objects:?}");
    } else {
        assert!(objects.iter().any(|o| o.contains("cgroup") && o.contains("freezer/irqlab-idletime-")), "{objects:?}");
        assert!(objects.iter().any(|o| o.contains("cgroup-member") && o.contains("freezer")), "{objects:?}");
    }
    let named = String::from_utf8_lossy(&irqlab().args(["control", "status"]).output().unwrap().stdout).into_owned();
    assert!(named.contains("irqlab-idletime-"), "control status names the gate's cgroup: {named}");
    let status_text = irqlab().args(["control", "status"]).output().unwrap();
    assert!(String::from_utf8_lossy(&status_text.stdout).contains("LEFTOVER"));
    let revert = irqlab().args(["control", "revert", "--all"]).output().unwrap();
    assert!(revert.status.success(), "{}", String::from_utf8_lossy(&revert.stderr));
    assert!(idletime_entries().is_empty(), "{:?}", idletime_entries());
    assert_eq!(freezer_cgroup(bg.id()), home);
    assert!(no_idletime_cgroups().is_empty(), "{:?}", no_idletime_cgroups());
    // Thawed: the background reader finishes its 12 s and exits by itself.
    let status = wait_at_most(&mut bg, Duration::from_secs(30));
    assert!(status.success(), "{status}");
    let _ = fg.kill();
    let _ = fg.wait();
}

/// `irqlab load sends` to testbed host a (UDP through irqlab-a): at
/// intensity `i`, or greedy.
fn sender(port: u16, intensity: Option<&str>, seconds: u32) -> Child {
    let mut cmd = irqlab();
    cmd.args(["load", "sends", "--to", "a", "--port", &port.to_string(), "--sndbuf", "16k", "--duration", &format!("{seconds}s")]);
    if let Some(i) = intensity {
        cmd.args(["--intensity", i]);
    }
    cmd.stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap()
}

#[test]
fn the_gate_follows_the_interval_on_a_link() {
    if !live("the_gate_follows_the_interval_on_a_link") {
        return;
    }
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let bed = irqlab_host::testbed::Testbed::up().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut reports = Vec::new();
    // The foreground sends for 30 ms of every 100 ms: p = 1 ms lets the
    // background send in the other 70 ms, p = 80 ms stalls it.
    for interval in ["1ms", "80ms"] {
        let mut fg = sender(9001, Some("0.3"), 8);
        let mut bg = sender(9002, None, 8);
        std::thread::sleep(Duration::from_millis(300));
        let out = dir.path().join(format!("net-{interval}.json"));
        let (fg_sel, bg_sel) = (format!("pid:{}", fg.id()), format!("pid:{}", bg.id()));
        let status = irqlab()
            .args(["control", "idletime", "--resource", "net:irqlab-a", "--foreground", &fg_sel, "--background", &bg_sel])
            .args(["--interval", interval, "--duration", "3s", "--json", path_str(&out)])
            .status()
            .unwrap();
        for c in [&mut fg, &mut bg] {
            let _ = c.kill();
            let _ = c.wait();
        }
        assert!(status.success(), "p = {interval}: {status}");
        let r = json(&out);
        eprintln!(
            "net p = {interval}: fg {} packets, bg {:.1} Mb/s, gate open {:.2}, closes {}, reaction p50 {} ns, counters {}",
            r["foreground"]["completed"],
            r["background"]["bytes_per_s"].as_f64().unwrap() * 8.0 / 1e6,
            r["gate"]["open_fraction"],
            r["gate"]["closes"],
            r["gate"]["close_reaction"]["p50_ns"],
            r["counters"]
        );
        assert_eq!(r["complete"], true, "{r}");
        assert_eq!(r["resource"]["kind"], "net", "{r}");
        assert!(r["foreground"]["completed"].as_u64().unwrap() > 1000, "the foreground sent: {r}");
        reports.push(r);
        assert!(idletime_entries().is_empty(), "journal after p = {interval}: {:?}", idletime_entries());
        assert!(no_idletime_cgroups().is_empty(), "{:?}", no_idletime_cgroups());
    }
    let (short, long) = (&reports[0], &reports[1]);
    // Closed at each foreground burst (about 30 in 3 s), opened after each interval.
    assert!(short["gate"]["closes"].as_u64().unwrap() >= 15 && short["counters"]["P[t]"].as_u64().unwrap() >= 15, "{short}");
    assert!(short["gate"]["open_fraction"].as_f64().unwrap() > 0.3, "{}", short["gate"]);
    assert!(long["gate"]["open_fraction"].as_f64().unwrap() < 0.2, "p = 80ms: {}", long["gate"]);
    let bg = |r: &serde_json::Value| r["background"]["bytes_per_s"].as_f64().unwrap();
    assert!(bg(short) > 3.0 * bg(long), "background with p = 1ms {} against 80ms {}", bg(short), bg(long));
    drop(bed);
}

/// The qdisc right below irqlab-a's token bucket (whose handle the
/// kernel numbers from 8000:), from `tc qdisc show ... invisible`.
fn below_the_bucket() -> String {
    let out = std::process::Command::new("tc").args(["qdisc", "show", "dev", "irqlab-a", "invisible"]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.lines().find(|l| l.contains(" parent 80")).unwrap_or("").to_string()
}

/// A token bucket on irqlab-a for one test: on every way out (a failed
/// assertion too) the leftovers of a killed controller are reverted and
/// the bucket taken off, so the tests after see the plain link.
struct Bucket;

impl Bucket {
    fn on_irqlab_a() -> Bucket {
        let tbf = std::process::Command::new("tc")
            .args(["qdisc", "replace", "dev", "irqlab-a", "root", "tbf", "rate", "100mbit", "burst", "3000", "latency", "200ms"])
            .status()
            .unwrap();
        assert!(tbf.success());
        Bucket
    }
}

impl Drop for Bucket {
    fn drop(&mut self) {
        let _ = irqlab().args(["control", "revert", "--all"]).output();
        let _ = std::process::Command::new("tc").args(["qdisc", "del", "dev", "irqlab-a", "root"]).status();
    }
}

#[test]
fn the_band_puts_the_background_below_the_foreground_under_a_token_bucket() {
    if !live("the_band_puts_the_background_below_the_foreground_under_a_token_bucket") {
        return;
    }
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let bed = irqlab_host::testbed::Testbed::up().unwrap();
    // The link's rate, as the reproduction sets it.
    let bucket = Bucket::on_irqlab_a();
    assert!(below_the_bucket().contains("bfifo"), "{}", below_the_bucket());
    let dir = tempfile::tempdir().unwrap();
    let run = |extra: &[&str], out: &Path| {
        let mut fg = sender(9001, Some("0.3"), 8);
        let mut bg = sender(9002, None, 8);
        std::thread::sleep(Duration::from_millis(300));
        let status = irqlab()
            .args(["control", "idletime", "--resource", "net:irqlab-a", "--interval", "5ms", "--duration", "3s"])
            .args(["--foreground", &format!("pid:{}", fg.id()), "--background", &format!("pid:{}", bg.id()), "--json", path_str(out)])
            .args(extra)
            .status()
            .unwrap();
        for c in [&mut fg, &mut bg] {
            let _ = c.kill();
            let _ = c.wait();
        }
        assert!(status.success(), "{extra:?}: {status}");
        json(out)
    };
    let r = run(&[], &dir.path().join("band.json"));
    let b = &r["band"];
    eprintln!("band: {b}; background {} packets", r["background"]["completed"]);
    // The band's classes counted what the classifier chose: the
    // background's packets (but the first of its socket) in the low class.
    // The classifier's count is read after the classes' (tc, a process,
    // a few ms): it is the larger by the packets still queued in the low
    // class then (at most the sender's 32 KB buffer, 22 datagrams) and
    // those sent in between (100 Mbit/s: 9 per ms; 5 ms allowed).
    let (sent, classified) = (b["background_packets"].as_u64().unwrap(), b["classified_background"].as_u64().unwrap());
    assert!(classified >= sent && classified - sent <= 22 + 5 * 9, "{b}");
    let bg_packets = r["background"]["completed"].as_u64().unwrap();
    assert!(b["background_packets"].as_u64().unwrap() + 10 >= bg_packets && bg_packets > 1000, "{b} against {bg_packets}");
    assert!(b["foreground_packets"].as_u64().unwrap() >= r["foreground"]["completed"].as_u64().unwrap(), "{b}");
    // The bucket's own FIFO is back, and the journal empty.
    assert!(below_the_bucket().contains("bfifo"), "{}", below_the_bucket());
    assert!(idletime_entries().is_empty(), "{:?}", idletime_entries());
    // --no-band: none.
    let r = run(&["--no-band"], &dir.path().join("no-band.json"));
    assert!(r["band"].is_null(), "{}", r["band"]);

    // kill -9 with the band in force: named, and undone by revert --all.
    let mut fg = sender(9001, Some("0.3"), 30);
    let mut bg = sender(9002, None, 30);
    let args: Vec<String> = ["control", "idletime", "--resource", "net:irqlab-a", "--interval", "5ms", "--verbose"]
        .into_iter()
        .map(String::from)
        .chain(["--foreground".into(), format!("pid:{}", fg.id()), "--background".into(), format!("pid:{}", bg.id())])
        .collect();
    let args: Vec<&std::ffi::OsStr> = args.iter().map(|a| a.as_ref()).collect();
    let (mut ctl, rx) = start_with_stderr(&args);
    // 30 s: a 6.1-rt guest under emulation (TCG), its host busy, had
    // printed nothing after 10 s (the fresh-clone CI of 2026-11-29).
    wait_for_line(&rx, "gate closed", Duration::from_secs(30));
    assert!(below_the_bucket().contains("htb 1a:"), "{}", below_the_bucket());
    ctl.kill().unwrap();
    ctl.wait().unwrap();
    let objects: Vec<String> = idletime_entries().iter().map(|e| e["object"].to_string()).collect();
    assert!(objects.iter().any(|o| o.contains("child-qdisc") && o.contains("irqlab-a")), "{objects:?}");
    let revert = irqlab().args(["control", "revert", "--all"]).output().unwrap();
    assert!(revert.status.success(), "{}", String::from_utf8_lossy(&revert.stderr));
    assert!(below_the_bucket().contains("bfifo"), "{}", below_the_bucket());
    assert!(idletime_entries().is_empty() && no_idletime_cgroups().is_empty());
    for c in [&mut fg, &mut bg] {
        let _ = c.kill();
        let _ = c.wait();
    }
    drop(bucket);
    drop(bed);
}
