//! Workloads: where requests come from and when.
//!
//! Contract: a workload is seeded and deterministic. The loop asks for the
//! initial arrivals, then reports each finished request so closed-loop
//! workloads can send the client's next one. Arrival times are absolute
//! seconds on the run's clock; an arrival in the past (during a step) joins
//! before the next step.
//!
//! Arrival patterns: [`ClosedLoop`], [`OpenLoop`] (Poisson or fixed rate),
//! [`TraceReplay`] (this crate's CSV/JSONL, or a public production trace,
//! Azure LLM 2023, Mooncake or BurstGPT, read by [`load_trace_as`]: see
//! [`trace`]), [`Scripted`] (explicit times or "after request X finishes").
//! Contents of synthetic requests come from a [`RequestMaker`]: unique or
//! shared-prefix prompts ([`PromptLayout`]), optionally spread over salted
//! tenants ([`Tenants`]), with token ids from a [`PromptSource`].

mod closed_loop;
mod contents;
mod open_loop;
mod prompts;
mod replay;
mod scripted;
pub mod trace;
mod words;

pub use closed_loop::{ClosedLoop, ClosedLoopConfig};
pub use contents::{PromptLayout, RequestMaker, Tenants};
pub use open_loop::{ArrivalProcess, OpenLoop, OpenLoopConfig};
pub use prompts::{PromptError, PromptSource, QWEN3_REGULAR_VOCAB};
pub use replay::TraceReplay;
pub use scripted::{ScriptEntry, Scripted, Trigger};
pub use trace::{
    load_trace, load_trace_as, parse_trace_as, TraceEntry, TraceError, TraceFormat, TraceLoad,
    TraceOptions, TracePrompt, TraceWindow, MOONCAKE_BLOCK_TOKENS,
};

use engine::Request;
use thiserror::Error;

#[derive(Debug, Clone, PartialEq)]
pub struct Arrival {
    /// `request.arrival_time` is the arrival time in seconds.
    pub request: Request,
    /// Which engine (replica) gets it.
    pub engine: usize,
    /// Copied into the request's record.
    pub tag: String,
}

pub trait Workload {
    /// Arrivals known before the run starts (open loop: all of them).
    fn initial(&mut self) -> Vec<Arrival>;
    /// A request finished at `now`; closed-loop workloads return the next one(s).
    fn on_finish(&mut self, id: u64, now: f64) -> Vec<Arrival>;
}

#[derive(Debug, Error)]
pub enum WorkloadError {
    #[error("workload setting {setting} = {value} is invalid: {fix}")]
    Invalid {
        setting: &'static str,
        value: String,
        fix: String,
    },
    #[error("scripted request {id}: {message}")]
    Script { id: u64, message: String },
    #[error(transparent)]
    Prompt(#[from] PromptError),
    #[error(transparent)]
    Trace(#[from] TraceError),
}

impl WorkloadError {
    pub(crate) fn invalid(
        setting: &'static str,
        value: impl ToString,
        fix: impl Into<String>,
    ) -> Self {
        Self::Invalid {
            setting,
            value: value.to_string(),
            fix: fix.into(),
        }
    }
    pub(crate) fn script(id: u64, message: impl Into<String>) -> Self {
        Self::Script {
            id,
            message: message.into(),
        }
    }
}
