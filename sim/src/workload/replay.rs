//! Trace replay: the requests of a trace file, at the trace's times.
//!
//! Contract: entry `i` (in file order) becomes request `first_id + i` on
//! engine `i % num_engines`, tagged with its `tag` or `trace`. Prompts given as
//! lengths are made by the [`PromptSource`] from `seed`; entries of one
//! `prefix_group` cut their prompt from the group's one token stream (see
//! [`super::trace`]), so the same trace and seed give the same requests.

use super::prompts::PromptSource;
use super::trace::{TraceEntry, TracePrompt};
use super::{Arrival, Workload, WorkloadError};
use engine::Request;
use rand::rngs::StdRng;
use rand::SeedableRng;
use std::collections::HashMap;

#[derive(Debug, Clone)]
pub struct TraceReplay {
    arrivals: Vec<Arrival>,
}

impl TraceReplay {
    pub fn new(
        entries: Vec<TraceEntry>,
        source: &PromptSource,
        seed: u64,
        num_engines: usize,
        first_id: u64,
    ) -> Result<Self, WorkloadError> {
        if num_engines == 0 {
            return Err(WorkloadError::invalid(
                "num_engines",
                0,
                "use at least one engine",
            ));
        }
        let mut rng = StdRng::seed_from_u64(seed);
        let mut streams: HashMap<String, Vec<u32>> = HashMap::new();
        let mut arrivals = Vec::with_capacity(entries.len());
        for (i, e) in entries.into_iter().enumerate() {
            let prompt = match (e.prompt, &e.prefix_group) {
                (TracePrompt::Tokens(ids), _) => ids,
                (TracePrompt::Length(n), None) => source.make(&mut rng, n),
                (TracePrompt::Length(n), Some(group)) => {
                    let shared = e.prefix_tokens.unwrap_or(n).min(n);
                    let stream = streams.entry(group.clone()).or_default();
                    if stream.len() < shared {
                        let more = shared - stream.len();
                        source.fill(&mut rng, more, stream);
                    }
                    let mut p = Vec::with_capacity(n);
                    p.extend_from_slice(&stream[..shared]);
                    source.fill(&mut rng, n - shared, &mut p);
                    p
                }
            };
            let mut request = Request::new(first_id + i as u64, prompt, e.output_tokens);
            request.arrival_time = e.arrival_s;
            request.cache_salt = e.salt;
            arrivals.push(Arrival {
                request,
                engine: i % num_engines,
                tag: e.tag.unwrap_or_else(|| "trace".to_string()),
            });
        }
        Ok(Self { arrivals })
    }

    pub fn arrivals(&self) -> &[Arrival] {
        &self.arrivals
    }
}

impl Workload for TraceReplay {
    fn initial(&mut self) -> Vec<Arrival> {
        std::mem::take(&mut self.arrivals)
    }
    fn on_finish(&mut self, _id: u64, _now: f64) -> Vec<Arrival> {
        Vec::new()
    }
}
