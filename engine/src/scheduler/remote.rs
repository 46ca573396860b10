//! Requests prefilled on another engine: the decode side of prefill/decode
//! disaggregation (vLLM v1's KV connector, `do_remote_prefill`).
//!
//! Contract: [`Scheduler::add_remote_prefilled`] queues a request whose
//! prompt, and `outputs` (tokens another engine sampled for it), are known
//! together with their K/V: every token but the last was computed elsewhere
//! and its K/V arrives with the request. The request waits and is admitted
//! like any other (head of line, `max_num_seqs`, budget); at admission it
//! takes its local prefix-cache hits, gets blocks for all its tokens, counts
//! all but the last as computed, and its step computes only the last token
//! (a decode that samples the next output). So with `outputs` empty it
//! recomputes the last prompt token and samples the first output, which is
//! vLLM's rule (`num_computed_tokens = num_tokens - 1` once the K/V is in);
//! with the prefill engine's first token in `outputs`, the first step decodes
//! after it. `outputs` count towards `max_tokens`. The prefix-cache counters
//! count the request's prompt and local hits at admission, as vLLM's
//! decode instance does. Once admitted it is an ordinary request: a
//! preemption recomputes everything locally.

use super::Scheduler;
use crate::request::{Request, RequestError};

impl Scheduler {
    /// Queues a request whose prompt and `outputs` were computed on another
    /// engine (see the module docs). Refuses what `add_request` refuses, and
    /// `outputs` that already finish the request (as many as `max_tokens`,
    /// or an EOS token when the request stops at EOS).
    pub fn add_remote_prefilled(
        &mut self,
        request: Request,
        outputs: &[u32],
    ) -> Result<(), RequestError> {
        let id = request.id;
        if outputs.len() >= request.max_tokens && request.max_tokens > 0 {
            return Err(RequestError::RemoteOutputsComplete {
                id,
                outputs: outputs.len(),
                max_tokens: request.max_tokens,
            });
        }
        if !request.ignore_eos {
            if let Some(eos) = request.eos_token_id {
                if let Some(position) = outputs.iter().position(|&t| t == eos) {
                    return Err(RequestError::RemoteOutputsStopped { id, position });
                }
            }
        }
        let slot = self.queue_request(request)?;
        let state = self.requests.at_mut(slot);
        state.tokens.extend_from_slice(outputs);
        state.num_external_tokens = state.tokens.len() - 1;
        Ok(())
    }
}
