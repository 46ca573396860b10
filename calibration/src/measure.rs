//! Measuring a model runner over a grid of synthetic batches.
//!
//! Contract: [`measure`] executes each grid batch on the runner directly (no
//! scheduler), `warmup` times untimed and then `reps` times timed with the wall
//! clock, and keeps the median. It relies on `ModelRunner::execute` returning
//! only once the device work of the step is complete, which every real runner
//! must do anyway for wall-clock step times to mean anything. Sequences get
//! disjoint KV blocks; their contents are whatever the cache holds, which
//! changes no step time.

use crate::fit::Sample;
use engine::BatchShape;
use engine::{ModelRunner, RequestId, RunnerError, ScheduledBatch, ScheduledSeq, SeqShape};
use std::time::Instant;
use thiserror::Error;

#[derive(Debug, Error)]
pub enum MeasureError {
    #[error(transparent)]
    Runner(#[from] RunnerError),
    #[error(
        "grid point {point} needs {needed} KV blocks but the runner has {available}; \
         shrink the grid or give the runner more blocks"
    )]
    TooFewBlocks {
        point: String,
        needed: usize,
        available: usize,
    },
    #[error("--reps 0: a grid point needs at least one timed execution; give --reps 1 or more")]
    NoReps,
}

/// The batch shapes to measure.
#[derive(Debug, Clone, PartialEq)]
pub struct Grid {
    pub decode_batches: Vec<usize>,
    pub decode_contexts: Vec<usize>,
    pub prefill_tokens: Vec<usize>,
    pub prefill_cached: Vec<usize>,
    /// (prefill chunk tokens, decodes riding along) for mixed batches, at
    /// context `mixed_context`.
    pub mixed: Vec<(usize, usize)>,
    /// (prefill chunks, tokens each, decodes riding along) for mixed batches
    /// with several prefill chunks (fresh prompts), decodes at `mixed_context`.
    pub multi_prefill: Vec<(usize, usize, usize)>,
    pub mixed_context: usize,
    /// Longest sequence a grid point may build.
    pub max_model_len: usize,
}

impl Grid {
    /// The grid for a real GPU and the experiments' settings (max_model_len 4096).
    pub fn gpu_default() -> Self {
        Self {
            decode_batches: vec![1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 192, 256],
            decode_contexts: vec![64, 300, 1024, 3000],
            prefill_tokens: vec![16, 32, 64, 128, 256, 512, 768, 1024, 1536, 2048, 3072, 4096],
            prefill_cached: vec![0, 512, 1024, 2048, 3000],
            mixed: vec![
                (64, 1),
                (256, 1),
                (512, 1),
                (1024, 1),
                (2047, 1),
                (256, 16),
                (512, 16),
                (1024, 64),
                (1984, 64),
            ],
            multi_prefill: vec![
                (2, 255, 2),
                (4, 255, 4),
                (8, 255, 8),
                (12, 255, 4),
                (16, 127, 16),
                (4, 511, 0),
                (8, 63, 32),
            ],
            mixed_context: 600,
            max_model_len: 4096,
        }
    }

    /// A small grid for CPU runners and tests.
    pub fn small(max_model_len: usize) -> Self {
        Self {
            decode_batches: vec![1, 2, 4, 8, 16],
            decode_contexts: vec![16, 64, 200],
            prefill_tokens: vec![8, 16, 32, 64, 128, 256],
            prefill_cached: vec![0, 64],
            mixed: vec![(32, 1), (64, 4), (128, 2)],
            multi_prefill: vec![(3, 31, 2)],
            mixed_context: 48,
            max_model_len,
        }
    }

    /// Every batch shape of the grid, in measurement order.
    pub fn shapes(&self) -> Vec<BatchShape> {
        let decode = |ctx: usize| SeqShape {
            new_tokens: 1,
            context_before: ctx as u32,
            samples: true,
        };
        let mut out = Vec::new();
        for &l in &self.decode_contexts {
            for &b in &self.decode_batches {
                if l < self.max_model_len {
                    out.push(BatchShape {
                        seqs: vec![decode(l); b],
                    });
                }
            }
        }
        for &c in &self.prefill_cached {
            for &t in &self.prefill_tokens {
                if c + t <= self.max_model_len {
                    out.push(BatchShape {
                        seqs: vec![SeqShape {
                            new_tokens: t as u32,
                            context_before: c as u32,
                            samples: true,
                        }],
                    });
                }
            }
        }
        for &(t, b) in &self.mixed {
            let mut seqs = vec![decode(self.mixed_context); b];
            seqs.push(SeqShape {
                new_tokens: t as u32,
                context_before: 0,
                samples: false,
            });
            out.push(BatchShape { seqs });
        }
        for &(chunks, t, b) in &self.multi_prefill {
            let mut seqs = vec![decode(self.mixed_context); b];
            seqs.extend((0..chunks).map(|_| SeqShape {
                new_tokens: t as u32,
                context_before: 0,
                samples: false,
            }));
            out.push(BatchShape { seqs });
        }
        out
    }
}

/// Runs the grid on `runner`; `on_point` is called after each grid point
/// (for progress bars).
pub fn measure<R: ModelRunner>(
    runner: &mut R,
    grid: &Grid,
    block_size: usize,
    warmup: usize,
    reps: usize,
    mut on_point: impl FnMut(usize, usize),
) -> Result<Vec<Sample>, MeasureError> {
    if reps == 0 {
        return Err(MeasureError::NoReps);
    }
    let shapes = grid.shapes();
    let mut samples = Vec::with_capacity(shapes.len());
    for (i, shape) in shapes.iter().enumerate() {
        let seconds = time_shape(runner, shape, block_size, warmup, reps)?;
        samples.push(Sample {
            shape: shape.clone(),
            seconds,
        });
        on_point(i + 1, shapes.len());
    }
    Ok(samples)
}

/// Median wall time of executing one batch of `shape`.
pub fn time_shape<R: ModelRunner>(
    runner: &mut R,
    shape: &BatchShape,
    block_size: usize,
    warmup: usize,
    reps: usize,
) -> Result<f64, MeasureError> {
    // Zero timed runs has no median; refused rather than run once silently.
    if reps == 0 {
        return Err(MeasureError::NoReps);
    }
    let available = runner.num_kv_blocks().saturating_sub(1);
    let per_seq: Vec<usize> = shape
        .seqs
        .iter()
        .map(|s| (s.context_before + s.new_tokens) as usize)
        .map(|len| len.div_ceil(block_size))
        .collect();
    let needed: usize = per_seq.iter().sum();
    if needed > available {
        return Err(MeasureError::TooFewBlocks {
            point: format!("{} seqs, {} tokens", shape.seqs.len(), shape.num_tokens()),
            needed,
            available,
        });
    }
    // Disjoint block tables after the null block; token ids spread over a
    // small range that every vocabulary has.
    let mut next_block = 1u32;
    let tables: Vec<Vec<u32>> = per_seq
        .iter()
        .map(|&n| {
            let t: Vec<u32> = (next_block..next_block + n as u32).collect();
            next_block += n as u32;
            t
        })
        .collect();
    let tokens: Vec<Vec<u32>> = shape
        .seqs
        .iter()
        .enumerate()
        .map(|(i, s)| {
            (0..s.new_tokens)
                .map(|j| (i as u32 * 7919 + j * 31) % 256 + 1)
                .collect()
        })
        .collect();
    let batch = ScheduledBatch {
        seqs: shape
            .seqs
            .iter()
            .enumerate()
            .map(|(i, s)| ScheduledSeq {
                request_id: RequestId(i as u64),
                token_ids: &tokens[i],
                start_pos: s.context_before as usize,
                block_table: &tables[i],
                samples: s.samples,
            })
            .collect(),
        block_size,
    };
    for _ in 0..warmup {
        runner.execute(&batch)?;
    }
    let mut times = Vec::with_capacity(reps);
    for _ in 0..reps {
        let start = Instant::now();
        runner.execute(&batch)?;
        times.push(start.elapsed().as_secs_f64());
    }
    Ok(crate::fit::median(&times))
}
