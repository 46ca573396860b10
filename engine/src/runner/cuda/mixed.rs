//! Steps that are not decode-only, timed eagerly and piecewise-graphed
//! (`engine-bench --mixed`): the wall time of whole `execute` calls of one
//! composition, as the engine loop sees it. A measurement, not a hot path:
//! it fills the contexts once, then every step rewrites the same KV slots.

use super::step::StepPath;
use super::{CudaRunner, CudaTuning};
use crate::runner::{ModelRunner, RunnerError, ScheduledBatch, ScheduledSeq};
use crate::RequestId;
use statrs::statistics::{Data, OrderStatistics};
use std::time::Instant;

/// Steps run before the timed ones in each mode (the first captures the
/// bucket's pieces).
const WARMUP: usize = 5;

/// One step's composition: a prefill chunk of `chunk_tokens` after
/// `chunk_context` cached tokens of its prompt (sampling when
/// `chunk_samples`: the prompt's last chunk), beside `decodes` decodes that
/// each attend to `decode_context` keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MixedStep {
    pub chunk_tokens: usize,
    pub chunk_context: usize,
    pub chunk_samples: bool,
    pub decodes: usize,
    pub decode_context: usize,
}

impl MixedStep {
    /// A 64-token chunk from the middle of a prompt (300 tokens of it
    /// cached, not sampling) beside 8 decodes at 300 keys.
    pub const BENCH: MixedStep = MixedStep {
        chunk_tokens: 64,
        chunk_context: 300,
        chunk_samples: false,
        decodes: 8,
        decode_context: 300,
    };

    /// Whole prompts of 256 to 2,048 tokens in one step: where piecewise
    /// graphs stop paying (`CudaTuning::piecewise_max_tokens`).
    pub const PREFILL_SWEEP: [MixedStep; 4] = [
        Self::prompt(256),
        Self::prompt(512),
        Self::prompt(1024),
        Self::prompt(2048),
    ];

    /// One prompt of `n` tokens, whole, sampling its next token.
    pub const fn prompt(n: usize) -> Self {
        MixedStep {
            chunk_tokens: n,
            chunk_context: 0,
            chunk_samples: true,
            decodes: 0,
            decode_context: 1,
        }
    }

    pub fn num_tokens(&self) -> usize {
        self.chunk_tokens + self.decodes
    }
}

/// Medians (seconds) of the whole step, both ways.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MixedTimes {
    pub eager: f64,
    pub piecewise: f64,
    /// The token bucket the piecewise steps ran from.
    pub bucket: usize,
}

fn tokens(n: usize, vocab: usize, salt: usize) -> Vec<u32> {
    (0..n)
        .map(|i| ((i * 7919 + salt * 104_729 + 13) % vocab) as u32)
        .collect()
}

impl CudaRunner {
    /// Times `reps` steps of `step` eagerly, then as many piecewise-graphed
    /// (with `piecewise_max_tokens` raised to the step's tokens where it is
    /// lower, so that the limit itself can be measured), each mode after
    /// [`WARMUP`] steps; the tuning is restored after. The sequences' KV
    /// blocks are 1, 2, … of the cache. Needs a runner built with
    /// `use_cuda_graphs`; a step the runner cannot take is an error.
    pub fn mixed_step_times(
        &mut self,
        step: &MixedStep,
        reps: usize,
    ) -> Result<MixedTimes, RunnerError> {
        let bs = self.block_size;
        let vocab = self.cfg.vocab_size;
        if step.chunk_tokens == 0 || step.decode_context == 0 {
            return Err(RunnerError::BadBatch(format!(
                "a mixed step needs a chunk and decodes with a context: {step:?}"
            )));
        }
        // Sequence 0 is the chunk's, 1..=decodes the decodes'.
        let ends: Vec<usize> = std::iter::once(step.chunk_context + step.chunk_tokens)
            .chain((0..step.decodes).map(|_| step.decode_context))
            .collect();
        let blocks: Vec<usize> = ends.iter().map(|e| e.div_ceil(bs)).collect();
        if blocks.iter().sum::<usize>() >= self.num_blocks {
            return Err(RunnerError::BadBatch(format!(
                "{step:?} needs {} KV blocks, the runner has {}",
                blocks.iter().sum::<usize>(),
                self.num_blocks - 1
            )));
        }
        let mut next = 1u32;
        let tables: Vec<Vec<u32>> = blocks
            .iter()
            .map(|&n| {
                let t = (next..next + n as u32).collect();
                next += n as u32;
                t
            })
            .collect();
        let prompts: Vec<Vec<u32>> = ends
            .iter()
            .enumerate()
            .map(|(i, &e)| tokens(e, vocab, i))
            .collect();
        // The cached contexts: the chunk's prompt before it, each decode's before its token.
        let cached: Vec<usize> = std::iter::once(step.chunk_context)
            .chain((0..step.decodes).map(|_| step.decode_context - 1))
            .collect();
        let per_step = self.limits.max_tokens;
        for (i, &c) in cached.iter().enumerate() {
            for start in (0..c).step_by(per_step) {
                let n = per_step.min(c - start);
                self.execute(&ScheduledBatch {
                    seqs: vec![ScheduledSeq {
                        request_id: RequestId(i as u64),
                        token_ids: &prompts[i][start..start + n],
                        start_pos: start,
                        block_table: &tables[i],
                        samples: false,
                    }],
                    block_size: bs,
                })?;
            }
        }
        let batch = ScheduledBatch {
            seqs: (0..ends.len())
                .map(|i| ScheduledSeq {
                    request_id: RequestId(i as u64),
                    token_ids: &prompts[i][cached[i]..ends[i]],
                    start_pos: cached[i],
                    block_table: &tables[i],
                    samples: i > 0 || step.chunk_samples,
                })
                .collect(),
            block_size: bs,
        };
        let chosen = self.tuning;
        let eager = CudaTuning {
            piecewise_graphs: false,
            ..chosen
        };
        let piecewise = CudaTuning {
            piecewise_graphs: true,
            piecewise_max_tokens: chosen.piecewise_max_tokens.max(step.num_tokens()),
            ..chosen
        };
        let timed = self
            .time_steps(&batch, eager, reps)
            .and_then(|e| Ok((e, self.time_steps(&batch, piecewise, reps)?)));
        self.set_tuning(chosen)?;
        let ((eager, eager_path), (piecewise, piece_path)) = timed?;
        match (eager_path, piece_path) {
            (StepPath::Eager, StepPath::Piecewise { bucket }) => Ok(MixedTimes {
                eager,
                piecewise,
                bucket,
            }),
            paths => Err(RunnerError::Model(format!(
                "{step:?} ran {paths:?}, not eagerly and piecewise-graphed (graphs off?)"
            ))),
        }
    }

    /// The median wall time of `reps` steps of `batch` under `tuning` after
    /// [`WARMUP`] steps, and the path the last one took.
    fn time_steps(
        &mut self,
        batch: &ScheduledBatch<'_>,
        tuning: CudaTuning,
        reps: usize,
    ) -> Result<(f64, StepPath), RunnerError> {
        self.set_tuning(tuning)?;
        let mut times = Vec::with_capacity(reps);
        for rep in 0..WARMUP + reps.max(1) {
            let t = Instant::now();
            self.execute(batch)?;
            if rep >= WARMUP {
                times.push(t.elapsed().as_secs_f64());
            }
        }
        Ok((Data::new(times).median(), self.last_step_path()))
    }
}
