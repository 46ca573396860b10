//! Causal grouped-query attention of one layer over the paged KV cache.
//!
//! Contract: the K/V of every token of the batch are already in the cache for
//! this layer. Each sequence's queries (positions `start_pos ..`) attend to its
//! positions `0 ..= own position`, read through its block table. Query head `h`
//! uses KV head `h / (num_attention_heads / num_key_value_heads)`, as HF's
//! `repeat_kv`; scores are scaled by `1 / sqrt(head_dim)`.

use super::ops::{device_error, masked_softmax_rows};
use super::paged_kv::PagedKv;
use crate::model::Qwen3Config;
use crate::runner::{RunnerError, ScheduledBatch};
use candle_core::{Device, Tensor};

/// Attention output `[num_tokens, q_size]` for the batch, from its queries
/// `q` (`[num_tokens, q_size]`, after q_norm and RoPE).
pub(super) fn batch_attention(
    kv: &PagedKv,
    layer: usize,
    c: &Qwen3Config,
    batch: &ScheduledBatch<'_>,
    q: &[f32],
) -> Result<Vec<f32>, RunnerError> {
    let q_size = c.q_size();
    let mut out = Vec::with_capacity(q.len());
    let mut offset = 0;
    for s in &batch.seqs {
        let new = s.token_ids.len();
        let q_seq = &q[offset * q_size..(offset + new) * q_size];
        out.extend(seq_attention(
            kv,
            layer,
            c,
            s.block_table,
            s.start_pos,
            q_seq,
        )?);
        offset += new;
    }
    Ok(out)
}

fn seq_attention(
    kv: &PagedKv,
    layer: usize,
    c: &Qwen3Config,
    block_table: &[u32],
    start_pos: usize,
    q: &[f32],
) -> Result<Vec<f32>, RunnerError> {
    let (n_kv, hd) = (c.num_key_value_heads, c.head_dim);
    let group = c.num_attention_heads / n_kv;
    let new = q.len() / c.q_size();
    let total = start_pos + new;
    let (k, v) = kv.gather(layer, block_table, total);
    let run = || -> candle_core::Result<Vec<f32>> {
        let cpu = &Device::Cpu;
        // [new, n_kv, group, hd] -> [n_kv, group * new, hd]: row g * new + i.
        let q = Tensor::from_slice(q, (new, n_kv, group, hd), cpu)?
            .permute((1, 2, 0, 3))?
            .contiguous()?
            .reshape((n_kv, group * new, hd))?;
        let k = Tensor::from_vec(k, (total, n_kv, hd), cpu)?
            .transpose(0, 1)?
            .contiguous()?;
        let v = Tensor::from_vec(v, (total, n_kv, hd), cpu)?
            .transpose(0, 1)?
            .contiguous()?;
        let mut scores = q.matmul(&k.t()?)?.flatten_all()?.to_vec1::<f32>()?;
        let scale = 1.0 / (hd as f32).sqrt();
        masked_softmax_rows(&mut scores, total, scale, |row| start_pos + row % new + 1);
        let probs = Tensor::from_vec(scores, (n_kv, group * new, total), cpu)?;
        probs
            .matmul(&v)?
            .reshape((n_kv, group, new, hd))?
            .permute((2, 0, 1, 3))?
            .flatten_all()?
            .to_vec1()
    };
    run().map_err(device_error)
}
