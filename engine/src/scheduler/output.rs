//! What the scheduler produces: the plan of one step and its outcome.
//!
//! Contract: these types depend only on requests and batch shapes, never on
//! the engine core, so imports run one way (`core` -> `scheduler::output`).
//! [`StepPlan`] is what [`Scheduler::schedule`](super::Scheduler::schedule)
//! decided for one step (its buffers are reused from step to step).
//! [`StepOutcome`] is everything the step did: the scheduler fills in the
//! preemptions, admissions, tokens and finishes (schedule, then
//! [`Scheduler::update`](super::Scheduler::update)); the engine core adds the
//! batch's shape, the KV blocks in use and the runner's modelled time. The
//! same split as vLLM v1's `core/sched/output.py`.

use crate::request::{FinishReason, RequestId};
use crate::runner::BatchShape;

/// One sequence's share of the planned step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PlannedSeq {
    pub slot: u32,
    pub num_new_tokens: usize,
    /// The step computes the request's last known token, so it samples.
    pub samples: bool,
}

/// What [`Scheduler::schedule`](super::Scheduler::schedule) decided; buffers
/// are reused across steps.
#[derive(Debug, Default)]
pub struct StepPlan {
    pub seqs: Vec<PlannedSeq>,
    pub num_tokens: usize,
    pub preempted: Vec<RequestId>,
    /// First admissions, with their cached prompt tokens.
    pub admitted: Vec<(RequestId, usize)>,
    /// Re-admissions of preempted requests, with their cached tokens.
    pub readmitted: Vec<(RequestId, usize)>,
}

impl StepPlan {
    /// Empties the plan, keeping its allocations.
    pub(super) fn clear(&mut self) {
        self.seqs.clear();
        self.num_tokens = 0;
        self.preempted.clear();
        self.admitted.clear();
        self.readmitted.clear();
    }
}

/// Everything one step did.
#[derive(Debug, Clone, Default)]
pub struct StepOutcome {
    /// The scheduled batch's composition (empty when nothing was scheduled).
    pub shape: BatchShape,
    /// Every output token produced this step, first tokens included.
    pub tokens: Vec<(RequestId, u32)>,
    /// Requests whose first output token was produced this step.
    pub first_tokens: Vec<RequestId>,
    pub finished: Vec<(RequestId, FinishReason)>,
    pub preempted: Vec<RequestId>,
    /// Requests admitted from the waiting queue this step, with the prompt
    /// tokens they found in the prefix cache. First admissions only; see
    /// `readmitted` for preempted requests coming back.
    pub admitted: Vec<(RequestId, usize)>,
    /// Preempted requests admitted again this step, with the tokens (prompt
    /// and earlier outputs) they found in the prefix cache.
    pub readmitted: Vec<(RequestId, usize)>,
    /// KV blocks held by requests after the step (null block excluded).
    pub kv_blocks_used: usize,
    /// Step time predicted by the runner's cost model (simulated runner only).
    pub modeled_seconds: Option<f64>,
}
