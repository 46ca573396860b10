//! Seeded synthetic Qwen3 weights: a counter-based generator that the host
//! and a CUDA kernel evaluate to the same bits.
//!
//! Contract: value `i` of the tensor called `name` is a pure function
//! [`value`]`(seed, name, shape, i)` computed with 64-bit integer arithmetic
//! and three exactly rounded f32 operations (no libm, no fused multiply-add),
//! then rounded to bf16 nearest-even. So any element can be produced alone, in
//! any order, by any number of threads, on the host or on a GPU
//! (`runner/cuda/synthetic.cu` is the same function in CUDA), and the result
//! never depends on how the work was split. [`generate`] builds host weights;
//! the CUDA runner can fill its device tensors without them.
//!
//! The function: the tensor's key is `mix(seed ^ mix(fnv1a(name)))`; element
//! `i` draws the 64 bits `mix(key + i * GAMMA)` (output `i` of SplitMix64
//! started at the key); the sum of their four 16-bit quarters (Irwin-Hall,
//! n = 4), centred and scaled to unit variance, is `z`; the value is
//! `z * std + mean`, each product and sum rounded to f32.
//!
//! Distribution (never all zeros, since GPUs run measurably faster on zeros):
//! - linear layers and the embedding, shape `[out, in]`: mean 0, std
//!   `0.02 * sqrt(1024 / in)`. At Qwen3-0.6B's hidden size 1024 this is
//!   Hugging Face's `initializer_range` 0.02; scaling by the fan-in keeps a
//!   unit-RMS input giving outputs of std about 0.64 at any width, so
//!   activations stay in a sane range through all layers and tiny models
//!   still produce logits with a clear argmax. The embedding uses
//!   `in = hidden_size`, which is also right for the tied LM head.
//! - RMSNorm weights (`*_layernorm`, `q_norm`, `k_norm`, `model.norm`): mean
//!   1, std 0.05.
//!
//! The Irwin-Hall sum is bell-shaped with tails cut at 3.46 std; timing and
//! the runners' comparisons need random, well-scaled values, not exact
//! normals.

use super::config::Qwen3Config;
use super::weights::{HostTensor, Qwen3Weights};
use half::bf16;
use rayon::prelude::*;
use std::convert::Infallible;

/// Values generated per parallel task on the host (any split gives the same values).
pub const CHUNK: usize = 1 << 16;

/// SplitMix64's increment (the golden ratio in 64 bits).
pub const GAMMA: u64 = 0x9e37_79b9_7f4a_7c15;

/// The mean of the sum of four 16-bit uniforms: `4 * 65535 / 2`.
const IRWIN_HALL_MEAN: i32 = 131_070;

/// `1 / sqrt(4 * (65536^2 - 1) / 12)`, the sum's inverse std, rounded to f32.
pub const IRWIN_HALL_UNIT: f32 = 2.642_899_7e-5;

/// Std of a linear layer's weights with `in_features` inputs.
pub fn linear_std(in_features: usize) -> f32 {
    0.02 * (1024.0 / in_features as f32).sqrt()
}

/// Std of the noise around 1.0 in RMSNorm weights.
pub const NORM_STD: f32 = 0.05;

/// The generator of one tensor: its key and its distribution's mean and std.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TensorStream {
    pub key: u64,
    pub mean: f32,
    pub std: f32,
}

impl TensorStream {
    /// The stream of the tensor `name` of `shape` (a norm weight if
    /// one-dimensional, otherwise a linear layer of fan-in `shape[last]`).
    pub fn new(seed: u64, name: &str, shape: &[usize]) -> Self {
        let (mean, std) = match shape {
            [_] => (1.0, NORM_STD),
            [.., in_features] => (0.0, linear_std(*in_features)),
            [] => (0.0, 0.0),
        };
        Self {
            key: mix(seed ^ mix(fnv1a(name.as_bytes()))),
            mean,
            std,
        }
    }

    /// Element `index` of the tensor.
    pub fn value(&self, index: u64) -> bf16 {
        let bits = mix(self.key.wrapping_add(index.wrapping_mul(GAMMA)));
        let sum =
            (bits & 0xffff) + ((bits >> 16) & 0xffff) + ((bits >> 32) & 0xffff) + (bits >> 48);
        // Exact: |sum - mean| < 2^18, so the integer and its f32 agree.
        let centred = (sum as i32 - IRWIN_HALL_MEAN) as f32;
        let z = centred * IRWIN_HALL_UNIT;
        bf16::from_bits(bf16_nearest_even(z * self.std + self.mean))
    }

    /// Elements `start .. start + out.len()`, in parallel chunks of [`CHUNK`].
    pub fn fill(&self, start: u64, out: &mut [bf16]) {
        out.par_chunks_mut(CHUNK)
            .enumerate()
            .for_each(|(chunk, values)| {
                let first = start + (chunk * CHUNK) as u64;
                for (i, v) in values.iter_mut().enumerate() {
                    *v = self.value(first + i as u64);
                }
            });
    }
}

/// Element `index` of the synthetic tensor `name` of `shape` under `seed`.
pub fn value(seed: u64, name: &str, shape: &[usize], index: u64) -> bf16 {
    TensorStream::new(seed, name, shape).value(index)
}

/// Host weights of `config`'s shape; equal seeds give bit-identical weights.
pub fn generate(config: &Qwen3Config, seed: u64) -> Qwen3Weights {
    let result: Result<Qwen3Weights, Infallible> =
        Qwen3Weights::from_fn(config, |name, shape| Ok(tensor(seed, name, shape)));
    match result {
        Ok(weights) => weights,
        Err(never) => match never {},
    }
}

/// The synthetic tensor `name` of `shape` alone (what [`generate`] puts there).
pub fn tensor(seed: u64, name: &str, shape: &[usize]) -> HostTensor {
    let mut data = vec![bf16::ZERO; shape.iter().product()];
    TensorStream::new(seed, name, shape).fill(0, &mut data);
    HostTensor {
        shape: shape.to_vec(),
        data,
    }
}

/// f32 to bf16 bits, rounding to nearest, ties to even, in integer
/// arithmetic (the CUDA kernel does the same). Only for finite values, which
/// the generator always produces.
pub fn bf16_nearest_even(x: f32) -> u16 {
    let bits = x.to_bits();
    let round = 0x7fff + ((bits >> 16) & 1);
    (bits.wrapping_add(round) >> 16) as u16
}

/// SplitMix64's finaliser, after adding [`GAMMA`]: spreads nearby inputs over
/// the whole range.
pub fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(GAMMA);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ b as u64).wrapping_mul(0x0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unit_is_the_inverse_std_of_four_16_bit_uniforms() {
        let var = 4.0 * (65536.0f64 * 65536.0 - 1.0) / 12.0;
        assert_eq!(IRWIN_HALL_UNIT, (1.0 / var.sqrt()) as f32);
    }

    #[test]
    fn integer_rounding_matches_half_for_finite_values() {
        let stream = TensorStream::new(5, "t", &[4, 4]);
        let mut x = 1.0e-30f32;
        let mut checked = 0;
        while x < 1.0e30 {
            for v in [
                x,
                -x,
                x * 1.003_906_2,
                x * (1.0 + 1.0 / 256.0 + 1.0 / 65536.0),
            ] {
                assert_eq!(bf16_nearest_even(v), bf16::from_f32(v).to_bits(), "{v:e}");
                checked += 1;
            }
            x *= 1.37;
        }
        // Exact ties, both directions of the even rule.
        for bits in [0x3f80_8000u32, 0x3f81_8000, 0xbf80_8000, 0x0000_8000] {
            let v = f32::from_bits(bits);
            assert_eq!(
                bf16_nearest_even(v),
                bf16::from_f32(v).to_bits(),
                "{bits:#x}"
            );
        }
        for i in 0..10_000 {
            let v = stream.value(i).to_f32();
            assert_eq!(bf16_nearest_even(v), bf16::from_f32(v).to_bits());
        }
        assert!(checked > 500);
    }

    #[test]
    fn pinned_values_do_not_drift() {
        // The CUDA kernel must reproduce these bits; a change here is a change
        // of every synthetic model.
        let s = TensorStream::new(7, "model.layers.0.mlp.up_proj.weight", &[128, 64]);
        let got: Vec<u16> = (0..4).map(|i| s.value(i).to_bits()).collect();
        let again: Vec<u16> = (0..4)
            .map(|i| value(7, "model.layers.0.mlp.up_proj.weight", &[128, 64], i).to_bits())
            .collect();
        assert_eq!(got, again);
        assert_eq!(got, PINNED);
    }

    const PINNED: [u16; 4] = [15850, 15715, 48293, 48466];

    #[test]
    fn any_split_gives_the_same_values() {
        let s = TensorStream::new(3, "w", &[1000, 300]);
        let n = 3 * CHUNK + 17;
        let mut whole = vec![bf16::ZERO; n];
        s.fill(0, &mut whole);
        let mut tail = vec![bf16::ZERO; n - 12_345];
        s.fill(12_345, &mut tail);
        assert_eq!(&whole[12_345..], &tail[..]);
        assert!(whole
            .iter()
            .enumerate()
            .all(|(i, v)| *v == s.value(i as u64)));
        // Far indices (tensors beyond 2^32 elements) are just as defined.
        assert_ne!(s.value(1 << 40), s.value((1 << 40) + 1));
    }

    #[test]
    fn moments_follow_the_fan_in_and_norms_centre_on_one() {
        for (shape, mean, std) in [
            (vec![4096usize, 512], 0.0f32, linear_std(512)),
            (vec![2048], 1.0, NORM_STD),
        ] {
            let s = TensorStream::new(11, "x", &shape);
            let n = 200_000u64;
            let v: Vec<f64> = (0..n).map(|i| s.value(i).to_f32() as f64).collect();
            let m = v.iter().sum::<f64>() / n as f64;
            let sd = (v.iter().map(|x| (x - m).powi(2)).sum::<f64>() / n as f64).sqrt();
            assert!(
                (m - mean as f64).abs() < 4.0 * std as f64 / (n as f64).sqrt() + 1e-3,
                "mean {m}"
            );
            assert!((sd / std as f64 - 1.0).abs() < 0.01, "std {sd} vs {std}");
            // 3.46 std, plus bf16 rounding.
            let bound = 3.6 * std as f64;
            assert!(
                v.iter().all(|x| (x - mean as f64).abs() <= bound),
                "tails beyond {bound}"
            );
        }
    }
}
