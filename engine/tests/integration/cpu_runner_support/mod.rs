//! Shared by the CPU runner tests: sequences with hand-managed block tables,
//! batches built from them, and a naive Qwen3 reference.

#![allow(dead_code)] // each test file uses a different part

pub mod naive;

use engine::model::{Qwen3Config, Qwen3Weights};
use engine::runner::cpu::CpuRunner;
use engine::{ModelRunner, RequestId, ScheduledBatch, ScheduledSeq};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

pub const BLOCK_SIZE: usize = 16;
pub const NUM_BLOCKS: usize = 64;

/// A sequence as the scheduler would hold it: tokens, how many are computed,
/// and its block table.
#[derive(Clone, Debug)]
pub struct Seq {
    pub id: u64,
    pub tokens: Vec<u32>,
    pub computed: usize,
    pub table: Vec<u32>,
}

impl Seq {
    pub fn new(id: u64, tokens: Vec<u32>, table: Vec<u32>) -> Self {
        Self {
            id,
            tokens,
            computed: 0,
            table,
        }
    }
}

/// One sequence's part of a step: compute `count` more tokens.
pub struct Part {
    pub seq: usize,
    pub count: usize,
}

/// Runs one step over `parts` of `seqs`; each part samples when it reaches the
/// end of its tokens, and a sampled token is appended. Returns the sampled
/// tokens and the runner's logits.
pub fn step(runner: &mut CpuRunner, seqs: &mut [Seq], parts: &[Part]) -> (Vec<u32>, Vec<Vec<f32>>) {
    let batch = ScheduledBatch {
        seqs: parts
            .iter()
            .map(|p| {
                let s = &seqs[p.seq];
                ScheduledSeq {
                    request_id: RequestId(s.id),
                    token_ids: &s.tokens[s.computed..s.computed + p.count],
                    start_pos: s.computed,
                    block_table: &s.table,
                    samples: s.computed + p.count == s.tokens.len(),
                }
            })
            .collect(),
        block_size: BLOCK_SIZE,
    };
    let out = runner.execute(&batch).expect("valid batch");
    let logits = runner.last_logits().to_vec();
    let mut sampled = out.sampled.iter();
    for p in parts {
        let s = &mut seqs[p.seq];
        s.computed += p.count;
        if s.computed == s.tokens.len() {
            s.tokens
                .push(*sampled.next().expect("one token per sampling sequence"));
        }
    }
    (out.sampled, logits)
}

/// Prefills `seq` in chunks of `chunk` tokens; returns the logits of the last chunk.
pub fn prefill_in_chunks(runner: &mut CpuRunner, seq: &mut Seq, chunk: usize) -> Vec<f32> {
    let mut seqs = [seq.clone()];
    let mut last = Vec::new();
    let prompt_len = seqs[0].tokens.len();
    while seqs[0].computed < prompt_len {
        let count = chunk.min(prompt_len - seqs[0].computed);
        let (_, logits) = step(runner, &mut seqs, &[Part { seq: 0, count }]);
        last = logits.into_iter().next().unwrap_or_default();
    }
    *seq = seqs[0].clone();
    last
}

pub fn random_tokens(seed: u64, len: usize, vocab: usize) -> Vec<u32> {
    let mut rng = SmallRng::seed_from_u64(seed);
    (0..len)
        .map(|_| rng.random_range(0..vocab as u32))
        .collect()
}

pub fn runner(config: &Qwen3Config, weights: &Qwen3Weights) -> CpuRunner {
    CpuRunner::new(config.clone(), weights, NUM_BLOCKS, BLOCK_SIZE).expect("runner")
}

pub fn max_abs_diff(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len());
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max)
}
