//! Reading the machine's controllable state now.

use super::{MachineState, NapiState, NetDevice, Read, Reading, ThreadState, SCHEMA};
use crate::journal::{netdev, sched, threads};
use std::collections::BTreeMap;
use std::path::Path;

/// The machine's controllable state now. Never fails: what cannot be read
/// is recorded as unreadable.
pub fn take() -> MachineState {
    MachineState {
        schema: SCHEMA.to_string(),
        kernel: text("/proc/sys/kernel/osrelease").unwrap_or_default(),
        boot_id: text("/proc/sys/kernel/random/boot_id").unwrap_or_default(),
        threads: read_threads(),
        default_irq_affinity: reading("/proc/irq/default_smp_affinity"),
        irq_affinity: read_irqs(),
        net_devices: read_net_devices(),
        net_core: read_net_core(),
        qdiscs: read_qdiscs(),
        block_schedulers: read_block_schedulers(),
        irqlab_cgroups: read_irqlab_cgroups(),
        sched_rt: read_sched_rt(),
        cgroup_roots: read_cgroup_roots(),
        debugfs_mounts: mounts().into_iter().filter(|(kind, _, _)| kind == "debugfs").map(|(_, at, _)| at).collect(),
        sched_debug: read_sched_debug(),
    }
}

/// The RT limit, unless reading it would change the machine: on a kernel
/// whose fair servers are still accounted a read rebuilds the sched
/// domains and the kernel forgets the servers' bandwidth (what doctor
/// avoids too), so the snapshot records why it was not read.
fn read_sched_rt() -> BTreeMap<String, Reading> {
    let not_read = crate::machine::rt_runtime_without_rebuild();
    ["sched_rt_runtime_us", "sched_rt_period_us"]
        .into_iter()
        .map(|name| {
            let value = match &not_read {
                Some(why) => Read::Unreadable(why.clone()),
                None => reading(&format!("/proc/sys/kernel/{name}")),
            };
            (name.to_string(), value)
        })
        .collect()
}

/// (type, mount point, options) of each mount of this process's namespace.
fn mounts() -> Vec<(String, String, String)> {
    let text = std::fs::read_to_string("/proc/self/mounts").unwrap_or_default();
    text.lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            // Spaces in a mount point are written \040.
            Some((f.get(2)?.to_string(), f.get(1)?.replace("\\040", " "), f.get(3)?.to_string()))
        })
        .collect()
}

fn read_cgroup_roots() -> BTreeMap<String, Reading> {
    mounts()
        .into_iter()
        .filter_map(|(kind, at, options)| match kind.as_str() {
            "cgroup" if options.split(',').any(|o| o == "cpuset") => Some(format!("{at}/cpuset.sched_load_balance")),
            "cgroup2" => Some(format!("{at}/cgroup.subtree_control")),
            _ => None,
        })
        .filter_map(|path| Some((path.clone(), existing(&path)?)))
        .collect()
}

fn read_sched_debug() -> BTreeMap<String, Reading> {
    let mut found = BTreeMap::new();
    let Some((_, at, _)) = mounts().into_iter().find(|(kind, _, _)| kind == "debugfs") else { return found };
    let sched = format!("{at}/sched");
    if let Some(r) = existing(&format!("{sched}/features")) {
        found.insert("features".to_string(), r);
    }
    for cpu in names(&format!("{sched}/fair_server")) {
        for knob in ["runtime", "period"] {
            if let Some(r) = existing(&format!("{sched}/fair_server/{cpu}/{knob}")) {
                found.insert(format!("fair_server/{cpu}/{knob}"), r);
            }
        }
    }
    found
}

fn text(path: &str) -> std::io::Result<String> {
    std::fs::read_to_string(path).map(|t| t.trim().to_string())
}

fn reading(path: &str) -> Reading {
    Read::from_result(text(path))
}

/// A file's reading, `None` when the kernel has no such file (a device
/// with one tx queue has no `xps_cpus`; an older kernel no `threaded`).
fn existing(path: &str) -> Option<Reading> {
    match text(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        r => Some(Read::from_result(r)),
    }
}

/// The names in a directory, sorted; none when it cannot be listed.
fn names(dir: &str) -> Vec<String> {
    let mut found: Vec<String> = std::fs::read_dir(dir)
        .map(|entries| entries.flatten().filter_map(|e| e.file_name().to_str().map(str::to_string)).collect())
        .unwrap_or_default();
    found.sort();
    found
}

fn read_threads() -> Vec<ThreadState> {
    threads::all_threads()
        .into_iter()
        .filter_map(|t| {
            let sched = match sched::get(t.tid) {
                Ok(attr) => Read::Value(attr),
                // Gone between the listing and now: it is in neither.
                Err(_) if !t.alive() => return None,
                Err(e) => Read::Unreadable(e.to_string()),
            };
            let affinity = match crate::rt::affinity(t.tid) {
                Ok(cpus) => Read::Value(crate::rt::format_cpu_list(&cpus)),
                Err(_) if !t.alive() => return None,
                Err(e) => Read::Unreadable(e.to_string()),
            };
            Some(ThreadState { tid: t.tid, start_ticks: t.start_ticks, comm: t.comm, sched, affinity })
        })
        .collect()
}

fn read_irqs() -> BTreeMap<u32, Reading> {
    names("/proc/irq")
        .into_iter()
        .filter_map(|n| n.parse::<u32>().ok())
        .map(|irq| (irq, reading(&format!("/proc/irq/{irq}/smp_affinity_list"))))
        .collect()
}

fn read_net_devices() -> BTreeMap<String, NetDevice> {
    let mut netlink = netdev::Netdev::open().map_err(|e| e.to_string());
    names("/sys/class/net")
        .into_iter()
        .map(|dev| {
            let base = format!("/sys/class/net/{dev}");
            let queues = names(&format!("{base}/queues"));
            let masks = |prefix: &str, file: &str| -> BTreeMap<String, Reading> {
                queues
                    .iter()
                    .filter(|q| q.starts_with(prefix))
                    .filter_map(|q| Some((q.clone(), existing(&format!("{base}/queues/{q}/{file}"))?)))
                    .collect()
            };
            let settings = ["threaded", "napi_defer_hard_irqs", "gro_flush_timeout"]
                .into_iter()
                .filter_map(|name| Some((name.to_string(), existing(&format!("{base}/{name}"))?)))
                .collect();
            let ifindex = reading(&format!("{base}/ifindex"));
            let napi = match (&mut netlink, &ifindex) {
                (Ok(nl), Read::Value(i)) => match i.parse::<u32>() {
                    Ok(i) => Read::from_result(nl.napis(i).map(|list| list.iter().map(napi_state).collect())),
                    Err(e) => Read::Unreadable(format!("ifindex {i}: {e}")),
                },
                (Err(e), _) => Read::Unreadable(e.clone()),
                (_, Read::Unreadable(e)) => Read::Unreadable(format!("no ifindex: {e}")),
            };
            let device = NetDevice { ifindex, rps_cpus: masks("rx-", "rps_cpus"), xps_cpus: masks("tx-", "xps_cpus"), settings, napi };
            (dev, device)
        })
        .collect()
}

fn napi_state(n: &netdev::Napi) -> NapiState {
    NapiState {
        id: n.id,
        defer_hard_irqs: n.defer_hard_irqs,
        gro_flush_timeout_ns: n.gro_flush_timeout_ns,
        irq_suspend_timeout_ns: n.irq_suspend_timeout_ns,
        threaded: n.threaded,
    }
}

/// The settings of `/proc/sys/net/core`: files someone may write. A file
/// no one may write (`netdev_rss_key`) is the kernel's report, not a
/// setting.
fn read_net_core() -> BTreeMap<String, Reading> {
    use std::os::unix::fs::PermissionsExt;
    names("/proc/sys/net/core")
        .into_iter()
        .filter_map(|name| {
            let path = format!("/proc/sys/net/core/{name}");
            let meta = std::fs::metadata(&path).ok()?;
            (meta.is_file() && meta.permissions().mode() & 0o222 != 0).then(|| (name, reading(&path)))
        })
        .collect()
}

fn read_qdiscs() -> Read<BTreeMap<String, Vec<String>>> {
    let out = match std::process::Command::new("tc").args(["-j", "qdisc", "show"]).output() {
        Ok(out) if out.status.success() => out,
        Ok(out) => return Read::Unreadable(format!("tc -j qdisc show: {}", String::from_utf8_lossy(&out.stderr).trim())),
        Err(e) => return Read::Unreadable(format!("running tc: {e}")),
    };
    match serde_json::from_slice::<Vec<serde_json::Value>>(&out.stdout) {
        Ok(list) => Read::Value(qdiscs_by_device(&list)),
        Err(e) => Read::Unreadable(format!("tc -j qdisc show: not JSON: {e}")),
    }
}

/// `tc -j qdisc show`'s entries by device, one line each, sorted.
pub(super) fn qdiscs_by_device(list: &[serde_json::Value]) -> BTreeMap<String, Vec<String>> {
    let mut by_dev: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for q in list {
        let Some(dev) = q["dev"].as_str() else { continue };
        by_dev.entry(dev.to_string()).or_default().push(qdisc_line(q));
    }
    for lines in by_dev.values_mut() {
        lines.sort();
    }
    by_dev
}

/// One qdisc as `KIND HANDLE parent PARENT OPTIONS`. Handles the kernel
/// picked itself (majors 8000: and up, given to a qdisc added without a
/// handle) are written `auto:`: the same layout made again gets other
/// numbers, and the numbers are not a setting. `refcnt` (how many hold
/// it) is left out for the same reason.
fn qdisc_line(q: &serde_json::Value) -> String {
    let kind = q["kind"].as_str().unwrap_or("?");
    let handle = normalise_handle(q["handle"].as_str().unwrap_or("?"));
    let parent = if q["root"].as_bool() == Some(true) { "root".to_string() } else { normalise_handle(q["parent"].as_str().unwrap_or("?")) };
    let options = q.get("options").map_or_else(String::new, |o| o.to_string());
    format!("{kind} {handle} parent {parent} {options}").trim_end().to_string()
}

fn normalise_handle(handle: &str) -> String {
    match handle.split_once(':') {
        Some((major, minor)) if u32::from_str_radix(major, 16).is_ok_and(|m| m >= 0x8000 && m != 0xffff) => format!("auto:{minor}"),
        _ => handle.to_string(),
    }
}

fn read_block_schedulers() -> BTreeMap<String, Reading> {
    names("/sys/block")
        .into_iter()
        .filter_map(|disk| {
            let path = format!("/sys/block/{disk}/queue/scheduler");
            if !Path::new(&path).exists() {
                return None;
            }
            let selected = text(&path).map(|t| selected_scheduler(&t));
            Some((disk, Read::from_result(selected)))
        })
        .collect()
}

/// The scheduler in brackets (`none [mq-deadline] kyber`), or the whole
/// text when none is (a disk with one scheduler may list it bare).
pub(super) fn selected_scheduler(text: &str) -> String {
    crate::journal::selected_scheduler(text).unwrap_or_else(|| text.trim().to_string())
}

/// Every directory under `/sys/fs/cgroup` whose name contains `irqlab`,
/// in each v1 hierarchy and the v2 one (a v2 root mounted there, or at
/// `unified` beside v1 ones). Symbolic links (`cpu,cpuacct` → `cpu`) are
/// not followed: each hierarchy is walked once.
fn read_irqlab_cgroups() -> Vec<String> {
    let mut found = Vec::new();
    walk_cgroups(Path::new("/sys/fs/cgroup"), 0, &mut found);
    found.sort();
    found
}

fn walk_cgroups(dir: &Path, depth: usize, found: &mut Vec<String>) {
    // irqlab makes its cgroups at most a few levels down; systemd's trees
    // go deeper and are never irqlab's.
    if depth > 6 {
        return;
    }
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for e in entries.flatten() {
        if !e.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        let path = e.path();
        if e.file_name().to_string_lossy().contains("irqlab") {
            found.push(path.display().to_string());
        }
        walk_cgroups(&path, depth + 1, found);
    }
}
