//! The CUDA model runner: Qwen3 in bf16 on an NVIDIA GPU through cudarc.
//!
//! Contract: [`CudaRunner`] implements [`ModelRunner`] for mixed batches
//! (prefill chunks over cached context and decodes in one step). Per step the
//! host packs all metadata into one pinned buffer and copies it with one
//! host-to-device copy; the forward pass writes every sequence's K/V of a layer
//! before that layer's attention; greedy (argmax) tokens come back in batch
//! order. Decode-only batches run as CUDA graphs captured lazily per padded
//! batch-size bucket; other batches run eagerly. Kernels are compiled by NVRTC
//! at construction for the device's compute capability; GEMMs are cuBLAS (bf16
//! operands, fp32 accumulation) over fused QKV and gate-up weights. The KV
//! cache holds `num_kv_blocks()` blocks (block 0, the null block, included),
//! either as configured or as many as `gpu_memory_utilization` leaves room for.
//!
//! Failures are errors: no driver or GPU ([`RunnerError::NoDevice`]), NVRTC
//! failure with its log ([`RunnerError::Compile`]), too little memory for the
//! KV cache ([`RunnerError::OutOfMemory`]), malformed batches
//! ([`RunnerError::BadBatch`]).

mod device;
mod forward;
mod gemm;
mod meta;
mod selftest;
mod weights;

use crate::config::EngineConfig;
use crate::model::{Qwen3Config, Qwen3Weights};
use crate::runner::{ModelRunner, RunnerError, RunnerOutput, ScheduledBatch};
use cudarc::driver::{sys, CudaContext, CudaGraph, CudaStream};
use device::{
    copy_dtoh_async, copy_htod_async, dev_err, DeviceBuffer, KernelShape, Kernels, PinnedBuffer,
};
use gemm::Gemm;
use meta::{pack_step, BatchLimits, StepLayout};
use std::collections::HashMap;
use std::sync::Arc;
use weights::DeviceWeights;

pub use selftest::{kernel_self_test, KernelCheck};

/// Kernel groups that [`CudaRunner::set_profile_skip`] can leave out.
pub const SKIP_GEMM: u32 = 1;
pub const SKIP_ATTENTION: u32 = 2;
pub const SKIP_ELEMENTWISE: u32 = 4;
/// Final norm, LM head and argmax.
pub const SKIP_HEAD: u32 = 8;

/// Most splits of one sequence's decode attention (one warp each).
const MAX_DECODE_SPLITS: usize = 64;
/// Decode-attention warps to aim for: enough to keep every SM's memory pipe busy.
const DECODE_TARGET_WARPS: usize = 2048;
/// Fewest keys worth a warp of its own in eager steps (whose contexts are known).
const DECODE_MIN_KEYS_PER_SPLIT: usize = 32;
/// Decode-graph batch sizes (padded up to the next one).
const GRAPH_BUCKETS: [usize; 13] = [1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 192, 256];

/// KV-cache and batch settings of a [`CudaRunner`] (the [`EngineConfig`] fields it needs).
#[derive(Debug, Clone, PartialEq)]
pub struct CudaRunnerConfig {
    pub block_size: usize,
    pub num_gpu_blocks: Option<usize>,
    pub gpu_memory_utilization: f64,
    pub max_num_seqs: usize,
    pub max_num_batched_tokens: usize,
    pub max_model_len: usize,
    /// Capture decode-only batches as CUDA graphs.
    pub use_cuda_graphs: bool,
    pub device_ordinal: usize,
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
    gate_up: DeviceBuffer,
    act: DeviceBuffer,
    final_normed: DeviceBuffer,
    logits: DeviceBuffer,
    sampled: DeviceBuffer,
    part_o: DeviceBuffer,
    part_ml: DeviceBuffer,
    meta: DeviceBuffer,
}

/// What the last step left on the device, for [`CudaRunner::last_logits`].
#[derive(Debug, Clone, Copy, Default)]
struct LastStep {
    num_sampled: usize,
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
    sampled_host: PinnedBuffer<i32>,
    /// Decode graphs by (padded batch size, attention splits).
    graphs: HashMap<(usize, usize), CudaGraph>,
    max_splits: usize,
    use_graphs: bool,
    last: LastStep,
    device_name: String,
    use_skinny: bool,
    profile_skip: u32,
    /// Decode attention kernel: false = 8-key groups with prefetch, true = 16-key groups.
    decode_g16: bool,
    decode_target_warps: usize,
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
    Ok(Workspace {
        resid: a(t * h * 4)?,
        normed: a(t * h * 2)?,
        qkv: a(t * qkv * 2)?,
        attn: a(t * q * 2)?,
        out: a(t * h * 2)?,
        gate_up: a(t * 2 * i * 2)?,
        act: a(t * i * 2)?,
        final_normed: a(s * h * 2)?,
        logits: a(s * v * 4)?,
        sampled: a(s * 4)?,
        part_o: a(s * c.num_attention_heads * max_splits * c.head_dim * 4)?,
        part_ml: a(s * c.num_attention_heads * max_splits * 2 * 4)?,
        meta: a(meta_ints * 4)?,
    })
}

impl CudaRunner {
    /// Uploads `weights`, compiles the kernels, allocates the workspace and the KV cache.
    pub fn new(
        cfg: &Qwen3Config,
        weights: &Qwen3Weights,
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
        if !cfg.hidden_size.is_multiple_of(4)
            || cfg.hidden_size > 4096
            || !cfg.intermediate_size.is_multiple_of(8)
        {
            return Err(RunnerError::Model(format!(
                "the CUDA kernels need hidden_size % 4 == 0 and <= 4096 (got {}), intermediate_size % 8 == 0 (got {})",
                cfg.hidden_size, cfg.intermediate_size
            )));
        }
        let (ctx, stream) = device::open_device(rc.device_ordinal)?;
        let device_name = ctx.name().unwrap_or_else(|_| "unknown GPU".into());
        let shape = KernelShape {
            head_dim: cfg.head_dim,
            num_q_heads: cfg.num_attention_heads,
            num_kv_heads: cfg.num_key_value_heads,
        };
        let kernels = Kernels::compile(&ctx, shape)?;
        let gemm = Gemm::new(&ctx, &stream)?;
        let dw = weights::upload(&ctx, cfg, weights, rc.max_model_len)?;

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
                if n < needed || n * block_bytes > free {
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
            tokens_per_tile: 64 / (cfg.num_attention_heads / cfg.num_key_value_heads),
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
            max_splits,
            use_graphs: rc.use_cuda_graphs,
            last: LastStep::default(),
            device_name,
            use_skinny: true,
            profile_skip: 0,
            decode_g16: false,
            decode_target_warps: DECODE_TARGET_WARPS,
        })
    }

    pub fn device_name(&self) -> &str {
        &self.device_name
    }

    /// Bytes of weights on the device.
    pub fn weight_bytes(&self) -> usize {
        self.weights.bytes
    }

    pub fn set_use_cuda_graphs(&mut self, on: bool) {
        self.use_graphs = on;
    }

    /// Use the skinny tensor-core GEMM for up to 64 rows (default) or cuBLAS always.
    pub fn set_use_skinny_gemm(&mut self, on: bool) {
        self.use_skinny = on;
        self.graphs.clear();
    }

    /// Tuning: the decode attention kernel (16-key groups instead of 8 with
    /// prefetch) and the number of warps its splits aim for.
    pub fn set_decode_tuning(&mut self, g16: bool, target_warps: usize) {
        self.decode_g16 = g16;
        self.decode_target_warps = target_warps.max(1);
        self.graphs.clear();
    }

    /// Profiling only: leaves out the kernel groups in `mask` (`SKIP_*`), so
    /// outputs are wrong; the difference in step time is what a group costs.
    pub fn set_profile_skip(&mut self, mask: u32) {
        self.profile_skip = mask;
        self.graphs.clear();
    }

    /// Registers and local-memory bytes per thread of every kernel (spills show as local memory).
    pub fn kernel_resources(&self) -> Vec<(&'static str, i32, i32)> {
        self.kernels.resource_report()
    }

    fn kv_layer_ptrs(&self, layer: usize) -> (u64, u64) {
        let k = self.kv.ptr + (2 * layer * self.layer_kv_bytes) as u64;
        (k, k + self.layer_kv_bytes as u64)
    }

    /// Splits (one warp each) of the decode attention: enough warps in all to
    /// fill the GPU; in eager steps also no split shorter than
    /// `DECODE_MIN_KEYS_PER_SPLIT` keys. A graph's split count depends on its
    /// batch size alone, since the kernel divides each context at run time.
    fn decode_splits(&self, n_dec: usize, max_ctx: Option<usize>) -> usize {
        let units = (n_dec * self.cfg.num_key_value_heads).max(1);
        let mut n = self.decode_target_warps.div_ceil(units);
        if let Some(ctx) = max_ctx {
            n = n.min(ctx.div_ceil(DECODE_MIN_KEYS_PER_SPLIT));
        }
        n.clamp(1, self.max_splits)
    }

    fn bucket_for(&self, n: usize) -> Option<usize> {
        GRAPH_BUCKETS
            .iter()
            .copied()
            .find(|&b| b >= n && b <= self.limits.max_seqs)
    }

    /// Logits (fp32, `[vocab]` each) of the sequences that sampled in the last
    /// step, in batch order. Copies from the device: not for the hot path.
    pub fn last_logits(&self) -> Result<Vec<Vec<f32>>, RunnerError> {
        let (n, v) = (self.last.num_sampled, self.cfg.vocab_size);
        let mut host = vec![0f32; n * v];
        copy_dtoh_async(&mut host, self.ws.logits.ptr, &self.stream)?;
        device::sync(&self.stream)?;
        Ok(host.chunks(v.max(1)).map(|c| c.to_vec()).collect())
    }

    fn run_step(&mut self, batch: &ScheduledBatch<'_>) -> Result<Vec<u32>, RunnerError> {
        let decode_only = batch
            .seqs
            .iter()
            .all(|s| s.token_ids.len() == 1 && s.samples);
        let bucket = if self.use_graphs && decode_only {
            self.bucket_for(batch.seqs.len())
        } else {
            None
        };
        let lay = pack_step(batch, &self.limits, bucket, self.meta_host.as_mut_slice())?;
        copy_htod_async(
            self.ws.meta.ptr,
            &self.meta_host.as_slice()[..lay.total],
            &self.stream,
        )?;
        let max_ctx = batch
            .seqs
            .iter()
            .map(|s| s.start_pos + s.token_ids.len())
            .max()
            .unwrap_or(1);
        match bucket {
            Some(b) => {
                let nsplit = self.decode_splits(b, None);
                if !self.graphs.contains_key(&(b, nsplit)) {
                    let graph = self.capture(&lay, nsplit)?;
                    self.graphs.insert((b, nsplit), graph);
                }
                let graph = &self.graphs[&(b, nsplit)];
                graph.launch().map_err(|e| dev_err("graph launch", e))?;
            }
            None => {
                self.enqueue_forward(&lay, self.decode_splits(lay.num_decodes, Some(max_ctx)))?
            }
        }
        let n_real = batch.seqs.iter().filter(|s| s.samples).count();
        self.last = LastStep {
            num_sampled: n_real,
        };
        if n_real == 0 {
            device::sync(&self.stream)?;
            return Ok(Vec::new());
        }
        let out = &mut self.sampled_host.as_mut_slice()[..n_real];
        copy_dtoh_async(out, self.ws.sampled.ptr, &self.stream)?;
        device::sync(&self.stream)?;
        Ok(self.sampled_host.as_slice()[..n_real]
            .iter()
            .map(|&t| t as u32)
            .collect())
    }

    fn capture(&self, lay: &StepLayout, nsplit: usize) -> Result<CudaGraph, RunnerError> {
        self.stream
            .begin_capture(sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)
            .map_err(|e| dev_err("begin graph capture", e))?;
        let enq = self.enqueue_forward(lay, nsplit);
        let end = self.stream.end_capture(sys::CUgraphInstantiate_flags(0));
        enq?;
        let graph = end
            .map_err(|e| dev_err("end graph capture", e))?
            .ok_or_else(|| RunnerError::Device("graph capture produced no graph".into()))?;
        graph.upload().map_err(|e| dev_err("graph upload", e))?;
        Ok(graph)
    }
}

impl ModelRunner for CudaRunner {
    fn num_kv_blocks(&self) -> usize {
        self.num_blocks
    }

    fn execute(&mut self, batch: &ScheduledBatch<'_>) -> Result<RunnerOutput, RunnerError> {
        let sampled = self.run_step(batch)?;
        Ok(RunnerOutput {
            sampled,
            modeled_seconds: None,
        })
    }
}
