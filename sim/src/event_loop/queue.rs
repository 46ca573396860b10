//! Pending arrivals (and other timed events) in time order, and request ids
//! to record indices.

use crate::workload::Arrival;
use std::cmp::{Ordering, Reverse};
use std::collections::{BinaryHeap, HashMap, VecDeque};

struct Pending<T> {
    time: f64,
    /// Insertion order: items due at the same time keep their order.
    seq: u64,
    item: T,
}

impl<T> PartialEq for Pending<T> {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl<T> Eq for Pending<T> {}
impl<T> PartialOrd for Pending<T> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl<T> Ord for Pending<T> {
    fn cmp(&self, other: &Self) -> Ordering {
        self.time
            .total_cmp(&other.time)
            .then(self.seq.cmp(&other.seq))
    }
}

/// Items due at given times, earliest first, ties in insertion order.
///
/// Items pushed in time order (an open loop's or a trace's arrivals, all
/// known at the start) go to a queue in that order, O(1) each; only an item
/// earlier than the last one queued goes to a heap. Popping takes the
/// earlier head of the two by (time, insertion order), so the order is the
/// same as one heap's.
pub(crate) struct TimedQueue<T> {
    in_order: VecDeque<Pending<T>>,
    heap: BinaryHeap<Reverse<Pending<T>>>,
    next_seq: u64,
}

impl<T> Default for TimedQueue<T> {
    fn default() -> Self {
        Self {
            in_order: VecDeque::new(),
            heap: BinaryHeap::new(),
            next_seq: 0,
        }
    }
}

impl<T> TimedQueue<T> {
    pub(crate) fn push_at(&mut self, time: f64, item: T) {
        let seq = self.next_seq;
        self.next_seq += 1;
        let pending = Pending { time, seq, item };
        match self.in_order.back() {
            Some(last) if time.total_cmp(&last.time) == Ordering::Less => {
                self.heap.push(Reverse(pending))
            }
            _ => self.in_order.push_back(pending),
        }
    }

    /// Whether the earliest item is the in-order queue's head (else the heap's).
    fn head_in_order(&self) -> Option<bool> {
        match (self.in_order.front(), self.heap.peek()) {
            (None, None) => None,
            (Some(_), None) => Some(true),
            (None, Some(_)) => Some(false),
            (Some(a), Some(b)) => Some(a < &b.0),
        }
    }

    pub(crate) fn next_time(&self) -> Option<f64> {
        if self.head_in_order()? {
            self.in_order.front().map(|p| p.time)
        } else {
            self.heap.peek().map(|p| p.0.time)
        }
    }

    /// The earliest item if it is due at or before `now`.
    pub(crate) fn pop_due(&mut self, now: f64) -> Option<T> {
        if self.next_time()? > now {
            return None;
        }
        if self.head_in_order()? {
            self.in_order.pop_front().map(|p| p.item)
        } else {
            self.heap.pop().map(|p| p.0.item)
        }
    }
}

/// Arrivals not yet handed to an engine, by arrival time.
pub(crate) type ArrivalQueue = TimedQueue<Arrival>;

impl ArrivalQueue {
    pub(crate) fn push(&mut self, arrival: Arrival) {
        self.push_at(arrival.request.arrival_time, arrival);
    }
}

/// Request id -> index of its record. Ids are usually small and dense
/// (workloads number requests from 0), so they index a vector directly; far
/// outliers go to a hash map so memory stays proportional to the requests.
#[derive(Default)]
pub(crate) struct RecordIndex {
    dense: Vec<u32>,
    sparse: HashMap<u64, usize>,
    len: usize,
}

const ABSENT: u32 = u32::MAX;

impl RecordIndex {
    fn dense_limit(&self) -> u64 {
        2 * self.len as u64 + 65_536
    }

    pub(crate) fn get(&self, id: u64) -> Option<usize> {
        match self.dense.get(id as usize) {
            Some(&i) if i != ABSENT => Some(i as usize),
            // An id stored sparse may lie in the dense range once it has grown.
            _ => self.sparse.get(&id).copied(),
        }
    }

    /// Maps `id` to `index`; false if `id` is already mapped.
    pub(crate) fn insert(&mut self, id: u64, index: usize) -> bool {
        if self.get(id).is_some() {
            return false;
        }
        if id < self.dense_limit() && index < ABSENT as usize {
            let slot = id as usize;
            if slot >= self.dense.len() {
                let grown = (slot + 1).max(2 * self.dense.len());
                self.dense.resize(grown, ABSENT);
            }
            self.dense[slot] = index as u32;
        } else {
            self.sparse.insert(id, index);
        }
        self.len += 1;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use engine::Request;

    fn arrival(id: u64, t: f64) -> Arrival {
        let mut request = Request::new(id, vec![1], 1);
        request.arrival_time = t;
        Arrival {
            request,
            engine: 0,
            tag: String::new(),
        }
    }

    #[test]
    fn queue_pops_due_arrivals_in_time_then_insertion_order() {
        let mut q = ArrivalQueue::default();
        q.push(arrival(0, 2.0));
        q.push(arrival(1, 1.0));
        q.push(arrival(2, 1.0));
        assert_eq!(q.next_time(), Some(1.0));
        assert!(q.pop_due(0.5).is_none());
        let ids: Vec<u64> = std::iter::from_fn(|| q.pop_due(1.5))
            .map(|a| a.request.id.0)
            .collect();
        assert_eq!(ids, vec![1, 2]);
        assert_eq!(q.pop_due(2.0).map(|a| a.request.id.0), Some(0));
        assert_eq!(q.next_time(), None);
    }

    proptest::proptest! {
        /// Pushes and pops in any order give what a list ordered by
        /// (time, insertion) gives.
        #[test]
        fn pops_in_time_then_insertion_order(
            ops in proptest::collection::vec((proptest::bool::ANY, 0u8..8), 0..60)
        ) {
            let mut q = TimedQueue::default();
            let mut model: Vec<(u8, usize)> = Vec::new();
            for (i, &(push, t)) in ops.iter().enumerate() {
                if push {
                    q.push_at(f64::from(t), i);
                    model.push((t, i));
                    continue;
                }
                model.sort();
                let expected = match model.first() {
                    Some(&(time, id)) if time <= t => {
                        model.remove(0);
                        Some(id)
                    }
                    _ => None,
                };
                proptest::prop_assert_eq!(q.pop_due(f64::from(t)), expected);
                let next = model.iter().min().map(|&(time, _)| f64::from(time));
                proptest::prop_assert_eq!(q.next_time(), next);
            }
        }
    }

    #[test]
    fn index_handles_dense_and_far_ids_and_rejects_duplicates() {
        let mut idx = RecordIndex::default();
        assert!(idx.insert(3, 0));
        assert!(idx.insert(u64::MAX, 1));
        assert!(!idx.insert(3, 2));
        assert!(!idx.insert(u64::MAX, 2));
        assert_eq!(idx.get(3), Some(0));
        assert_eq!(idx.get(u64::MAX), Some(1));
        assert_eq!(idx.get(4), None);
        assert_eq!(idx.get(1 << 40), None);
    }
}
