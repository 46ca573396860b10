//! The datasheet roofline: a step costs a fixed overhead plus, per component
//! (linear layers, attention, LM head), the larger of its memory time and its
//! compute time, each at a stated fraction of the GPU's peak.
//!
//! Components are summed rather than overlapped because a step runs them as
//! separate kernels one after another. [`RooflineModel::terms`] returns each
//! component's memory and compute seconds *at peak*; the priced step divides
//! them by [`RooflineEfficiencies`]. A calibrated model fits the same terms to
//! measurements, and keeps the fitted efficiencies when moving to another GPU.

use super::memory::{self, LOGIT_BYTES};
use super::{CostModel, ModelShape};
use crate::gpu::GpuSpec;
use engine::{BatchShape, EngineConfig};

/// One component's roofline at the GPU's peak.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct TermSeconds {
    /// Bytes moved / peak memory bandwidth.
    pub memory_s: f64,
    /// FLOPs / peak dense bf16 FLOP/s.
    pub compute_s: f64,
}

/// Per-component roofline seconds of one batch, at peak.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct CostTerms {
    /// QKV, O, gate/up/down projections of all layers: weights read once per
    /// step, 2 FLOPs per parameter per token.
    pub linear: TermSeconds,
    /// K/V of every sequence's context read (and the new tokens' K/V written);
    /// QK^T and PV FLOPs.
    pub attention: TermSeconds,
    /// Logits of the sequences that sample: its weights read once if any sample.
    pub lm_head: TermSeconds,
}

/// Fraction of peak a component reaches, for memory and for compute.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Efficiency {
    pub memory: f64,
    pub compute: f64,
}

impl Efficiency {
    /// The component's time: the slower of its memory and compute sides.
    pub fn seconds(&self, term: &TermSeconds) -> f64 {
        (term.memory_s / self.memory).max(term.compute_s / self.compute)
    }
}

/// What a datasheet roofline assumes about how close kernels come to peak.
///
/// Defaults, and why:
/// - `step_overhead_s` = 100 µs: one Qwen3 step launches on the order of 100
///   kernels (28 layers x ~4-5 kernels, plus norms, sampling); inside a CUDA
///   graph a launch costs about 1 µs (measured on the H200), and the scheduler
///   and input preparation on the host add tens of µs.
/// - memory 0.7 of peak bandwidth: large streaming reads sustain 80-90 % of
///   HBM peak; smaller per-layer GEMVs reach less, so 0.7 is a middle.
/// - compute 0.6 of peak dense bf16: mid-sized GEMMs (hidden 1024) reach well
///   under the ~90 % of the largest shapes.
///
/// These are placeholders for a GPU nobody measured; `calibration` replaces
/// them with fitted values (on the H200 the 0.6B decode GEMMs reached only
/// 1.3-1.6 TB/s, about 0.3 of peak, and 2,048-token GEMMs 0.72 of peak FLOP/s).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RooflineEfficiencies {
    pub step_overhead_s: f64,
    pub linear: Efficiency,
    pub attention: Efficiency,
    pub lm_head: Efficiency,
}

impl Default for RooflineEfficiencies {
    fn default() -> Self {
        let typical = Efficiency {
            memory: 0.7,
            compute: 0.6,
        };
        Self {
            step_overhead_s: 1.0e-4,
            linear: typical,
            attention: typical,
            lm_head: typical,
        }
    }
}

/// Datasheet roofline for one GPU and model.
#[derive(Debug, Clone)]
pub struct RooflineModel {
    pub gpu: GpuSpec,
    pub model: ModelShape,
    pub efficiencies: RooflineEfficiencies,
}

impl RooflineModel {
    /// A roofline with the default efficiencies.
    pub fn new(gpu: GpuSpec, model: ModelShape) -> Self {
        Self {
            gpu,
            model,
            efficiencies: RooflineEfficiencies::default(),
        }
    }

    /// Per-component seconds of `batch` at the GPU's peak.
    pub fn terms(&self, batch: &BatchShape) -> CostTerms {
        if batch.seqs.is_empty() {
            return CostTerms::default();
        }
        let m = &self.model;
        let bw = self.gpu.mem_bandwidth;
        let flops = self.gpu.bf16_flops;
        let param_bytes = m.bytes_per_param as f64;
        let kv_per_token = m.kv_bytes_per_token() as f64;
        let attn_flops_per_pair = 4.0 * (m.num_q_heads * m.head_dim) as f64 * m.num_layers as f64;

        let counts = batch.counts();
        let tokens = counts.tokens as f64;
        let sampled = counts.sampled as f64;
        // Every sequence's context, new tokens included, is read once.
        let kv_tokens = counts.context_tokens as f64;
        // new * (context + new / 2): query-key pairs under the causal mask.
        let attn_pairs: f64 = batch
            .seqs
            .iter()
            .map(|s| {
                let new = s.new_tokens as f64;
                new * (s.context_before as f64 + new / 2.0)
            })
            .sum();
        let linear_params = m.linear_params() as f64;
        let linear = TermSeconds {
            memory_s: (linear_params * param_bytes
                + tokens * m.activation_bytes_per_token() as f64)
                / bw,
            compute_s: 2.0 * linear_params * tokens / flops,
        };
        let attention = TermSeconds {
            memory_s: kv_tokens * kv_per_token / bw,
            compute_s: attn_flops_per_pair * attn_pairs / flops,
        };
        let head_params = m.lm_head_params() as f64;
        let lm_head = if sampled > 0.0 {
            TermSeconds {
                memory_s: (head_params * param_bytes + sampled * m.vocab as f64 * LOGIT_BYTES) / bw,
                compute_s: 2.0 * head_params * sampled / flops,
            }
        } else {
            TermSeconds::default()
        };
        CostTerms {
            linear,
            attention,
            lm_head,
        }
    }

    /// [`crate::cost::activation_reserve_bytes`] of this model.
    pub fn activation_reserve_bytes(&self, config: &EngineConfig) -> f64 {
        memory::activation_reserve_bytes(&self.model, config)
    }

    /// [`crate::cost::kv_cache_blocks`] of this GPU and model.
    pub fn kv_cache_blocks(&self, config: &EngineConfig) -> usize {
        memory::kv_cache_blocks(&self.gpu, &self.model, config)
    }
}

impl CostModel for RooflineModel {
    fn step_seconds(&self, batch: &BatchShape) -> f64 {
        if batch.seqs.is_empty() {
            return 0.0;
        }
        let t = self.terms(batch);
        let e = &self.efficiencies;
        e.step_overhead_s
            + e.linear.seconds(&t.linear)
            + e.attention.seconds(&t.attention)
            + e.lm_head.seconds(&t.lm_head)
    }
}
