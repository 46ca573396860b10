//! vLLM v1 scheduling rules (docs/design.md, "What we match in vLLM v1").
//!
//! Contract: [`Scheduler::schedule`] picks one step's work under the token
//! budget `max_num_batched_tokens`, then [`Scheduler::update`] applies the
//! runner's sampled tokens. Pure logic: no clock, no I/O.
//!
//! - No prefill or decode phase: a request's `num_computed_tokens` catches up
//!   with its tokens (prompt + outputs so far).
//! - Running requests go first, in order; each takes
//!   `min(remaining, long_prefill_token_threshold if > 0, budget left)` tokens
//!   (never past `max_model_len`). If its blocks cannot be allocated, the last
//!   running request (most recently admitted) is preempted by recompute:
//!   blocks freed tail first, computed tokens reset to 0, pushed to the front
//!   of the waiting queue. Repeat until the allocation fits or the request
//!   preempted itself (then no further running request is served).
//! - Waiting requests are admitted only if nothing was preempted this step, in
//!   order, while fewer than `max_num_seqs` run and budget is left. A request
//!   with no computed tokens first looks up its cached prefix. With chunked
//!   prefill off, one that does not fit whole stops admission; one whose
//!   blocks cannot be allocated stops admission (head of line).
//! - A request prefilled on another engine ([`Scheduler::add_remote_prefilled`],
//!   vLLM's `do_remote_prefill`) is admitted like any waiting request, its
//!   local cache hits first, but every token before its last counts as
//!   computed: its blocks are allocated and only the last token is
//!   scheduled. A preemption later recomputes it like any other request.
//! - Full blocks enter the prefix cache at allocation, before the forward
//!   pass, so a request admitted later in the same step can hit them.
//! - Hit counters count prompt tokens of first admissions and their cached
//!   tokens; re-admissions of preempted requests are not counted.
//!
//! What it produces ([`StepPlan`], [`StepOutcome`]) lives in [`output`], which
//! depends on nothing above the scheduler.

pub mod output;
mod remote;
mod state;
mod update;

pub use output::{PlannedSeq, StepOutcome, StepPlan};
use state::RequestSlab;
pub use state::RequestState;

use crate::config::EngineConfig;
use crate::kv_cache::{BlockId, KvCacheManager, SeqBlocks};
use crate::request::{FinishReason, Request, RequestError, RequestId, RequestStatus};
use crate::runner::{ScheduledBatch, ScheduledSeq};
use std::collections::VecDeque;

/// The waiting and running queues, every unfinished request's state and the
/// KV-cache manager; `EngineCore` drives it once per step.
#[derive(Debug)]
pub struct Scheduler {
    config: EngineConfig,
    kv: KvCacheManager,
    requests: RequestSlab,
    /// Slots of running requests, in admission order.
    running: Vec<u32>,
    waiting: VecDeque<u32>,
    plan: StepPlan,
    hits: Vec<BlockId>,
    finished_slots: Vec<u32>,
}

impl Scheduler {
    /// `config` must have passed `validate()`; `num_blocks` includes the null block.
    pub fn new(config: EngineConfig, num_blocks: usize) -> Self {
        let kv = KvCacheManager::new(
            num_blocks,
            config.block_size,
            config.enable_prefix_caching,
            config.prefix_caching_hash_algo,
        );
        Self {
            config,
            kv,
            requests: RequestSlab::default(),
            running: Vec::new(),
            waiting: VecDeque::new(),
            plan: StepPlan::default(),
            hits: Vec::new(),
            finished_slots: Vec::new(),
        }
    }

    pub fn config(&self) -> &EngineConfig {
        &self.config
    }
    pub fn kv_cache(&self) -> &KvCacheManager {
        &self.kv
    }
    pub fn kv_cache_mut(&mut self) -> &mut KvCacheManager {
        &mut self.kv
    }
    /// The last [`schedule`](Self::schedule)'s decisions.
    pub fn plan(&self) -> &StepPlan {
        &self.plan
    }
    pub fn num_running(&self) -> usize {
        self.running.len()
    }
    pub fn num_waiting(&self) -> usize {
        self.waiting.len()
    }
    /// Unfinished requests (running or waiting).
    pub fn num_unfinished(&self) -> usize {
        self.requests.len()
    }
    /// Ids of running requests, in admission order.
    pub fn running_ids(&self) -> impl Iterator<Item = RequestId> + '_ {
        self.running.iter().map(|&s| self.requests.at(s).id)
    }
    /// Ids of waiting requests, front first.
    pub fn waiting_ids(&self) -> impl Iterator<Item = RequestId> + '_ {
        self.waiting.iter().map(|&s| self.requests.at(s).id)
    }
    /// State of an unfinished request.
    pub fn request(&self, id: RequestId) -> Option<&RequestState> {
        self.requests.by_id(id)
    }

    /// Queues a request, rejecting one that can never run.
    pub fn add_request(&mut self, request: Request) -> Result<(), RequestError> {
        self.queue_request(request).map(|_| ())
    }

    /// [`add_request`](Self::add_request) with the prompt's block hashes
    /// already computed; they are used only if they follow this engine's
    /// rule (hash algorithm and block size, prefix caching on) and fit the
    /// prompt, and are otherwise ignored.
    pub fn add_request_hashed(
        &mut self,
        request: Request,
        hashes: &crate::kv_cache::PromptHashes,
    ) -> Result<(), RequestError> {
        let prompt = request.prompt_token_ids.len();
        let slot = self.queue_request(request)?;
        let config = &self.config;
        let fits = config.enable_prefix_caching
            && hashes.algo == config.prefix_caching_hash_algo
            && hashes.block_size == config.block_size
            && hashes.hashes.len() <= prompt / config.block_size.max(1);
        if fits {
            self.requests
                .at_mut(slot)
                .blocks
                .seed_hashes(&hashes.hashes);
        }
        Ok(())
    }

    /// [`add_request`](Self::add_request), returning the request's slot.
    fn queue_request(&mut self, request: Request) -> Result<u32, RequestError> {
        let id = request.id;
        let prompt = request.prompt_token_ids.len();
        if prompt == 0 {
            return Err(RequestError::EmptyPrompt(id));
        }
        if request.max_tokens == 0 {
            return Err(RequestError::NoOutput(id));
        }
        if prompt.saturating_add(request.max_tokens) > self.config.max_model_len {
            return Err(RequestError::TooLong {
                id,
                prompt,
                max_tokens: request.max_tokens,
                max_model_len: self.config.max_model_len,
            });
        }
        if self.requests.contains(id) {
            return Err(RequestError::DuplicateId(id));
        }
        let mut state = RequestState::new(request);
        state.blocks = SeqBlocks::with_capacity(self.config.blocks_for(prompt + state.max_tokens));
        let slot = self.requests.insert(state);
        self.waiting.push_back(slot);
        Ok(slot)
    }

    /// Removes an unfinished request and frees its blocks.
    pub fn abort(&mut self, id: RequestId) -> Result<(), RequestError> {
        let slot = self.requests.slot_of(id).ok_or(RequestError::Unknown(id))?;
        if let Some(pos) = self.running.iter().position(|&s| s == slot) {
            self.running.remove(pos);
        } else if let Some(pos) = self.waiting.iter().position(|&s| s == slot) {
            self.waiting.remove(pos);
        }
        self.finish(slot, FinishReason::Aborted);
        if let Some(state) = self.requests.remove(slot) {
            debug_assert!(state.blocks.table().is_empty());
        }
        Ok(())
    }

    /// Marks a request finished and frees its blocks; the caller removes it
    /// from the queues and the slab.
    fn finish(&mut self, slot: u32, reason: FinishReason) {
        let state = self.requests.at_mut(slot);
        state.status = RequestStatus::Finished(reason);
        self.kv.free(&mut state.blocks);
    }

    /// Plans one step (see the module docs) and returns the plan.
    pub fn schedule(&mut self) -> &StepPlan {
        self.plan.clear();
        let mut budget = self.config.max_num_batched_tokens;
        self.schedule_running(&mut budget);
        if self.plan.preempted.is_empty() {
            self.schedule_waiting(&mut budget);
        }
        self.plan.num_tokens = self.config.max_num_batched_tokens - budget;
        &self.plan
    }

    fn schedule_running(&mut self, budget: &mut usize) {
        let max_model_len = self.config.max_model_len;
        let threshold = self.config.long_prefill_token_threshold;
        let mut index = 0;
        while index < self.running.len() && *budget > 0 {
            let slot = self.running[index];
            let state = self.requests.at_mut(slot);
            let computed = state.num_computed_tokens;
            let remaining = state.tokens.len() - computed;
            let room = max_model_len.saturating_sub(computed);
            let num_new = cap_chunk(remaining, threshold).min(*budget).min(room);
            if num_new == 0 {
                index += 1;
                continue;
            }
            let salt = state.cache_salt.as_deref();
            let fits = self.kv.allocate_slots(
                &mut state.blocks,
                &state.tokens,
                salt,
                computed,
                num_new,
                &[],
            );
            if !fits && !self.preempt_until_fits(slot, computed, num_new) {
                break;
            }
            self.plan.seqs.push(PlannedSeq {
                slot,
                num_new_tokens: num_new,
                samples: num_new == remaining,
            });
            *budget -= num_new;
            index += 1;
        }
    }

    /// Preempts running requests from the back until `slot`'s allocation
    /// fits (true) or `slot` itself was preempted (false).
    #[cold]
    fn preempt_until_fits(&mut self, slot: u32, computed: usize, num_new: usize) -> bool {
        while let Some(victim) = self.running.pop() {
            self.preempt(victim);
            if victim == slot {
                return false;
            }
            let state = self.requests.at_mut(slot);
            let salt = state.cache_salt.as_deref();
            if self.kv.allocate_slots(
                &mut state.blocks,
                &state.tokens,
                salt,
                computed,
                num_new,
                &[],
            ) {
                return true;
            }
        }
        false
    }

    fn preempt(&mut self, slot: u32) {
        let state = self.requests.at_mut(slot);
        self.kv.free(&mut state.blocks);
        state.num_computed_tokens = 0;
        state.status = RequestStatus::Preempted;
        state.num_preemptions += 1;
        self.plan.preempted.push(state.id);
        self.waiting.push_front(slot);
    }

    fn schedule_waiting(&mut self, budget: &mut usize) {
        while let Some(&slot) = self.waiting.front() {
            if *budget == 0 || self.running.len() >= self.config.max_num_seqs {
                break;
            }
            self.hits.clear();
            let state = self.requests.at_mut(slot);
            let salt = state.cache_salt.as_deref();
            let cached = if state.num_computed_tokens == 0 {
                self.kv
                    .computed_blocks(&mut state.blocks, &state.tokens, salt, &mut self.hits)
            } else {
                0
            };
            // K/V sent by a prefill engine counts as computed, past the local hits.
            let computed = (state.num_computed_tokens + cached).max(state.num_external_tokens);
            let remaining = state.tokens.len() - computed;
            let room = self.config.max_model_len.saturating_sub(computed);
            let wanted = cap_chunk(remaining, self.config.long_prefill_token_threshold);
            if !self.config.enable_chunked_prefill && wanted > *budget {
                break;
            }
            let num_new = wanted.min(*budget).min(room);
            let base = state.num_computed_tokens;
            // External tokens need blocks (their K/V is written into them)
            // but no compute: allocated with the step's new tokens.
            let external = computed - base - cached;
            if num_new == 0
                || !self.kv.allocate_slots(
                    &mut state.blocks,
                    &state.tokens,
                    salt,
                    base,
                    external + num_new,
                    &self.hits,
                )
            {
                break;
            }
            state.num_external_tokens = 0;
            self.waiting.pop_front();
            self.running.push(slot);
            let first_admission = state.status == RequestStatus::Waiting;
            state.status = RequestStatus::Running;
            state.num_computed_tokens = computed;
            let samples = computed + num_new == state.tokens.len();
            if first_admission {
                self.kv.record_query(state.num_prompt_tokens, cached);
                self.plan.admitted.push((state.id, cached));
            } else {
                self.plan.readmitted.push((state.id, cached));
            }
            self.plan.seqs.push(PlannedSeq {
                slot,
                num_new_tokens: num_new,
                samples,
            });
            *budget -= num_new;
        }
    }

    /// The planned step as a batch borrowing token slices and block tables
    /// from the engine state. `seqs` is an empty buffer to fill (reused by the
    /// caller across steps).
    pub fn batch<'a>(&'a self, mut seqs: Vec<ScheduledSeq<'a>>) -> ScheduledBatch<'a> {
        seqs.clear();
        seqs.extend(self.plan.seqs.iter().map(|p| {
            let state = self.requests.at(p.slot);
            let start = state.num_computed_tokens;
            ScheduledSeq {
                request_id: state.id,
                token_ids: &state.tokens[start..start + p.num_new_tokens],
                start_pos: start,
                block_table: state.blocks.table(),
                samples: p.samples,
            }
        }));
        ScheduledBatch {
            seqs,
            block_size: self.config.block_size,
        }
    }
}

/// `remaining` capped by `long_prefill_token_threshold` (0 = no cap).
fn cap_chunk(remaining: usize, threshold: usize) -> usize {
    if threshold > 0 {
        remaining.min(threshold)
    } else {
        remaining
    }
}
