//! How the CUDA runner lays out attention: which decode kernel a batch gets,
//! how many splits each sequence's keys are cut into, and the batch sizes of
//! its decode graphs. Rules measured on the H200, shared by the runner
//! (`cuda::decode`, `cuda::step`) and the cost model that prices the
//! runner's steps without a GPU (crate `calibration`, `operators`).

/// Most splits of one sequence's decode attention.
pub const MAX_DECODE_SPLITS: usize = 64;
/// Fewest keys per warp of a split in eager steps (whose contexts are known).
pub const DECODE_MIN_KEYS_PER_SPLIT: usize = 32;
/// Decode-graph batch sizes (padded up to the next one).
pub const GRAPH_BUCKETS: [usize; 13] = [1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 192, 256];
/// Decode-attention warps that the splits of a step aim at: enough to keep
/// every SM's memory pipe busy (`engine-bench --tune` times 1024, 2048 and
/// 4096 for each kernel and batch: results/h200/tune.csv).
pub const DECODE_TARGET_WARPS: usize = 2048;

/// The decode graph a batch of `n` decodes replays: the smallest bucket that
/// holds it (`n` itself beyond the largest).
pub fn graph_bucket(n: usize) -> usize {
    GRAPH_BUCKETS.iter().copied().find(|&b| b >= n).unwrap_or(n)
}

/// Splits of each of `n_dec` decode entries' attention, a unit being one
/// (entry, KV head, split) worked on by `warps_per_unit` warps: enough warps
/// in all to reach `target_warps`; in eager steps (`max_ctx` known) no fewer
/// than [`DECODE_MIN_KEYS_PER_SPLIT`] keys per warp of a split; at most
/// `max_splits`, and no more (entry, split) partial rows than the workspace's
/// `partial_rows` (short prefill chunks can bring more entries than
/// sequences). A graph's split count depends on its batch size alone, since
/// the kernel divides each context at run time.
pub fn split_count(
    n_dec: usize,
    num_kv_heads: usize,
    warps_per_unit: usize,
    target_warps: usize,
    max_ctx: Option<usize>,
    max_splits: usize,
    partial_rows: usize,
) -> usize {
    let units = (n_dec * num_kv_heads * warps_per_unit).max(1);
    let mut n = target_warps.div_ceil(units);
    if let Some(ctx) = max_ctx {
        n = n.min(ctx.div_ceil(DECODE_MIN_KEYS_PER_SPLIT * warps_per_unit));
    }
    n.min(partial_rows / n_dec.max(1)).clamp(1, max_splits)
}

/// Decode attention kernels (same results, different work layouts).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DecodeKernel {
    /// A warp per unit, 8-key groups, the next group prefetched into registers.
    Prefetch8,
    /// A block of 4 warps per unit sharing its keys, 4 loads of 16 bytes in flight per lane.
    BlockW4U4,
    /// A block of 8 warps per unit sharing its keys, 4 loads in flight per lane.
    BlockW8U4,
    /// A block per (sequence, split) with a warp per KV head: whole cache slots read at once.
    HeadsU4,
}

/// How a kernel maps units of work onto blocks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DecodeLayout {
    /// Four units per block of four warps.
    WarpPerUnit,
    /// One unit per block of this many warps.
    BlockPerUnit(usize),
    /// The KV heads of one (sequence, split) per block, a warp each.
    BlockPerSplit,
}

impl DecodeKernel {
    pub const ALL: [DecodeKernel; 4] = [
        DecodeKernel::Prefetch8,
        DecodeKernel::BlockW4U4,
        DecodeKernel::BlockW8U4,
        DecodeKernel::HeadsU4,
    ];

    /// The fastest kernel for `n_dec` decodes that handles the shape, from
    /// `engine-bench --tune` on the H200 (results/h200/tune.csv, 2026-11-30):
    /// 8 key-sharing warps up to 16 decodes, 4 up to 128, a warp per KV head
    /// beyond; the warp-per-unit kernel for shapes the others do not take.
    pub fn for_batch(n_dec: usize, head_dim: usize, gqa_group: usize, num_kv_heads: usize) -> Self {
        let preferred = if n_dec <= 16 {
            DecodeKernel::BlockW8U4
        } else if n_dec <= 128 {
            DecodeKernel::BlockW4U4
        } else {
            DecodeKernel::HeadsU4
        };
        if preferred.supports(head_dim, gqa_group, num_kv_heads) {
            preferred
        } else {
            DecodeKernel::Prefetch8
        }
    }

    /// The kernel's name, as `engine-bench --decode-kernel` takes it and
    /// its `tune.csv` writes it (the variant's name).
    pub fn name(self) -> &'static str {
        match self {
            DecodeKernel::Prefetch8 => "Prefetch8",
            DecodeKernel::BlockW4U4 => "BlockW4U4",
            DecodeKernel::BlockW8U4 => "BlockW8U4",
            DecodeKernel::HeadsU4 => "HeadsU4",
        }
    }

    pub fn layout(self) -> DecodeLayout {
        match self {
            DecodeKernel::Prefetch8 => DecodeLayout::WarpPerUnit,
            DecodeKernel::BlockW4U4 => DecodeLayout::BlockPerUnit(4),
            DecodeKernel::BlockW8U4 => DecodeLayout::BlockPerUnit(8),
            DecodeKernel::HeadsU4 => DecodeLayout::BlockPerSplit,
        }
    }

    /// Warps that work on one unit.
    pub fn warps_per_unit(self) -> usize {
        match self.layout() {
            DecodeLayout::BlockPerUnit(w) => w,
            DecodeLayout::WarpPerUnit | DecodeLayout::BlockPerSplit => 1,
        }
    }

    /// Whether this kernel handles the model shape: a block kernel keeps its
    /// warps' partial outputs in 48 KB of static shared memory (`DB_FITS` in
    /// decode_block_attention.cu) and a block has at most 32 warps. The
    /// kernels trap otherwise. Any group size is taken (each lane keeps the
    /// group's query heads in registers, so the group need not divide
    /// anything): every kernel takes all of the Qwen3 family (groups 2, 4,
    /// 5 and 8 over 8 KV heads of 128 dimensions), and group 3.
    pub fn supports(self, head_dim: usize, gqa_group: usize, num_kv_heads: usize) -> bool {
        let fits = |warps: usize| warps * gqa_group * (head_dim + 2) * 4 <= 48 * 1024;
        match self.layout() {
            DecodeLayout::WarpPerUnit => true,
            DecodeLayout::BlockPerUnit(w) => fits(w),
            DecodeLayout::BlockPerSplit => num_kv_heads <= 32 && fits(1),
        }
    }

    /// Whether the kernel can also do q/k-norm + RoPE + the KV-cache write of
    /// the new tokens (block kernels, head_dim a power of two: `ROPE` in
    /// decode_block_attention.cu).
    pub fn fuses_rope(self, head_dim: usize) -> bool {
        self.layout() != DecodeLayout::WarpPerUnit && head_dim.is_power_of_two()
    }

    /// Blocks and threads per block of one launch over `num_decodes` decode
    /// entries of `num_kv_heads` KV heads in `nsplit` splits.
    pub fn grid(self, num_decodes: usize, num_kv_heads: usize, nsplit: usize) -> (usize, usize) {
        let units = num_decodes * num_kv_heads * nsplit;
        match self.layout() {
            DecodeLayout::WarpPerUnit => (units.div_ceil(4), 128),
            DecodeLayout::BlockPerUnit(w) => (units, 32 * w),
            DecodeLayout::BlockPerSplit => (num_decodes * nsplit, 32 * num_kv_heads),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_fill_the_gpu_within_the_partial_buffers() {
        // Qwen3-0.6B (8 KV heads), 4-warp blocks, 2048 warps, 64 splits, 256 sequences.
        let rows = 256 * 64;
        assert_eq!(split_count(64, 8, 4, 2048, None, 64, rows), 1);
        assert_eq!(split_count(16, 8, 8, 2048, None, 64, rows), 2);
        assert_eq!(split_count(1, 8, 8, 2048, None, 64, rows), 32);
        // Eager: no split of fewer than 32 keys per warp (300 keys, 8 warps: 2 splits).
        assert_eq!(split_count(1, 8, 8, 2048, Some(300), 64, rows), 2);
        // A one-KV-head model with room for 1 sequence: 32 entries of a short
        // chunk would want 16 splits each, but the buffers hold 64 rows.
        assert_eq!(split_count(32, 1, 4, 2048, None, 64, 64), 2);
        assert_eq!(split_count(100, 1, 4, 2048, None, 64, 64), 1);
    }

    #[test]
    fn grids_follow_the_layout() {
        // 64 decodes of 8 KV heads, 1 split: a 4-warp block per unit.
        assert_eq!(DecodeKernel::BlockW4U4.grid(64, 8, 1), (512, 128));
        // Batch 1 in 32 splits: 256 blocks of 8 warps.
        assert_eq!(DecodeKernel::BlockW8U4.grid(1, 8, 32), (256, 256));
        assert_eq!(DecodeKernel::HeadsU4.grid(256, 8, 1), (256, 256));
        assert_eq!(DecodeKernel::Prefetch8.grid(3, 8, 1), (6, 128));
        assert_eq!(graph_bucket(1), 1);
        assert_eq!(graph_bucket(50), 64);
        assert_eq!(graph_bucket(300), 300);
    }
}
