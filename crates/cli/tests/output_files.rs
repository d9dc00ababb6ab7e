//! Where results go (issue 25, items 1-4): output paths that are devices,
//! FIFOs or symbolic links; outputs that clash with inputs or each other;
//! the modes of written files; stdout that is full or closed.

use std::fs::{OpenOptions, Permissions};
use std::io::Read;
use std::os::fd::{FromRawFd, OwnedFd};
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;
use std::process::{Command, Output, Stdio};

mod common;
use common::{irqlab, is_root, path_str, repo_file, run, stderr};

fn curve() -> String {
    repo_file("examples/curve-nic.json")
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().mode() & 0o7777
}

/// `irqlab ARGS` under umask `umask`, through a shell (Command has no umask).
fn run_with_umask(umask: &str, args: &[&str]) -> Output {
    Command::new("sh")
        .arg("-c")
        .arg(format!("umask {umask} && exec \"$0\" \"$@\""))
        .arg(env!("CARGO_BIN_EXE_irqlab"))
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn a_fifo_output_is_written_through_not_replaced() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("out.fifo");
    let c_path = std::ffi::CString::new(path_str(&fifo)).unwrap();
    // SAFETY: a valid C string and mode; mkfifo touches nothing else.
    assert_eq!(unsafe { libc::mkfifo(c_path.as_ptr(), 0o644) }, 0);
    // Read-write and non-blocking: irqlab's open for writing finds a
    // reader at once, and reading afterwards never waits.
    let mut reader = OpenOptions::new().read(true).write(true).custom_flags(libc::O_NONBLOCK).open(&fifo).unwrap();
    let out = run(&["fit", &curve(), "--json", path_str(&fifo)]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(std::fs::symlink_metadata(&fifo).unwrap().file_type().is_fifo(), "the FIFO was replaced");
    let mut text = String::new();
    let _ = reader.read_to_string(&mut text);
    assert!(text.contains("irqlab/fit/v1"), "the FIFO's reader got: {text:?}");
}

#[test]
fn dev_null_stays_a_device() {
    // Only root could replace /dev/null; the check matters there.
    let out = run(&["fit", &curve(), "--svg", "/dev/null", "--json", "/dev/null"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(std::fs::metadata("/dev/null").unwrap().file_type().is_char_device(), "/dev/null was replaced");
}

#[test]
fn a_symlink_output_is_followed_and_kept() {
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("run-42.json");
    std::fs::write(&target, "old").unwrap();
    std::fs::set_permissions(&target, Permissions::from_mode(0o604)).unwrap();
    let link = dir.path().join("latest.json");
    std::os::unix::fs::symlink("run-42.json", &link).unwrap();
    let out = run(&["fit", &curve(), "--json", path_str(&link)]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(std::fs::symlink_metadata(&link).unwrap().file_type().is_symlink(), "the link was replaced");
    assert_eq!(common::json(&target)["schema"], "irqlab/fit/v1");
    assert_eq!(mode(&target), 0o604);
}

#[test]
fn an_output_that_is_an_input_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let c = dir.path().join("c.json");
    std::fs::copy(curve(), &c).unwrap();
    let before = std::fs::read(&c).unwrap();
    // Same file, another spelling: ./dir/../dir/c.json.
    let other = dir.path().join("..").join(dir.path().file_name().unwrap()).join("c.json");
    for flag in ["--json", "--svg"] {
        let out = run(&["fit", path_str(&c), flag, path_str(&other)]);
        assert_eq!(out.status.code(), Some(2), "{flag}: {}", stderr(&out));
        assert!(stderr(&out).contains(flag) && stderr(&out).contains("CURVE"), "{}", stderr(&out));
    }
    assert_eq!(std::fs::read(&c).unwrap(), before, "the input was overwritten");

    let s = dir.path().join("s.toml");
    std::fs::copy(repo_file("scenarios/examples/ping-flood.toml"), &s).unwrap();
    let out = run(&["sim", path_str(&s), "--duration", "1ms", "--json", path_str(&s)]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("--json") && stderr(&out).contains("SCENARIO"), "{}", stderr(&out));

    let link = dir.path().join("link.json");
    std::os::unix::fs::symlink(&c, &link).unwrap();
    let out = run(&["fit", path_str(&c), "--baseline", &repo_file("examples/curve-baseline.csv"), "--json", path_str(&link)]);
    assert_eq!(out.status.code(), Some(2), "a link to the input: {}", stderr(&out));
}

#[test]
fn two_outputs_to_one_file_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a");
    let out = run(&["fit", &curve(), "--json", path_str(&a), "--svg", path_str(&a)]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("--json and --svg"), "{}", stderr(&out));
    assert!(!a.exists());
    let out = run(&["analyze", &repo_file("examples/p7-e2.toml"), "--json", path_str(&a), "--html", path_str(&a)]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("--json and --html"), "{}", stderr(&out));
    // Devices are written through, not replaced: two outputs may share one.
    let out = run(&["fit", &curve(), "--json", "/dev/null", "--svg", "/dev/null"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
}

#[test]
fn a_curve_file_of_a_task_set_is_an_input() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(repo_file("examples/curve-nic.toml"), dir.path().join("set.toml")).unwrap();
    std::fs::copy(curve(), dir.path().join("curve-nic.json")).unwrap();
    let set = dir.path().join("set.toml");
    let out = run(&["analyze", path_str(&set), "--html", path_str(&dir.path().join("curve-nic.json"))]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("--html") && stderr(&out).contains("curve file"), "{}", stderr(&out));
}

#[test]
fn new_files_get_the_umask_mode() {
    let dir = tempfile::tempdir().unwrap();
    for (umask, want) in [("022", 0o644), ("027", 0o640)] {
        let path = dir.path().join(format!("fit-{umask}.json"));
        let out = run_with_umask(umask, &["fit", &curve(), "--json", path_str(&path)]);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        assert_eq!(mode(&path), want, "umask {umask}");
    }
}

#[test]
fn a_replaced_file_keeps_its_mode_and_owner() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("fit.json");
    std::fs::write(&path, "old").unwrap();
    std::fs::set_permissions(&path, Permissions::from_mode(0o664)).unwrap();
    let owner = if is_root() {
        std::os::unix::fs::chown(&path, Some(65534), Some(65534)).unwrap();
        65534
    } else {
        std::fs::metadata(&path).unwrap().uid()
    };
    let out = run_with_umask("077", &["fit", &curve(), "--json", path_str(&path)]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(common::json(&path)["schema"], "irqlab/fit/v1");
    assert_eq!(mode(&path), 0o664);
    assert_eq!(std::fs::metadata(&path).unwrap().uid(), owner);
}

/// `irqlab ARGS > /dev/full`.
fn to_full_stdout(args: &[&str]) -> Output {
    let full = OpenOptions::new().write(true).open("/dev/full").unwrap();
    irqlab().args(args).stdout(full).output().unwrap()
}

#[test]
fn a_full_stdout_is_an_error_not_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    let scenario = repo_file("scenarios/examples/ping-flood.toml");
    let set = repo_file("examples/p7-e2.toml");
    let json_file = dir.path().join("doc.json");
    let curve = curve();
    let cases: Vec<Vec<&str>> = vec![
        vec!["bound", "--period", "7ms", "--wcet", "2ms"],
        vec!["fit", &curve],
        vec!["fit", &curve, "--json", "-"],
        vec!["doctor"],
        vec!["sim", &scenario, "--duration", "10ms"],
        vec!["analyze", &set],
        vec!["idletime-model", "--resource", "disk", "--json", path_str(&json_file)],
        vec!["completions", "bash"],
    ];
    for args in cases {
        let out = to_full_stdout(&args);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).starts_with("error: writing to stdout: No space left on device"), "{args:?}: {}", stderr(&out));
        assert!(!stderr(&out).contains("panicked"), "{args:?}: {}", stderr(&out));
    }
}

#[test]
fn a_closed_stdout_pipe_ends_quietly_with_exit_1() {
    // The reader is gone before irqlab writes: as `irqlab ... | head -c1`
    // when the output outgrows the pipe's buffer. The read end is closed
    // before the spawn: a pipe from Command would still be readable by
    // children other tests fork meanwhile.
    let curve = curve();
    for args in [vec!["completions", "bash"], vec!["fit", &curve]] {
        let mut fds = [0; 2];
        // SAFETY: pipe2 fills the two fds; each is owned exactly once below.
        assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
        // SAFETY: fds[0] and fds[1] were just opened and are owned by nothing else.
        let (read_end, write_end) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        drop(read_end);
        let out = irqlab().args(&args).stdout(Stdio::from(write_end)).output().unwrap();
        assert_eq!(out.status.code(), Some(1), "{args:?}: killed by a signal or wrong code: {:?} {}", out.status, stderr(&out));
        assert_eq!(stderr(&out), "", "{args:?}");
    }
}
