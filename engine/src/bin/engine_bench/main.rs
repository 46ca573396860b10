//! `engine-bench`: step times of the CUDA runner on synthetic weights
//! (random, never zeros) of a model (`--model`, Qwen3-0.6B by default), on
//! the whole GPU or, with `--sm-count N`, on a green context of N SMs.
//!
//! Decode: B sequences at context 300, one token each per step through the
//! CUDA-graph path; the time of a whole `execute` call (metadata copy, graph
//! launch, sampled tokens back), median over 40 steps after 5 warm-up steps,
//! which attend to 281–320 keys (steps.rs; `--context N` centres them on N
//! keys instead). The `tokens` column of a decode row is that median context.
//! Prefill: one prompt of N tokens in one step. Writes `engine.csv`:
//! `model,sm_count,kind,batch,tokens,ms_median,tok_s,date,commit` (table.rs
//! says where the commit comes from).
//!
//! Options (`engine-bench --help`, args.rs): the tuning runs `--tune`,
//! `--profile`, `--split-sweep` and `--pdl-sweep` write `tune.csv`,
//! `profile.csv`, `split_k.csv` and `pdl.csv`; `--eager`, `--no-pdl`,
//! `--no-gemm-tuning` and `--split-k S` override the runner's rules
//! ([`CudaTuning`]); `--only-decode B` times decode steps at batch B only
//! and writes nothing (for a profiler); `--mixed` times mixed and prefill
//! steps eager against piecewise-graphed and writes `mixed.csv` only;
//! `--decode-mix CONTEXTS` (repeatable) times decode steps of sequences at
//! different contexts and appends `decode_mix.csv` only; `--mixed-step
//! T@C+DxK` (repeatable) times steps of a prompt chunk after cached context
//! beside decodes, eager and piecewise, and appends `mixed_steps.csv` only;
//! `--lone-blocks` times decode attention with each block alone on its SM
//! and appends `lone_blocks.csv` only (lone_blocks.rs). With
//! GEMM tuning on, the tuned shapes go to `gemm_tuning.csv`. `--family
//! [MODELS] [--sm-counts LIST]` appends the family table to
//! `engine_family.csv` instead (family.rs); with `--operators`, also the
//! kernel-group costs and cuBLAS products the operator cost model is fitted
//! on, to `operators/` (operators.rs).

use anyhow::Context as _;
use clap::Parser as _;
use engine::model::ModelSpec;
use engine::runner::cuda::{CudaRunner, CudaTuning, MixedStep};
use engine::ModelRunner;
use std::fmt::Write as _;
use std::time::Instant;

mod args;
mod family;
mod lone_blocks;
mod operators;
mod steps;
mod table;
mod tuning;

use args::Args;
use steps::{bench_runner, decode, prefill, print_overheads, Workload, BUDGET, SEED};
use table::RunInfo;

fn main() -> anyhow::Result<()> {
    let a = Args::parse();
    if let Some(models) = a.family_models() {
        return family::run(&a, &models.map_err(anyhow::Error::msg)?);
    }
    let context = a.context;
    let spec = ModelSpec::parse(&a.model)?;
    let cfg = &spec.config;
    // Checked before the weights and the runner, which take a while.
    let wl = Workload::new(cfg.vocab_size, BUDGET, context).map_err(anyhow::Error::msg)?;
    let weights = spec.weights(SEED)?;
    let batches = [1usize, 16, 64, 256];
    let t = Instant::now();
    let mut r = bench_runner(&spec, &weights, &wl, a.sm_count, &a)?;
    let gemm_tuning = !a.no_gemm_tuning;
    println!(
        "{} on {} ({} SMs, copy bandwidth {:.2} TB/s) ready in {:.1}s ({} KV blocks)",
        spec.weights_label(SEED),
        r.device_name(),
        r.sm_count(),
        r.measured_copy_bandwidth() * 1e-12,
        t.elapsed().as_secs_f64(),
        r.num_kv_blocks()
    );
    if a.mixed {
        return mixed(&mut r, &a.out);
    }
    if !a.mixed_step.is_empty() {
        return mixed_steps(&mut r, &a, &spec.name);
    }
    if !a.decode_mix.is_empty() {
        return decode_mixes(&mut r, &a, &spec.name, &wl);
    }
    if a.lone_blocks {
        return lone_blocks::run(&mut r, cfg, &spec.name, &wl, &a.out);
    }
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
    let info = RunInfo::of_runner(&spec.name, &r, date.clone());
    let mut csv = format!("{}\n", table::HEADER);
    // One engine.csv row: (kind, batch, tokens), then the time and tokens per second.
    let mut row = |label: String,
                   (kind, batch, tokens): (&str, usize, usize),
                   produced: usize,
                   timing: anyhow::Result<f64>| match timing {
        Ok(s) => {
            println!(
                "{label}: {:.3} ms, {:.0} tok/s",
                s * 1e3,
                produced as f64 / s
            );
            csv.push_str(&info.row(kind, batch, tokens, s, produced));
        }
        Err(e) => println!("{label}: ERROR {e:#}"),
    };
    for &b in &batches {
        let timing = decode(&mut r, b, &wl);
        row(
            format!("decode  batch {b:>3} ctx {context}"),
            ("decode", b, context),
            b,
            timing,
        );
    }
    for &n in &[512usize, 2048, 3200] {
        let timing = prefill(&mut r, n, cfg.vocab_size);
        row(
            format!("prefill {n:>5} tokens"),
            ("prefill", 1, n),
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

/// `--decode-mix`: each batch's decode steps, appended to
/// `decode_mix.csv` (`operators::time_mixes`).
fn decode_mixes(
    r: &mut CudaRunner,
    a: &args::Args,
    model: &str,
    wl: &Workload,
) -> anyhow::Result<()> {
    let out = &a.out;
    std::fs::create_dir_all(out).with_context(|| format!("creating --out {}", out.display()))?;
    let info = RunInfo::of_runner(model, r, engine::date::utc_now());
    let mixes: Vec<&[usize]> = a.decode_mix.iter().map(|m| m.0.as_slice()).collect();
    let ok = operators::time_mixes(r, &info, wl, &mixes, &out.join(operators::MIX_FILE), "")?;
    anyhow::ensure!(ok, "some decode mixes failed");
    Ok(())
}

/// Header of `mixed_steps.csv` (`--mixed-step`).
const MIXED_STEPS_HEADER: &str = "model,sm_count,chunk_tokens,chunk_context,decodes,decode_context,bucket,eager_ms,piecewise_ms,date,commit";

/// `--mixed-step`: each step eager against piecewise-graphed, medians of 40
/// steps, appended to `mixed_steps.csv`; a step that fails is reported and
/// the others still run.
fn mixed_steps(r: &mut CudaRunner, a: &args::Args, model: &str) -> anyhow::Result<()> {
    let out = &a.out;
    std::fs::create_dir_all(out).with_context(|| format!("creating --out {}", out.display()))?;
    let info = RunInfo::of_runner(model, r, engine::date::utc_now());
    let mut rows = String::new();
    let mut failed = 0;
    for s in &a.mixed_step {
        let what = format!(
            "{} tokens after {} + {} decodes at {} keys",
            s.chunk_tokens, s.chunk_context, s.decodes, s.decode_context
        );
        match r.mixed_step_times(s, 40) {
            Ok(t) => {
                let (e, p) = (t.eager * 1e3, t.piecewise * 1e3);
                println!(
                    "mixed step {what}: eager {e:.3} ms, piecewise {p:.3} ms (bucket {})",
                    t.bucket
                );
                let _ = writeln!(
                    rows,
                    "{},{},{},{},{},{},{},{e:.4},{p:.4},{},{}",
                    info.model_cell(),
                    info.sm_count,
                    s.chunk_tokens,
                    s.chunk_context,
                    s.decodes,
                    s.decode_context,
                    t.bucket,
                    info.date,
                    info.commit
                );
            }
            Err(e) => {
                eprintln!("mixed step {what}: FAILED: {e:#}");
                failed += 1;
            }
        }
    }
    let path = out.join("mixed_steps.csv");
    table::append_with_header(&path, MIXED_STEPS_HEADER, &rows)
        .with_context(|| format!("appending to {}", path.display()))?;
    anyhow::ensure!(failed == 0, "{failed} mixed steps failed");
    Ok(())
}

/// `--mixed`: [`MixedStep::BENCH`] and [`MixedStep::PREFILL_SWEEP`], eager
/// against piecewise-graphed, medians of 40 steps each (`mixed.csv`).
fn mixed(r: &mut CudaRunner, out: &std::path::Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(out).with_context(|| format!("creating --out {}", out.display()))?;
    let date = engine::date::utc_now();
    let mut csv = String::from(
        "chunk_tokens,chunk_context,decodes,decode_context,bucket,eager_ms,piecewise_ms,date\n",
    );
    for s in std::iter::once(MixedStep::BENCH).chain(MixedStep::PREFILL_SWEEP) {
        let t = r.mixed_step_times(&s, 40)?;
        let (e, p) = (t.eager * 1e3, t.piecewise * 1e3);
        println!(
            "mixed: {} tokens over {} + {} decodes at {} keys: eager {e:.3} ms, piecewise {p:.3} ms (bucket {})",
            s.chunk_tokens, s.chunk_context, s.decodes, s.decode_context, t.bucket
        );
        let _ = writeln!(
            csv,
            "{},{},{},{},{},{e:.4},{p:.4},{date}",
            s.chunk_tokens, s.chunk_context, s.decodes, s.decode_context, t.bucket
        );
    }
    std::fs::write(out.join("mixed.csv"), &csv)?;
    Ok(())
}
