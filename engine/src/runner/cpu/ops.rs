//! Row-wise f32 kernels of the CPU runner, plus the bridge to candle's matmul.
//!
//! Each function follows the Hugging Face Qwen3 definition it names, in f32.

use crate::runner::RunnerError;
use candle_core::{Device, Storage, Tensor};
use rayon::prelude::*;

pub(super) fn device_error(e: candle_core::Error) -> RunnerError {
    RunnerError::Device(format!("cpu tensor op: {e}"))
}

/// At most this many rows go through [`skinny_linear`]: gemm's small-m path
/// is several times slower than streaming the weights once (measured 6.2 ms
/// for 8 rows against 0.6 ms for one on a 6144 x 1024 matrix).
const SKINNY_ROWS: usize = 16;

/// `x[rows, in] @ w[out, in]^T`, row-major result `[rows, out]`.
pub(super) fn linear(x: &[f32], rows: usize, w: &Tensor) -> Result<Vec<f32>, RunnerError> {
    if rows > SKINNY_ROWS || !w.is_contiguous() {
        return gemm_linear(x, rows, w);
    }
    let (storage, layout) = w.storage_and_layout();
    let data = match &*storage {
        Storage::Cpu(cpu) => cpu.as_slice::<f32>().map_err(device_error)?,
        _ => {
            return Err(RunnerError::Device(
                "CPU runner weight is not in CPU memory".into(),
            ))
        }
    };
    let (start, len) = (layout.start_offset(), w.elem_count());
    let in_features = w.dim(1).map_err(device_error)?;
    Ok(skinny_linear(
        x,
        rows,
        &data[start..start + len],
        in_features,
    ))
}

/// Few rows: each weight row is read once and dotted with every input row,
/// output features split across threads.
fn skinny_linear(x: &[f32], rows: usize, w: &[f32], k: usize) -> Vec<f32> {
    const FEATURES_PER_TASK: usize = 64;
    let out_features = w.len() / k;
    let blocks: Vec<Vec<f32>> = w
        .par_chunks(FEATURES_PER_TASK * k)
        .map(|block| {
            let mut y = Vec::with_capacity(rows * block.len() / k);
            for w_row in block.chunks_exact(k) {
                y.extend(x.chunks_exact(k).map(|x_row| dot(w_row, x_row)));
            }
            y
        })
        .collect();
    // Blocks are feature-major ([feature][row]); the result is row-major.
    let mut out = vec![0.0f32; rows * out_features];
    let mut feature = 0;
    for block in &blocks {
        for per_row in block.chunks_exact(rows) {
            for (r, v) in per_row.iter().enumerate() {
                out[r * out_features + feature] = *v;
            }
            feature += 1;
        }
    }
    out
}

fn gemm_linear(x: &[f32], rows: usize, w: &Tensor) -> Result<Vec<f32>, RunnerError> {
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

/// Dot product with eight partial sums, so the compiler vectorises it.
pub(super) fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut acc = [0.0f32; 8];
    let (a8, b8) = (a.chunks_exact(8), b.chunks_exact(8));
    let tail: f32 = a8
        .remainder()
        .iter()
        .zip(b8.remainder())
        .map(|(x, y)| x * y)
        .sum();
    for (x, y) in a8.zip(b8) {
        for k in 0..8 {
            acc[k] += x[k] * y[k];
        }
    }
    acc.iter().sum::<f32>() + tail
}
