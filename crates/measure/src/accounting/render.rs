//! Text forms of a [`Report`]: the table (sorted by stolen time: "who is
//! being robbed?"), and the Prometheus text format for node_exporter's
//! textfile collector.

use super::report::{Report, TaskReport};
use std::fmt::Write;

fn ms(ns: u64) -> String {
    format!("{:.1}", ns as f64 / 1e6)
}

fn pct(part: u64, whole: u64) -> String {
    if whole == 0 {
        "-".into()
    } else {
        format!("{:.1}%", 100.0 * part as f64 / whole as f64)
    }
}

/// The largest entry of a breakdown, as "NAME" for the table.
fn top_source(t: &TaskReport) -> String {
    t.stolen_by_softirq_ns
        .iter()
        .map(|(k, v)| (k.clone(), *v))
        .chain(t.stolen_by_irq_ns.iter().map(|(k, v)| (k.clone(), *v)))
        .max_by_key(|(_, v)| *v)
        .map(|(k, _)| k)
        .unwrap_or_else(|| "-".into())
}

/// `text` in at most `width` characters, an ellipsis marking a cut (a
/// shared IRQ line's action list can be long).
fn clip(text: &str, width: usize) -> String {
    if text.chars().count() <= width {
        return text.to_string();
    }
    text.chars().take(width - 1).chain(std::iter::once('…')).collect()
}

/// The task table: up to `limit` tasks (of those whose tid/tgid is in
/// `pids`, all when empty), then per-CPU and system lines.
pub fn table(report: &Report, pids: &[u32], limit: usize) -> String {
    let mut out = String::new();
    let secs = report.duration_ns as f64 / 1e9;
    let _ = writeln!(out, "irqlab accounting over {secs:.2} s{}  (times in ms)", if report.complete { "" } else { " (partial)" });
    let _ = writeln!(
        out,
        "{:>7} {:>7} {:<16} {:<11} {:>10} {:>9} {:>8} {:>9} {:<24} {:>9} {:>9} {:>8}",
        "TID", "TGID", "COMM", "KIND", "RUN", "STOLEN", "STOLEN%", "SERVED", "MOSTLY", "THREAD", "/PROC", "PROC-ERR"
    );
    for t in report.tasks_of(pids).into_iter().take(limit) {
        let comm: String = t.comm.chars().take(16).collect();
        let proc_ns = t.proc_charged_ns.map(ms).unwrap_or_else(|| if t.exited { "exited".into() } else { "-".into() });
        let err = t.proc_error.map(|e| format!("{:+.1}%", e * 100.0)).unwrap_or_else(|| "-".into());
        let _ = writeln!(
            out,
            "{:>7} {:>7} {:<16} {:<11} {:>10} {:>9} {:>8} {:>9} {:<24} {:>9} {:>9} {:>8}",
            t.tid,
            t.tgid,
            comm,
            t.kind.label(),
            ms(t.time.run_ns),
            ms(t.time.stolen_ns),
            pct(t.time.stolen_ns, t.time.run_ns + t.time.stolen_ns),
            ms(t.served_softirq_ns()),
            clip(&top_source(t), 24),
            ms(t.served_by_thread_ns),
            proc_ns,
            err
        );
    }
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "{:>5} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>8}  softirq by vector",
        "CPU", "WALL", "RUN", "IDLE", "HARDIRQ", "SOFTIRQ", "ORPHAN", "STEAL"
    );
    for c in &report.cpus {
        let vectors: Vec<String> = c.softirq_by_vector_ns.iter().map(|(k, v)| format!("{k}={}", ms(*v))).collect();
        let _ = writeln!(
            out,
            "{:>5} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>8}  {}",
            c.cpu,
            ms(c.wall_ns),
            ms(c.time.run_ns),
            ms(c.time.idle_ns),
            ms(c.time.hardirq_ns),
            ms(c.time.softirq_ns),
            ms(c.orphan_softirq_ns),
            ms(c.steal_ns),
            vectors.join(" ")
        );
    }
    let t = &report.totals;
    let _ = writeln!(
        out,
        "{:>5} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>8}  served to tasks {} ms, orphan {} ms (threads {} ms)",
        "all",
        ms(t.wall_ns),
        ms(t.time.run_ns),
        ms(t.time.idle_ns),
        ms(t.time.hardirq_ns),
        ms(t.time.softirq_ns),
        ms(report.orphan.softirq_ns),
        ms(t.steal_ns),
        ms(t.served_softirq_ns),
        ms(report.orphan.softirq_ns),
        ms(report.orphan.thread_ns)
    );
    if !report.missing_tracepoints.is_empty() {
        let _ = writeln!(out, "not measured (tracepoints missing on this kernel): {}", report.missing_tracepoints.join(", "));
    }
    for note in &report.notes {
        let _ = writeln!(out, "note: {note}");
    }
    out
}

/// Escapes a Prometheus label value.
fn label(value: &str) -> String {
    value.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

/// Prometheus text exposition format (version 0.0.4), in seconds.
pub fn prometheus(report: &Report, pids: &[u32]) -> String {
    let mut out = String::new();
    let s = |ns: u64| ns as f64 / 1e9;
    let family = |out: &mut String, name: &str, help: &str| {
        let _ = writeln!(out, "# HELP {name} {help}");
        let _ = writeln!(out, "# TYPE {name} gauge");
    };
    let tasks = report.tasks_of(pids);
    let id = |t: &TaskReport| {
        let cpu = t.cpu.map(|c| format!(",cpu=\"{c}\"")).unwrap_or_default();
        format!("tid=\"{}\",tgid=\"{}\",comm=\"{}\",kind=\"{}\"{cpu}", t.tid, t.tgid, label(&t.comm), t.kind.label())
    };

    family(&mut out, "irqlab_task_run_seconds", "Time the task ran in its own context, interrupts excluded, over the measurement.");
    for t in &tasks {
        let _ = writeln!(out, "irqlab_task_run_seconds{{{}}} {}", id(t), s(t.time.run_ns));
    }
    family(&mut out, "irqlab_task_stolen_seconds", "Hard-IRQ and softirq time that ran while the task was current, by source.");
    for t in &tasks {
        for (name, ns) in &t.stolen_by_irq_ns {
            let _ = writeln!(out, "irqlab_task_stolen_seconds{{{},type=\"hardirq\",source=\"{}\"}} {}", id(t), label(name), s(*ns));
        }
        for (name, ns) in &t.stolen_by_softirq_ns {
            let _ = writeln!(out, "irqlab_task_stolen_seconds{{{},type=\"softirq\",source=\"{}\"}} {}", id(t), label(name), s(*ns));
        }
    }
    family(&mut out, "irqlab_task_served_seconds", "Interrupt work done on the task's behalf (softirq by vector, or service threads).");
    for t in &tasks {
        for (name, ns) in &t.served_by_softirq_ns {
            let _ = writeln!(out, "irqlab_task_served_seconds{{{},type=\"softirq\",source=\"{}\"}} {}", id(t), label(name), s(*ns));
        }
        if t.served_by_thread_ns > 0 {
            let _ = writeln!(out, "irqlab_task_served_seconds{{{},type=\"thread\",source=\"thread\"}} {}", id(t), s(t.served_by_thread_ns));
        }
    }
    family(&mut out, "irqlab_task_proc_charged_seconds", "utime+stime growth in /proc/<tid>/stat over the measurement.");
    for t in &tasks {
        if let Some(p) = t.proc_charged_ns {
            let _ = writeln!(out, "irqlab_task_proc_charged_seconds{{{}}} {}", id(t), s(p));
        }
    }
    family(&mut out, "irqlab_cpu_seconds", "Per-CPU wall time split into run, idle, hardirq and softirq.");
    for c in &report.cpus {
        for (mode, ns) in [("run", c.time.run_ns), ("idle", c.time.idle_ns), ("hardirq", c.time.hardirq_ns), ("softirq", c.time.softirq_ns)]
        {
            let _ = writeln!(out, "irqlab_cpu_seconds{{cpu=\"{}\",mode=\"{mode}\"}} {}", c.cpu, s(ns));
        }
    }
    family(&mut out, "irqlab_cpu_steal_seconds", "Per-CPU time the hypervisor took during the measurement (inside the modes above).");
    for c in &report.cpus {
        let _ = writeln!(out, "irqlab_cpu_steal_seconds{{cpu=\"{}\"}} {}", c.cpu, s(c.steal_ns));
    }
    family(&mut out, "irqlab_orphan_softirq_seconds", "Softirq time for which no beneficiary task was found, by vector.");
    for (name, ns) in &report.orphan.softirq_by_vector_ns {
        let _ = writeln!(out, "irqlab_orphan_softirq_seconds{{vector=\"{}\"}} {}", label(name), s(*ns));
    }
    family(&mut out, "irqlab_measurement_seconds", "Length of the measurement these figures cover.");
    let _ = writeln!(out, "irqlab_measurement_seconds {}", s(report.duration_ns));
    out
}

#[cfg(test)]
mod tests {
    use super::super::procfs::TaskKind;
    use super::super::report::{CpuReport, OrphanReport, Totals, SCHEMA};
    use super::*;
    use irqlab_analysis::cpu_time::{CpuTime, TaskTime};
    use std::collections::BTreeMap;

    fn report() -> Report {
        let task = |tid: u32, comm: &str, stolen: u64| TaskReport {
            tid,
            tgid: tid,
            comm: comm.into(),
            kind: TaskKind::User,
            cpu: None,
            time: TaskTime::new(1_000_000_000, 0, stolen, Some(0)),
            stolen_by_irq_ns: BTreeMap::new(),
            stolen_by_softirq_ns: [("NET_RX".to_string(), stolen)].into(),
            served_by_softirq_ns: BTreeMap::new(),
            served_by_cpu_ns: BTreeMap::new(),
            served_by_thread_ns: 0,
            proc_charged_ns: Some(1_100_000_000),
            proc_error: Some(0.1),
            exited: false,
            switches_in: 1,
        };
        Report {
            schema: SCHEMA.into(),
            complete: true,
            duration_ns: 2_000_000_000,
            totals: Totals {
                wall_ns: 2_000_000_000,
                time: CpuTime::default(),
                softirq_by_vector_ns: BTreeMap::new(),
                served_softirq_ns: 0,
                steal_ns: 4_000_000,
                reference_softirq_ns: None,
                reference_softirq_by_vector_ns: None,
            },
            cpus: vec![CpuReport {
                cpu: 0,
                wall_ns: 2_000_000_000,
                time: CpuTime { run_ns: 1, idle_ns: 1, hardirq_ns: 0, softirq_ns: 0 },
                softirq_by_vector_ns: BTreeMap::new(),
                hardirq_in_softirq_ns: 0,
                orphan_softirq_ns: 0,
                unaccounted_ns: 0,
                anomalies: 0,
                hidden_switches: 0,
                socket_events: 0,
                socket_events_no_owner: 0,
                socket_events_outside: 0,
                steal_ns: 4_000_000,
            }],
            orphan: OrphanReport::default(),
            tasks: vec![task(10, "robbed \"one\"", 300_000_000), task(11, "other", 1_000)],
            missing_tracepoints: vec!["sk_data_ready".into()],
            notes: vec![],
            machine: Default::default(),
        }
    }

    #[test]
    fn table_lists_tasks_in_report_order_and_filters_by_pid() {
        let r = report();
        let t = table(&r, &[], 10);
        let robbed = t.find("robbed").unwrap();
        let other = t.find("other").unwrap();
        assert!(robbed < other);
        assert!(t.contains("NET_RX"));
        assert!(t.contains("+10.0%"));
        assert!(t.contains("sk_data_ready"));
        let cpu_line = t.lines().find(|l| l.trim_start().starts_with("0 ")).unwrap();
        assert!(t.contains("STEAL") && cpu_line.contains(" 4.0 "), "{cpu_line}");
        let only = table(&r, &[11], 10);
        assert!(!only.contains("robbed") && only.contains("other"));
    }

    #[test]
    fn long_names_are_cut_with_an_ellipsis_and_short_ones_kept() {
        assert_eq!(clip("CAL:call-function-single", 24), "CAL:call-function-single");
        assert_eq!(clip("11:uhci_hcd:usb1, virtio2, eth0", 24), "11:uhci_hcd:usb1, virti…");
        assert_eq!(clip("11:uhci_hcd:usb1, virtio2, eth0", 24).chars().count(), 24);
    }

    #[test]
    fn prometheus_lines_are_well_formed() {
        let text = prometheus(&report(), &[]);
        assert!(text.contains(r#"comm="robbed \"one\"""#));
        assert!(text.contains("irqlab_task_stolen_seconds{tid=\"10\""));
        assert!(text.contains("irqlab_cpu_steal_seconds{cpu=\"0\"} 0.004"), "{text}");
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            let (_, value) = line.rsplit_once(' ').unwrap();
            assert!(value.parse::<f64>().is_ok(), "bad sample line {line}");
        }
        // Every sample belongs to a declared family.
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            let name = line.split(['{', ' ']).next().unwrap();
            assert!(text.contains(&format!("# TYPE {name} gauge")), "{name}");
        }
    }
}
