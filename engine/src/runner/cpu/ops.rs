//! Row-wise f32 kernels of the CPU runner, plus the bridge to candle's matmul.
//!
//! Each function follows the Hugging Face Qwen3 definition it names, in f32.

use crate::runner::RunnerError;
use candle_core::{Device, Storage, Tensor};
use rayon::prelude::*;

pub(super) fn device_error(e: candle_core::Error) -> RunnerError {
    RunnerError::Device {
        what: "cpu tensor op".into(),
        source: Box::new(e),
    }
}

/// Batches of at most this many rows are "skinny": gemm's small-m path is
/// slow for them (6144 x 1024 f32 weights on 2 cores: 3.1 ms for 8 rows
/// against 0.47 ms for one).
const SKINNY_ROWS: usize = 16;

/// Products of at most this many multiply-adds are "small": a candle matmul
/// call costs a fixed 28 us on 2 cores and about 300 us on 16 (thread
/// wake-ups), more than the arithmetic.
const SMALL_PRODUCT: usize = 1 << 22;

/// `x[rows, in] @ w[out, in]^T`, row-major result `[rows, out]`.
///
/// - one row, or a small product: a plain kernel parallel over output
///   features (gemm runs a single row on one thread: the 151936 x 1024 LM
///   head took 51 ms with gemm, 6.7 ms with this kernel on 16 cores);
/// - more than [`SKINNY_ROWS`] rows: gemm;
/// - otherwise gemm on the transposed problem `(w @ x^T)^T`, up to 3 times
///   faster than `x @ w^T` for 2 to 16 rows on 2 cores, as fast on 16.
pub(super) fn linear(x: &[f32], rows: usize, w: &Tensor) -> Result<Vec<f32>, RunnerError> {
    let in_features = w.dim(1).map_err(device_error)?;
    let plain = rows == 1 || rows * w.elem_count() <= SMALL_PRODUCT;
    if !plain && rows > SKINNY_ROWS {
        let x = Tensor::from_slice(x, (rows, in_features), &Device::Cpu).map_err(device_error)?;
        return x
            .matmul(&w.t().map_err(device_error)?)
            .and_then(flat)
            .map_err(device_error);
    }
    if !plain || !w.is_contiguous() {
        let x_t = Tensor::from_slice(x, (rows, in_features), &Device::Cpu)
            .and_then(|x| x.t())
            .map_err(device_error)?;
        return w
            .matmul(&x_t)
            .and_then(|y| y.t())
            .and_then(flat)
            .map_err(device_error);
    }
    let (storage, layout) = w.storage_and_layout();
    let data = match &*storage {
        Storage::Cpu(cpu) => cpu.as_slice::<f32>().map_err(device_error)?,
        _ => {
            return Err(RunnerError::Device {
                what: "reading a CPU runner weight".into(),
                source: "the tensor is not in CPU memory".into(),
            })
        }
    };
    let (start, len) = (layout.start_offset(), w.elem_count());
    Ok(plain_linear(
        x,
        rows,
        &data[start..start + len],
        in_features,
    ))
}

/// A tensor's values in row-major order.
fn flat(t: Tensor) -> candle_core::Result<Vec<f32>> {
    t.flatten_all()?.to_vec1()
}

/// Each weight row is read once and dotted with every input row,
/// output features split across threads.
fn plain_linear(x: &[f32], rows: usize, w: &[f32], k: usize) -> Vec<f32> {
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Every path of `linear` (plain kernel, transposed gemm, gemm) against
    /// an f64 loop.
    #[test]
    fn linear_paths_agree_with_plain_loops() {
        let many = SMALL_PRODUCT / (96 * 40) + 1;
        let cases: [(usize, usize, &[usize]); 2] = [
            (96, 40, &[1, 5, SKINNY_ROWS, SKINNY_ROWS + 3, many]),
            (
                SMALL_PRODUCT / 512 + 1,
                512,
                &[1, 5, SKINNY_ROWS, SKINNY_ROWS + 3],
            ),
        ];
        for (out_f, in_f, row_counts) in cases {
            let w: Vec<f32> = (0..out_f * in_f)
                .map(|i| ((i * 37 % 101) as f32 - 50.0) / 500.0)
                .collect();
            let wt = Tensor::from_slice(&w, (out_f, in_f), &Device::Cpu).unwrap();
            for &rows in row_counts {
                let x: Vec<f32> = (0..rows * in_f)
                    .map(|i| ((i * 13 % 29) as f32 - 14.0) / 10.0)
                    .collect();
                let y = linear(&x, rows, &wt).unwrap();
                assert_eq!(y.len(), rows * out_f);
                for r in (0..rows).step_by(rows / 7 + 1) {
                    for o in (0..out_f).step_by(out_f / 13 + 1) {
                        let want: f64 = (0..in_f)
                            .map(|k| x[r * in_f + k] as f64 * w[o * in_f + k] as f64)
                            .sum();
                        let got = y[r * out_f + o] as f64;
                        assert!(
                            (got - want).abs() < 1e-4,
                            "{out_f}x{in_f}, {rows} rows, [{r},{o}]: {got} vs {want}"
                        );
                    }
                }
            }
        }
    }
}
