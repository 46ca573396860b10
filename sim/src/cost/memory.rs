//! GPU memory accounting: how many KV-cache blocks fit on a GPU.
//!
//! Contract: [`kv_cache_blocks`] needs only the datasheet memory size, the
//! model shape and the engine options, whatever cost model prices the steps
//! (roofline or calibrated profile), so every caller sizes the simulated KV
//! cache the same way. Budget = `mem_bytes * gpu_memory_utilization` −
//! weights − [`activation_reserve_bytes`]; blocks include the null block.

use super::ModelShape;
use crate::gpu::GpuSpec;
use engine::EngineConfig;

/// Memory the runtime keeps outside weights and KV cache regardless of batch:
/// CUDA context, cuBLAS workspace, CUDA-graph pools (vLLM counts this
/// non-torch memory inside `gpu_memory_utilization` too).
pub const RUNTIME_RESERVE_BYTES: f64 = 512.0 * 1024.0 * 1024.0;

/// Logits are kept in fp32.
pub(crate) const LOGIT_BYTES: f64 = 4.0;

/// Bytes kept for activations and logits of the largest step `config`
/// allows, plus [`RUNTIME_RESERVE_BYTES`]. Per scheduled token about one
/// layer's intermediates are alive at once (residual, normed input, QKV,
/// attention output, gate and up, MLP output); logits are fp32 for
/// `max_num_seqs` sequences.
pub fn activation_reserve_bytes(model: &ModelShape, config: &EngineConfig) -> f64 {
    let m = model;
    let h = m.hidden;
    let q = m.num_q_heads * m.head_dim;
    let kv = m.num_kv_heads * m.head_dim;
    let per_token = (4 * h + q + 2 * kv + 3 * m.intermediate) * m.bytes_per_param;
    let activations = (config.max_num_batched_tokens * per_token) as f64;
    let logits = config.max_num_seqs as f64 * m.vocab as f64 * LOGIT_BYTES;
    RUNTIME_RESERVE_BYTES + activations + logits
}

/// KV-cache blocks (null block included) of `model` that fit in
/// `gpu.mem_bytes * gpu_memory_utilization` after the weights and the
/// [activation reserve](activation_reserve_bytes); 0 if none fit.
pub fn kv_cache_blocks(gpu: &GpuSpec, model: &ModelShape, config: &EngineConfig) -> usize {
    let budget = gpu.mem_bytes * config.gpu_memory_utilization
        - model.weight_bytes() as f64
        - activation_reserve_bytes(model, config);
    let block_bytes = (config.block_size * model.kv_bytes_per_token()) as f64;
    if budget <= 0.0 || block_bytes <= 0.0 {
        return 0;
    }
    (budget / block_bytes).floor() as usize
}
