//! Row-wise f32 kernels of the CPU runner, plus the bridge to candle's matmul.
//!
//! Each function follows the Hugging Face Qwen3 definition it names, in f32.

use crate::runner::RunnerError;
use candle_core::{Device, Tensor};

pub(super) fn device_error(e: candle_core::Error) -> RunnerError {
    RunnerError::Device(format!("cpu tensor op: {e}"))
}

/// `x[rows, in] @ w[out, in]^T`, row-major result `[rows, out]`.
pub(super) fn linear(x: &[f32], rows: usize, w: &Tensor) -> Result<Vec<f32>, RunnerError> {
    let in_features = w.dim(1).map_err(device_error)?;
    let x = Tensor::from_slice(x, (rows, in_features), &Device::Cpu).map_err(device_error)?;
    let w_t = w.t().map_err(device_error)?;
    x.matmul(&w_t)
        .and_then(|y| y.flatten_all())
        .and_then(|y| y.to_vec1())
        .map_err(device_error)
}

/// HF `Qwen3RMSNorm` over each `dim`-wide row of `x`, in place:
/// `w * x / sqrt(mean(x^2) + eps)`.
pub(super) fn rms_norm_rows(x: &mut [f32], weight: &[f32], eps: f32) {
    let dim = weight.len();
    for row in x.chunks_exact_mut(dim) {
        let mean_sq = row.iter().map(|v| v * v).sum::<f32>() / dim as f32;
        let inv = 1.0 / (mean_sq + eps).sqrt();
        for (v, w) in row.iter_mut().zip(weight) {
            *v = w * (*v * inv);
        }
    }
}

/// Cosines and sines of one position for HF's default RoPE, computed in f32 as
/// `transformers` does: `inv_freq[i] = 1 / theta^(2i / head_dim)`,
/// angle `= pos * inv_freq[i]`, for `i < head_dim / 2`.
pub(super) struct RopeTable {
    inv_freq: Vec<f32>,
}

impl RopeTable {
    pub(super) fn new(head_dim: usize, theta: f64) -> Self {
        let inv_freq = (0..head_dim / 2)
            .map(|i| 1.0 / (theta as f32).powf((2 * i) as f32 / head_dim as f32))
            .collect();
        Self { inv_freq }
    }

    /// `(cos, sin)` for `pos`, each `head_dim / 2` long.
    pub(super) fn cos_sin(&self, pos: usize) -> (Vec<f32>, Vec<f32>) {
        self.inv_freq
            .iter()
            .map(|f| (pos as f32) * f)
            .map(|a| (a.cos(), a.sin()))
            .unzip()
    }
}

/// HF `apply_rotary_pos_emb` (rotate_half convention) on every head of one
/// token: for `i < d/2`, `(x[i], x[i + d/2])` rotates by the angle of `i`.
pub(super) fn apply_rope(heads: &mut [f32], head_dim: usize, cos: &[f32], sin: &[f32]) {
    let half = head_dim / 2;
    for head in heads.chunks_exact_mut(head_dim) {
        let (lo, hi) = head.split_at_mut(half);
        for i in 0..half {
            let (a, b) = (lo[i], hi[i]);
            lo[i] = a * cos[i] - b * sin[i];
            hi[i] = b * cos[i] + a * sin[i];
        }
    }
}

/// `silu(gate) * up` where each row of `gate_up` is `[gate | up]`, width `2 * inter`.
pub(super) fn silu_mul(gate_up: &[f32], inter: usize) -> Vec<f32> {
    let mut out = Vec::with_capacity(gate_up.len() / 2);
    for row in gate_up.chunks_exact(2 * inter) {
        let (gate, up) = row.split_at(inter);
        out.extend(gate.iter().zip(up).map(|(g, u)| g / (1.0 + (-g).exp()) * u));
    }
    out
}

/// Index of the largest value, the first one on ties; NaNs are never chosen
/// unless every value is NaN (then 0).
pub(super) fn argmax(values: &[f32]) -> u32 {
    let mut best = 0;
    let mut best_val = f32::NEG_INFINITY;
    for (i, &v) in values.iter().enumerate() {
        if v > best_val {
            best = i;
            best_val = v;
        }
    }
    best as u32
}

/// Softmax of `scale * row` for each `row_len`-wide row in place, keeping only
/// the first `visible(row)` entries (the rest become 0): the causal mask.
pub(super) fn masked_softmax_rows(
    scores: &mut [f32],
    row_len: usize,
    scale: f32,
    visible: impl Fn(usize) -> usize,
) {
    for (r, row) in scores.chunks_exact_mut(row_len).enumerate() {
        let (live, masked) = row.split_at_mut(visible(r).min(row_len));
        let max = live.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        let mut sum = 0.0;
        for v in live.iter_mut() {
            *v = ((*v - max) * scale).exp();
            sum += *v;
        }
        for v in live.iter_mut() {
            *v /= sum;
        }
        masked.fill(0.0);
    }
}
