//! On a device: the piecewise graphs against the eager path. One runner
//! runs the same script of steps twice, piecewise graphs off then on, and
//! each step's sampled tokens and logits are compared. The script has a
//! prefill-only step of several prompts, a mixed step (a prefill chunk over
//! a cached context, a short chunk on the decode path, decodes and a fresh
//! prompt), a decode-only step that reads the KV the mixed step wrote, a
//! step of 3 tokens (the smallest bucket) and a single 100-token prompt.
//! Every position a step reads is written earlier in the same run, so the
//! second run does not see the first's cache.

use super::super::step::StepPath;
use super::super::{CudaRunner, CudaRunnerConfig, KernelCheck};
use crate::model::{Qwen3Config, WeightSource};
use crate::runner::{ModelRunner, RunnerError, ScheduledBatch, ScheduledSeq};
use crate::RequestId;

const BLOCK_SIZE: usize = 16;
/// Blocks of each sequence's table: 128 positions.
const BLOCKS_PER_SEQ: usize = 8;
/// Relative L2 difference of the logits allowed: the paths differ in GEMM
/// row counts and split-K rules (bf16 rounding), not in what they compute;
/// graphs against eager differ by about 2e-3 in cuda-check.
const TOLERANCE: f64 = 1e-2;

/// One sequence's share of a step: (sequence, first position, tokens, samples).
type Share = (usize, usize, usize, bool);

/// The script (module docs), with the path each step must take piecewise.
fn script() -> Vec<(Vec<Share>, StepPath)> {
    let decodes = |pos: usize| (2..6).map(move |i| (i, pos + i - 2, 1, true));
    let piecewise = |bucket| StepPath::Piecewise { bucket };
    vec![
        (
            [(0, 0, 50, false), (1, 0, 20, true)]
                .into_iter()
                .chain((2..6).map(|i| (i, 0, 28 + i, true)))
                .collect(),
            piecewise(256),
        ),
        (
            [(0, 50, 40, false), (1, 20, 3, true), (6, 0, 20, true)]
                .into_iter()
                .chain(decodes(30))
                .collect(),
            piecewise(128),
        ),
        (
            [(1, 23, 1, true), (6, 20, 1, true)]
                .into_iter()
                .chain(decodes(31))
                .collect(),
            StepPath::DecodeGraph { bucket: 8 },
        ),
        (vec![(0, 90, 2, true), (1, 24, 1, true)], piecewise(8)),
        (vec![(7, 0, 100, true)], piecewise(128)),
    ]
}

/// What one step gave.
struct Outcome {
    tokens: Vec<u32>,
    logits: Vec<Vec<f32>>,
    path: StepPath,
}

fn run_script(r: &mut CudaRunner, prompts: &[Vec<u32>]) -> Result<Vec<Outcome>, RunnerError> {
    let tables: Vec<Vec<u32>> = (0..prompts.len())
        .map(|i| {
            (0..BLOCKS_PER_SEQ)
                .map(|k| (1 + i * BLOCKS_PER_SEQ + k) as u32)
                .collect()
        })
        .collect();
    let mut out = Vec::new();
    for (shares, _) in script() {
        let batch = ScheduledBatch {
            seqs: shares
                .iter()
                .map(|&(i, start, n, samples)| ScheduledSeq {
                    request_id: RequestId(i as u64),
                    token_ids: &prompts[i][start..start + n],
                    start_pos: start,
                    block_table: &tables[i],
                    samples,
                })
                .collect(),
            block_size: BLOCK_SIZE,
        };
        let tokens = r.execute(&batch)?.sampled;
        out.push(Outcome {
            tokens,
            logits: r.last_logits()?,
            path: r.last_step_path(),
        });
    }
    Ok(out)
}

/// Compares one step's outcomes: logits by relative L2 difference; tokens
/// must agree except where the eager logits nearly tie (a margin within
/// twice the row's largest difference).
fn compare(name: String, eager: &Outcome, piece: &Outcome, want: StepPath) -> KernelCheck {
    let (mut num, mut den, mut max_abs) = (0f64, 0f64, 0f64);
    let mut finite = eager.logits.len() == piece.logits.len();
    let mut flips = Vec::new();
    for (row, (e, p)) in eager.logits.iter().zip(&piece.logits).enumerate() {
        let mut row_max = 0f64;
        for (&x, &y) in e.iter().zip(p) {
            finite &= y.is_finite();
            let d = (x as f64 - y as f64).abs();
            row_max = row_max.max(d);
            num += d * d;
            den += (x as f64).powi(2);
        }
        max_abs = max_abs.max(row_max);
        let (te, tp) = (eager.tokens[row], piece.tokens[row]);
        if te != tp {
            let at = |t: u32| e.get(t as usize).copied().unwrap_or(f32::NAN) as f64;
            let margin = at(te) - at(tp);
            flips.push((row, margin, margin <= 2.0 * row_max));
        }
    }
    let rel = (num / den.max(1e-30)).sqrt();
    let eager_path = match want {
        StepPath::DecodeGraph { .. } => want,
        _ => StepPath::Eager,
    };
    let pass = finite
        && rel < TOLERANCE
        && piece.path == want
        && eager.path == eager_path
        && eager.tokens.len() == piece.tokens.len()
        && flips.iter().all(|f| f.2);
    KernelCheck {
        name,
        max_abs_err: max_abs,
        rel_l2_err: rel,
        pass,
        note: format!(
            "paths {:?} / {:?} (want {want:?}); {} of {} tokens differ {flips:?} (row, eager margin, near tie)",
            eager.path,
            piece.path,
            flips.len(),
            eager.tokens.len()
        ),
    }
}

/// The piecewise-graphed steps of the script (module docs) against the same
/// steps eager, on synthetic weights of `cfg` and `seed` on device 0: one
/// check per step. An error becomes one failed entry.
pub fn piecewise_self_test(cfg: &Qwen3Config, seed: u64) -> Vec<KernelCheck> {
    match self_test(cfg, seed) {
        Ok(checks) => checks,
        Err(e) => vec![KernelCheck {
            name: "piecewise graphs".into(),
            max_abs_err: f64::NAN,
            rel_l2_err: f64::NAN,
            pass: false,
            note: e.to_string(),
        }],
    }
}

fn self_test(cfg: &Qwen3Config, seed: u64) -> Result<Vec<KernelCheck>, RunnerError> {
    let prompts: Vec<Vec<u32>> = (0..8u64)
        .map(|i| {
            (0..BLOCKS_PER_SEQ * BLOCK_SIZE)
                .map(|j| ((j as u64 * 7919 + i * 104_729 + seed) % cfg.vocab_size as u64) as u32)
                .collect()
        })
        .collect();
    let rc = CudaRunnerConfig {
        block_size: BLOCK_SIZE,
        num_gpu_blocks: Some(prompts.len() * BLOCKS_PER_SEQ + 8),
        gpu_memory_utilization: 0.9,
        max_num_seqs: prompts.len(),
        max_num_batched_tokens: 256,
        max_model_len: BLOCKS_PER_SEQ * BLOCK_SIZE,
        use_cuda_graphs: true,
        device_ordinal: 0,
        sm_count: None,
    };
    let mut r = CudaRunner::with_weights(cfg, WeightSource::Synthetic { seed }, &rc)?;
    let on = *r.tuning();
    r.set_tuning(super::super::CudaTuning {
        piecewise_graphs: false,
        ..on
    })?;
    let eager = run_script(&mut r, &prompts)?;
    r.set_tuning(on)?;
    r.warm_up_graphs()?;
    let piece = run_script(&mut r, &prompts)?;
    Ok(script()
        .into_iter()
        .enumerate()
        .map(|(k, (shares, want))| {
            let t: usize = shares.iter().map(|s| s.2).sum();
            let name = format!(
                "piecewise vs eager, step {k} ({t} tokens, {} sequences)",
                shares.len()
            );
            compare(name, &eager[k], &piece[k], want)
        })
        .collect())
}
