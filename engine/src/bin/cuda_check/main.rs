//! `cuda-check`: correctness evidence for the CUDA runner.
//!
//! 1. `--quick`: every kernel against a host computation (PASS/FAIL each),
//!    the attention kernels of `--gqa`, and the synthetic weights generated on
//!    the GPU against the host's, bit for bit. `--gqa` alone: the prefill
//!    tiles (whole prompts, chunks over cached context) and every decode
//!    kernel for 128-dim heads at 16, 24, 32, 40 and 64 query heads over 8 KV
//!    heads (groups 2, 3, 4, 5, 8: the Qwen3 family's and one more), each
//!    line naming its group.
//! 2. CUDA vs the CPU reference runner, same synthetic weights (the CUDA
//!    runner generates its own on the GPU), `tiny` and `qwen3-0.6b` shapes
//!    (`--models`: presets or config.json directories): several prompts at once with a small token budget
//!    (chunked prefills mixed with decodes, then decode-only graph steps), 64
//!    sampled tokens each. Teacher forcing on the CPU's tokens gives the logit
//!    differences and greedy agreement at every step; a free run gives the
//!    number of tokens equal to the CPU's before the first divergence.
//!    Writes `cuda_vs_cpu.csv`.
//! 3. `--hf DIR[,DIR...]`: the checkpoint and `reference.json` written by
//!    `scripts/hf_reference.py`, loaded with the engine's loader; same
//!    measures against transformers' tokens and logits. Writes `vs_hf.csv`.
//!    By default each prompt is prefilled in one step, as transformers does;
//!    `--hf-budget N` gives N tokens per step instead, which chunks the longer
//!    prefills (the CSV's `budget` column says which).
//!
//! 4. `--engine`: the same requests through `EngineCore` with the CPU and
//!    the CUDA runner (chunked prefills, prefix-cache hits, graphs).
//!
//! 5. `--bandwidth`: the copy bandwidth of the runner's SMs by loads in
//!    flight, and the skinny GEMM kernels' occupancy (bandwidth.rs).
//!
//! Options: `cuda-check --help` (args.rs); `--all` runs parts 1, 2 and 4 and
//! the failure paths (`--errors`, errors.rs); `--sm-count N` builds every
//! runner in a green context of N SMs. Every part runs even when an earlier one
//! fails; the exit code is non-zero when any check failed, 2 for a usage
//! error (none of the parts given, among others).

mod args;
mod bandwidth;
mod compare;
mod driver;
mod engine_e2e;
mod errors;
mod hf;

use clap::Parser as _;
use compare::{compare, disagreement_cell, prefix_match};
use driver::generate;
use engine::model::{ModelSpec, Qwen3Weights, WeightSource};
use engine::runner::cpu::CpuRunner;
use engine::runner::cuda::{
    attention_self_test, kernel_self_test, synthetic_weights_self_test, CudaRunner,
    CudaRunnerConfig, KernelCheck,
};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::fmt::Write as _;

const BLOCK_SIZE: usize = 16;

fn runner_config(
    max_len: usize,
    budget: usize,
    blocks: usize,
    sm_count: Option<usize>,
) -> CudaRunnerConfig {
    CudaRunnerConfig {
        block_size: BLOCK_SIZE,
        num_gpu_blocks: Some(blocks),
        gpu_memory_utilization: 0.9,
        max_num_seqs: 16,
        max_num_batched_tokens: budget,
        max_model_len: max_len,
        use_cuda_graphs: true,
        device_ordinal: 0,
        sm_count,
    }
}

/// The CUDA runner's weights for a model whose host weights are `host`: the
/// same values generated on the GPU where they are synthetic.
fn cuda_weights<'a>(spec: &ModelSpec, seed: u64, host: &'a Qwen3Weights) -> WeightSource<'a> {
    if spec.is_synthetic() {
        WeightSource::Synthetic { seed }
    } else {
        WeightSource::Host(host)
    }
}

/// Prints each check (PASS/FAIL, name, errors, note); returns whether all passed.
fn report(checks: Vec<KernelCheck>) -> bool {
    let mut ok = true;
    for r in checks {
        println!(
            "{} {:<48} max_abs {:.3e} rel_l2 {:.3e} {}",
            if r.pass { "PASS" } else { "FAIL" },
            r.name,
            r.max_abs_err,
            r.rel_l2_err,
            r.note
        );
        ok &= r.pass;
    }
    ok
}

/// `(head_dim, query heads, KV heads)` of the `--gqa` checks: groups 2, 3,
/// 4, 5 and 8 over Qwen3's 8 KV heads of 128 dimensions.
const GQA_SHAPES: [(usize, usize, usize); 5] = [
    (128, 16, 8),
    (128, 24, 8),
    (128, 32, 8),
    (128, 40, 8),
    (128, 64, 8),
];

/// The attention checks of every group in [`GQA_SHAPES`] except those
/// `skip` already ran whole.
fn gqa(skip: &[(usize, usize, usize)]) -> bool {
    let mut ok = true;
    for &(d, nq, nkv) in GQA_SHAPES.iter().filter(|s| !skip.contains(s)) {
        ok &= report(attention_self_test(d, nq, nkv, 11));
    }
    ok
}

/// Every kernel at Qwen3-0.6B's attention shape, two small ones, and
/// Qwen3-14B's (group 5, rows of 5,120: past the norm's four chunks a
/// thread); the attention of the other `--gqa` groups; the synthetic weights.
fn quick() -> bool {
    let shapes = [(128, 16, 8), (32, 4, 2), (64, 8, 8), (128, 40, 8)];
    let mut ok = true;
    for (d, nq, nkv) in shapes {
        ok &= report(kernel_self_test(d, nq, nkv, 11));
    }
    ok &= gqa(&shapes);
    ok & report(synthetic_weights_self_test(7))
}

/// CUDA vs CPU on synthetic weights of `model`; appends CSV rows; returns pass.
fn vs_cpu(
    model: &str,
    steps: usize,
    csv: &mut String,
    date: &str,
    sm_count: Option<usize>,
) -> anyhow::Result<bool> {
    let spec = ModelSpec::parse(model)?;
    let cfg = spec.config.clone();
    let w = spec.host_weights(1234)?;
    let mut rng = StdRng::seed_from_u64(99);
    let lens = if model == "tiny" {
        vec![37usize, 20, 70]
    } else {
        vec![45usize, 23]
    };
    let prompts: Vec<Vec<u32>> = lens
        .iter()
        .map(|&n| {
            (0..n)
                .map(|_| rng.random_range(0..cfg.vocab_size as u32))
                .collect()
        })
        .collect();
    let budget = 32;
    let max_len = 256;
    let blocks = 64;
    let t0 = std::time::Instant::now();
    let mut cpu = CpuRunner::new(cfg.clone(), &w, blocks, BLOCK_SIZE)?;
    let reference = generate(&mut cpu, &prompts, steps, budget, BLOCK_SIZE, None, true)?;
    println!(
        "[{model}] cpu reference: {:.1}s",
        t0.elapsed().as_secs_f64()
    );
    let rc = runner_config(max_len, budget, blocks, sm_count);
    let mut cuda = CudaRunner::with_weights(&cfg, cuda_weights(&spec, 1234, &w), &rc)?;
    // Capture every decode graph up front (the path real-mode runs use).
    cuda.warm_up_graphs()?;
    let ref_tokens: Vec<Vec<u32>> = reference.iter().map(|t| t.tokens.clone()).collect();
    // Teacher forced on the reference's tokens (with logits), or a free run.
    let run = |runner: &mut CudaRunner, forced: bool| {
        let tokens = forced.then_some(ref_tokens.as_slice());
        generate(runner, &prompts, steps, budget, BLOCK_SIZE, tokens, forced)
    };
    let forced = run(&mut cuda, true)?;
    let free = run(&mut cuda, false)?;
    let mut eager = CudaRunner::with_weights(
        &cfg,
        cuda_weights(&spec, 1234, &w),
        &CudaRunnerConfig {
            use_cuda_graphs: false,
            ..rc
        },
    )?;
    let free_eager = run(&mut eager, false)?;
    // Teacher forced without graphs too: where the free runs part, this says by how much the
    // graph and eager paths' logits differ on the same tokens.
    let forced_eager = run(&mut eager, true)?;
    let mut all_ok = true;
    for (i, r) in reference.iter().enumerate() {
        let c = compare(&forced[i], &r.tokens, &r.logits);
        let m = prefix_match(&free[i].tokens, &r.tokens);
        let me = prefix_match(&free_eager[i].tokens, &free[i].tokens);
        let ge = compare(&forced_eager[i], &forced[i].tokens, &forced[i].logits);
        // bf16 activations vs the f32 reference: near-ties may flip; demand 95% agreement and small logit error.
        let ok = c.agree * 100 >= c.steps * 95 && c.rel_l2 < 0.05;
        all_ok &= ok;
        println!(
            "{} [{model}] prompt {i} (len {}): forced agree {}/{} | max|dlogit| {:.4} (max|logit| {:.2}, rel_l2 {:.2e}) | free-run match {}/{} | graph vs eager match {}/{}, forced max|dlogit| {:.4}",
            if ok { "PASS" } else { "FAIL" },
            prompts[i].len(), c.agree, c.steps, c.max_abs_diff, c.max_abs_logit, c.rel_l2, m, steps, me, steps, ge.max_abs_diff
        );
        for d in &ge.disagreements {
            println!("    eager argmax differs from the graph's at {d}");
        }
        for d in &c.disagreements {
            println!("    argmax differs at {d}");
        }
        let _ = writeln!(
            csv,
            "{date},{model},{i},{},{steps},{},{:.6},{:.4},{:.3e},{m},{me},{:.6},{},{}",
            prompts[i].len(),
            c.agree,
            c.max_abs_diff,
            c.max_abs_logit,
            c.rel_l2,
            ge.max_abs_diff,
            if ok { "pass" } else { "fail" },
            disagreement_cell(&c.disagreements)
        );
    }
    Ok(all_ok)
}

fn main() {
    let a = args::Args::parse();
    if let Err(e) = std::fs::create_dir_all(&a.out) {
        eprintln!("cannot create --out {}: {e}", a.out.display());
        std::process::exit(2);
    }
    let out = &a.out;
    let date = engine::date::utc_now();
    let mut ok = true;
    let quick_runs = a.quick || a.all;
    if quick_runs {
        ok &= quick();
    }
    if a.gqa && !quick_runs {
        ok &= gqa(&[]);
    }
    if a.errors || a.all {
        ok &= errors::error_paths(a.sm_count);
    }
    if a.bandwidth {
        ok &= bandwidth::bandwidth(a.sm_count);
    }
    if a.engine || a.all {
        for model in ["tiny", "qwen3-0.6b"] {
            match engine_e2e::engine_e2e(model, a.sm_count) {
                Ok((pass, line)) => {
                    println!("{} {line}", if pass { "PASS" } else { "FAIL" });
                    ok &= pass;
                }
                Err(e) => {
                    println!("FAIL [{model}] EngineCore: {e:#}");
                    ok = false;
                }
            }
        }
    }
    if a.cpu || a.all {
        let mut csv = String::from(
            "date,model,prompt,prompt_len,steps,forced_agree,max_abs_logit_diff,max_abs_logit,rel_l2,free_run_match,graph_vs_eager_match,graph_vs_eager_max_abs_logit_diff,verdict,disagreements\n",
        );
        for model in &a.models {
            match vs_cpu(model, a.steps, &mut csv, &date, a.sm_count) {
                Ok(p) => ok &= p,
                Err(e) => {
                    println!("FAIL [{model}] vs cpu: {e:#}");
                    ok = false;
                }
            }
        }
        if let Err(e) = std::fs::write(out.join("cuda_vs_cpu.csv"), csv) {
            println!("cannot write cuda_vs_cpu.csv: {e}");
        }
    }
    if !a.hf.is_empty() {
        let mut csv = String::from(
            "date,reference,dtype,budget,prompt,prompt_len,steps,free_run_match,forced_agree,max_abs_logit_diff,max_abs_logit,rel_l2,verdict,disagreements\n",
        );
        for dir in &a.hf {
            match hf::vs_hf(dir, a.hf_budget, &mut csv, &date, a.sm_count) {
                Ok(p) => ok &= p,
                Err(e) => {
                    println!("FAIL vs hf ({}): {e:#}", dir.display());
                    ok = false;
                }
            }
        }
        if let Err(e) = std::fs::write(out.join("vs_hf.csv"), csv) {
            println!("cannot write vs_hf.csv: {e}");
        }
    }
    println!("{}", if ok { "ALL PASS" } else { "SOME CHECKS FAILED" });
    std::process::exit(if ok { 0 } else { 1 });
}
