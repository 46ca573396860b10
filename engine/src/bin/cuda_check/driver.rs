//! A miniature scheduler that drives any runner through several prompts at
//! once with a small token budget, so steps mix chunked prefills and decodes,
//! and (when every sequence is decoding) become decode-only batches that the
//! CUDA runner runs as graphs. Blocks come from a shuffled pool, so tables are
//! not contiguous.

use engine::runner::cpu::CpuRunner;
use engine::runner::cuda::CudaRunner;
use engine::{ModelRunner, RequestId, RunnerError, ScheduledBatch, ScheduledSeq};
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::SeedableRng;

/// A runner whose last step's logits can be read.
pub trait LogitsRunner: ModelRunner {
    fn logits(&mut self) -> Result<Vec<Vec<f32>>, RunnerError>;
}

impl LogitsRunner for CudaRunner {
    fn logits(&mut self) -> Result<Vec<Vec<f32>>, RunnerError> {
        self.last_logits()
    }
}

impl LogitsRunner for CpuRunner {
    fn logits(&mut self) -> Result<Vec<Vec<f32>>, RunnerError> {
        Ok(self.last_logits().to_vec())
    }
}

/// One prompt's outcome: the token sampled at every step and its logits.
pub struct Trace {
    pub tokens: Vec<u32>,
    pub logits: Vec<Vec<f32>>,
}

/// Runs all `prompts` to `steps` sampled tokens each. With `forced`, sequence
/// `i` continues with `forced[i]` (teacher forcing) instead of its own tokens.
pub fn generate(
    runner: &mut dyn LogitsRunner,
    prompts: &[Vec<u32>],
    steps: usize,
    budget: usize,
    block_size: usize,
    forced: Option<&[Vec<u32>]>,
    keep_logits: bool,
) -> Result<Vec<Trace>, RunnerError> {
    let mut pool: Vec<u32> = (1..runner.num_kv_blocks() as u32).collect();
    pool.shuffle(&mut StdRng::seed_from_u64(7));
    let mut tables = Vec::new();
    for p in prompts {
        let need = (p.len() + steps).div_ceil(block_size);
        if pool.len() < need {
            return Err(RunnerError::BadBatch(
                "driver: too few KV blocks for the prompts".into(),
            ));
        }
        tables.push(pool.split_off(pool.len() - need));
    }
    let mut seq_tokens: Vec<Vec<u32>> = prompts.to_vec();
    let mut computed = vec![0usize; prompts.len()];
    let mut traces: Vec<Trace> = prompts
        .iter()
        .map(|_| Trace {
            tokens: Vec::new(),
            logits: Vec::new(),
        })
        .collect();
    while traces.iter().any(|t| t.tokens.len() < steps) {
        let mut left = budget;
        let mut chosen = Vec::new();
        for i in 0..prompts.len() {
            if traces[i].tokens.len() >= steps || left == 0 {
                continue;
            }
            let n = (seq_tokens[i].len() - computed[i]).min(left);
            left -= n;
            chosen.push((i, n));
        }
        let batch = ScheduledBatch {
            seqs: chosen
                .iter()
                .map(|&(i, n)| ScheduledSeq {
                    request_id: RequestId(i as u64),
                    token_ids: &seq_tokens[i][computed[i]..computed[i] + n],
                    start_pos: computed[i],
                    block_table: &tables[i],
                    samples: computed[i] + n == seq_tokens[i].len(),
                })
                .collect(),
            block_size,
        };
        let out = runner.execute(&batch)?;
        let logits = if keep_logits {
            runner.logits()?
        } else {
            Vec::new()
        };
        let mut k = 0;
        for &(i, n) in &chosen {
            computed[i] += n;
            if computed[i] == seq_tokens[i].len() {
                let tok = out.sampled[k];
                if keep_logits {
                    traces[i].logits.push(logits[k].clone());
                }
                k += 1;
                let step = traces[i].tokens.len();
                traces[i].tokens.push(tok);
                let next = forced.map(|f| f[i][step]).unwrap_or(tok);
                seq_tokens[i].push(next);
            }
        }
    }
    Ok(traces)
}
