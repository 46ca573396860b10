//! The CPU runner against Hugging Face transformers: a small random Qwen3
//! saved by `scripts/hf_reference.py` (see tests/data/hf_qwen3_tiny/README.md),
//! loaded with the engine's own config and safetensors loaders, reproduces
//! transformers' greedy tokens and logits.

use crate::cpu_runner_support;

use cpu_runner_support::{max_abs_diff, runner, step, Part, Seq};
use engine::model::{Qwen3Config, Qwen3Weights};
use serde::Deserialize;
use std::path::Path;

#[derive(Deserialize)]
struct Reference {
    prompts: Vec<Vec<u32>>,
    generated: Vec<Vec<u32>>,
    /// `[prompt][step][vocab]`.
    logits: Vec<Vec<Vec<f32>>>,
}

/// Both in float32 with identical weights; measured max difference about 2.5e-6.
const TOLERANCE: f32 = 1e-4;

#[test]
fn matches_transformers_greedy_tokens_and_logits() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/hf_qwen3_tiny");
    let config = Qwen3Config::from_json_file(&dir).unwrap();
    let weights = Qwen3Weights::load(&dir, &config).unwrap();
    let text = std::fs::read_to_string(dir.join("reference.json")).unwrap();
    let reference: Reference = serde_json::from_str(&text).unwrap();
    assert!(!reference.prompts.is_empty());

    for (i, prompt) in reference.prompts.iter().enumerate() {
        let (hf_tokens, hf_logits) = (&reference.generated[i], &reference.logits[i]);
        let mut r = runner(&config, &weights);
        let mut seqs = [Seq::new(1, prompt.clone(), (1..=4).collect())];
        // Greedy, free-running: the prompt in one step, then one token a step.
        let mut count = prompt.len();
        for (s, want) in hf_logits.iter().enumerate() {
            let (_, logits) = step(&mut r, &mut seqs, &[Part { seq: 0, count }]);
            let diff = max_abs_diff(&logits[0], want);
            assert!(
                diff < TOLERANCE,
                "prompt {i} step {s}: max abs logit diff {diff}"
            );
            count = 1;
        }
        assert_eq!(
            &seqs[0].tokens[prompt.len()..],
            hf_tokens.as_slice(),
            "prompt {i}"
        );
    }
}
