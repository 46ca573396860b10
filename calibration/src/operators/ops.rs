//! The operators one step of the CUDA runner runs, and their times.
//!
//! Contract: per layer four GEMMs over the step's tokens (QKV, O, gate-up,
//! down), the elementwise kernels (input norm, q/k-norm + RoPE + KV write,
//! post-attention norm, SiLU·mul; decode-only steps fuse the RoPE kernel into
//! attention) and the attention kernels; then the final norm and the LM head
//! over the sampled rows. A short prompt chunk over cached context runs on the
//! decode path ([`engine::short_chunk_on_decode_path`]), as in the runner.

use super::gemm::{copy_seconds, gemm_time, smooth_max, Gemm};
use super::{OperatorParams, StepTime};
use crate::features::{causal_pairs, decode_keys_read, on_decode_path, tile_tokens};
use engine::BatchShape;
use sim::{GpuSpec, ModelShape};

/// The four per-layer GEMMs of `tokens` rows.
pub fn layer_gemms(m: &ModelShape, tokens: usize) -> [Gemm; 4] {
    let (h, i) = (m.hidden, m.intermediate);
    let q = m.num_q_heads * m.head_dim;
    let kv = m.num_kv_heads * m.head_dim;
    [
        Gemm {
            m: tokens,
            n: q + 2 * kv,
            k: h,
        },
        Gemm {
            m: tokens,
            n: h,
            k: q,
        },
        Gemm {
            m: tokens,
            n: 2 * i,
            k: h,
        },
        Gemm {
            m: tokens,
            n: h,
            k: i,
        },
    ]
}

/// The LM head over `sampled` rows.
pub fn lm_head_gemm(m: &ModelShape, sampled: usize) -> Gemm {
    Gemm {
        m: sampled,
        n: m.vocab,
        k: m.hidden,
    }
}

/// Bytes one token moves through one layer's elementwise kernels.
pub fn elementwise_bytes_per_token(m: &ModelShape) -> f64 {
    let (h, i) = (m.hidden, m.intermediate);
    let qkv = (m.num_q_heads + 2 * m.num_kv_heads) * m.head_dim;
    // Norms read the residual and the delta and write the normed row (twice a
    // layer); RoPE reads and writes q, k, v; SiLU·mul reads 2i and writes i.
    ((3 * h) * 2 + 2 * qkv + 3 * i) as f64 * m.bytes_per_param as f64
}

/// Attention work of one layer, from the step's sequences.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct AttentionWork {
    /// KV bytes the decode path reads.
    pub decode_kv_bytes: f64,
    /// FLOPs of the prefill chunks' query-key pairs (QK and PV).
    pub prefill_flops: f64,
    /// KV bytes the prefill chunks read (context plus new keys).
    pub prefill_kv_bytes: f64,
}

pub fn attention_work(m: &ModelShape, batch: &BatchShape) -> AttentionWork {
    let kv_token = (2 * m.num_kv_heads * m.head_dim * m.bytes_per_param) as f64;
    let tile = tile_tokens(m);
    let mut w = AttentionWork::default();
    for s in &batch.seqs {
        if on_decode_path(s, tile) {
            w.decode_kv_bytes += decode_keys_read(s) * kv_token;
        } else {
            w.prefill_flops += 4.0 * causal_pairs(s) * (m.num_q_heads * m.head_dim) as f64;
            w.prefill_kv_bytes += (s.context_before as f64 + s.new_tokens as f64) * kv_token;
        }
    }
    w
}

/// One layer's attention time.
pub fn attention_seconds(
    p: &OperatorParams,
    m: &ModelShape,
    gpu: &GpuSpec,
    w: &AttentionWork,
) -> f64 {
    if w.decode_kv_bytes == 0.0 && w.prefill_flops == 0.0 {
        return 0.0;
    }
    let group = (m.num_q_heads / m.num_kv_heads.max(1)) as f64;
    let decode = smooth_max(
        copy_seconds(gpu, w.decode_kv_bytes, 1.0),
        w.decode_kv_bytes * group / (f64::from(gpu.sm_count) * p.decode_attention_work_per_sm),
        p.overlap_exponent,
    );
    let prefill = smooth_max(
        w.prefill_flops / (gpu.bf16_flops * p.prefill_attention_flops_share),
        copy_seconds(gpu, w.prefill_kv_bytes, 1.0),
        p.overlap_exponent,
    );
    p.attention_latency + decode + prefill
}

pub fn step_time(
    p: &OperatorParams,
    m: &ModelShape,
    gpu: &GpuSpec,
    batch: &BatchShape,
) -> StepTime {
    if batch.seqs.is_empty() {
        return StepTime::default();
    }
    let counts = batch.counts();
    let layers = m.num_layers as f64;
    let graphed = counts.is_decode_only();
    let gemm: f64 = layer_gemms(m, counts.tokens)
        .iter()
        .enumerate()
        .map(|(i, g)| gemm_time(p, gpu, g, g.kernel(gpu.sm_count, i % 2 == 1, graphed)).total)
        .sum::<f64>()
        * layers;
    let head = lm_head_gemm(m, counts.sampled);
    let lm_head = gemm_time(p, gpu, &head, head.kernel(gpu.sm_count, false, graphed)).total;
    let attention = attention_seconds(p, m, gpu, &attention_work(m, batch)) * layers;
    let kernels = if counts.is_decode_only() { 3.0 } else { 4.0 };
    let bytes = elementwise_bytes_per_token(m) * counts.tokens as f64;
    let elementwise = layers
        * (kernels * p.elementwise_latency
            + copy_seconds(gpu, bytes, p.elementwise_bandwidth_share));
    let host = if counts.is_decode_only() {
        p.host_graph_step
    } else {
        p.host_eager_step
    };
    StepTime {
        gemm,
        lm_head,
        attention,
        elementwise,
        host,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::operators::COPY_FRACTION;
    use engine::SeqShape;

    #[test]
    fn attention_work_by_hand() {
        let m = ModelShape::qwen3_0_6b(); // 8 KV heads of 128, 16 query heads
        let kv_token = 2.0 * 8.0 * 128.0 * 2.0;
        let batch = BatchShape {
            seqs: vec![
                SeqShape {
                    new_tokens: 1,
                    context_before: 299,
                    samples: true,
                },
                SeqShape {
                    new_tokens: 512,
                    context_before: 0,
                    samples: true,
                },
            ],
        };
        let w = attention_work(&m, &batch);
        // The decode reads its 299 cached keys and its own.
        assert_eq!(w.decode_kv_bytes, 300.0 * kv_token);
        // 512 new tokens under a causal mask: 512 * 513 / 2 pairs, 4 FLOPs
        // per pair and head dimension (QK and PV), 16 heads of 128.
        assert_eq!(w.prefill_flops, 4.0 * (512.0 * 513.0 / 2.0) * 16.0 * 128.0);
        assert_eq!(w.prefill_kv_bytes, 512.0 * kv_token);
        // Decode attention on one layer: bound by DRAM or by the SMs' work
        // (bytes times the group of 2 query heads per KV head).
        let p = OperatorParams {
            overlap_exponent: 1e6,
            ..OperatorParams::initial()
        };
        let gpu = calibration_gpu();
        let only_decode = AttentionWork {
            decode_kv_bytes: w.decode_kv_bytes,
            ..Default::default()
        };
        let t = attention_seconds(&p, &m, &gpu, &only_decode);
        let dram = w.decode_kv_bytes / (gpu.mem_bandwidth * COPY_FRACTION);
        let sms = w.decode_kv_bytes * 2.0 / (132.0 * p.decode_attention_work_per_sm);
        assert!((t - (p.attention_latency + dram.max(sms))).abs() < 1e-9 * t);
    }

    fn calibration_gpu() -> GpuSpec {
        crate::datasheet::lookup("h200-sxm").expect("h200 in the table")
    }

    #[test]
    fn an_empty_step_costs_nothing() {
        let t = step_time(
            &OperatorParams::initial(),
            &ModelShape::qwen3_0_6b(),
            &calibration_gpu(),
            &BatchShape::default(),
        );
        assert_eq!(t.total(), 0.0);
    }
}
