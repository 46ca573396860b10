//! What every run (real or simulated) records.
//!
//! Contract: times are seconds since the run started, on the run's clock.
//! Both modes write identical record types, so every difference between a
//! real and a simulated run of the same workload is a cost-model error.

mod csv;
mod percentile;

pub use csv::{
    csv_writer, write_requests_csv, write_steps_csv, Millis, RequestRow, StepRow, REQUESTS_COLUMNS,
    STEPS_COLUMNS,
};
pub use percentile::{median, percentile};

use engine::BatchShape;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RequestRecord {
    pub id: u64,
    /// Label of the workload's choosing (client, tenant, batch, phase, ...).
    pub tag: String,
    pub arrival_s: f64,
    pub prompt_tokens: usize,
    pub max_tokens: usize,
    /// Prompt tokens found in the prefix cache at first admission (as vLLM's
    /// `num_cached_tokens`; re-admissions after a preemption leave it).
    pub cached_tokens: usize,
    pub preemptions: usize,
    /// Time of every output token; the first is the first token.
    pub token_times_s: Vec<f64>,
    pub finish_s: Option<f64>,
    /// `length`, `stop`, `aborted`, or `unfinished`.
    pub finish_reason: String,
}

impl RequestRecord {
    pub fn ttft_s(&self) -> Option<f64> {
        self.token_times_s.first().map(|t| t - self.arrival_s)
    }
    /// Gaps between consecutive deliveries of output tokens. Tokens with
    /// one time were delivered together (the k tokens of one streamed chunk
    /// over HTTP) and make one gap, the time since the previous delivery, as
    /// vLLM's benchmark_serving counts a chunk; an engine in this process
    /// delivers one token of a request per step, so there every gap counts.
    pub fn itls_s(&self) -> impl Iterator<Item = f64> + '_ {
        self.token_times_s
            .windows(2)
            .map(|w| w[1] - w[0])
            .filter(|gap| *gap != 0.0)
    }
    pub fn output_tokens(&self) -> usize {
        self.token_times_s.len()
    }
    pub fn is_finished(&self) -> bool {
        self.finish_s.is_some()
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepRecord {
    /// Index of the engine (replica) that ran the step.
    pub engine: usize,
    pub start_s: f64,
    pub duration_s: f64,
    pub scheduled_tokens: usize,
    pub prefill_seqs: usize,
    pub decode_seqs: usize,
    pub prefill_tokens: usize,
    /// Sum over sequences of the context after the step.
    pub context_tokens: usize,
    pub max_context: usize,
    /// KV blocks held by requests after the step (null block excluded).
    pub kv_blocks_used: usize,
    /// KV blocks the engine can hand out (its pool less the null block), so
    /// `kv_blocks_used / kv_blocks_total` is the cache's occupancy.
    pub kv_blocks_total: usize,
    /// Requests queued for admission after the step (new and preempted).
    pub waiting_seqs: usize,
    /// Requests holding a place in the running batch after the step.
    pub running_seqs: usize,
    /// The batch's full composition, for re-pricing with another cost model.
    #[serde(skip)]
    pub shape: BatchShape,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RunRecords {
    pub requests: Vec<RequestRecord>,
    pub steps: Vec<StepRecord>,
    /// (queried prompt tokens, hit tokens) summed over engines.
    pub prefix_cache_queries: u64,
    pub prefix_cache_hits: u64,
}

impl RunRecords {
    /// Output tokens of all requests.
    pub fn output_tokens(&self) -> usize {
        self.requests.iter().map(RequestRecord::output_tokens).sum()
    }
    /// The record of request `id`, if it arrived.
    pub fn request(&self, id: u64) -> Option<&RequestRecord> {
        self.requests.iter().find(|r| r.id == id)
    }
    /// Hit tokens / queried tokens of the prefix cache (0 when nothing was queried).
    pub fn prefix_cache_hit_rate(&self) -> f64 {
        if self.prefix_cache_queries == 0 {
            0.0
        } else {
            self.prefix_cache_hits as f64 / self.prefix_cache_queries as f64
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(times: &[f64]) -> RequestRecord {
        RequestRecord {
            id: 0,
            tag: String::new(),
            arrival_s: 0.5,
            prompt_tokens: 4,
            max_tokens: times.len(),
            cached_tokens: 0,
            preemptions: 0,
            token_times_s: times.to_vec(),
            finish_s: times.last().copied(),
            finish_reason: "length".into(),
        }
    }

    #[test]
    fn tokens_delivered_together_make_one_gap() {
        // Deliveries at 1.0, 1.5 (three tokens in one chunk) and 2.25.
        let r = record(&[1.0, 1.5, 1.5, 1.5, 2.25]);
        assert_eq!(r.ttft_s(), Some(0.5));
        assert_eq!(r.itls_s().collect::<Vec<_>>(), [0.5, 0.75]);
        assert_eq!(r.output_tokens(), 5);
    }

    #[test]
    fn one_token_per_step_counts_every_gap() {
        let r = record(&[1.0, 1.25, 1.75]);
        assert_eq!(r.itls_s().collect::<Vec<_>>(), [0.25, 0.5]);
        assert_eq!(record(&[1.0]).itls_s().count(), 0);
    }
}
