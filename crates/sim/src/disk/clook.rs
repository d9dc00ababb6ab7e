//! C-LOOK: serve requests in ascending sector order from the head's
//! position; after the highest pending request, jump back to the lowest
//! (the "circular LOOK" variant used by FreeBSD's `bufqdisksort`, §5.3).

use std::collections::BTreeMap;

/// A C-LOOK-ordered queue of requests keyed by start sector. Ties (same
/// sector) are served in arrival order.
#[derive(Debug, Clone)]
pub struct CLookQueue<R> {
    pending: BTreeMap<(u64, u64), R>,
    seq: u64,
}

impl<R> Default for CLookQueue<R> {
    fn default() -> Self {
        CLookQueue { pending: BTreeMap::new(), seq: 0 }
    }
}

impl<R> CLookQueue<R> {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn push(&mut self, sector: u64, request: R) {
        self.pending.insert((sector, self.seq), request);
        self.seq += 1;
    }

    pub fn len(&self) -> usize {
        self.pending.len()
    }

    pub fn is_empty(&self) -> bool {
        self.pending.is_empty()
    }

    /// Removes the next request for a head at `head_sector`: the lowest
    /// sector at or above it, else (wrap) the lowest overall.
    pub fn pop_next(&mut self, head_sector: u64) -> Option<(u64, R)> {
        let key = self.pending.range((head_sector, 0)..).next().map(|(k, _)| *k).or_else(|| self.pending.keys().next().copied())?;
        self.pending.remove(&key).map(|r| (key.0, r))
    }

    /// Removes every request (used to requeue on preemption or at the end).
    pub fn drain(&mut self) -> Vec<(u64, R)> {
        std::mem::take(&mut self.pending).into_iter().map(|((s, _), r)| (s, r)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serves_upward_from_head_then_wraps_to_lowest() {
        let mut q = CLookQueue::new();
        for s in [50, 10, 90, 30, 70] {
            q.push(s, s);
        }
        let mut head = 40;
        let mut order = vec![];
        while let Some((s, _)) = q.pop_next(head) {
            order.push(s);
            head = s;
        }
        assert_eq!(order, vec![50, 70, 90, 10, 30]);
    }

    #[test]
    fn new_request_behind_the_head_waits_for_the_wrap() {
        let mut q = CLookQueue::new();
        q.push(60, "a");
        q.push(80, "b");
        assert_eq!(q.pop_next(50).unwrap().0, 60);
        q.push(55, "late"); // behind the head now at 60
        assert_eq!(q.pop_next(60).unwrap().0, 80);
        assert_eq!(q.pop_next(80).unwrap().0, 55);
        assert!(q.is_empty());
    }

    #[test]
    fn equal_sectors_in_arrival_order() {
        let mut q = CLookQueue::new();
        q.push(5, 1);
        q.push(5, 2);
        assert_eq!(q.pop_next(0), Some((5, 1)));
        assert_eq!(q.pop_next(5), Some((5, 2)));
    }
}
