//! What differs between two snapshots: pure, on the documents alone.
//!
//! Objects that exist in only one snapshot are not differences when they
//! come and go by themselves (threads, IRQs, disks, NAPI instances, a
//! sysctl another kernel lacks) or are shared infrastructure (the
//! testbed's devices, noted instead); a network device other than the
//! testbed's, or a cgroup irqlab made, that appeared or vanished is. A
//! value readable in one snapshot and not in the other is a difference;
//! unreadable in both is not (nothing to compare). Masks and CPU lists are
//! compared by the CPUs they name (`00000003` is `3`, `0,1` is `0-1`).

use super::{is_testbed_device, short_sched, MachineState, NetDevice, Read, Reading};
use crate::rt::parse_cpu_list;
use crate::rt::parse_cpu_mask_hex;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// One setting that differs: `thread 1234 (irq/11-virtio0) policy fifo:50 -> other`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Difference {
    /// The object: `thread 1234 (irq/11-virtio0)`, `IRQ 11`, `eth0 rx-0`.
    pub object: String,
    /// Its setting: `policy`, `affinity`, `rps_cpus`; empty when the
    /// object itself appeared or vanished.
    pub setting: String,
    pub before: String,
    pub after: String,
}

impl std::fmt::Display for Difference {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.setting.is_empty() {
            write!(f, "{} {} -> {}", self.object, self.before, self.after)
        } else {
            write!(f, "{} {} {} -> {}", self.object, self.setting, self.before, self.after)
        }
    }
}

/// The differences, and what changed without being one (the testbed
/// coming or going).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Diff {
    pub differences: Vec<Difference>,
    pub notes: Vec<String>,
}

impl Diff {
    fn push(&mut self, object: impl Into<String>, setting: &str, before: impl Into<String>, after: impl Into<String>) {
        self.differences.push(Difference {
            object: object.into(),
            setting: setting.to_string(),
            before: before.into(),
            after: after.into(),
        });
    }

    /// Compares one reading; `same` says whether two values mean the same.
    fn reading(&mut self, object: impl Into<String>, setting: &str, before: &Reading, after: &Reading, same: fn(&str, &str) -> bool) {
        self.read(object, setting, before, after, |b: &String, a: &String| same(b, a), String::clone);
    }

    fn read<T>(
        &mut self,
        object: impl Into<String>,
        setting: &str,
        before: &Read<T>,
        after: &Read<T>,
        same: impl Fn(&T, &T) -> bool,
        show: impl Fn(&T) -> String,
    ) {
        let shown = |r: &Read<T>| match r {
            Read::Value(v) => show(v),
            Read::Unreadable(why) => format!("unreadable ({why})"),
        };
        let differ = match (before, after) {
            (Read::Value(b), Read::Value(a)) => !same(b, a),
            (Read::Unreadable(_), Read::Unreadable(_)) => false,
            _ => true,
        };
        if differ {
            self.push(object, setting, shown(before), shown(after));
        }
    }
}

fn same_text(a: &str, b: &str) -> bool {
    a.split_whitespace().eq(b.split_whitespace())
}

fn same_list(a: &str, b: &str) -> bool {
    match (parse_cpu_list(a), parse_cpu_list(b)) {
        (Ok(a), Ok(b)) => a == b,
        _ => same_text(a, b),
    }
}

fn same_mask(a: &str, b: &str) -> bool {
    match (parse_cpu_mask_hex(a), parse_cpu_mask_hex(b)) {
        (Ok(a), Ok(b)) => a == b,
        _ => same_text(a, b),
    }
}

/// The `net.core` sysctls that are CPU masks.
const NET_CORE_MASKS: [&str; 2] = ["flow_limit_cpu_bitmap", "rps_default_mask"];

/// What differs from `before` to `after`.
pub fn diff(before: &MachineState, after: &MachineState) -> Diff {
    let mut d = Diff::default();
    if before.kernel != after.kernel {
        d.push("kernel", "", &before.kernel, &after.kernel);
    }
    // Threads and IRQs of another boot are other objects, whatever their
    // numbers.
    if before.boot_id == after.boot_id {
        threads(&mut d, before, after);
        for (irq, b) in &before.irq_affinity {
            if let Some(a) = after.irq_affinity.get(irq) {
                d.reading(format!("IRQ {irq}"), "affinity", b, a, same_list);
            }
        }
    } else {
        d.push("boot", "", &before.boot_id, &after.boot_id);
    }
    d.reading("IRQ default", "affinity", &before.default_irq_affinity, &after.default_irq_affinity, same_mask);
    net_devices(&mut d, &before.net_devices, &after.net_devices);
    for (name, b) in &before.net_core {
        if let Some(a) = after.net_core.get(name) {
            let same = if NET_CORE_MASKS.contains(&name.as_str()) { same_mask } else { same_text };
            d.reading(format!("net.core.{name}"), "", b, a, same);
        }
    }
    qdiscs(&mut d, before, after);
    for (disk, b) in &before.block_schedulers {
        if let Some(a) = after.block_schedulers.get(disk) {
            d.reading(format!("disk {disk}"), "scheduler", b, a, same_text);
        }
    }
    let (b, a): (BTreeSet<_>, BTreeSet<_>) = (before.irqlab_cgroups.iter().collect(), after.irqlab_cgroups.iter().collect());
    for gone in b.difference(&a) {
        d.push(format!("cgroup {gone}"), "", "present", "absent");
    }
    for new in a.difference(&b) {
        d.push(format!("cgroup {new}"), "", "absent", "present");
    }
    for (name, b) in &before.sched_rt {
        if let Some(a) = after.sched_rt.get(name) {
            d.reading(format!("kernel.{name}"), "", b, a, same_text);
        }
    }
    for (path, b) in &before.cgroup_roots {
        if let Some(a) = after.cgroup_roots.get(path) {
            d.reading(path.clone(), "", b, a, same_words);
        }
    }
    let (b, a): (BTreeSet<_>, BTreeSet<_>) = (before.debugfs_mounts.iter().collect(), after.debugfs_mounts.iter().collect());
    for gone in b.difference(&a) {
        d.push(format!("debugfs at {gone}"), "", "mounted", "unmounted");
    }
    for new in a.difference(&b) {
        d.push(format!("debugfs at {new}"), "", "unmounted", "mounted");
    }
    for (knob, b) in &before.sched_debug {
        if let Some(a) = after.sched_debug.get(knob) {
            d.reading(format!("sched/{knob}"), "", b, a, same_words);
        }
    }
    d
}

/// The same words in any order (`cgroup.subtree_control`, `sched/features`).
fn same_words(a: &str, b: &str) -> bool {
    let words = |t: &str| t.split_whitespace().map(str::to_string).collect::<BTreeSet<_>>();
    words(a) == words(b)
}

/// Threads in both snapshots (same tid and start time); one in only one
/// has started or exited, which is no setting.
fn threads(d: &mut Diff, before: &MachineState, after: &MachineState) {
    let now: HashMap<(i32, u64), _> = after.threads.iter().map(|t| ((t.tid, t.start_ticks), t)).collect();
    for b in &before.threads {
        let Some(a) = now.get(&(b.tid, b.start_ticks)) else { continue };
        let object = format!("thread {} ({})", b.tid, b.comm);
        d.read(object.clone(), "policy", &b.sched, &a.sched, |x, y| x == y, short_sched);
        d.reading(object, "affinity", &b.affinity, &a.affinity, same_list);
    }
}

fn net_devices(d: &mut Diff, before: &BTreeMap<String, NetDevice>, after: &BTreeMap<String, NetDevice>) {
    let names: BTreeSet<&String> = before.keys().chain(after.keys()).collect();
    for name in names {
        let (b, a) = match (before.get(name), after.get(name)) {
            (Some(b), Some(a)) => (b, a),
            (b, _) => {
                let (was, is) = if b.is_some() { ("present", "absent") } else { ("absent", "present") };
                if is_testbed_device(name) {
                    d.notes.push(format!("testbed device {name} {was} -> {is} (the testbed is shared: not a difference)"));
                } else {
                    d.push(format!("network device {name}"), "", was, is);
                }
                continue;
            }
        };
        for (queue, bm) in &b.rps_cpus {
            if let Some(am) = a.rps_cpus.get(queue) {
                d.reading(format!("{name} {queue}"), "rps_cpus", bm, am, same_mask);
            }
        }
        for (queue, bm) in &b.xps_cpus {
            if let Some(am) = a.xps_cpus.get(queue) {
                d.reading(format!("{name} {queue}"), "xps_cpus", bm, am, same_mask);
            }
        }
        for (setting, bv) in &b.settings {
            if let Some(av) = a.settings.get(setting) {
                d.reading(name.clone(), setting, bv, av, same_text);
            }
        }
        // NAPI ids are the device's: a device made again (another
        // ifindex) has other instances.
        if let (Read::Value(bn), Read::Value(an), true) = (&b.napi, &a.napi, b.ifindex == a.ifindex) {
            for bi in bn {
                let Some(ai) = an.iter().find(|n| n.id == bi.id) else { continue };
                let object = format!("{name} NAPI {}", bi.id);
                let show = |v: Option<String>| v.unwrap_or_else(|| "not reported".into());
                let knobs = [
                    ("defer-hard-irqs", bi.defer_hard_irqs.map(|v| v.to_string()), ai.defer_hard_irqs.map(|v| v.to_string())),
                    ("gro-flush-timeout", bi.gro_flush_timeout_ns.map(|v| v.to_string()), ai.gro_flush_timeout_ns.map(|v| v.to_string())),
                    (
                        "irq-suspend-timeout",
                        bi.irq_suspend_timeout_ns.map(|v| v.to_string()),
                        ai.irq_suspend_timeout_ns.map(|v| v.to_string()),
                    ),
                    ("threaded", bi.threaded.map(|v| v.to_string()), ai.threaded.map(|v| v.to_string())),
                ];
                for (knob, bv, av) in knobs {
                    if bv != av {
                        d.push(object.clone(), knob, show(bv), show(av));
                    }
                }
            }
        }
    }
}

/// Qdiscs of the devices in both snapshots (a device that came or went is
/// said once, above).
fn qdiscs(d: &mut Diff, before: &MachineState, after: &MachineState) {
    let (b, a) = match (&before.qdiscs, &after.qdiscs) {
        (Read::Value(b), Read::Value(a)) => (b, a),
        (b, a) => {
            d.read("qdiscs", "", b, a, |_, _| true, |_| "read".to_string());
            return;
        }
    };
    for dev in before.net_devices.keys().filter(|dev| after.net_devices.contains_key(*dev)) {
        let none = Vec::new();
        let (bq, aq) = (b.get(dev).unwrap_or(&none), a.get(dev).unwrap_or(&none));
        if bq != aq {
            let show = |q: &Vec<String>| if q.is_empty() { "none".to_string() } else { q.join("; ") };
            d.push(dev.clone(), "qdiscs", show(bq), show(aq));
        }
    }
}

#[cfg(test)]
mod tests;
