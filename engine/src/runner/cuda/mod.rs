//! The CUDA model runner: Qwen3 in bf16 on an NVIDIA GPU through cudarc.
//!
//! Contract: [`CudaRunner`] implements [`ModelRunner`] for mixed batches
//! (prefill chunks over cached context and decodes in one step). Per step the
//! host packs all metadata into one pinned buffer and copies it with one
//! host-to-device copy; the forward pass writes every sequence's K/V of a layer
//! before that layer's attention; greedy (argmax) tokens come back in batch
//! order, written by the argmax kernel into page-locked host memory that the
//! host watches (step.rs), and [`CudaRunner::last_logits`] copies their logits
//! back on request.
//! Decode-only batches run as CUDA graphs per padded batch-size bucket
//! (captured on first use, or all at once by [`CudaRunner::warm_up_graphs`]);
//! other batches of up to [`CudaTuning::piecewise_max_tokens`] tokens from
//! piecewise graphs per token bucket (piecewise.rs), longer ones eagerly
//! ([`StepPath`]). Kernels are compiled by NVRTC at construction
//! for the device's compute capability: fused residual-add RMSNorm, q/k-norm +
//! RoPE + KV-cache write, tensor-core flash attention for prefill chunks,
//! decode attention (decode.rs: blocks of 8 or 4 warps per sequence and KV
//! head, or a warp per KV head, by batch size; in decode-only steps it also
//! does the q/k-norm + RoPE + cache write),
//! SiLU·mul, and a one-pass argmax whose results gather in the step metadata.
//! GEMMs (bf16 operands, fp32 accumulation, fused QKV and gate-up weights) use
//! a skinny tensor-core kernel for small products and cuBLAS otherwise, with
//! row counts padded into few classes (linear.rs); the O and down products of
//! 17–256 rows run split over K into fp32 partials that the next fused norm
//! adds up. Before a decode graph is captured, each of its cuBLAS shapes is
//! timed against cuBLASLt's heuristic offers and runs the fastest (gemm_lt.rs).
//! In decode-only steps of up to 24 sequences the runner's own kernels are
//! programmatic dependent launches (forward.rs). Each of these rules was
//! measured on the H200; [`CudaTuning`] (tuning.rs) overrides them, through
//! [`CudaRunner::set_tuning`]. The KV cache holds `num_kv_blocks()` blocks
//! (block 0, the null block, included), either as configured or as many as
//! `gpu_memory_utilization` leaves room for.
//! With [`CudaRunnerConfig::sm_count`] the runner runs in a CUDA green
//! context of that many SMs (green.rs); at start it measures the copy
//! bandwidth its SMs get ([`CudaRunner::measured_copy_bandwidth`], copy_bw.rs).
//!
//! Failures are errors: no driver or GPU ([`RunnerError::NoDevice`]), NVRTC
//! failure with its log ([`RunnerError::Compile`]), a model that does not fit
//! the device, checked before anything is allocated ([`RunnerError::Memory`]),
//! too little memory for the KV cache ([`RunnerError::OutOfMemory`]), malformed batches
//! ([`RunnerError::BadBatch`]), an SM count the driver cannot give
//! ([`RunnerError::SmCount`]).

mod copy_bw;
mod decode;
mod device;
mod forward;
mod gemm;
mod gemm_lt;
mod gemm_lt_desc;
mod green;
mod head;
mod kernels;
mod linear;
mod meta;
mod mixed;
mod norm;
mod overheads;
mod piecewise;
mod selftest;
mod step;
mod synthetic;
mod tuning;
mod weights;

use crate::config::EngineConfig;
use crate::model::{Qwen3Config, Qwen3Weights, WeightSource};
use crate::runner::{
    attention_tile_tokens, gemm_padded_rows, ModelRunner, RunnerError, RunnerOutput, ScheduledBatch,
};
use cudarc::driver::{CudaContext, CudaGraph, CudaStream};
use device::{dev_err, DeviceBuffer, PinnedBuffer};
use gemm::Gemm;
use kernels::{KernelShape, Kernels};
use linear::SPLIT_K_MAX_ROWS;
use meta::{BatchLimits, StepLayout};
use std::collections::HashMap;
use std::sync::Arc;
use weights::DeviceWeights;

pub use decode::DecodeKernel;
pub use gemm_lt::GemmTuneReport;
pub use linear::SPLIT_K_MAX;
pub use mixed::{MixedStep, MixedTimes};
pub use overheads::StepOverheads;
pub use piecewise::piecewise_self_test;
pub use selftest::{attention_self_test, kernel_self_test, KernelCheck};
pub use step::StepPath;
pub use synthetic::synthetic_weights_self_test;
pub use tuning::{
    CudaTuning, PIECEWISE_MAX_TOKENS, SKIP_ATTENTION, SKIP_ELEMENTWISE, SKIP_GEMM, SKIP_HEAD,
};

use crate::runner::attention_choice::{GRAPH_BUCKETS, MAX_DECODE_SPLITS};

/// KV-cache and batch settings of a [`CudaRunner`] (the [`EngineConfig`] fields it needs).
#[derive(Debug, Clone, PartialEq)]
pub struct CudaRunnerConfig {
    pub block_size: usize,
    pub num_gpu_blocks: Option<usize>,
    pub gpu_memory_utilization: f64,
    pub max_num_seqs: usize,
    pub max_num_batched_tokens: usize,
    pub max_model_len: usize,
    /// Capture decode-only batches, and the piecewise graphs of other
    /// batches, as CUDA graphs ([`CudaTuning::piecewise_graphs`]).
    pub use_cuda_graphs: bool,
    pub device_ordinal: usize,
    /// Run in a green context of this many SMs (`None`: the whole GPU).
    pub sm_count: Option<usize>,
}

impl From<&EngineConfig> for CudaRunnerConfig {
    fn from(e: &EngineConfig) -> Self {
        Self {
            block_size: e.block_size,
            num_gpu_blocks: e.num_gpu_blocks,
            gpu_memory_utilization: e.gpu_memory_utilization,
            max_num_seqs: e.max_num_seqs,
            max_num_batched_tokens: e.max_num_batched_tokens,
            max_model_len: e.max_model_len,
            use_cuda_graphs: true,
            device_ordinal: 0,
            sm_count: None,
        }
    }
}

/// Activation workspace, sized for the largest step.
pub(crate) struct Workspace {
    resid: DeviceBuffer,
    normed: DeviceBuffer,
    qkv: DeviceBuffer,
    attn: DeviceBuffer,
    out: DeviceBuffer,
    /// fp32 split-K partials of a residual product (linear.rs), `parts_floats` of them.
    parts: DeviceBuffer,
    parts_floats: usize,
    gate_up: DeviceBuffer,
    act: DeviceBuffer,
    final_normed: DeviceBuffer,
    logits: DeviceBuffer,
    part_o: DeviceBuffer,
    part_ml: DeviceBuffer,
    meta: DeviceBuffer,
}

/// What the last step left on the device, and how it ran.
#[derive(Debug, Clone, Copy, Default)]
struct LastStep {
    num_sampled: usize,
    path: StepPath,
}

pub struct CudaRunner {
    _ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    cfg: Qwen3Config,
    kernels: Kernels,
    gemm: Gemm,
    weights: DeviceWeights,
    ws: Workspace,
    kv: DeviceBuffer,
    num_blocks: usize,
    block_size: usize,
    layer_kv_bytes: usize,
    limits: BatchLimits,
    meta_host: PinnedBuffer<i32>,
    sampled_host: PinnedBuffer<u64>,
    /// Decode graphs by (padded batch size, attention splits).
    graphs: HashMap<(usize, usize), CudaGraph>,
    /// Piecewise graphs by token bucket.
    pieces: HashMap<usize, piecewise::PieceGraphs>,
    max_splits: usize,
    use_graphs: bool,
    last: LastStep,
    device_name: String,
    tuning: CudaTuning,
    sm_count: usize,
    copy_bandwidth: f64,
    /// The green context behind `_ctx`, if any: the last field, so that it is
    /// dropped after everything that uses the context.
    _green: Option<green::GreenContext>,
}

fn workspace(
    ctx: &Arc<CudaContext>,
    c: &Qwen3Config,
    t: usize,
    s: usize,
    meta_ints: usize,
    max_splits: usize,
) -> Result<Workspace, RunnerError> {
    let a =
        |bytes: usize| DeviceBuffer::alloc(ctx, bytes).map_err(|e| dev_err("workspace alloc", e));
    let (h, i, v) = (c.hidden_size, c.intermediate_size, c.vocab_size);
    let q = c.q_size();
    let qkv = q + 2 * c.kv_size();
    // Token rows padded as the layer GEMMs pad them.
    let t = gemm_padded_rows(t);
    let parts_floats = SPLIT_K_MAX * gemm_padded_rows(SPLIT_K_MAX_ROWS.min(t)) * h;
    Ok(Workspace {
        resid: a(t * h * 4)?,
        normed: a(t * h * 2)?,
        qkv: a(t * qkv * 2)?,
        attn: a(t * q * 2)?,
        out: a(t * h * 2)?,
        parts: a(parts_floats * 4)?,
        parts_floats,
        gate_up: a(t * 2 * i * 2)?,
        act: a(t * i * 2)?,
        final_normed: a(s * h * 2)?,
        logits: a(s * v * 4)?,
        part_o: a(s * c.num_attention_heads * max_splits * c.head_dim * 4)?,
        part_ml: a(s * c.num_attention_heads * max_splits * 2 * 4)?,
        meta: a(meta_ints * 4)?,
    })
}

impl CudaRunner {
    /// Uploads host `weights`: [`Self::with_weights`] with [`WeightSource::Host`].
    pub fn new(
        cfg: &Qwen3Config,
        weights: &Qwen3Weights,
        rc: &CudaRunnerConfig,
    ) -> Result<Self, RunnerError> {
        Self::with_weights(cfg, WeightSource::Host(weights), rc)
    }

    /// Checks that the model fits the device ([`RunnerError::Memory`] with
    /// the numbers if not), compiles the kernels, puts the weights on the
    /// device (uploaded, or generated there for [`WeightSource::Synthetic`]),
    /// allocates the workspace and the KV cache.
    pub fn with_weights(
        cfg: &Qwen3Config,
        weights: WeightSource<'_>,
        rc: &CudaRunnerConfig,
    ) -> Result<Self, RunnerError> {
        if rc.block_size == 0
            || rc.max_num_seqs == 0
            || rc.max_num_batched_tokens == 0
            || rc.max_model_len == 0
        {
            return Err(RunnerError::Model(format!(
                "invalid runner settings {rc:?}"
            )));
        }
        if !cfg.intermediate_size.is_multiple_of(8) {
            return Err(RunnerError::Model(format!(
                "the CUDA kernels need intermediate_size % 8 == 0 (got {})",
                cfg.intermediate_size
            )));
        }
        let shape = KernelShape {
            head_dim: cfg.head_dim,
            num_q_heads: cfg.num_attention_heads,
            num_kv_heads: cfg.num_key_value_heads,
            hidden_size: cfg.hidden_size,
        };
        kernels::check_shape(&shape).map_err(RunnerError::Model)?;
        let dev = green::open(rc.device_ordinal, rc.sm_count)?;
        let (ctx, stream) = (dev.ctx.clone(), dev.stream.clone());
        weights::check_fits(&ctx, cfg, rc)?;
        let device_name = ctx.name().unwrap_or_else(|_| "unknown GPU".into());
        let kernels = Kernels::compile(&ctx, shape)?;
        let copy_bandwidth = copy_bw::measure(&ctx, &stream, &kernels, dev.sm_count)?;
        let gemm = Gemm::new(&ctx, &stream)?;
        let dw = weights::build(&ctx, &stream, cfg, weights, rc.max_model_len)?;

        let max_seqs = rc.max_num_seqs;
        let graph_max = GRAPH_BUCKETS
            .iter()
            .copied()
            .find(|&b| b >= max_seqs)
            .unwrap_or(max_seqs);
        let max_tokens = rc.max_num_batched_tokens.max(graph_max);
        let max_seqs_pad = max_seqs.max(graph_max);
        let max_blocks_per_seq = rc.max_model_len.div_ceil(rc.block_size);
        let meta_ints = StepLayout::capacity(max_tokens, max_seqs_pad, max_blocks_per_seq);
        let max_splits = MAX_DECODE_SPLITS;
        let ws = workspace(&ctx, cfg, max_tokens, max_seqs_pad, meta_ints, max_splits)?;
        let meta_host = PinnedBuffer::new(&ctx, meta_ints)?;
        let sampled_host = PinnedBuffer::new(&ctx, max_seqs_pad)?;

        let block_bytes_per_layer = rc.block_size * cfg.kv_size() * 2;
        let block_bytes = 2 * cfg.num_hidden_layers * block_bytes_per_layer;
        let needed = max_blocks_per_seq + 1;
        let (free, total) = device::mem_info(&ctx)?;
        let num_blocks = match rc.num_gpu_blocks {
            Some(n) => {
                if n < needed || n.checked_mul(block_bytes).is_none_or(|b| b > free) {
                    return Err(RunnerError::OutOfMemory {
                        free_bytes: free as u64,
                        needed_blocks: n.max(needed),
                        fitting_blocks: free / block_bytes,
                    });
                }
                n
            }
            None => weights::kv_blocks_for_memory(
                free,
                total,
                rc.gpu_memory_utilization,
                block_bytes,
                needed,
            )?,
        };
        let kv = DeviceBuffer::alloc(&ctx, num_blocks * block_bytes).map_err(|_| {
            RunnerError::OutOfMemory {
                free_bytes: free as u64,
                needed_blocks: num_blocks,
                fitting_blocks: free / block_bytes,
            }
        })?;
        let limits = BatchLimits {
            block_size: rc.block_size,
            num_blocks,
            vocab_size: cfg.vocab_size,
            max_tokens,
            max_seqs: max_seqs_pad,
            max_len: rc.max_model_len,
            tokens_per_tile: attention_tile_tokens(
                cfg.num_attention_heads,
                cfg.num_key_value_heads,
            ),
        };
        Ok(Self {
            _ctx: ctx,
            stream,
            cfg: cfg.clone(),
            kernels,
            gemm,
            weights: dw,
            ws,
            kv,
            num_blocks,
            block_size: rc.block_size,
            layer_kv_bytes: num_blocks * block_bytes_per_layer,
            limits,
            meta_host,
            sampled_host,
            graphs: HashMap::new(),
            pieces: HashMap::new(),
            max_splits,
            use_graphs: rc.use_cuda_graphs,
            last: LastStep::default(),
            device_name,
            tuning: CudaTuning::default(),
            sm_count: dev.sm_count,
            copy_bandwidth,
            _green: dev.green,
        })
    }

    pub fn device_name(&self) -> &str {
        &self.device_name
    }

    /// Bytes of weights on the device.
    pub fn weight_bytes(&self) -> usize {
        self.weights.bytes
    }
}

impl ModelRunner for CudaRunner {
    fn num_kv_blocks(&self) -> usize {
        self.num_blocks
    }

    fn vocab_size(&self) -> Option<usize> {
        Some(self.cfg.vocab_size)
    }

    fn execute(&mut self, batch: &ScheduledBatch<'_>) -> Result<RunnerOutput, RunnerError> {
        let sampled = self.run_step(batch)?;
        Ok(RunnerOutput {
            sampled,
            modeled_seconds: None,
        })
    }
}

#[cfg(test)]
mod tests;
