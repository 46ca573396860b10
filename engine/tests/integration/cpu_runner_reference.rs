//! The CPU runner computes Qwen3: its logits at every position match a naive
//! plain-loop implementation (f64 accumulation, no paging).

use crate::cpu_runner_support;

use cpu_runner_support::{max_abs_diff, naive, random_tokens, runner, step, Part, Seq};
use engine::model::{Qwen3Config, Qwen3Weights};

/// f32 compute against an f64-accumulated reference, logits of std about 0.6:
/// measured about 1.2e-6, so 2e-5 leaves room for summation-order changes.
const TOLERANCE: f32 = 2e-5;

fn check_against_naive(config: &Qwen3Config, seed: u64) {
    let weights = Qwen3Weights::synthetic(config, seed);
    let prompt = random_tokens(seed, 40, config.vocab_size);
    let expected = naive::logits(config, &weights, &prompt);

    // One token per step, each sampling, gives the logits at every position;
    // the prompt's tokens are fed instead of the sampled ones.
    let mut r = runner(config, &weights);
    let mut seqs = [Seq::new(1, prompt[..1].to_vec(), (1..4).collect())];
    let mut worst = 0.0f32;
    for (pos, want) in expected.iter().enumerate() {
        let (_, logits) = step(&mut r, &mut seqs, &[Part { seq: 0, count: 1 }]);
        worst = worst.max(max_abs_diff(&logits[0], want));
        if let Some(&next) = prompt.get(pos + 1) {
            *seqs[0].tokens.last_mut().unwrap() = next;
        }
    }
    eprintln!("max abs logit diff against the naive reference: {worst}");
    assert!(
        worst < TOLERANCE,
        "max abs logit diff {worst} against the naive reference"
    );

    // The same prompt in one step: last position again.
    let mut r = runner(config, &weights);
    let mut seqs = [Seq::new(1, prompt.clone(), (1..4).collect())];
    let (_, logits) = step(
        &mut r,
        &mut seqs,
        &[Part {
            seq: 0,
            count: prompt.len(),
        }],
    );
    let diff = max_abs_diff(&logits[0], expected.last().unwrap());
    assert!(
        diff < TOLERANCE,
        "one-step prefill: max abs logit diff {diff}"
    );
}

#[test]
fn tiny_preset_matches_naive_reference() {
    check_against_naive(&Qwen3Config::tiny(), 11);
}

#[test]
fn untied_wider_gqa_matches_naive_reference() {
    let config = Qwen3Config {
        num_hidden_layers: 3,
        num_attention_heads: 8,
        num_key_value_heads: 2,
        head_dim: 16,
        rope_theta: 1_000_000.0,
        tie_word_embeddings: false,
        ..Qwen3Config::tiny()
    };
    check_against_naive(&config, 12);
}
