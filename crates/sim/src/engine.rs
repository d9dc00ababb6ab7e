//! The simulation engine: integer-ns clock, one event queue, named random
//! streams.
//!
//! Determinism rules: events at the same instant fire in the order they were
//! scheduled (a sequence number breaks ties, never the event's contents), and
//! every random source draws from its own stream derived from (seed, name),
//! so adding a source does not perturb the others.

use irqlab_analysis::Nanos;
use rand::SeedableRng;
use rand_pcg::Pcg64Mcg;
use std::cmp::Ordering;
use std::collections::BinaryHeap;

/// A handle that lets a scheduled event be cancelled lazily.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct EventId(u64);

struct Entry<E> {
    time: Nanos,
    seq: u64,
    event: E,
}

impl<E> PartialEq for Entry<E> {
    fn eq(&self, other: &Self) -> bool {
        self.time == other.time && self.seq == other.seq
    }
}
impl<E> Eq for Entry<E> {}
impl<E> PartialOrd for Entry<E> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl<E> Ord for Entry<E> {
    // Reversed: BinaryHeap is a max-heap, we want the earliest first.
    fn cmp(&self, other: &Self) -> Ordering {
        other.time.cmp(&self.time).then_with(|| other.seq.cmp(&self.seq))
    }
}

impl<E> Entry<E> {
    fn before(&self, other: &Self) -> bool {
        (self.time, self.seq) < (other.time, other.seq)
    }
}

/// A time-ordered event queue with FIFO order among equal times.
///
/// The earliest entry is often the one just scheduled (a traffic source's
/// next arrival, sooner than every timer): it waits in `front`, outside
/// the heap, so such an event costs no heap push and pop. `front`, when
/// set, is before every entry of the heap; the order of pops is the order
/// of (time, seq) either way.
pub struct EventQueue<E> {
    front: Option<Entry<E>>,
    heap: BinaryHeap<Entry<E>>,
    next_seq: u64,
    now: Nanos,
    cancelled: std::collections::HashSet<u64>,
    popped: u64,
}

impl<E> Default for EventQueue<E> {
    fn default() -> Self {
        Self::new()
    }
}

impl<E> EventQueue<E> {
    pub fn new() -> Self {
        EventQueue { front: None, heap: BinaryHeap::new(), next_seq: 0, now: 0, cancelled: Default::default(), popped: 0 }
    }

    /// The current simulated time: the time of the last popped event.
    pub fn now(&self) -> Nanos {
        self.now
    }

    /// Number of events popped so far (the benchmark's "events").
    pub fn events_processed(&self) -> u64 {
        self.popped
    }

    /// Schedules `event` at absolute time `time` (never before now).
    #[inline]
    pub fn schedule_at(&mut self, time: Nanos, event: E) -> EventId {
        debug_assert!(time >= self.now, "event scheduled in the past");
        let seq = self.next_seq;
        self.next_seq += 1;
        let entry = Entry { time: time.max(self.now), seq, event };
        match &self.front {
            Some(front) if entry.before(front) => {
                let old = self.front.replace(entry).expect("matched");
                self.heap.push(old);
            }
            Some(_) => self.heap.push(entry),
            None if self.heap.peek().is_none_or(|top| entry.before(top)) => self.front = Some(entry),
            None => self.heap.push(entry),
        }
        EventId(seq)
    }

    /// Schedules `event` `delay` ns from now.
    pub fn schedule_in(&mut self, delay: Nanos, event: E) -> EventId {
        self.schedule_at(self.now.saturating_add(delay), event)
    }

    /// Moves the clock to `time` without an event: the caller's own time
    /// advanced (the kernel finishing CPU work between events), so that
    /// `schedule_in` counts from the caller's now, not from the last pop.
    pub fn advance_to(&mut self, time: Nanos) {
        self.now = self.now.max(time);
    }

    /// Cancels a scheduled event; it is skipped when it comes up.
    pub fn cancel(&mut self, id: EventId) {
        self.cancelled.insert(id.0);
    }

    /// Time of the next live event, if any.
    #[inline]
    pub fn peek_time(&mut self) -> Option<Nanos> {
        self.skip_cancelled();
        self.front.as_ref().or(self.heap.peek()).map(|e| e.time)
    }

    /// Pops the next live event and advances the clock to it.
    #[inline]
    pub fn pop(&mut self) -> Option<(Nanos, E)> {
        self.skip_cancelled();
        let entry = match self.front.take() {
            Some(front) => front,
            None => self.heap.pop()?,
        };
        self.now = entry.time;
        self.popped += 1;
        Some((entry.time, entry.event))
    }

    /// Number of pending entries (including cancelled ones not yet skipped).
    pub fn len(&self) -> usize {
        self.heap.len() + usize::from(self.front.is_some())
    }

    pub fn is_empty(&self) -> bool {
        self.front.is_none() && self.heap.is_empty()
    }

    fn skip_cancelled(&mut self) {
        if self.cancelled.is_empty() {
            return;
        }
        while let Some(first) = self.front.as_ref().or(self.heap.peek()) {
            if !self.cancelled.remove(&first.seq) {
                break;
            }
            if self.front.take().is_none() {
                self.heap.pop();
            }
        }
    }
}

/// The random generator of one source.
pub type SourceRng = Pcg64Mcg;

/// A random stream for the source called `name`, derived from the run seed.
/// Streams of different names are independent; adding a source leaves the
/// others' draws unchanged.
pub fn rng_stream(seed: u64, name: &str) -> SourceRng {
    // FNV-1a of the name, mixed with the seed through SplitMix64 so that
    // nearby seeds and similar names still give unrelated streams.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in name.bytes() {
        h ^= b as u64;
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    let mut state = seed ^ h.rotate_left(17);
    let mut next = || {
        state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    };
    let seed128 = ((next() as u128) << 64) | next() as u128;
    Pcg64Mcg::from_seed(seed128.to_le_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::Rng;

    #[test]
    fn schedule_in_counts_from_the_advanced_clock() {
        let mut q: EventQueue<u32> = EventQueue::new();
        q.schedule_at(100, 1);
        assert_eq!(q.pop(), Some((100, 1)));
        // The caller's work ran on to 250 without an event.
        q.advance_to(250);
        q.schedule_in(10, 2);
        assert_eq!(q.pop(), Some((260, 2)));
        // Never backwards.
        q.advance_to(5);
        assert_eq!(q.now(), 260);
    }

    #[test]
    fn pops_in_time_order_fifo_among_ties() {
        let mut q = EventQueue::new();
        q.schedule_at(20, "c");
        q.schedule_at(10, "a");
        q.schedule_at(10, "b");
        let cancelled = q.schedule_at(15, "x");
        q.cancel(cancelled);
        let order: Vec<_> = std::iter::from_fn(|| q.pop()).collect();
        assert_eq!(order, vec![(10, "a"), (10, "b"), (20, "c")]);
        assert_eq!(q.now(), 20);
        assert_eq!(q.events_processed(), 3);
    }

    proptest::proptest! {
        /// Against a plain sorted list: the same pops, in (time, seq)
        /// order, whatever waits in `front` or is cancelled.
        #[test]
        fn pops_like_a_sorted_list(ops in proptest::collection::vec((0u8..4, 0u64..50), 1..200)) {
            let mut q = EventQueue::new();
            let mut reference: Vec<(Nanos, u64)> = Vec::new();
            let mut ids = Vec::new();
            for (n, (op, x)) in ops.into_iter().enumerate() {
                match op {
                    0 | 1 => {
                        let at = q.now() + x;
                        ids.push((q.schedule_at(at, n as u64), at, n as u64));
                        reference.push((at, n as u64));
                    }
                    2 if !ids.is_empty() => {
                        let (id, at, event) = ids.swap_remove(x as usize % ids.len());
                        q.cancel(id);
                        reference.retain(|&e| e != (at, event));
                    }
                    _ => {
                        reference.sort_unstable();
                        let expected = (!reference.is_empty()).then(|| reference.remove(0));
                        proptest::prop_assert_eq!(q.peek_time(), expected.map(|e| e.0));
                        proptest::prop_assert_eq!(q.pop(), expected);
                        if let Some(e) = expected {
                            ids.retain(|&(_, at, event)| (at, event) != e);
                        }
                    }
                }
            }
            reference.sort_unstable();
            let rest: Vec<_> = std::iter::from_fn(|| q.pop()).collect();
            proptest::prop_assert_eq!(rest, reference);
        }
    }

    #[test]
    fn streams_are_reproducible_and_independent() {
        let draw = |seed, name| rng_stream(seed, name).gen::<u64>();
        assert_eq!(draw(1, "nic"), draw(1, "nic"));
        assert_ne!(draw(1, "nic"), draw(2, "nic"));
        assert_ne!(draw(1, "nic"), draw(1, "disk"));
    }
}
