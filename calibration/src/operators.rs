//! A step's time from the operators it runs: one calibration for every Qwen3
//! dense size on every GPU of the datasheet table.
//!
//! Contract:
//! - [`step_time`] prices one step of the CUDA runner from the batch shape,
//!   the model shape and the GPU ([`GpuSpec`]: SM count, memory bandwidth,
//!   dense bf16 FLOP/s), with the parameters [`OperatorParams`] fitted once on
//!   H200 measurements ([`fit`]). Nothing in it is specific to one model size
//!   or one GPU: the shapes of the operators come from the model, their rooflines
//!   from the GPU.
//! - The operators ([`ops`]): per layer the QKV, O, gate-up and down GEMMs
//!   (M = the step's tokens, N × K from the model), the elementwise kernels
//!   (bytes moved), decode attention (KV bytes read, and the work query heads ×
//!   keys per SM) and prefill attention (FLOPs of its query-key pairs); the LM
//!   head as a GEMM over the sampled rows; a latency per kernel; host time per
//!   step (a graph replay for decode-only steps, eager launches otherwise).
//! - Each GPU-bound operator costs its latency plus the larger of its memory
//!   and compute times, joined by a smooth maximum: memory at the GPU's
//!   achievable copy bandwidth (datasheet bandwidth × [`COPY_FRACTION`]; a
//!   read stream at a fitted share of it) or at a per-SM rate, whichever
//!   binds; compute at a fitted fraction of the
//!   dense FLOP/s divided by the wave efficiency of its output tiles on the
//!   GPU's SMs ([`gemm`]). So a small GEMM on a 132-SM GPU is bound by its
//!   latency, the same GEMM on 16 SMs by its per-SM rate, a decode GEMM of a
//!   large model by DRAM and a prefill GEMM by FLOP/s.
//! - Doubling a GPU's bandwidth halves a bandwidth-bound operator's memory
//!   term and leaves its latency; moving the parameters to the GPU they were
//!   fitted on changes nothing (there is nothing to move: the GPU is an input).
//! - A step's GEMMs past a short window run at most at a sustained share of
//!   the FLOP/s of the GPU's power budget ([`ops::power_limited`]).
//! - Not modelled: L2 residency between kernels, kernels that differ per
//!   architecture (per-SM rates are the H200's), and tensor parallelism.

pub mod attention;
pub mod burst;
pub mod decode_mix;
pub mod family;
pub mod fit;
pub mod gemm;
pub mod groups;
pub mod held_out;
pub mod lm;
pub mod lone_blocks;
pub mod makespan;
pub mod ops;
pub mod profile;
pub mod residency;
pub mod shapes;
pub mod slices;
#[cfg(test)]
mod test_files;

use engine::BatchShape;
use serde::{Deserialize, Serialize};
use sim::{GpuSpec, ModelShape};

/// Share of the datasheet memory bandwidth a copy kernel reaches on the whole
/// H200: 3.72–3.85 TB/s of 4.8 measured at runner start
/// (`results/h200/engine_family.log`, mean 3.76). Taken to hold on every GPU.
pub const COPY_FRACTION: f64 = 3.76 / 4.8;

/// The fitted constants of the operator model. Rates are per second; latencies
/// in seconds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OperatorParams {
    /// Share of the copy bandwidth a read stream reaches: a GEMM's operands,
    /// decode attention's keys and values. Above 1: the copy kernel it is a
    /// share of also writes what it reads ([`attention::decode_seconds`]).
    pub read_bandwidth_share: f64,
    /// Bytes per second one SM's GEMM tiles stream.
    pub gemm_bytes_per_sm: f64,
    /// Bytes per second one SM's skinny-kernel blocks stream.
    pub skinny_bytes_per_sm: f64,
    /// Share of the dense bf16 FLOP/s a GEMM's full waves reach.
    pub gemm_flops_share: f64,
    /// Latency of one GEMM kernel.
    pub gemm_latency: f64,
    /// Latency of each wave of a GEMM's blocks over the SMs.
    pub gemm_wave_latency: f64,
    /// Exponent of the smooth maximum joining memory and compute times (> 1;
    /// large is a hard maximum).
    pub overlap_exponent: f64,
    /// Decode attention: an SM's seconds per block (loading its queries,
    /// writing its output), per query head of the group in key-sharing
    /// blocks that write split partials ([`attention::block_cost`]).
    pub decode_block_cost: f64,
    /// Decode attention: an SM's seconds per key, KV head and query head of
    /// the group.
    pub decode_key_cost: f64,
    /// Latency of one attention kernel.
    pub attention_latency: f64,
    /// Share of its SM's dense bf16 FLOP/s a prefill attention block reaches.
    pub prefill_attention_flops_share: f64,
    /// Seconds of one prefill attention block besides its iterations.
    pub prefill_block_cost: f64,
    /// Bytes per second one SM's elementwise blocks move.
    pub elementwise_bytes_per_sm: f64,
    /// An SM's seconds per elementwise block.
    pub elementwise_block_cost: f64,
    /// Latency of one elementwise kernel.
    pub elementwise_latency: f64,
    /// Host time of a decode-only step (metadata, graph replay, sampled keys).
    pub host_graph_step: f64,
    /// Host time of any other step (eager launches).
    pub host_eager_step: f64,
    /// Exponent of the smooth maximum joining decode attention's SM work and
    /// its DRAM time: near 1 the two add, as when the SMs' loads wait longer
    /// on a busier memory system.
    pub contention_exponent: f64,
    /// Share of the dense bf16 FLOP/s a GEMM's full waves reach on the
    /// algorithm cuBLAS picks untuned (steps past the piecewise graphs).
    pub untuned_flops_share: f64,
    /// Share of the dense bf16 FLOP/s of the GPU's power budget that a
    /// step's GEMMs hold once its power limit cuts the clocks
    /// ([`ops::power_limited`]).
    pub sustained_flops_share: f64,
    /// Seconds of a step's GEMMs before the power limit holds.
    pub power_window: f64,
    /// Decode attention: an SM's seconds per key and KV head, besides its
    /// query heads' (loading the key and value rows).
    pub decode_kv_key_cost: f64,
    /// Decode attention in the kernel of a warp per KV head (large
    /// batches): an SM's seconds per key and KV head.
    pub heads_kv_key_cost: f64,
    /// The same kernel's seconds per key, KV head and query head of the group.
    pub heads_key_cost: f64,
    /// Prefill attention: seconds of each 64-key iteration of a block that
    /// its SM's other resident blocks do not share ([`attention::prefill_seconds`]).
    pub prefill_iteration_latency: f64,
    /// Share of the dense bf16 FLOP/s of the GPU's power budget that its
    /// busy SMs' tensor cores reach together, before the power limit
    /// ([`Self::sustained_flops_share`]): an SM runs its tiles at
    /// [`Self::gemm_flops_share`] of its peak or at this share of the
    /// budget spread over the product's busy SMs, whichever is lower. Why:
    /// on the whole H200 qwen3-8b's 512-row gate-up product (768 tiles)
    /// runs 0.77 of the peak per SM, on 64 and 32 SMs 0.86 and 0.91
    /// (`results/h200/operators/gemm_shapes.csv`).
    pub burst_flops_share: f64,
    /// Decode attention: seconds of one block alone on its SM besides its
    /// keys, the length of a wave of blocks ([`attention::decode_seconds`]).
    pub decode_wave_latency: f64,
    /// Decode attention: seconds per key each warp of a block alone on its
    /// SM reads (its keys over its warps), whatever the kernel and group.
    pub decode_warp_key_latency: f64,
}

impl OperatorParams {
    /// Number of fitted parameters ([`Self::to_vec`]).
    pub const LEN: usize = 28;

    pub fn to_vec(&self) -> [f64; Self::LEN] {
        [
            self.read_bandwidth_share,
            self.gemm_bytes_per_sm,
            self.skinny_bytes_per_sm,
            self.gemm_flops_share,
            self.gemm_latency,
            self.gemm_wave_latency,
            self.overlap_exponent,
            self.decode_block_cost,
            self.decode_key_cost,
            self.attention_latency,
            self.prefill_attention_flops_share,
            self.prefill_block_cost,
            self.elementwise_bytes_per_sm,
            self.elementwise_block_cost,
            self.elementwise_latency,
            self.host_graph_step,
            self.host_eager_step,
            self.contention_exponent,
            self.untuned_flops_share,
            self.sustained_flops_share,
            self.power_window,
            self.decode_kv_key_cost,
            self.heads_kv_key_cost,
            self.heads_key_cost,
            self.prefill_iteration_latency,
            self.burst_flops_share,
            self.decode_wave_latency,
            self.decode_warp_key_latency,
        ]
    }

    pub fn from_vec(v: &[f64; Self::LEN]) -> Self {
        Self {
            read_bandwidth_share: v[0],
            gemm_bytes_per_sm: v[1],
            skinny_bytes_per_sm: v[2],
            gemm_flops_share: v[3],
            gemm_latency: v[4],
            gemm_wave_latency: v[5],
            overlap_exponent: v[6],
            decode_block_cost: v[7],
            decode_key_cost: v[8],
            attention_latency: v[9],
            prefill_attention_flops_share: v[10],
            prefill_block_cost: v[11],
            elementwise_bytes_per_sm: v[12],
            elementwise_block_cost: v[13],
            elementwise_latency: v[14],
            host_graph_step: v[15],
            host_eager_step: v[16],
            contention_exponent: v[17],
            untuned_flops_share: v[18],
            sustained_flops_share: v[19],
            power_window: v[20],
            decode_kv_key_cost: v[21],
            heads_kv_key_cost: v[22],
            heads_key_cost: v[23],
            prefill_iteration_latency: v[24],
            burst_flops_share: v[25],
            decode_wave_latency: v[26],
            decode_warp_key_latency: v[27],
        }
    }

    /// Physically plausible starting values for a fit (H200 orders of magnitude).
    pub fn initial() -> Self {
        Self {
            read_bandwidth_share: 0.9,
            gemm_bytes_per_sm: 40e9,
            skinny_bytes_per_sm: 40e9,
            gemm_flops_share: 0.7,
            gemm_latency: 3e-6,
            gemm_wave_latency: 2e-6,
            overlap_exponent: 4.0,
            decode_block_cost: 1e-6,
            decode_key_cost: 5e-9,
            attention_latency: 4e-6,
            prefill_attention_flops_share: 0.2,
            prefill_block_cost: 1e-6,
            elementwise_bytes_per_sm: 20e9,
            elementwise_block_cost: 0.5e-6,
            elementwise_latency: 2e-6,
            host_graph_step: 10e-6,
            host_eager_step: 100e-6,
            contention_exponent: 1.5,
            untuned_flops_share: 0.8,
            sustained_flops_share: 0.66,
            power_window: 2e-3,
            decode_kv_key_cost: 5e-9,
            heads_kv_key_cost: 5e-9,
            heads_key_cost: 5e-9,
            prefill_iteration_latency: 1e-6,
            burst_flops_share: 0.75,
            decode_wave_latency: 3e-6,
            decode_warp_key_latency: 200e-9,
        }
    }

    /// Whether every parameter is finite and positive (and the exponent > 1).
    pub fn is_valid(&self) -> bool {
        self.to_vec().iter().all(|x| x.is_finite() && *x > 0.0)
            && self.overlap_exponent > 1.0
            && self.contention_exponent >= 1.0
    }
}

/// A step's seconds, by operator group.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct StepTime {
    pub gemm: f64,
    pub lm_head: f64,
    pub attention: f64,
    pub elementwise: f64,
    pub host: f64,
}

impl StepTime {
    pub fn total(&self) -> f64 {
        self.gemm + self.lm_head + self.attention + self.elementwise + self.host
    }
}

/// The time of one step of `batch` for `model` on `gpu`.
pub fn step_time(
    p: &OperatorParams,
    model: &ModelShape,
    gpu: &GpuSpec,
    batch: &BatchShape,
) -> StepTime {
    ops::step_time(p, model, gpu, batch)
}
