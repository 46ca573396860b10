//! Moving a measured profile to a GPU nobody measured.
//!
//! Contract and assumptions (also printed by `exp plan`):
//! - Each GPU-bound term keeps the efficiency it showed against the measured
//!   GPU's roofline: its time is multiplied by `roofline_target /
//!   roofline_measured` for the same work. The dense layers and the LM head use
//!   the roofline `max(weight bytes / bandwidth, FLOPs / peak FLOP/s)` at each
//!   knot's token count, so a knot that was memory bound scales with bandwidth
//!   and a compute-bound one with FLOP/s. Decode attention (KV bytes read)
//!   scales with bandwidth; prefill attention with FLOP/s for its query-key
//!   pairs and with bandwidth for the keys it reads.
//! - Fixed per-step and per-sequence costs (host work, kernel launches, graph
//!   replay) are kept as time, not scaled: they depend on the host and the
//!   launch path more than on the GPU's datasheet.
//! - Not modelled: cache sizes, clocks under power limits (laptop parts),
//!   kernel choices that differ per architecture, PCIe vs SXM host links.
//!   Transfer between GPUs of very different architecture is a first estimate.

use crate::profile::{CostProfile, Knot};
use sim::{GpuSpec, ModelShape};

/// The written assumptions, for reports.
pub const ASSUMPTIONS: &str =
    "GPU-bound terms keep the efficiency measured against the source GPU's \
roofline (dense layers and LM head: max(bytes/bandwidth, FLOPs/peak) per knot; decode attention: \
bandwidth; prefill attention: FLOP/s for query-key pairs, bandwidth for keys read); fixed per-step and per-sequence overheads are kept as time; \
cache sizes, power-limited clocks and architecture-specific kernels are not modelled.";

/// Weight bytes and FLOPs per token of the dense (non-embedding, non-LM-head) layers.
fn dense_work(m: &ModelShape) -> (f64, f64) {
    let q = (m.num_q_heads * m.head_dim) as f64;
    let kv = (m.num_kv_heads * m.head_dim) as f64;
    let h = m.hidden as f64;
    let params =
        m.num_layers as f64 * (h * (q + 2.0 * kv) + q * h + 3.0 * h * m.intermediate as f64);
    (params * m.bytes_per_param as f64, 2.0 * params)
}

fn lm_work(m: &ModelShape) -> (f64, f64) {
    let params = (m.vocab * m.hidden) as f64;
    (params * m.bytes_per_param as f64, 2.0 * params)
}

/// Roofline seconds of `units` units of work of (bytes read once, FLOPs per unit).
fn roofline(gpu: &GpuSpec, (bytes, flops_per_unit): (f64, f64), units: f64) -> f64 {
    (bytes / gpu.mem_bandwidth).max(flops_per_unit * units / gpu.bf16_flops)
}

fn scale_knots(knots: &[Knot], from: &GpuSpec, to: &GpuSpec, work: (f64, f64)) -> Vec<Knot> {
    knots
        .iter()
        .map(|k| Knot {
            at: k.at,
            seconds: k.seconds * (roofline(to, work, k.at) / roofline(from, work, k.at)),
        })
        .collect()
}

/// The profile `measured` would have on `target`.
pub fn transfer(measured: &CostProfile, target: &GpuSpec) -> CostProfile {
    let from = &measured.gpu;
    let bandwidth_ratio = from.mem_bandwidth / target.mem_bandwidth;
    let flops_ratio = from.bf16_flops / target.bf16_flops;
    let mut out = measured.clone();
    out.gpu = target.clone();
    out.dense = scale_knots(&measured.dense, from, target, dense_work(&measured.model));
    out.lm_head = scale_knots(&measured.lm_head, from, target, lm_work(&measured.model));
    out.decode_s_per_kv_token *= bandwidth_ratio;
    out.prefill_s_per_qk_pair *= flops_ratio;
    out.prefill_s_per_key *= bandwidth_ratio;
    out.chunk_s_per_kv_token = measured.chunk_s_per_kv_token.map(|c| c * bandwidth_ratio);
    if from != target {
        out.provenance.method = format!(
            "transferred from {} ({}) to {}",
            from.name, measured.provenance.method, target.name
        );
        out.provenance.device = target.name.clone();
    }
    out
}
