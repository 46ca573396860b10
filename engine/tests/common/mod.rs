//! Helpers shared by the engine's integration tests.
#![allow(dead_code)]

use engine::testing::FixedTokenRunner;
use engine::{EngineConfig, EngineCore, Request, RequestId, StepOutcome};

pub const VOCAB: u32 = 50_000;

/// A small configuration: block size 4, `max_model_len` 64.
pub fn small_config() -> EngineConfig {
    EngineConfig {
        max_num_seqs: 8,
        max_num_batched_tokens: 64,
        max_model_len: 64,
        block_size: 4,
        num_gpu_blocks: Some(64),
        ..EngineConfig::default()
    }
}

pub fn engine(config: EngineConfig) -> EngineCore<FixedTokenRunner> {
    let blocks = config.num_gpu_blocks.unwrap_or(64);
    EngineCore::new(config, FixedTokenRunner::new(blocks, VOCAB)).expect("valid config")
}

/// `len` prompt tokens starting at `first`, consecutive.
pub fn prompt(first: u32, len: usize) -> Vec<u32> {
    (first..first + len as u32).collect()
}

pub fn req(id: u64, prompt: Vec<u32>, max_tokens: usize) -> Request {
    Request::new(id, prompt, max_tokens)
}

/// Tokens scheduled for `id` in the step (0 if not scheduled), from the shape
/// and the running order.
pub fn steps_until_idle(
    engine: &mut EngineCore<FixedTokenRunner>,
    limit: usize,
) -> Vec<StepOutcome> {
    let mut outcomes = Vec::new();
    while engine.has_unfinished() {
        assert!(
            outcomes.len() < limit,
            "engine did not finish within {limit} steps"
        );
        outcomes.push(engine.step().expect("step"));
    }
    outcomes
}

pub fn id(n: u64) -> RequestId {
    RequestId(n)
}
