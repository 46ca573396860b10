//! Per-request engine state, kept in a slab indexed by dense slot numbers so
//! the per-step loops do no hash-map lookups.

use crate::kv_cache::SeqBlocks;
use crate::request::{Request, RequestId, RequestStatus};
use std::collections::HashMap;

/// One request as the engine tracks it.
#[derive(Debug)]
pub struct RequestState {
    pub id: RequestId,
    /// Prompt followed by the outputs so far; capacity reserved up front so
    /// appending outputs never reallocates.
    pub tokens: Vec<u32>,
    pub num_prompt_tokens: usize,
    pub max_tokens: usize,
    pub ignore_eos: bool,
    pub eos_token_id: Option<u32>,
    pub cache_salt: Option<String>,
    pub arrival_time: f64,
    /// Tokens whose K/V is in the request's blocks (computed or cache hits).
    pub num_computed_tokens: usize,
    /// Leading tokens whose K/V another engine computed and sent (vLLM's
    /// remote prefill); they count as computed at the first admission, which
    /// resets this to 0, so a later preemption recomputes them.
    pub num_external_tokens: usize,
    pub status: RequestStatus,
    pub blocks: SeqBlocks,
    pub num_preemptions: u32,
}

impl RequestState {
    pub fn new(mut request: Request) -> Self {
        let num_prompt_tokens = request.prompt_token_ids.len();
        let mut tokens = std::mem::take(&mut request.prompt_token_ids);
        tokens.reserve_exact(request.max_tokens);
        Self {
            id: request.id,
            tokens,
            num_prompt_tokens,
            max_tokens: request.max_tokens,
            ignore_eos: request.ignore_eos,
            eos_token_id: request.eos_token_id,
            cache_salt: request.cache_salt,
            arrival_time: request.arrival_time,
            num_computed_tokens: 0,
            num_external_tokens: 0,
            status: RequestStatus::Waiting,
            blocks: SeqBlocks::default(),
            num_preemptions: 0,
        }
    }

    pub fn num_output_tokens(&self) -> usize {
        self.tokens.len() - self.num_prompt_tokens
    }
}

/// Unfinished requests by slot, with an id index used only at the edges
/// (`add_request`, `abort`, introspection).
#[derive(Debug, Default)]
pub struct RequestSlab {
    slots: Vec<Option<RequestState>>,
    free_slots: Vec<u32>,
    index: HashMap<RequestId, u32>,
}

impl RequestSlab {
    pub fn insert(&mut self, state: RequestState) -> u32 {
        let id = state.id;
        let slot = match self.free_slots.pop() {
            Some(slot) => {
                self.slots[slot as usize] = Some(state);
                slot
            }
            None => {
                self.slots.push(Some(state));
                (self.slots.len() - 1) as u32
            }
        };
        self.index.insert(id, slot);
        slot
    }

    pub fn remove(&mut self, slot: u32) -> Option<RequestState> {
        let state = self.slots.get_mut(slot as usize)?.take()?;
        self.index.remove(&state.id);
        self.free_slots.push(slot);
        Some(state)
    }

    pub fn slot_of(&self, id: RequestId) -> Option<u32> {
        self.index.get(&id).copied()
    }

    pub fn contains(&self, id: RequestId) -> bool {
        self.index.contains_key(&id)
    }

    pub fn len(&self) -> usize {
        self.index.len()
    }

    pub fn by_id(&self, id: RequestId) -> Option<&RequestState> {
        self.get(self.slot_of(id)?)
    }

    pub fn get(&self, slot: u32) -> Option<&RequestState> {
        self.slots.get(slot as usize)?.as_ref()
    }

    /// The state in an occupied slot. Slots in the running and waiting queues
    /// are always occupied; a miss is an engine bug, not a user error.
    pub fn at(&self, slot: u32) -> &RequestState {
        self.get(slot)
            .expect("scheduler queues hold only occupied slots")
    }

    pub fn at_mut(&mut self, slot: u32) -> &mut RequestState {
        self.slots
            .get_mut(slot as usize)
            .and_then(Option::as_mut)
            .expect("scheduler queues hold only occupied slots")
    }
}
