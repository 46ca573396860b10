//! Prefill/decode disaggregation: a prefill pool and a decode pool of
//! engines joined by a KV link, on one event-loop clock.
//!
//! Contract ([`run_disaggregated`]):
//! - Each workload arrival is routed by the prefill router, over the prefill
//!   pool, when the loop hands it to an engine (as in [`crate::run_routed`]).
//!   The prefill replica runs it with `max_tokens` 1: its prefill and first
//!   token, so TTFT is measured there. A request that asked for one token,
//!   or whose first token is its EOS (when it stops at EOS), finishes there.
//! - Every other request's prompt K/V (`prompt tokens × kv_bytes_per_token`,
//!   the model's `2 × layers × kv_heads × head_dim × dtype bytes`) goes over
//!   its prefill replica's link ([`KvLink`]): `latency + bytes / bandwidth`
//!   seconds, one transfer at a time per prefill replica, in the order the
//!   prefills finish. The prefill replica frees the request's blocks (they
//!   stay in its prefix cache) when the first token is sampled; the link
//!   does not hold them.
//! - When the K/V has arrived, the decode router picks a decode replica from
//!   the decode pool as it is then, and the request joins it prefilled
//!   (`EngineCore::add_remote_prefilled` with the first token): the replica
//!   allocates its blocks, computes no prompt token, and decodes the other
//!   `max_tokens - 1` tokens. So the request's first inter-token gap spans
//!   the transfer, the wait for admission and the first decode step.
//! - Records: [`DisaggRun::records`] has one record per request as its
//!   client sees it (arrival, the first token from the prefill replica, the
//!   rest from the decode replica, preemptions on both) and every step of
//!   every replica, `engine` numbering the prefill replicas `0..P`, then the
//!   decode replicas `P..P+D`. Its prefix-cache counters are the prefill
//!   pool's, where prompts are computed. [`DisaggRun::replica`] gives what
//!   one replica saw: its requests (arriving when they reached it, with the
//!   tokens it produced and the outputs asked of it as `max_tokens`), its
//!   steps and its own prefix-cache counters.
//! - Every request finishes exactly once, on the replica that produces its
//!   last token; the workload hears of it then.
//! - Refused: an empty pool ([`RunError::EmptyPool`]); a link's bad settings
//!   are refused when it is built ([`KvLink::new`]).

mod link;
mod run;
mod state;

pub use link::KvLink;

use crate::clock::Clock;
use crate::cost::ModelShape;
use crate::records::{RequestRecord, RunRecords};
use crate::workload::Workload;
use crate::{RunError, RunOptions};
use engine::{EngineCore, ModelRunner};

use super::Router;

/// The two pools of a disaggregated fleet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pool {
    Prefill,
    Decode,
}

impl Pool {
    pub fn name(self) -> &'static str {
        match self {
            Pool::Prefill => "prefill",
            Pool::Decode => "decode",
        }
    }
}

/// The link and the K/V size it carries.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DisaggConfig {
    pub link: KvLink,
    /// Bytes of K and V of one token over all layers.
    pub kv_bytes_per_token: u64,
}

impl DisaggConfig {
    /// The link carrying `model`'s K/V ([`ModelShape::kv_bytes_per_token`]).
    pub fn for_model(link: KvLink, model: &ModelShape) -> Self {
        Self {
            link,
            kv_bytes_per_token: model.kv_bytes_per_token() as u64,
        }
    }
}

/// The engines of both pools and the router of each.
pub struct DisaggFleet<'a, R: ModelRunner> {
    pub prefill: &'a mut [EngineCore<R>],
    pub decode: &'a mut [EngineCore<R>],
    pub prefill_router: &'a mut dyn Router,
    pub decode_router: &'a mut dyn Router,
}

/// Where one request ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Placement {
    /// Index in the prefill pool.
    pub prefill: usize,
    /// Index in the decode pool; `None` when the request finished on its
    /// prefill replica (one output token, or EOS first).
    pub decode: Option<usize>,
}

/// One request's K/V on the link.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Transfer {
    pub id: u64,
    /// The sending prefill replica.
    pub prefill: usize,
    pub bytes: u64,
    /// When the link started sending (the prefill's end, or later when the
    /// link was busy) and when the K/V had arrived.
    pub start_s: f64,
    pub end_s: f64,
}

/// A disaggregated run's records (see the module docs).
#[derive(Debug, Clone, PartialEq)]
pub struct DisaggRun {
    pub records: RunRecords,
    /// `placement[i]` is where `records.requests[i]` ran.
    pub placement: Vec<Placement>,
    /// Transfers in the order they were booked.
    pub transfers: Vec<Transfer>,
    num_prefill: usize,
    /// Per replica (prefill first): its request records and prefix-cache
    /// (queries, hits) of this run.
    replicas: Vec<(Vec<RequestRecord>, (u64, u64))>,
}

impl DisaggRun {
    pub fn num_prefill(&self) -> usize {
        self.num_prefill
    }

    pub fn num_decode(&self) -> usize {
        self.replicas.len() - self.num_prefill
    }

    /// The `engine` index of replica `index` of `pool` in the steps.
    pub fn engine_index(&self, pool: Pool, index: usize) -> usize {
        match pool {
            Pool::Prefill => index,
            Pool::Decode => self.num_prefill + index,
        }
    }

    /// What replica `index` of `pool` recorded; `None` past the pool's end.
    pub fn replica(&self, pool: Pool, index: usize) -> Option<RunRecords> {
        let size = match pool {
            Pool::Prefill => self.num_prefill,
            Pool::Decode => self.num_decode(),
        };
        if index >= size {
            return None;
        }
        let engine = self.engine_index(pool, index);
        let (requests, (queries, hits)) = &self.replicas[engine];
        Some(RunRecords {
            requests: requests.clone(),
            steps: self
                .records
                .steps
                .iter()
                .filter(|s| s.engine == engine)
                .cloned()
                .collect(),
            prefix_cache_queries: *queries,
            prefix_cache_hits: *hits,
        })
    }
}

/// Runs `workload` through a disaggregated fleet on `clock` until every
/// request has finished (see the module docs). Engines may be reused from
/// an earlier run but must have no unfinished requests.
pub fn run_disaggregated<R: ModelRunner, C: Clock>(
    fleet: DisaggFleet<'_, R>,
    clock: &mut C,
    workload: &mut dyn Workload,
    config: &DisaggConfig,
    options: &RunOptions,
) -> Result<DisaggRun, RunError> {
    for (pool, engines) in [
        (Pool::Prefill, &*fleet.prefill),
        (Pool::Decode, &*fleet.decode),
    ] {
        if engines.is_empty() {
            return Err(RunError::EmptyPool { pool: pool.name() });
        }
    }
    run::drive(fleet, clock, workload, config, options)
}
