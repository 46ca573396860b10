//! Chained block hashes for the prefix cache.
//!
//! Contract: only *full* blocks are hashed. Block `i`'s hash covers the hash of
//! block `i - 1` (a fixed seed for block 0), the block's `block_size` token ids
//! and, for block 0 alone, the request's `cache_salt`. Because every hash
//! chains over its parent, the salt separates every block of a salted request
//! from every block of a request with another salt (or none), while a salt is
//! hashed once per request rather than once per block. Two blocks have equal
//! hashes only if their whole prefixes (and salts) are equal, up to collisions
//! of the chosen [`HashAlgo`]. Both algorithms hash the same bytes: the
//! parent's 32 bytes, the tokens as little-endian `u32`s, and for a salted
//! block 0 a tag byte `1` then the salt's UTF-8 bytes.

use crate::config::HashAlgo;
use sha2::{Digest, Sha256};
use std::hash::{BuildHasherDefault, Hash, Hasher};
use xxhash_rust::xxh3::{xxh3_128, Xxh3};

/// A block's chained hash: 32 bytes of SHA-256, or the 16 bytes of xxh3-128
/// (little-endian) followed by zeros.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct BlockHash(pub [u8; 32]);

impl BlockHash {
    /// Parent "hash" of block 0.
    const SEED: BlockHash = BlockHash([0; 32]);

    /// The low 64 bits: the prefix cache's map key.
    pub fn key(&self) -> u64 {
        let mut low = [0u8; 8];
        low.copy_from_slice(&self.0[..8]);
        u64::from_le_bytes(low)
    }
}

impl Hash for BlockHash {
    fn hash<H: Hasher>(&self, state: &mut H) {
        // The value is already a uniformly distributed hash; feed 8 bytes only.
        state.write_u64(self.key());
    }
}

/// `Hasher` for maps keyed by [`BlockHash`] or its [`BlockHash::key`]: passes
/// the low 64 bits through instead of hashing a hash again.
#[derive(Default)]
pub struct PassThroughHasher(u64);

impl Hasher for PassThroughHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        // Only reached for keys other than BlockHash and u64; fold them in so
        // the hasher stays correct, if slow.
        for &b in bytes {
            self.0 = (self.0.rotate_left(5) ^ u64::from(b)).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
        }
    }
    fn write_u64(&mut self, value: u64) {
        self.0 = value;
    }
}

/// `BuildHasher` for maps keyed by [`BlockHash`] or its [`BlockHash::key`].
pub type BlockHashBuilder = BuildHasherDefault<PassThroughHasher>;

/// The chained hashes of a prompt's leading full blocks under one rule,
/// computed before the request reaches an engine (a router that looked up
/// every replica's cache). An engine hashing by the same rule takes them
/// instead of hashing the prompt again; hashes are a function of the rule,
/// the tokens and the salt, so this changes nothing but the time.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PromptHashes {
    pub algo: HashAlgo,
    pub block_size: usize,
    /// Hashes of blocks 0, 1, ... of the prompt (with its salt), at most
    /// `prompt_len / block_size` of them.
    pub hashes: Vec<BlockHash>,
}

/// Hash of one full block. `parent` is `None` for block 0, whose hash alone
/// takes the salt.
pub fn hash_block(
    algo: HashAlgo,
    parent: Option<&BlockHash>,
    tokens: &[u32],
    salt: Option<&str>,
) -> BlockHash {
    let salt = if parent.is_none() { salt } else { None };
    let parent = parent.unwrap_or(&BlockHash::SEED);
    match algo {
        HashAlgo::Sha256 => sha256_block(parent, tokens, salt),
        HashAlgo::Xxhash => xxhash_block(parent, tokens, salt),
    }
}

/// Feeds a block's bytes (see the module docs) to `update`.
fn feed(parent: &BlockHash, tokens: &[u32], salt: Option<&str>, mut update: impl FnMut(&[u8])) {
    update(&parent.0);
    // Token bytes go in 64-byte pieces: one `update` per token costs more
    // than the compression itself.
    let mut buf = [0u8; 64];
    for chunk in tokens.chunks(16) {
        for (dst, t) in buf.chunks_exact_mut(4).zip(chunk) {
            dst.copy_from_slice(&t.to_le_bytes());
        }
        update(&buf[..chunk.len() * 4]);
    }
    // The tag byte keeps "no salt" apart from an empty salt; the token part has
    // a fixed length, so nothing can be confused with the salt.
    if let Some(salt) = salt {
        update(&[1u8]);
        update(salt.as_bytes());
    }
}

fn sha256_block(parent: &BlockHash, tokens: &[u32], salt: Option<&str>) -> BlockHash {
    let mut hasher = Sha256::new();
    feed(parent, tokens, salt, |bytes| hasher.update(bytes));
    BlockHash(hasher.finalize().into())
}

/// Bytes of a block hashed in one call from the stack: 32 of parent, 4 per
/// token (a block of 64 tokens) and a salt of up to 31 bytes.
const XXHASH_ONE_SHOT: usize = 32 + 4 * 64 + 32;

fn xxhash_block(parent: &BlockHash, tokens: &[u32], salt: Option<&str>) -> BlockHash {
    let len = 32 + 4 * tokens.len() + salt.map_or(0, |s| 1 + s.len());
    // One call over a stack buffer is several times faster than the
    // streaming hasher on a block this small; xxh3 gives both the same value.
    let digest = if len <= XXHASH_ONE_SHOT {
        let mut buf = [0u8; XXHASH_ONE_SHOT];
        let mut end = 0;
        feed(parent, tokens, salt, |bytes| {
            buf[end..end + bytes.len()].copy_from_slice(bytes);
            end += bytes.len();
        });
        xxh3_128(&buf[..end])
    } else {
        let mut hasher = Xxh3::new();
        feed(parent, tokens, salt, |bytes| hasher.update(bytes));
        hasher.digest128()
    };
    let mut out = [0u8; 32];
    out[..16].copy_from_slice(&digest.to_le_bytes());
    BlockHash(out)
}

/// Extends `hashes` (the chained hashes of `tokens`' first full blocks) to
/// cover `num_blocks` full blocks. `tokens` must hold at least
/// `num_blocks * block_size` tokens.
pub fn extend_block_hashes(
    algo: HashAlgo,
    block_size: usize,
    tokens: &[u32],
    salt: Option<&str>,
    hashes: &mut Vec<BlockHash>,
    num_blocks: usize,
) {
    debug_assert!(num_blocks * block_size <= tokens.len());
    while hashes.len() < num_blocks {
        let i = hashes.len();
        let block = &tokens[i * block_size..(i + 1) * block_size];
        let hash = hash_block(algo, hashes.last(), block, salt);
        hashes.push(hash);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chain(algo: HashAlgo, tokens: &[u32], salt: Option<&str>) -> Vec<BlockHash> {
        let mut hashes = Vec::new();
        extend_block_hashes(algo, 4, tokens, salt, &mut hashes, tokens.len() / 4);
        hashes
    }

    #[test]
    fn salt_only_in_first_block() {
        for algo in [HashAlgo::Sha256, HashAlgo::Xxhash] {
            let tokens: Vec<u32> = (0..12).collect();
            let plain = chain(algo, &tokens, None);
            let salted = chain(algo, &tokens, Some("tenant-a"));
            // Block 0 differs because of the salt; later blocks differ only
            // through the chain: re-hashing block 1 on the salted parent
            // without a salt gives the salted chain's block 1.
            assert_ne!(plain[0], salted[0]);
            assert_ne!(plain[1], salted[1]);
            let rehashed = hash_block(algo, Some(&salted[0]), &tokens[4..8], Some("other"));
            assert_eq!(rehashed, salted[1], "{algo:?}: salt must not enter block 1");
            assert_eq!(
                hash_block(algo, None, &tokens[..4], Some("tenant-a")),
                salted[0]
            );
        }
    }

    #[test]
    fn empty_salt_differs_from_no_salt_and_salts_differ() {
        for algo in [HashAlgo::Sha256, HashAlgo::Xxhash] {
            let tokens: Vec<u32> = (0..4).collect();
            let none = hash_block(algo, None, &tokens, None);
            let empty = hash_block(algo, None, &tokens, Some(""));
            let a = hash_block(algo, None, &tokens, Some("a"));
            let b = hash_block(algo, None, &tokens, Some("b"));
            assert_ne!(none, empty);
            assert_ne!(a, b);
            assert_ne!(none, a);
        }
    }

    #[test]
    fn equal_prefixes_hash_equal_and_any_earlier_difference_propagates() {
        for algo in [HashAlgo::Sha256, HashAlgo::Xxhash] {
            let a: Vec<u32> = (0..16).collect();
            let mut b = a.clone();
            assert_eq!(chain(algo, &a, None), chain(algo, &b, None));
            b[1] = 999;
            let (ha, hb) = (chain(algo, &a, None), chain(algo, &b, None));
            assert!(ha.iter().zip(&hb).all(|(x, y)| x != y), "{algo:?}");
        }
    }

    /// SHA-256 of the bytes the module docs describe: a change to what is
    /// hashed shows here, not only as a changed cache hit rate.
    /// Both algorithms hash the bytes the module docs describe (a change to
    /// what is hashed shows here, not only as a changed cache hit rate), for
    /// blocks small enough for xxhash's one-shot path and larger ones.
    #[test]
    fn both_algorithms_hash_the_documented_bytes() {
        let long_salt = "s".repeat(XXHASH_ONE_SHOT);
        for (tokens, salt) in [
            ((1..=4).collect::<Vec<u32>>(), Some("s")),
            ((1..=16).collect(), None),
            ((1..=64).collect(), Some("tenant-b")),
            ((1..=16).collect(), Some(long_salt.as_str())),
            ((0..200).collect(), None),
        ] {
            let mut bytes = vec![0u8; 32];
            bytes.extend(tokens.iter().flat_map(|t| t.to_le_bytes()));
            if let Some(salt) = salt {
                bytes.push(1);
                bytes.extend(salt.as_bytes());
            }
            let want: [u8; 32] = Sha256::digest(&bytes).into();
            assert_eq!(hash_block(HashAlgo::Sha256, None, &tokens, salt).0, want);
            let want = xxh3_128(&bytes).to_le_bytes();
            let got = hash_block(HashAlgo::Xxhash, None, &tokens, salt);
            assert_eq!(got.0[..16], want, "{} bytes", bytes.len());
            assert_eq!(got.0[16..], [0u8; 16]);
        }
    }

    #[test]
    fn algorithms_differ() {
        let tokens: Vec<u32> = (0..4).collect();
        assert_ne!(
            hash_block(HashAlgo::Sha256, None, &tokens, None),
            hash_block(HashAlgo::Xxhash, None, &tokens, None)
        );
    }
}
