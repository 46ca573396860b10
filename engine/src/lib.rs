//! servetwin's serving core.
//!
//! The scheduler, the KV-cache manager with prefix caching and the engine loop
//! in this crate are shared, unchanged, by the real engine (CPU or CUDA model
//! runner) and by the simulator (`sim`'s simulated runner). Nothing here reads a
//! clock or does I/O apart from the model runners, the weight loaders and
//! [`date::utc_now`], which only the tools that stamp their records call.
//!
//! Layout: [`config`] (engine settings, vLLM names), [`request`] (what a user
//! submits and its lifecycle), [`kv_cache`] (block pool, hashing, prefix
//! cache), [`scheduler`] (vLLM v1 rules), [`core`] (`EngineCore::step`),
//! [`runner`] (the `ModelRunner` trait and the batch it executes), [`model`]
//! (Qwen3 configuration and weights) and the runners themselves.

pub mod config;
pub mod core;
pub mod date;
pub mod kv_cache;
pub mod model;
pub mod request;
pub mod runner;
pub mod scheduler;
pub mod testing;

pub use config::{ConfigError, EngineConfig, HashAlgo, HashAlgoError};
pub use core::{EngineCore, EngineError, StepOutcome};
pub use request::{FinishReason, Request, RequestError, RequestId};
pub use runner::{
    attention_tile_tokens, gemm_padded_rows, short_chunk_on_decode_path, BatchShape, ModelRunner,
    RunnerError, RunnerOutput, ScheduledBatch, ScheduledSeq, SeqShape, StepCounts,
};
