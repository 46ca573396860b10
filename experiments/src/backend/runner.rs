//! The real model runners behind one type, built for the largest engine
//! settings they must serve.
//!
//! Contract: [`build`] makes a CPU or CUDA runner for [`RunnerLimits`] and
//! warms it up (CUDA: see [`warm_up`]; every CUDA graph is captured before
//! anything is measured). A runner serves any engine whose settings its limits
//! [cover](RunnerLimits::covers); each condition's `EngineCore` borrows it
//! (`EngineCore<&mut AnyRunner>`), so its weights and KV cache outlive the
//! engine (stale KV contents are never read: a fresh engine's prefix cache is
//! empty). The default kind is CUDA even in a binary built without it, so a
//! real run on such a binary fails at once unless `--backend cpu` is explicit.

use super::BackendError;
use calibration::measure::time_shape;
use engine::model::{ModelWeights, Qwen3Config};
use engine::runner::cpu::CpuRunner;
use engine::SeqShape;
use engine::{BatchShape, EngineConfig, ModelRunner, RunnerError, RunnerOutput, ScheduledBatch};

/// KV cache of the CPU runner (f32) when the engine does not fix its size.
pub const CPU_KV_BUDGET_BYTES: usize = 256 << 20;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunnerKind {
    Cpu,
    Cuda,
}

impl Default for RunnerKind {
    /// CUDA, whether or not this binary has it: real mode means the GPU
    /// unless `--backend cpu` says otherwise. A binary built without
    /// `--features cuda` refuses to build it ([`build`]) rather than running
    /// a full-size model on the CPU reference runner for hours.
    fn default() -> Self {
        Self::Cuda
    }
}

impl RunnerKind {
    pub fn name(self) -> &'static str {
        match self {
            Self::Cpu => "cpu",
            Self::Cuda => "cuda",
        }
    }
}

/// The engine settings a runner is sized for.
#[derive(Debug, Clone, PartialEq)]
pub struct RunnerLimits {
    pub block_size: usize,
    pub max_num_seqs: usize,
    /// Also covers chunking off (a whole `max_model_len` prompt in one step).
    pub max_num_batched_tokens: usize,
    pub max_model_len: usize,
    pub num_gpu_blocks: Option<usize>,
    pub gpu_memory_utilization: f64,
    /// CUDA only: run in a green context of this many SMs (whole GPU: `None`).
    pub sm_count: Option<usize>,
}

impl RunnerLimits {
    pub fn for_engine(e: &EngineConfig) -> Self {
        Self {
            block_size: e.block_size,
            max_num_seqs: e.max_num_seqs,
            max_num_batched_tokens: e.max_num_batched_tokens.max(e.max_model_len),
            max_model_len: e.max_model_len,
            num_gpu_blocks: e.num_gpu_blocks,
            gpu_memory_utilization: e.gpu_memory_utilization,
            sm_count: None,
        }
    }

    /// The same limits on `sm_count` SMs.
    pub fn on_sms(self, sm_count: Option<usize>) -> Self {
        Self { sm_count, ..self }
    }

    /// Whether a runner with these limits and `capacity` KV blocks can serve `e`.
    pub fn covers(&self, e: &EngineConfig, capacity: usize) -> bool {
        self.block_size == e.block_size
            && e.max_num_seqs <= self.max_num_seqs
            && e.max_num_batched_tokens <= self.max_num_batched_tokens
            && e.max_model_len <= self.max_model_len
            && match e.num_gpu_blocks {
                Some(n) => n <= capacity,
                None => {
                    self.num_gpu_blocks.is_none()
                        && e.gpu_memory_utilization == self.gpu_memory_utilization
                }
            }
    }

    /// Limits that serve both what these served and `e`.
    pub fn grown(&self, e: &EngineConfig) -> Self {
        let new = Self::for_engine(e);
        Self {
            block_size: new.block_size,
            max_num_seqs: self.max_num_seqs.max(new.max_num_seqs),
            max_num_batched_tokens: self.max_num_batched_tokens.max(new.max_num_batched_tokens),
            max_model_len: self.max_model_len.max(new.max_model_len),
            num_gpu_blocks: new.num_gpu_blocks,
            gpu_memory_utilization: new.gpu_memory_utilization,
            sm_count: self.sm_count,
        }
    }

    /// CPU KV blocks (null block included): as fixed, else room for
    /// `max_num_seqs` full-length sequences within [`CPU_KV_BUDGET_BYTES`],
    /// never less than one full-length sequence.
    pub fn cpu_kv_blocks(&self, config: &Qwen3Config) -> usize {
        if let Some(n) = self.num_gpu_blocks {
            return n;
        }
        let per_seq = self.max_model_len.div_ceil(self.block_size.max(1));
        let block_bytes = 2 * config.num_hidden_layers * config.kv_size() * self.block_size * 4;
        let budget = CPU_KV_BUDGET_BYTES / block_bytes.max(1);
        (self.max_num_seqs * per_seq).min(budget).max(per_seq) + 1
    }
}

pub enum AnyRunner {
    Cpu(Box<CpuRunner>),
    #[cfg(feature = "cuda")]
    Cuda(Box<engine::runner::cuda::CudaRunner>),
}

impl AnyRunner {
    /// `cpu`, or the GPU's name as the driver reports it with the SMs the
    /// runner has and the copy bandwidth it measured at start.
    pub fn device_name(&self) -> String {
        match self {
            Self::Cpu(_) => format!("cpu ({} threads)", rayon::current_num_threads()),
            #[cfg(feature = "cuda")]
            Self::Cuda(r) => format!(
                "{} ({} SMs, copy bandwidth {:.2} TB/s measured at start)",
                r.device_name(),
                r.sm_count(),
                r.measured_copy_bandwidth() * 1e-12
            ),
        }
    }
}

impl ModelRunner for AnyRunner {
    fn num_kv_blocks(&self) -> usize {
        match self {
            Self::Cpu(r) => r.num_kv_blocks(),
            #[cfg(feature = "cuda")]
            Self::Cuda(r) => r.num_kv_blocks(),
        }
    }

    fn vocab_size(&self) -> Option<usize> {
        match self {
            Self::Cpu(r) => r.vocab_size(),
            #[cfg(feature = "cuda")]
            Self::Cuda(r) => r.vocab_size(),
        }
    }

    fn execute(&mut self, batch: &ScheduledBatch<'_>) -> Result<RunnerOutput, RunnerError> {
        match self {
            Self::Cpu(r) => r.execute(batch),
            #[cfg(feature = "cuda")]
            Self::Cuda(r) => r.execute(batch),
        }
    }
}

/// Builds and warms up a runner of `kind` for `limits`.
pub fn build(
    kind: RunnerKind,
    config: &Qwen3Config,
    weights: &ModelWeights,
    limits: &RunnerLimits,
) -> Result<AnyRunner, BackendError> {
    let runner_err = |error| BackendError::Runner {
        backend: kind.name(),
        error,
    };
    let mut runner = match kind {
        RunnerKind::Cpu => AnyRunner::Cpu(Box::new(
            CpuRunner::with_weights(
                config.clone(),
                weights.source(),
                limits.cpu_kv_blocks(config),
                limits.block_size,
                engine::runner::cpu::host_memory(),
            )
            .map_err(runner_err)?,
        )),
        #[cfg(feature = "cuda")]
        RunnerKind::Cuda => {
            use engine::runner::cuda::{CudaRunner, CudaRunnerConfig};
            let rc = CudaRunnerConfig {
                block_size: limits.block_size,
                num_gpu_blocks: limits.num_gpu_blocks,
                gpu_memory_utilization: limits.gpu_memory_utilization,
                max_num_seqs: limits.max_num_seqs,
                max_num_batched_tokens: limits.max_num_batched_tokens,
                max_model_len: limits.max_model_len,
                use_cuda_graphs: true,
                device_ordinal: 0,
                sm_count: limits.sm_count,
            };
            let mut cuda =
                CudaRunner::with_weights(config, weights.source(), &rc).map_err(runner_err)?;
            // Every decode graph captured up front; warm_up below then
            // launches each once along with the eager paths.
            cuda.warm_up_graphs().map_err(runner_err)?;
            AnyRunner::Cuda(Box::new(cuda))
        }
        #[cfg(not(feature = "cuda"))]
        RunnerKind::Cuda => return Err(BackendError::BackendNotBuilt("cuda".into())),
    };
    if kind == RunnerKind::Cuda {
        warm_up(&mut runner, limits).map_err(|e| BackendError::WarmUp {
            backend: kind.name(),
            message: e.to_string(),
        })?;
    }
    Ok(runner)
}

/// Prefills of every row count class of the CUDA runner's GEMMs (16, 32, 48,
/// 64, then multiples of 64) up to the largest step, powers of two also over
/// a cached context, a mixed batch, then one decode-only batch of every
/// size up to `max_num_seqs` (each graph bucket is captured on first use).
/// Why: the first step of each new GEMM shape costs extra on the H200 (a
/// 1,184-token chunk over 2,048 cached tokens: 16.6 ms the first time,
/// 8.8 ms after; not module loading, since `CUDA_MODULE_LOADING=EAGER`
/// changes nothing); the runner pads token counts into these classes.
pub fn warm_up<R: ModelRunner>(
    runner: &mut R,
    limits: &RunnerLimits,
) -> Result<(), calibration::MeasureError> {
    let bs = limits.block_size;
    let longest = limits.max_model_len.saturating_sub(1).max(1);
    let max_prefill = limits.max_num_batched_tokens.min(longest);
    let seq = |new_tokens: usize, context: usize, samples: bool| SeqShape {
        new_tokens: new_tokens as u32,
        context_before: context as u32,
        samples,
    };
    let mut shapes = Vec::new();
    // Every row count class the CUDA runner pads its layer GEMMs to
    // (engine::gemm_padded_rows): cuBLAS picks a kernel on the host the first
    // time it sees a shape. Powers of two also over a cached context.
    let mut t = 16;
    while t < max_prefill {
        shapes.push(vec![seq(t, 0, true)]);
        if t.is_power_of_two() {
            let context = WARM_UP_CONTEXT.min(longest.saturating_sub(t));
            if context > 0 {
                shapes.push(vec![seq(t, context, true)]);
            }
        }
        t = engine::gemm_padded_rows(t + 1);
    }
    shapes.push(vec![seq(max_prefill, 0, true)]);
    // Context of one block less one token: each decode needs a single block.
    let context = bs.saturating_sub(1).max(1);
    let riders = WARM_UP_MIXED_DECODES.min(limits.max_num_seqs.saturating_sub(1));
    let mut mixed = vec![seq(1, context, true); riders];
    mixed.push(seq(max_prefill.saturating_sub(riders).max(1), 0, false));
    shapes.push(mixed);
    for b in 1..=limits.max_num_seqs {
        shapes.push(vec![seq(1, context, true); b]);
    }
    for seqs in shapes {
        time_shape(runner, &BatchShape { seqs }, bs, 0, 1)?;
    }
    Ok(())
}

/// Cached context of the warm-up's prefill chunks.
const WARM_UP_CONTEXT: usize = 1024;
/// Decodes riding along the warm-up's mixed batch.
const WARM_UP_MIXED_DECODES: usize = 16;

#[cfg(test)]
mod tests;
