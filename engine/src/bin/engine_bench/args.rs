//! `engine-bench`'s options. Every value is checked here, before the slow
//! start (synthetic weights, kernel compilation): an unknown option, a value
//! out of range, an option that applies only to `--only-decode` (or only to
//! `--family`) runs without it, or `--family` with a run it does not do, is a
//! usage error.

use crate::steps::{BUDGET, CONTEXT_RANGE, DEFAULT_CONTEXT};
use clap::builder::{PossibleValuesParser, RangedU64ValueParser, TypedValueParser};
use clap::Parser;
use engine::runner::cuda::{DecodeKernel, MixedStep, SPLIT_K_MAX};
use std::path::PathBuf;

/// Most sequences a step of the bench's runner takes (its `max_num_seqs`).
pub(crate) const MAX_BATCH: usize = 256;

/// The Qwen3 dense family, the models of a bare `--family`.
pub(crate) const FAMILY: [&str; 6] = [
    "qwen3-0.6b",
    "qwen3-1.7b",
    "qwen3-4b",
    "qwen3-8b",
    "qwen3-14b",
    "qwen3-32b",
];

/// What a `--family` run does not do.
const FAMILY_CONFLICTS: [&str; 10] = [
    "decode_mix",
    "lone_blocks",
    "mixed_step",
    "model",
    "sm_count",
    "tune",
    "profile",
    "split_sweep",
    "pdl_sweep",
    "only_decode",
];

impl Args {
    /// The models of a `--family` run: the list given (comma-separated), or
    /// [`FAMILY`]; `None` without `--family`. An empty name is an error.
    pub fn family_models(&self) -> Option<Result<Vec<String>, String>> {
        let given = self.family.as_ref()?;
        Some(match given {
            None => Ok(FAMILY.iter().map(|m| m.to_string()).collect()),
            Some(list) => {
                let names: Vec<String> = list.split(',').map(|m| m.trim().to_string()).collect();
                if names.iter().any(String::is_empty) {
                    Err(format!(
                        "--family takes model names separated by commas, not {list:?}"
                    ))
                } else {
                    Ok(names)
                }
            }
        })
    }
}

/// Step times of the CUDA runner on synthetic weights; writes `engine.csv`
/// (`engine_eager.csv` with `--eager`) and the CSV files of the runs asked for.
#[derive(Debug, Parser)]
#[command(name = "engine-bench")]
pub(crate) struct Args {
    /// Directory the CSV files go to.
    #[arg(long, value_name = "DIR", default_value = ".")]
    pub out: PathBuf,
    /// Model: a preset (synthetic weights), or a directory with config.json
    /// (its safetensors, or synthetic weights of its shape if it has none).
    #[arg(long, default_value = "qwen3-0.6b")]
    pub model: String,
    /// Run in a CUDA green context of N SMs (the driver's granularity; by
    /// default the whole GPU).
    #[arg(long, value_name = "N", value_parser = RangedU64ValueParser::<usize>::new().range(1..))]
    pub sm_count: Option<usize>,
    /// The family table (`engine_family.csv`): decode and prefill steps of
    /// each model (the Qwen3 dense presets by default), one process per
    /// model, at each of `--sm-counts`.
    #[arg(long, value_name = "MODELS", num_args = 0..=1, conflicts_with_all = FAMILY_CONFLICTS)]
    pub family: Option<Option<String>>,
    /// With --family: the SM counts to run each model on (by default the
    /// whole GPU only).
    #[arg(long, value_name = "LIST", value_delimiter = ',', requires = "family", value_parser = RangedU64ValueParser::<usize>::new().range(1..))]
    pub sm_counts: Vec<usize>,
    /// With --family: also what the operator cost model is fitted on, for
    /// each model and SM count (operators.rs: `operators/groups.csv` and
    /// `operators/gemm_shapes.csv`; on the whole GPU also
    /// `operators/decode_mix.csv`).
    #[arg(long, requires = "family")]
    pub operators: bool,
    /// The median number of keys a timed decode step attends to.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_CONTEXT, value_parser = context_parser())]
    pub context: usize,
    /// Every step eager: no CUDA graphs.
    #[arg(long)]
    pub eager: bool,
    /// No kernel is a programmatic dependent launch.
    #[arg(long)]
    pub no_pdl: bool,
    /// Every GEMM runs cublasGemmEx (no cuBLASLt plans); otherwise the tuned
    /// shapes go to `gemm_tuning.csv`.
    #[arg(long)]
    pub no_gemm_tuning: bool,
    /// The O and down products' K in S slices (1: never) instead of the
    /// runner's rule.
    #[arg(long, value_name = "S", value_parser = RangedU64ValueParser::<usize>::new().range(1..=SPLIT_K_MAX as u64))]
    pub split_k: Option<usize>,
    /// Every decode-attention kernel and split target, by batch (`tune.csv`).
    #[arg(long)]
    pub tune: bool,
    /// Steps with kernel groups left out (`profile.csv`).
    #[arg(long)]
    pub profile: bool,
    /// Decode and eager steps by split of K (`split_k.csv`).
    #[arg(long)]
    pub split_sweep: bool,
    /// Decode steps by batch with programmatic dependent launches on and off
    /// (`pdl.csv`).
    #[arg(long)]
    pub pdl_sweep: bool,
    /// Time decode steps at batch B only and write nothing (a run to put
    /// under a profiler).
    #[arg(long, value_name = "B", value_parser = RangedU64ValueParser::<usize>::new().range(1..=MAX_BATCH as u64))]
    pub only_decode: Option<usize>,
    /// With --only-decode: one decode-attention kernel for every batch.
    #[arg(long, value_name = "NAME", requires = "only_decode", value_parser = decode_kernel_parser())]
    pub decode_kernel: Option<DecodeKernel>,
    /// With --only-decode: the warps the decode attention's splits aim at.
    #[arg(long, value_name = "WARPS", requires = "only_decode")]
    pub split_target: Option<usize>,
    /// With --only-decode: first capture every bucket's graph, as real mode does.
    #[arg(long, requires = "only_decode")]
    pub warm_graphs: bool,
    /// With --only-decode: then time the pieces of such a step (host packing,
    /// the graph launched and waited for, the whole step, its GPU span, and
    /// graph replays back to back: `CudaRunner::step_overheads`).
    #[arg(long, requires = "only_decode")]
    pub overheads: bool,
    /// Only this: a 64-token prefill chunk beside 8 decodes at 300 keys, and
    /// whole prompts of 256-2048 tokens, eager against piecewise-graphed
    /// (`CudaRunner::mixed_step_times`, medians of 40 steps; `mixed.csv`).
    #[arg(long, conflicts_with_all = ["eager", "only_decode"])]
    pub mixed: bool,
    /// Only this: decode steps of sequences at different contexts, one
    /// sequence for each number of the list (the median keys its timed steps
    /// attend to, each from 26 to 2048); repeat the option for more batches.
    /// Appends to `decode_mix.csv` (`steps::decode_mix`).
    #[arg(long, value_name = "CONTEXTS", value_parser = decode_mix_parser(), conflicts_with_all = ["eager", "only_decode", "mixed"])]
    pub decode_mix: Vec<DecodeMix>,
    /// Only this: steps of one prompt chunk of T tokens after C cached ones
    /// (the prompt's last chunk, sampling) beside D decodes that each attend
    /// to K keys, written `T@C+DxK` (or `T@C` for the chunk alone), eager
    /// against piecewise-graphed; repeat the option for more steps. Appends
    /// to `mixed_steps.csv` (`CudaRunner::mixed_step_times`).
    #[arg(long, value_name = "T@C+DxK", value_parser = mixed_step_parser(), conflicts_with_all = ["eager", "only_decode", "mixed", "decode_mix"])]
    pub mixed_step: Vec<MixedStep>,
    /// Only this: decode attention with a block alone on each SM (every
    /// block kernel unsplit at 1, 4 and 16 decodes over 300, 1,000 and 2,000
    /// keys, and each batch without attention). Appends to `lone_blocks.csv`
    /// (lone_blocks.rs).
    #[arg(long, conflicts_with_all = ["eager", "only_decode", "mixed", "decode_mix", "mixed_step", "tune", "profile", "split_sweep", "pdl_sweep"])]
    pub lone_blocks: bool,
}

/// `--mixed-step`: `T@C+DxK` or `T@C`, the step within the bench's token
/// budget and batch.
fn mixed_step_parser() -> impl TypedValueParser<Value = MixedStep> {
    clap::builder::NonEmptyStringValueParser::new().try_map(|spec: String| {
        let form = || format!("{spec:?} is not T@C+DxK (a chunk of T tokens after C cached, D decodes at K keys) or T@C");
        let (chunk, decodes) = match spec.split_once('+') {
            Some((c, d)) => (c, Some(d)),
            None => (spec.as_str(), None),
        };
        let number = |s: &str| s.trim().parse::<usize>().map_err(|_| form());
        let (t, c) = chunk.split_once('@').ok_or_else(form)?;
        let (chunk_tokens, chunk_context) = (number(t)?, number(c)?);
        let (decodes, decode_context) = match decodes {
            Some(d) => {
                let (n, k) = d.split_once('x').ok_or_else(form)?;
                (number(n)?, number(k)?)
            }
            None => (0, 1),
        };
        if chunk_tokens == 0 || decode_context == 0 {
            return Err(format!("{spec:?}: the chunk needs a token and each decode a key"));
        }
        if chunk_tokens + decodes > BUDGET || decodes + 1 > MAX_BATCH {
            return Err(format!(
                "{spec:?} is {} tokens in {} sequences; a step takes at most {BUDGET} in {MAX_BATCH}",
                chunk_tokens + decodes,
                decodes + 1
            ));
        }
        Ok(MixedStep {
            chunk_tokens,
            chunk_context,
            chunk_samples: true,
            decodes,
            decode_context,
        })
    })
}

/// The contexts of one `--decode-mix` batch, one a sequence.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct DecodeMix(pub Vec<usize>);

/// `--decode-mix`: 1 to [`MAX_BATCH`] contexts separated by commas, each in
/// [`CONTEXT_RANGE`].
fn decode_mix_parser() -> impl TypedValueParser<Value = DecodeMix> {
    clap::builder::NonEmptyStringValueParser::new().try_map(|list: String| {
        let contexts = list
            .split(',')
            .map(|c| {
                c.trim()
                    .parse::<usize>()
                    .ok()
                    .filter(|n| CONTEXT_RANGE.contains(n))
                    .ok_or_else(|| {
                        format!(
                            "{c:?} is not a context from {} to {} (the median keys a timed step attends to)",
                            CONTEXT_RANGE.start(),
                            CONTEXT_RANGE.end()
                        )
                    })
            })
            .collect::<Result<Vec<_>, _>>()?;
        if contexts.len() > MAX_BATCH {
            return Err(format!(
                "{} contexts is more sequences than a step takes ({MAX_BATCH})",
                contexts.len()
            ));
        }
        Ok(DecodeMix(contexts))
    })
}

/// `--context`: a whole number in [`CONTEXT_RANGE`].
fn context_parser() -> RangedU64ValueParser<usize> {
    RangedU64ValueParser::new().range(*CONTEXT_RANGE.start() as u64..=*CONTEXT_RANGE.end() as u64)
}

/// `--decode-kernel`: one of [`DecodeKernel::ALL`] by name (the help and
/// the error list them).
fn decode_kernel_parser() -> impl TypedValueParser<Value = DecodeKernel> {
    PossibleValuesParser::new(DecodeKernel::ALL.map(DecodeKernel::name)).try_map(|name: String| {
        DecodeKernel::ALL
            .into_iter()
            .find(|k| k.name() == name)
            .ok_or_else(|| format!("no decode kernel {name}"))
    })
}

#[cfg(test)]
#[path = "args_tests.rs"]
mod tests;
