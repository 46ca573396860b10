//! Block pool, block hashing and the prefix-cache-aware KV-cache manager.
//!
//! Contract: the KV cache is a pool of fixed-size blocks ([`BlockPool`]) with
//! a null block (id 0) that is never handed out. A request holds a block table
//! ([`SeqBlocks`]); full blocks get chained hashes ([`hashing`]) and enter the
//! prefix cache when they are scheduled. [`KvCacheManager`] finds a request's
//! longest cached prefix (never its last prompt token), allocates slots for the
//! tokens a step schedules, frees a request's blocks, and counts queried and
//! hit prompt tokens. No clock, no I/O; all operations are O(blocks touched).

pub mod block_pool;
pub mod hashing;
pub mod manager;

/// Index of a KV-cache block.
pub type BlockId = u32;

pub use block_pool::{BlockPool, NULL_BLOCK};
pub use hashing::{BlockHash, PromptHashes};
pub use manager::{KvCacheManager, SeqBlocks};
