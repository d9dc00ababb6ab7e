//! Chrome trace-event export (opens in Perfetto / chrome://tracing): one
//! track per CPU context and one per task, consecutive pieces of the same
//! work merged. Only kept when `--trace` is asked for, since it grows with
//! the run; capped at `max_events` (the document then says it is
//! truncated).

use irqlab_analysis::Nanos;
use serde_json::{json, Value};
use std::collections::BTreeMap;

pub struct Trace {
    tracks: BTreeMap<String, u32>,
    events: Vec<(u32, String, Nanos, Nanos)>,
    pub max_events: usize,
    pub truncated: bool,
}

impl Default for Trace {
    fn default() -> Self {
        Trace { tracks: BTreeMap::new(), events: Vec::new(), max_events: 2_000_000, truncated: false }
    }
}

impl Trace {
    /// Records that `name` ran on `track` ("hardirq", "softirq", "task",
    /// "cpu") during [start, end).
    pub fn segment(&mut self, track: &'static str, name: String, start: Nanos, end: Nanos) {
        let key = if track == "task" { format!("task {name}") } else { track.to_string() };
        let next = self.tracks.len() as u32 + 1;
        let tid = *self.tracks.entry(key).or_insert(next);
        if let Some(last) = self.events.last_mut() {
            if last.0 == tid && last.1 == name && last.3 == start {
                last.3 = end;
                return;
            }
        }
        if self.events.len() >= self.max_events {
            self.truncated = true;
            return;
        }
        self.events.push((tid, name, start, end));
    }

    pub fn to_json(&self) -> Value {
        let mut ev: Vec<Value> = self
            .tracks
            .iter()
            .map(|(name, tid)| json!({"name": "thread_name", "ph": "M", "pid": 1, "tid": tid, "args": {"name": name}}))
            .collect();
        for (tid, name, s, e) in &self.events {
            ev.push(json!({"name": name, "ph": "X", "pid": 1, "tid": tid,
                           "ts": *s as f64 / 1000.0, "dur": (*e - *s) as f64 / 1000.0}));
        }
        json!({"traceEvents": ev, "displayTimeUnit": "ns",
               "otherData": {"producer": "irqlab sim", "truncated": self.truncated}})
    }
}
