//! Seeded synthetic Qwen3 weights, generated on the host.
//!
//! Contract: `generate(config, seed)` is a pure function of its arguments: the
//! same values on every machine, thread count and backend (each tensor is cut
//! into fixed chunks of [`CHUNK`] values, and each chunk draws from its own
//! generator seeded from `(seed, tensor name, chunk index)`, so chunks are
//! generated in parallel without changing the result).
//!
//! Distribution (every value rounded to nearest bf16; never all zeros, since
//! GPUs run measurably faster on zeros):
//! - linear layers and the embedding, shape `[out, in]`: normal, mean 0,
//!   std `0.02 * sqrt(1024 / in)`. At Qwen3-0.6B's hidden size 1024 this is
//!   Hugging Face's `initializer_range` 0.02; scaling by the fan-in keeps a
//!   unit-RMS input giving outputs of std about 0.64 at any width, so
//!   activations stay in a sane range through all layers and tiny models
//!   still produce logits with a clear argmax. The embedding uses
//!   `in = hidden_size`, which is also right for the tied LM head.
//! - RMSNorm weights (`*_layernorm`, `q_norm`, `k_norm`, `model.norm`):
//!   normal, mean 1, std 0.05.

use super::config::Qwen3Config;
use super::weights::{HostTensor, Qwen3Weights};
use half::bf16;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use rand_distr::StandardNormal;
use rayon::prelude::*;
use std::convert::Infallible;

/// Values per independently seeded chunk.
pub const CHUNK: usize = 1 << 16;

/// Std of a linear layer's weights with `in_features` inputs.
pub fn linear_std(in_features: usize) -> f32 {
    0.02 * (1024.0 / in_features as f32).sqrt()
}

/// Std of the noise around 1.0 in RMSNorm weights.
pub const NORM_STD: f32 = 0.05;

pub fn generate(config: &Qwen3Config, seed: u64) -> Qwen3Weights {
    let result: Result<Qwen3Weights, Infallible> =
        Qwen3Weights::from_fn(config, |name, shape| Ok(tensor(seed, name, shape)));
    match result {
        Ok(weights) => weights,
        Err(never) => match never {},
    }
}

/// One tensor: a norm weight if one-dimensional, otherwise a linear layer.
fn tensor(seed: u64, name: &str, shape: &[usize]) -> HostTensor {
    let numel: usize = shape.iter().product();
    let (mean, std) = match shape {
        [_] => (1.0, NORM_STD),
        [.., in_features] => (0.0, linear_std(*in_features)),
        [] => (0.0, 0.0),
    };
    let name_seed = mix(seed ^ fnv1a(name.as_bytes()));
    let mut data = vec![bf16::ZERO; numel];
    data.par_chunks_mut(CHUNK)
        .enumerate()
        .for_each(|(chunk, out)| {
            let mut rng = SmallRng::seed_from_u64(mix(name_seed ^ mix(chunk as u64)));
            for v in out {
                let z: f32 = rng.sample(StandardNormal);
                *v = bf16::from_f32(mean + std * z);
            }
        });
    HostTensor {
        shape: shape.to_vec(),
        data,
    }
}

/// SplitMix64's finaliser: spreads nearby inputs over the whole range.
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ b as u64).wrapping_mul(0x0100_0000_01b3)
    })
}
