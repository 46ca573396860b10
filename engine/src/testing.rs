//! A deterministic model runner for tests and benchmarks.
//!
//! Contract: [`FixedTokenRunner`] computes nothing. For every sequence that
//! samples it returns [`FixedTokenRunner::token_at`] of the position the new
//! token will take (`start_pos + token_ids.len()`), so a run's outputs depend
//! only on the positions the scheduler produces. It checks the parts of the
//! runner contract it can check cheaply (O(1) per sequence: the block table
//! covers the new positions and its last block is not the null block) and rejects a batch that breaks them with [`RunnerError::BadBatch`].

use crate::kv_cache::NULL_BLOCK;
use crate::runner::{ModelRunner, RunnerError, RunnerOutput, ScheduledBatch};

/// Runner returning a token derived from the position; see the module docs.
#[derive(Debug, Clone)]
pub struct FixedTokenRunner {
    num_kv_blocks: usize,
    vocab_size: u32,
    /// Seconds reported as `modeled_seconds` for every batch, if set.
    pub modeled_seconds: Option<f64>,
    /// Batches executed so far.
    pub batches: u64,
    /// Tokens computed so far.
    pub tokens: u64,
}

impl FixedTokenRunner {
    /// A runner whose KV cache has `num_kv_blocks` blocks (null block included)
    /// and whose tokens lie in `0..vocab_size` (at least 1).
    pub fn new(num_kv_blocks: usize, vocab_size: u32) -> Self {
        Self {
            num_kv_blocks,
            vocab_size: vocab_size.max(1),
            modeled_seconds: None,
            batches: 0,
            tokens: 0,
        }
    }

    /// The token sampled for position `position`.
    pub fn token_at(&self, position: usize) -> u32 {
        // A multiplicative spread so consecutive positions give unrelated
        // tokens, then a multiply-shift into the vocabulary (no division: the
        // runner sits in the simulator's hot loop).
        let spread = (position as u32).wrapping_mul(0x9e37_79b9);
        ((u64::from(spread) * u64::from(self.vocab_size)) >> 32) as u32
    }
}

impl ModelRunner for FixedTokenRunner {
    fn num_kv_blocks(&self) -> usize {
        self.num_kv_blocks
    }

    fn execute(&mut self, batch: &ScheduledBatch<'_>) -> Result<RunnerOutput, RunnerError> {
        let bs = batch.block_size.max(1);
        let mut sampled = Vec::with_capacity(batch.seqs.len());
        for seq in &batch.seqs {
            let end = seq.start_pos + seq.token_ids.len();
            if seq.token_ids.is_empty() || seq.block_table.len() * bs < end {
                return Err(RunnerError::BadBatch(format!(
                    "request {}: {} blocks cannot hold positions {}..{end}",
                    seq.request_id,
                    seq.block_table.len(),
                    seq.start_pos
                )));
            }
            // The last block: the one a decode writes (tables are exact).
            if seq.block_table.last() == Some(&NULL_BLOCK) {
                return Err(RunnerError::BadBatch(format!(
                    "request {}: null block in block table",
                    seq.request_id
                )));
            }
            if seq.samples {
                sampled.push(self.token_at(end));
            }
            self.tokens += seq.token_ids.len() as u64;
        }
        self.batches += 1;
        Ok(RunnerOutput {
            sampled,
            modeled_seconds: self.modeled_seconds,
        })
    }
}
