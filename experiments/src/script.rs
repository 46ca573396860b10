//! Scripted workloads: every request of a condition, fixed before the run.
//!
//! Contract: a [`Script`] is a list of requests; request `i` gets id `i`.
//! Each request is released by its [`Gate`]: at a fixed time, or a delay
//! after every request it depends on has finished (closed loops, "one after
//! another", "each after the previous finished"). Dependencies point to
//! earlier requests only, so every script terminates. Prompts are random
//! token ids from a seeded generator, so a (seed, condition) pair always
//! yields the same script, whatever thread builds or runs it.
//! [`ScriptWorkload`] plays a script through `sim`'s event loop (virtual or
//! wall clock alike).

use engine::Request;
use rand::rngs::StdRng;
use rand::SeedableRng;
use sim::workload::PromptSource;
use sim::{Arrival, Workload};

/// Tag of the request that warms the engine up (left out of every metric).
pub const WARMUP_TAG: &str = "warmup";

/// When a scripted request arrives.
#[derive(Debug, Clone, PartialEq)]
pub enum Gate {
    /// At this many seconds after the run starts.
    At(f64),
    /// `delay_s` after the last of `deps` (earlier request indices) finished.
    After { deps: Vec<usize>, delay_s: f64 },
}

#[derive(Debug, Clone, PartialEq)]
pub struct ScriptedRequest {
    pub tag: String,
    pub prompt: Vec<u32>,
    pub max_tokens: usize,
    pub salt: Option<String>,
    pub gate: Gate,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Script {
    pub requests: Vec<ScriptedRequest>,
}

/// Builds a script with seeded random prompts.
pub struct ScriptBuilder {
    requests: Vec<ScriptedRequest>,
    rng: StdRng,
    prompts: PromptSource,
}

/// Mixes a run seed and a condition index into an independent stream seed
/// (SplitMix64 finaliser), so conditions do not depend on run order.
pub fn condition_seed(seed: u64, condition: usize) -> u64 {
    let mut z = seed
        ^ (condition as u64)
            .wrapping_add(1)
            .wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

impl ScriptBuilder {
    pub fn new(seed: u64, prompts: &PromptSource) -> Self {
        Self {
            requests: Vec::new(),
            rng: StdRng::seed_from_u64(seed),
            prompts: prompts.clone(),
        }
    }

    pub fn rng(&mut self) -> &mut StdRng {
        &mut self.rng
    }

    /// `n` prompt tokens from the builder's prompt source.
    pub fn random_tokens(&mut self, n: usize) -> Vec<u32> {
        self.prompts.make(&mut self.rng, n)
    }

    /// Adds a request; returns its index (= its request id).
    pub fn push(
        &mut self,
        tag: impl Into<String>,
        prompt: Vec<u32>,
        max_tokens: usize,
        salt: Option<String>,
        gate: Gate,
    ) -> usize {
        self.requests.push(ScriptedRequest {
            tag: tag.into(),
            prompt,
            max_tokens,
            salt,
            gate,
        });
        self.requests.len() - 1
    }

    /// The engine's first request, at time 0: a short random prompt whose
    /// records are left out of every metric.
    pub fn warmup(&mut self) -> usize {
        let prompt = self.random_tokens(32);
        self.push(WARMUP_TAG, prompt, 4, None, Gate::At(0.0))
    }

    pub fn len(&self) -> usize {
        self.requests.len()
    }

    pub fn is_empty(&self) -> bool {
        self.requests.is_empty()
    }

    pub fn build(self) -> Script {
        Script {
            requests: self.requests,
        }
    }
}

/// Plays a [`Script`] as a `sim::Workload` on engine 0.
pub struct ScriptWorkload {
    script: Script,
    /// Unfinished dependencies per request.
    pending: Vec<usize>,
    /// Requests waiting on each request.
    dependents: Vec<Vec<usize>>,
    /// Latest finish time among each request's dependencies so far.
    ready_at: Vec<f64>,
}

impl ScriptWorkload {
    pub fn new(script: Script) -> Self {
        let n = script.requests.len();
        let mut pending = vec![0; n];
        let mut dependents = vec![Vec::new(); n];
        for (i, r) in script.requests.iter().enumerate() {
            if let Gate::After { deps, .. } = &r.gate {
                // A dependency on a later (or missing) request would never
                // fire; such entries are ignored instead of hanging the run.
                for &d in deps.iter().filter(|&&d| d < i) {
                    pending[i] += 1;
                    dependents[d].push(i);
                }
            }
        }
        Self {
            script,
            pending,
            dependents,
            ready_at: vec![0.0; n],
        }
    }

    fn arrival(&self, i: usize, time: f64) -> Arrival {
        let r = &self.script.requests[i];
        let mut request = Request::new(i as u64, r.prompt.clone(), r.max_tokens);
        request.cache_salt = r.salt.clone();
        request.arrival_time = time;
        Arrival {
            request,
            engine: 0,
            tag: r.tag.clone(),
        }
    }
}

impl Workload for ScriptWorkload {
    fn initial(&mut self) -> Vec<Arrival> {
        (0..self.script.requests.len())
            .filter_map(|i| match &self.script.requests[i].gate {
                Gate::At(t) => Some(self.arrival(i, *t)),
                Gate::After { delay_s, .. } if self.pending[i] == 0 => {
                    Some(self.arrival(i, *delay_s))
                }
                Gate::After { .. } => None,
            })
            .collect()
    }

    fn on_finish(&mut self, id: u64, now: f64) -> Vec<Arrival> {
        let Some(deps) = self.dependents.get(id as usize).cloned() else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for i in deps {
            self.pending[i] = self.pending[i].saturating_sub(1);
            self.ready_at[i] = self.ready_at[i].max(now);
            if self.pending[i] == 0 {
                if let Gate::After { delay_s, .. } = self.script.requests[i].gate {
                    out.push(self.arrival(i, self.ready_at[i] + delay_s));
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dependent_requests_arrive_after_all_dependencies() {
        let mut b = ScriptBuilder::new(1, &PromptSource::random_tokens(100).unwrap());
        let a = b.warmup();
        let p = b.random_tokens(8);
        let c = b.push("x", p.clone(), 2, None, Gate::At(0.5));
        let d = b.push(
            "y",
            p,
            2,
            Some("s".into()),
            Gate::After {
                deps: vec![a, c],
                delay_s: 0.1,
            },
        );
        let mut w = ScriptWorkload::new(b.build());
        let first: Vec<u64> = w.initial().iter().map(|a| a.request.id.0).collect();
        assert_eq!(first, vec![a as u64, c as u64]);
        assert!(w.on_finish(a as u64, 2.0).is_empty());
        let next = w.on_finish(c as u64, 1.0);
        assert_eq!(next.len(), 1);
        assert_eq!(next[0].request.id.0, d as u64);
        assert!((next[0].request.arrival_time - 2.1).abs() < 1e-12);
        assert_eq!(next[0].request.cache_salt.as_deref(), Some("s"));
    }

    #[test]
    fn same_seed_same_prompts_and_conditions_differ() {
        let mut a = ScriptBuilder::new(
            condition_seed(7, 0),
            &PromptSource::random_tokens(1000).unwrap(),
        );
        let mut b = ScriptBuilder::new(
            condition_seed(7, 0),
            &PromptSource::random_tokens(1000).unwrap(),
        );
        let mut c = ScriptBuilder::new(
            condition_seed(7, 1),
            &PromptSource::random_tokens(1000).unwrap(),
        );
        let (x, y, z) = (
            a.random_tokens(64),
            b.random_tokens(64),
            c.random_tokens(64),
        );
        assert_eq!(x, y);
        assert_ne!(x, z);
        assert!(x.iter().all(|t| *t < 1000));
    }
}
