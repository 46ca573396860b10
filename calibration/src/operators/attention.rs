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
//!   so the busiest SM holds one of them and its share of the others; or the
//!   KV bytes stream at the copy bandwidth, whichever is slower; plus one
//!   kernel latency. Split partials are merged by a second kernel
//!   ([`merge`]), priced as an elementwise kernel. DRAM delivers each sequence's keys once per
//!   layer: the entries of a short chunk read the same cache blocks, and the
//!   later ones find them in the L2 (taken to hold one layer's keys of a
//!   sequence: 13 MB for qwen3-0.6b at 3,200 tokens, against the H100's and
//!   H200's 50 MB).
//! - Prefill chunks: one block per (tile of query tokens, KV head), three
//!   resident per SM (the kernel's launch bounds and 68 KB of shared memory);
//!   a block costs a fixed part plus its 64-key iterations at a share of its
//!   SM's FLOP/s. Blocks start in launch order (tiles of the first KV head,
//!   then the next) on the first free slot, so the step lasts until the last
//!   slot is done: on many SMs the long last tiles of a causal prompt leave
//!   slots idle.
//! - Slots per SM are the H200's (64 warps, 3 prefill blocks); a GPU with
//!   fewer is not modelled.

use super::gemm::{copy_seconds, smooth_max};
use super::ops::{elementwise_seconds, Elementwise};
use super::OperatorParams;
use crate::features::{decode_keys_read, on_decode_path, tile_tokens};
use engine::runner::attention_choice::{
    graph_bucket, split_count, DecodeKernel, DECODE_TARGET_WARPS, MAX_DECODE_SPLITS,
};
use engine::BatchShape;
use sim::{GpuSpec, ModelShape};
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// Warps one SM holds at once.
pub const WARPS_PER_SM: usize = 64;
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
}

/// The decode-path launch of `batch` (`graphed`: a decode-only step).
pub fn decode_work(m: &ModelShape, batch: &BatchShape, graphed: bool) -> DecodeWork {
    let tile = tile_tokens(m);
    let mut entries = 0;
    let mut keys = 0.0;
    let mut unique_keys = 0.0;
    let mut max_ctx = 0;
    for s in batch.seqs.iter().filter(|s| on_decode_path(s, tile)) {
        entries += s.new_tokens as usize;
        keys += decode_keys_read(s);
        unique_keys += f64::from(s.context_before + s.new_tokens);
        max_ctx = max_ctx.max((s.context_before + s.new_tokens) as usize);
    }
    if entries == 0 {
        return DecodeWork::default();
    }
    let group = gqa_group(m);
    let (launched, known_ctx) = if graphed {
        (graph_bucket(entries), None)
    } else {
        (entries, Some(max_ctx))
    };
    let kernel = DecodeKernel::for_batch(launched, m.head_dim, group, m.num_kv_heads);
    let splits = split_count(
        launched,
        m.num_kv_heads,
        kernel.warps_per_unit(),
        DECODE_TARGET_WARPS,
        known_ctx,
        MAX_DECODE_SPLITS,
        PARTIAL_SEQS * MAX_DECODE_SPLITS,
    );
    let (blocks, _) = kernel.grid(launched, m.num_kv_heads, splits);
    DecodeWork {
        entries: launched,
        splits,
        blocks,
        keys,
        unique_keys,
        max_keys: max_ctx as f64,
        heads_kernel: kernel == DecodeKernel::HeadsU4,
    }
}

/// 64-key iterations of each prefill block, in launch order.
pub fn prefill_blocks(m: &ModelShape, batch: &BatchShape) -> Vec<usize> {
    let tile = tile_tokens(m);
    let mut tiles = Vec::new();
    for s in batch.seqs.iter().filter(|s| !on_decode_path(s, tile)) {
        let (ctx, new) = (s.context_before as usize, s.new_tokens as usize);
        for t in 0..new.div_ceil(tile) {
            let end = ((t + 1) * tile).min(new);
            tiles.push((ctx + end).div_ceil(PREFILL_KEYS_PER_ITERATION));
        }
    }
    let mut blocks = Vec::with_capacity(tiles.len() * m.num_kv_heads);
    for _ in 0..m.num_kv_heads {
        blocks.extend_from_slice(&tiles);
    }
    blocks
}

/// When the last of `costs` (seconds, in launch order) finishes on `slots`
/// slots, each block starting on the first slot to come free.
pub fn makespan(costs: impl Iterator<Item = f64>, slots: usize) -> f64 {
    let mut free: BinaryHeap<Reverse<u64>> = BinaryHeap::new();
    let mut end = 0.0f64;
    // Times as integer picoseconds so the heap orders them exactly.
    let to_ps = |s: f64| (s * 1e12).round() as u64;
    for c in costs {
        let start = if free.len() < slots.max(1) {
            0
        } else {
            free.pop().map(|Reverse(t)| t).unwrap_or(0)
        };
        let finish = start + to_ps(c);
        end = end.max(finish as f64 * 1e-12);
        free.push(Reverse(finish));
    }
    end
}

/// One layer's decode-path attention seconds.
pub fn decode_seconds(p: &OperatorParams, m: &ModelShape, gpu: &GpuSpec, w: &DecodeWork) -> f64 {
    if w.entries == 0 {
        return 0.0;
    }
    let group = gqa_group(m) as f64;
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
    // contexts has no such block).
    let longest_block =
        block_cost + units_per_block * w.max_keys / w.splits.max(1) as f64 * key_cost;
    let work = (per_sm - 1.0) * mean_block + mean_block.max(longest_block);
    p.attention_latency
        + smooth_max(
            copy_seconds(gpu, kv_bytes, 1.0),
            work,
            p.contention_exponent,
        )
        + merge_seconds(p, m, gpu, w)
}

/// Query heads per KV head (a valid Qwen3 shape's heads divide evenly).
fn gqa_group(m: &ModelShape) -> usize {
    (m.num_q_heads / m.num_kv_heads.max(1)).max(1)
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
    let slot_flops = gpu.bf16_flops / sms as f64 * p.prefill_attention_flops_share
        / PREFILL_BLOCKS_PER_SM as f64;
    let iteration_flops =
        4.0 * (PREFILL_TILE_ROWS * PREFILL_KEYS_PER_ITERATION * m.head_dim) as f64;
    let per_iteration = iteration_flops / slot_flops;
    let costs = blocks
        .iter()
        .map(|&it| p.prefill_block_cost + it as f64 * per_iteration);
    p.attention_latency + makespan(costs, sms * PREFILL_BLOCKS_PER_SM)
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
mod tests {
    use super::*;
    use engine::SeqShape;

    /// The initial parameters, an SM-bound kernel's work and its DRAM time
    /// joined by a hard maximum.
    fn hard_max() -> OperatorParams {
        OperatorParams {
            contention_exponent: 1e6,
            ..OperatorParams::initial()
        }
    }

    /// The H200 with bandwidth to spare, so that the SMs' work sets a
    /// decode's time.
    fn sm_bound_h200() -> GpuSpec {
        GpuSpec {
            mem_bandwidth: 1e15,
            ..crate::datasheet::lookup("h200-sxm").expect("h200 in the table")
        }
    }

    fn qwen3_8b() -> ModelShape {
        ModelShape::from_qwen3(&engine::model::Qwen3Config::preset("qwen3-8b").expect("preset"))
    }

    fn seq(new: u32, ctx: u32) -> SeqShape {
        SeqShape {
            new_tokens: new,
            context_before: ctx,
            samples: true,
        }
    }

    #[test]
    fn a_decode_batch_launches_the_runners_grid() {
        let m = ModelShape::qwen3_0_6b(); // 8 KV heads, group 2
        let one = BatchShape {
            seqs: vec![seq(1, 299)],
        };
        // Batch 1: 8-warp blocks, 2048 / (8 heads × 8 warps) = 32 splits.
        let w = decode_work(&m, &one, true);
        assert_eq!((w.entries, w.splits, w.blocks), (1, 32, 256));
        assert_eq!(w.keys, 300.0);
        // Batch 50 replays the graph of 64: 4-warp blocks, one split.
        let fifty = BatchShape {
            seqs: vec![seq(1, 299); 50],
        };
        let w = decode_work(&m, &fifty, true);
        assert_eq!((w.entries, w.splits, w.blocks), (64, 1, 512));
        // Eager, the 300 keys bound the splits: 300 / (32 keys × 8 warps) → 2.
        let w = decode_work(&m, &one, false);
        assert_eq!(w.splits, 2);
    }

    #[test]
    fn a_short_chunks_entries_share_their_sequences_keys_in_dram() {
        let m = ModelShape::qwen3_0_6b(); // 32-token tiles: a 32-token chunk is on the decode path
        let chunk = BatchShape {
            seqs: vec![seq(32, 3200)],
        };
        let w = decode_work(&m, &chunk, false);
        // 32 entries, token j reading the 3,200 cached keys and j + 1 new ones;
        // DRAM delivers the sequence's 3,232 keys once.
        assert_eq!(w.entries, 32);
        assert_eq!(w.keys, 32.0 * 3200.0 + 32.0 * 33.0 / 2.0);
        assert_eq!(w.unique_keys, 3232.0);
        // Plain decodes: each sequence's keys once either way.
        let decodes = BatchShape {
            seqs: vec![seq(1, 299); 4],
        };
        let w = decode_work(&m, &decodes, false);
        assert_eq!((w.keys, w.unique_keys), (1200.0, 1200.0));
        // So the chunk's DRAM term is a decode's, not 32 decodes'.
        let gpu = crate::datasheet::lookup("h100-sxm").expect("h100 in the table");
        let p = OperatorParams {
            decode_block_cost: 0.0,
            decode_key_cost: 0.0,
            decode_kv_key_cost: 0.0,
            attention_latency: 0.0,
            ..hard_max()
        };
        let w = decode_work(&m, &chunk, false);
        let t = decode_seconds(&p, &m, &gpu, &w);
        let bytes = 3232.0 * 4096.0;
        let dram = bytes / (gpu.mem_bandwidth * super::super::COPY_FRACTION);
        // Besides the merge of its split partials.
        let merged = merge_seconds(&p, &m, &gpu, &w);
        assert!(merged > 0.0);
        assert!((t - dram - merged).abs() < 1e-9 * dram, "{t} {dram}");
    }

    #[test]
    fn decode_attention_by_hand() {
        let m = ModelShape::qwen3_0_6b();
        let gpu = crate::datasheet::lookup("h200-sxm").expect("h200 in the table");
        let p = hard_max();
        let w = DecodeWork {
            entries: 64,
            splits: 1,
            blocks: 512,
            keys: 64.0 * 300.0,
            unique_keys: 64.0 * 300.0,
            max_keys: 300.0,
            heads_kernel: false,
        };
        // 512 blocks on 132 SMs: 4 on the busiest. Each block reads its
        // share of the 64 × 300 keys over 8 KV heads, for 2 query heads each.
        let kv_keys = 64.0 * 300.0 * 8.0 / 512.0;
        let work = 4.0
            * (p.decode_block_cost + kv_keys * (p.decode_kv_key_cost + 2.0 * p.decode_key_cost));
        let dram = 64.0 * 300.0 * 4096.0 / (gpu.mem_bandwidth * super::super::COPY_FRACTION);
        let t = decode_seconds(&p, &m, &gpu, &w);
        assert!((t - (p.attention_latency + work.max(dram))).abs() < 1e-9 * t);
    }

    #[test]
    fn the_blocks_of_the_longest_sequence_set_the_decode_time() {
        // 8 KV heads, group 2.
        let m = ModelShape::qwen3_0_6b();
        let (gpu, p) = (sm_bound_h200(), hard_max());
        // 16 decodes at 1,000 keys each, and the same 16,000 keys with one
        // sequence at 8,500 and fifteen at 500.
        let even = BatchShape {
            seqs: vec![seq(1, 999); 16],
        };
        let mut skewed = vec![seq(1, 499); 15];
        skewed.push(seq(1, 8499));
        let skewed = BatchShape { seqs: skewed };
        let (we, ws) = (decode_work(&m, &even, true), decode_work(&m, &skewed, true));
        assert_eq!(we.keys, ws.keys);
        assert_eq!((we.blocks, we.splits), (ws.blocks, ws.splits));
        let (te, ts) = (
            decode_seconds(&p, &m, &gpu, &we),
            decode_seconds(&p, &m, &gpu, &ws),
        );
        // The same keys over the same grid: only the longest blocks differ.
        // 16 decodes × 8 KV heads × 2 splits = 256 blocks, 2 on the busiest
        // of 132 SMs; the longest block reads 8,500 / 2 keys.
        // Each block writes split partials: its fixed cost is per query head.
        let key_cost = p.decode_kv_key_cost + 2.0 * p.decode_key_cost;
        let mean = 2.0 * p.decode_block_cost + 16_000.0 * 8.0 / 256.0 * key_cost;
        let longest = 2.0 * p.decode_block_cost + 8_500.0 / 2.0 * key_cost;
        let merged = merge_seconds(&p, &m, &gpu, &we);
        assert_eq!(merge(&m, &we), merge(&m, &ws));
        let latency = p.attention_latency + merged;
        assert!((te - (latency + 2.0 * mean)).abs() < 1e-9 * te, "{te}");
        assert!((ts - (latency + mean + longest)).abs() < 1e-9 * ts, "{ts}");
        assert!(ts > 1.5 * te, "{ts} {te}");
    }

    #[test]
    fn split_partials_are_merged_by_an_elementwise_kernel() {
        let m = ModelShape::qwen3_0_6b(); // 16 query heads of 128 dimensions
        let one = BatchShape {
            seqs: vec![seq(1, 299)],
        };
        // Batch 1 in a graph: 32 splits. attn_combine runs a block per query
        // head; each reads 32 partial rows of 128 f32 and a (max, sum) pair
        // per split, and writes a bf16 row of 128.
        let w = decode_work(&m, &one, true);
        let k = merge(&m, &w).expect("32 splits are merged");
        assert_eq!(k.blocks, 16);
        assert_eq!(k.bytes, 16.0 * (32.0 * (128.0 * 4.0 + 8.0) + 128.0 * 2.0));
        // One split writes the output itself: no second kernel.
        let fifty = BatchShape {
            seqs: vec![seq(1, 299); 50],
        };
        assert_eq!(merge(&m, &decode_work(&m, &fifty, true)), None);
    }

    #[test]
    fn blocks_writing_split_partials_pay_their_fixed_cost_per_query_head() {
        let p = hard_max();
        let one = BatchShape {
            seqs: vec![seq(1, 299)],
        };
        let fifty = BatchShape {
            seqs: vec![seq(1, 299); 50],
        };
        // Batch 1 (32 splits): group 2 for qwen3-0.6b, 4 for qwen3-8b.
        for (m, group) in [(ModelShape::qwen3_0_6b(), 2.0), (qwen3_8b(), 4.0)] {
            let w = decode_work(&m, &one, true);
            assert!(w.splits > 1 && !w.heads_kernel);
            assert_eq!(block_cost(&p, &m, &w), group * p.decode_block_cost);
            // Batch 50 (graph of 64) writes its output in one split.
            let w = decode_work(&m, &fifty, true);
            assert_eq!(w.splits, 1);
            assert_eq!(block_cost(&p, &m, &w), p.decode_block_cost);
        }
        // The kernel of a warp per KV head, split or not: once a block.
        let m = qwen3_8b();
        let w = DecodeWork {
            splits: 2,
            heads_kernel: true,
            ..decode_work(&m, &one, true)
        };
        assert_eq!(block_cost(&p, &m, &w), p.decode_block_cost);
    }

    #[test]
    fn the_kernel_of_a_warp_per_kv_head_has_its_own_key_costs() {
        let m = ModelShape::qwen3_0_6b();
        let (gpu, p) = (sm_bound_h200(), hard_max());
        // 256 decodes take the warp-per-KV-head kernel, 128 the 4-warp one.
        let big = decode_work(
            &m,
            &BatchShape {
                seqs: vec![seq(1, 999); 256],
            },
            true,
        );
        let small = decode_work(
            &m,
            &BatchShape {
                seqs: vec![seq(1, 999); 128],
            },
            true,
        );
        assert!(big.heads_kernel && !small.heads_kernel);
        let dearer = OperatorParams {
            heads_key_cost: 2.0 * p.heads_key_cost,
            ..p
        };
        assert!(decode_seconds(&dearer, &m, &gpu, &big) > decode_seconds(&p, &m, &gpu, &big));
        assert_eq!(
            decode_seconds(&dearer, &m, &gpu, &small),
            decode_seconds(&p, &m, &gpu, &small)
        );
    }

    #[test]
    fn prefill_blocks_are_tiles_times_heads_in_launch_order() {
        let m = ModelShape::qwen3_0_6b(); // 32-token tiles
        let b = prefill_blocks(
            &m,
            &BatchShape {
                seqs: vec![seq(100, 0)],
            },
        );
        // Tiles end at 32, 64, 96, 100 keys: 1, 1, 2, 2 iterations, per KV head.
        assert_eq!(b.len(), 4 * 8);
        assert_eq!(&b[..4], &[1, 1, 2, 2]);
        assert_eq!(&b[4..8], &[1, 1, 2, 2]);
    }

    #[test]
    fn the_makespan_waits_for_the_longest_slot() {
        // Two slots: 3 and 1 start at once; 1 finishes, the next 2 starts at 1.
        assert!((makespan([3.0, 1.0, 2.0].into_iter(), 2) - 3.0).abs() < 1e-12);
        assert!((makespan([1.0, 1.0, 2.0].into_iter(), 2) - 3.0).abs() < 1e-12);
        assert!((makespan([1.0; 6].into_iter(), 3) - 2.0).abs() < 1e-12);
        assert_eq!(makespan(std::iter::empty(), 4), 0.0);
    }
}
