//! The KV-cache manager: prefix lookup, slot allocation and freeing on top of
//! the [`BlockPool`].
//!
//! Contract:
//! - [`KvCacheManager::computed_blocks`] returns the longest run of cached
//!   blocks matching a request's leading full blocks, capped so at least the
//!   last token is left to compute (a forward pass must produce logits).
//! - [`KvCacheManager::allocate_slots`] either succeeds completely (hits taken,
//!   new blocks appended, newly full blocks cached) or changes nothing.
//! - A block is hashed only when it becomes full, once per request: a decoding
//!   request costs O(1) per step.
//! - [`KvCacheManager::free`] releases a request's blocks tail first, so the
//!   blocks least likely to be shared are the first evicted.

use super::block_pool::BlockPool;
use super::hashing::{extend_block_hashes, BlockHash};
use super::BlockId;
use crate::config::HashAlgo;

/// One request's KV state: its block table and the chained hashes of its full
/// blocks (kept across preemption, since the tokens do not change).
#[derive(Debug, Clone, Default)]
pub struct SeqBlocks {
    table: Vec<BlockId>,
    hashes: Vec<BlockHash>,
    /// Leading blocks of `table` already offered to the prefix cache.
    num_registered: usize,
}

impl SeqBlocks {
    /// Room for `num_blocks` blocks and hashes, so a request that reserves
    /// its longest length up front never reallocates while decoding.
    pub fn with_capacity(num_blocks: usize) -> Self {
        Self {
            table: Vec::with_capacity(num_blocks),
            hashes: Vec::with_capacity(num_blocks),
            num_registered: 0,
        }
    }

    /// Takes a prompt's hashes computed elsewhere ([`super::PromptHashes`])
    /// when none are computed yet; the caller checked they follow this
    /// engine's rule and this request's prompt.
    pub fn seed_hashes(&mut self, hashes: &[BlockHash]) {
        if self.hashes.is_empty() {
            self.hashes.extend_from_slice(hashes);
        }
    }

    /// Block ids holding this request's positions, in order.
    pub fn table(&self) -> &[BlockId] {
        &self.table
    }
    /// Hashes of the request's full blocks computed so far.
    pub fn hashes(&self) -> &[BlockHash] {
        &self.hashes
    }
}

/// Prefix-cache-aware block allocation for one engine, with hit counters.
#[derive(Debug, Clone)]
pub struct KvCacheManager {
    pool: BlockPool,
    block_size: usize,
    caching: bool,
    algo: HashAlgo,
    queried_tokens: u64,
    hit_tokens: u64,
}

impl KvCacheManager {
    /// `num_blocks` includes the null block; `block_size` must be positive.
    pub fn new(
        num_blocks: usize,
        block_size: usize,
        enable_prefix_caching: bool,
        algo: HashAlgo,
    ) -> Self {
        Self {
            pool: BlockPool::new(num_blocks),
            block_size: block_size.max(1),
            caching: enable_prefix_caching,
            algo,
            queried_tokens: 0,
            hit_tokens: 0,
        }
    }

    pub fn pool(&self) -> &BlockPool {
        &self.pool
    }
    pub fn block_size(&self) -> usize {
        self.block_size
    }
    pub fn prefix_caching(&self) -> bool {
        self.caching
    }
    /// Reference count of a block (0 for a free block and for the null block).
    pub fn ref_count(&self, block: BlockId) -> u32 {
        self.pool.ref_count(block)
    }
    /// Blocks in the pool, null block included.
    pub fn num_blocks(&self) -> usize {
        self.pool.num_blocks()
    }
    /// Blocks not held by any request (cached or not).
    pub fn num_free_blocks(&self) -> usize {
        self.pool.num_free()
    }
    /// Blocks held by requests (null block excluded).
    pub fn num_used_blocks(&self) -> usize {
        self.pool.num_used()
    }

    /// Finds the cached prefix of a request with no blocks yet, pushing the
    /// hit blocks to `hits` (not yet referenced: pass them to
    /// [`allocate_slots`](Self::allocate_slots)). Returns the cached tokens, a
    /// multiple of the block size, at most `tokens.len() - 1`.
    pub fn computed_blocks(
        &mut self,
        seq: &mut SeqBlocks,
        tokens: &[u32],
        salt: Option<&str>,
        hits: &mut Vec<BlockId>,
    ) -> usize {
        debug_assert!(seq.table.is_empty());
        if !self.caching || tokens.is_empty() {
            return 0;
        }
        let max_blocks = (tokens.len() - 1) / self.block_size;
        extend_block_hashes(
            self.algo,
            self.block_size,
            tokens,
            salt,
            &mut seq.hashes,
            max_blocks,
        );
        for hash in &seq.hashes[..max_blocks] {
            match self.pool.cached_block(hash) {
                Some(block) => hits.push(block),
                None => break,
            }
        }
        hits.len() * self.block_size
    }

    /// Gives a request room for `num_new_tokens` more tokens after its
    /// `num_computed_tokens` computed ones and the `hits` found by
    /// [`computed_blocks`](Self::computed_blocks) (which follow them), then
    /// caches every block that is full once those tokens are written.
    /// Returns false, changing nothing, if the free blocks do not suffice.
    #[inline]
    pub fn allocate_slots(
        &mut self,
        seq: &mut SeqBlocks,
        tokens: &[u32],
        salt: Option<&str>,
        num_computed_tokens: usize,
        num_new_tokens: usize,
        hits: &[BlockId],
    ) -> bool {
        // The decode fast path: room in the last block and no block filled.
        let bs = self.block_size;
        let total = num_computed_tokens + num_new_tokens;
        if hits.is_empty()
            && total <= seq.table.len() * bs
            && !(self.caching && total >= (seq.num_registered + 1) * bs)
        {
            return true;
        }
        self.allocate_slots_slow(seq, tokens, salt, num_computed_tokens, num_new_tokens, hits)
    }

    fn allocate_slots_slow(
        &mut self,
        seq: &mut SeqBlocks,
        tokens: &[u32],
        salt: Option<&str>,
        num_computed_tokens: usize,
        num_new_tokens: usize,
        hits: &[BlockId],
    ) -> bool {
        let bs = self.block_size;
        let total = num_computed_tokens + hits.len() * bs + num_new_tokens;
        // Multiplications rather than divisions on the decode path: most
        // steps of a decoding request need no block and complete none.
        let capacity = (seq.table.len() + hits.len()) * bs;
        let num_new_blocks = if total <= capacity {
            0
        } else {
            (total - capacity).div_ceil(bs)
        };
        // A hit on a free block takes it out of the free queue, so it competes
        // with the new blocks for the free count.
        let free_hits = hits
            .iter()
            .filter(|&&b| self.pool.ref_count(b) == 0)
            .count();
        if num_new_blocks + free_hits > self.pool.num_free() {
            return false;
        }
        if !hits.is_empty() {
            self.pool.touch(hits);
            seq.table.extend_from_slice(hits);
            seq.num_registered = seq.num_registered.max(seq.table.len());
        }
        if num_new_blocks > 0 {
            let allocated = self.pool.allocate(num_new_blocks, &mut seq.table);
            debug_assert!(allocated);
        }
        if self.caching && total >= (seq.num_registered + 1) * bs {
            let full = (total / bs).min(tokens.len() / bs);
            if full > seq.num_registered {
                extend_block_hashes(self.algo, bs, tokens, salt, &mut seq.hashes, full);
                for i in seq.num_registered..full {
                    self.pool.cache(seq.table[i], seq.hashes[i]);
                }
                seq.num_registered = full;
            }
        }
        true
    }

    /// Releases every block of the request, tail first. Its hashes stay.
    pub fn free(&mut self, seq: &mut SeqBlocks) {
        self.pool.free(seq.table.drain(..).rev());
        seq.num_registered = 0;
    }

    /// Counts one admitted request's prompt tokens and the tokens it found cached.
    pub fn record_query(&mut self, prompt_tokens: usize, hit_tokens: usize) {
        self.queried_tokens += prompt_tokens as u64;
        self.hit_tokens += hit_tokens as u64;
    }

    /// (queried prompt tokens, hit tokens) since construction.
    pub fn stats(&self) -> (u64, u64) {
        (self.queried_tokens, self.hit_tokens)
    }

    /// Forgets every cached hash. Refused (false) while any block is held, as
    /// in vLLM: a held block's request counts it as registered, so the reset
    /// could not forget it consistently.
    pub fn reset_prefix_cache(&mut self) -> bool {
        if self.pool.num_used() != 0 {
            return false;
        }
        self.pool.reset_cache();
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manager(usable_blocks: usize) -> KvCacheManager {
        KvCacheManager::new(usable_blocks + 1, 4, true, HashAlgo::Sha256)
    }

    #[test]
    fn failed_allocation_changes_nothing() {
        let mut kv = manager(3);
        let tokens: Vec<u32> = (0..13).collect();
        let mut seq = SeqBlocks::default();
        assert!(!kv.allocate_slots(&mut seq, &tokens, None, 0, 13, &[]));
        assert!(seq.table().is_empty());
        assert_eq!(kv.num_free_blocks(), 3);
        assert_eq!(kv.pool().num_cached(), 0);
        assert!(kv.allocate_slots(&mut seq, &tokens, None, 0, 12, &[]));
        assert_eq!(seq.table().len(), 3);
        assert_eq!(kv.pool().num_cached(), 3);
    }

    #[test]
    fn hits_on_free_blocks_count_against_the_free_pool() {
        let mut kv = manager(3);
        let tokens: Vec<u32> = (0..9).collect();
        let mut writer = SeqBlocks::default();
        assert!(kv.allocate_slots(&mut writer, &tokens, None, 0, 8, &[]));
        kv.free(&mut writer);
        // Two cached free blocks; the reader needs them plus 2 new: 4 > 3.
        let mut reader = SeqBlocks::default();
        let mut hits = Vec::new();
        assert_eq!(kv.computed_blocks(&mut reader, &tokens, None, &mut hits), 8);
        assert!(!kv.allocate_slots(&mut reader, &tokens, None, 0, 5, &hits));
        assert!(kv.allocate_slots(&mut reader, &tokens, None, 0, 1, &hits));
        assert_eq!(reader.table()[..2], hits[..]);
        assert_eq!(kv.num_free_blocks(), 0);
    }

    #[test]
    fn only_full_blocks_are_cached() {
        let mut kv = manager(4);
        let tokens: Vec<u32> = (0..10).collect();
        let mut seq = SeqBlocks::default();
        assert!(kv.allocate_slots(&mut seq, &tokens, None, 0, 7, &[]));
        assert_eq!(kv.pool().num_cached(), 1);
        assert!(kv.allocate_slots(&mut seq, &tokens, None, 7, 3, &[]));
        assert_eq!(kv.pool().num_cached(), 2);
        assert_eq!(seq.hashes().len(), 2);
    }

    #[test]
    fn caching_off_neither_hashes_nor_hits() {
        let mut kv = KvCacheManager::new(5, 4, false, HashAlgo::Xxhash);
        let tokens: Vec<u32> = (0..9).collect();
        let mut seq = SeqBlocks::default();
        assert!(kv.allocate_slots(&mut seq, &tokens, None, 0, 9, &[]));
        assert!(seq.hashes().is_empty());
        let mut hits = Vec::new();
        assert_eq!(
            kv.computed_blocks(&mut SeqBlocks::default(), &tokens, None, &mut hits),
            0
        );
    }

    #[test]
    fn reset_is_refused_while_blocks_are_held() {
        let mut kv = manager(2);
        let tokens: Vec<u32> = (0..5).collect();
        let mut seq = SeqBlocks::default();
        assert!(kv.allocate_slots(&mut seq, &tokens, None, 0, 4, &[]));
        assert!(!kv.reset_prefix_cache());
        kv.free(&mut seq);
        assert!(kv.reset_prefix_cache());
        let mut hits = Vec::new();
        assert_eq!(
            kv.computed_blocks(&mut SeqBlocks::default(), &tokens, None, &mut hits),
            0
        );
    }
}
