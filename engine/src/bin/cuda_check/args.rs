//! `cuda-check`'s options, checked before anything runs: an unknown option,
//! a count that is not a positive whole number, `--hf-budget` without
//! `--hf`, or no part to check at all (nothing would run, and "ALL PASS"
//! would claim what was not checked) is a usage error.

use clap::builder::RangedU64ValueParser;
use clap::{ArgGroup, Parser};
use std::path::PathBuf;

/// Correctness evidence for the CUDA runner; give at least one part to check.
#[derive(Debug, Parser)]
#[command(name = "cuda-check")]
#[command(group(
    ArgGroup::new("parts")
        .required(true)
        .multiple(true)
        .args(["quick", "gqa", "errors", "bandwidth", "engine", "cpu", "hf", "all"])
))]
pub(crate) struct Args {
    /// Directory the CSV files go to.
    #[arg(long, value_name = "DIR", default_value = ".")]
    pub out: PathBuf,
    /// Tokens sampled per prompt in the comparison with the CPU runner.
    #[arg(long, value_name = "N", default_value_t = 64, value_parser = positive())]
    pub steps: usize,
    /// Model presets of the comparison with the CPU runner.
    #[arg(
        long,
        value_name = "LIST",
        value_delimiter = ',',
        default_value = "tiny,qwen3-0.6b"
    )]
    pub models: Vec<String>,
    /// Every kernel against a host computation (with --gqa's checks and the
    /// synthetic weights generated on the GPU against the host's).
    #[arg(long)]
    pub quick: bool,
    /// The attention kernels alone (prefill tiles, whole and chunked over
    /// cached context, and every decode kernel) for groups of 2, 3, 4, 5 and
    /// 8 query heads per KV head (128-dim heads, 8 KV heads).
    #[arg(long)]
    pub gqa: bool,
    /// Build every runner in a CUDA green context of N SMs (the kernel
    /// self-tests run on the whole GPU).
    #[arg(long, value_name = "N", value_parser = positive())]
    pub sm_count: Option<usize>,
    /// The runner's failure paths on the device (KV-cache sizing, out of memory).
    #[arg(long)]
    pub errors: bool,
    /// The copy bandwidth of the runner's SMs at 1, 4 and 8 loads in flight
    /// per thread, and the skinny GEMM kernels' blocks per SM (bandwidth.rs).
    #[arg(long)]
    pub bandwidth: bool,
    /// The same requests through EngineCore with the CPU and the CUDA runner.
    #[arg(long)]
    pub engine: bool,
    /// CUDA against the CPU reference runner on synthetic weights (`cuda_vs_cpu.csv`).
    #[arg(long)]
    pub cpu: bool,
    /// Checkpoints and `reference.json` files written by
    /// `scripts/hf_reference.py`, against transformers (`vs_hf.csv`).
    #[arg(long, value_name = "DIR[,DIR...]", value_delimiter = ',')]
    pub hf: Vec<PathBuf>,
    /// With --hf: N tokens per step, which chunks the longer prefills (by
    /// default each prompt is prefilled in one step, as transformers does).
    #[arg(long, value_name = "N", requires = "hf", value_parser = positive())]
    pub hf_budget: Option<usize>,
    /// --quick (with --gqa), --errors, --engine and --cpu.
    #[arg(long)]
    pub all: bool,
}

/// A whole number of at least 1.
fn positive() -> RangedU64ValueParser<usize> {
    RangedU64ValueParser::new().range(1..)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::error::ErrorKind;

    fn parse(line: &str) -> Result<Args, clap::Error> {
        Args::try_parse_from(std::iter::once("cuda-check").chain(line.split_whitespace()))
    }

    fn error_kind(line: &str) -> ErrorKind {
        parse(line).expect_err(line).kind()
    }

    #[test]
    fn every_part_is_selected_by_its_option() {
        let a = parse("--quick").unwrap();
        assert!(a.quick && !(a.errors || a.engine || a.cpu || a.all) && a.hf.is_empty());
        let a = parse("--gqa").unwrap();
        assert!(a.gqa && !(a.quick || a.errors || a.engine || a.cpu || a.all));
        assert_eq!(a.sm_count, None);
        let a = parse("--cpu --sm-count 16").unwrap();
        assert_eq!(a.sm_count, Some(16));
        let a = parse("--errors --engine --cpu --all").unwrap();
        assert!(a.errors && a.engine && a.cpu && a.all && !a.quick);
        let a = parse("--hf a,b --hf-budget 64").unwrap();
        assert_eq!(a.hf, [PathBuf::from("a"), PathBuf::from("b")]);
        assert_eq!(a.hf_budget, Some(64));
    }

    #[test]
    fn values_and_defaults() {
        let a = parse("--cpu").unwrap();
        assert_eq!((a.out, a.steps), (PathBuf::from("."), 64));
        assert_eq!(a.models, ["tiny", "qwen3-0.6b"]);
        assert_eq!(a.hf_budget, None);
        let a = parse("--cpu --out d --steps 8 --models tiny").unwrap();
        assert_eq!(
            (a.out, a.steps, a.models),
            (PathBuf::from("d"), 8, vec!["tiny".into()])
        );
    }

    #[test]
    fn nothing_to_check_is_an_error() {
        assert_eq!(error_kind(""), ErrorKind::MissingRequiredArgument);
        assert_eq!(
            error_kind("--steps 8 --out d"),
            ErrorKind::MissingRequiredArgument
        );
        let msg = parse("").unwrap_err().to_string();
        for part in [
            "--quick",
            "--gqa",
            "--errors",
            "--bandwidth",
            "--engine",
            "--cpu",
            "--hf",
            "--all",
        ] {
            assert!(msg.contains(part), "{msg}");
        }
    }

    #[test]
    fn bad_values_and_unknown_options_are_errors() {
        assert_eq!(error_kind("--cpu --steps 0"), ErrorKind::ValueValidation);
        assert_eq!(error_kind("--cpu --steps -3"), ErrorKind::UnknownArgument);
        assert_eq!(error_kind("--cpu --steps x"), ErrorKind::ValueValidation);
        assert_eq!(
            error_kind("--hf d --hf-budget 0"),
            ErrorKind::ValueValidation
        );
        assert_eq!(
            error_kind("--cpu --hf-budget 64"),
            ErrorKind::MissingRequiredArgument
        );
        assert_eq!(error_kind("--quick --quik"), ErrorKind::UnknownArgument);
        assert_eq!(error_kind("--cpu --sm-count 0"), ErrorKind::ValueValidation);
        // An SM count alone checks nothing.
        assert_eq!(
            error_kind("--sm-count 8"),
            ErrorKind::MissingRequiredArgument
        );
        assert_eq!(error_kind("--cpu --out"), ErrorKind::InvalidValue);
    }
}
