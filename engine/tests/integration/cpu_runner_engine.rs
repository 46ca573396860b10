//! The CPU runner under the real scheduler: whatever batches `EngineCore`
//! builds (chunked prefills, mixed batches, prefix-cache hits, preemptions
//! with recompute), every request's greedy output equals the output of that
//! request run alone, step by step, straight on a runner.

use crate::cpu_runner_support;

use cpu_runner_support::{prefill_in_chunks, random_tokens, runner, step, Part, Seq};
use engine::model::{Qwen3Config, Qwen3Weights};
use engine::runner::cpu::CpuRunner;
use engine::{EngineConfig, EngineCore, Request, RequestId};
use std::collections::HashMap;

const OUTPUT_TOKENS: usize = 10;

fn prompts(config: &Qwen3Config) -> Vec<Vec<u32>> {
    let shared = random_tokens(100, 40, config.vocab_size);
    (0..6u64)
        .map(|i| {
            let tail = random_tokens(200 + i, 15 + 9 * i as usize, config.vocab_size);
            if i % 2 == 0 {
                shared.iter().chain(&tail).copied().collect()
            } else {
                tail
            }
        })
        .collect()
}

/// Greedy output of `prompt` alone, without the scheduler.
fn alone(config: &Qwen3Config, weights: &Qwen3Weights, prompt: &[u32]) -> Vec<u32> {
    let mut r = runner(config, weights);
    let mut seq = Seq::new(1, prompt.to_vec(), (1..=8).collect());
    prefill_in_chunks(&mut r, &mut seq, prompt.len());
    let mut seqs = [seq];
    for _ in 1..OUTPUT_TOKENS {
        step(&mut r, &mut seqs, &[Part { seq: 0, count: 1 }]);
    }
    seqs[0].tokens[prompt.len()..].to_vec()
}

fn served(
    config: &Qwen3Config,
    weights: &Qwen3Weights,
    engine_config: EngineConfig,
    num_kv_blocks: usize,
    prompts: &[Vec<u32>],
) -> Served {
    let cpu = CpuRunner::new(
        config.clone(),
        weights,
        num_kv_blocks,
        engine_config.block_size,
    )
    .unwrap();
    let mut engine = EngineCore::new(engine_config, cpu).unwrap();
    for (i, p) in prompts.iter().enumerate() {
        let mut request = Request::new(i as u64, p.clone(), OUTPUT_TOKENS);
        request.ignore_eos = true;
        engine.add_request(request).unwrap();
    }
    let mut outputs: HashMap<RequestId, Vec<u32>> = HashMap::new();
    let (mut preemptions, mut mixed_steps) = (0, 0);
    while engine.has_unfinished() {
        let outcome = engine.step().unwrap();
        preemptions += outcome.preempted.len();
        if outcome.shape.num_decodes() > 0 && outcome.shape.num_prefills() > 0 {
            mixed_steps += 1;
        }
        for (id, token) in outcome.tokens {
            outputs.entry(id).or_default().push(token);
        }
    }
    let (_, prefix_hit_tokens) = engine.prefix_cache_stats();
    Served {
        outputs,
        preemptions,
        mixed_steps,
        prefix_hit_tokens,
    }
}

struct Served {
    outputs: HashMap<RequestId, Vec<u32>>,
    preemptions: usize,
    mixed_steps: usize,
    prefix_hit_tokens: u64,
}

#[test]
fn engine_outputs_equal_each_request_run_alone() {
    let config = Qwen3Config::tiny();
    let weights = Qwen3Weights::synthetic(&config, 3);
    let prompts = prompts(&config);
    let expected: Vec<Vec<u32>> = prompts
        .iter()
        .map(|p| alone(&config, &weights, p))
        .collect();

    let base = EngineConfig {
        max_model_len: 128,
        max_num_batched_tokens: 32,
        max_num_seqs: 4,
        ..EngineConfig::default()
    };
    let cases = [
        ("chunked, prefix caching", base.clone(), 64),
        (
            "no prefix caching",
            EngineConfig {
                enable_prefix_caching: false,
                ..base.clone()
            },
            64,
        ),
        ("few KV blocks: preemptions", base.clone(), 12),
    ];
    for (name, engine_config, blocks) in cases {
        let caching = engine_config.enable_prefix_caching;
        let s = served(&config, &weights, engine_config, blocks, &prompts);
        for (i, want) in expected.iter().enumerate() {
            assert_eq!(
                s.outputs.get(&RequestId(i as u64)),
                Some(want),
                "{name}: request {i}"
            );
        }
        eprintln!(
            "{name}: {} preemptions, {} mixed steps, {} prefix-hit tokens",
            s.preemptions, s.mixed_steps, s.prefix_hit_tokens
        );
        // The cases must exercise what they are named after.
        assert!(s.mixed_steps > 0, "{name}: no mixed batch");
        assert_eq!(s.prefix_hit_tokens > 0, caching, "{name}: prefix hits");
        if blocks == 12 {
            assert!(s.preemptions > 0, "{name}: no preemption");
        }
    }
}
