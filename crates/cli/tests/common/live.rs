//! What the live reproduction tests share: the control journal's entries,
//! a run of the binary whose stderr lines arrive on a channel, waiting for
//! a line or an exit.

use std::io::{BufRead, BufReader};
use std::process::{Child, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// `irqlab control status --json -`'s entries.
pub fn control_entries() -> Vec<serde_json::Value> {
    let out = super::irqlab().args(["control", "status", "--json", "-"]).output().unwrap();
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    doc["entries"].as_array().cloned().unwrap_or_default()
}

/// Starts `irqlab ARGS`; its stderr lines arrive on the channel (and are
/// echoed to the test's stderr).
pub fn start_with_stderr(args: &[&std::ffi::OsStr]) -> (Child, mpsc::Receiver<String>) {
    let mut child = super::irqlab().args(args).stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap();
    let (tx, rx) = mpsc::channel();
    let stderr = child.stderr.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            eprintln!("irqlab: {line}");
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    (child, rx)
}

/// Waits for a stderr line containing `wanted`; panics after `limit`, or as
/// soon as the command's stderr closes (it ended), with its last lines.
pub fn wait_for_line(rx: &mpsc::Receiver<String>, wanted: &str, limit: Duration) {
    let deadline = Instant::now() + limit;
    let mut last = std::collections::VecDeque::new();
    while Instant::now() < deadline {
        match rx.recv_timeout(Duration::from_millis(200)) {
            Ok(line) if line.contains(wanted) => return,
            Ok(line) => {
                last.push_back(line);
                if last.len() > 6 {
                    last.pop_front();
                }
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                panic!("the command ended without `{wanted}` on stderr; its last lines: {:?}", last)
            }
        }
    }
    panic!("no `{wanted}` on stderr within {limit:?}; its last lines: {:?}", last);
}

/// Waits for the child to exit; kills it and panics after `limit`.
pub fn wait_at_most(child: &mut Child, limit: Duration) -> std::process::ExitStatus {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            return s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("still running after {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The journal's entries made by irqlab runs whose command line contains
/// `command` (other irqlab runs on the machine keep theirs).
pub fn entries_of(command: &str) -> Vec<serde_json::Value> {
    control_entries().into_iter().filter(|e| e["owner"]["command"].as_str().is_some_and(|c| c.contains(command))).collect()
}

/// Whether the live test `test` runs (IRQLAB_LIVE_TESTS=1); it must then
/// run as root.
pub fn enabled_as_root(test: &str) -> bool {
    if !super::live_tests_enabled(test) {
        return false;
    }
    assert!(super::is_root(), "{test}: live tests run as root");
    true
}

/// A scratch directory on the disk under the build (a tmpfs /tmp has no
/// disk under it), or under IRQLAB_TEST_SCRATCH (a guest whose build is on
/// a read-only 9p share: a directory on the guest's disk).
pub fn scratch_on_disk(prefix: &str) -> tempfile::TempDir {
    let dir = std::env::var("IRQLAB_TEST_SCRATCH").unwrap_or_else(|_| env!("CARGO_TARGET_TMPDIR").to_string());
    tempfile::Builder::new().prefix(prefix).tempdir_in(dir).unwrap()
}

/// `--resource disk`, or `disk:DEV` with IRQLAB_TEST_DISK=DEV (the disk
/// under IRQLAB_TEST_SCRATCH when / is on none).
pub fn disk_resource() -> String {
    std::env::var("IRQLAB_TEST_DISK").map_or_else(|_| "disk".into(), |d| format!("disk:{d}"))
}

/// What `work` left changed on the machine: `irqlab doctor --diff`'s
/// differences (`irqlab_host::machine_state`), one line each, between a
/// snapshot before it and one after. Empty: it left the machine as it
/// found it (a `--dry-run`, a run that restored everything). Other live
/// runs on the machine at the same time show here too.
pub fn left_changed(work: impl FnOnce()) -> Vec<String> {
    use irqlab_host::machine_state::{diff, take};
    let before = take();
    work();
    diff(&before, &take()).differences.iter().map(ToString::to_string).collect()
}

/// IRQ `irq`'s affinity list now ("" when it went away).
pub fn irq_affinity(irq: u32) -> String {
    std::fs::read_to_string(format!("/proc/irq/{irq}/smp_affinity_list")).map(|t| t.trim().to_string()).unwrap_or_default()
}

/// The numbered IRQs with a handler, from /proc/interrupts.
pub fn numbered_irqs() -> Vec<u32> {
    let text = std::fs::read_to_string("/proc/interrupts").unwrap();
    text.lines()
        .skip(1)
        .filter_map(|l| l.trim_start().split_once(':'))
        .filter_map(|(n, rest)| n.parse().ok().filter(|_| rest.split_whitespace().count() > 3))
        .collect()
}
