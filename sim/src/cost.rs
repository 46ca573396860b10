//! Cost models: batch composition -> step seconds.
//!
//! Contract: a [`CostModel`] prices one engine step from its [`BatchShape`]
//! alone. The [`RooflineModel`] derives it from a GPU's datasheet and the model
//! shape; calibrated models (crate `calibration`) implement the same trait.

use crate::gpu::GpuSpec;
use engine::BatchShape;

pub trait CostModel: Send + Sync {
    fn step_seconds(&self, batch: &BatchShape) -> f64;
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
}

/// Datasheet roofline for one GPU and model.
#[derive(Debug, Clone)]
pub struct RooflineModel {
    pub gpu: GpuSpec,
    pub model: ModelShape,
}
