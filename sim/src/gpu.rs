//! A GPU as the cost models see it: datasheet peaks.
//!
//! Contract: figures are the vendor's peak numbers (dense bf16 tensor FLOP/s
//! with FP32 accumulate, memory bandwidth, memory size); measured efficiency
//! against them lives in cost profiles, never here. The table of known GPUs is
//! `calibration::datasheet`.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GpuSpec {
    /// Short key, e.g. `h200-sxm`.
    pub name: String,
    /// Dense bf16 tensor-core FLOP/s with FP32 accumulate (no sparsity).
    pub bf16_flops: f64,
    /// Memory bandwidth, bytes per second.
    pub mem_bandwidth: f64,
    /// Memory size, bytes.
    pub mem_bytes: f64,
    pub sm_count: u32,
    /// Where the figures come from.
    pub source: String,
}
