//! Which keys each place of a scenario file may hold. A key that belongs
//! nowhere, or to another task, traffic, server or metric kind than the
//! one its table names, is an error at the key, naming the keys valid
//! there. Runs before serde reads the file (whose `deny_unknown_fields`
//! would otherwise answer with the union of every kind's keys).
//!
//! A new scenario key goes into the list of its place here and into the
//! raw, spec and build steps (see the module documentation of
//! [`super`]); `[policy]` parameters are checked by the policy itself.

use irqlab_analysis::{InputError, Location};
use toml_edit::{ImDocument, Item, TableLike};

const TOP: &[&str] =
    &["name", "description", "machine", "nic", "disk", "threads", "irq", "socket", "task", "traffic", "policy", "run", "metric"];
const MACHINE: &[&str] = &[
    "hz",
    "cores",
    "kernel",
    "softirq",
    "scheduler",
    "ksoftirqd_nice",
    "irq_time_accounting",
    "netdev_max_backlog",
    "netdev_budget",
    "netdev_budget_usecs",
    "costs",
];
const MACHINE_COSTS: &[&str] = &["irq_entry", "irq_exit", "tick", "context_switch", "irq_primary", "hrtimer", "ipi"];
const NIC: &[&str] =
    &["name", "ring", "napi", "weight", "coalesce_frames", "coalesce_usecs", "cpu", "rps_cpu", "threaded", "napi_cpu", "costs", "tx"];
const NIC_COSTS: &[&str] = &["irq", "irq_per_packet", "icmp_echo", "icmp_no_reply", "udp", "rps_enqueue"];
const NIC_TX: &[&str] = &["queue", "link", "irq", "complete"];
const DISK: &[&str] = &["name", "rpm", "seek_min", "seek_full", "overhead", "sectors_per_track", "costs"];
const DISK_COSTS: &[&str] = &["irq", "block_softirq"];
const THREADS: &[&str] = &["net_rx", "net_tx", "nic_irq", "ksoftirqd", "napi"];
const IRQ: &[&str] = &["name", "interval", "poisson", "handler", "bottom_half", "vector", "cpu"];
const SOCKET: &[&str] = &["name", "rcvbuf"];
const RUN: &[&str] = &["duration", "seed", "warmup"];

/// Scheduling keys every task and kernel thread has.
const SCHED: &[&str] = &["policy", "priority", "nice", "runtime", "deadline", "period", "server"];
const TASK_COMMON: &[&str] = &["name", "kind", "cpu"];
const EXEC: &[&str] = &["exec", "exec_max", "exec_dist"];

/// The keys of one task kind, besides [`TASK_COMMON`] and [`SCHED`].
fn task_keys(kind: &str) -> Option<Vec<&'static str>> {
    Some(match kind {
        "periodic" => [EXEC, &["offset", "jobs", "poll", "recv_cost"]].concat(),
        "cpu-loop" | "probe" => vec!["run", "sleep"],
        "udp-server" => vec!["socket", "recv_cost", "user_cost", "reply_size", "send_cost"],
        "media-player" => [EXEC, &["frames", "keep_frames", "kernel_cost"]].concat(),
        "disk-reader" => vec!["pattern", "intensity", "block", "issue_cost"],
        _ => return None,
    })
}

fn traffic_keys(kind: &str) -> Option<&'static [&'static str]> {
    Some(match kind {
        "ping-flood" => &["interval", "reply"],
        "heartbeat" => &["interval", "socket"],
        "constant" | "poisson" => &["interval", "socket", "reply"],
        "mmpp2" => &["socket", "reply", "burst", "spacing", "gap"],
        _ => return None,
    })
}
const TRAFFIC_COMMON: &[&str] = &["kind", "name", "size", "link", "start", "stop"];

fn server_keys(kind: &str) -> Option<&'static [&'static str]> {
    Some(match kind {
        "sporadic" => &["max_repl", "low_priority", "granularity", "accounting"],
        "polling" | "deferrable" => &[],
        _ => return None,
    })
}
const SERVER_COMMON: &[&str] = &["kind", "budget", "period"];

fn metric_keys(kind: &str) -> Option<&'static [&'static str]> {
    Some(match kind {
        "bh_time" => &["interval"],
        "probe" => &["task", "windows", "from", "to", "points"],
        _ => return None,
    })
}

/// Checks every key of `text` against its place; syntax errors are left
/// to serde (which reports them with their location).
pub(super) fn check(file: &str, text: &str) -> Result<(), InputError> {
    let Ok(doc) = ImDocument::parse(text) else { return Ok(()) };
    let c = Checker { file, text };
    let top = doc.as_table();
    c.keys(top, "the top level", TOP)?;
    for (key, item) in top.iter() {
        match key {
            "machine" => c.nested(item, "[machine]", MACHINE, &[("costs", "[machine.costs]", MACHINE_COSTS)])?,
            "nic" => {
                c.nested(item, "[nic]", NIC, &[("costs", "[nic.costs]", NIC_COSTS), ("tx", "[nic.tx]", NIC_TX)])?;
            }
            "disk" => c.nested(item, "[disk]", DISK, &[("costs", "[disk.costs]", DISK_COSTS)])?,
            "run" => c.nested(item, "[run]", RUN, &[])?,
            "threads" => c.threads(item)?,
            "irq" => c.each(item, |t| c.keys(t, "[[irq]]", IRQ))?,
            "socket" => c.each(item, |t| c.keys(t, "[[socket]]", SOCKET))?,
            "task" => c.each(item, |t| c.task(t))?,
            "traffic" => c.each(item, |t| c.by_kind(t, "[[traffic]]", TRAFFIC_COMMON, traffic_keys))?,
            "metric" => c.each(item, |t| c.by_kind(t, "[[metric]]", &["kind"], metric_keys))?,
            _ => {}
        }
    }
    Ok(())
}

struct Checker<'a> {
    file: &'a str,
    text: &'a str,
}

fn kind_of(t: &dyn TableLike) -> Option<&str> {
    t.get("kind").and_then(Item::as_str)
}

impl Checker<'_> {
    /// Every key of `t` must be one of `valid`.
    fn keys(&self, t: &dyn TableLike, place: &str, valid: &[&str]) -> Result<(), InputError> {
        for (key, item) in t.iter() {
            if !valid.contains(&key) {
                let span = t.get_key_value(key).and_then(|(k, _)| k.span()).or_else(|| item.span());
                let location = span.map_or_else(|| Location::file_only(self.file), |s| Location::at_span(self.file, self.text, s));
                return Err(InputError::at(format!("unknown key `{key}` in {place}; valid keys: {}", valid.join(", ")), location));
            }
        }
        Ok(())
    }

    /// A table and its sub-tables (`[nic]`, `[nic.costs]`, ...).
    fn nested(&self, item: &Item, place: &str, valid: &[&str], subs: &[(&str, &str, &[&str])]) -> Result<(), InputError> {
        let Some(t) = item.as_table_like() else { return Ok(()) };
        self.keys(t, place, valid)?;
        for (key, sub_place, sub_valid) in subs {
            if let Some(s) = t.get(key).and_then(Item::as_table_like) {
                self.keys(s, sub_place, sub_valid)?;
            }
        }
        Ok(())
    }

    /// Every table of an array of tables (`[[task]]` or `task = [{...}]`).
    fn each(&self, item: &Item, mut f: impl FnMut(&dyn TableLike) -> Result<(), InputError>) -> Result<(), InputError> {
        if let Some(a) = item.as_array_of_tables() {
            for t in a.iter() {
                f(t)?;
            }
        } else if let Some(a) = item.as_array() {
            for t in a.iter().filter_map(|v| v.as_inline_table()) {
                f(t)?;
            }
        }
        Ok(())
    }

    /// A table whose `kind` selects its keys: `common` plus the kind's
    /// (all kinds' when the kind is missing or unknown: that is reported
    /// later, with the known kinds).
    fn by_kind(
        &self,
        t: &dyn TableLike,
        place: &str,
        common: &[&str],
        kind_keys: fn(&str) -> Option<&'static [&'static str]>,
    ) -> Result<(), InputError> {
        match kind_of(t).and_then(|k| Some((k, kind_keys(k)?))) {
            Some((kind, keys)) => self.keys(t, &format!("{place} of kind \"{kind}\""), &[common, keys].concat()),
            None => Ok(()),
        }
    }

    fn task(&self, t: &dyn TableLike) -> Result<(), InputError> {
        let Some((kind, own)) = kind_of(t).and_then(|k| Some((k, task_keys(k)?))) else { return Ok(()) };
        self.keys(t, &format!("[[task]] of kind \"{kind}\""), &[TASK_COMMON, SCHED, &own].concat())?;
        self.server(t, &format!("the server of a [[task]] of kind \"{kind}\""))
    }

    fn threads(&self, item: &Item) -> Result<(), InputError> {
        let Some(threads) = item.as_table_like() else { return Ok(()) };
        self.keys(threads, "[threads]", THREADS)?;
        for (name, thread) in threads.iter() {
            if let Some(t) = thread.as_table_like() {
                self.keys(t, &format!("[threads.{name}]"), SCHED)?;
                self.server(t, &format!("[threads.{name}.server]"))?;
            }
        }
        Ok(())
    }

    fn server(&self, owner: &dyn TableLike, place: &str) -> Result<(), InputError> {
        match owner.get("server").and_then(Item::as_table_like) {
            Some(s) => self.by_kind(s, place, SERVER_COMMON, server_keys),
            None => Ok(()),
        }
    }
}
