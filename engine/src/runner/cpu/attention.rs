//! Causal grouped-query attention of one layer, read straight from the paged
//! KV cache.
//!
//! Contract: the K/V of every token of the batch are already in the cache for
//! this layer. The query of a token at position `p` attends to its sequence's
//! positions `0 ..= p`, read through the sequence's block table. Query head `h`
//! uses KV head `h / (num_attention_heads / num_key_value_heads)`, as HF's
//! `repeat_kv`; scores are scaled by `1 / sqrt(head_dim)`. Each (token, head)
//! output is computed on its own, in the same order whatever the batch, so
//! chunking and batching do not change attention's result.

use super::ops::dot;
use super::paged_kv::PagedKv;
use crate::model::Qwen3Config;
use rayon::prelude::*;

/// Where one token of the flattened batch reads its keys and values.
pub(super) struct TokenContext<'a> {
    pub position: usize,
    pub block_table: &'a [u32],
}

/// Attention output `[num_tokens, q_size]` from the queries `q`
/// (`[num_tokens, q_size]`, after q_norm and RoPE).
pub(super) fn batch_attention(
    kv: &PagedKv,
    layer: usize,
    c: &Qwen3Config,
    tokens: &[TokenContext<'_>],
    q: &[f32],
) -> Vec<f32> {
    let (hd, n_heads) = (c.head_dim, c.num_attention_heads);
    let group = n_heads / c.num_key_value_heads;
    let scale = 1.0 / (hd as f32).sqrt();
    let (keys, values) = (kv.keys(layer), kv.values(layer));
    let mut out = vec![0.0f32; q.len()];
    out.par_chunks_mut(hd)
        .zip(q.par_chunks(hd))
        .enumerate()
        .for_each(|(i, (out, q))| {
            let token = &tokens[i / n_heads];
            let kv_offset = (i % n_heads) / group * hd;
            let row = |pos: usize| {
                let start = kv.slot(token.block_table, pos) * kv.kv_size() + kv_offset;
                start..start + hd
            };
            let mut scores: Vec<f32> = (0..=token.position)
                .map(|pos| dot(q, &keys[row(pos)]) * scale)
                .collect();
            let max = scores.iter().copied().fold(f32::NEG_INFINITY, f32::max);
            let mut sum = 0.0;
            for s in scores.iter_mut() {
                *s = (*s - max).exp();
                sum += *s;
            }
            for (pos, p) in scores.iter().enumerate() {
                let weight = p / sum;
                out.iter_mut()
                    .zip(&values[row(pos)])
                    .for_each(|(o, v)| *o += weight * v);
            }
        });
    out
}
