//! `EngineCore`: one engine = scheduler + KV-cache manager + model runner.
//!
//! Contract: configuration is fixed at construction; events come in through
//! `add_request` / `abort`; `step()` schedules one batch, runs it, updates the
//! requests and reports everything that happened in a [`StepOutcome`].
//! No clock is read here: the caller (sim's event loop) owns time.

use crate::config::{ConfigError, EngineConfig};
use crate::request::{FinishReason, Request, RequestError, RequestId};
use crate::runner::{BatchShape, ModelRunner, RunnerError};
use thiserror::Error;

#[derive(Debug, Error)]
pub enum EngineError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error(transparent)]
    Runner(#[from] RunnerError),
}

/// Everything one step did.
#[derive(Debug, Clone, Default)]
pub struct StepOutcome {
    /// The scheduled batch's composition (empty when nothing was scheduled).
    pub shape: BatchShape,
    /// Every output token produced this step, first tokens included.
    pub tokens: Vec<(RequestId, u32)>,
    /// Requests whose first output token was produced this step.
    pub first_tokens: Vec<RequestId>,
    pub finished: Vec<(RequestId, FinishReason)>,
    pub preempted: Vec<RequestId>,
    /// Requests admitted from the waiting queue this step, with the prompt
    /// tokens they found in the prefix cache.
    pub admitted: Vec<(RequestId, usize)>,
    /// KV blocks held by requests after the step (null block excluded).
    pub kv_blocks_used: usize,
    /// Step time predicted by the runner's cost model (simulated runner only).
    pub modeled_seconds: Option<f64>,
}

pub struct EngineCore<R: ModelRunner> {
    _config: EngineConfig,
    _runner: R,
}

impl<R: ModelRunner> EngineCore<R> {
    /// Builds an engine; the KV pool has `config.num_gpu_blocks` blocks if set,
    /// else `runner.num_kv_blocks()`.
    pub fn new(_config: EngineConfig, _runner: R) -> Result<Self, EngineError> {
        todo!("issue 2")
    }
    pub fn add_request(&mut self, _request: Request) -> Result<(), RequestError> {
        todo!("issue 2")
    }
    /// Frees everything the request holds; `Unknown` if it is not unfinished.
    pub fn abort(&mut self, _id: RequestId) -> Result<(), RequestError> {
        todo!("issue 2")
    }
    pub fn step(&mut self) -> Result<StepOutcome, EngineError> {
        todo!("issue 2")
    }
    pub fn has_unfinished(&self) -> bool {
        todo!("issue 2")
    }
    pub fn num_running(&self) -> usize {
        todo!("issue 2")
    }
    pub fn num_waiting(&self) -> usize {
        todo!("issue 2")
    }
    /// Prefix-cache counters: (queried prompt tokens, hit tokens).
    pub fn prefix_cache_stats(&self) -> (u64, u64) {
        todo!("issue 2")
    }
    pub fn config(&self) -> &EngineConfig {
        &self._config
    }
    pub fn runner(&self) -> &R {
        &self._runner
    }
    pub fn runner_mut(&mut self) -> &mut R {
        &mut self._runner
    }
}
