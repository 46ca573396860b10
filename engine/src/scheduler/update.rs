//! Applying a step's results: computed tokens advance, sampled tokens are
//! appended, finished requests release their blocks.

use super::{Scheduler, StepOutcome};
use crate::request::{FinishReason, RequestStatus};
use crate::runner::RunnerError;

impl Scheduler {
    /// Applies the runner's sampled tokens (one per planned sequence that
    /// samples, in plan order) to the planned step and reports tokens and
    /// finishes into `outcome`. A wrong number of tokens is rejected before
    /// anything changes.
    pub fn update(
        &mut self,
        sampled: &[u32],
        outcome: &mut StepOutcome,
    ) -> Result<(), RunnerError> {
        let expected = self.plan.seqs.iter().filter(|p| p.samples).count();
        if sampled.len() != expected {
            return Err(RunnerError::BadBatch(format!(
                "runner returned {} sampled tokens for {expected} sampling sequences",
                sampled.len()
            )));
        }
        outcome.tokens.reserve(expected);
        let mut next_sample = sampled.iter();
        for planned in &self.plan.seqs {
            let state = self.requests.at_mut(planned.slot);
            state.num_computed_tokens += planned.num_new_tokens;
            if !planned.samples {
                continue;
            }
            let Some(&token) = next_sample.next() else {
                break;
            };
            state.tokens.push(token);
            outcome.tokens.push((state.id, token));
            let num_output = state.num_output_tokens();
            if num_output == 1 {
                outcome.first_tokens.push(state.id);
            }
            // vLLM's order: the length limit wins over EOS.
            let reason = if num_output >= state.max_tokens {
                Some(FinishReason::Length)
            } else if !state.ignore_eos && state.eos_token_id == Some(token) {
                Some(FinishReason::Stop)
            } else {
                None
            };
            if let Some(reason) = reason {
                state.status = RequestStatus::Finished(reason);
                self.kv.free(&mut state.blocks);
                outcome.finished.push((state.id, reason));
                self.finished_slots.push(planned.slot);
            }
        }
        if !self.finished_slots.is_empty() {
            let requests = &self.requests;
            self.running
                .retain(|&slot| !matches!(requests.at(slot).status, RequestStatus::Finished(_)));
            for slot in self.finished_slots.drain(..) {
                self.requests.remove(slot);
            }
        }
        Ok(())
    }
}
