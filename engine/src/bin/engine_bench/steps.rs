//! The steps `engine-bench` times, on synthetic prompts.
//!
//! Decode ([`decode`]): B sequences prefilled with a prompt, then one token
//! each per step through the CUDA-graph path; the time of a whole `execute`
//! call (metadata copy, graph launch, sampled tokens back), median over
//! [`DECODE_STEPS`] steps after [`DECODE_WARMUP`] warm-up steps. The
//! workload's `context` is the median number of keys those timed steps attend
//! to: the prompt is `context - 25` tokens, so at the default 300 the timed
//! steps attend to 281–320 keys. (Before commit f059cd9 the prompt was 300 tokens
//! and the timed steps attended to 306–345 keys, median 325, under the label
//! 300; `engine.csv`'s `tokens` column is the decode context, so the label
//! now says what the steps attend to, and `--context 325` repeats the old
//! workload.)
//!
//! Prefill ([`prefill`]): one prompt of N tokens in one step, median of 10
//! after 3 warm-ups.
//!
//! Medians are statrs': of an even count (the 40 decode steps, the 10
//! prefills), the mean of the two middle times. (Results before 2026-12-01
//! took the upper of the two.)
//!
//! The runner ([`bench_runner`]) is built on the model's weights as
//! `ModelSpec` resolves them: synthetic ones of seed [`SEED`] are generated
//! on the GPU (no host copy, so 32B needs no 65 GB of host memory).

use crate::args::{Args, MAX_BATCH};
use engine::model::{ModelSpec, ModelWeights};
use engine::runner::cuda::{CudaRunner, CudaRunnerConfig, CudaTuning};
use engine::{ModelRunner, RequestId, RunnerError, ScheduledBatch, ScheduledSeq};
use statrs::statistics::{Data, OrderStatistics};
use std::time::Instant;

pub(crate) const BLOCK_SIZE: usize = 16;
/// Tokens a step of the bench's runner takes (its `max_num_batched_tokens`).
pub(crate) const BUDGET: usize = 3200;
/// Seed of the synthetic weights.
pub(crate) const SEED: u64 = 42;
pub(crate) const DECODE_WARMUP: usize = 5;
pub(crate) const DECODE_STEPS: usize = 40;
/// The decode context timed by default (the `tokens` of `engine.csv`'s decode rows).
pub(crate) const DEFAULT_CONTEXT: usize = 300;
/// Contexts `--context` accepts: a prompt of at least one token, and KV blocks
/// for 256 sequences that fit the H200 with room to spare.
pub(crate) const CONTEXT_RANGE: std::ops::RangeInclusive<usize> =
    (DECODE_WARMUP + DECODE_STEPS / 2 + 1)..=2048;

type Timing = anyhow::Result<f64>;

/// What every timed decode step shares: the model's vocabulary, the runner's
/// token budget (prompts are prefilled in steps of at most this many tokens)
/// and the median context of the timed steps.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Workload {
    pub vocab: usize,
    pub budget: usize,
    context: usize,
}

impl Workload {
    /// A workload whose timed decode steps attend to `context` keys at the
    /// median; an error naming the accepted range otherwise.
    pub fn new(vocab: usize, budget: usize, context: usize) -> Result<Self, String> {
        if !CONTEXT_RANGE.contains(&context) {
            return Err(format!(
                "--context takes the median number of keys a timed decode step attends to, from {} to {}, not {context}",
                CONTEXT_RANGE.start(),
                CONTEXT_RANGE.end()
            ));
        }
        Ok(Self {
            vocab,
            budget,
            context,
        })
    }

    /// Tokens prefilled before the first decode step: the timed steps
    /// (`DECODE_WARMUP..DECODE_WARMUP + DECODE_STEPS`, step `s` attending to
    /// `prompt + s + 1` keys) then centre on `context`.
    pub fn prompt_len(&self) -> usize {
        self.context - DECODE_WARMUP - DECODE_STEPS / 2
    }

    /// The fewest and most keys a timed decode step attends to.
    pub fn timed_keys(&self) -> (usize, usize) {
        let p = self.prompt_len();
        (p + DECODE_WARMUP + 1, p + DECODE_WARMUP + DECODE_STEPS)
    }

    /// KV blocks a decode sequence needs: its prompt, the warm-up and timed
    /// steps' tokens, and one spare.
    pub fn blocks_per_seq(&self) -> usize {
        (self.prompt_len() + DECODE_WARMUP + DECODE_STEPS + 1).div_ceil(BLOCK_SIZE)
    }

    /// Disjoint block tables for `b` decode sequences (block 0, the null block, unused).
    fn tables(&self, b: usize) -> Vec<Vec<u32>> {
        let n = self.blocks_per_seq();
        (0..b)
            .map(|i| (0..n).map(|k| (1 + i * n + k) as u32).collect())
            .collect()
    }
}

/// The bench's runner of `spec` on `sm_count` SMs (the whole GPU: `None`),
/// with `a`'s tuning: KV blocks for [`MAX_BATCH`] decode sequences of `wl`,
/// or, where those do not fit, as many as `gpu_memory_utilization` 0.9
/// leaves room for (steps that need more are then skipped by the caller).
pub(crate) fn bench_runner(
    spec: &ModelSpec,
    weights: &ModelWeights,
    wl: &Workload,
    sm_count: Option<usize>,
    a: &Args,
) -> anyhow::Result<CudaRunner> {
    let rc = CudaRunnerConfig {
        block_size: BLOCK_SIZE,
        num_gpu_blocks: Some(MAX_BATCH * wl.blocks_per_seq() + 8),
        gpu_memory_utilization: 0.9,
        max_num_seqs: MAX_BATCH,
        max_num_batched_tokens: wl.budget,
        max_model_len: 4096,
        use_cuda_graphs: !a.eager,
        device_ordinal: 0,
        sm_count,
    };
    let build =
        |rc: &CudaRunnerConfig| CudaRunner::with_weights(&spec.config, weights.source(), rc);
    let mut r = match build(&rc) {
        Err(RunnerError::OutOfMemory { .. } | RunnerError::Memory(_)) => {
            build(&CudaRunnerConfig {
                num_gpu_blocks: None,
                ..rc
            })?
        }
        other => other?,
    };
    r.set_tuning(CudaTuning {
        split_k: a.split_k,
        pdl: !a.no_pdl,
        gemm_tuning: !a.no_gemm_tuning,
        ..CudaTuning::default()
    })?;
    Ok(r)
}

fn tokens(n: usize, vocab: usize, salt: usize) -> Vec<u32> {
    (0..n)
        .map(|i| ((i * 7919 + salt * 104_729 + 13) % vocab) as u32)
        .collect()
}

/// Decode steps at batch `b`: prefill `b` prompts, then time decodes.
pub(crate) fn decode(r: &mut CudaRunner, b: usize, wl: &Workload) -> Timing {
    decode_mix(r, &vec![wl.context; b], wl)
}

/// Disjoint block tables for sequences whose timed decode steps centre on
/// `contexts` (block 0, the null block, unused): sequence `i` holds its
/// prompt, the warm-up and timed steps' tokens and one spare, right after
/// sequence `i - 1`'s blocks. Every sequence at the workload's context gives
/// [`Workload::tables`].
fn mix_tables(contexts: &[usize]) -> Vec<Vec<u32>> {
    let mut next = 1;
    contexts
        .iter()
        .map(|&c| {
            let n = (c - DECODE_STEPS / 2 + DECODE_STEPS + 1).div_ceil(BLOCK_SIZE);
            let t = (next..next + n).map(|k| k as u32).collect();
            next += n;
            t
        })
        .collect()
}

/// Decode steps of one sequence per context (each in [`CONTEXT_RANGE`]):
/// sequence `i`'s prompt is `contexts[i] - 25` tokens, prefilled with others
/// in steps of at most the workload's budget, so that its timed steps attend
/// to `contexts[i]` keys at the median (as [`Workload`] centres them). The
/// median time of the timed steps; an error where the sequences need more KV
/// blocks than the runner has.
pub(crate) fn decode_mix(r: &mut CudaRunner, contexts: &[usize], wl: &Workload) -> Timing {
    let vocab = wl.vocab;
    let prompt = |c: usize| c - DECODE_WARMUP - DECODE_STEPS / 2;
    let tables = mix_tables(contexts);
    let needed = tables
        .last()
        .and_then(|t| t.last())
        .map_or(0, |&k| k as usize + 1);
    anyhow::ensure!(
        needed <= r.num_kv_blocks(),
        "the decode batch {contexts:?} needs {needed} KV blocks, the runner has {}",
        r.num_kv_blocks()
    );
    let b = contexts.len();
    let prompts: Vec<Vec<u32>> = (0..b)
        .map(|i| tokens(prompt(contexts[i]), vocab, i))
        .collect();
    let mut last = vec![0u32; b];
    // Prompts in order, as many to a step as the budget holds.
    let mut groups: Vec<Vec<usize>> = Vec::new();
    let mut used = 0;
    for (i, p) in prompts.iter().enumerate() {
        let n = p.len();
        match groups.last_mut() {
            Some(g) if used + n <= wl.budget => g.push(i),
            _ => {
                groups.push(vec![i]);
                used = 0;
            }
        }
        used += n;
    }
    for chunk in &groups {
        let batch = ScheduledBatch {
            seqs: chunk
                .iter()
                .map(|&i| ScheduledSeq {
                    request_id: RequestId(i as u64),
                    token_ids: &prompts[i],
                    start_pos: 0,
                    block_table: &tables[i],
                    samples: true,
                })
                .collect(),
            block_size: BLOCK_SIZE,
        };
        let out = r.execute(&batch)?;
        for (k, &i) in chunk.iter().enumerate() {
            last[i] = out.sampled[k] % vocab as u32;
        }
    }
    let mut times = Vec::new();
    for step in 0..DECODE_WARMUP + DECODE_STEPS {
        let toks: Vec<[u32; 1]> = last.iter().map(|&t| [t]).collect();
        let batch = ScheduledBatch {
            seqs: (0..b)
                .map(|i| ScheduledSeq {
                    request_id: RequestId(i as u64),
                    token_ids: &toks[i],
                    start_pos: prompts[i].len() + step,
                    block_table: &tables[i],
                    samples: true,
                })
                .collect(),
            block_size: BLOCK_SIZE,
        };
        let t = Instant::now();
        let out = r.execute(&batch)?;
        let dt = t.elapsed().as_secs_f64();
        if step >= DECODE_WARMUP {
            times.push(dt);
        }
        // Profiling runs that skip the LM head leave stale tokens: keep them in range.
        for (l, &t) in last.iter_mut().zip(&out.sampled) {
            *l = t % vocab as u32;
        }
    }
    Ok(Data::new(times).median())
}

/// `--overheads`: the pieces of a batch-`b` decode step
/// ([`CudaRunner::step_overheads`]), on the metadata of [`decode`]'s last
/// timed step (attending to `timed_keys().1` keys).
pub(crate) fn print_overheads(r: &mut CudaRunner, b: usize, wl: &Workload) -> anyhow::Result<()> {
    let tables = wl.tables(b);
    let toks = [1u32];
    let batch = ScheduledBatch {
        seqs: (0..b)
            .map(|i| ScheduledSeq {
                request_id: RequestId(i as u64),
                token_ids: &toks,
                start_pos: wl.timed_keys().1 - 1,
                block_table: &tables[i],
                samples: true,
            })
            .collect(),
        block_size: BLOCK_SIZE,
    };
    for round in 0..3 {
        let o = r.step_overheads(&batch, 200)?;
        println!(
            "overheads batch {b} round {round} (us, medians of 200): pack {:.1}, graph+wait {:.1}, whole step {:.1}, GPU span of the graph {:.1}, graph back to back {:.1}",
            o.pack * 1e6,
            o.graph_and_wait * 1e6,
            o.whole_step * 1e6,
            o.gpu_span * 1e6,
            o.graph_back_to_back * 1e6
        );
    }
    Ok(())
}

/// One prompt of `n` tokens in one step.
pub(crate) fn prefill(r: &mut CudaRunner, n: usize, vocab: usize) -> Timing {
    let prompt = tokens(n, vocab, 5);
    let table: Vec<u32> = (1..=n.div_ceil(BLOCK_SIZE) as u32).collect();
    let mut times = Vec::new();
    for rep in 0..13 {
        let batch = ScheduledBatch {
            seqs: vec![ScheduledSeq {
                request_id: RequestId(0),
                token_ids: &prompt,
                start_pos: 0,
                block_table: &table,
                samples: true,
            }],
            block_size: BLOCK_SIZE,
        };
        let t = Instant::now();
        r.execute(&batch)?;
        if rep >= 3 {
            times.push(t.elapsed().as_secs_f64());
        }
    }
    Ok(Data::new(times).median())
}

#[cfg(test)]
mod tests {
    use super::{Workload, BLOCK_SIZE, DEFAULT_CONTEXT};

    #[test]
    fn timed_steps_centre_on_the_context() {
        let wl = Workload::new(1000, 3200, DEFAULT_CONTEXT).unwrap();
        assert_eq!(wl.prompt_len(), 275);
        assert_eq!(wl.timed_keys(), (281, 320));
        // The median of 40 step times sits between the 20th and 21st step: 300 and 301 keys.
        let (lo, hi) = wl.timed_keys();
        assert_eq!((lo + hi) / 2, 300);
        // Every timed step's keys have their blocks.
        assert!(wl.blocks_per_seq() * BLOCK_SIZE >= hi);
        let t = wl.tables(3);
        assert_eq!(t[0][0], 1, "block 0 is the null block");
        assert_eq!(
            t[1][0] as usize,
            1 + wl.blocks_per_seq(),
            "tables are disjoint"
        );
    }

    #[test]
    fn mixed_tables_hold_each_sequence_and_match_the_uniform_ones() {
        let wl = Workload::new(1000, 3200, DEFAULT_CONTEXT).unwrap();
        assert_eq!(super::mix_tables(&[DEFAULT_CONTEXT; 3]), wl.tables(3));
        let t = super::mix_tables(&[2048, 300]);
        // 2,048 keys at the median: the last timed step attends to 2,068.
        assert_eq!(t[0].len(), 130);
        assert!(t[0].len() * BLOCK_SIZE > 2068);
        assert_eq!(t[0][0], 1);
        assert_eq!(t[1][0], 131, "tables are disjoint");
        assert_eq!(t[1].len(), wl.blocks_per_seq());
    }

    #[test]
    fn the_median_of_an_even_count_is_the_mean_of_the_middle_two() {
        use statrs::statistics::{Data, OrderStatistics};
        assert_eq!(Data::new(vec![4.0, 1.0, 3.0, 2.0]).median(), 2.5);
        assert_eq!(Data::new(vec![3.0, 1.0, 2.0]).median(), 2.0);
    }

    #[test]
    fn contexts_outside_the_range_are_errors_that_name_it() {
        let e = Workload::new(1000, 3200, 25).unwrap_err();
        assert!(e.contains("from 26 to 2048, not 25"), "{e}");
        assert!(Workload::new(1000, 3200, 2049).is_err());
        assert_eq!(Workload::new(1000, 3200, 26).unwrap().prompt_len(), 1);
        assert!(Workload::new(1000, 3200, 2048).is_ok());
    }
}
