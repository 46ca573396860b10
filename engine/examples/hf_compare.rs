//! Compares the CPU runner with Hugging Face `transformers` on a checkpoint
//! written by `scripts/hf_reference.py`.
//!
//! Usage: `cargo run --release -p engine --example hf_compare -- DIR [REFERENCE_JSON]`
//! (the JSON defaults to `DIR/reference.json`). Loads `DIR` with the engine's
//! loaders, then for each prompt (a) runs greedy generation freely and counts
//! tokens equal to transformers' before the first divergence, and (b) feeds
//! transformers' tokens (teacher forcing) and measures the logit differences
//! at every step. Exits non-zero when a free-running sequence diverges.

use engine::model::{Qwen3Config, Qwen3Weights};
use engine::runner::cpu::CpuRunner;
use engine::{ModelRunner, RequestId, ScheduledBatch, ScheduledSeq};
use serde::Deserialize;
use std::error::Error;
use std::path::PathBuf;

#[derive(Deserialize)]
struct Reference {
    dtype: String,
    prompts: Vec<Vec<u32>>,
    generated: Vec<Vec<u32>>,
    /// `[prompt][step][vocab]`: the logits each generated token came from.
    logits: Vec<Vec<Vec<f32>>>,
}

const BLOCK_SIZE: usize = 16;

/// Sampled tokens and the logits of each step.
struct Trace {
    tokens: Vec<u32>,
    logits: Vec<Vec<f32>>,
}

/// Runs `prompt` then one decode per entry of `forced` (or of its own greedy
/// tokens when `forced` is `None`), `steps` sampled tokens in all.
fn run(
    runner: &mut CpuRunner,
    prompt: &[u32],
    forced: Option<&[u32]>,
    steps: usize,
) -> Result<Trace, Box<dyn Error>> {
    let blocks = (prompt.len() + steps).div_ceil(BLOCK_SIZE);
    let table: Vec<u32> = (1..=blocks as u32).collect();
    let mut tokens = prompt.to_vec();
    let mut start = 0;
    let (mut sampled, mut logits) = (Vec::new(), Vec::new());
    for step in 0..steps {
        let batch = ScheduledBatch {
            seqs: vec![ScheduledSeq {
                request_id: RequestId(0),
                token_ids: &tokens[start..],
                start_pos: start,
                block_table: &table,
                samples: true,
            }],
            block_size: BLOCK_SIZE,
        };
        let out = runner.execute(&batch)?;
        start = tokens.len();
        sampled.push(out.sampled[0]);
        logits.push(runner.last_logits()[0].clone());
        tokens.push(forced.map_or(out.sampled[0], |f| f[step]));
    }
    Ok(Trace {
        tokens: sampled,
        logits,
    })
}

fn main() -> Result<(), Box<dyn Error>> {
    let mut args = std::env::args().skip(1);
    let dir = PathBuf::from(
        args.next()
            .ok_or("usage: hf_compare DIR [REFERENCE_JSON]")?,
    );
    let json = args
        .next()
        .map(PathBuf::from)
        .unwrap_or_else(|| dir.join("reference.json"));
    let reference: Reference = serde_json::from_str(&std::fs::read_to_string(&json)?)?;
    let config = Qwen3Config::from_json_file(&dir)?;
    let weights = Qwen3Weights::load(&dir, &config)?;
    println!(
        "checkpoint {} ({} params), transformers dtype {}",
        dir.display(),
        config.num_params(),
        reference.dtype
    );

    let mut diverged = 0;
    let (mut worst_abs, mut worst_rel) = (0.0f32, 0.0f32);
    for (i, ((prompt, hf_tokens), hf_logits)) in reference
        .prompts
        .iter()
        .zip(&reference.generated)
        .zip(&reference.logits)
        .enumerate()
    {
        let steps = hf_tokens.len();
        let blocks = (prompt.len() + steps).div_ceil(BLOCK_SIZE) + 1;
        let mut runner = CpuRunner::new(config.clone(), &weights, blocks, BLOCK_SIZE)?;
        let free = run(&mut runner, prompt, None, steps)?;
        let agree = free
            .tokens
            .iter()
            .zip(hf_tokens)
            .take_while(|(a, b)| a == b)
            .count();
        if agree < steps {
            diverged += 1;
        }
        let mut runner = CpuRunner::new(config.clone(), &weights, blocks, BLOCK_SIZE)?;
        let forced = run(&mut runner, prompt, Some(hf_tokens), steps)?;
        let argmax_equal = forced
            .tokens
            .iter()
            .zip(hf_tokens)
            .filter(|(a, b)| a == b)
            .count();
        let (mut max_abs, mut scale) = (0.0f32, 0.0f32);
        for (ours, theirs) in forced.logits.iter().zip(hf_logits) {
            for (a, b) in ours.iter().zip(theirs) {
                max_abs = max_abs.max((a - b).abs());
                scale = scale.max(b.abs());
            }
        }
        worst_abs = worst_abs.max(max_abs);
        worst_rel = worst_rel.max(max_abs / scale);
        println!(
            "prompt {i} ({} tokens): free-running greedy equal for {agree}/{steps} tokens; \
             teacher-forced argmax equal {argmax_equal}/{steps}, max abs logit diff {max_abs:.3e} \
             (max |logit| {scale:.2})",
            prompt.len()
        );
    }
    println!(
        "all prompts: {} of {} diverged; worst max abs logit diff {worst_abs:.3e}, relative to max |logit| {worst_rel:.3e}",
        diverged,
        reference.prompts.len()
    );
    if diverged > 0 {
        return Err(format!("{diverged} sequences diverged from transformers").into());
    }
    Ok(())
}
