//! `irqlab control export PROFILE --tuned DIR` (issue 51): the files of a
//! tuned profile written, a bad profile refused at its place (exit 2, as
//! `control apply` refuses it), a setting with no tuned form left out with
//! a warning, and no one's own tuned profile written over. Nothing here
//! reads or changes the machine beyond its CPU count.
//!
//! The export was loaded by tuned 2.20's own loader (Debian 12's tuned in a
//! Debian 12 root, /tmp/sysroot): `irqlab control export P --tuned
//! /tmp/sysroot/tmp/irqlab-export`, then
//! `chroot /tmp/sysroot python3 -c 'import tuned.profiles as p, tuned.profiles.variables as v;
//! l = p.Loader(p.Locator(["/tmp"]), p.Factory(), p.Merger(), None, v.Variables());
//! [print(n, u.type, dict(u.options)) for n, u in l.load("irqlab-export").units.items()]'`
//! (every section with its options as written; `script` resolved to
//! `/tmp/irqlab-export/script.sh`).

mod common;
use common::*;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

const PROFILE: &str = r#"schema = "irqlab/profile/v1"

[default_irq]
cpus = "0"

[[irq]]
irq = "virtio2"
cpus = "0"

[[threads]]
match = "napi:eth0"
policy = "fifo:50"
cpus = "0"

[[threads]]
match = "pid:4242"
policy = "fifo:10"
this_boot = true

[[napi]]
dev = "eth0"
threaded = true
"#;

fn write(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn export_writes_tuned_conf_and_an_executable_script() {
    let dir = tempfile::tempdir().unwrap();
    let profile = write(dir.path(), "p.toml", PROFILE);
    let out = dir.path().join("irqlab-rt");
    let o = run(&["control", "export", &profile, "--tuned", path_str(&out), "--tuned-version", "2.20"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let conf = read(&out.join("tuned.conf"));
    assert_eq!(conf.lines().next(), Some("# tuned profile written by `irqlab control export`"));
    assert!(conf.contains("\n[main]\nsummary=irqlab profile p.toml (irqlab control export)\n"), "{conf}");
    assert!(conf.contains("\n/sys/class/net/eth0/threaded=1\n"), "{conf}");
    assert!(conf.contains("\ngroup.irqlab-1-napi-eth0=1:f:50:00000001:^\\[napi/eth0-.*\\]$\n"), "{conf}");
    assert!(conf.contains("\n[irqbalance]\nbanned_cpus=${f:cpulist_invert:0}\n"), "{conf}");
    assert!(conf.contains("\n[script]\nscript=${i:PROFILE_DIR}/script.sh\n"), "{conf}");
    let script = out.join("script.sh");
    assert_eq!(std::fs::metadata(&script).unwrap().permissions().mode() & 0o777, 0o755);
    let text = read(&script);
    assert!(text.contains("\n    want 'virtio2' '0'\n") && text.contains("/run/irqlab-tuned/irqlab-rt"), "{text}");
    let said = stderr(&o);
    assert!(said.contains(&format!("wrote {}", out.join("tuned.conf").display())), "{said}");
    assert!(said.contains("written for tuned 2.20 (--tuned-version)"), "{said}");
    assert!(said.contains("/etc/tuned/irqlab-rt && sudo tuned-adm profile irqlab-rt"), "{said}");

    // Again into the same directory: an earlier export is replaced; a
    // profile that needs no script takes the earlier one away.
    let plugins_only = write(dir.path(), "q.toml", "schema = \"irqlab/profile/v1\"\n\n[[napi]]\ndev = \"eth0\"\nthreaded = false\n");
    let o = run(&["control", "export", &plugins_only, "--tuned", path_str(&out), "--name", "other"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(!script.exists());
    assert!(read(&out.join("tuned.conf")).contains("\n/sys/class/net/eth0/threaded=0\n"));
    assert!(stderr(&o).contains("sudo tuned-adm profile other"), "{}", stderr(&o));

    // tuned 2.23's irq plugin takes IRQs by number: no script.
    let numbered = write(dir.path(), "n.toml", "schema = \"irqlab/profile/v1\"\n\n[[irq]]\nirq = \"38\"\ncpus = \"0\"\n");
    let o = run(&["control", "export", &numbered, "--tuned", path_str(&out), "--tuned-version", "2.23"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(read(&out.join("tuned.conf")).contains("\n[irqlab-irq-1]\ntype=irq\ndevices=irq38\naffinity=0\n"));
    assert!(!script.exists());
}

#[test]
fn a_directory_holding_other_files_is_not_written_over() {
    let dir = tempfile::tempdir().unwrap();
    let profile = write(dir.path(), "p.toml", PROFILE);
    let theirs = dir.path().join("realtime");
    std::fs::create_dir(&theirs).unwrap();
    write(&theirs, "tuned.conf", "[main]\nsummary=their own\n");
    let o = run(&["control", "export", &profile, "--tuned", path_str(&theirs)]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("did not write (tuned.conf)"), "{}", stderr(&o));
    assert_eq!(read(&theirs.join("tuned.conf")), "[main]\nsummary=their own\n");
    let o = run(&["control", "export", &profile, "--tuned", path_str(&theirs.join("tuned.conf"))]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("not a directory"), "{}", stderr(&o));
    let o = run(&["control", "export", &profile, "--tuned", path_str(dir.path()), "--name", "no/slash"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let o = run(&["control", "export", &profile, "--tuned", path_str(&dir.path().join("x")), "--tuned-version", "two"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("X.Y"), "{}", stderr(&o));
}

#[test]
fn a_bad_profile_is_refused_at_its_place_and_nothing_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    // The same error, at the same place, as `control apply` gives.
    let unknown = write(dir.path(), "unknown.toml", "schema = \"irqlab/profile/v1\"\n\n[[irq]]\nirq = \"1\"\ncpu = \"0\"\n");
    let o = run(&["control", "export", &unknown, "--tuned", path_str(&out)]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains(&format!("{unknown}:5:1")) && stderr(&o).contains("cpu"), "{}", stderr(&o));
    let applied = run(&["control", "apply", &unknown, "--dry-run"]);
    assert_eq!(stderr(&applied), stderr(&o));
    let policy = write(dir.path(), "policy.toml", &PROFILE.replace("fifo:50", "fifo:100"));
    let o = run(&["control", "export", &policy, "--tuned", path_str(&out)]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains(&format!("{policy}:12:10")) && stderr(&o).contains("outside 1..=99"), "{}", stderr(&o));
    let cpu = write(dir.path(), "cpu.toml", &PROFILE.replace("[default_irq]\ncpus = \"0\"", "[default_irq]\ncpus = \"4095\""));
    let o = run(&["control", "export", &cpu, "--tuned", path_str(&out)]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains(&format!("{cpu}:4:8")) && stderr(&o).contains("CPU 4095"), "{}", stderr(&o));
    assert!(!out.exists(), "nothing is written for a bad profile");
}

#[test]
fn a_pid_setting_is_left_out_with_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    let profile = write(dir.path(), "p.toml", PROFILE);
    let out = dir.path().join("irqlab-rt");
    let o = run(&["control", "export", &profile, "--tuned", path_str(&out)]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let said = stderr(&o);
    assert!(said.lines().any(|l| l.starts_with("warning: threads pid:4242 left out: a pid names a thread of one boot only")), "{said}");
    let conf = read(&out.join("tuned.conf"));
    assert!(conf.contains("\n# Left out (no tuned form):\n# - threads pid:4242: "), "{conf}");
    assert!(!conf.contains("pid-4242") && !conf.contains(":10:"), "no rule for the pid:\n{conf}");
}
