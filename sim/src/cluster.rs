//! Request routing over a fleet of replicas.
//!
//! Contract:
//! - A [`Router`] picks the replica of each request when the event loop hands
//!   the request to an engine (its arrival time, or the end of the step during
//!   which it arrived), from a read-only [`Fleet`] view of every replica at
//!   that moment. The `engine` an [`Arrival`] carries is ignored.
//! - Routers are deterministic: the same arrivals seen against the same fleet
//!   states give the same replicas. Ties go to the lowest replica index.
//! - [`run_routed`] runs a workload through the event loop with a router and
//!   returns the records together with each request's replica; the plain
//!   [`crate::run`] / [`crate::run_with`] are untouched by routing.
//! - A router never sees an empty fleet: [`run_routed`] refuses one.
//! - [`disagg`] splits a fleet into a prefill pool and a decode pool joined by
//!   a KV link ([`run_disaggregated`]); each pool has its own router.

pub mod disagg;
mod routers;

pub use crate::event_loop::{run_routed, RoutedRun};
pub use disagg::{
    run_disaggregated, DisaggConfig, DisaggFleet, DisaggRun, KvLink, Placement, Pool, Transfer,
};
pub use routers::{
    AffinityKey, ConversationAffinity, LeastKvUsage, LeastOutstanding, PrefixCacheAware, RoundRobin,
};

use crate::workload::Arrival;
use engine::kv_cache::hashing::{extend_block_hashes, BlockHash, PromptHashes};
use engine::{EngineCore, HashAlgo, ModelRunner, Request};
use std::cell::RefCell;
use thiserror::Error;

#[derive(Debug, Error, PartialEq)]
pub enum ClusterError {
    #[error(
        "prefix-cache-aware load weight lambda = {0} is invalid: use a finite value >= 0 \
         (cached tokens one outstanding request is worth)"
    )]
    BadLoadWeight(f64),
    #[error(
        "KV link bandwidth = {0} bytes/s is invalid: use a value > 0 (f64::INFINITY, `inf`, \
         for a link that takes no time per byte)"
    )]
    BadLinkBandwidth(f64),
    #[error("KV link latency = {0} s is invalid: use a finite value >= 0")]
    BadLinkLatency(f64),
}

/// What a router may know of one replica.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplicaState {
    pub running: usize,
    pub waiting: usize,
    /// KV blocks held by requests.
    pub kv_blocks_used: usize,
    /// KV blocks that can be handed out (the null block excluded).
    pub kv_blocks_total: usize,
}

impl ReplicaState {
    /// Requests sent to the replica and not yet finished.
    pub fn outstanding(&self) -> usize {
        self.running + self.waiting
    }
}

/// Read-only view of the fleet when one request is routed.
pub struct Fleet<'a> {
    states: Vec<ReplicaState>,
    prefix: Box<dyn PrefixLookup + 'a>,
}

impl<'a> Fleet<'a> {
    pub fn new(states: Vec<ReplicaState>, prefix: Box<dyn PrefixLookup + 'a>) -> Self {
        Self { states, prefix }
    }

    /// A view of real engines.
    pub fn of_engines<R: ModelRunner>(engines: &'a [EngineCore<R>]) -> Self {
        let states = engines
            .iter()
            .map(|e| ReplicaState {
                running: e.num_running(),
                waiting: e.num_waiting(),
                kv_blocks_used: e.kv_cache().num_used_blocks(),
                kv_blocks_total: e.kv_cache().num_blocks().saturating_sub(1),
            })
            .collect();
        let prefixes = EnginePrefixes {
            engines,
            memo: RefCell::new(None),
        };
        Self::new(states, Box::new(prefixes))
    }

    pub fn replicas(&self) -> &[ReplicaState] {
        &self.states
    }

    /// Prompt tokens of `request` that `replica` would find in its prefix
    /// cache if it were admitted now (0 for a replica index out of range).
    pub fn cached_tokens(&self, replica: usize, request: &Request) -> usize {
        self.prefix.cached_prefix_tokens(replica, request)
    }

    /// The block hashes of `request`'s prompt if the lookups computed them
    /// (see [`PrefixLookup::take_prompt_hashes`]).
    pub fn take_prompt_hashes(&self, request: &Request) -> Option<PromptHashes> {
        self.prefix.take_prompt_hashes(request)
    }

    /// The replica with the fewest outstanding requests, lowest index first.
    pub fn least_outstanding(&self) -> usize {
        argmin_by_key(&self.states, |s| s.outstanding())
    }
}

/// The cached-prefix query a [`Fleet`] answers from.
pub trait PrefixLookup {
    fn cached_prefix_tokens(&self, replica: usize, request: &Request) -> usize;

    /// The prompt hashes computed for `request`'s lookups, handed on to the
    /// engine it is routed to so it need not hash the prompt again.
    fn take_prompt_hashes(&self, _request: &Request) -> Option<PromptHashes> {
        None
    }
}

/// The prefix caches of real engines.
struct EnginePrefixes<'a, R: ModelRunner> {
    engines: &'a [EngineCore<R>],
    /// The last request's block hashes: every replica of a fleet usually
    /// hashes alike, so one request is hashed once, not once per replica.
    memo: RefCell<Option<HashMemo>>,
}

/// Block hashes of one request under one hashing rule.
struct HashMemo {
    id: u64,
    prompt_len: usize,
    salt: Option<String>,
    algo: HashAlgo,
    block_size: usize,
    hashes: Vec<BlockHash>,
}

impl<R: ModelRunner> PrefixLookup for EnginePrefixes<'_, R> {
    fn cached_prefix_tokens(&self, replica: usize, request: &Request) -> usize {
        let Some(engine) = self.engines.get(replica) else {
            return 0;
        };
        let kv = engine.kv_cache();
        if !kv.prefix_caching() || request.prompt_token_ids.is_empty() {
            return 0;
        }
        let (algo, block_size) = (engine.config().prefix_caching_hash_algo, kv.block_size());
        let mut memo = self.memo.borrow_mut();
        let fresh = memo.as_ref().is_some_and(|m| {
            m.id == request.id.0
                && m.prompt_len == request.prompt_token_ids.len()
                && m.salt == request.cache_salt
                && m.algo == algo
                && m.block_size == block_size
        });
        if !fresh {
            *memo = Some(HashMemo {
                id: request.id.0,
                prompt_len: request.prompt_token_ids.len(),
                salt: request.cache_salt.clone(),
                algo,
                block_size,
                hashes: admission_hashes(algo, block_size, request),
            });
        }
        memo.as_ref().map_or(0, |m| hit_tokens(engine, &m.hashes))
    }

    fn take_prompt_hashes(&self, request: &Request) -> Option<PromptHashes> {
        let memo = self.memo.borrow_mut().take()?;
        let same = memo.id == request.id.0
            && memo.prompt_len == request.prompt_token_ids.len()
            && memo.salt == request.cache_salt;
        same.then_some(PromptHashes {
            algo: memo.algo,
            block_size: memo.block_size,
            hashes: memo.hashes,
        })
    }
}

/// The chained hashes of the prompt blocks admission may find cached: whole
/// blocks, leaving at least the last prompt token to compute.
fn admission_hashes(algo: HashAlgo, block_size: usize, request: &Request) -> Vec<BlockHash> {
    let tokens = &request.prompt_token_ids;
    let max_blocks = tokens.len().saturating_sub(1) / block_size;
    let mut hashes = Vec::with_capacity(max_blocks);
    let salt = request.cache_salt.as_deref();
    extend_block_hashes(algo, block_size, tokens, salt, &mut hashes, max_blocks);
    hashes
}

/// Tokens of the leading `hashes` blocks that `engine`'s cache holds.
fn hit_tokens<R: ModelRunner>(engine: &EngineCore<R>, hashes: &[BlockHash]) -> usize {
    let kv = engine.kv_cache();
    let hit_blocks = hashes
        .iter()
        .take_while(|h| kv.pool().cached_block(h).is_some())
        .count();
    hit_blocks * kv.block_size()
}

/// Tokens of `request`'s prompt that `engine`'s prefix cache holds now, as
/// the engine would count them on admission: whole blocks, leaving at least
/// the last prompt token to compute. Reads the cache without changing it.
pub fn cached_prefix_tokens<R: ModelRunner>(engine: &EngineCore<R>, request: &Request) -> usize {
    let kv = engine.kv_cache();
    if !kv.prefix_caching() || request.prompt_token_ids.is_empty() {
        return 0;
    }
    let algo = engine.config().prefix_caching_hash_algo;
    hit_tokens(engine, &admission_hashes(algo, kv.block_size(), request))
}

/// Picks the replica of each arriving request.
pub trait Router {
    /// The replica (an index into the fleet) for `arrival`. The fleet is
    /// never empty.
    fn route(&mut self, arrival: &Arrival, fleet: &Fleet<'_>) -> usize;
}

/// Index of the smallest key, the lowest index among equals (0 if empty).
pub(crate) fn argmin_by_key<T, K: Ord>(items: &[T], key: impl Fn(&T) -> K) -> usize {
    items
        .iter()
        .enumerate()
        .min_by(|a, b| key(a.1).cmp(&key(b.1)).then(a.0.cmp(&b.0)))
        .map_or(0, |(i, _)| i)
}
