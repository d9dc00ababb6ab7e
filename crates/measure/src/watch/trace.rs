//! `irqlab watch --trace FILE`: the kept spikes' recorder windows as a
//! Chrome trace-event document (opens in Perfetto or chrome://tracing),
//! one process per watched CPU with a track for what ran there and one for
//! the measuring thread's late wake-ups, each spike's verdict in its args.

use super::{SpikeRecord, WatchReport};
use serde_json::{json, Value};

/// Track ids inside a CPU's process.
const RAN: u32 = 1;
const LATE: u32 = 2;

/// Trace-event timestamps are microseconds.
fn us(ns: u64) -> f64 {
    ns as f64 / 1e3
}

/// The trace of `report`'s kept spikes.
pub fn trace_events(report: &WatchReport) -> Value {
    let mut events = Vec::new();
    for c in &report.cpus {
        let pid = c.cpu as u32;
        events.push(json!({"name": "process_name", "ph": "M", "pid": pid, "args": {"name": format!("CPU {}", c.cpu)}}));
        events.push(json!({"name": "thread_name", "ph": "M", "pid": pid, "tid": RAN, "args": {"name": "what ran"}}));
        events.push(json!({"name": "thread_name", "ph": "M", "pid": pid, "tid": LATE, "args": {"name": "late wake-ups"}}));
    }
    for s in &report.spikes {
        events.extend(spike_events(s));
    }
    json!({
        "traceEvents": events,
        "displayTimeUnit": "ns",
        "otherData": {"producer": "irqlab watch", "clock": "CLOCK_MONOTONIC", "spikes_kept": report.spikes.len(), "spikes_total": report.spikes_total},
    })
}

fn spike_events(s: &SpikeRecord) -> Vec<Value> {
    let pid = s.cpu as u32;
    let mut out: Vec<Value> = s
        .window
        .iter()
        .map(|w| json!({"name": w.source, "ph": "X", "pid": pid, "tid": RAN, "ts": us(w.start_ns), "dur": us(w.end_ns - w.start_ns)}))
        .collect();
    let verdict = s.cause.as_ref().map_or("not explained (no flight recorder)", |c| c.verdict.as_str());
    let culprit = s.cause.as_ref().and_then(|c| c.culprit.as_ref()).map(|c| c.label.as_str());
    out.push(json!({
        "name": format!("{:.0} us late", us(s.latency_ns)),
        "ph": "X", "pid": pid, "tid": LATE,
        "ts": us(s.due_ns), "dur": us(s.latency_ns),
        "args": {"verdict": verdict, "culprit": culprit, "tid": s.tid},
    }));
    out
}

#[cfg(test)]
mod tests {
    use super::super::{CpuWatch, RecorderInfo, WindowSegment};
    use super::*;
    use irqlab_host::run_end::EndedBy;

    #[test]
    fn a_spike_and_its_window_are_events_on_their_cpus_tracks() {
        let spike = SpikeRecord {
            cpu: 1,
            tid: 77,
            due_ns: 1_000_000,
            woke_ns: 1_900_000,
            latency_ns: 900_000,
            cause: None,
            window: vec![WindowSegment { start_ns: 1_000_000, end_ns: 1_890_000, source: "inject/42 FIFO 90".into() }],
        };
        let report = WatchReport {
            schema: super::super::SCHEMA.into(),
            complete: true,
            ended_by: Some(EndedBy::Duration),
            interval_ns: 1_000_000,
            priority: 80,
            duration_ns: Some(1),
            elapsed_ns: 1,
            threshold_ns: Some(500_000),
            cpus: vec![CpuWatch {
                cpu: 1,
                tid: 77,
                cycles: 1,
                min_ns: None,
                mean_ns: None,
                max_ns: None,
                p99_ns: None,
                p999_ns: None,
                spikes: 1,
                histogram: Default::default(),
            }],
            spikes_total: 1,
            spikes: vec![spike],
            recorder: RecorderInfo { available: false, note: String::new(), keep_ns: 0, lost_segments: 0 },
            notes: Vec::new(),
        };
        let t = trace_events(&report);
        let events = t["traceEvents"].as_array().unwrap();
        let ran: Vec<&Value> = events.iter().filter(|e| e["ph"] == "X" && e["tid"] == RAN).collect();
        assert_eq!(ran.len(), 1);
        assert_eq!(
            (ran[0]["name"].as_str(), ran[0]["pid"].as_u64(), ran[0]["ts"].as_f64(), ran[0]["dur"].as_f64()),
            (Some("inject/42 FIFO 90"), Some(1), Some(1000.0), Some(890.0))
        );
        let late: Vec<&Value> = events.iter().filter(|e| e["ph"] == "X" && e["tid"] == LATE).collect();
        assert_eq!((late[0]["name"].as_str(), late[0]["dur"].as_f64()), (Some("900 us late"), Some(900.0)));
        assert_eq!(late[0]["args"]["verdict"], "not explained (no flight recorder)");
        assert_eq!(t["otherData"]["spikes_total"], 1);
    }
}
