//! `exp plan`: files and columns, both cost paths (transferred
//! profile and roofline fallback), KV capacity, unmeetable SLOs (here); bad
//! input (`bad_input`); the operator model's error bars (`error_bars`).
//! Request counts are kept small through `--set` so the suite stays fast.

mod bad_input;
mod error_bars;

use crate::common;

use calibration::features::{DENSE_KNOTS, LM_KNOTS, NUM_FEATURES};
use calibration::{CostProfile, Provenance};
use common::scratch;
use experiments::backend::{cost_for, ProfileLookup};
use experiments::plan::cost::decode_step_ms;
use experiments::plan::output::PLAN_COLUMNS;
use experiments::run_cli;
use sim::{GpuSpec, ModelShape};
use std::path::{Path, PathBuf};

fn run(args: &[&str]) -> anyhow::Result<()> {
    run_cli(std::iter::once("exp").chain(args.iter().copied()))
}

fn error_of(args: &[&str]) -> String {
    format!("{:#}", run(args).expect_err("command should fail"))
}

/// Small search and cb_sweep so a plan runs in about a second in debug builds.
const SMALL: &[&str] = &[
    "--set",
    "requests=40",
    "--set",
    "max_requests=160",
    "--set",
    "max_num_batched_tokens=1024",
    "--set",
    "max_num_seqs=32,64",
    "--set",
    "precision_pct=10",
    "--set",
    "prefix_caching_hash_algo=xxhash",
    "--cb-set",
    "concurrency=1,2",
    "--cb-set",
    "batches=2",
    "--cb-set",
    "prompt_tokens=32",
    "--cb-set",
    "output_tokens=4",
    "--quiet",
];

/// Short requests (fewer decode steps per simulated run), unless the test
/// passes its own `--workload`.
const SHORT_WORKLOAD: &str = "(prompt_tokens: Fixed(128), output_tokens: Fixed(16))";

fn small_plan(out: &Path, extra: &[&str]) -> anyhow::Result<()> {
    let workload = PathBuf::from(format!("{}-workload.ron", out.display()));
    std::fs::write(&workload, SHORT_WORKLOAD).expect("workload file");
    let mut args = vec!["plan", "--out", out.to_str().unwrap()];
    args.extend_from_slice(SMALL);
    if !extra.contains(&"--workload") {
        args.extend(["--workload", workload.to_str().unwrap()]);
    }
    args.extend_from_slice(extra);
    run(&args)
}

/// `plan.csv` as (header, rows of cells).
fn read_plan(out: &Path) -> (Vec<String>, Vec<Vec<String>>) {
    let text = std::fs::read_to_string(out.join("plan.csv")).expect("plan.csv");
    common::csv_rows(&text)
}

fn cell<'a>(header: &[String], row: &'a [String], column: &str) -> &'a str {
    let i = header.iter().position(|c| c == column).expect(column);
    &row[i]
}

fn num(header: &[String], row: &[String], column: &str) -> f64 {
    cell(header, row, column)
        .parse()
        .unwrap_or_else(|_| panic!("{column} = {:?}", cell(header, row, column)))
}

fn h200() -> GpuSpec {
    calibration::datasheet::lookup("h200-sxm").unwrap()
}

/// A profile shaped like a measured one: fixed step overheads that dominate a
/// batch-1 decode, memory-bound dense layers up to a few hundred tokens.
fn profile_on(gpu: GpuSpec) -> CostProfile {
    let mut c = [0.0; NUM_FEATURES];
    c[0] = 1.0e-3;
    c[1] = 1.5e-3;
    for (i, &t) in DENSE_KNOTS.iter().enumerate() {
        c[2 + i] = 0.6e-3_f64.max(t * 1.7e-6);
    }
    let lm = 2 + DENSE_KNOTS.len();
    for (i, &s) in LM_KNOTS.iter().enumerate() {
        c[lm + i] = 80e-6_f64.max(s * 0.8e-6);
    }
    let kv = lm + LM_KNOTS.len();
    c[kv] = 25e-9;
    c[kv + 1] = 2e-6;
    c[kv + 2] = 70e-12;
    c[kv + 3] = 5e-6;
    let provenance = Provenance {
        device: "NVIDIA H200".into(),
        model: "qwen3-0.6b".into(),
        engine_commit: "test".into(),
        date: "2026-11-30".into(),
        method: "measured".into(),
        samples: 0,
        holdout_error_pct_median: 0.0,
        holdout_error_pct_p90: 0.0,
    };
    CostProfile::from_coefficients(&c, gpu, ModelShape::qwen3_0_6b(), provenance)
}

fn twice_bandwidth() -> GpuSpec {
    let mut g = h200();
    g.name = "h200-2x-bandwidth".into();
    g.mem_bandwidth *= 2.0;
    g.source = "test: h200-sxm with twice the bandwidth".into();
    g
}

fn write_gpu_file(dir: &Path, gpus: &[GpuSpec]) -> PathBuf {
    let path = dir.join("gpus.ron");
    std::fs::write(&path, ron::to_string(&gpus.to_vec()).unwrap()).unwrap();
    path
}

#[test]
fn plan_writes_the_documented_columns_figures_and_assumptions() {
    let out = scratch("plan_files");
    // No profile in the folder searched: the roofline prices the steps.
    let no_profiles = out.join("no-profiles");
    std::fs::create_dir_all(&no_profiles).unwrap();
    let args = [
        "--gpu",
        "h200-sxm,a100-80gb-sxm",
        "--profiles-dir",
        no_profiles.to_str().unwrap(),
    ];
    small_plan(&out, &args).expect("plan runs");
    let meta = std::fs::read_to_string(out.join("meta.ron")).unwrap();
    assert!(meta.contains("decode_context_tokens: 136"), "{meta}");
    let (header, rows) = read_plan(&out);
    assert_eq!(header, PLAN_COLUMNS);
    assert_eq!(rows.len(), 2);
    assert_eq!(cell(&header, &rows[0], "gpu"), "h200-sxm");
    for row in &rows {
        assert!(num(&header, row, "max_qps_under_slo") > 0.0, "{row:?}");
        let b1 = num(&header, row, "decode_step_b1_ms");
        assert!(b1 > 0.0 && b1 < num(&header, row, "decode_step_b64_ms"));
        let seqs = cell(&header, row, "best_max_num_seqs");
        assert!(seqs == "32" || seqs == "64", "{seqs}");
    }
    for f in [
        "plan_ttft_p99.png",
        "plan_ttft_p99.svg",
        "plan_itl_p99.png",
        "plan_itl_p99.svg",
        "plan_search.csv",
        "plan_curve.csv",
        "meta.ron",
        "cb_sweep.csv",
        "h200-sxm/cb_sweep/sim/summary.csv",
        "a100-80gb-sxm/cb_sweep/sim/summary.csv",
    ] {
        let len = std::fs::metadata(out.join(f)).map(|m| m.len()).unwrap_or(0);
        assert!(len > 0, "{f} missing or empty");
    }
    let cb = std::fs::read_to_string(out.join("cb_sweep.csv")).unwrap();
    assert!(cb.starts_with("gpu,max_num_seqs,concurrency,"), "{cb}");
    assert_eq!(cb.lines().count(), 1 + 2 * 2 * 2, "{cb}");
    let text = std::fs::read_to_string(out.join("assumptions.txt")).unwrap();
    assert!(
        text.contains("datasheet roofline") && text.contains("No calibrated profile"),
        "the roofline fallback is announced: {text}"
    );
}

#[test]
fn an_slo_that_cannot_be_met_gives_zero_and_says_why() {
    let out = scratch("plan_unmet");
    small_plan(&out, &["--gpu", "h200-sxm", "--slo", "ttft_p99_ms=0.01"]).expect("no failure");
    let (header, rows) = read_plan(&out);
    assert_eq!(num(&header, &rows[0], "max_qps_under_slo"), 0.0);
    assert_eq!(cell(&header, &rows[0], "best_max_num_seqs"), "");
    assert_eq!(cell(&header, &rows[0], "best_max_num_batched_tokens"), "");
    let text = std::fs::read_to_string(out.join("assumptions.txt")).unwrap();
    assert!(
        text.contains("no setting meets the SLO") && text.contains("SLO cannot be met"),
        "{text}"
    );
    let search = std::fs::read_to_string(out.join("plan_search.csv")).unwrap();
    assert!(search.contains("requests running alone"), "{search}");
}

#[test]
fn a_transferred_profile_prices_the_plan_and_twice_the_bandwidth_helps_less_than_twofold() {
    let dir = scratch("plan_profile");
    let profile_path = dir.join("h200-qwen3-0.6b.ron");
    profile_on(h200()).save(&profile_path).unwrap();
    let gpu_file = write_gpu_file(&dir, &[twice_bandwidth()]);
    let out = dir.join("out");
    small_plan(
        &out,
        &[
            "--gpu",
            "h200-sxm,h200-2x-bandwidth",
            "--gpu-file",
            gpu_file.to_str().unwrap(),
            "--profile",
            profile_path.to_str().unwrap(),
        ],
    )
    .expect("plan runs");
    let (header, rows) = read_plan(&out);
    let (base, fast) = (&rows[0], &rows[1]);
    assert_eq!(cell(&header, fast, "gpu"), "h200-2x-bandwidth");
    // On the measured GPU the plan uses the profile as measured.
    let context = 136; // SHORT_WORKLOAD: prompt 128 + half of 16 outputs
    let lookup = ProfileLookup::File(profile_path.clone());
    let measured = cost_for(&ModelShape::qwen3_0_6b(), &h200(), &lookup).unwrap();
    let expected = decode_step_ms(&*measured.model, 1, context);
    assert!((num(&header, base, "decode_step_b1_ms") - expected).abs() < 1e-3);
    for col in [
        "decode_step_b1_ms",
        "decode_step_b16_ms",
        "decode_step_b64_ms",
    ] {
        let (b, f) = (num(&header, base, col), num(&header, fast, col));
        assert!(f < b, "{col}: {f} >= {b}");
        assert!(f > b / 2.0, "{col}: {f} is at least twice as fast as {b}");
    }
    let text = std::fs::read_to_string(out.join("assumptions.txt")).unwrap();
    assert!(
        text.contains("measured on h200-sxm, transferred")
            && text.contains(calibration::transfer::ASSUMPTIONS),
        "{text}"
    );
    assert!(!text.contains("No calibrated profile"), "{text}");
}

#[test]
fn a_shipped_profile_for_the_model_is_found_without_flags() {
    let dir = scratch("plan_shipped");
    let shipped = dir.join("profiles");
    // Matched by model shape: the provenance's model text is only a label
    // (the shipped H200 profile says "qwen3-0.6b (synthetic weights, seed 0)").
    let mut labelled = profile_on(h200());
    labelled.provenance.model = "qwen3-0.6b (synthetic weights, seed 0)".into();
    labelled.save(&shipped.join("h200-qwen3-0.6b.ron")).unwrap();
    let out = dir.join("out");
    let args = [
        "--gpu",
        "h200-sxm",
        "--profiles-dir",
        shipped.to_str().unwrap(),
    ];
    small_plan(&out, &args).expect("plan runs");
    let meta = std::fs::read_to_string(out.join("meta.ron")).unwrap();
    assert!(meta.contains("h200-qwen3-0.6b.ron"), "{meta}");
    // Profiles for other models (other shapes) are skipped: the plan falls
    // back to the roofline, whatever their label says.
    let elsewhere = dir.join("other-profiles");
    let mut other = profile_on(h200());
    other.model.num_layers = 12;
    other
        .save(&elsewhere.join("h200-qwen3-0.6b-old.ron"))
        .unwrap();
    let out = dir.join("fallback");
    let args = [
        "--gpu",
        "h200-sxm",
        "--profiles-dir",
        elsewhere.to_str().unwrap(),
    ];
    small_plan(&out, &args).expect("plan runs");
    let text = std::fs::read_to_string(out.join("assumptions.txt")).unwrap();
    assert!(text.contains("datasheet roofline"), "{text}");
    let meta = std::fs::read_to_string(out.join("meta.ron")).unwrap();
    assert!(meta.contains("basis: Roofline"), "{meta}");
    // A profile given for the model but of another shape is an error, not a
    // quiet fallback.
    let wrong = elsewhere.join("h200-qwen3-0.6b-old.ron");
    let args = [
        "plan",
        "--gpu",
        "h200-sxm",
        "--profile",
        wrong.to_str().unwrap(),
    ];
    let msg = error_of(&args);
    assert!(
        msg.contains("h200-qwen3-0.6b-old.ron") && msg.contains("shape"),
        "{msg}"
    );
}

#[test]
fn without_flags_the_plan_uses_the_shipped_profile_like_exp_run() {
    let out = scratch("plan_shipped_default");
    small_plan(&out, &["--gpu", "h200-sxm,l4"]).expect("plan runs");
    let text = std::fs::read_to_string(out.join("assumptions.txt")).unwrap();
    assert!(
        text.contains("h200-sxm: calibrated profile")
            && text.contains("shipped:h200-qwen3-0.6b.ron (as measured on h200-sxm")
            && text.contains("measured on h200-sxm, transferred to l4")
            && text.contains(calibration::transfer::ASSUMPTIONS),
        "{text}"
    );
    assert!(!text.contains("No calibrated profile"), "{text}");
    // exp run --mode sim prices the same GPU with the same cost model.
    let run_out = scratch("plan_shipped_default_run");
    let args = [
        "run",
        "cb_sweep",
        "--mode",
        "sim",
        "--gpu",
        "l4",
        "--quiet",
        "--set",
        "concurrency=1",
        "--set",
        "batches=2",
        "--set",
        "output_tokens=2",
        "--out",
        run_out.to_str().unwrap(),
    ];
    run(&args).expect("exp run");
    let meta = std::fs::read_to_string(run_out.join("cb_sweep/sim/meta.ron")).unwrap();
    let line = text
        .lines()
        .find_map(|l| l.strip_prefix("  l4: "))
        .expect("l4's cost model line");
    assert!(meta.contains(line), "{line} not in {meta}");
}
