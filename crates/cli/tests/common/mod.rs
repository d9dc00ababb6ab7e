//! What the CLI tests share: running the real binary, finding the
//! repository's files, reading what it wrote, and the live-test switch.

// Each test binary uses only some of these.
#![allow(dead_code)]

pub mod inject;
pub mod live;

use std::path::Path;
use std::process::{Command, Output};

/// The `irqlab` binary under test.
pub fn irqlab() -> Command {
    Command::new(env!("CARGO_BIN_EXE_irqlab"))
}

/// Runs `irqlab ARGS` to completion.
pub fn run(args: &[&str]) -> Output {
    irqlab().args(args).output().expect("run irqlab")
}

/// A file of the repository, by path from its root.
pub fn repo_file(relative: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").join(relative).to_string_lossy().into_owned()
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// A JSON document irqlab wrote.
pub fn json(path: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("parsing {}: {e}", path.display()))
}

pub fn path_str(p: &Path) -> &str {
    p.to_str().expect("UTF-8 temporary path")
}

/// Whether live tests run (IRQLAB_LIVE_TESTS=1, as CI sets it); when not,
/// says that `test` was skipped and why.
pub fn live_tests_enabled(test: &str) -> bool {
    if std::env::var("IRQLAB_LIVE_TESTS").as_deref() == Ok("1") {
        return true;
    }
    eprintln!("{test}: skipped: live test (set IRQLAB_LIVE_TESTS=1 and run as root)");
    false
}

pub fn is_root() -> bool {
    use std::os::unix::fs::MetadataExt;
    // /proc/self belongs to the process's effective uid.
    std::fs::metadata("/proc/self").map(|m| m.uid() == 0).unwrap_or(false)
}

/// Runs irqlab without any capability: as root through setpriv (uid
/// nobody, empty bounding set), as an ordinary user directly. `None` when
/// neither is possible (root without setpriv).
pub fn unprivileged(args: &[&str]) -> Option<Output> {
    if is_root() {
        with_capabilities(&[], args)
    } else {
        Some(irqlab().args(args).output().unwrap())
    }
}

/// Runs irqlab as uid nobody with only `caps` (e.g. "sys_nice"), through
/// setpriv's ambient set; `None` unless root with setpriv.
pub fn with_capabilities(caps: &[&str], args: &[&str]) -> Option<Output> {
    if !is_root() {
        return None;
    }
    let setpriv = ["/usr/bin/setpriv", "/bin/setpriv"].into_iter().find(|p| Path::new(p).exists())?;
    let plus: String = caps.iter().map(|c| format!(",+{c}")).collect();
    let bounding = if caps.is_empty() { "--bounding-set=-all".to_string() } else { format!("--bounding-set=-all{plus}") };
    let mut command = Command::new(setpriv);
    command.args(["--reuid=65534", "--regid=65534", "--clear-groups", &format!("--inh-caps=-all{plus}"), &bounding]);
    if !caps.is_empty() {
        command.arg(format!("--ambient-caps={}", plus.trim_start_matches(',')));
    }
    Some(command.arg("--").arg(env!("CARGO_BIN_EXE_irqlab")).args(args).output().unwrap())
}

/// A live document records the machine it was measured on: the running
/// kernel and `irqlab doctor`'s settings.
pub fn assert_records_this_machine(doc: &serde_json::Value) {
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap();
    let machine = &doc["machine"];
    assert!(machine["kernel"].as_str().unwrap_or("").starts_with(release.trim()), "{machine}");
    for name in ["preemption", "threaded IRQs", "IRQ time accounting", "virtualised"] {
        assert!(machine["settings"][name].as_str().is_some_and(|v| !v.is_empty()), "no {name} in {machine}");
    }
}

/// `irqlab doctor`'s report, now.
pub fn doctor_report() -> serde_json::Value {
    let out = irqlab().args(["doctor", "--json", "-"]).output().expect("run irqlab doctor");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("doctor --json -: {e}\n{}", stdout(&out)))
}

/// The value of setting `name` in a doctor report.
pub fn doctor_setting<'a>(report: &'a serde_json::Value, name: &str) -> &'a str {
    let setting = report["settings"].as_array().unwrap().iter().find(|s| s["name"] == name).unwrap_or_else(|| panic!("no setting {name}"));
    setting["value"].as_str().unwrap()
}
