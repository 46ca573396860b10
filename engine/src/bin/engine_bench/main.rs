//! `engine-bench`: step times of the CUDA runner on synthetic Qwen3-0.6B
//! weights (random, never zeros).
//!
//! Decode: B sequences at context 300, one token each per step through the
//! CUDA-graph path; the time of a whole `execute` call (metadata copy, graph
//! launch, sampled tokens back), median over 40 steps after 5 warm-up steps,
//! which attend to 281–320 keys (steps.rs; `--context N` centres them on N
//! keys instead). The `tokens` column of a decode row is that median context.
//! Prefill: one prompt of N tokens in one step. Writes `engine.csv`:
//! `kind,batch,tokens,ms_median,tok_s,date`.
//!
//! Usage: `engine-bench [--out DIR] [--model qwen3-0.6b] [--context N] [--eager] [--no-pdl]
//! [--no-gemm-tuning] [--split-k S] [--tune] [--profile] [--split-sweep]
//! [--pdl-sweep]
//! [--only-decode B [--decode-kernel NAME] [--split-target WARPS] [--warm-graphs] [--overheads]]`:
//! - `--context N`: decode steps centred on N keys instead of 300;
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
//!   `--warm-graphs` first captures every bucket's graph, as real mode does;
//!   `--overheads` then times the pieces of such a step: host packing, the
//!   graph launched and waited for, the whole step, its GPU span, and graph
//!   replays back to back (`CudaRunner::step_overheads`).

use engine::model::{Qwen3Config, Qwen3Weights};
use engine::runner::cuda::{CudaRunner, CudaRunnerConfig, CudaTuning, DecodeKernel, SPLIT_K_MAX};
use engine::ModelRunner;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::Instant;

#[path = "../shared/cli_args.rs"]
mod cli_args;
mod steps;
mod tuning;

use steps::{decode, prefill, print_overheads, Workload, BLOCK_SIZE, DEFAULT_CONTEXT};

/// Options that take a value, and those that do not.
const VALUE_OPTIONS: [&str; 7] = [
    "--out",
    "--model",
    "--context",
    "--split-k",
    "--only-decode",
    "--decode-kernel",
    "--split-target",
];
const FLAGS: [&str; 9] = [
    "--overheads",
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
    if only_decode.is_none()
        && (kernel_choice.is_some() || target_choice.is_some() || warm_graphs || overheads)
    {
        return Err(
            "--decode-kernel, --split-target, --warm-graphs and --overheads apply to --only-decode runs only"
                .into(),
        );
    }
    let context = match value("--context") {
        Some(c) => c.parse().map_err(|_| {
            format!(
                "--context takes the median number of keys a timed decode step attends to, not {c}"
            )
        })?,
        None => DEFAULT_CONTEXT,
    };
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
    // Checked before the weights and the runner, which take a while.
    let budget = 3200;
    let wl = Workload::new(cfg.vocab_size, budget, context)?;
    let t = Instant::now();
    let w = Qwen3Weights::synthetic(&cfg, 42);
    println!(
        "synthetic {model} weights in {:.1}s",
        t.elapsed().as_secs_f64()
    );
    let batches = [1usize, 16, 64, 256];
    let rc = CudaRunnerConfig {
        block_size: BLOCK_SIZE,
        num_gpu_blocks: Some(256 * wl.blocks_per_seq() + 8),
        gpu_memory_utilization: 0.9,
        max_num_seqs: 256,
        max_num_batched_tokens: budget,
        max_model_len: 4096,
        use_cuda_graphs: !eager,
        device_ordinal: 0,
    };
    let t = Instant::now();
    let mut r = CudaRunner::new(&cfg, &w, &rc)?;
    let gemm_tuning = !flag("--no-gemm-tuning");
    r.set_tuning(CudaTuning {
        split_k,
        pdl: !flag("--no-pdl"),
        gemm_tuning,
        ..CudaTuning::default()
    })?;
    println!(
        "runner on {} ready in {:.1}s ({} KV blocks)",
        r.device_name(),
        t.elapsed().as_secs_f64(),
        r.num_kv_blocks()
    );
    // `--only-decode B`: decode steps at batch B and nothing else (for a profiler).
    if let Some(b) = only_decode {
        // Either setting alone keeps the runner's choice for the other.
        let t = *r.tuning();
        r.set_tuning(CudaTuning {
            decode_kernel: kernel_choice.or(t.decode_kernel),
            decode_target_warps: target_choice.unwrap_or(t.decode_target_warps),
            ..t
        })?;
        if warm_graphs {
            r.warm_up_graphs()?;
        }
        let s = decode(&mut r, b, &wl)?;
        println!("decode  batch {b:>3} ctx {context}: {:.3} ms/step", s * 1e3);
        if overheads {
            print_overheads(&mut r, b, &wl)?;
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
        Err(e) => println!("{label}: ERROR {e:#}"),
    };
    for &b in &batches {
        let timing = decode(&mut r, b, &wl);
        row(
            format!("decode  batch {b:>3} ctx {context}"),
            format!("decode,{b},{context}"),
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
        workload: wl,
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
