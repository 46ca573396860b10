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
//! Options (`engine-bench --help`, args.rs): the tuning runs `--tune`,
//! `--profile`, `--split-sweep` and `--pdl-sweep` write `tune.csv`,
//! `profile.csv`, `split_k.csv` and `pdl.csv`; `--eager`, `--no-pdl`,
//! `--no-gemm-tuning` and `--split-k S` override the runner's rules
//! ([`CudaTuning`]); `--only-decode B` times decode steps at batch B only
//! and writes nothing (for a profiler). With GEMM tuning on, the tuned
//! shapes go to `gemm_tuning.csv`.

use anyhow::Context as _;
use args::{Args, MAX_BATCH};
use clap::Parser as _;
use engine::model::{Qwen3Config, Qwen3Weights};
use engine::runner::cuda::{CudaRunner, CudaRunnerConfig, CudaTuning};
use engine::ModelRunner;
use std::fmt::Write as _;
use std::time::Instant;

mod args;
mod steps;
mod tuning;

use steps::{decode, prefill, print_overheads, Workload, BLOCK_SIZE};

fn main() -> anyhow::Result<()> {
    let a = Args::parse();
    let (model, context) = (a.model.as_str(), a.context);
    let cfg = Qwen3Config::preset(model)?;
    // Checked before the weights and the runner, which take a while.
    let budget = 3200;
    let wl = Workload::new(cfg.vocab_size, budget, context).map_err(anyhow::Error::msg)?;
    let t = Instant::now();
    let w = Qwen3Weights::synthetic(&cfg, 42);
    println!(
        "synthetic {model} weights in {:.1}s",
        t.elapsed().as_secs_f64()
    );
    let batches = [1usize, 16, 64, 256];
    let rc = CudaRunnerConfig {
        block_size: BLOCK_SIZE,
        num_gpu_blocks: Some(MAX_BATCH * wl.blocks_per_seq() + 8),
        gpu_memory_utilization: 0.9,
        max_num_seqs: MAX_BATCH,
        max_num_batched_tokens: budget,
        max_model_len: 4096,
        use_cuda_graphs: !a.eager,
        device_ordinal: 0,
        sm_count: None,
    };
    let t = Instant::now();
    let mut r = CudaRunner::new(&cfg, &w, &rc)?;
    let gemm_tuning = !a.no_gemm_tuning;
    r.set_tuning(CudaTuning {
        split_k: a.split_k,
        pdl: !a.no_pdl,
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
    if let Some(b) = a.only_decode {
        // Either setting alone keeps the runner's choice for the other.
        let t = *r.tuning();
        r.set_tuning(CudaTuning {
            decode_kernel: a.decode_kernel.or(t.decode_kernel),
            decode_target_warps: a.split_target.unwrap_or(t.decode_target_warps),
            ..t
        })?;
        if a.warm_graphs {
            r.warm_up_graphs()?;
        }
        let s = decode(&mut r, b, &wl)?;
        println!("decode  batch {b:>3} ctx {context}: {:.3} ms/step", s * 1e3);
        if a.overheads {
            print_overheads(&mut r, b, &wl)?;
        }
        return Ok(());
    }
    let date = engine::date::utc_now();
    let out = &a.out;
    std::fs::create_dir_all(out).with_context(|| format!("creating --out {}", out.display()))?;
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
        out,
        date: &date,
    };
    if a.tune {
        tuning::tune(&mut r, &run)?;
    }
    if a.pdl_sweep {
        tuning::pdl_sweep(&mut r, &run)?;
    }
    if a.split_sweep {
        tuning::split_sweep(&mut r, &run)?;
    }
    if a.profile {
        tuning::profile(&mut r, &run)?;
    }
    if gemm_tuning {
        tuning::write_gemm_tuning(&r, &run)?;
    }
    let name = if a.eager {
        "engine_eager.csv"
    } else {
        "engine.csv"
    };
    std::fs::write(out.join(name), &csv)?;
    print!("{csv}");
    Ok(())
}
