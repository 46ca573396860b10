//! Cost models: batch composition -> step seconds.
//!
//! Contract: a [`CostModel`] prices one engine step from its [`BatchShape`]
//! alone, or ([`CostModel::step_seconds_after`]) from it, the idle time
//! before it and the GPU's recent work ([`GpuHistory`]), which a simulated
//! engine's runner keeps from step to step. The [`RooflineModel`] derives
//! it from a GPU's datasheet and the model shape; calibrated models (crate `calibration`) implement the same trait and
//! can reuse [`RooflineModel::terms`], whose per-term seconds at peak a
//! calibrated model scales linearly. How many KV-cache blocks fit on a GPU
//! ([`kv_cache_blocks`]) depends on the datasheet and the model shape only,
//! not on the cost model.

mod memory;
mod roofline;

pub use memory::{activation_reserve_bytes, kv_cache_blocks, RUNTIME_RESERVE_BYTES};
pub use roofline::{CostTerms, Efficiency, RooflineEfficiencies, RooflineModel, TermSeconds};

use engine::model::Qwen3Config;
use engine::BatchShape;

pub trait CostModel: Send + Sync {
    fn step_seconds(&self, batch: &BatchShape) -> f64;
    /// The step of an engine that was idle `idle_s` seconds before it, on a
    /// GPU whose recent work is `history` (updated with this step). By
    /// default the past plays no part: [`CostModel::step_seconds`].
    fn step_seconds_after(&self, batch: &BatchShape, idle_s: f64, history: &mut GpuHistory) -> f64 {
        let _ = (idle_s, history);
        self.step_seconds(batch)
    }
}

/// What a GPU carries from one step to the next. A GPU held at its power
/// limit runs tensor work at a sustained rate; rested (idle, or running
/// work below that rate) it runs faster for a while. `burst_credit_s` is
/// the time the limit would cost that a rested GPU may still save; the
/// cost model that uses it says how it is spent and regained
/// (`calibration::operators::burst`).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct GpuHistory {
    pub burst_credit_s: f64,
}

/// The model dimensions a cost model needs (from `engine::model::Qwen3Config`).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ModelShape {
    pub num_layers: usize,
    pub hidden: usize,
    pub intermediate: usize,
    pub num_q_heads: usize,
    pub num_kv_heads: usize,
    pub head_dim: usize,
    pub vocab: usize,
    pub bytes_per_param: usize,
    /// LM head shares the embedding matrix (counted once in memory). Absent
    /// in older files: read as untied, which only overstates weight memory.
    #[serde(default)]
    pub tied_embeddings: bool,
}

impl ModelShape {
    /// The shape of a Qwen3 configuration, bf16 weights and KV cache.
    pub fn from_qwen3(config: &Qwen3Config) -> Self {
        Self {
            num_layers: config.num_hidden_layers,
            hidden: config.hidden_size,
            intermediate: config.intermediate_size,
            num_q_heads: config.num_attention_heads,
            num_kv_heads: config.num_key_value_heads,
            head_dim: config.head_dim,
            vocab: config.vocab_size,
            bytes_per_param: 2,
            tied_embeddings: config.tie_word_embeddings,
        }
    }

    pub fn qwen3_0_6b() -> Self {
        Self::from_qwen3(&Qwen3Config::qwen3_0_6b())
    }

    fn q_size(&self) -> usize {
        self.num_q_heads * self.head_dim
    }
    fn kv_size(&self) -> usize {
        self.num_kv_heads * self.head_dim
    }

    /// Parameters of the per-token linear layers (QKV, O, gate/up/down) of all
    /// layers: each token costs `2 *` this many FLOPs in them.
    pub fn linear_params(&self) -> usize {
        let h = self.hidden;
        let per_layer = h * (self.q_size() + 2 * self.kv_size())
            + self.q_size() * h
            + 3 * h * self.intermediate;
        self.num_layers * per_layer
    }

    /// Parameters of the LM head (vocab x hidden).
    pub fn lm_head_params(&self) -> usize {
        self.vocab * self.hidden
    }

    /// Bytes of all weights resident on the GPU (norms included, a tied LM
    /// head counted once).
    pub fn weight_bytes(&self) -> usize {
        let norms = self.num_layers * (2 * self.hidden + 2 * self.head_dim) + self.hidden;
        let embed = self.vocab * self.hidden;
        let head = if self.tied_embeddings { 0 } else { embed };
        (self.linear_params() + norms + embed + head) * self.bytes_per_param
    }

    /// Bytes of K and V for one token across all layers.
    pub fn kv_bytes_per_token(&self) -> usize {
        2 * self.num_layers * self.kv_size() * self.bytes_per_param
    }

    /// Activation bytes one token moves through the linear layers of all
    /// layers (each GEMM's input read and output written once).
    pub fn activation_bytes_per_token(&self) -> usize {
        let h = self.hidden;
        let (q, kv, i) = (self.q_size(), self.kv_size(), self.intermediate);
        let per_layer = (h + q + 2 * kv) + (q + h) + (h + 2 * i) + (i + h);
        self.num_layers * per_layer * self.bytes_per_param
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn qwen3_0_6b_gemm_weights_match_the_measured_1_19_gb() {
        let m = ModelShape::qwen3_0_6b();
        let gemm_bytes = (m.linear_params() + m.lm_head_params()) * m.bytes_per_param;
        assert!(
            (1.18e9..1.20e9).contains(&(gemm_bytes as f64)),
            "{gemm_bytes}"
        );
        assert_eq!(m.kv_bytes_per_token(), 2 * 28 * 8 * 128 * 2);
        let params = Qwen3Config::qwen3_0_6b().num_params();
        assert_eq!(m.weight_bytes(), params * 2);
    }
}
