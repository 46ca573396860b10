//! `engine-bench`: step times of the CUDA runner on synthetic Qwen3-0.6B
//! weights (random, never zeros).
//!
//! Decode: B sequences at context ~300 (prefilled with 300 tokens first), one
//! token each per step through the CUDA-graph path; the time of a whole
//! `execute` call (metadata copy, graph launch, sampled tokens back), median
//! over 40 steps after 5 warm-up steps, so over contexts of 306–345 keys
//! (median 325); the `tokens` column says 300, the prompt length.
//! Prefill: one prompt of N tokens in one step. Writes `engine.csv`:
//! `kind,batch,tokens,ms_median,tok_s,date`.
//!
//! Usage: `engine-bench [--out DIR] [--model qwen3-0.6b] [--eager] [--no-pdl]
//! [--no-gemm-tuning] [--split-k S] [--tune] [--profile] [--split-sweep]
//! [--pdl-sweep] [--upload-graphs]
//! [--only-decode B [--decode-kernel NAME] [--split-target WARPS] [--warm-graphs
//! [--launch-buckets]] [--overheads]]`:
//! - `--no-pdl`: no kernel is a programmatic dependent launch;
//! - `--no-gemm-tuning`: every GEMM runs cublasGemmEx (no cuBLASLt plans);
//!   otherwise the tuned shapes go to `gemm_tuning.csv`;
//! - `--split-k S`: the O and down products' K in S slices (1: never) instead
//!   of the runner's rule;
//! - `--tune`: every decode-attention kernel and split target (`tune.csv`);
//! - `--profile`: the step with kernel groups left out (`profile.csv`);
//! - `--split-sweep`: decode steps by batch and split of K (`split_k.csv`);
//! - `--pdl-sweep`: decode steps by batch with programmatic dependent
//!   launches on and off (`pdl.csv`);
//! - `--only-decode B`: times decode steps at batch B only (with the decode
//!   attention kernel NAME, e.g. `BlockW4U4`, and its splits aiming at WARPS
//!   warps, where given) and writes nothing (a run to put under a profiler);
//!   `--warm-graphs` first captures every bucket's graph, as real mode does,
//!   and `--launch-buckets` then runs decode steps at every other bucket, so
//!   that their graphs are launched (uploaded) before B's; `--overheads`
//!   then times the pieces of such a step: host packing, the graph launched
//!   and waited for, the whole step, its GPU span, and graph replays back to
//!   back (`CudaRunner::step_overheads`);
//! - `--upload-graphs`: each decode graph is uploaded when captured (on the
//!   H200 that made the graphs uploaded after the first few about 5 % slower,
//!   results/h200/graph_instances.txt).

use engine::model::{Qwen3Config, Qwen3Weights};
use engine::runner::cuda::{CudaRunner, CudaRunnerConfig, DecodeKernel, SPLIT_K_MAX};
use engine::{ModelRunner, RequestId, ScheduledBatch, ScheduledSeq};
use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::Instant;

#[path = "../shared/cli_args.rs"]
mod cli_args;
mod tuning;

const BLOCK_SIZE: usize = 16;
const CONTEXT: usize = 300;
const DECODE_WARMUP: usize = 5;
const DECODE_STEPS: usize = 40;
/// KV blocks a decode sequence needs: its prompt, the warm-up and timed steps.
const BLOCKS_PER_SEQ: usize = (CONTEXT + DECODE_WARMUP + DECODE_STEPS + 1).div_ceil(BLOCK_SIZE);

/// Disjoint block tables for `b` decode sequences (block 0, the null block, unused).
fn decode_tables(b: usize) -> Vec<Vec<u32>> {
    (0..b)
        .map(|i| {
            (0..BLOCKS_PER_SEQ)
                .map(|k| (1 + i * BLOCKS_PER_SEQ + k) as u32)
                .collect()
        })
        .collect()
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn tokens(n: usize, vocab: usize, salt: usize) -> Vec<u32> {
    (0..n)
        .map(|i| ((i * 7919 + salt * 104_729 + 13) % vocab) as u32)
        .collect()
}

/// Decode steps at batch `b`: prefill `b` prompts of CONTEXT tokens, then time decodes.
pub(crate) fn decode(
    r: &mut CudaRunner,
    b: usize,
    vocab: usize,
    budget: usize,
) -> Result<f64, Box<dyn std::error::Error>> {
    let tables = decode_tables(b);
    let prompts: Vec<Vec<u32>> = (0..b).map(|i| tokens(CONTEXT, vocab, i)).collect();
    let per_step = (budget / CONTEXT).max(1);
    let mut last = vec![0u32; b];
    for chunk in (0..b).collect::<Vec<_>>().chunks(per_step) {
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
                    start_pos: CONTEXT + step,
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
    Ok(median(times))
}

/// `--overheads`: the pieces of a batch-`b` decode step ([`CudaRunner::step_overheads`]),
/// on the metadata of a step after `decode`'s last (context CONTEXT + DECODE_STEPS + DECODE_WARMUP).
fn print_overheads(r: &mut CudaRunner, b: usize) -> Result<(), Box<dyn std::error::Error>> {
    let tables = decode_tables(b);
    let toks = [1u32];
    let batch = ScheduledBatch {
        seqs: (0..b)
            .map(|i| ScheduledSeq {
                request_id: RequestId(i as u64),
                token_ids: &toks,
                start_pos: CONTEXT + DECODE_WARMUP + DECODE_STEPS - 1,
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

pub(crate) fn prefill(
    r: &mut CudaRunner,
    n: usize,
    vocab: usize,
) -> Result<f64, Box<dyn std::error::Error>> {
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
    Ok(median(times))
}

/// Options that take a value, and those that do not.
const VALUE_OPTIONS: [&str; 6] = [
    "--out",
    "--model",
    "--split-k",
    "--only-decode",
    "--decode-kernel",
    "--split-target",
];
const FLAGS: [&str; 11] = [
    "--overheads",
    "--upload-graphs",
    "--launch-buckets",
    "--eager",
    "--no-pdl",
    "--no-gemm-tuning",
    "--tune",
    "--profile",
    "--split-sweep",
    "--pdl-sweep",
    "--warm-graphs",
];

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    cli_args::check_args(&args, &VALUE_OPTIONS, &FLAGS)?;
    let flag = |f: &str| cli_args::flag(&args, f);
    let value = |f: &str| cli_args::value(&args, f);
    // `--only-decode B [--decode-kernel NAME] [--split-target WARPS]`, checked before the
    // runner's slow start.
    let only_decode: Option<usize> = value("--only-decode")
        .map(|b| {
            b.parse()
                .map_err(|_| format!("--only-decode takes a batch size, not {b}"))
        })
        .transpose()?;
    let kernel_choice = value("--decode-kernel")
        .map(|name| {
            DecodeKernel::ALL
                .into_iter()
                .find(|k| format!("{k:?}") == name)
                .ok_or_else(|| {
                    format!(
                        "--decode-kernel: no kernel {name}; one of {:?}",
                        DecodeKernel::ALL
                    )
                })
        })
        .transpose()?;
    let target_choice: Option<usize> = value("--split-target")
        .map(|t| {
            t.parse()
                .map_err(|_| format!("--split-target takes a warp count, not {t}"))
        })
        .transpose()?;
    let warm_graphs = flag("--warm-graphs");
    let overheads = flag("--overheads");
    let launch_buckets = flag("--launch-buckets");
    if launch_buckets && !warm_graphs {
        return Err("--launch-buckets applies to --only-decode B --warm-graphs runs only".into());
    }
    if only_decode.is_none()
        && (kernel_choice.is_some() || target_choice.is_some() || warm_graphs || overheads)
    {
        return Err(
            "--decode-kernel, --split-target, --warm-graphs and --overheads apply to --only-decode runs only"
                .into(),
        );
    }
    let split_k: Option<usize> = value("--split-k")
        .map(|v| match v.parse() {
            Ok(n) if (1..=SPLIT_K_MAX).contains(&n) => Ok(n),
            _ => Err(format!(
                "--split-k takes a number of slices from 1 to {SPLIT_K_MAX}, not {v}"
            )),
        })
        .transpose()?;
    let out = PathBuf::from(value("--out").unwrap_or_else(|| ".".into()));
    let model = value("--model").unwrap_or_else(|| "qwen3-0.6b".into());
    let eager = flag("--eager");
    let cfg = Qwen3Config::preset(&model)?;
    let t = Instant::now();
    let w = Qwen3Weights::synthetic(&cfg, 42);
    println!(
        "synthetic {model} weights in {:.1}s",
        t.elapsed().as_secs_f64()
    );
    let budget = 3200;
    let batches = [1usize, 16, 64, 256];
    let rc = CudaRunnerConfig {
        block_size: BLOCK_SIZE,
        num_gpu_blocks: Some(256 * BLOCKS_PER_SEQ + 8),
        gpu_memory_utilization: 0.9,
        max_num_seqs: 256,
        max_num_batched_tokens: budget,
        max_model_len: 4096,
        use_cuda_graphs: !eager,
        device_ordinal: 0,
    };
    let t = Instant::now();
    let mut r = CudaRunner::new(&cfg, &w, &rc)?;
    if split_k.is_some() {
        r.set_split_k(split_k);
    }
    if flag("--upload-graphs") {
        r.set_upload_graphs(true);
    }
    if flag("--no-pdl") {
        r.set_use_pdl(false);
    }
    let gemm_tuning = !flag("--no-gemm-tuning");
    r.set_gemm_tuning(gemm_tuning);
    println!(
        "runner on {} ready in {:.1}s ({} KV blocks)",
        r.device_name(),
        t.elapsed().as_secs_f64(),
        r.num_kv_blocks()
    );
    // `--only-decode B`: decode steps at batch B and nothing else (for a profiler).
    if let Some(b) = only_decode {
        // Either setting alone keeps the runner's choice for the other.
        let (kernel, target) = r.decode_tuning();
        r.set_decode_tuning(kernel_choice.or(kernel), target_choice.unwrap_or(target))?;
        if warm_graphs {
            r.warm_up_graphs()?;
        }
        if launch_buckets {
            for other in r.graph_buckets().into_iter().filter(|&o| o != b) {
                decode(&mut r, other, cfg.vocab_size, budget)?;
            }
        }
        let s = decode(&mut r, b, cfg.vocab_size, budget)?;
        println!(
            "decode  batch {b:>3} ctx ~{CONTEXT}: {:.3} ms/step",
            s * 1e3
        );
        if overheads {
            print_overheads(&mut r, b)?;
        }
        return Ok(());
    }
    let date = engine::date::utc_now();
    std::fs::create_dir_all(&out)?;
    let mut csv = String::from("kind,batch,tokens,ms_median,tok_s,date\n");
    // One engine.csv row: `kind,batch,tokens`, then the time and tokens per second.
    let mut row = |label: String, key: String, tokens: usize, timing: Result<f64, _>| match timing {
        Ok(s) => {
            println!("{label}: {:.3} ms, {:.0} tok/s", s * 1e3, tokens as f64 / s);
            let _ = writeln!(csv, "{key},{:.4},{:.1},{date}", s * 1e3, tokens as f64 / s);
        }
        Err(e) => println!("{label}: ERROR {e}"),
    };
    for &b in &batches {
        let timing = decode(&mut r, b, cfg.vocab_size, budget);
        row(
            format!("decode  batch {b:>3} ctx ~{CONTEXT}"),
            format!("decode,{b},{CONTEXT}"),
            b,
            timing,
        );
    }
    for &n in &[512usize, 2048, 3200] {
        let timing = prefill(&mut r, n, cfg.vocab_size);
        row(
            format!("prefill {n:>5} tokens"),
            format!("prefill,1,{n}"),
            n,
            timing,
        );
    }
    let run = tuning::Run {
        vocab: cfg.vocab_size,
        budget,
        out: &out,
        date: &date,
    };
    if flag("--tune") {
        tuning::tune(&mut r, &run)?;
    }
    if flag("--pdl-sweep") {
        tuning::pdl_sweep(&mut r, &run)?;
    }
    if flag("--split-sweep") {
        tuning::split_sweep(&mut r, &run)?;
    }
    if flag("--profile") {
        tuning::profile(&mut r, &run)?;
    }
    if gemm_tuning {
        tuning::write_gemm_tuning(&r, &run)?;
    }
    let name = if eager {
        "engine_eager.csv"
    } else {
        "engine.csv"
    };
    std::fs::write(out.join(name), &csv)?;
    print!("{csv}");
    Ok(())
}
