//! The flight recorder: the last `keep_ns` of one CPU's timeline (the
//! gap-source monitor's segments), in a ring that never grows with the
//! run. A late wake-up is explained from it once the monitor has sent the
//! segments past that wake-up.

use crate::probe::sources::RawSegment;
use std::collections::VecDeque;

/// One CPU's recent segments, oldest first.
#[derive(Debug)]
pub struct Recorder {
    keep_ns: u64,
    segments: VecDeque<RawSegment>,
    /// The latest segment end received: how far the recorder has heard.
    heard_until_ns: u64,
    /// Most segments held at once (for the report: the ring's size in
    /// practice).
    pub most_held: usize,
}

impl Recorder {
    pub fn new(keep_ns: u64) -> Self {
        Recorder { keep_ns, segments: VecDeque::new(), heard_until_ns: 0, most_held: 0 }
    }

    /// Adds a batch from the monitor and forgets what ended more than
    /// `keep_ns` before the latest end heard of.
    pub fn push(&mut self, batch: impl IntoIterator<Item = RawSegment>) {
        for s in batch {
            self.heard_until_ns = self.heard_until_ns.max(s.end_ns);
            self.segments.push_back(s);
        }
        let horizon = self.heard_until_ns.saturating_sub(self.keep_ns);
        while self.segments.front().is_some_and(|s| s.end_ns < horizon) {
            self.segments.pop_front();
        }
        self.most_held = self.most_held.max(self.segments.len());
    }

    /// How far (CLOCK_MONOTONIC ns) the recorder has heard.
    pub fn heard_until_ns(&self) -> u64 {
        self.heard_until_ns
    }

    /// The segments that overlap `[from_ns, to_ns)`, oldest first.
    pub fn between(&self, from_ns: u64, to_ns: u64) -> Vec<RawSegment> {
        self.segments.iter().filter(|s| s.end_ns > from_ns && s.start_ns < to_ns).cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::probe::sources::RawSource;

    fn seg(start_ns: u64, end_ns: u64) -> RawSegment {
        RawSegment { start_ns, end_ns, source: RawSource { kind: 3, id: 1, tgid: 1, policy: 0, rt_priority: 0, nice: 0, name: "x".into() } }
    }

    #[test]
    fn the_ring_keeps_only_the_last_window() {
        let mut r = Recorder::new(1_000);
        for i in 0..10_000u64 {
            r.push([seg(i * 100, i * 100 + 100)]);
        }
        // 1,000 ns at 100 ns a segment: eleven (the one at the horizon too).
        assert!(r.most_held <= 12, "{}", r.most_held);
        assert_eq!(r.heard_until_ns(), 1_000_000);
        let recent = r.between(999_500, 1_000_000);
        assert_eq!(recent.iter().map(|s| s.start_ns).collect::<Vec<_>>(), vec![999_500, 999_600, 999_700, 999_800, 999_900]);
        assert!(r.between(0, 1_000).is_empty(), "forgotten");
    }
}
