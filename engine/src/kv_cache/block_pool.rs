//! The pool of KV-cache blocks: reference counts, an O(1) LRU free queue with
//! lazy eviction, and the map from block hash to cached block.
//!
//! Contract:
//! - Block 0 is the null block: never handed out, never freed, never in the
//!   free queue, never in a block table given to a runner.
//! - A block with reference count 0 (other than the null block) is in the free
//!   queue, and only such blocks are. Freed blocks join the queue's tail; new
//!   blocks come from its head, so the least recently freed block is reused
//!   first.
//! - Eviction is lazy: a freed block keeps its hash, and stays findable in the
//!   cache, until it is handed out again. A cache hit on a free block takes it
//!   out of the queue in O(1) (doubly-linked list over block ids in `Vec`s).
//! - At most one block is cached per hash; a second block computed with the
//!   same content stays uncached and is reused like any other free block.
//! - The map is keyed by the hash's low 64 bits and every hit is confirmed
//!   against the block's full hash, so a 64-bit collision can cost a cache
//!   hit but never serve a block of other content.

use super::hashing::{BlockHash, BlockHashBuilder};
use super::BlockId;
use std::collections::HashMap;

/// The null block's id.
pub const NULL_BLOCK: BlockId = 0;

#[derive(Debug, Clone)]
pub struct BlockPool {
    ref_cnt: Vec<u32>,
    hash: Vec<Option<BlockHash>>,
    /// Free-queue links; index `num_blocks` is the list's sentinel.
    prev: Vec<BlockId>,
    next: Vec<BlockId>,
    num_free: usize,
    /// Low 64 bits of a cached hash -> the block holding it.
    cached: HashMap<u64, BlockId, BlockHashBuilder>,
}

impl BlockPool {
    /// A pool of `num_blocks` blocks, null block included (`num_blocks >= 1`).
    pub fn new(num_blocks: usize) -> Self {
        let num_blocks = num_blocks.max(1);
        let sentinel = num_blocks as BlockId;
        let mut pool = Self {
            ref_cnt: vec![0; num_blocks],
            hash: vec![None; num_blocks],
            prev: vec![sentinel; num_blocks + 1],
            next: vec![sentinel; num_blocks + 1],
            num_free: 0,
            // At most one entry per block: reserving them all up front means
            // the map never rehashes in the hot loop.
            cached: HashMap::with_capacity_and_hasher(num_blocks, BlockHashBuilder::default()),
        };
        for block in 1..num_blocks as BlockId {
            pool.push_back(block);
        }
        pool
    }

    /// Blocks in the pool, null block included.
    pub fn num_blocks(&self) -> usize {
        self.ref_cnt.len()
    }

    /// Blocks that can be handed out (reference count 0, cached or not).
    pub fn num_free(&self) -> usize {
        self.num_free
    }

    /// Blocks held by at least one request.
    pub fn num_used(&self) -> usize {
        self.num_blocks() - 1 - self.num_free
    }

    pub fn ref_count(&self, block: BlockId) -> u32 {
        self.ref_cnt.get(block as usize).copied().unwrap_or(0)
    }

    /// The hash a block is cached under, if any (free blocks keep theirs).
    pub fn block_hash(&self, block: BlockId) -> Option<&BlockHash> {
        self.hash.get(block as usize).and_then(Option::as_ref)
    }

    /// The cached block with this hash, if any.
    pub fn cached_block(&self, hash: &BlockHash) -> Option<BlockId> {
        let block = *self.cached.get(&hash.key())?;
        (self.hash[block as usize].as_ref() == Some(hash)).then_some(block)
    }

    /// Number of blocks in the cache map.
    pub fn num_cached(&self) -> usize {
        self.cached.len()
    }

    /// Free-queue contents from head (next to be reused) to tail.
    pub fn free_queue(&self) -> Vec<BlockId> {
        let sentinel = self.sentinel();
        let mut out = Vec::with_capacity(self.num_free);
        let mut cur = self.next[sentinel as usize];
        while cur != sentinel {
            out.push(cur);
            cur = self.next[cur as usize];
        }
        out
    }

    fn sentinel(&self) -> BlockId {
        self.ref_cnt.len() as BlockId
    }

    fn push_back(&mut self, block: BlockId) {
        let s = self.sentinel() as usize;
        let tail = self.prev[s];
        self.prev[block as usize] = tail;
        self.next[block as usize] = s as BlockId;
        self.next[tail as usize] = block;
        self.prev[s] = block;
        self.num_free += 1;
    }

    fn unlink(&mut self, block: BlockId) {
        let (p, n) = (self.prev[block as usize], self.next[block as usize]);
        self.next[p as usize] = n;
        self.prev[n as usize] = p;
        self.num_free -= 1;
    }

    /// Takes `n` blocks from the head of the free queue, evicting their cached
    /// hashes, and appends them to `out` with reference count 1. Returns false
    /// (taking nothing) if fewer than `n` are free.
    pub fn allocate(&mut self, n: usize, out: &mut Vec<BlockId>) -> bool {
        if n > self.num_free {
            return false;
        }
        let sentinel = self.sentinel() as usize;
        for _ in 0..n {
            let block = self.next[sentinel];
            self.unlink(block);
            if let Some(hash) = self.hash[block as usize].take() {
                if self.cached.get(&hash.key()) == Some(&block) {
                    self.cached.remove(&hash.key());
                }
            }
            self.ref_cnt[block as usize] = 1;
            out.push(block);
        }
        true
    }

    /// Takes one more reference on each block (cache hits); free ones leave
    /// the free queue.
    pub fn touch(&mut self, blocks: &[BlockId]) {
        for &block in blocks {
            if self.ref_cnt[block as usize] == 0 {
                self.unlink(block);
            }
            self.ref_cnt[block as usize] += 1;
        }
    }

    /// Drops one reference on each block, in the order given; a block whose
    /// count reaches 0 joins the free queue's tail, keeping its hash.
    pub fn free<I: IntoIterator<Item = BlockId>>(&mut self, blocks: I) {
        for block in blocks {
            debug_assert!(block != NULL_BLOCK && self.ref_cnt[block as usize] > 0);
            self.ref_cnt[block as usize] -= 1;
            if self.ref_cnt[block as usize] == 0 {
                self.push_back(block);
            }
        }
    }

    /// Registers a full, held block under `hash`. Does nothing if another block
    /// is already cached with that hash or this block already has a hash.
    pub fn cache(&mut self, block: BlockId, hash: BlockHash) {
        if self.hash[block as usize].is_some() {
            return;
        }
        if let std::collections::hash_map::Entry::Vacant(slot) = self.cached.entry(hash.key()) {
            slot.insert(block);
            self.hash[block as usize] = Some(hash);
        }
    }

    /// Drops every cached hash (free blocks stay free).
    pub fn reset_cache(&mut self) {
        self.cached.clear();
        self.hash.iter_mut().for_each(|h| *h = None);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(x: u8) -> BlockHash {
        BlockHash([x; 32])
    }

    #[test]
    fn null_block_is_never_handed_out() {
        let mut pool = BlockPool::new(4);
        let mut got = Vec::new();
        assert!(pool.allocate(3, &mut got));
        assert!(!got.contains(&NULL_BLOCK));
        assert!(!pool.allocate(1, &mut got), "only 3 usable blocks");
        assert_eq!(got.len(), 3);
        assert_eq!(pool.num_used(), 3);
    }

    #[test]
    fn freed_blocks_are_reused_least_recently_freed_first() {
        let mut pool = BlockPool::new(5);
        let mut got = Vec::new();
        assert!(pool.allocate(4, &mut got));
        pool.free([got[2], got[0], got[3], got[1]]);
        assert_eq!(pool.free_queue(), vec![got[2], got[0], got[3], got[1]]);
        let mut again = Vec::new();
        assert!(pool.allocate(2, &mut again));
        assert_eq!(again, vec![got[2], got[0]]);
    }

    #[test]
    fn freed_block_keeps_hash_until_reused() {
        let mut pool = BlockPool::new(3);
        let mut got = Vec::new();
        assert!(pool.allocate(2, &mut got));
        pool.cache(got[0], h(7));
        pool.free([got[0], got[1]]);
        assert_eq!(pool.cached_block(&h(7)), Some(got[0]));
        // Hit on a free block: it leaves the queue without disturbing the rest.
        pool.touch(&[got[0]]);
        assert_eq!(pool.ref_count(got[0]), 1);
        assert_eq!(pool.free_queue(), vec![got[1]]);
        pool.free([got[0]]);
        let mut again = Vec::new();
        assert!(pool.allocate(2, &mut again));
        assert_eq!(again, vec![got[1], got[0]]);
        assert_eq!(pool.cached_block(&h(7)), None, "evicted on reuse");
        assert_eq!(pool.block_hash(got[0]), None);
    }

    #[test]
    fn one_block_per_hash() {
        let mut pool = BlockPool::new(3);
        let mut got = Vec::new();
        assert!(pool.allocate(2, &mut got));
        pool.cache(got[0], h(1));
        pool.cache(got[1], h(1));
        assert_eq!(pool.cached_block(&h(1)), Some(got[0]));
        assert_eq!(pool.block_hash(got[1]), None);
        // Evicting the uncached duplicate must not drop the cached entry.
        pool.free([got[1]]);
        let mut again = Vec::new();
        assert!(pool.allocate(1, &mut again));
        assert_eq!(pool.cached_block(&h(1)), Some(got[0]));
    }

    #[test]
    fn a_64_bit_key_collision_never_serves_other_content() {
        let mut pool = BlockPool::new(3);
        let mut got = Vec::new();
        assert!(pool.allocate(2, &mut got));
        let first = h(1);
        let mut colliding = h(1);
        colliding.0[31] = 2;
        pool.cache(got[0], first);
        assert_eq!(pool.cached_block(&colliding), None);
        pool.cache(got[1], colliding);
        assert_eq!(pool.block_hash(got[1]), None, "the key is taken");
        assert_eq!(pool.cached_block(&first), Some(got[0]));
    }

    #[test]
    fn shared_block_is_freed_only_by_its_last_holder() {
        let mut pool = BlockPool::new(2);
        let mut got = Vec::new();
        assert!(pool.allocate(1, &mut got));
        pool.touch(&got);
        assert_eq!(pool.ref_count(got[0]), 2);
        pool.free([got[0]]);
        assert_eq!(pool.num_free(), 0);
        pool.free([got[0]]);
        assert_eq!(pool.num_free(), 1);
    }
}
