//! Real mode on the CPU runner with the tiny model (CI has no GPU): every
//! experiment in `--mode real` and, through `exp validate`, in both modes;
//! `exp calibrate` and the profile it writes. Both modes compare the CPU
//! runner with a profile measured on it ([`tiny_cpu_profile`]).

use crate::common;

use common::{scratch, tiny_cpu_profile, TINY_CPU};
use experiments::run_cli;
use std::path::Path;

fn run(args: &[&str]) -> anyhow::Result<()> {
    run_cli(std::iter::once("exp").chain(args.iter().copied()))
}

/// Engine settings small enough for the tiny model on a CPU.
const ENGINE: &[&str] = &[
    "max_model_len=256",
    "max_num_batched_tokens=256",
    "max_num_seqs=16",
];

/// Per experiment: settings that keep every prompt within 256 tokens and
/// every run short.
const TINY: &[(&str, &[&str])] = &[
    (
        "cb_sweep",
        &[
            "max_num_seqs=1,16",
            "concurrency=1,4",
            "prompt_tokens=32",
            "output_tokens=8",
            "batches=2",
        ],
    ),
    (
        "chunk_sweep",
        &[
            "chunk_tokens=64,off",
            "decode_tokens=150",
            "decode_prompt_tokens=16",
            "long_prompt_tokens=200",
            "long_prompts=2",
            "gap_ms=1",
            "load_chunk_tokens=64,256",
            "concurrency=2",
            "prompt_tokens=32",
            "output_tokens=8",
            "batches=2",
        ],
    ),
    (
        "prefix_cache",
        &[
            "rounds=2",
            "warm_requests=2",
            "prefix_tokens=128",
            "unique_tokens=8",
        ],
    ),
    (
        "salt_isolation",
        &["rounds=2", "prefix_tokens=128", "unique_tokens=8"],
    ),
    (
        "timing_leak",
        &[
            "trials=8",
            "doc_tokens=64",
            "suffix_tokens=8",
            "noise_per_trial=1",
            "noise_max_prompt_tokens=64",
            "noise_max_output_tokens=4",
            "window_ms=1",
        ],
    ),
    (
        "poisson_mix",
        &[
            "rates=100,400",
            "requests=30",
            "skip=5",
            "prompt_min=16",
            "prompt_max=160",
            "output_min=4",
            "output_max=32",
            "prefixes=2",
            "prefix_tokens=64",
        ],
    ),
];

fn assert_files(dir: &Path, files: &[&str]) {
    for f in files {
        let p = dir.join(f);
        assert!(
            p.is_file() && std::fs::metadata(&p).unwrap().len() > 0,
            "{} missing or empty",
            p.display()
        );
    }
}

fn figures_in(dir: &Path) -> usize {
    std::fs::read_dir(dir)
        .unwrap()
        .filter(|e| {
            let name = e.as_ref().unwrap().file_name();
            name.to_string_lossy().ends_with(".svg")
        })
        .count()
}

#[test]
fn every_experiment_runs_in_real_mode_on_the_cpu_runner() {
    let out = scratch("real-every");
    let out_s = out.to_str().unwrap();
    for (name, sets) in TINY {
        let mut args = vec!["run", name, "--mode", "real", "--out", out_s];
        args.extend_from_slice(TINY_CPU);
        for s in ENGINE.iter().chain(sets.iter()) {
            args.extend(["--set", s]);
        }
        run(&args).unwrap_or_else(|e| panic!("{name}: {e:#}"));
        let dir = out.join(name);
        assert_files(
            &dir.join("real"),
            &["summary.csv", "requests.csv", "steps.csv", "meta.ron"],
        );
        assert!(!dir.join("sim").exists() && !dir.join("compare.csv").exists());
        assert!(figures_in(&dir) > 0, "{name}: no figure");
        let steps = std::fs::read_to_string(dir.join("real/steps.csv")).unwrap();
        let (header, rows) = common::csv_rows(&steps);
        assert_eq!(
            header.last().map(String::as_str),
            Some("predicted_ms"),
            "{name}"
        );
        let duration = header.iter().position(|c| c == "duration_ms").unwrap();
        for f in &rows {
            let measured: f64 = f[duration].parse().unwrap();
            let predicted: f64 = f[f.len() - 1].parse().unwrap();
            assert!(measured > 0.0 && predicted > 0.0, "{name}: {f:?}");
        }
        let meta = std::fs::read_to_string(dir.join("real/meta.ron")).unwrap();
        assert!(
            meta.contains("cpu on cpu") && meta.contains("tiny"),
            "{meta}"
        );
    }
}

#[test]
fn validate_runs_both_modes_and_writes_the_validation_table() {
    let out = scratch("real-validate");
    let mut args = vec!["validate", "--out", out.to_str().unwrap()];
    args.extend_from_slice(TINY_CPU);
    args.extend(["--profile", tiny_cpu_profile()]);
    let sets: Vec<String> = ENGINE
        .iter()
        .map(|s| s.to_string())
        .chain(
            TINY.iter()
                .flat_map(|(n, sets)| sets.iter().map(move |s| format!("{n}.{s}"))),
        )
        .collect();
    for s in &sets {
        args.extend(["--set", s]);
    }
    run(&args).unwrap_or_else(|e| panic!("validate: {e:#}"));
    for (name, _) in TINY {
        let dir = out.join(name);
        for mode in ["real", "sim"] {
            assert_files(
                &dir.join(mode),
                &["summary.csv", "requests.csv", "steps.csv", "meta.ron"],
            );
        }
        assert_files(&dir, &["compare.csv"]);
        let svg = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .find(|p| p.extension().is_some_and(|x| x == "svg"))
            .unwrap_or_else(|| panic!("{name}: no figure"));
        let text = std::fs::read_to_string(svg).unwrap();
        assert!(text.contains("(real)") && text.contains("(sim)"), "{name}");
    }
    let table = std::fs::read_to_string(out.join("validation.csv")).unwrap();
    let (header, rows) = common::csv_rows(&table);
    assert_eq!(
        header,
        [
            "experiment",
            "condition",
            "metric",
            "real",
            "sim",
            "error_pct",
            "sim_low",
            "sim_high"
        ]
    );
    for (name, _) in TINY {
        assert!(
            rows.iter().any(|r| r[0] == *name),
            "{name} has no row: {table}"
        );
    }
    let has = |exp: &str, metric: &str| rows.iter().any(|r| r[0] == exp && r[2] == metric);
    assert!(has("cb_sweep", "throughput_tok_s") && has("chunk_sweep", "max_stall_ms"));
    assert!(has("salt_isolation", "cached_tokens") && has("poisson_mix", "itl_p99_ms"));
    for metric in ["step_abs_error_pct_median", "step_abs_error_pct_p90"] {
        let row = rows
            .iter()
            .find(|r| r[0] == "steps" && r[1] == "all" && r[2] == metric)
            .unwrap_or_else(|| panic!("no {metric} row"));
        let v: f64 = row[5].parse().unwrap();
        assert!(v.is_finite() && v >= 0.0, "{row:?}");
    }
}

#[test]
fn calibrate_writes_a_profile_that_sim_mode_loads() {
    let out = scratch("real-calibrate");
    let profile = out.join("tiny.ron");
    let p = profile.to_str().unwrap();
    let mut args = vec!["calibrate", "--out", p, "--grid", "small", "--reps", "2"];
    args.extend_from_slice(TINY_CPU);
    run(&args).unwrap_or_else(|e| panic!("calibrate: {e:#}"));
    let loaded = calibration::CostProfile::load(&profile).expect("profile loads");
    let prov = &loaded.provenance;
    assert!(prov.holdout_error_pct_median.is_finite() && prov.holdout_error_pct_p90.is_finite());
    assert_eq!(prov.method, "measured");
    assert!(prov.device.starts_with("cpu") && prov.model.starts_with("tiny"));
    let samples = std::fs::read_to_string(out.join("tiny.samples.csv")).unwrap();
    assert!(samples.starts_with("point,seqs,"));
    assert_eq!(samples.lines().count(), prov.samples + 1);

    let sim_out = out.join("runs");
    let args = [
        "run",
        "prefix_cache",
        "--mode",
        "sim",
        "--model",
        "tiny",
        "--profile",
        p,
        "--out",
        sim_out.to_str().unwrap(),
        "--set",
        "prefix_tokens=128",
        "--set",
        "rounds=1",
        "--quiet",
    ];
    run(&args).unwrap_or_else(|e| panic!("sim with profile: {e:#}"));
    let meta = std::fs::read_to_string(sim_out.join("prefix_cache/sim/meta.ron")).unwrap();
    assert!(
        meta.contains("calibrated profile") && meta.contains("tiny.ron"),
        "{meta}"
    );
    // The tiny profile does not price Qwen3-0.6B.
    let err = run(&["run", "prefix_cache", "--profile", p, "--quiet"]).unwrap_err();
    let msg = format!("{err:#}");
    assert!(
        msg.contains("tiny.ron") && msg.contains("model shape"),
        "{msg}"
    );
}

#[test]
fn both_mode_gives_the_sim_side_the_real_kv_cache_and_vocabulary() {
    let out = scratch("real-both");
    let mut args = vec![
        "run",
        "prefix_cache",
        "--mode",
        "both",
        "--out",
        out.to_str().unwrap(),
        "--profile",
        tiny_cpu_profile(),
    ];
    args.extend_from_slice(TINY_CPU);
    for s in ENGINE.iter().chain(TINY[2].1.iter()) {
        args.extend(["--set", s]);
    }
    run(&args).unwrap_or_else(|e| panic!("both: {e:#}"));
    let dir = out.join("prefix_cache");
    assert_files(
        &dir,
        &["compare.csv", "real/summary.csv", "sim/summary.csv"],
    );
    let kv = |mode: &str| -> Vec<String> {
        let meta = std::fs::read_to_string(dir.join(mode).join("meta.ron")).unwrap();
        meta.lines()
            .filter(|l| l.contains("kv_blocks"))
            .map(str::to_string)
            .collect()
    };
    let (real, sim) = (kv("real"), kv("sim"));
    assert!(
        !real.is_empty() && real.iter().all(|l| l.contains("Some(")),
        "{real:?}"
    );
    assert_eq!(real, sim, "the sim engine gets the real runner's KV blocks");
    // Same scripts: the same requests find the same cached tokens in both modes.
    let keyed = |mode: &str| {
        let text = std::fs::read_to_string(dir.join(mode).join("requests.csv")).unwrap();
        let (header, rows) = common::csv_rows(&text);
        let cols: Vec<usize> = ["condition", "id", "tag", "prompt_tokens", "cached_tokens"]
            .iter()
            .map(|c| header.iter().position(|h| h == c).unwrap())
            .collect();
        rows.iter()
            .map(|f| cols.iter().map(|&i| f[i].clone()).collect::<Vec<_>>())
            .collect::<Vec<_>>()
    };
    let (r, s) = (keyed("real"), keyed("sim"));
    assert_eq!(r, s);
    assert!(
        r.iter()
            .any(|f| f.last().is_some_and(|cached| cached != "0")),
        "warm requests hit the cache"
    );
}
