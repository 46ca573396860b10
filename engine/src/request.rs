//! What a user submits, and why a request ended.
//!
//! Contract: a [`Request`] is immutable once submitted; the engine keeps its
//! progress (computed tokens, outputs, status) in its own state.
//! `EngineCore::add_request` rejects a request that can never run.

use serde::{Deserialize, Serialize};
use thiserror::Error;

/// Caller-chosen request id; unique among the requests an engine knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct RequestId(pub u64);

impl std::fmt::Display for RequestId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0)
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Request {
    pub id: RequestId,
    pub prompt_token_ids: Vec<u32>,
    /// Output tokens to generate (exactly this many when `ignore_eos`).
    pub max_tokens: usize,
    pub ignore_eos: bool,
    /// Token that ends generation early unless `ignore_eos`.
    pub eos_token_id: Option<u32>,
    /// Mixed into the first block's hash only: requests with different salts
    /// (or salted vs. unsalted) never share cached blocks.
    pub cache_salt: Option<String>,
    /// Seconds, on whatever clock drives the engine; informational for the engine.
    pub arrival_time: f64,
}

impl Request {
    /// A request with `ignore_eos` set and no salt: the experiments' default.
    pub fn new(id: u64, prompt_token_ids: Vec<u32>, max_tokens: usize) -> Self {
        Self {
            id: RequestId(id),
            prompt_token_ids,
            max_tokens,
            ignore_eos: true,
            eos_token_id: None,
            cache_salt: None,
            arrival_time: 0.0,
        }
    }

    pub fn with_salt(mut self, salt: impl Into<String>) -> Self {
        self.cache_salt = Some(salt.into());
        self
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FinishReason {
    /// Produced `max_tokens` outputs.
    Length,
    /// Sampled its EOS token.
    Stop,
    Aborted,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum RequestStatus {
    Waiting,
    Running,
    /// Preempted by recompute: back in the waiting queue with no computed tokens.
    Preempted,
    Finished(FinishReason),
}

#[derive(Debug, Error, PartialEq)]
pub enum RequestError {
    #[error("request {0}: the prompt is empty; send at least one token")]
    EmptyPrompt(RequestId),
    #[error("request {0}: max_tokens is 0; ask for at least one output token")]
    NoOutput(RequestId),
    #[error(
        "request {id}: prompt ({prompt}) + max_tokens ({max_tokens}) exceeds max_model_len ({max_model_len}); \
         shorten the prompt or lower max_tokens"
    )]
    TooLong {
        id: RequestId,
        prompt: usize,
        max_tokens: usize,
        max_model_len: usize,
    },
    #[error(
        "request {id}: prompt token {position} is id {token}, outside the model's vocabulary \
         (ids 0..{vocab}); draw prompt ids below {vocab}, or use the model's own tokenizer"
    )]
    TokenOutOfVocab {
        id: RequestId,
        position: usize,
        token: u32,
        vocab: usize,
    },
    #[error("request {0}: an unfinished request with this id already exists; use a unique id")]
    DuplicateId(RequestId),
    #[error("request {0}: no such unfinished request")]
    Unknown(RequestId),
    #[error(
        "request {id}: {outputs} output token(s) sampled on the prefill engine already reach \
         max_tokens ({max_tokens}); nothing is left to decode, so finish it where it was prefilled"
    )]
    RemoteOutputsComplete {
        id: RequestId,
        outputs: usize,
        max_tokens: usize,
    },
    #[error(
        "request {id}: output token {position} sampled on the prefill engine is its EOS token, \
         so it has finished there; do not send it on"
    )]
    RemoteOutputsStopped { id: RequestId, position: usize },
}
