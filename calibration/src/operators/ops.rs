//! The operators one step of the CUDA runner runs, and their times.
//!
//! Contract: per layer four GEMMs over the step's tokens (QKV, O, gate-up,
//! down), the elementwise kernels (input norm, q/k-norm + RoPE + KV write,
//! post-attention norm, SiLU·mul; decode-only steps fuse the RoPE kernel into
//! attention) and the attention kernels; then the final norm and the LM head
//! over the sampled rows. A short prompt chunk over cached context runs on the
//! decode path ([`engine::short_chunk_on_decode_path`]), as in the runner.
//! In a decode graph a skinny product's weights stream while the kernel
//! before it runs ([`prefetched`]).

use super::attention;
use super::gemm::{copy_seconds, gemm_time, smooth_max, Gemm, GemmKernel, OperatorTime};
use super::{OperatorParams, StepTime};
use engine::gemm_padded_rows;
use engine::runner::attention_choice::graph_bucket;
use engine::runner::gemm_choice::PIECEWISE_MAX_TOKENS;
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

/// One elementwise kernel launch: the bytes it moves and its blocks.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Elementwise {
    pub bytes: f64,
    pub blocks: usize,
}

/// One layer's elementwise kernels over `rows` token rows, as the runner
/// launches them: two residual-add + RMSNorm kernels (a block per row; each
/// reads the residual and the delta and writes the normed row), q/k-norm +
/// RoPE + cache write unless the decode attention does it (`fused_rope`; a
/// warp per head of a row, four to a block; reads and writes q, k, v) and
/// SiLU·mul (256 threads of 8 elements a block; reads 2i, writes i).
pub fn layer_elementwise(m: &ModelShape, rows: usize, fused_rope: bool) -> Vec<Elementwise> {
    let (h, i) = (m.hidden, m.intermediate);
    let bpp = m.bytes_per_param as f64;
    let qkv = (m.num_q_heads + 2 * m.num_kv_heads) * m.head_dim;
    let norm = Elementwise {
        bytes: (3 * h * rows) as f64 * bpp,
        blocks: rows,
    };
    let mut out = vec![norm, norm];
    if !fused_rope {
        out.push(Elementwise {
            bytes: (2 * qkv * rows) as f64 * bpp,
            blocks: (rows * (m.num_q_heads + m.num_kv_heads)).div_ceil(4),
        });
    }
    out.push(Elementwise {
        bytes: (3 * i * rows) as f64 * bpp,
        blocks: (rows * i).div_ceil(8 * 256),
    });
    out
}

/// One elementwise kernel's time: its latency, then its bytes at the copy
/// bandwidth or the busiest SM's blocks (a cost per block and per byte),
/// whichever is slower. A plain maximum: sharing decode attention's
/// contention exponent, the fit took one beyond 1,000 while attention read
/// its keys at the copy bandwidth, and 2.8 once it reads them at the read
/// share, which put qwen3-0.6b's batch-64 decode 10 % long on the H200 (its
/// attention's smoother maximum); with this one plain, attention's exponent
/// fits at 6.4 and that step at +6 % (`results/h200/engine_family.csv`).
pub fn elementwise_seconds(p: &OperatorParams, gpu: &GpuSpec, k: &Elementwise) -> f64 {
    let blocks = k.blocks.max(1);
    let per_sm = blocks.div_ceil(gpu.sm_count.max(1) as usize) as f64;
    let work =
        per_sm * (p.elementwise_block_cost + k.bytes / blocks as f64 / p.elementwise_bytes_per_sm);
    p.elementwise_latency + copy_seconds(gpu, k.bytes, 1.0).max(work)
}

/// SMs whose full-rate draw the GPU's power budget is set for: its own, or
/// for a slice of a datasheet GPU (named `NAME@Nsm`, [`super::slices::slice_of`])
/// the whole GPU's, since a slice keeps the chip's power budget.
pub fn power_budget_sms(gpu: &GpuSpec) -> u32 {
    super::slices::chip_of(gpu).sm_count.max(gpu.sm_count)
}

/// `seconds` of GEMMs doing `flops` in one step, once the GPU's power limit
/// holds tensor work to [`OperatorParams::sustained_flops_share`] of the dense
/// FLOP/s of its power budget ([`power_budget_sms`]): the first
/// [`OperatorParams::power_window`] seconds run at the rate the kernels reach,
/// the rest at most at the sustained rate. Why: on the whole H200 every long
/// run of GEMMs holds 64–65 % of its peak (prefills of 3,200 tokens of
/// qwen3-0.6b and -8b, 512 of -14b: `operators/groups.csv`, gemm_only) where
/// the same products timed alone in short bursts reach 73–80 %
/// (`gemm_shapes.csv`), and the 64-SM slice runs qwen3-8b's at 0.38 of the
/// whole GPU's peak, 19 % more per SM than the whole GPU.
pub fn power_limited(p: &OperatorParams, gpu: &GpuSpec, seconds: f64, flops: f64) -> f64 {
    power_limited_after(p, gpu, seconds, flops, 0.0).seconds
}

/// What [`power_limited_after`] found for one step's GEMMs.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct PowerLimited {
    /// The GEMMs' seconds.
    pub seconds: f64,
    /// Seconds of the credit spent: what the GEMMs ran faster than the
    /// power limit alone would let them.
    pub credit_used: f64,
    /// Whether the kernels' rate is above the sustained one (the step draws
    /// on the power budget rather than letting it recover).
    pub above_cap: bool,
}

/// [`power_limited`] on a GPU rested enough to save up to `credit` seconds
/// of what the limit costs ([`super::burst`]): never faster than the
/// kernels' own rate.
pub fn power_limited_after(
    p: &OperatorParams,
    gpu: &GpuSpec,
    seconds: f64,
    flops: f64,
    credit: f64,
) -> PowerLimited {
    let per_sm = gpu.bf16_flops / f64::from(gpu.sm_count.max(1));
    let cap = per_sm * f64::from(power_budget_sms(gpu)) * p.sustained_flops_share;
    let rate = if seconds > 0.0 { flops / seconds } else { 0.0 };
    if flops <= 0.0 || rate <= cap {
        return PowerLimited {
            seconds,
            ..PowerLimited::default()
        };
    }
    let limited = if seconds <= p.power_window {
        seconds
    } else {
        p.power_window + (flops - rate * p.power_window) / cap
    };
    let saved = (limited - seconds).min(credit.max(0.0));
    PowerLimited {
        seconds: limited - saved,
        credit_used: saved,
        above_cap: true,
    }
}

/// Seconds of a product's weight stream that the kernel before it hides:
/// in a decode graph the skinny kernel prefetches its weights into the L2
/// before it waits for that kernel (programmatic dependent launch,
/// skinny_gemm.cu), so as much of its memory time as `previous` lasts
/// overlaps it. Taken to fit in the L2: the skinny rule holds a product to
/// 64 K weights an SM, at most 17 MB on the H200 (50 MB of L2); a GPU whose
/// L2 holds less (GA102's 6 MB) is not modelled. cuBLAS's kernels wait first.
pub fn prefetched(t: &OperatorTime, kernel: GemmKernel, graphed: bool, previous: f64) -> f64 {
    if graphed && kernel == GemmKernel::Skinny {
        t.memory.min(previous).max(0.0)
    } else {
        0.0
    }
}

pub fn step_time(
    p: &OperatorParams,
    m: &ModelShape,
    gpu: &GpuSpec,
    batch: &BatchShape,
) -> StepTime {
    step_time_after(p, m, gpu, batch, 0.0).0
}

/// [`step_time`] on a GPU rested enough to save up to `credit` seconds of
/// what its power limit costs ([`power_limited_after`]), and what the
/// step's GEMMs did with it.
pub fn step_time_after(
    p: &OperatorParams,
    m: &ModelShape,
    gpu: &GpuSpec,
    batch: &BatchShape,
    credit: f64,
) -> (StepTime, PowerLimited) {
    if batch.seqs.is_empty() {
        return (StepTime::default(), PowerLimited::default());
    }
    let counts = batch.counts();
    let layers = m.num_layers as f64;
    let graphed = counts.is_decode_only();
    // A decode-only step replays the graph of its bucket, rows and all.
    let rows = if graphed {
        graph_bucket(counts.tokens)
    } else {
        counts.tokens
    };
    // Steps past the piecewise graphs run cuBLAS on algorithms nobody tuned.
    let tuned = graphed || rows <= PIECEWISE_MAX_TOKENS;
    let gemms = layer_gemms(m, rows);
    let gemm_flops: f64 = gemms.iter().map(Gemm::flops).sum::<f64>() * layers;
    let attention = attention::layer_seconds(p, m, gpu, batch, graphed);
    let elementwise: Vec<f64> = layer_elementwise(m, rows, graphed)
        .iter()
        .map(|k| elementwise_seconds(p, gpu, k))
        .collect();
    // The kernel before each product: the input norm, attention, the
    // post-attention norm, SiLU·mul (layer_elementwise's order).
    let norm = |i: usize| elementwise.get(i).copied().unwrap_or(0.0);
    let before = [
        norm(0),
        attention,
        norm(1),
        elementwise.last().copied().unwrap_or(0.0),
    ];
    let gemm: f64 = gemms
        .iter()
        .zip(before)
        .enumerate()
        .map(|(i, (g, previous))| {
            let kernel = g.kernel(gpu.sm_count, i % 2 == 1, graphed);
            // cuBLAS products run on rows padded to the runner's classes.
            let launched = match kernel {
                GemmKernel::Skinny => *g,
                GemmKernel::Cublas { .. } => Gemm {
                    m: gemm_padded_rows(g.m),
                    ..*g
                },
            };
            let t = gemm_time(p, gpu, &launched, kernel, tuned);
            let hidden = prefetched(&t, kernel, graphed, previous);
            t.latency + smooth_max(t.memory - hidden, t.compute, p.overlap_exponent)
        })
        .sum::<f64>()
        * layers;
    let power = power_limited_after(p, gpu, gemm, gemm_flops, credit);
    let gemm = power.seconds;
    let head = lm_head_gemm(m, counts.sampled);
    let lm_head = gemm_time(
        p,
        gpu,
        &head,
        head.kernel(gpu.sm_count, false, graphed),
        tuned,
    )
    .total;
    let attention = attention * layers;
    let elementwise = layers * elementwise.iter().sum::<f64>();
    let host = if counts.is_decode_only() {
        p.host_graph_step
    } else {
        p.host_eager_step
    };
    let time = StepTime {
        gemm,
        lm_head,
        attention,
        elementwise,
        host,
    };
    (time, power)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn calibration_gpu() -> GpuSpec {
        crate::datasheet::lookup("h200-sxm").expect("h200 in the table")
    }

    #[test]
    fn the_power_limit_holds_long_tensor_work_to_the_sustained_rate() {
        let p = OperatorParams {
            sustained_flops_share: 0.5,
            power_window: 1e-3,
            ..OperatorParams::initial()
        };
        let gpu = calibration_gpu();
        // 10 ms at 0.8 of the peak: the first 1 ms as is, the rest at 0.5.
        let flops = 0.8 * gpu.bf16_flops * 10e-3;
        let t = power_limited(&p, &gpu, 10e-3, flops);
        let expected = 1e-3 + (flops - 0.8 * gpu.bf16_flops * 1e-3) / (0.5 * gpu.bf16_flops);
        assert!((t - expected).abs() < 1e-12, "{t} {expected}");
        // Under the cap, or shorter than the window: unchanged.
        assert_eq!(
            power_limited(&p, &gpu, 10e-3, 0.4 * gpu.bf16_flops * 10e-3),
            10e-3
        );
        assert_eq!(
            power_limited(&p, &gpu, 0.5e-3, 0.8 * gpu.bf16_flops * 0.5e-3),
            0.5e-3
        );
        // A slice keeps the whole GPU's budget: 0.8 of a 16-SM slice's peak is
        // far under half the chip's.
        let slice = crate::operators::slices::CopyBandwidths::h200(&gpu)
            .gpu(16)
            .expect("measured slice");
        assert_eq!(power_budget_sms(&slice), 132);
        let slice_flops = 0.8 * slice.bf16_flops * 10e-3;
        assert_eq!(power_limited(&p, &slice, 10e-3, slice_flops), 10e-3);
    }

    #[test]
    fn a_skinny_product_in_a_graph_hides_its_weights_behind_the_kernel_before_it() {
        let t = OperatorTime {
            latency: 3e-6,
            memory: 2e-6,
            compute: 0.1e-6,
            total: 5.1e-6,
        };
        // As much of the weight stream as the previous kernel lasts, at most all of it.
        assert_eq!(prefetched(&t, GemmKernel::Skinny, true, 0.5e-6), 0.5e-6);
        assert_eq!(prefetched(&t, GemmKernel::Skinny, true, 7e-6), 2e-6);
        // Eager steps and cuBLAS wait for the previous kernel first.
        assert_eq!(prefetched(&t, GemmKernel::Skinny, false, 7e-6), 0.0);
        let cublas = GemmKernel::Cublas { split: 1 };
        assert_eq!(prefetched(&t, cublas, true, 7e-6), 0.0);
        // qwen3-0.6b's batch-1 decode (skinny products): its GEMMs cost less
        // in the step than priced one by one.
        let p = OperatorParams::initial();
        let gpu = calibration_gpu();
        let m = ModelShape::qwen3_0_6b();
        let step = crate::operators::family::batch_of("decode", 1, 300).expect("decode");
        let g = &layer_gemms(&m, 1)[0];
        assert_eq!(g.kernel(gpu.sm_count, false, true), GemmKernel::Skinny);
        let with = step_time(&p, &m, &gpu, &step).gemm;
        let parts: f64 = layer_gemms(&m, 1)
            .iter()
            .enumerate()
            .map(|(i, g)| {
                gemm_time(&p, &gpu, g, g.kernel(gpu.sm_count, i % 2 == 1, true), true).total
            })
            .sum::<f64>()
            * m.num_layers as f64;
        assert!(with < parts, "{with} {parts}");
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
