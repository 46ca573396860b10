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
            // Positions 0..len, block by block: within a block the slots are
            // consecutive, `kv_size` apart.
            let len = token.position + 1;
            let (bs, kv_size) = (kv.block_size(), kv.kv_size());
            let rows = token.block_table[..len.div_ceil(bs)]
                .iter()
                .enumerate()
                .flat_map(|(b, &block)| {
                    let base = block as usize * bs * kv_size + kv_offset;
                    (0..bs.min(len - b * bs)).map(move |j| base + j * kv_size)
                });
            let mut scores: Vec<f32> = rows
                .clone()
                .map(|r| dot(q, &keys[r..r + hd]) * scale)
                .collect();
            let max = scores.iter().copied().fold(f32::NEG_INFINITY, f32::max);
            let mut sum = 0.0;
            for s in scores.iter_mut() {
                *s = (*s - max).exp();
                sum += *s;
            }
            for (r, p) in rows.zip(&scores) {
                let weight = p / sum;
                out.iter_mut()
                    .zip(&values[r..r + hd])
                    .for_each(|(o, v)| *o += weight * v);
            }
        });
    out
}
