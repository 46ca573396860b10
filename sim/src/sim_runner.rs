//! `SimRunner`: a `ModelRunner` whose step time comes from a cost model.
//!
//! Contract: `execute` computes nothing. It prices the batch with the cost
//! model (`RunnerOutput::modeled_seconds`), given the idle time the event
//! loop reported since the last step (`idle`; a fresh runner counts as
//! rested for ever) and the GPU history the runner keeps
//! ([`CostModel::step_seconds_after`]), and returns one token per sampling
//! sequence: the position the token would occupy, truncated to `u32`. Token
//! values are meaningless; simulated requests set `ignore_eos`, so no value
//! ends a request early.

use crate::cost::{CostModel, GpuHistory};
use engine::{BatchShape, ModelRunner, RunnerError, RunnerOutput, ScheduledBatch, SeqShape};
use std::sync::Arc;

/// Prices each batch with a cost model and returns placeholder tokens.
pub struct SimRunner {
    cost: Arc<dyn CostModel>,
    num_kv_blocks: usize,
    /// Reused every step so pricing a batch allocates nothing.
    shape: BatchShape,
    /// Idle seconds since the last step (infinite before the first).
    idle_s: f64,
    history: GpuHistory,
}

impl SimRunner {
    /// `num_kv_blocks` includes the null block (see
    /// [`crate::cost::kv_cache_blocks`] for a GPU's capacity).
    pub fn new(cost: Arc<dyn CostModel>, num_kv_blocks: usize) -> Self {
        Self {
            cost,
            num_kv_blocks,
            shape: BatchShape::default(),
            idle_s: f64::INFINITY,
            history: GpuHistory::default(),
        }
    }

    pub fn cost_model(&self) -> &Arc<dyn CostModel> {
        &self.cost
    }
}

impl ModelRunner for SimRunner {
    fn num_kv_blocks(&self) -> usize {
        self.num_kv_blocks
    }

    fn execute(&mut self, batch: &ScheduledBatch<'_>) -> Result<RunnerOutput, RunnerError> {
        self.shape.seqs.clear();
        let mut sampled = Vec::with_capacity(batch.seqs.len());
        for s in &batch.seqs {
            let new_tokens = s.token_ids.len();
            self.shape.seqs.push(SeqShape {
                new_tokens: new_tokens as u32,
                context_before: s.start_pos as u32,
                samples: s.samples,
            });
            if s.samples {
                sampled.push((s.start_pos + new_tokens) as u32);
            }
        }
        let seconds = self
            .cost
            .step_seconds_after(&self.shape, self.idle_s, &mut self.history);
        self.idle_s = 0.0;
        Ok(RunnerOutput {
            sampled,
            modeled_seconds: Some(seconds),
        })
    }

    fn idle(&mut self, seconds: f64) {
        if seconds > 0.0 {
            self.idle_s += seconds;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use engine::{RequestId, ScheduledSeq};

    struct PerToken;
    impl CostModel for PerToken {
        fn step_seconds(&self, batch: &BatchShape) -> f64 {
            batch.num_tokens() as f64 * 1e-3
        }
    }

    #[test]
    fn prices_the_batch_and_samples_one_token_per_sampling_sequence() {
        let mut runner = SimRunner::new(Arc::new(PerToken), 10);
        assert_eq!(runner.num_kv_blocks(), 10);
        let prompt = [1u32, 2, 3];
        let table = [1u32];
        let batch = ScheduledBatch {
            seqs: vec![
                ScheduledSeq {
                    request_id: RequestId(0),
                    token_ids: &prompt,
                    start_pos: 0,
                    block_table: &table,
                    samples: false,
                },
                ScheduledSeq {
                    request_id: RequestId(1),
                    token_ids: &prompt[..1],
                    start_pos: 7,
                    block_table: &table,
                    samples: true,
                },
            ],
            block_size: 16,
        };
        let out = runner.execute(&batch).unwrap();
        assert_eq!(out.sampled, vec![8]);
        let expected = PerToken.step_seconds(&batch.shape());
        assert_eq!(out.modeled_seconds, Some(expected));
    }
}
