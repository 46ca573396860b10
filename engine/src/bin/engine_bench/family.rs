//! `engine-bench --family`: the step times of a family of models, at several
//! SM counts, in `engine_family.csv` (table.rs's columns).
//!
//! For each model: decode steps at batch 1 / 16 / 64 / 256 (context
//! `--context`, 300 by default) and prefills of 512 / 2,048 / 3,200 tokens,
//! at each SM count of `--sm-counts` (the whole GPU when none is given), each
//! row appended as soon as it is measured. Each (model, SM count) runs in a
//! process of its own (the bench runs itself with `--family MODEL
//! --sm-counts N`, the other settings passed on; one pair runs in this
//! process): a model's GPU memory goes with its process, and no runner
//! times its steps after others lived in the process. On the H200
//! (2026-12-01) qwen3-0.6b's whole-GPU decode steps took 3-6 % longer after
//! four SM-limited runners had been built and dropped in the same process
//! (batch 64: 1.647 ms against 1.548 in a fresh one). A step whose KV blocks
//! the runner's cache cannot hold is skipped with a line saying so. Progress
//! goes to stderr; a model or SM count that fails is reported and the rest
//! still run, and the exit status says whether all of it ran. With
//! `--operators` each process also writes what the operator cost model is
//! fitted on (operators.rs).

use crate::args::Args;
use crate::steps::{bench_runner, decode, prefill, Workload, BLOCK_SIZE, BUDGET, SEED};
use crate::table::{self, RunInfo};
use anyhow::Context as _;
use engine::model::ModelSpec;
use engine::ModelRunner;
use std::ffi::OsString;
use std::process::Command;

/// Decode batches and prefill lengths of every model and SM count.
pub(crate) const DECODE_BATCHES: [usize; 4] = [1, 16, 64, 256];
pub(crate) const PREFILL_TOKENS: [usize; 3] = [512, 2048, 3200];
/// The file the rows go to, in `--out`.
pub(crate) const FILE: &str = "engine_family.csv";

/// The (model, SM count) pairs of the table, models outermost; `None` is
/// the whole GPU.
pub(crate) fn pairs<'m>(a: &Args, models: &'m [String]) -> Vec<(&'m str, Option<usize>)> {
    let counts: Vec<Option<usize>> = if a.sm_counts.is_empty() {
        vec![None]
    } else {
        a.sm_counts.iter().copied().map(Some).collect()
    };
    models
        .iter()
        .flat_map(|m| counts.iter().map(move |&n| (m.as_str(), n)))
        .collect()
}

/// Runs the table for `models` (one process per model and SM count when
/// there are several).
pub(crate) fn run(a: &Args, models: &[String]) -> anyhow::Result<()> {
    std::fs::create_dir_all(&a.out)
        .with_context(|| format!("creating --out {}", a.out.display()))?;
    let pairs = pairs(a, models);
    if let [(model, sm)] = pairs[..] {
        return run_model(a, model, sm);
    }
    let exe = std::env::current_exe().context("finding engine-bench's own executable")?;
    let mut failed = Vec::new();
    for (i, &(model, sm)) in pairs.iter().enumerate() {
        let label = sm.map_or("whole GPU".to_string(), |n| format!("{n} SMs"));
        eprintln!(
            "[family {}/{}] {model}, {label}: starting",
            i + 1,
            pairs.len()
        );
        let status = Command::new(&exe)
            .args(child_args(a, model, sm))
            .status()
            .with_context(|| format!("starting {} for {model}", exe.display()))?;
        if !status.success() {
            eprintln!(
                "[family {}/{}] {model}, {label}: FAILED ({status})",
                i + 1,
                pairs.len()
            );
            failed.push(format!("{model} on {label}"));
        }
    }
    anyhow::ensure!(failed.is_empty(), "the family table is missing {failed:?}");
    eprintln!("[family] done: {}", a.out.join(FILE).display());
    Ok(())
}

/// The arguments of the process that runs `model` on `sm` SMs (`None`: the
/// whole GPU): this run's settings.
pub(crate) fn child_args(a: &Args, model: &str, sm: Option<usize>) -> Vec<OsString> {
    let mut v: Vec<OsString> = vec![
        "--family".into(),
        model.into(),
        "--out".into(),
        a.out.clone().into(),
        "--context".into(),
        a.context.to_string().into(),
    ];
    if let Some(n) = sm {
        v.extend(["--sm-counts".into(), n.to_string().into()]);
    }
    for (on, flag) in [
        (a.eager, "--eager"),
        (a.no_pdl, "--no-pdl"),
        (a.no_gemm_tuning, "--no-gemm-tuning"),
        (a.operators, "--operators"),
    ] {
        if on {
            v.push(flag.into());
        }
    }
    if let Some(s) = a.split_k {
        v.extend(["--split-k".into(), s.to_string().into()]);
    }
    v
}

/// One model on `sm` SMs, in this process.
fn run_model(a: &Args, model: &str, sm: Option<usize>) -> anyhow::Result<()> {
    let spec = ModelSpec::parse(model)?;
    let wl =
        Workload::new(spec.config.vocab_size, BUDGET, a.context).map_err(anyhow::Error::msg)?;
    let weights = spec.weights(SEED)?;
    let date = engine::date::utc_now();
    let path = a.out.join(FILE);
    let label = sm.map_or("whole GPU".to_string(), |n| format!("{n} SMs"));
    let tag = format!("[{}] {label}", spec.name);
    eprintln!("{tag}: building the runner");
    let mut r = bench_runner(&spec, &weights, &wl, sm, a)
        .with_context(|| format!("{tag}: building the runner"))?;
    let mut ok = true;
    eprintln!(
        "{tag}: {} with {} SMs, copy bandwidth {:.2} TB/s, {} KV blocks",
        r.device_name(),
        r.sm_count(),
        r.measured_copy_bandwidth() * 1e-12,
        r.num_kv_blocks()
    );
    let info = RunInfo::of_runner(&spec.name, &r, date);
    // (kind, batch, tokens, KV blocks the step needs, tokens it produces)
    let steps = DECODE_BATCHES
        .iter()
        .map(|&b| ("decode", b, a.context, b * wl.blocks_per_seq(), b))
        .chain(
            PREFILL_TOKENS
                .iter()
                .map(|&n| ("prefill", 1, n, n.div_ceil(BLOCK_SIZE), n)),
        );
    for (kind, batch, tokens, blocks, produced) in steps {
        let what = format!("{tag}: {kind} batch {batch} tokens {tokens}");
        // Block 0 is the null block: the step's tables use blocks 1 ..= blocks.
        if blocks + 1 > r.num_kv_blocks() {
            eprintln!(
                "{what}: skipped, it needs {} KV blocks and the cache holds {}",
                blocks + 1,
                r.num_kv_blocks()
            );
            continue;
        }
        let timing = if kind == "decode" {
            decode(&mut r, batch, &wl)
        } else {
            prefill(&mut r, tokens, wl.vocab)
        };
        match timing {
            Ok(s) => {
                eprintln!("{what}: {:.3} ms", s * 1e3);
                table::append(&path, &info.row(kind, batch, tokens, s, produced))
                    .with_context(|| format!("appending to {}", path.display()))?;
            }
            Err(e) => {
                eprintln!("{what}: FAILED: {e:#}");
                ok = false;
            }
        }
    }
    if a.operators {
        ok &= crate::operators::append_rows(&mut r, &info, &wl, &a.out, &tag)?;
        if sm.is_none() {
            use crate::operators::{time_mixes, DIR, FAMILY_MIXES, MIX_FILE};
            let path = a.out.join(DIR).join(MIX_FILE);
            ok &= time_mixes(
                &mut r,
                &info,
                &wl,
                &FAMILY_MIXES,
                &path,
                &format!("{tag}: "),
            )?;
        }
    }
    anyhow::ensure!(ok, "[{}] some steps failed", spec.name);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser as _;

    fn parse(line: &str) -> Args {
        Args::try_parse_from(std::iter::once("engine-bench").chain(line.split_whitespace()))
            .unwrap()
    }

    #[test]
    fn a_models_process_gets_this_runs_settings() {
        let a = parse(
            "--family --out d --context 400 --sm-counts 8,132 --no-pdl --split-k 2 --operators",
        );
        let args = child_args(&a, "qwen3-14b", Some(8));
        let child =
            Args::try_parse_from(std::iter::once(OsString::from("engine-bench")).chain(args))
                .unwrap();
        assert_eq!(child.family_models(), Some(Ok(vec!["qwen3-14b".into()])));
        assert_eq!((child.out, child.context), (a.out.clone(), 400));
        assert_eq!(child.sm_counts, [8]);
        assert!(child.no_pdl && !child.eager && !child.no_gemm_tuning && child.operators);
        assert_eq!(child.split_k, Some(2));
        // The whole GPU: no --sm-counts passed on.
        let args = child_args(&parse("--family"), "tiny", None);
        assert!(!args.iter().any(|s| s == "--sm-counts"));
    }

    #[test]
    fn each_model_and_sm_count_is_a_process_of_its_own() {
        let a = parse("--family --sm-counts 8,132");
        let models = ["qwen3-0.6b".to_string(), "qwen3-8b".to_string()];
        assert_eq!(
            pairs(&a, &models),
            [
                ("qwen3-0.6b", Some(8)),
                ("qwen3-0.6b", Some(132)),
                ("qwen3-8b", Some(8)),
                ("qwen3-8b", Some(132)),
            ]
        );
        assert_eq!(
            pairs(&parse("--family"), &models[..1]),
            [("qwen3-0.6b", None)]
        );
    }

    #[test]
    fn every_model_times_four_batches_and_three_prompts() {
        assert_eq!(DECODE_BATCHES, [1, 16, 64, 256]);
        assert_eq!(PREFILL_TOKENS, [512, 2048, 3200]);
        // The longest prompt fits the bench's token budget in one step.
        assert!(PREFILL_TOKENS.iter().all(|&n| n <= BUDGET));
    }
}
