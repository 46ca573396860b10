//! A step's record from its outcome: shared by every loop that drives engines.

use crate::records::StepRecord;
use engine::{BatchShape, EngineCore, FinishReason, ModelRunner};

/// The engine's queues and KV cache after a step, as its record keeps them.
pub(crate) struct Occupancy {
    pub kv_blocks_used: usize,
    pub kv_blocks_total: usize,
    pub waiting_seqs: usize,
    pub running_seqs: usize,
}

impl Occupancy {
    /// `engine` after a step that left `kv_blocks_used` blocks held.
    pub(crate) fn of<R: ModelRunner>(engine: &EngineCore<R>, kv_blocks_used: usize) -> Self {
        Self {
            kv_blocks_used,
            // The pool's block 0 is the null block, never handed out.
            kv_blocks_total: engine.kv_cache().num_blocks().saturating_sub(1),
            waiting_seqs: engine.num_waiting(),
            running_seqs: engine.num_running(),
        }
    }
}

/// The record of a step of `engine` from `start` to `end`; the full shape is
/// kept only when `keep_shape`.
pub(crate) fn step_record(
    engine: usize,
    (start, end): (f64, f64),
    shape: BatchShape,
    occupancy: Occupancy,
    keep_shape: bool,
) -> StepRecord {
    let counts = shape.counts();
    let shape = if keep_shape {
        shape
    } else {
        BatchShape::default()
    };
    StepRecord {
        engine,
        start_s: start,
        duration_s: end - start,
        scheduled_tokens: counts.tokens,
        prefill_seqs: counts.prefill_seqs,
        decode_seqs: counts.decode_seqs,
        prefill_tokens: counts.prefill_tokens,
        context_tokens: counts.context_tokens,
        max_context: counts.max_context,
        kv_blocks_used: occupancy.kv_blocks_used,
        kv_blocks_total: occupancy.kv_blocks_total,
        waiting_seqs: occupancy.waiting_seqs,
        running_seqs: occupancy.running_seqs,
        shape,
    }
}

/// A finish reason as the records spell it.
pub(crate) fn finish_reason(reason: FinishReason) -> &'static str {
    match reason {
        FinishReason::Length => "length",
        FinishReason::Stop => "stop",
        FinishReason::Aborted => "aborted",
    }
}
