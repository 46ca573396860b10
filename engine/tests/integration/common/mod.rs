//! Helpers shared by the engine's integration tests.
#![allow(dead_code)]

use engine::runner::{ModelRunner, RunnerError, RunnerOutput, ScheduledBatch};
use engine::testing::FixedTokenRunner;
use engine::{EngineConfig, EngineCore, Request, RequestId, StepOutcome};

pub const VOCAB: u32 = 50_000;

/// One sequence of the last batch, as the runner saw it.
#[derive(Debug, Clone, PartialEq)]
pub struct SeqRecord {
    pub id: RequestId,
    pub start_pos: usize,
    pub num_tokens: usize,
    pub samples: bool,
    pub block_table: Vec<u32>,
}

/// [`FixedTokenRunner`] that also keeps the last batch it executed.
pub struct RecordingRunner {
    pub inner: FixedTokenRunner,
    pub last: Vec<SeqRecord>,
}

impl ModelRunner for RecordingRunner {
    fn num_kv_blocks(&self) -> usize {
        self.inner.num_kv_blocks()
    }
    fn execute(&mut self, batch: &ScheduledBatch<'_>) -> Result<RunnerOutput, RunnerError> {
        self.last = batch
            .seqs
            .iter()
            .map(|s| SeqRecord {
                id: s.request_id,
                start_pos: s.start_pos,
                num_tokens: s.token_ids.len(),
                samples: s.samples,
                block_table: s.block_table.to_vec(),
            })
            .collect();
        self.inner.execute(batch)
    }
}

pub type Engine = EngineCore<RecordingRunner>;

/// A small configuration: block size 4, `max_model_len` 64, 63 usable blocks.
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

pub fn engine(config: EngineConfig) -> Engine {
    let blocks = config.num_gpu_blocks.unwrap_or(64);
    let runner = RecordingRunner {
        inner: FixedTokenRunner::new(blocks, VOCAB),
        last: Vec::new(),
    };
    EngineCore::new(config, runner).expect("valid config")
}

/// `len` consecutive prompt tokens starting at `first`.
pub fn prompt(first: u32, len: usize) -> Vec<u32> {
    (first..first + len as u32).collect()
}

pub fn req(id: u64, prompt: Vec<u32>, max_tokens: usize) -> Request {
    Request::new(id, prompt, max_tokens)
}

pub fn id(n: u64) -> RequestId {
    RequestId(n)
}

/// Steps until no request is unfinished, failing after `limit` steps.
pub fn run_to_idle(engine: &mut Engine, limit: usize) -> Vec<StepOutcome> {
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

/// The last batch's share of request `n`, if it was scheduled.
pub fn scheduled(engine: &Engine, n: u64) -> Option<SeqRecord> {
    engine.runner().last.iter().find(|s| s.id == id(n)).cloned()
}

/// Tokens the last batch computed for request `n` (0 if not scheduled).
pub fn tokens_of(engine: &Engine, n: u64) -> usize {
    scheduled(engine, n).map_or(0, |s| s.num_tokens)
}

pub fn outputs_of(outcomes: &[StepOutcome], n: u64) -> Vec<u32> {
    outcomes
        .iter()
        .flat_map(|o| &o.tokens)
        .filter(|(r, _)| *r == id(n))
        .map(|t| t.1)
        .collect()
}

pub fn waiting(engine: &Engine) -> Vec<u64> {
    engine.waiting_ids().map(|r| r.0).collect()
}

pub fn running(engine: &Engine) -> Vec<u64> {
    engine.running_ids().map(|r| r.0).collect()
}
