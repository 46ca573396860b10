//! The CPU reference runner on the `tiny` preset (synthetic weights): what
//! real-mode runs in CI pay per step.
//!
//! - `cpu_decode_step/B`: one step of B decodes, each at context 256.
//! - `cpu_prefill/T`: one prefill of T tokens from an empty context.
//!
//! `cargo bench -p engine --bench cpu_runner` prints each case's median time
//! per step, its range over rounds and tokens per second (`common`). The
//! Qwen3-0.6B shape is too slow for many rounds on a CPU; see
//! `examples/cpu_runner_speed.rs` for it.

mod common;

use engine::model::{Qwen3Config, Qwen3Weights};
use engine::runner::cpu::CpuRunner;
use engine::{ModelRunner, RequestId, ScheduledBatch, ScheduledSeq};
use std::hint::black_box;

const BLOCK_SIZE: usize = 16;
const CONTEXT: usize = 256;
const MAX_SEQS: usize = 32;
const BLOCKS_PER_SEQ: usize = CONTEXT / BLOCK_SIZE + 1;

fn setup() -> (CpuRunner, Vec<Vec<u32>>, Vec<u32>) {
    let config = Qwen3Config::tiny();
    let weights = Qwen3Weights::synthetic(&config, 0);
    let runner = CpuRunner::new(
        config.clone(),
        &weights,
        1 + MAX_SEQS * BLOCKS_PER_SEQ,
        BLOCK_SIZE,
    )
    .expect("runner");
    let tables = (0..MAX_SEQS)
        .map(|s| {
            (0..BLOCKS_PER_SEQ)
                .map(|b| (1 + s * BLOCKS_PER_SEQ + b) as u32)
                .collect()
        })
        .collect();
    let tokens = (0..CONTEXT as u32)
        .map(|i| (i * 7919) % config.vocab_size as u32)
        .collect();
    (runner, tables, tokens)
}

fn main() {
    let (mut runner, tables, tokens) = setup();
    // Fill every sequence's context once; decodes then read a full cache.
    for table in &tables {
        let seqs = vec![ScheduledSeq {
            request_id: RequestId(0),
            token_ids: &tokens,
            start_pos: 0,
            block_table: table,
            samples: false,
        }];
        runner
            .execute(&ScheduledBatch {
                seqs,
                block_size: BLOCK_SIZE,
            })
            .expect("prefill");
    }

    for batch_size in [1usize, 8, 32] {
        let batch = ScheduledBatch {
            seqs: (0..batch_size)
                .map(|s| ScheduledSeq {
                    request_id: RequestId(s as u64),
                    token_ids: &tokens[CONTEXT - 1..],
                    start_pos: CONTEXT - 1,
                    block_table: &tables[s],
                    samples: true,
                })
                .collect(),
            block_size: BLOCK_SIZE,
        };
        let timing = common::time(|| {
            black_box(runner.execute(&batch).expect("decode"));
        });
        let name = format!("cpu_decode_step/{batch_size}");
        common::report(&name, &timing, Some((batch_size as u64, "tokens")));
    }

    for len in [64usize, 256] {
        let batch = ScheduledBatch {
            seqs: vec![ScheduledSeq {
                request_id: RequestId(0),
                token_ids: &tokens[..len],
                start_pos: 0,
                block_table: &tables[0],
                samples: true,
            }],
            block_size: BLOCK_SIZE,
        };
        let timing = common::time(|| {
            black_box(runner.execute(&batch).expect("prefill"));
        });
        let name = format!("cpu_prefill/{len}");
        common::report(&name, &timing, Some((len as u64, "tokens")));
    }
}
