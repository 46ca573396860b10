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
mod tests {
    use super::*;
    use clap::error::ErrorKind;

    fn parse(line: &str) -> Result<Args, clap::Error> {
        Args::try_parse_from(std::iter::once("engine-bench").chain(line.split_whitespace()))
    }

    fn error(line: &str) -> (ErrorKind, String) {
        let e = parse(line).expect_err(line);
        (e.kind(), e.to_string())
    }

    #[test]
    fn defaults_are_the_standard_bench() {
        let a = parse("").unwrap();
        assert_eq!(a.out, PathBuf::from("."));
        assert_eq!((a.model.as_str(), a.context), ("qwen3-0.6b", 300));
        assert!(!(a.eager || a.no_pdl || a.no_gemm_tuning || a.tune || a.profile));
        assert!(!(a.split_sweep || a.pdl_sweep || a.warm_graphs || a.overheads));
        assert_eq!(
            (a.split_k, a.only_decode, a.split_target),
            (None, None, None)
        );
        assert_eq!(a.decode_kernel, None);
    }

    #[test]
    fn options_keep_their_names() {
        let a = parse(
            "--out d --model tiny --context 325 --eager --no-pdl --no-gemm-tuning --split-k 4 \
             --tune --profile --split-sweep --pdl-sweep",
        )
        .unwrap();
        assert_eq!(
            (a.out, a.model, a.context),
            (PathBuf::from("d"), "tiny".into(), 325)
        );
        assert!(a.eager && a.no_pdl && a.no_gemm_tuning && a.tune && a.profile);
        assert!(a.split_sweep && a.pdl_sweep);
        assert_eq!(a.split_k, Some(4));
        let a = parse(
            "--only-decode 64 --decode-kernel BlockW4U4 --split-target 1024 --warm-graphs --overheads",
        )
        .unwrap();
        assert_eq!(a.only_decode, Some(64));
        assert_eq!(a.decode_kernel, Some(DecodeKernel::BlockW4U4));
        assert_eq!(a.split_target, Some(1024));
        assert!(a.warm_graphs && a.overheads);
    }

    #[test]
    fn values_out_of_range_are_errors_that_name_the_range() {
        for (line, range) in [
            ("--context 25", "26..=2048"),
            ("--context 2049", "26..=2048"),
            ("--split-k 0", "1..=8"),
            ("--split-k 9", "1..=8"),
            ("--only-decode 0", "1..=256"),
            ("--only-decode 257", "1..=256"),
        ] {
            let (kind, msg) = error(line);
            assert_eq!(kind, ErrorKind::ValueValidation, "{line}");
            assert!(msg.contains(range), "{line}: {msg}");
        }
        assert!(parse("--context 26").is_ok() && parse("--context 2048").is_ok());
        let (kind, _) = error("--context many");
        assert_eq!(kind, ErrorKind::ValueValidation);
    }

    #[test]
    fn a_decode_kernel_is_taken_by_name_and_an_unknown_one_lists_the_names() {
        for k in DecodeKernel::ALL {
            let a = parse(&format!("--only-decode 1 --decode-kernel {}", k.name())).unwrap();
            assert_eq!(a.decode_kernel, Some(k));
        }
        let (kind, msg) = error("--only-decode 1 --decode-kernel BlockW16U4");
        assert_eq!(kind, ErrorKind::InvalidValue);
        for k in DecodeKernel::ALL {
            assert!(msg.contains(k.name()), "{msg}");
        }
    }

    #[test]
    fn only_decode_options_need_only_decode() {
        for line in [
            "--decode-kernel HeadsU4",
            "--split-target 2048",
            "--warm-graphs",
            "--overheads",
        ] {
            let (kind, msg) = error(line);
            assert_eq!(kind, ErrorKind::MissingRequiredArgument, "{line}");
            assert!(msg.contains("--only-decode"), "{line}: {msg}");
        }
    }

    #[test]
    fn family_takes_a_list_or_the_six_presets() {
        assert!(parse("").unwrap().family_models().is_none());
        let a = parse("--family").unwrap();
        assert_eq!(
            a.family_models(),
            Some(Ok(FAMILY.map(String::from).to_vec()))
        );
        assert!(a.sm_counts.is_empty());
        let a = parse("--family qwen3-0.6b,qwen3-8b --sm-counts 8,16,132").unwrap();
        assert_eq!(
            a.family_models(),
            Some(Ok(vec!["qwen3-0.6b".into(), "qwen3-8b".into()]))
        );
        assert_eq!(a.sm_counts, [8, 16, 132]);
        // A bare --family followed by another option.
        let a = parse("--family --sm-counts 32 --out d").unwrap();
        assert_eq!(a.family_models().unwrap().unwrap().len(), 6);
        assert_eq!((a.sm_counts, a.out), (vec![32], PathBuf::from("d")));
        let e = parse("--family qwen3-0.6b,,tiny")
            .unwrap()
            .family_models()
            .unwrap()
            .unwrap_err();
        assert!(e.contains("separated by commas"), "{e}");
    }

    #[test]
    fn a_mixed_step_is_a_chunk_after_its_context_beside_decodes() {
        let a = parse("--mixed-step 1900@1000+136x1000 --mixed-step 512@0").unwrap();
        let step = |t, c, d, k| MixedStep {
            chunk_tokens: t,
            chunk_context: c,
            chunk_samples: true,
            decodes: d,
            decode_context: k,
        };
        assert_eq!(
            a.mixed_step,
            vec![step(1900, 1000, 136, 1000), step(512, 0, 0, 1)]
        );
        for (bad, says) in [
            ("1900", "T@C+DxK"),
            ("19x@0", "T@C+DxK"),
            ("64@0+8", "T@C+DxK"),
            ("0@10", "a token"),
            ("64@0+8x0", "a key"),
            ("3200@0+1x300", "at most 3200"),
            ("64@0+256x300", "in 256"),
        ] {
            let (kind, msg) = error(&format!("--mixed-step {bad}"));
            assert_eq!(kind, ErrorKind::ValueValidation, "{bad}");
            assert!(msg.contains(says), "{bad}: {msg}");
        }
        assert_eq!(
            error("--mixed-step 64@0 --mixed").0,
            ErrorKind::ArgumentConflict
        );
    }

    #[test]
    fn lone_blocks_runs_alone_on_one_model() {
        let a = parse("--lone-blocks --model qwen3-4b --sm-count 16 --out d").unwrap();
        assert!(a.lone_blocks);
        assert!(!parse("").unwrap().lone_blocks);
        for other in [
            "--family",
            "--only-decode 1",
            "--tune",
            "--eager",
            "--mixed",
        ] {
            let (kind, msg) = error(&format!("--lone-blocks {other}"));
            assert_eq!(kind, ErrorKind::ArgumentConflict, "{other}");
            assert!(msg.contains("--lone-blocks"), "{other}: {msg}");
        }
    }

    #[test]
    fn family_options_are_checked() {
        assert_eq!(error("--sm-counts 8").0, ErrorKind::MissingRequiredArgument);
        assert_eq!(
            error("--family --sm-counts 0").0,
            ErrorKind::ValueValidation
        );
        assert_eq!(
            error("--family --sm-counts x").0,
            ErrorKind::ValueValidation
        );
        for other in [
            "--model tiny",
            "--sm-count 8",
            "--tune",
            "--profile",
            "--only-decode 1",
        ] {
            let (kind, msg) = error(&format!("--family {other}"));
            assert_eq!(kind, ErrorKind::ArgumentConflict, "{other}");
            assert!(msg.contains("--family"), "{other}: {msg}");
        }
        // What the family's steps share with the standard bench is allowed.
        assert!(parse("--family --eager --no-pdl --split-k 2 --context 400").is_ok());
    }

    #[test]
    fn an_sm_count_is_a_positive_number() {
        assert_eq!(parse("--sm-count 16").unwrap().sm_count, Some(16));
        assert_eq!(parse("").unwrap().sm_count, None);
        assert_eq!(error("--sm-count 0").0, ErrorKind::ValueValidation);
    }

    #[test]
    fn a_decode_mix_is_a_list_of_contexts_and_repeats() {
        let a = parse("--decode-mix 2048,300,300 --decode-mix 1000").unwrap();
        assert_eq!(
            a.decode_mix,
            vec![DecodeMix(vec![2048, 300, 300]), DecodeMix(vec![1000])]
        );
        assert!(parse("").unwrap().decode_mix.is_empty());
        let (kind, msg) = error("--decode-mix 2048,3000");
        assert_eq!(kind, ErrorKind::ValueValidation);
        assert!(
            msg.contains("\"3000\" is not a context from 26 to 2048"),
            "{msg}"
        );
        assert_eq!(error("--decode-mix 300,,300").0, ErrorKind::ValueValidation);
        let many = vec!["300"; MAX_BATCH + 1].join(",");
        let (_, msg) = error(&format!("--decode-mix {many}"));
        assert!(
            msg.contains("257 contexts is more sequences than a step takes (256)"),
            "{msg}"
        );
        assert_eq!(
            error("--decode-mix 300 --family").0,
            ErrorKind::ArgumentConflict
        );
        assert_eq!(
            error("--decode-mix 300 --mixed").0,
            ErrorKind::ArgumentConflict
        );
    }

    #[test]
    fn unknown_options_and_missing_values_are_errors() {
        assert_eq!(error("--warm-graph").0, ErrorKind::UnknownArgument);
        assert_eq!(error("--upload-graphs").0, ErrorKind::UnknownArgument);
        assert_eq!(error("--only-decode").0, ErrorKind::InvalidValue);
        assert_eq!(error("64").0, ErrorKind::UnknownArgument);
    }
}
