//! The routers: round-robin, least outstanding requests, least KV usage,
//! prefix-cache-aware and conversation affinity.
//!
//! Every router breaks ties toward the lowest replica index, so a fleet of
//! identical idle replicas fills from replica 0.

use super::{argmin_by_key, ClusterError, Fleet, Router};
use crate::workload::Arrival;
use std::cmp::Ordering;
use std::collections::HashMap;

/// Replica 0, 1, 2, ... in turn, whatever their load.
#[derive(Debug, Clone, Default)]
pub struct RoundRobin {
    next: usize,
}

impl Router for RoundRobin {
    fn route(&mut self, _arrival: &Arrival, fleet: &Fleet<'_>) -> usize {
        let replicas = fleet.replicas().len().max(1);
        let chosen = self.next % replicas;
        self.next = (chosen + 1) % replicas;
        chosen
    }
}

/// The replica with the fewest running plus waiting requests.
#[derive(Debug, Clone, Default)]
pub struct LeastOutstanding;

impl Router for LeastOutstanding {
    fn route(&mut self, _arrival: &Arrival, fleet: &Fleet<'_>) -> usize {
        fleet.least_outstanding()
    }
}

/// The replica with the smallest fraction of its KV blocks in use; among
/// equals (an idle fleet, or requests still waiting for blocks) the one with
/// the fewest outstanding requests.
#[derive(Debug, Clone, Default)]
pub struct LeastKvUsage;

impl Router for LeastKvUsage {
    fn route(&mut self, _arrival: &Arrival, fleet: &Fleet<'_>) -> usize {
        let states = fleet.replicas();
        let mut best = 0;
        for (i, s) in states.iter().enumerate().skip(1) {
            let b = &states[best];
            // used_i / total_i < used_b / total_b, exactly, without floats.
            let usage = (s.kv_blocks_used as u128 * b.kv_blocks_total.max(1) as u128)
                .cmp(&(b.kv_blocks_used as u128 * s.kv_blocks_total.max(1) as u128));
            if usage.then(s.outstanding().cmp(&b.outstanding())) == Ordering::Less {
                best = i;
            }
        }
        best
    }
}

/// The replica maximising `cached_tokens - load_weight * outstanding`: the
/// longest cached prefix of the request, traded against queueing behind
/// other requests.
#[derive(Debug, Clone)]
pub struct PrefixCacheAware {
    load_weight: f64,
}

impl PrefixCacheAware {
    /// `load_weight` (lambda) is how many cached prompt tokens one
    /// outstanding request on a replica is worth; 0 ignores load.
    pub fn new(load_weight: f64) -> Result<Self, ClusterError> {
        if !load_weight.is_finite() || load_weight < 0.0 {
            return Err(ClusterError::BadLoadWeight(load_weight));
        }
        Ok(Self { load_weight })
    }
}

impl Router for PrefixCacheAware {
    fn route(&mut self, arrival: &Arrival, fleet: &Fleet<'_>) -> usize {
        let score = |i: usize| {
            let cached = fleet.cached_tokens(i, &arrival.request) as f64;
            cached - self.load_weight * fleet.replicas()[i].outstanding() as f64
        };
        let mut best = 0;
        let mut best_score = f64::NEG_INFINITY;
        for i in 0..fleet.replicas().len() {
            let s = score(i);
            // Strictly greater: ties keep the lower index.
            if s > best_score {
                best = i;
                best_score = s;
            }
        }
        best
    }
}

/// What makes two requests one conversation (or tenant).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AffinityKey {
    /// The request's cache salt; unsalted requests have no key.
    Salt,
    /// The arrival's tag; an empty tag is no key.
    Tag,
}

/// Requests with the same key go to one replica, chosen on the key's first
/// request as the one with the fewest outstanding requests. Requests without
/// a key are routed by least outstanding requests, each on its own.
#[derive(Debug, Clone)]
pub struct ConversationAffinity {
    key: AffinityKey,
    replica_of: HashMap<String, usize>,
}

impl ConversationAffinity {
    pub fn new(key: AffinityKey) -> Self {
        Self {
            key,
            replica_of: HashMap::new(),
        }
    }

    fn key_of<'a>(&self, arrival: &'a Arrival) -> Option<&'a str> {
        match self.key {
            AffinityKey::Salt => arrival.request.cache_salt.as_deref(),
            AffinityKey::Tag => Some(arrival.tag.as_str()).filter(|t| !t.is_empty()),
        }
    }
}

impl Router for ConversationAffinity {
    fn route(&mut self, arrival: &Arrival, fleet: &Fleet<'_>) -> usize {
        let Some(key) = self.key_of(arrival) else {
            return fleet.least_outstanding();
        };
        if let Some(&replica) = self.replica_of.get(key) {
            return replica;
        }
        let replica = argmin_by_key(fleet.replicas(), |s| s.outstanding());
        self.replica_of.insert(key.to_string(), replica);
        replica
    }
}
