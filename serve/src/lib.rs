//! An OpenAI-compatible HTTP server in front of `engine::EngineCore`.
//!
//! Contract: [`start`] takes an engine (any `ModelRunner`; `exp serve --mode
//! sim` gives it `sim::SimRunner` priced by the calibrated cost model), or
//! [`start_with`] a function that builds one on the engine loop thread
//! (`exp serve --mode real`: the CPU or CUDA runner, which must stay on the
//! thread that made it), and a [`ServerConfig`], binds, and serves `/v1/completions`,
//! `/v1/chat/completions` (streaming or not), `/v1/models`, `/health` and
//! `/metrics` (vLLM's metric names) until [`RunningServer::shutdown`] or a
//! signal drains it. One thread owns the engine ([`engine_loop`]); handlers
//! reach it through channels ([`handle`]). docs/serve.md describes the API.
//!
//! Layout: [`openai`] reads request bodies, [`response`] builds response
//! bodies and chunks, [`text`] turns text into tokens and back, [`routes`]
//! are the handlers, [`metrics`] the Prometheus exposition, [`server`] the
//! lifecycle, [`error`] the error types.

pub mod engine_loop;
pub mod error;
pub mod handle;
pub mod metrics;
pub mod openai;
pub mod response;
pub mod routes;
pub mod server;
pub mod text;

pub use error::{ApiError, ServeError};
pub use handle::EngineLimits;
pub use server::{
    serve_blocking, serve_blocking_with, start, start_with, RunningServer, ServerConfig,
    ShutdownSignals,
};
pub use text::TextCodec;
