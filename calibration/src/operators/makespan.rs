//! When the last of a kernel's blocks finishes, its blocks taken in launch
//! order by the first slot to come free (prefill attention,
//! [`super::attention::prefill_seconds`]).
//!
//! Contract: each block's cost is rounded to integer picoseconds and slot
//! times add as integers, so they order exactly and the result does not
//! depend on the order of float additions; [`blocks_makespan_ps`] remembers
//! the last results it computed on each thread. Why remember: a fit
//! evaluates every point once for each parameter it perturbs, and most
//! parameters leave a prefill's block costs as they were; the makespan of a
//! slice's thousand blocks was 77 % of `exp transfer-check`'s time.

use std::cell::RefCell;
use std::cmp::Reverse;
use std::collections::hash_map::DefaultHasher;
use std::collections::{BinaryHeap, HashMap};
use std::hash::{Hash, Hasher};

/// Results a thread remembers before it forgets them all.
const REMEMBERED: usize = 4096;

/// Seconds as integer picoseconds.
fn to_ps(s: f64) -> u64 {
    (s * 1e12).round() as u64
}

/// When the last of `costs` (picoseconds, in launch order) finishes on
/// `slots` slots, each block starting on the first slot to come free: the
/// first `slots` blocks start at once; each later one replaces the earliest
/// finish by its own (one sift of the heap rather than a pop and a push).
fn makespan_ps(mut costs: impl Iterator<Item = u64>, slots: usize) -> u64 {
    let first: Vec<Reverse<u64>> = costs.by_ref().take(slots.max(1)).map(Reverse).collect();
    let mut end = first.iter().map(|r| r.0).max().unwrap_or(0);
    let mut free = BinaryHeap::from(first);
    for c in costs {
        if let Some(mut earliest) = free.peek_mut() {
            earliest.0 += c;
            end = end.max(earliest.0);
        }
    }
    end
}

/// What one call computed: its inputs, whole, to tell a hash collision from a hit.
struct Remembered {
    iterations: Vec<usize>,
    block_cost: u64,
    per_iteration: u64,
    slots: usize,
    end_ps: u64,
}

thread_local! {
    static MEMORY: RefCell<HashMap<u64, Remembered>> = RefCell::new(HashMap::new());
}

/// The makespan, in picoseconds, of blocks of `iterations[i]` iterations
/// each, a block costing `block_cost + iterations · per_iteration` seconds.
pub fn blocks_makespan_ps(
    iterations: &[usize],
    block_cost: f64,
    per_iteration: f64,
    slots: usize,
) -> u64 {
    let (bc, pi) = (block_cost.to_bits(), per_iteration.to_bits());
    let mut h = DefaultHasher::new();
    (iterations, bc, pi, slots).hash(&mut h);
    let key = h.finish();
    let hit = MEMORY.with(|m| {
        m.borrow().get(&key).and_then(|r| {
            (r.iterations == iterations
                && (r.block_cost, r.per_iteration, r.slots) == (bc, pi, slots))
                .then_some(r.end_ps)
        })
    });
    if let Some(end_ps) = hit {
        return end_ps;
    }
    // Each distinct count's cost once: a step's KV heads repeat its tiles.
    let most = iterations.iter().copied().max().unwrap_or(0);
    let cost_ps: Vec<u64> = (0..=most)
        .map(|it| to_ps(block_cost + it as f64 * per_iteration))
        .collect();
    let end_ps = makespan_ps(iterations.iter().map(|&it| cost_ps[it]), slots);
    MEMORY.with(|m| {
        let mut m = m.borrow_mut();
        if m.len() >= REMEMBERED {
            m.clear();
        }
        m.insert(
            key,
            Remembered {
                iterations: iterations.to_vec(),
                block_cost: bc,
                per_iteration: pi,
                slots,
                end_ps,
            },
        );
    });
    end_ps
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_makespan_waits_for_the_longest_slot() {
        // Slots free at 3 and 1: the third block goes to the second.
        assert_eq!(makespan_ps([3, 1, 2].into_iter(), 2), 3);
        assert_eq!(makespan_ps([1, 1, 2].into_iter(), 2), 3);
        assert_eq!(makespan_ps([1; 6].into_iter(), 3), 2);
        assert_eq!(makespan_ps(std::iter::empty(), 4), 0);
        // More slots than blocks: the longest block.
        assert_eq!(makespan_ps([5, 25].into_iter(), 8), 25);
        // Seconds round to picoseconds.
        assert_eq!(to_ps(2.5e-6), 2_500_000);
    }

    #[test]
    fn remembered_blocks_give_what_the_costs_do_and_differ_where_inputs_do() {
        let its: Vec<usize> = (0..40).rev().chain((0..40).rev()).collect();
        let direct = |a: f64, b: f64, slots: usize| {
            makespan_ps(its.iter().map(|&i| to_ps(a + i as f64 * b)), slots)
        };
        for (a, b, slots) in [
            (1e-6, 2e-7, 24),
            (1e-6, 2e-7, 7),
            (2e-6, 2e-7, 24),
            (1e-6, 3e-7, 24),
        ] {
            // Twice: computed, then remembered.
            assert_eq!(blocks_makespan_ps(&its, a, b, slots), direct(a, b, slots));
            assert_eq!(blocks_makespan_ps(&its, a, b, slots), direct(a, b, slots));
        }
        let fewer = &its[..50];
        let alone = makespan_ps(fewer.iter().map(|&i| to_ps(1e-6 + i as f64 * 2e-7)), 24);
        assert_eq!(blocks_makespan_ps(fewer, 1e-6, 2e-7, 24), alone);
    }
}
