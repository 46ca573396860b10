//! Weights on the device: bf16, with the Q/K/V projections and the gate/up
//! projections concatenated along the output dimension at load, so each is
//! one GEMM; a cos/sin table for RoPE; the check that the model fits before
//! anything is allocated; and the KV-cache sizing rule.
//!
//! Contract: [`build`] makes the device weights from a [`WeightSource`]:
//! host tensors are copied in ([`upload`]); synthetic ones are generated on
//! the device with the same bits (super::synthetic). [`check_fits`] applies
//! [`crate::model::memory::plan`] to the device's memory.

use super::device::{self, DeviceBuffer};
use super::CudaRunnerConfig;
use crate::model::memory::{self, DeviceMemory, KvSettings, MemoryPlan, Precision};
use crate::model::{HostTensor, Qwen3Config, Qwen3Weights, WeightSource};
use crate::runner::RunnerError;
use cudarc::driver::{CudaContext, CudaStream};
use half::bf16;
use std::sync::Arc;

pub(crate) struct DeviceLayer {
    pub input_norm: DeviceBuffer,
    pub post_norm: DeviceBuffer,
    pub q_norm: DeviceBuffer,
    pub k_norm: DeviceBuffer,
    /// `[q + 2 kv, hidden]`
    pub qkv: DeviceBuffer,
    /// `[hidden, q]`
    pub o: DeviceBuffer,
    /// `[2 intermediate, hidden]`: gate rows, then up rows.
    pub gate_up: DeviceBuffer,
    /// `[hidden, intermediate]`
    pub down: DeviceBuffer,
}

pub(crate) struct DeviceWeights {
    pub embed: DeviceBuffer,
    /// `None` when tied to `embed`.
    pub lm_head: Option<DeviceBuffer>,
    pub final_norm: DeviceBuffer,
    pub layers: Vec<DeviceLayer>,
    pub cos: DeviceBuffer,
    pub sin: DeviceBuffer,
    pub rope_positions: usize,
    pub bytes: usize,
}

impl DeviceWeights {
    pub fn lm_head_ptr(&self) -> u64 {
        self.lm_head.as_ref().unwrap_or(&self.embed).ptr
    }
}

fn check(name: &str, t: &HostTensor, expected: &[usize]) -> Result<(), RunnerError> {
    if t.shape != expected || t.data.len() != t.numel() {
        return Err(RunnerError::Model(format!(
            "{name}: shape {:?} ({} values), expected {expected:?}",
            t.shape,
            t.data.len()
        )));
    }
    Ok(())
}

fn concat_rows(parts: &[&HostTensor]) -> Vec<bf16> {
    let mut v = Vec::with_capacity(parts.iter().map(|p| p.data.len()).sum());
    for p in parts {
        v.extend_from_slice(&p.data);
    }
    v
}

/// cos/sin of `pos * theta^(-2i/d)` for `i < d/2`, rows by position (fp32, computed in f64).
pub(crate) fn rope_table(head_dim: usize, theta: f64, positions: usize) -> (Vec<f32>, Vec<f32>) {
    let half = head_dim / 2;
    let mut cos = Vec::with_capacity(positions * half);
    let mut sin = Vec::with_capacity(positions * half);
    for p in 0..positions {
        for i in 0..half {
            // The reference computes inv_freq in fp32; match its rounding before the product.
            let inv = (1.0 / theta.powf((2 * i) as f64 / head_dim as f64)) as f32;
            let a = p as f64 * inv as f64;
            cos.push(a.cos() as f32);
            sin.push(a.sin() as f32);
        }
    }
    (cos, sin)
}

impl From<&CudaRunnerConfig> for KvSettings {
    fn from(rc: &CudaRunnerConfig) -> Self {
        Self {
            block_size: rc.block_size,
            max_model_len: rc.max_model_len,
            num_gpu_blocks: rc.num_gpu_blocks,
            gpu_memory_utilization: rc.gpu_memory_utilization,
        }
    }
}

/// The memory plan of `cfg` on the device as it is now (`cuMemGetInfo`):
/// an error with the numbers when the weights and one request's KV cache
/// cannot fit. Called before the runner allocates anything.
pub(crate) fn check_fits(
    ctx: &Arc<CudaContext>,
    cfg: &Qwen3Config,
    rc: &CudaRunnerConfig,
) -> Result<MemoryPlan, RunnerError> {
    let (free, total) = device::mem_info(ctx)?;
    let memory = DeviceMemory {
        total_bytes: total as u64,
        free_bytes: free as u64,
    };
    Ok(memory::plan(
        cfg,
        &KvSettings::from(rc),
        Precision::BF16,
        memory,
    )?)
}

/// The device weights of `source`, with a RoPE table of `rope_positions` rows.
pub(crate) fn build(
    ctx: &Arc<CudaContext>,
    stream: &CudaStream,
    cfg: &Qwen3Config,
    source: WeightSource<'_>,
    rope_positions: usize,
) -> Result<DeviceWeights, RunnerError> {
    match source {
        WeightSource::Host(w) => upload(ctx, cfg, w, rope_positions),
        WeightSource::Synthetic { seed } => {
            super::synthetic::generate(ctx, stream, cfg, seed, rope_positions)
        }
    }
}

pub(crate) fn upload(
    ctx: &Arc<CudaContext>,
    cfg: &Qwen3Config,
    w: &Qwen3Weights,
    rope_positions: usize,
) -> Result<DeviceWeights, RunnerError> {
    let (h, q, kv, inter, d) = (
        cfg.hidden_size,
        cfg.q_size(),
        cfg.kv_size(),
        cfg.intermediate_size,
        cfg.head_dim,
    );
    check("embed_tokens", &w.embed_tokens, &[cfg.vocab_size, h])?;
    check("norm", &w.norm, &[h])?;
    if w.layers.len() != cfg.num_hidden_layers {
        return Err(RunnerError::Model(format!(
            "{} layers in the weights, {} in the config",
            w.layers.len(),
            cfg.num_hidden_layers
        )));
    }
    let mut bytes = 0usize;
    let mut up = |data: &[bf16]| -> Result<DeviceBuffer, RunnerError> {
        bytes += std::mem::size_of_val(data);
        DeviceBuffer::from_host(ctx, data)
    };
    let embed = up(&w.embed_tokens.data)?;
    let lm_head = match &w.lm_head {
        Some(t) => {
            check("lm_head", t, &[cfg.vocab_size, h])?;
            Some(up(&t.data)?)
        }
        None => None,
    };
    let final_norm = up(&w.norm.data)?;
    let mut layers = Vec::with_capacity(cfg.num_hidden_layers);
    for (i, l) in w.layers.iter().enumerate() {
        let n = |s: &str| format!("layers.{i}.{s}");
        check(&n("input_layernorm"), &l.input_layernorm, &[h])?;
        check(
            &n("post_attention_layernorm"),
            &l.post_attention_layernorm,
            &[h],
        )?;
        check(&n("q_norm"), &l.q_norm, &[d])?;
        check(&n("k_norm"), &l.k_norm, &[d])?;
        check(&n("q_proj"), &l.q_proj, &[q, h])?;
        check(&n("k_proj"), &l.k_proj, &[kv, h])?;
        check(&n("v_proj"), &l.v_proj, &[kv, h])?;
        check(&n("o_proj"), &l.o_proj, &[h, q])?;
        check(&n("gate_proj"), &l.gate_proj, &[inter, h])?;
        check(&n("up_proj"), &l.up_proj, &[inter, h])?;
        check(&n("down_proj"), &l.down_proj, &[h, inter])?;
        layers.push(DeviceLayer {
            input_norm: up(&l.input_layernorm.data)?,
            post_norm: up(&l.post_attention_layernorm.data)?,
            q_norm: up(&l.q_norm.data)?,
            k_norm: up(&l.k_norm.data)?,
            qkv: up(&concat_rows(&[&l.q_proj, &l.k_proj, &l.v_proj]))?,
            o: up(&l.o_proj.data)?,
            gate_up: up(&concat_rows(&[&l.gate_proj, &l.up_proj]))?,
            down: up(&l.down_proj.data)?,
        });
    }
    let (cos_h, sin_h) = rope_table(d, cfg.rope_theta, rope_positions);
    let cos = DeviceBuffer::from_host(ctx, &cos_h)?;
    let sin = DeviceBuffer::from_host(ctx, &sin_h)?;
    Ok(DeviceWeights {
        embed,
        lm_head,
        final_norm,
        layers,
        cos,
        sin,
        rope_positions,
        bytes,
    })
}

/// KV-cache blocks for the memory left: `utilization * total - in_use`, over
/// the bytes of one block (all layers, K and V). Errors when fewer than
/// `needed` blocks fit.
pub(crate) fn kv_blocks_for_memory(
    free: usize,
    total: usize,
    utilization: f64,
    block_bytes: usize,
    needed: usize,
) -> Result<usize, RunnerError> {
    let in_use = total.saturating_sub(free);
    let budget = ((total as f64 * utilization) as usize)
        .saturating_sub(in_use)
        .min(free);
    let fitting = budget / block_bytes.max(1);
    if fitting < needed {
        return Err(RunnerError::OutOfMemory {
            free_bytes: free as u64,
            needed_blocks: needed,
            fitting_blocks: fitting,
        });
    }
    Ok(fitting)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kv_budget_follows_utilization() {
        let gib = 1usize << 30;
        // 100 GiB card, 10 GiB in use, 0.9 utilization: 80 GiB for the cache.
        let blocks = kv_blocks_for_memory(90 * gib, 100 * gib, 0.9, gib, 1).unwrap();
        assert_eq!(blocks, 80);
    }

    #[test]
    fn too_little_memory_says_how_many_blocks_fit() {
        let gib = 1usize << 30;
        match kv_blocks_for_memory(20 * gib, 100 * gib, 0.5, gib, 10) {
            Err(RunnerError::OutOfMemory {
                needed_blocks: 10,
                fitting_blocks: 0,
                ..
            }) => {}
            other => panic!("expected OutOfMemory, got {other:?}"),
        }
        match kv_blocks_for_memory(90 * gib, 100 * gib, 0.2, gib, 20) {
            Err(RunnerError::OutOfMemory {
                fitting_blocks: 10, ..
            }) => {}
            other => panic!("expected OutOfMemory, got {other:?}"),
        }
    }

    #[test]
    fn plan_settings_come_from_the_runner_config() {
        let rc = CudaRunnerConfig::from(&crate::EngineConfig {
            num_gpu_blocks: Some(77),
            max_model_len: 1000,
            ..crate::EngineConfig::default()
        });
        let s = KvSettings::from(&rc);
        assert_eq!(
            (
                s.block_size,
                s.max_model_len,
                s.num_gpu_blocks,
                s.gpu_memory_utilization
            ),
            (16, 1000, Some(77), 0.9)
        );
    }

    #[test]
    fn rope_table_rotates_by_position() {
        let (c, s) = rope_table(4, 10_000.0, 3);
        assert_eq!(c.len(), 6);
        assert_eq!((c[0], s[0]), (1.0, 0.0));
        assert!((c[2] - 1f32.cos()).abs() < 1e-6 && (s[2] - 1f32.sin()).abs() < 1e-6);
        assert!((s[3] - (0.01f32).sin()).abs() < 1e-6);
    }
}
