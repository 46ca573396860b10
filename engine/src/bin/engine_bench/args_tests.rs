//! Tests of engine-bench's command line: what parses, and what is refused
//! with which clap error.

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
