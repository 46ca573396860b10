//! Shared test fixtures: an H200-like GPU, the Qwen3-0.6B roofline and
//! simulated engines built on it.
#![allow(dead_code)]

use engine::{EngineConfig, EngineCore, HashAlgo};
use sim::{GpuSpec, ModelShape, RooflineModel, SimRunner};
use std::sync::Arc;

pub fn h200() -> GpuSpec {
    GpuSpec {
        name: "h200-sxm".to_string(),
        bf16_flops: 989e12,
        mem_bandwidth: 4.8e12,
        mem_bytes: 141e9,
        sm_count: 132,
        source: "test literal (NVIDIA H200 datasheet figures)".to_string(),
    }
}

pub fn roofline() -> RooflineModel {
    RooflineModel::new(h200(), ModelShape::qwen3_0_6b())
}

/// The experiments' engine defaults, with the fast block hash.
pub fn config() -> EngineConfig {
    EngineConfig {
        prefix_caching_hash_algo: HashAlgo::Xxhash,
        ..EngineConfig::default()
    }
}

/// A simulated engine on the H200 roofline, with the KV capacity the GPU holds.
pub fn sim_engine(config: EngineConfig) -> EngineCore<SimRunner> {
    let model = roofline();
    let blocks = model.kv_cache_blocks(&config);
    EngineCore::new(config, SimRunner::new(Arc::new(model), blocks)).expect("valid engine")
}
