//! The cost terms a calibrated profile is linear in.
//!
//! Contract: a step's predicted time is `features(shape) · coefficients`, with
//! every coefficient a time (seconds per unit of its feature) and never
//! negative. Terms:
//! - a constant per step, one for decode-only steps (replayed from a CUDA
//!   graph) and one for every other step (launched eagerly);
//! - the dense part (all linear layers, norms, activations) as a piecewise-
//!   linear curve in the step's token count, one coefficient per knot (hat
//!   basis), because GEMM time is flat while memory bound and then grows with
//!   tokens in steps that no single line fits;
//! - the LM head as a piecewise-linear curve in the number of sampled
//!   sequences (it runs only for those);
//! - attention: KV tokens read by decodes, query-key pairs computed by prefill
//!   chunks, and a per-sequence cost for each kind. A short chunk over a
//!   cached context (one attention tile of tokens, [`tile_tokens`]) runs on
//!   the decode path, one entry per token, as the CUDA runner runs it
//!   ([`engine::short_chunk_on_decode_path`]), but the keys its entries read
//!   have a coefficient of their own: they are read in an eager step, whose
//!   splits follow the context, and all of them are one sequence's keys,
//!   where a decode graph's splits follow its batch size alone. On the H200
//!   16 → 32 tokens over 3,000 cached add 1.20 ms, 25 ns a key, where decode
//!   batches take 26–37 ns a key (results/h200/calibration_samples.csv);
//!   with one coefficient for both a 32-token chunk over 3,200 cached, a
//!   warm prefix_cache request, was priced 13–17 % over the engine;
//! - the keys the longest prefill chunk reads (its context plus its new
//!   tokens): a short chunk over a long cached context has few query tiles to
//!   spread over the GPU, so its cost follows the keys it walks, not its FLOPs
//!   (measured on the H200: 32 tokens over 3,200 cached took 5.5 ms where the
//!   pairs term alone predicted 2.9 ms). Several chunks in one step run side
//!   by side, so the step pays for the longest walk, not their sum (8 chunks
//!   of 255 tokens + 8 decodes: 5.6 ms real, 8.1 ms with the sum).

use engine::{attention_tile_tokens, short_chunk_on_decode_path, BatchShape, SeqShape};
use sim::ModelShape;

/// Token counts at which the dense curve has a knot.
pub const DENSE_KNOTS: [f64; 15] = [
    1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0, 1024.0, 2048.0, 4096.0, 8192.0,
    16384.0,
];
/// Sampled-sequence counts at which the LM-head curve has a knot.
pub const LM_KNOTS: [f64; 8] = [1.0, 4.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0];

pub const NUM_FEATURES: usize = 2 + DENSE_KNOTS.len() + LM_KNOTS.len() + 6;

/// Index of the first dense knot coefficient.
pub const DENSE_START: usize = 2;
pub const LM_START: usize = DENSE_START + DENSE_KNOTS.len();
pub const DECODE_KV: usize = LM_START + LM_KNOTS.len();
pub const DECODE_SEQ: usize = DECODE_KV + 1;
pub const PREFILL_PAIRS: usize = DECODE_KV + 2;
pub const PREFILL_SEQ: usize = DECODE_KV + 3;
pub const PREFILL_KEYS: usize = DECODE_KV + 4;
/// Keys read by short chunks over a cached context (on the decode path).
pub const CHUNK_KV: usize = DECODE_KV + 5;

/// Adds the hat-basis weights of `x` over `knots` into `out` (linear
/// interpolation inside, linear extrapolation from the last segment above, and
/// 0 for x = 0).
fn hat_weights(x: f64, knots: &[f64], out: &mut [f64]) {
    if x <= 0.0 {
        return;
    }
    let n = knots.len();
    if x <= knots[0] {
        // Scale the first knot's value down toward zero work.
        out[0] += x / knots[0];
        return;
    }
    let seg = knots.windows(2).position(|w| x <= w[1]).unwrap_or(n - 2);
    let (a, b) = (knots[seg], knots[seg + 1]);
    let t = (x - a) / (b - a);
    out[seg] += 1.0 - t;
    out[seg + 1] += t;
}

/// New tokens in one prefill attention tile of the CUDA runner for `model`.
pub fn tile_tokens(model: &ModelShape) -> usize {
    attention_tile_tokens(model.num_q_heads, model.num_kv_heads)
}

/// Whether the CUDA runner computes `s` on its decode path: a decode, or a
/// short chunk over cached context ([`short_chunk_on_decode_path`]).
pub fn on_decode_path(s: &SeqShape, tile: usize) -> bool {
    s.is_decode()
        || short_chunk_on_decode_path(s.context_before as usize, s.new_tokens as usize, tile)
}

/// Keys the decode path reads for `s`: token j reads the context and the
/// j + 1 new keys up to itself.
pub fn decode_keys_read(s: &SeqShape) -> f64 {
    let (ctx, new) = (s.context_before as f64, s.new_tokens as f64);
    new * ctx + new * (new + 1.0) / 2.0
}

/// Query-key pairs of a prefill chunk under a causal mask: each new token
/// sees the context and the new tokens before it.
pub fn causal_pairs(s: &SeqShape) -> f64 {
    let (ctx, new) = (s.context_before as f64, s.new_tokens as f64);
    new * (ctx + (new + 1.0) / 2.0)
}

/// The feature vector of one step of `model`.
pub fn features(shape: &BatchShape, model: &ModelShape) -> [f64; NUM_FEATURES] {
    let mut f = [0.0; NUM_FEATURES];
    if shape.seqs.is_empty() {
        return f;
    }
    let counts = shape.counts();
    if counts.is_decode_only() {
        f[0] = 1.0;
    } else {
        f[1] = 1.0;
    }
    hat_weights(
        counts.tokens as f64,
        &DENSE_KNOTS,
        &mut f[DENSE_START..LM_START],
    );
    hat_weights(
        counts.sampled as f64,
        &LM_KNOTS,
        &mut f[LM_START..DECODE_KV],
    );
    let tile = tile_tokens(model);
    for s in &shape.seqs {
        if on_decode_path(s, tile) {
            let keys = if s.is_decode() { DECODE_KV } else { CHUNK_KV };
            f[keys] += decode_keys_read(s);
            f[DECODE_SEQ] += s.new_tokens as f64;
        } else {
            f[PREFILL_PAIRS] += causal_pairs(s);
            f[PREFILL_SEQ] += 1.0;
            f[PREFILL_KEYS] = f[PREFILL_KEYS].max(s.context_before as f64 + s.new_tokens as f64);
        }
    }
    f
}

#[cfg(test)]
mod tests {
    use super::*;

    fn qwen3() -> ModelShape {
        ModelShape::qwen3_0_6b()
    }

    fn decode(ctx: u32) -> SeqShape {
        SeqShape {
            new_tokens: 1,
            context_before: ctx,
            samples: true,
        }
    }

    #[test]
    fn hat_weights_interpolate_and_sum_to_one_inside() {
        let mut w = [0.0; 3];
        hat_weights(3.0, &[2.0, 4.0, 8.0], &mut w);
        assert_eq!(w, [0.5, 0.5, 0.0]);
        let mut w = [0.0; 3];
        hat_weights(16.0, &[2.0, 4.0, 8.0], &mut w);
        // Extrapolates the last segment: value(16) = value(8) + 2 * (value(8) - value(4)).
        assert_eq!(w, [0.0, -2.0, 3.0]);
    }

    #[test]
    fn decode_batch_features() {
        let shape = BatchShape {
            seqs: vec![decode(99), decode(199)],
        };
        let f = features(&shape, &qwen3());
        assert_eq!(f[0], 1.0);
        assert_eq!(f[1], 0.0);
        assert_eq!(f[DENSE_START + 1], 1.0); // 2 tokens: knot 2
        assert_eq!(f[DECODE_KV], 300.0);
        assert_eq!(f[DECODE_SEQ], 2.0);
        assert_eq!(f[PREFILL_SEQ], 0.0);
    }

    #[test]
    fn several_prefill_chunks_pay_for_the_longest_key_walk() {
        let chunk = |new: u32, ctx: u32| SeqShape {
            new_tokens: new,
            context_before: ctx,
            samples: false,
        };
        let f = features(
            &BatchShape {
                seqs: vec![chunk(255, 0), chunk(40, 3000), chunk(255, 0), decode(10)],
            },
            &qwen3(),
        );
        assert_eq!(f[PREFILL_KEYS], 3040.0);
        assert_eq!(f[PREFILL_SEQ], 3.0);
        assert_eq!(
            f[PREFILL_PAIRS],
            2.0 * 255.0 * 128.0 + 40.0 * (3000.0 + 20.5)
        );
    }

    #[test]
    fn a_short_chunk_over_cached_context_runs_as_decodes_with_keys_of_its_own() {
        // Qwen3-0.6B: 16 query heads over 8 KV heads, 32 tokens a tile.
        assert_eq!(tile_tokens(&qwen3()), 32);
        let chunk = |new: u32, ctx: u32| SeqShape {
            new_tokens: new,
            context_before: ctx,
            samples: true,
        };
        let f = features(
            &BatchShape {
                seqs: vec![chunk(32, 3000)],
            },
            &qwen3(),
        );
        assert_eq!(f[DECODE_SEQ], 32.0);
        assert_eq!(f[CHUNK_KV], 32.0 * 3000.0 + 32.0 * 33.0 / 2.0);
        assert_eq!(f[DECODE_KV], 0.0, "a decode's keys are another term");
        assert_eq!(
            (f[PREFILL_SEQ], f[PREFILL_PAIRS], f[PREFILL_KEYS]),
            (0.0, 0.0, 0.0)
        );
        assert_eq!(f[1], 1.0, "not a decode-only step: launched eagerly");
        // A fresh prompt of the same size stays a prefill chunk.
        let f = features(
            &BatchShape {
                seqs: vec![chunk(32, 0)],
            },
            &qwen3(),
        );
        assert_eq!((f[DECODE_SEQ], f[PREFILL_SEQ]), (0.0, 1.0));
    }

    #[test]
    fn prefill_chunk_counts_causal_pairs_and_no_lm_head_when_not_sampling() {
        let shape = BatchShape {
            seqs: vec![SeqShape {
                new_tokens: 40,
                context_before: 10,
                samples: false,
            }],
        };
        let f = features(&shape, &qwen3());
        assert_eq!(f[1], 1.0);
        assert_eq!(f[PREFILL_PAIRS], 40.0 * (10.0 + 20.5));
        assert!(f[LM_START..DECODE_KV].iter().all(|&x| x == 0.0));
    }

    #[test]
    fn empty_batch_costs_nothing() {
        assert!(features(&BatchShape::default(), &qwen3())
            .iter()
            .all(|&x| x == 0.0));
    }
}
