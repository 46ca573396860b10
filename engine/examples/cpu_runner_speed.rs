//! Speed of the CPU reference runner on synthetic weights.
//!
//! Usage: `cargo run --release -p engine --example cpu_runner_speed -- [PRESET] [CONTEXT] [PREFILL_TOKENS]`
//! (defaults: `tiny`, 512, 512). Measures a prefill of PREFILL_TOKENS tokens
//! (tokens/s) and decode steps at batch 1 and 8 after CONTEXT tokens of
//! context (ms per step), each the median of several repetitions (3 and 5:
//! odd counts, so the middle one).

use engine::model::{Qwen3Config, Qwen3Weights};
use engine::runner::cpu::CpuRunner;
use engine::{ModelRunner, RequestId, ScheduledBatch, ScheduledSeq};
use statrs::statistics::{Data, OrderStatistics};
use std::error::Error;
use std::time::Instant;

const BLOCK_SIZE: usize = 16;

fn main() -> Result<(), Box<dyn Error>> {
    let mut args = std::env::args().skip(1);
    let preset = args.next().unwrap_or_else(|| "tiny".into());
    let context: usize = args.next().map_or(Ok(512), |a| a.parse())?;
    let prefill: usize = args.next().map_or(Ok(512), |a| a.parse())?;
    let config = Qwen3Config::preset(&preset)?;
    let t = Instant::now();
    let weights = Qwen3Weights::synthetic(&config, 0);
    println!(
        "{preset}: synthetic weights in {:.2} s",
        t.elapsed().as_secs_f64()
    );
    let t = Instant::now();
    let batch_max = 8;
    let blocks_per_seq = (context.max(prefill) + 1).div_ceil(BLOCK_SIZE);
    let mut runner = CpuRunner::new(
        config.clone(),
        &weights,
        1 + batch_max * blocks_per_seq,
        BLOCK_SIZE,
    )?;
    println!("runner built in {:.2} s", t.elapsed().as_secs_f64());
    drop(weights);

    let tables: Vec<Vec<u32>> = (0..batch_max)
        .map(|s| {
            (0..blocks_per_seq)
                .map(|b| (1 + s * blocks_per_seq + b) as u32)
                .collect()
        })
        .collect();
    let tokens: Vec<u32> = (0..context.max(prefill) as u32)
        .map(|i| (i * 7919) % config.vocab_size as u32)
        .collect();

    let mut times = Vec::new();
    for _ in 0..3 {
        let batch = ScheduledBatch {
            seqs: vec![ScheduledSeq {
                request_id: RequestId(0),
                token_ids: &tokens[..prefill],
                start_pos: 0,
                block_table: &tables[0],
                samples: true,
            }],
            block_size: BLOCK_SIZE,
        };
        let t = Instant::now();
        runner.execute(&batch)?;
        times.push(t.elapsed().as_secs_f64());
    }
    println!(
        "prefill {prefill} tokens: {:.0} tokens/s",
        prefill as f64 / Data::new(times).median()
    );

    // The KV content does not change the work, so decodes read whatever the
    // cache holds at positions 0..context.
    for batch_size in [1, batch_max] {
        let mut times = Vec::new();
        for _ in 0..5 {
            let batch = ScheduledBatch {
                seqs: (0..batch_size)
                    .map(|s| ScheduledSeq {
                        request_id: RequestId(s as u64),
                        token_ids: &tokens[context - 1..context],
                        start_pos: context - 1,
                        block_table: &tables[s],
                        samples: true,
                    })
                    .collect(),
                block_size: BLOCK_SIZE,
            };
            let t = Instant::now();
            runner.execute(&batch)?;
            times.push(t.elapsed().as_secs_f64());
        }
        println!(
            "decode batch {batch_size} at context {context}: {:.2} ms/step",
            1e3 * Data::new(times).median()
        );
    }
    Ok(())
}
