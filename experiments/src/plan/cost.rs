//! The plan's per-GPU figures from a cost model, and KV capacity in tokens.
//!
//! Contract: what prices a GPU's steps and how many KV-cache blocks it holds
//! is decided by the backend module, not here: each target GPU gets
//! [`crate::backend::cost_for`] (the `--profile` file, or the shipped
//! profile of the model's shape, transferred to the GPU; else its datasheet
//! roofline) inside a [`crate::backend::SimBackend`], whose KV capacity is
//! `sim::cost::kv_cache_blocks` unless `num_gpu_blocks` is set. This module
//! only turns a cost model into the figures of `plan.csv`.

use engine::{BatchShape, SeqShape};
use sim::CostModel;

/// Milliseconds of a decode-only step of `batch` sequences at `context` tokens each.
pub fn decode_step_ms(cost: &dyn CostModel, batch: usize, context: usize) -> f64 {
    let seq = SeqShape {
        new_tokens: 1,
        context_before: u32::try_from(context).unwrap_or(u32::MAX),
        samples: true,
    };
    let shape = BatchShape {
        seqs: vec![seq; batch],
    };
    cost.step_seconds(&shape) * 1e3
}

/// Tokens per second of one step prefilling a fresh `tokens`-token prompt.
pub fn prefill_tok_s(cost: &dyn CostModel, tokens: usize) -> f64 {
    let shape = BatchShape {
        seqs: vec![SeqShape {
            new_tokens: u32::try_from(tokens).unwrap_or(u32::MAX),
            context_before: 0,
            samples: true,
        }],
    };
    tokens as f64 / cost.step_seconds(&shape)
}

/// Tokens the KV cache holds: every block but the null block. (vLLM's
/// "GPU KV cache size" log line counts the null block too: `blocks * block_size`.)
pub fn kv_capacity_tokens(blocks: usize, block_size: usize) -> usize {
    blocks.saturating_sub(1) * block_size
}
