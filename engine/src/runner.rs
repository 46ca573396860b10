//! The boundary between the scheduler and whatever computes a batch.
//!
//! Contract: [`ModelRunner::execute`] receives one scheduled batch. Each
//! [`ScheduledSeq`] computes `token_ids` at positions
//! `start_pos .. start_pos + token_ids.len()`, attending to the `start_pos`
//! tokens already in its KV blocks (computed earlier or found in the prefix
//! cache) and to its own new tokens causally. The runner writes the new K/V
//! into the slots given by `block_table` (position `p` lives in block
//! `block_table[p / block_size]`, offset `p % block_size`), for every sequence of
//! a layer before that layer's attention, because a sequence may read blocks
//! that another sequence of the same batch writes (prefix-cache hit on a block
//! scheduled in the same step). It returns one sampled token per sequence with
//! `samples == true`, in batch order.
//!
//! [`BatchShape`] is the batch's composition without token values: what cost
//! models and step records need.
//!
//! `&mut R` and `Box<R>` are runners whenever `R` is (`R` may be
//! `dyn ModelRunner`), so an engine can borrow a runner that outlives it, or
//! own one picked at run time, without a forwarding type.

use crate::request::RequestId;
use serde::{Deserialize, Serialize};
use thiserror::Error;

pub mod attention_choice;
pub mod cpu;
#[cfg(feature = "cuda")]
pub mod cuda;
pub mod gemm_choice;

/// One sequence's share of a step.
#[derive(Debug, Clone, Copy)]
pub struct ScheduledSeq<'a> {
    pub request_id: RequestId,
    /// Tokens computed this step.
    pub token_ids: &'a [u32],
    /// Tokens of this sequence already in the KV cache (its context).
    pub start_pos: usize,
    /// KV block ids covering at least `start_pos + token_ids.len()` positions.
    pub block_table: &'a [u32],
    /// Whether the last computed token yields an output token this step
    /// (false for a prefill chunk that does not reach the end of the prompt).
    pub samples: bool,
}

#[derive(Debug, Clone)]
pub struct ScheduledBatch<'a> {
    pub seqs: Vec<ScheduledSeq<'a>>,
    pub block_size: usize,
}

impl ScheduledBatch<'_> {
    pub fn num_tokens(&self) -> usize {
        self.seqs.iter().map(|s| s.token_ids.len()).sum()
    }

    pub fn shape(&self) -> BatchShape {
        BatchShape {
            seqs: self
                .seqs
                .iter()
                .map(|s| SeqShape {
                    new_tokens: s.token_ids.len() as u32,
                    context_before: s.start_pos as u32,
                    samples: s.samples,
                })
                .collect(),
        }
    }
}

/// A sequence's share of a step, without token values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SeqShape {
    pub new_tokens: u32,
    pub context_before: u32,
    pub samples: bool,
}

impl SeqShape {
    /// A decode: one new token after a non-empty context, producing a token.
    pub fn is_decode(&self) -> bool {
        self.new_tokens == 1 && self.context_before > 0 && self.samples
    }
}

/// Rows the CUDA runner's layer GEMMs run with on cuBLAS: rounded up to a
/// multiple of 16 up to 64 rows and of 64 beyond. cuBLAS picks a kernel on
/// the host the first time it sees a shape (measured on the H200: a step with
/// a new token count took 16.6 ms where it takes 8.8 ms afterwards), so few
/// distinct shapes, all of which a warm-up can run, keep every later step at
/// its steady cost. The padding rows compute garbage that no later kernel
/// reads; the runner's workspace is sized for them.
pub fn gemm_padded_rows(m: usize) -> usize {
    if m <= 64 {
        m.next_multiple_of(16)
    } else {
        m.next_multiple_of(64)
    }
}

/// New tokens of one prefill attention tile of the CUDA runner: its tiles
/// hold 64 rows of (token, query head of a KV head's group), so as many whole
/// tokens as fit, `64 / group` (a group of 5 takes 12 tokens in 60 rows and
/// leaves 4 rows masked).
pub fn attention_tile_tokens(num_q_heads: usize, num_kv_heads: usize) -> usize {
    (64 / gqa_group(num_q_heads, num_kv_heads)).max(1)
}

/// Query heads per KV head, at least 1 (a valid Qwen3 shape's heads divide
/// evenly).
pub fn gqa_group(num_q_heads: usize, num_kv_heads: usize) -> usize {
    (num_q_heads / num_kv_heads.max(1)).max(1)
}

/// Whether the CUDA runner runs a prefill chunk of `new_tokens` after
/// `context_before` cached tokens through its decode attention, one entry
/// per token, rather than as tiles: a chunk that fits one tile
/// ([`attention_tile_tokens`]) over a cached context, whose tile would walk
/// the whole context with one block per KV head. Cost models use the same
/// rule to price such a chunk as the engine runs it.
pub fn short_chunk_on_decode_path(
    context_before: usize,
    new_tokens: usize,
    tile_tokens: usize,
) -> bool {
    context_before > 0 && new_tokens <= tile_tokens
}

/// Composition of one step's batch: what a cost model prices.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BatchShape {
    pub seqs: Vec<SeqShape>,
}

/// Every count of one step's batch, from one pass over its sequences
/// ([`BatchShape::counts`]). A sequence is a decode by
/// [`SeqShape::is_decode`]; any other (a prompt chunk, a recompute after
/// preemption) is a prefill.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StepCounts {
    /// Sequences in the batch.
    pub seqs: usize,
    /// New tokens computed: the step's scheduled tokens.
    pub tokens: usize,
    pub decode_seqs: usize,
    pub prefill_seqs: usize,
    /// New tokens of the prefill sequences.
    pub prefill_tokens: usize,
    /// Sequences that sample a token.
    pub sampled: usize,
    /// Context after the step (`context_before + new_tokens`), summed over
    /// the sequences: the keys attention reads.
    pub context_tokens: usize,
    /// The longest context after the step.
    pub max_context: usize,
}

impl StepCounts {
    /// A non-empty batch of decodes only.
    pub fn is_decode_only(&self) -> bool {
        self.seqs > 0 && self.prefill_seqs == 0
    }
}

impl BatchShape {
    /// All of the step's counts in one pass; the accessors below are each
    /// one of them, for callers that need only that one.
    pub fn counts(&self) -> StepCounts {
        let mut c = StepCounts {
            seqs: self.seqs.len(),
            ..StepCounts::default()
        };
        for s in &self.seqs {
            let new = s.new_tokens as usize;
            let context = s.context_before as usize + new;
            c.tokens += new;
            c.context_tokens += context;
            c.max_context = c.max_context.max(context);
            c.sampled += usize::from(s.samples);
            if s.is_decode() {
                c.decode_seqs += 1;
            } else {
                c.prefill_seqs += 1;
                c.prefill_tokens += new;
            }
        }
        c
    }
    pub fn num_tokens(&self) -> usize {
        self.counts().tokens
    }
    pub fn num_decodes(&self) -> usize {
        self.counts().decode_seqs
    }
    pub fn num_prefills(&self) -> usize {
        self.counts().prefill_seqs
    }
    pub fn prefill_tokens(&self) -> usize {
        self.counts().prefill_tokens
    }
    pub fn num_sampled(&self) -> usize {
        self.counts().sampled
    }
    pub fn is_decode_only(&self) -> bool {
        self.counts().is_decode_only()
    }
}

/// What a runner returns for one batch.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RunnerOutput {
    /// One token per sequence with `samples == true`, in batch order.
    pub sampled: Vec<u32>,
    /// Step duration predicted by a cost model (simulated runner only); real
    /// runners leave it `None` and the wall clock measures the step.
    pub modeled_seconds: Option<f64>,
}

#[derive(Debug, Error)]
pub enum RunnerError {
    #[error("no usable GPU: {0}")]
    NoDevice(String),
    #[error("kernel compilation failed: {message}\n{log}")]
    Compile { message: String, log: String },
    #[error(
        "too little GPU memory for the KV cache: {free_bytes} bytes free after weights, \
         {needed_blocks} blocks needed, {fitting_blocks} fit; raise gpu_memory_utilization or lower max_model_len"
    )]
    OutOfMemory {
        free_bytes: u64,
        needed_blocks: usize,
        fitting_blocks: usize,
    },
    /// The model and the least KV cache exceed the memory (checked at start).
    #[error(transparent)]
    Memory(#[from] crate::model::MemoryError),
    #[error("model: {0}")]
    Model(String),
    /// A device or library call failed: `what` the runner was doing, and the
    /// error it got (cudarc's driver, cuBLAS or NVRTC error, candle's, or a
    /// message where the failure has no error value of its own).
    #[error("device error: {what}")]
    Device {
        what: String,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    #[error("batch rejected: {0}")]
    BadBatch(String),
    /// The SMs asked for cannot be had (the CUDA runner's `sm_count`).
    #[error(transparent)]
    SmCount(#[from] SmCountError),
}

/// Why a runner cannot run on the number of SMs it was asked for.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum SmCountError {
    #[error("an SM count of 0 leaves nothing to run on")]
    Zero,
    #[error("{asked} SMs asked for; the device has {device}")]
    MoreThanDevice { asked: usize, device: usize },
    /// The driver splits SMs in groups of a granularity: `offered` are the
    /// counts it gives (the whole device last).
    #[error(
        "the driver cannot give exactly {asked} SMs; it gives {}",
        offered_text(offered)
    )]
    NotOffered { asked: usize, offered: Vec<usize> },
}

/// `8, 16, 24, ..., 128 or 132`: a list of counts, long runs elided.
fn offered_text(offered: &[usize]) -> String {
    let text = |v: &[usize]| {
        v.iter()
            .map(|n| n.to_string())
            .collect::<Vec<_>>()
            .join(", ")
    };
    match offered {
        [] => "none".into(),
        [one] => one.to_string(),
        [init @ .., last] if init.len() > 6 => format!(
            "{}, ..., {} or {last}",
            text(&init[..3]),
            init[init.len() - 1]
        ),
        [init @ .., last] => format!("{} or {last}", text(init)),
    }
}

/// Executes scheduled batches. Implemented by the CPU reference runner, the
/// CUDA runner and `sim`'s simulated runner.
pub trait ModelRunner {
    /// Blocks of `block_size` tokens in this runner's KV cache, null block included.
    fn num_kv_blocks(&self) -> usize;
    /// Token ids this runner's model embeds (`0..vocab_size`); `EngineCore`
    /// refuses requests with others. `None`: the runner reads no token ids
    /// (a simulated runner), so any id is accepted.
    fn vocab_size(&self) -> Option<usize> {
        None
    }
    fn execute(&mut self, batch: &ScheduledBatch<'_>) -> Result<RunnerOutput, RunnerError>;
    /// The engine had nothing to run for `seconds` before its next step
    /// (the simulator says so; a real runner lives the time and ignores it).
    fn idle(&mut self, seconds: f64) {
        let _ = seconds;
    }
}

/// A borrowed runner serves an engine while its owner keeps it (weights and
/// KV cache outlive the engine, so the next engine can reuse them).
impl<R: ModelRunner + ?Sized> ModelRunner for &mut R {
    fn num_kv_blocks(&self) -> usize {
        (**self).num_kv_blocks()
    }
    fn vocab_size(&self) -> Option<usize> {
        (**self).vocab_size()
    }
    fn execute(&mut self, batch: &ScheduledBatch<'_>) -> Result<RunnerOutput, RunnerError> {
        (**self).execute(batch)
    }
    fn idle(&mut self, seconds: f64) {
        (**self).idle(seconds)
    }
}

/// A boxed runner, `Box<dyn ModelRunner>` included: the runner kind can be
/// chosen at run time without a wrapper type.
impl<R: ModelRunner + ?Sized> ModelRunner for Box<R> {
    fn num_kv_blocks(&self) -> usize {
        (**self).num_kv_blocks()
    }
    fn vocab_size(&self) -> Option<usize> {
        (**self).vocab_size()
    }
    fn execute(&mut self, batch: &ScheduledBatch<'_>) -> Result<RunnerOutput, RunnerError> {
        (**self).execute(batch)
    }
    fn idle(&mut self, seconds: f64) {
        (**self).idle(seconds)
    }
}

#[cfg(test)]
mod tests;
