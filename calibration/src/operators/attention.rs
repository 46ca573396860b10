//! One layer's attention time, from the blocks the CUDA runner launches.
//!
//! Contract:
//! - Decode path (decodes, and short chunks over cached context): the kernel,
//!   split count and grid the runner picks ([`engine::runner::attention_choice`];
//!   decode-only steps replay the graph of the batch's bucket, whose splits
//!   depend on the bucket alone). The busiest SM works through its blocks
//!   (blocks over SMs, rounded up): a fixed cost per block ([`block_cost`]:
//!   per query head of the group where a block writes split partials) plus, per key it
//!   reads, a cost per KV head and one per query head, each its own for the
//!   kernel of a warp per KV head (large batches), which reads whole cache
//!   slots where the others share a head's keys among a block's warps; the
//!   blocks of the longest sequence, which read the most keys, finish last,
//!   so the busiest SM holds one of them and its share of the others (in
//!   the key-sharing kernels of decode-only steps, priced in its waves,
//!   below). It also runs its blocks in waves of what fits on it at once
//!   ([`decode_blocks_per_sm`], registers), each as long as a block alone
//!   on its SM (a latency, then its keys over its warps at a latency each).
//!   An SM that holds one block at a time runs the longest sequence's in
//!   its last wave; one that holds several keeps it in one slot for its
//!   whole read while the others' waves pass through the rest, so its
//!   waves last the longer of the two. Its work is the longer of the
//!   shared cost and the waves, joined by a smooth maximum
//!   ([`WAVE_EXPONENT`]). Or the
//!   KV bytes stream at a read share of the copy bandwidth, whichever is
//!   slower (the two joined by a smooth maximum); plus one
//!   kernel latency. Split partials are merged by a second kernel
//!   ([`merge`]), priced as an elementwise kernel. DRAM delivers each sequence's keys once per
//!   layer: the entries of a short chunk read the same cache blocks, and the
//!   later ones find them in the L2 (taken to hold one layer's keys of a
//!   sequence: 13 MB for qwen3-0.6b at 3,200 tokens, against the H100's and
//!   H200's 50 MB).
//! - Prefill chunks: one block per (tile of query tokens, KV head), three
//!   resident per SM (the kernel's launch bounds and 68 KB of shared memory);
//!   a block costs a fixed part plus its 64-key iterations, each a latency
//!   of its own plus its work at a share of its SM's FLOP/s, which the
//!   blocks resident on the SM share (fewer than three an SM each run
//!   faster). Blocks start in launch order on the first free slot: the
//!   runner launches the tiles longest first, every tile of the first KV
//!   head, then of the next ([`prefill_blocks`]), so the step lasts until
//!   the last slot is done.
//! - Slots per SM are the H200's (64 warps, 3 prefill blocks); a GPU with
//!   fewer is not modelled.

use super::gemm::{copy_seconds, smooth_max};
use super::makespan::blocks_makespan_ps;
use super::ops::{elementwise_seconds, Elementwise};
use super::residency::decode_blocks_per_sm;
use super::OperatorParams;
use crate::features::{decode_keys_read, on_decode_path, tile_tokens};
use engine::runner::attention_choice::{
    graph_bucket, split_count, DecodeKernel, DECODE_TARGET_WARPS, MAX_DECODE_SPLITS,
};
use engine::BatchShape;
use sim::{GpuSpec, ModelShape};
use std::cmp::Reverse;

/// Warps one SM holds at once.
pub const WARPS_PER_SM: usize = 64;
/// Exponent of the smooth maximum joining decode attention's blocks' shared
/// cost and their waves ([`decode_seconds`]). Why not a plain maximum: its
/// kink left the fit's descents at their 300-iteration limit (a fit 13
/// times slower) in worse minima.
pub const WAVE_EXPONENT: f64 = 8.0;
/// Prefill attention blocks resident on one SM.
pub const PREFILL_BLOCKS_PER_SM: usize = 3;
/// Keys one prefill block iteration covers (`ATT_BN` in attention.cu).
pub const PREFILL_KEYS_PER_ITERATION: usize = 64;
/// Query rows of one prefill tile (`ATT_BM`): tile tokens × group size.
pub const PREFILL_TILE_ROWS: usize = 64;
/// Sequences the runner's partial buffers are sized for (the default
/// `max_num_seqs`): only bounds the splits of very large batches.
const PARTIAL_SEQS: usize = 256;

/// The decode-path work of one layer.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct DecodeWork {
    /// Entries the kernel is launched for (the graph's bucket in a decode-only step).
    pub entries: usize,
    pub splits: usize,
    pub blocks: usize,
    /// Keys read, summed over entries (each read once per KV head).
    pub keys: f64,
    /// Keys held by the sequences on the decode path (context and new
    /// tokens), summed over sequences: what DRAM delivers.
    pub unique_keys: f64,
    /// Keys the longest entry reads (its sequence's context and new tokens).
    pub max_keys: f64,
    /// Whether the kernel is the one of a warp per KV head.
    pub heads_kernel: bool,
    /// Warps of one block.
    pub warps_per_block: usize,
    /// Blocks one SM holds at once ([`decode_blocks_per_sm`]).
    pub blocks_per_sm: usize,
    /// Whether the step is decode-only (a graph replay): nothing of the
    /// step runs beside the attention kernel's last blocks.
    pub graphed: bool,
}

/// What the sequences of a batch on the decode path add up to.
struct DecodePath {
    /// Query rows (each sequence's new tokens).
    entries: usize,
    /// Keys read, summed over entries.
    keys: f64,
    /// Keys held by the sequences (context and new tokens), summed.
    unique_keys: f64,
    /// Keys the longest sequence holds.
    max_ctx: usize,
}

impl DecodePath {
    fn of(m: &ModelShape, batch: &BatchShape) -> Self {
        let tile = tile_tokens(m);
        let mut path = Self {
            entries: 0,
            keys: 0.0,
            unique_keys: 0.0,
            max_ctx: 0,
        };
        for s in batch.seqs.iter().filter(|s| on_decode_path(s, tile)) {
            path.entries += s.new_tokens as usize;
            path.keys += decode_keys_read(s);
            path.unique_keys += f64::from(s.context_before + s.new_tokens);
            path.max_ctx = path.max_ctx.max((s.context_before + s.new_tokens) as usize);
        }
        path
    }

    /// Entries the kernel is launched for: a decode-only step replays the
    /// graph of its bucket.
    fn launched(&self, graphed: bool) -> usize {
        if graphed {
            graph_bucket(self.entries)
        } else {
            self.entries
        }
    }
}

/// The decode-path launch of `batch` (`graphed`: a decode-only step), with
/// the kernel and splits the runner picks.
pub fn decode_work(m: &ModelShape, batch: &BatchShape, graphed: bool) -> DecodeWork {
    let path = DecodePath::of(m, batch);
    if path.entries == 0 {
        return DecodeWork::default();
    }
    let launched = path.launched(graphed);
    // An eager step's contexts are known; a graph's splits depend on its
    // bucket alone.
    let known_ctx = (!graphed).then_some(path.max_ctx);
    let kernel = DecodeKernel::for_batch(launched, m.head_dim, gqa_group(m), m.num_kv_heads);
    let splits = split_count(
        launched,
        m.num_kv_heads,
        kernel.warps_per_unit(),
        DECODE_TARGET_WARPS,
        known_ctx,
        MAX_DECODE_SPLITS,
        PARTIAL_SEQS * MAX_DECODE_SPLITS,
    );
    work_of(m, &path, graphed, kernel, splits)
}

/// The decode-path launch of `batch` by `kernel` in `splits` splits
/// (`engine-bench --lone-blocks` fixes both).
pub fn decode_work_of(
    m: &ModelShape,
    batch: &BatchShape,
    graphed: bool,
    kernel: DecodeKernel,
    splits: usize,
) -> DecodeWork {
    let path = DecodePath::of(m, batch);
    if path.entries == 0 {
        return DecodeWork::default();
    }
    work_of(m, &path, graphed, kernel, splits)
}

/// The launch of a non-empty decode path by `kernel` in `splits` splits.
fn work_of(
    m: &ModelShape,
    path: &DecodePath,
    graphed: bool,
    kernel: DecodeKernel,
    splits: usize,
) -> DecodeWork {
    let launched = path.launched(graphed);
    let splits = splits.max(1);
    let (blocks, threads) = kernel.grid(launched, m.num_kv_heads, splits);
    let warps_per_block = threads / 32;
    DecodeWork {
        entries: launched,
        splits,
        blocks,
        keys: path.keys,
        unique_keys: path.unique_keys,
        max_keys: path.max_ctx as f64,
        heads_kernel: kernel == DecodeKernel::HeadsU4,
        warps_per_block,
        blocks_per_sm: decode_blocks_per_sm(kernel, gqa_group(m), warps_per_block),
        graphed,
    }
}

/// 64-key iterations of each prefill block, in launch order: the runner
/// sorts the tiles by the keys they attend to, longest first (stable, so
/// ties keep sequence order; `cuda::meta`), and the grid runs every tile of
/// the first KV head, then of the next.
pub fn prefill_blocks(m: &ModelShape, batch: &BatchShape) -> Vec<usize> {
    let tile = tile_tokens(m);
    let mut tiles = Vec::new();
    for s in batch.seqs.iter().filter(|s| !on_decode_path(s, tile)) {
        let (ctx, new) = (s.context_before as usize, s.new_tokens as usize);
        for t in 0..new.div_ceil(tile) {
            let end = ((t + 1) * tile).min(new);
            tiles.push((ctx + end, (ctx + end).div_ceil(PREFILL_KEYS_PER_ITERATION)));
        }
    }
    tiles.sort_by_key(|&(keys, _)| Reverse(keys));
    let tiles: Vec<usize> = tiles
        .into_iter()
        .map(|(_, iterations)| iterations)
        .collect();
    let mut blocks = Vec::with_capacity(tiles.len() * m.num_kv_heads);
    for _ in 0..m.num_kv_heads {
        blocks.extend_from_slice(&tiles);
    }
    blocks
}

/// One layer's decode-path attention seconds.
pub fn decode_seconds(p: &OperatorParams, m: &ModelShape, gpu: &GpuSpec, w: &DecodeWork) -> f64 {
    if w.entries == 0 {
        return 0.0;
    }
    let group = gqa_group(m) as f64;
    // DRAM delivers the keys and values at a read stream's share of the copy
    // bandwidth, as it does a GEMM's weights: on the H100 qwen3-0.6b's
    // batch-256 decode at 2,000 keys takes 9.4 ms more than at 1,000, 29 GB
    // more read, 3.13 TB/s, where its copy kernel moves 2.74
    // (`results/h100/engine_family.csv`).
    let kv_bytes = w.unique_keys * (2 * m.num_kv_heads * m.head_dim * m.bytes_per_param) as f64;
    // The busiest SM's blocks, each its share of the keys. A key costs a
    // block once for its K and V rows and once more for each query head of
    // the group: per query head the cost falls with the group (on an H100 at
    // 2,000 keys, about 8 ns per key and head at group 4, 5 ns at group 8).
    let blocks = w.blocks.max(1);
    let per_sm = blocks.div_ceil(gpu.sm_count.max(1) as usize) as f64;
    let key_cost = if w.heads_kernel {
        p.heads_kv_key_cost + group * p.heads_key_cost
    } else {
        p.decode_kv_key_cost + group * p.decode_key_cost
    };
    let units_per_block = (w.entries * m.num_kv_heads * w.splits) as f64 / blocks as f64;
    let kv_keys = w.keys * m.num_kv_heads as f64 / blocks as f64;
    let block_cost = block_cost(p, m, w);
    let mean_block = block_cost + kv_keys * key_cost;
    // The blocks of the longest sequence read the most keys: the SM holding
    // one of them finishes last when contexts differ (a batch of uniform
    // contexts has no such block). In a step with prefills (launched
    // eagerly), and in the kernel of a warp per KV head, it reads its keys
    // beyond a mean block's at the busiest SM's cost per key; in the
    // key-sharing kernels of decode-only steps, whose next kernel waits for
    // the attention's output, it reads them alone, in its waves (below).
    // Why: one 2,048-key sequence among four at 300 keys adds about as much
    // to a group-2 size's layer as to a group-4 one's
    // (`results/h100/decode_mix/`), as a block alone does
    // (`results/h100/lone_blocks/`).
    let tail_key_cost = if w.graphed && !w.heads_kernel {
        0.0
    } else {
        key_cost
    };
    let longest_keys = units_per_block * w.max_keys / w.splits.max(1) as f64;
    let shared = per_sm * mean_block + (longest_keys - kv_keys).max(0.0) * tail_key_cost;
    // An SM also runs its blocks in waves of what fits at once
    // ([`decode_blocks_per_sm`]), none shorter than a block alone on its
    // SM: a latency, then its keys a warp at a latency each. Where few
    // blocks share an SM, that bounds the work rather than its throughput
    // (module docs). The longest sequence's block runs in the last wave of
    // an SM that holds one block at a time; on one that holds several it
    // keeps a slot for its whole read while the other waves pass through
    // the rest, so the waves last the longer of the two (a hard maximum:
    // a uniform batch's waves are priced as before, and the smooth one
    // priced batch-1 decodes on 8 SMs 13 % long in the SM counts'
    // hold-out). Why: with the longest block after the others' waves,
    // qwen3-8b's poisson_mix at 40 req/s (decode steps of sequences from
    // tens to 3,200 keys) came out with an ITL median 13.5 % long on the
    // H200 and 8.3 % on the H100; beside them, −1.3 and −3.8 %
    // (`results/h200/validate_operators/reprice/`).
    let waves = (per_sm as usize).div_ceil(w.blocks_per_sm.max(1)).max(1) as f64;
    let warps = w.warps_per_block.max(1) as f64;
    let wave = |keys: f64| p.decode_wave_latency + keys / warps * p.decode_warp_key_latency;
    let longest = wave(longest_keys.max(kv_keys));
    let in_waves = if w.blocks_per_sm > 1 {
        (waves * wave(kv_keys)).max(longest)
    } else {
        (waves - 1.0) * wave(kv_keys) + longest
    };
    let work = smooth_max(shared, in_waves, WAVE_EXPONENT);
    p.attention_latency
        + smooth_max(
            copy_seconds(gpu, kv_bytes, p.read_bandwidth_share),
            work,
            p.contention_exponent,
        )
        + merge_seconds(p, m, gpu, w)
}

/// Query heads per KV head of `m` ([`engine::runner::gqa_group`]).
fn gqa_group(m: &ModelShape) -> usize {
    engine::runner::gqa_group(m.num_q_heads, m.num_kv_heads)
}

/// An SM's fixed seconds for one decode block, besides its keys: once per
/// query head of the group in a key-sharing block that writes split
/// partials (f32 rows and a max and sum per query head), once otherwise.
/// Measured, the cause not isolated: on 8 to 64 SMs of the H200 a
/// batch-1 decode's 8-warp blocks (32 splits, about 9 keys each) cost the
/// busiest SM 1.3 µs a block at group 2 (qwen3-0.6b) and 3.0 µs at group 4
/// (qwen3-8b), where batch 64's single-split 4-warp blocks (300 keys) cost
/// 4.6 and 8.0 µs, a difference their keys' cost per query head accounts
/// for (`results/h200/operators/groups.csv`, attention of decode1 and
/// decode64, per layer against blocks per SM).
pub fn block_cost(p: &OperatorParams, m: &ModelShape, w: &DecodeWork) -> f64 {
    if w.heads_kernel || w.splits <= 1 {
        p.decode_block_cost
    } else {
        p.decode_block_cost * gqa_group(m) as f64
    }
}

/// The kernel that merges the split partials (`attn_combine`), when there
/// are splits: a block of 128 threads per (entry, query head) reads its
/// splits' f32 partial outputs and (max, sum) pairs and writes the bf16
/// row, an elementwise kernel by its launch and its bytes.
pub fn merge(m: &ModelShape, w: &DecodeWork) -> Option<Elementwise> {
    if w.splits <= 1 {
        return None;
    }
    let blocks = w.entries * m.num_q_heads;
    let per_block = w.splits * (m.head_dim * 4 + 8) + m.head_dim * m.bytes_per_param;
    Some(Elementwise {
        bytes: (blocks * per_block) as f64,
        blocks,
    })
}

/// Seconds of the merge kernel of `w`'s split partials; zero without splits.
pub fn merge_seconds(p: &OperatorParams, m: &ModelShape, gpu: &GpuSpec, w: &DecodeWork) -> f64 {
    merge(m, w).map_or(0.0, |k| elementwise_seconds(p, gpu, &k))
}

/// One layer's prefill attention seconds.
pub fn prefill_seconds(p: &OperatorParams, m: &ModelShape, gpu: &GpuSpec, blocks: &[usize]) -> f64 {
    if blocks.is_empty() {
        return 0.0;
    }
    let sms = gpu.sm_count.max(1) as usize;
    // An iteration is a latency of its own plus its work at the SM's rate,
    // shared by the blocks resident there: fewer than
    // PREFILL_BLOCKS_PER_SM blocks an SM each run faster.
    let resident = blocks.len().div_ceil(sms).min(PREFILL_BLOCKS_PER_SM) as f64;
    let sm_flops = gpu.bf16_flops / sms as f64 * p.prefill_attention_flops_share;
    let iteration_flops =
        4.0 * (PREFILL_TILE_ROWS * PREFILL_KEYS_PER_ITERATION * m.head_dim) as f64;
    let per_iteration = p.prefill_iteration_latency + resident * iteration_flops / sm_flops;
    let slots = sms * PREFILL_BLOCKS_PER_SM;
    let end_ps = blocks_makespan_ps(blocks, p.prefill_block_cost, per_iteration, slots);
    p.attention_latency + end_ps as f64 * 1e-12
}

/// One layer's attention seconds for `batch`.
pub fn layer_seconds(
    p: &OperatorParams,
    m: &ModelShape,
    gpu: &GpuSpec,
    batch: &BatchShape,
    graphed: bool,
) -> f64 {
    decode_seconds(p, m, gpu, &decode_work(m, batch, graphed))
        + prefill_seconds(p, m, gpu, &prefill_blocks(m, batch))
}

#[cfg(test)]
#[path = "attention_tests.rs"]
mod tests;
