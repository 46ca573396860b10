//! One GEMM's time: latency plus the smooth maximum of its memory and compute
//! times on a GPU.
//!
//! Contract: a bf16 product of an `m × k` activation by a `k × n` weight
//! reads `2 (n k + m k)` bytes and writes `2 m n`; it does `2 m n k` FLOPs.
//! Memory time is bound by the chip's achievable copy bandwidth (a slice
//! reads the whole chip's DRAM, [`super::slices::chip_of`]) or by the busy
//! SMs streaming at a per-SM rate, whichever is slower. On cuBLAS, compute
//! time is waves of output tiles (one tile of 128 columns for up to 64 rows,
//! computing the rows rounded up to [`ROW_STEP`]; 128 × 128 beyond; split
//! along K, as cuBLAS does, when there are fewer tiles than SMs), one tile
//! per SM at a time, each at a share of its SM's dense FLOP/s, or at the
//! burst share of the chip's spread over the busy SMs where that is lower
//! ([`OperatorParams::burst_flops_share`]): padding costs as much as useful
//! work, and so does a partial wave, whole, except the last of a product of
//! 128-row tiles and several waves, whose tiles stream-K spreads over every
//! SM. Why: on the whole H200 qwen3-4b's 832-row O product (140 tiles)
//! takes 26 µs, where two whole waves at the full-wave rate take 37
//! (`results/h200/operators/gemm_shapes.csv`). The skinny kernel's blocks run
//! [`SKINNY_BLOCKS_PER_SM`] to an SM at once, so a wave of them is that many
//! blocks on every SM. Latency is the kernel's plus a pipeline fill for each
//! of its first [`EXPOSED_WAVES`] waves.

use super::{OperatorParams, COPY_FRACTION};
use sim::GpuSpec;

/// The kernel a product runs on, as the CUDA runner chooses it
/// ([`engine::runner::gemm_choice`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GemmKernel {
    /// The skinny tensor-core kernel: one block per 8 output columns.
    Skinny,
    /// cuBLAS, its K cut into `split` slices by the runner (1: cuBLAS's own
    /// split-K where its tiles are fewer than the SMs).
    Cublas { split: usize },
}

/// Output columns one skinny-kernel block computes.
pub const SKINNY_COLUMNS: usize = 8;

/// Output tile edge of the tensor-core kernels, in rows and columns.
pub const TILE: usize = 128;
/// Rows a tile of a product of up to 64 rows computes come in steps of this
/// many. Why: cuBLAS's kernels for such products do not pay for 64 rows; on
/// 8 SMs of the H200 the LM head of qwen3-0.6b (151,936 × 1,024) takes
/// 285 µs for 1 row, 312 for 16 and 430 for 64 (`results/h200/operators/
/// gemm_shapes.csv`), where 64-row tiles would cost all three the same.
pub const ROW_STEP: usize = 16;

/// Blocks of the skinny kernel one SM holds at once, by its row tiles
/// (`skinny_gemm_1` .. `_4`, 16 rows each): the driver's occupancy for
/// 256-thread blocks of 44, 60, 64 and 66 registers a thread, 64 K registers
/// an SM (H200, `results/h200/copy_bandwidth.txt`, `cuda-check --bandwidth`).
pub const SKINNY_BLOCKS_PER_SM: [usize; 4] = [5, 4, 4, 3];

/// Waves of a product's blocks whose pipeline fill is exposed; past them an
/// SM loads its next tile while the previous one computes. Why: on 8 SMs of
/// the H200 the LM head of qwen3-0.6b (1 × 151,936 × 1,024: 1,187 tiles, 149
/// waves) streams its weights at 1.09 TB/s in 0.285 ms (`results/h200/
/// operators/gemm_shapes.csv`), where a fill for every wave priced it
/// 0.43–0.45 ms; on the whole GPU products of two to four waves pay more
/// than one fill. Caps of 1 to 8 against the held-out table and the
/// re-priced validate runs: 4 to 6 do best, 8 brings back the 0.6b
/// figures a fill per wave left outside (docs/design.md).
pub const EXPOSED_WAVES: usize = 4;

/// Smallest K slice a split-K product gives one tile.
pub const MIN_SPLIT_K: usize = 512;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Gemm {
    pub m: usize,
    pub n: usize,
    pub k: usize,
}

impl Gemm {
    pub fn bytes(&self) -> f64 {
        2.0 * (self.n * self.k + self.m * self.k + self.m * self.n) as f64
    }
    pub fn flops(&self) -> f64 {
        2.0 * (self.m * self.n * self.k) as f64
    }
    /// The kernel the runner gives this product on `sm_count` SMs; `residual`
    /// for the O and down products, which the runner may split over K;
    /// `graphed` in decode-only steps (replayed from a CUDA graph).
    pub fn kernel(&self, sm_count: u32, residual: bool, graphed: bool) -> GemmKernel {
        use engine::runner::gemm_choice::{skinny_wins, split_k_for};
        let sms = sm_count as usize;
        if skinny_wins(self.m, self.n, self.k, sms) {
            GemmKernel::Skinny
        } else if residual {
            GemmKernel::Cublas {
                split: split_k_for(self.m, self.n, self.k, graphed, sms),
            }
        } else {
            GemmKernel::Cublas { split: 1 }
        }
    }

    /// Output rows of one tensor-core tile: 64 for products of up to 64
    /// rows (decode batches), [`TILE`] beyond.
    pub fn tile_rows(&self) -> usize {
        if self.m <= 64 {
            64
        } else {
            TILE
        }
    }

    fn tiles(&self) -> usize {
        self.m.div_ceil(self.tile_rows()) * self.n.div_ceil(TILE)
    }

    /// Slices of K: the runner's split times cuBLAS's own where the tiles
    /// of the runner's slices are fewer than the SMs.
    pub fn k_slices(&self, kernel: GemmKernel, sm_count: u32) -> usize {
        match kernel {
            GemmKernel::Skinny => 1,
            GemmKernel::Cublas { split } => {
                // The runner's slices are strided batches, each a product
                // cuBLAS splits again where the batches' tiles are fewer
                // than the SMs: qwen3-0.6b's 256 × 1,024 × 3,072 down
                // product in 2 slices (16 tiles each) takes 5.8 µs on the
                // whole H200, where 32 tiles of 1,536 K would take 7 µs at
                // the fitted share of the tensor cores' peak.
                let split = split.max(1);
                split * self.auto_split(self.tiles() * split, self.k / split, sm_count)
            }
        }
    }

    /// Thread blocks the product runs as on `sm_count` SMs.
    pub fn blocks(&self, kernel: GemmKernel, sm_count: u32) -> usize {
        match kernel {
            GemmKernel::Skinny => self.n.div_ceil(SKINNY_COLUMNS),
            GemmKernel::Cublas { .. } => self.tiles() * self.k_slices(kernel, sm_count),
        }
    }

    /// cuBLAS's own split of `k` over `tiles` output tiles: enough slices
    /// of at least [`MIN_SPLIT_K`] to fill the SMs, where the tiles do not.
    fn auto_split(&self, tiles: usize, k: usize, sm_count: u32) -> usize {
        let sms = (sm_count as usize).max(1);
        if tiles < sms {
            (sms / tiles.max(1)).min((k / MIN_SPLIT_K).max(1))
        } else {
            1
        }
    }

    /// Rows one tile computes: up to 64 rows, the product's rows rounded up
    /// to [`ROW_STEP`]; beyond, [`TILE`].
    pub fn computed_tile_rows(&self) -> usize {
        if self.m <= 64 {
            self.m.next_multiple_of(ROW_STEP)
        } else {
            TILE
        }
    }

    /// FLOPs of one tile's share of K, padding rows and columns included.
    pub fn tile_flops(&self, kernel: GemmKernel, sm_count: u32) -> f64 {
        let k = self.k.div_ceil(self.k_slices(kernel, sm_count));
        2.0 * (self.computed_tile_rows() * TILE * k) as f64
    }

    /// Blocks of `kernel` one SM runs at once.
    pub fn blocks_per_sm(&self, kernel: GemmKernel) -> usize {
        match kernel {
            GemmKernel::Skinny => {
                let row_tiles = self.m.div_ceil(16).clamp(1, SKINNY_BLOCKS_PER_SM.len());
                SKINNY_BLOCKS_PER_SM[row_tiles - 1]
            }
            GemmKernel::Cublas { .. } => 1,
        }
    }
}

/// An operator's time and its parts, seconds.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct OperatorTime {
    pub latency: f64,
    pub memory: f64,
    pub compute: f64,
    pub total: f64,
}

/// `(a^p + b^p)^(1/p)`: the larger of two times, rounded up where they are close.
pub fn smooth_max(a: f64, b: f64, p: f64) -> f64 {
    let hi = a.max(b);
    if hi <= 0.0 {
        return 0.0;
    }
    hi * ((a / hi).powf(p) + (b / hi).powf(p)).powf(1.0 / p)
}

/// Seconds to move `bytes` at `share` of the GPU's achievable copy bandwidth
/// (datasheet bandwidth × [`COPY_FRACTION`]).
pub fn copy_seconds(gpu: &GpuSpec, bytes: f64, share: f64) -> f64 {
    bytes / (gpu.mem_bandwidth * COPY_FRACTION * share)
}

/// The product's time on `kernel`: its blocks stream at the kernel's per-SM
/// rate on at most as many SMs as it has blocks.
/// `tuned`: cuBLAS runs the algorithm GEMM tuning chose (decode graphs and
/// piecewise steps); otherwise the one its heuristic picks.
pub fn gemm_time(
    p: &OperatorParams,
    gpu: &GpuSpec,
    g: &Gemm,
    kernel: GemmKernel,
    tuned: bool,
) -> OperatorTime {
    if g.m == 0 {
        return OperatorTime::default();
    }
    let per_sm = match kernel {
        GemmKernel::Skinny => p.skinny_bytes_per_sm,
        GemmKernel::Cublas { .. } => p.gemm_bytes_per_sm,
    };
    let blocks = g.blocks(kernel, gpu.sm_count).max(1);
    let sms = (gpu.sm_count as usize).max(1);
    let active = blocks.min(sms) as f64;
    // Each of the first waves of blocks pays the pipeline fill before its
    // bytes stream; later ones overlap it ([`EXPOSED_WAVES`]).
    let waves = blocks.div_ceil(sms * g.blocks_per_sm(kernel));
    let latency = p.gemm_latency + waves.min(EXPOSED_WAVES) as f64 * p.gemm_wave_latency;
    // DRAM is the chip's: a slice's own copy bandwidth is the rate of its
    // SMs, which a product's tiles outrun ([`super::slices::chip_of`]).
    let chip = super::slices::chip_of(gpu);
    let memory = smooth_max(
        copy_seconds(chip, g.bytes(), p.read_bandwidth_share),
        g.bytes() / (active * per_sm),
        p.overlap_exponent,
    );
    // Tensor-core tiles, one an SM at a time: waves of padded tiles.
    let compute = match kernel {
        GemmKernel::Skinny => g.flops() / (gpu.bf16_flops * p.gemm_flops_share),
        GemmKernel::Cublas { .. } => {
            let share = if tuned {
                p.gemm_flops_share
            } else {
                p.untuned_flops_share
            };
            // Together the busy SMs' tensor cores reach at most the burst
            // share of the power budget's FLOP/s: an SM of a slice, or of a
            // product with few tiles, runs faster than one of the whole GPU.
            let budget = f64::from(super::ops::power_budget_sms(gpu));
            let per_sm =
                gpu.bf16_flops / sms as f64 * share.min(p.burst_flops_share * budget / active);
            // A product of several waves spreads its last partial wave's
            // tiles over every SM (stream-K); one wave or less is split
            // along K instead ([`Gemm::k_slices`]).
            let waves = if g.m > 64 && blocks > sms {
                blocks as f64 / sms as f64
            } else {
                blocks.div_ceil(sms) as f64
            };
            waves * g.tile_flops(kernel, gpu.sm_count) / per_sm
        }
    };
    OperatorTime {
        latency,
        memory,
        compute,
        total: latency + smooth_max(memory, compute, p.overlap_exponent),
    }
}

#[cfg(test)]
#[path = "gemm_tests.rs"]
mod tests;
