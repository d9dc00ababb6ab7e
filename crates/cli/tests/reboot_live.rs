//! Issue 51, "the reboot, for real": `control install` of a profile in a
//! guest booted with systemd as init, then reboots of the same root file
//! system (`lab run --root`), the settings read inside after each boot
//! with no irqlab command run by hand:
//!
//! 1. first boot: the kernel's defaults are read, `control install` runs;
//! 2. second boot: every setting is in force (the IRQ's affinity, the
//!    default IRQ affinity, the IRQ thread's and the NAPI threads'
//!    policies, threaded NAPI) and the boot loader's configuration has
//!    the option; `control uninstall` runs;
//! 3. third boot: every value is the kernel's default again, and nothing
//!    of irqlab's is installed.
//!
//! The guest's kernel is started by QEMU, not by GRUB, so the boot
//! option's effect is not shown here (`lab compare` with a command line
//! does that); the drop-in is read. The guest runs irqbalance and tuned
//! under systemd, as Debian starts them.
//!
//! (The third test, doctor beside Debian's tuned and irqbalance, is issue
//! 54's.) It boots three guests (about three minutes each under emulation), so
//! `scripts/test-kernels.sh` runs it on the host with `IRQLAB_LAB_KERNEL`
//! (a PREEMPT_RT kernel: its IRQ threads are what the profile sets) and
//! `IRQLAB_LAB_ROOT` (`make lab-root`) set.

mod common;
use common::live::enabled_as_root;
use common::*;
use std::collections::BTreeMap;
use std::path::Path;

const PROFILE: &str = r#"schema = "irqlab/profile/v1"

[default_irq]
cpus = "0"

[[irq]]
irq = "rtc0"
cpus = "1"

[[threads]]
match = "irq:rtc0"
policy = "fifo:70"

[[threads]]
match = "napi:eth0"
policy = "fifo:55"

[[napi]]
dev = "eth0"
threaded = true

[boot]
cmdline = "rcu_nocbs=1"
"#;

/// What the profile sets, read from the kernel as `key=value` lines (a
/// key per NAPI thread: `napi/eth0-N=CLS:PRIO`).
const READ: &str = r#"#!/bin/sh
irq=$(awk '$NF == "rtc0" { sub(":", "", $1); print $1 }' /proc/interrupts)
echo "rtc0_affinity=$(cat /proc/irq/$irq/smp_affinity_list)"
echo "default_affinity=$(cat /proc/irq/default_smp_affinity)"
echo "eth0_threaded=$(cat /sys/class/net/eth0/threaded)"
ps -eo comm=,cls=,rtprio= | awk '$1 ~ /^irq\/[0-9]+-rtc0$/ { print "rtc0_thread=" $2 ":" $3 } $1 ~ /^napi\/eth0-/ { print $1 "=" $2 ":" $3 }'
echo "grub_drop_in=$(grep -v '^#' /etc/default/grub.d/irqlab.cfg 2>/dev/null | tr -d '\n')"
echo "unit=$(systemctl is-active irqlab-profile.service)"
echo "unit_file=$(test -e /etc/systemd/system/irqlab-profile.service && echo present || echo absent)"
echo "irqbalance=$(systemctl is-active irqbalance.service)"
"#;

fn setup(test: &str) -> Option<(String, std::path::PathBuf)> {
    if !enabled_as_root(test) {
        return None;
    }
    let var = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
    match (var("IRQLAB_LAB_KERNEL"), var("IRQLAB_LAB_ROOT")) {
        (Some(kernel), Some(root)) => Some((kernel, root.into())),
        _ => {
            eprintln!(
                "{test}: skipped: it boots a root file system with systemd; scripts/test-kernels.sh runs it with \
                 IRQLAB_LAB_KERNEL and IRQLAB_LAB_ROOT set (after make lab-deps lab-root)"
            );
            None
        }
    }
}

/// A copy of the built root in a temporary directory: the test's boots
/// change it, the cached one stays as built.
fn copy_of(pristine: &Path) -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    let copied = std::process::Command::new("cp").arg("-a").arg(pristine).arg(&root).status().unwrap();
    assert!(copied.success(), "copying {}", pristine.display());
    (dir, root)
}

/// One boot of `root` running `script`; its `key=value` lines.
fn boot(kernel: &str, root: &Path, step: &str, script: &str) -> BTreeMap<String, String> {
    eprintln!("== boot: {step}");
    let out = irqlab()
        .args(["lab", "run", "--kernel", kernel, "--root"])
        .arg(root)
        .args(["--loop-nics", "--timeout", "15min", "--", "sh", "-c", script])
        .output()
        .unwrap();
    eprintln!("{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    eprintln!("{text}");
    assert_eq!(out.status.code(), Some(0), "{step}: lab run failed");
    text.lines().filter_map(|l| l.split_once('=')).map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

#[test]
fn an_installed_profile_is_in_force_after_a_reboot_and_gone_after_uninstall() {
    let Some((kernel, pristine)) = setup("an_installed_profile_is_in_force_after_a_reboot_and_gone_after_uninstall") else {
        return;
    };
    let (_dir, root) = copy_of(&pristine);
    std::fs::write(root.join("root/profile.toml"), PROFILE).unwrap();
    std::fs::write(root.join("root/read.sh"), READ).unwrap();

    let defaults = boot(&kernel, &root, "install", "sh /root/read.sh && irqlab control install /root/profile.toml >&2");
    assert_eq!(defaults["unit"], "inactive", "{defaults:?}");
    assert_eq!(defaults["irqbalance"], "active", "Debian's irqbalance runs in the guest: {defaults:?}");
    assert_eq!(defaults["eth0_threaded"], "0", "{defaults:?}");

    let installed = boot(&kernel, &root, "reboot", "sh /root/read.sh && irqlab control status >&2 && irqlab control uninstall >&2");
    let expect =
        |key: &str, value: &str| assert_eq!(installed.get(key).map(String::as_str), Some(value), "{key} after the reboot: {installed:?}");
    expect("unit", "active");
    expect("rtc0_affinity", "1");
    expect("default_affinity", "1");
    expect("eth0_threaded", "1");
    expect("rtc0_thread", "FF:70");
    let napi: Vec<_> = installed.iter().filter(|(k, _)| k.starts_with("napi/eth0-")).collect();
    assert!(!napi.is_empty(), "no NAPI thread of eth0 after the reboot: {installed:?}");
    assert!(napi.iter().all(|(_, v)| v.as_str() == "FF:55"), "{napi:?}");
    assert!(installed["grub_drop_in"].contains("rcu_nocbs=1"), "the boot loader's configuration: {installed:?}");
    assert_ne!(installed["rtc0_affinity"], defaults["rtc0_affinity"], "the profile's IRQ affinity is the default: nothing shown");
    assert_ne!(installed["default_affinity"], defaults["default_affinity"]);

    let after = boot(&kernel, &root, "reboot after uninstall", "sh /root/read.sh");
    assert_eq!(after["unit_file"], "absent", "{after:?}");
    assert_eq!(after["grub_drop_in"], "", "{after:?}");
    for (key, value) in &defaults {
        assert_eq!(after.get(key), Some(value), "{key}: the kernel's default was {value} before install: {after:?}");
    }
}

/// Issue 51: `control export --tuned` checked by Debian's own tuned (2.20,
/// its daemon under systemd, as Debian starts it): the exported profile
/// loads (`tuned-adm profile`), `tuned-adm verify` passes on it, and its
/// values are in force. Without the `[boot]` part: tuned's bootloader
/// plugin verifies options against the running kernel's command line,
/// which only a reboot through a boot loader would change (the guest's
/// kernel is started by QEMU).
#[test]
fn an_exported_profile_loads_in_debians_tuned_and_verifies() {
    let Some((kernel, pristine)) = setup("an_exported_profile_loads_in_debians_tuned_and_verifies") else { return };
    let (dir, root) = copy_of(&pristine);
    let without_boot = PROFILE.split("\n[boot]").next().unwrap();
    std::fs::write(dir.path().join("profile.toml"), without_boot).unwrap();
    std::fs::write(root.join("root/read.sh"), READ).unwrap();
    let export = run(&[
        "control",
        "export",
        dir.path().join("profile.toml").to_str().unwrap(),
        "--tuned",
        root.join("etc/tuned/irqlab-test").to_str().unwrap(),
        "--tuned-version",
        "2.20",
    ]);
    assert_eq!(export.status.code(), Some(0), "{}", stderr(&export));

    let read = boot(
        &kernel,
        &root,
        "tuned",
        "tuned-adm profile irqlab-test >&2; echo tuned_profile=$?; tuned-adm verify >&2; echo tuned_verify=$?; \
         grep -E 'ERROR|WARNING|verify' /var/log/tuned/tuned.log >&2; \
         echo tuned_active=$(tuned-adm active); sh /root/read.sh",
    );
    let expect = |key: &str, value: &str| assert_eq!(read.get(key).map(String::as_str), Some(value), "{key} under tuned: {read:?}");
    expect("tuned_profile", "0");
    expect("tuned_verify", "0");
    expect("tuned_active", "Current active profile: irqlab-test");
    expect("rtc0_affinity", "1");
    expect("default_affinity", "1");
    expect("eth0_threaded", "1");
    expect("rtc0_thread", "FF:70");
    let napi: Vec<_> = read.iter().filter(|(k, _)| k.starts_with("napi/eth0-")).collect();
    assert!(!napi.is_empty() && napi.iter().all(|(_, v)| v.as_str() == "FF:55"), "the NAPI threads under tuned: {read:?}");
}

/// Issue 54, with Debian's own daemons: in the systemd root, where Debian
/// starts irqbalance and tuned, with Debian's `realtime` profile active
/// (through a profile of the test's that includes it and adds one
/// scheduler rule), `doctor` names both daemons running, tuned with its
/// active profile, warns that the profile writes
/// `kernel.sched_rt_runtime_us` on a kernel with fair servers (6.12 and
/// later: the write makes the kernel forget their bandwidth), and names
/// each setting where tuned's profile and the irqlab profile in
/// /etc/irqlab disagree: the boot option, the thread policy (which tuned
/// is seen to have set), the IRQ on a CPU tuned isolates; the next boot
/// keeps tuned's, since the irqlab profile is not installed. The fields
/// are asserted, not the words.
#[test]
fn doctor_names_debians_tuned_and_irqbalance_and_where_tuned_disagrees() {
    let Some((kernel, pristine)) = setup("doctor_names_debians_tuned_and_irqbalance_and_where_tuned_disagrees") else {
        return;
    };
    let (_dir, root) = copy_of(&pristine);
    let profile_dir = root.join("etc/tuned/irqlab-realtime");
    std::fs::create_dir_all(&profile_dir).unwrap();
    std::fs::write(
        profile_dir.join("tuned.conf"),
        "[main]\nsummary=Debian's realtime profile and one scheduler rule of irqlab's test\ninclude=realtime\n\n\
         [scheduler]\ngroup.irqlab_kswapd=0:f:7:*:^\\[kswapd0\\]$\n",
    )
    .unwrap();
    std::fs::create_dir_all(root.join("etc/irqlab")).unwrap();
    std::fs::write(
        root.join("etc/irqlab/profile.toml"),
        "schema = \"irqlab/profile/v1\"\n\n[[irq]]\nirq = \"rtc0\"\ncpus = \"1\"\n\n[[threads]]\nmatch = \"comm:kswapd0\"\n\
         policy = \"fifo:20\"\nall_matching = true\n\n[boot]\ncmdline = \"isolcpus=1\"\n",
    )
    .unwrap();
    let read = boot(
        &kernel,
        &root,
        "tuned with Debian's realtime profile",
        "tuned-adm profile irqlab-realtime >&2; echo tuned_profile=$?; \
         echo kswapd=$(ps -eo comm=,cls=,rtprio= | awk '$1 == \"kswapd0\" { print $2 \":\" $3 }'); \
         grep TUNED_BOOT_CMDLINE /etc/tuned/bootcmdline >&2; irqlab doctor >&2; \
         irqlab doctor --json /root/doctor.json >/dev/null; echo doctor=$?; echo release=$(uname -r); \
         irqlab control threads comm:kswapd0 --policy fifo:20 --all-matching --persist >&2; echo persisted=$?; \
         tuned-adm profile irqlab-realtime >&2; \
         echo kswapd_again=$(ps -eo comm=,cls=,rtprio= | awk '$1 == \"kswapd0\" { print $2 \":\" $3 }'); \
         irqlab control status --json - > /root/status.json; irqlab control status >&2",
    );
    assert_eq!(read.get("tuned_profile").map(String::as_str), Some("0"), "{read:?}");
    assert_eq!(read.get("doctor").map(String::as_str), Some("0"), "{read:?}");
    assert_eq!(read.get("kswapd").map(String::as_str), Some("FF:7"), "tuned's rule in force: {read:?}");
    let doctor = json(&root.join("root/doctor.json"));
    let tool = |name: &str| {
        doctor["other_tools"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == name)
            .cloned()
            .unwrap_or_else(|| panic!("no {name}: {doctor:#}"))
    };
    let tuned = tool("tuned");
    assert!(!tuned["running"].as_array().unwrap().is_empty(), "tuned runs under systemd: {tuned:#}");
    assert_eq!(tuned["detail"], "active profile: irqlab-realtime", "{tuned:#}");
    let release = read["release"].split(['.', '-']).take(2).map(|p| p.parse::<u32>().unwrap()).collect::<Vec<_>>();
    let fair_servers = (release[0], release[1]) >= (6, 12);
    assert_eq!(tuned.get("warning").is_some(), fair_servers, "the warning on {}: {tuned:#}", read["release"]);
    let irqbalance = tool("irqbalance");
    assert!(!irqbalance["running"].as_array().unwrap().is_empty(), "irqbalance runs under systemd: {irqbalance:#}");

    let beside = &doctor["beside_tuned"];
    assert_eq!(
        beside["tuned_merges"],
        serde_json::json!(["latency-performance", "network-latency", "realtime", "irqlab-realtime"]),
        "{beside:#}"
    );
    let disagreement = |setting: &str| {
        beside["disagreements"]
            .as_array()
            .unwrap()
            .iter()
            .find(|d| d["setting"].as_str().unwrap().starts_with(setting))
            .cloned()
            .unwrap_or_else(|| panic!("no disagreement on {setting}: {beside:#}"))
    };
    let thread = disagreement("threads comm:kswapd0");
    assert_eq!((thread["irqlab"].as_str(), thread["tuned"].as_str()), (Some("SCHED_FIFO 20"), Some("SCHED_FIFO 7")), "{thread:#}");
    assert!(thread["tuned_from"].as_str().unwrap().contains("group.irqlab_kswapd"), "{thread:#}");
    // Debian's realtime-variables.conf isolates all but the first CPU of
    // each package (calc_isolated_cores): CPU 1 of the 2-CPU guest.
    let irq = disagreement("irq rtc0");
    assert!(irq["tuned_from"].as_str().unwrap().contains("isolated_cores"), "{irq:#}");
    let boot_option = disagreement("boot isolcpus");
    assert_eq!(boot_option["tuned"], "isolcpus=managed_irq,domain,1", "{boot_option:#}");
    for d in [&thread, &irq, &boot_option] {
        assert_eq!(d["next_boot_keeps"], "tuned", "not installed, tuned's stays: {d:#}");
    }

    // irqlab's value persisted, then tuned applying its profile again sets
    // its rule's back (the value irqlab found, tuned's own): `control
    // status` shows it back to the old value, by tuned's rule.
    assert_eq!(read.get("persisted").map(String::as_str), Some("0"), "{read:?}");
    assert_eq!(read.get("kswapd_again").map(String::as_str), Some("FF:7"), "tuned set its rule's value again: {read:?}");
    let status = json(&root.join("root/status.json"));
    let drifted = status["entries"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["object"]["kind"] == "thread-sched" && e["object"]["thread"]["comm"] == "kswapd0")
        .cloned()
        .unwrap_or_else(|| panic!("no entry for kswapd0: {status:#}"));
    assert_eq!(drifted["now"], "old", "{drifted:#}");
    let by = &drifted["by"];
    assert_eq!((&by["tool"], &by["rule"]), (&serde_json::json!("tuned"), &serde_json::json!("group.irqlab_kswapd")), "{drifted:#}");
}
