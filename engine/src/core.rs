//! `EngineCore`: one engine = scheduler + KV-cache manager + model runner.
//!
//! Contract: configuration is fixed at construction; events come in through
//! `add_request` (which refuses prompt ids outside the runner's vocabulary,
//! `ModelRunner::vocab_size`) / `abort`; `step()` schedules one batch, runs it, updates the
//! requests and reports everything that happened in a [`StepOutcome`]
//! (defined with the scheduler's other outputs in `scheduler::output`, and
//! re-exported here and at the crate root).
//! No clock is read here: the caller (sim's event loop) owns time.
//! If the runner fails, `step()` returns its error with the step's blocks
//! allocated but no tokens advanced; the engine should then be dropped.

use crate::config::{ConfigError, EngineConfig};
use crate::kv_cache::{BlockId, KvCacheManager};
use crate::request::{Request, RequestError, RequestId, RequestStatus};
use crate::runner::{ModelRunner, RunnerError, ScheduledSeq};
use crate::scheduler::Scheduler;
/// Re-exported from the scheduler, which produces it.
pub use crate::scheduler::StepOutcome;
use thiserror::Error;

#[derive(Debug, Error)]
pub enum EngineError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error(transparent)]
    Runner(#[from] RunnerError),
}

/// One serving engine: a [`Scheduler`] with its KV cache, and a runner.
pub struct EngineCore<R: ModelRunner> {
    config: EngineConfig,
    runner: R,
    scheduler: Scheduler,
    /// Allocation reused by every step's `ScheduledBatch::seqs`.
    seq_buffer: Vec<ScheduledSeq<'static>>,
}

/// Reuses a vector's allocation for another lifetime of the same element type
/// (the in-place `collect` keeps the buffer since the layouts are identical).
// `filter_map` is what changes the lifetime; `filter` could not.
#[allow(clippy::unnecessary_filter_map)]
fn recycle<'a, 'b>(mut seqs: Vec<ScheduledSeq<'a>>) -> Vec<ScheduledSeq<'b>> {
    seqs.clear();
    seqs.into_iter().filter_map(|_| None).collect()
}

impl<R: ModelRunner> EngineCore<R> {
    /// Builds an engine; the KV pool has `config.num_gpu_blocks` blocks if set,
    /// else `runner.num_kv_blocks()`.
    pub fn new(config: EngineConfig, runner: R) -> Result<Self, EngineError> {
        config.validate()?;
        let num_blocks = config
            .num_gpu_blocks
            .unwrap_or_else(|| runner.num_kv_blocks());
        config.validate_num_blocks(num_blocks)?;
        Ok(Self {
            scheduler: Scheduler::new(config.clone(), num_blocks),
            config,
            runner,
            seq_buffer: Vec::new(),
        })
    }

    /// Queues a request; rejects one that can never run (empty prompt,
    /// `max_tokens` 0, prompt + `max_tokens` > `max_model_len`, a prompt
    /// token id outside the runner's vocabulary, an id that an unfinished
    /// request already has).
    pub fn add_request(&mut self, request: Request) -> Result<(), RequestError> {
        self.check_vocab(&request, &[])?;
        self.scheduler.add_request(request)
    }

    /// [`add_request`](Self::add_request) with the prompt's block hashes
    /// computed elsewhere (a router's cache lookup), used when they follow
    /// this engine's hashing rule; the run is the same, only faster.
    pub fn add_request_hashed(
        &mut self,
        request: Request,
        hashes: &crate::kv_cache::PromptHashes,
    ) -> Result<(), RequestError> {
        self.check_vocab(&request, &[])?;
        self.scheduler.add_request_hashed(request, hashes)
    }

    /// Queues a request prefilled on another engine, whose K/V for the
    /// prompt and for all of `outputs` (tokens sampled there) but the last
    /// arrives with it: the decode side of prefill/decode disaggregation
    /// (vLLM's `do_remote_prefill`; rules in `scheduler::remote`). Refuses
    /// what [`add_request`](Self::add_request) refuses, and `outputs` that
    /// already finish the request.
    pub fn add_remote_prefilled(
        &mut self,
        request: Request,
        outputs: &[u32],
    ) -> Result<(), RequestError> {
        self.check_vocab(&request, outputs)?;
        self.scheduler.add_remote_prefilled(request, outputs)
    }

    /// An id past the embedding table would be read out of bounds by a real
    /// runner (or fail deep inside a step); refused up front. `position`
    /// counts the prompt, then `outputs`.
    fn check_vocab(&self, request: &Request, outputs: &[u32]) -> Result<(), RequestError> {
        let Some(vocab) = self.runner.vocab_size() else {
            return Ok(());
        };
        let tokens = request.prompt_token_ids.iter().chain(outputs);
        match tokens.enumerate().find(|(_, &t)| t as usize >= vocab) {
            Some((position, &token)) => Err(RequestError::TokenOutOfVocab {
                id: request.id,
                position,
                token,
                vocab,
            }),
            None => Ok(()),
        }
    }

    /// Frees everything the request holds; `Unknown` if it is not unfinished.
    pub fn abort(&mut self, id: RequestId) -> Result<(), RequestError> {
        self.scheduler.abort(id)
    }

    /// Schedules one batch, runs it and applies the sampled tokens.
    pub fn step(&mut self) -> Result<StepOutcome, EngineError> {
        let mut outcome = StepOutcome::default();
        let plan = self.scheduler.schedule();
        outcome.preempted.extend_from_slice(&plan.preempted);
        outcome.admitted.extend_from_slice(&plan.admitted);
        outcome.readmitted.extend_from_slice(&plan.readmitted);
        if !plan.seqs.is_empty() {
            let batch = self
                .scheduler
                .batch(recycle(std::mem::take(&mut self.seq_buffer)));
            outcome.shape = batch.shape();
            let result = self.runner.execute(&batch);
            self.seq_buffer = recycle(batch.seqs);
            let output = result?;
            outcome.modeled_seconds = output.modeled_seconds;
            self.scheduler.update(&output.sampled, &mut outcome)?;
        }
        outcome.kv_blocks_used = self.scheduler.kv_cache().num_used_blocks();
        Ok(outcome)
    }

    pub fn has_unfinished(&self) -> bool {
        self.scheduler.num_unfinished() > 0
    }
    pub fn num_running(&self) -> usize {
        self.scheduler.num_running()
    }
    pub fn num_waiting(&self) -> usize {
        self.scheduler.num_waiting()
    }
    /// Prefix-cache counters: (queried prompt tokens, hit tokens).
    pub fn prefix_cache_stats(&self) -> (u64, u64) {
        self.scheduler.kv_cache().stats()
    }
    pub fn config(&self) -> &EngineConfig {
        &self.config
    }
    pub fn runner(&self) -> &R {
        &self.runner
    }
    pub fn runner_mut(&mut self) -> &mut R {
        &mut self.runner
    }

    // Read-only introspection, for tests, records and experiments.

    /// The KV-cache manager (block pool, reference counts, counters).
    pub fn kv_cache(&self) -> &KvCacheManager {
        self.scheduler.kv_cache()
    }
    /// Blocks not held by any request (null block excluded).
    pub fn num_free_blocks(&self) -> usize {
        self.scheduler.kv_cache().num_free_blocks()
    }
    /// Block table of an unfinished request (empty while it waits).
    pub fn block_table(&self, id: RequestId) -> Option<&[BlockId]> {
        Some(self.scheduler.request(id)?.blocks.table())
    }
    /// Prompt followed by the outputs so far, of an unfinished request.
    pub fn request_tokens(&self, id: RequestId) -> Option<&[u32]> {
        Some(&self.scheduler.request(id)?.tokens)
    }
    /// Tokens of an unfinished request whose K/V is in its blocks.
    pub fn num_computed_tokens(&self, id: RequestId) -> Option<usize> {
        Some(self.scheduler.request(id)?.num_computed_tokens)
    }
    /// Status of an unfinished request (finished requests are forgotten).
    pub fn request_status(&self, id: RequestId) -> Option<RequestStatus> {
        Some(self.scheduler.request(id)?.status)
    }
    /// Times an unfinished request was preempted.
    pub fn num_preemptions(&self, id: RequestId) -> Option<u32> {
        Some(self.scheduler.request(id)?.num_preemptions)
    }
    /// Running requests in admission order (the order preemption reverses).
    pub fn running_ids(&self) -> impl Iterator<Item = RequestId> + '_ {
        self.scheduler.running_ids()
    }
    /// Waiting requests, front of the queue first.
    pub fn waiting_ids(&self) -> impl Iterator<Item = RequestId> + '_ {
        self.scheduler.waiting_ids()
    }
    /// Forgets every cached block hash; refused (false) while any block is
    /// held, as in vLLM.
    pub fn reset_prefix_cache(&mut self) -> bool {
        self.scheduler.kv_cache_mut().reset_prefix_cache()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn step_outcome_keeps_its_public_paths() {
        // One type under the scheduler's output module, the core and the crate root.
        let planned: crate::scheduler::output::StepOutcome = StepOutcome::default();
        let root: crate::StepOutcome = planned;
        let _: crate::scheduler::StepOutcome = root;
    }

    #[test]
    fn recycled_batch_buffer_keeps_its_allocation() {
        let seqs: Vec<ScheduledSeq<'static>> = Vec::with_capacity(64);
        assert!(recycle(seqs).capacity() >= 64);
    }
}
