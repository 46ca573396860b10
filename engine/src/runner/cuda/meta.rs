//! Packing of one step's metadata into a single `i32` buffer, copied to the
//! device with one host-to-device copy per step.
//!
//! Layout (all `i32`, offsets in [`StepLayout`]): `hdr[0] = bt_stride`, a pad,
//! then the sections that the token count `T` alone places ([`TokenRows`]):
//! token ids `[T]`, positions `[T]`, KV slots `[T]` (-1 = do not write); then,
//! 8-byte aligned, the greedy-sampling results (one zeroed 64-bit
//! `argmax_rows` key per sampled row, [`argmax_index`] decodes it, then one
//! zeroed count per sampled row of the `argmax_rows` blocks done with it),
//! `q_start[S + 1]`, `ctx_len[S]` (cache length after the step), `sample_rows`
//! (token row of each sampled sequence, batch order), `decodes` (triples of
//! sequence, token row, keys it attends to: the query tokens of the decode
//! attention path), prefill `tiles` (pairs of sequence, first new token), and
//! last the block tables `[S][bt_stride]`.
//!
//! The decode path takes every sequence with one new token, and also every
//! short prefill chunk over a cached context (one token per entry, each seeing
//! the keys before it): the tile kernel walks such a chunk's context with one
//! block per KV head (measured on the H200: a 32-token chunk over 3,200 cached
//! tokens, 5.6 ms a step), where decode entries spread it over the GPU.
//! Because the block tables come last and the stride is read on the device,
//! a decode graph captured for a bucket of B sequences stays valid for any
//! contexts: every offset depends on B alone ([`Padding::Sequences`]).
//! Because the token sections come first, the graphs of a piecewise step
//! (piecewise.rs), which read nothing else, stay valid for every step padded
//! to the same token bucket ([`Padding::Tokens`]): padding rows get token 0,
//! position 0 and slot -1, and no later kernel reads their outputs.

use crate::runner::{short_chunk_on_decode_path, RunnerError, ScheduledBatch};

/// `i32`s before the first section: `hdr[0] = bt_stride` and a pad.
const HEADER: usize = 2;

/// The sections placed by the token count alone: where a step's token ids,
/// positions and KV slots start, for `num_tokens` rows (the padded count
/// when padded). Whatever else a step holds, its layout places these here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TokenRows {
    pub num_tokens: usize,
    pub tokens: usize,
    pub positions: usize,
    pub slots: usize,
}

impl TokenRows {
    pub fn new(t: usize) -> Self {
        Self {
            num_tokens: t,
            tokens: HEADER,
            positions: HEADER + t,
            slots: HEADER + 2 * t,
        }
    }

    /// The first `i32` after the sections.
    fn end(&self) -> usize {
        self.slots + self.num_tokens
    }
}

/// Where each section of the packed metadata starts (in `i32`s) and how long it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct StepLayout {
    pub num_tokens: usize,
    pub num_seqs: usize,
    pub num_sampled: usize,
    pub num_decodes: usize,
    pub num_tiles: usize,
    pub bt_stride: usize,
    pub tokens: usize,
    pub positions: usize,
    pub slots: usize,
    /// 64-bit argmax keys (two `i32`s each, 8-byte aligned), zero before the step.
    pub argmax: usize,
    /// `argmax_rows` blocks done with each sampled row, zero before the step.
    pub argmax_done: usize,
    pub q_start: usize,
    pub ctx_len: usize,
    pub sample_rows: usize,
    /// `[num_decodes][3]`: sequence, token row, keys attended (cache length).
    pub decodes: usize,
    pub tiles: usize,
    pub block_tables: usize,
    pub total: usize,
}

impl StepLayout {
    pub fn new(
        t: usize,
        s: usize,
        n_samp: usize,
        n_dec: usize,
        n_tiles: usize,
        bt_stride: usize,
    ) -> Self {
        let rows = TokenRows::new(t);
        // The metadata buffer is 256-byte aligned: an even offset is 8-byte aligned.
        let argmax = rows.end().next_multiple_of(2);
        let argmax_done = argmax + 2 * n_samp;
        let q_start = argmax_done + n_samp;
        let ctx_len = q_start + s + 1;
        let sample_rows = ctx_len + s;
        let decodes = sample_rows + n_samp;
        let tiles = decodes + 3 * n_dec;
        let block_tables = tiles + 2 * n_tiles;
        let total = block_tables + s * bt_stride;
        Self {
            num_tokens: t,
            num_seqs: s,
            num_sampled: n_samp,
            num_decodes: n_dec,
            num_tiles: n_tiles,
            bt_stride,
            tokens: rows.tokens,
            positions: rows.positions,
            slots: rows.slots,
            argmax,
            argmax_done,
            q_start,
            ctx_len,
            sample_rows,
            decodes,
            tiles,
            block_tables,
            total,
        }
    }

    /// The most `i32`s a step can need.
    pub fn capacity(max_tokens: usize, max_seqs: usize, max_blocks_per_seq: usize) -> usize {
        // Each decode entry and each prefill tile holds at least one token; fewer
        // tokens than `max_tokens` save three ints a token, more than the alignment pad.
        Self::new(
            max_tokens,
            max_seqs,
            max_seqs,
            max_tokens,
            max_tokens,
            max_blocks_per_seq,
        )
        .total
    }

    /// The token sections: all that the layer parts around the attention, and
    /// so the graphs of a piecewise step, read.
    pub fn token_rows(&self) -> TokenRows {
        TokenRows {
            num_tokens: self.num_tokens,
            tokens: self.tokens,
            positions: self.positions,
            slots: self.slots,
        }
    }

    /// Whether every sequence has exactly one new token (a graph-able step).
    pub fn is_decode_only(&self) -> bool {
        self.num_tiles == 0 && self.num_decodes == self.num_seqs
    }
}

/// How [`pack_step`] pads a batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Padding {
    /// As it is (an eager step).
    None,
    /// A decode-only batch padded to this many sequences (a decode graph's
    /// bucket): padding sequences of one uncached token each.
    Sequences(usize),
    /// Token rows padded to this many (a piecewise step's bucket): padding
    /// rows that belong to no sequence; everything else as it is.
    Tokens(usize),
}

/// Limits a batch is checked against before anything reaches the device.
#[derive(Debug, Clone, Copy)]
pub(crate) struct BatchLimits {
    pub block_size: usize,
    pub num_blocks: usize,
    pub vocab_size: usize,
    pub max_tokens: usize,
    pub max_seqs: usize,
    pub max_len: usize,
    /// New tokens of one sequence per prefill attention tile.
    pub tokens_per_tile: usize,
}

/// Whether a sequence's `n` new tokens after `start_pos` cached ones go
/// through the decode attention kernels: one token, or a short chunk over a
/// cached context (module docs).
fn decode_path(start_pos: usize, n: usize, lim: &BatchLimits) -> bool {
    n == 1 || short_chunk_on_decode_path(start_pos, n, lim.tokens_per_tile)
}

/// Packs `batch` into `buf`, padded as `pad` says. With
/// [`Padding::Sequences`] the batch must be decode-only; with
/// [`Padding::Tokens`] it must have no more tokens than the bucket. Padding
/// rows hold token 0, position 0 and slot -1 (no KV write); padding
/// sequences have an empty context.
pub(crate) fn pack_step(
    batch: &ScheduledBatch<'_>,
    lim: &BatchLimits,
    pad: Padding,
    buf: &mut [i32],
) -> Result<StepLayout, RunnerError> {
    let bad = |m: String| Err(RunnerError::BadBatch(m));
    if batch.block_size != lim.block_size {
        return bad(format!(
            "batch block_size {} but the KV cache uses {}",
            batch.block_size, lim.block_size
        ));
    }
    if batch.seqs.is_empty() {
        return bad("empty batch".into());
    }
    let bs = lim.block_size;
    let mut t = 0;
    let mut n_samp = 0;
    let mut n_dec = 0;
    let mut n_tiles = 0;
    let mut bt_stride = 1;
    for (i, s) in batch.seqs.iter().enumerate() {
        let n = s.token_ids.len();
        if n == 0 {
            return bad(format!("sequence {i} has no tokens"));
        }
        let end = s.start_pos + n;
        if end > lim.max_len {
            return bad(format!(
                "sequence {i} reaches position {end}, beyond max_model_len {}",
                lim.max_len
            ));
        }
        let blocks = end.div_ceil(bs);
        if s.block_table.len() < blocks {
            return bad(format!(
                "sequence {i}: {} blocks for {end} positions",
                s.block_table.len()
            ));
        }
        if let Some(&b) = s.block_table[..blocks]
            .iter()
            .find(|&&b| b as usize >= lim.num_blocks)
        {
            return bad(format!(
                "sequence {i}: block {b} out of {} blocks",
                lim.num_blocks
            ));
        }
        if let Some(&tok) = s.token_ids.iter().find(|&&x| x as usize >= lim.vocab_size) {
            return bad(format!(
                "sequence {i}: token {tok} outside the vocabulary ({})",
                lim.vocab_size
            ));
        }
        t += n;
        n_samp += s.samples as usize;
        if decode_path(s.start_pos, n, lim) {
            n_dec += n;
        } else {
            n_tiles += n.div_ceil(lim.tokens_per_tile);
        }
        bt_stride = bt_stride.max(blocks);
    }
    let s_count = batch.seqs.len();
    let (t_pad, s_pad, samp_pad, dec_pad) = match pad {
        Padding::Sequences(b) => {
            // One token per sequence (every sequence has at least one) and all sampled.
            if t != s_count || n_samp != s_count || b < s_count {
                return bad(format!(
                    "graph bucket {b} needs a decode-only batch of at most {b} sequences"
                ));
            }
            (b, b, b, b)
        }
        Padding::Tokens(tb) => {
            if tb < t {
                return bad(format!(
                    "token bucket {tb} is smaller than the step's {t} tokens"
                ));
            }
            (tb, s_count, n_samp, n_dec)
        }
        Padding::None => (t, s_count, n_samp, n_dec),
    };
    if t_pad > lim.max_tokens || s_pad > lim.max_seqs {
        return bad(format!(
            "{t_pad} tokens / {s_pad} sequences exceed the runner's {} / {}",
            lim.max_tokens, lim.max_seqs
        ));
    }
    let lay = StepLayout::new(t_pad, s_pad, samp_pad, dec_pad, n_tiles, bt_stride);
    if lay.total > buf.len() {
        return bad(format!(
            "step metadata needs {} ints, buffer holds {}",
            lay.total,
            buf.len()
        ));
    }
    buf[0] = bt_stride as i32;
    buf[1] = 0;
    // The alignment pad (if any) and the zeroed argmax keys and counts.
    buf[lay.slots + t_pad..lay.q_start].fill(0);
    let (mut row, mut samp, mut dec) = (0usize, 0usize, 0usize);
    // (keys the tile attends to, sequence, first token): the longest tiles are launched first
    // so they do not start last and leave the GPU idle behind them.
    let mut tiles: Vec<(usize, usize, usize)> = Vec::with_capacity(n_tiles);
    for (i, s) in batch.seqs.iter().enumerate() {
        let n = s.token_ids.len();
        buf[lay.q_start + i] = row as i32;
        buf[lay.ctx_len + i] = (s.start_pos + n) as i32;
        for (j, &tok) in s.token_ids.iter().enumerate() {
            let p = s.start_pos + j;
            buf[lay.tokens + row + j] = tok as i32;
            buf[lay.positions + row + j] = p as i32;
            buf[lay.slots + row + j] = (s.block_table[p / bs] as usize * bs + p % bs) as i32;
        }
        if s.samples {
            buf[lay.sample_rows + samp] = (row + n - 1) as i32;
            samp += 1;
        }
        if decode_path(s.start_pos, n, lim) {
            for j in 0..n {
                let d = lay.decodes + 3 * dec;
                buf[d] = i as i32;
                buf[d + 1] = (row + j) as i32;
                buf[d + 2] = (s.start_pos + j + 1) as i32;
                dec += 1;
            }
        } else {
            for first in (0..n).step_by(lim.tokens_per_tile) {
                tiles.push((s.start_pos + (first + lim.tokens_per_tile).min(n), i, first));
            }
        }
        let bt = &mut buf[lay.block_tables + i * bt_stride..lay.block_tables + (i + 1) * bt_stride];
        let blocks = (s.start_pos + n).div_ceil(bs);
        for (k, slot) in bt.iter_mut().enumerate() {
            *slot = if k < blocks {
                s.block_table[k] as i32
            } else {
                0
            };
        }
        row += n;
    }
    tiles.sort_by_key(|t| std::cmp::Reverse(t.0));
    for (k, &(_, seq, first)) in tiles.iter().enumerate() {
        buf[lay.tiles + 2 * k] = seq as i32;
        buf[lay.tiles + 2 * k + 1] = first as i32;
    }
    for r in t..t_pad {
        // Padding rows: one harmless token each, written nowhere.
        buf[lay.tokens + r] = 0;
        buf[lay.positions + r] = 0;
        buf[lay.slots + r] = -1;
    }
    for i in s_count..s_pad {
        // Padding sequences of a decode bucket (their rows padded above): nothing cached.
        buf[lay.q_start + i] = i as i32;
        buf[lay.ctx_len + i] = 0;
        buf[lay.sample_rows + i] = i as i32;
        buf[lay.decodes + 3 * i..lay.decodes + 3 * i + 3].copy_from_slice(&[i as i32, i as i32, 0]);
        buf[lay.block_tables + i * bt_stride..lay.block_tables + (i + 1) * bt_stride].fill(0);
    }
    // The real rows, and one for each padding sequence: padding rows of a token
    // bucket belong to no sequence, so the last one ends at the real rows.
    buf[lay.q_start + s_pad] = (t + s_pad - s_count) as i32;
    Ok(lay)
}

/// The token index in a 64-bit `argmax_rows` key (kernels.cu): the low half
/// holds `u32::MAX - index`, so that ties go to the lowest index.
pub(crate) fn argmax_index(key: u64) -> u32 {
    if key == 0 {
        return 0; // no value was folded in (cannot happen for a non-empty vocabulary)
    }
    u32::MAX - (key & 0xffff_ffff) as u32
}

#[cfg(test)]
mod tests;
