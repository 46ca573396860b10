//! The `exp` command line, run through the library: output files (here),
//! errors (`errors`).

mod errors;

use crate::common;

use common::scratch;
use experiments::run_cli;
use std::path::Path;

fn run(args: &[&str]) -> anyhow::Result<()> {
    run_cli(std::iter::once("exp").chain(args.iter().copied()))
}

fn error_of(args: &[&str]) -> String {
    format!("{:#}", run(args).expect_err("command should fail"))
}

const SMALL_CB: &[&str] = &[
    "--set",
    "concurrency=1,2",
    "--set",
    "prompt_tokens=32",
    "--set",
    "output_tokens=4",
    "--set",
    "batches=2",
    "--quiet",
];

fn run_small_cb(out: &Path, seed: &str) {
    let mut args = vec![
        "run",
        "cb_sweep",
        "--mode",
        "sim",
        "--out",
        out.to_str().unwrap(),
        "--seed",
        seed,
    ];
    args.extend_from_slice(SMALL_CB);
    run(&args).expect("cb_sweep runs");
}

#[test]
fn run_writes_files_with_documented_columns() {
    let out = scratch("cli-files");
    run_small_cb(&out, "7");
    let dir = out.join("cb_sweep").join("sim");
    let summary = std::fs::read_to_string(dir.join("summary.csv")).unwrap();
    let (header, _) = common::csv_rows(&summary);
    for col in [
        "max_num_seqs",
        "concurrency",
        "throughput_tok_s",
        "ttft_median_ms",
        "itl_median_ms",
        "itl_p99_ms",
        "throughput_spread_pct",
    ] {
        assert!(
            header.iter().any(|c| c == col),
            "summary.csv lacks {col}: {header:?}"
        );
    }
    assert_eq!(summary.lines().count(), 1 + 2 * 2, "{summary}");
    let requests = std::fs::read_to_string(dir.join("requests.csv")).unwrap();
    assert!(requests.starts_with("condition,id,"), "{}", &requests[..80]);
    assert!(requests.contains("max_num_seqs=1 concurrency=2,"));
    let steps = std::fs::read_to_string(dir.join("steps.csv")).unwrap();
    assert!(steps.starts_with("condition,engine,start_ms,duration_ms"));
    let meta = std::fs::read_to_string(dir.join("meta.ron")).unwrap();
    for key in [
        "seed: 7",
        "h200-sxm",
        "commit:",
        "date_utc:",
        "max_num_batched_tokens",
    ] {
        assert!(meta.contains(key), "meta.ron lacks {key}");
    }
    for stem in ["cb_sweep_throughput", "cb_sweep_ttft"] {
        for ext in ["png", "svg"] {
            let f = out.join("cb_sweep").join(format!("{stem}.{ext}"));
            assert!(
                f.metadata().map(|m| m.len() > 0).unwrap_or(false),
                "{} missing",
                f.display()
            );
        }
    }
}

#[test]
fn same_seed_gives_identical_files() {
    let (a, b) = (scratch("cli-seed-a"), scratch("cli-seed-b"));
    run_small_cb(&a, "11");
    run_small_cb(&b, "11");
    let read = |d: &Path, f: &str| std::fs::read_to_string(d.join("cb_sweep/sim").join(f)).unwrap();
    assert!(
        read(&a, "summary.csv") == read(&b, "summary.csv"),
        "summary.csv differs"
    );
    assert!(
        read(&a, "requests.csv") == read(&b, "requests.csv"),
        "requests.csv differs"
    );
}

#[test]
fn seed_changes_the_prompts() {
    let sets = [
        "concurrency=2",
        "prompt_tokens=32",
        "output_tokens=4",
        "batches=2",
    ];
    let prompts = |seed| -> Vec<Vec<u32>> {
        let e = common::evaluate_sim("cb_sweep", &sets, seed);
        e.conditions
            .iter()
            .flat_map(|c| c.script.requests.iter().map(|r| r.prompt.clone()))
            .collect()
    };
    assert!(prompts(11) == prompts(11));
    assert!(prompts(11) != prompts(12));
}

#[test]
fn results_do_not_depend_on_thread_count() {
    let one = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .unwrap();
    let four = rayon::ThreadPoolBuilder::new()
        .num_threads(4)
        .build()
        .unwrap();
    let sets = [
        "concurrency=1,3",
        "prompt_tokens=32",
        "output_tokens=4",
        "batches=2",
    ];
    let a = one.install(|| common::evaluate_sim("cb_sweep", &sets, 9));
    let b = four.install(|| common::evaluate_sim("cb_sweep", &sets, 9));
    assert_eq!(a.report.summary.to_csv(), b.report.summary.to_csv());
    assert_eq!(a.runs, b.runs);
}

#[test]
fn list_and_show_succeed() {
    run(&["list"]).unwrap();
    run(&["show", "chunk_sweep"]).unwrap();
    assert!(error_of(&["show", "nope"]).contains("unknown experiment"));
}

#[test]
fn every_experiment_writes_its_documented_columns() {
    let cases: &[(&str, &[&str], &[&str])] = &[
        (
            "chunk_sweep",
            &[
                "decode_tokens=200",
                "long_prompts=2",
                "batches=2",
                "output_tokens=8",
            ],
            &[
                "part",
                "chunk_tokens",
                "max_stall_ms",
                "interleaved_ttft_ms",
                "throughput_tok_s",
                "ttft_median_ms",
                "itl_p99_ms",
            ],
        ),
        (
            "prefix_cache",
            &["rounds=1", "warm_requests=1", "prefix_tokens=64"],
            &[
                "caching",
                "round",
                "cold_ttft_ms",
                "warm_ttft_ms",
                "speedup",
                "warm_cached_tokens",
            ],
        ),
        (
            "salt_isolation",
            &["rounds=1", "prefix_tokens=64"],
            &[
                "round",
                "writer_salt",
                "reader_salt",
                "cached_tokens",
                "ttft_ms",
                "cold_ttft_ms",
            ],
        ),
        (
            "timing_leak",
            &["trials=8", "doc_tokens=64"],
            &[
                "policy",
                "trials",
                "attacker_accuracy",
                "hit_ttft_median_ms",
                "miss_ttft_median_ms",
            ],
        ),
    ];
    let out = scratch("cli-columns");
    for (name, sets, columns) in cases {
        let mut args = vec!["run", name, "--quiet", "--out", out.to_str().unwrap()];
        for s in *sets {
            args.extend(["--set", s]);
        }
        run(&args).unwrap_or_else(|e| panic!("{name}: {e:#}"));
        let dir = out.join(name).join("sim");
        let summary = std::fs::read_to_string(dir.join("summary.csv")).unwrap();
        let (header, _) = common::csv_rows(&summary);
        for col in *columns {
            assert!(
                header.iter().any(|h| h == col),
                "{name}: summary.csv lacks {col}: {header:?}"
            );
        }
        assert!(summary.lines().count() > 1, "{name}: no rows");
        for f in ["requests.csv", "steps.csv", "meta.ron"] {
            assert!(dir.join(f).is_file(), "{name}: {f} missing");
        }
        let figures = std::fs::read_dir(out.join(name))
            .unwrap()
            .filter_map(Result::ok);
        let exts: Vec<String> = figures
            .filter_map(|e| {
                e.path()
                    .extension()
                    .map(|x| x.to_string_lossy().into_owned())
            })
            .collect();
        assert!(
            exts.iter().any(|e| e == "png") && exts.iter().any(|e| e == "svg"),
            "{name}: figures"
        );
    }
}

#[test]
fn ron_config_applies_and_set_overrides_it() {
    let out = scratch("cli-config");
    let path = out.join("small.ron");
    std::fs::write(
        &path,
        "// a small cb_sweep\n(\n  max_num_seqs: [1],\n  concurrency: [2],\n  batches: 2,\n  \
         prompt_tokens: 16,\n  output_tokens: 2,\n  enable_prefix_caching: false,\n)\n",
    )
    .unwrap();
    let (cfg, dir) = (path.to_str().unwrap(), out.to_str().unwrap());
    run(&[
        "run",
        "cb_sweep",
        "--config",
        cfg,
        "--set",
        "output_tokens=3",
        "--out",
        dir,
        "--quiet",
    ])
    .unwrap();
    let sim = out.join("cb_sweep/sim");
    let summary = std::fs::read_to_string(sim.join("summary.csv")).unwrap();
    assert_eq!(summary.lines().count(), 2, "one condition: {summary}");
    assert!(
        summary.lines().nth(1).unwrap().starts_with("1,2,"),
        "{summary}"
    );
    let requests = std::fs::read_to_string(sim.join("requests.csv")).unwrap();
    let (header, rows) = common::csv_rows(&requests);
    let column = |name: &str| header.iter().position(|c| c == name).expect(name);
    let (tag, max_tokens) = (column("tag"), column("max_tokens"));
    let batch_rows: Vec<&Vec<String>> = rows
        .iter()
        .filter(|r| r[tag].starts_with("batch"))
        .collect();
    assert_eq!(batch_rows.len(), 2 * 2 * 2, "2 batches of 2c requests");
    assert!(
        batch_rows.iter().all(|r| r[max_tokens] == "3"),
        "max_tokens from --set"
    );
    let meta = std::fs::read_to_string(sim.join("meta.ron")).unwrap();
    assert!(
        meta.contains("enable_prefix_caching: false"),
        "engine option from the file"
    );
}

#[test]
fn calibrate_refit_fits_the_committed_h200_measurements_without_a_gpu() {
    let out = scratch("refit");
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/..");
    let shipped = format!("{root}/calibration/profiles/h200-qwen3-0.6b.ron");
    let samples = format!("{root}/results/h200/calibration_samples.csv");
    let target = out.join("h200.ron");
    let t = target.to_str().unwrap();
    run(&[
        "calibrate",
        "--refit",
        &shipped,
        "--samples",
        &samples,
        "--out",
        t,
    ])
    .unwrap_or_else(|e| panic!("refit: {e:#}"));
    let old = calibration::CostProfile::load(Path::new(&shipped)).unwrap();
    let new = calibration::CostProfile::load(&target).unwrap();
    let (o, n) = (&old.provenance, &new.provenance);
    assert!(n.method.starts_with("refit at commit"), "{}", n.method);
    assert!(n.method.contains(&o.engine_commit) && n.method.contains(&o.date));
    assert_eq!(
        (&n.device, &n.date, &n.engine_commit),
        (&o.device, &o.date, &o.engine_commit)
    );
    assert!(n.holdout_error_pct_median.is_finite() && n.samples == 120);
    let csv = std::fs::read_to_string(out.join("h200.samples.csv")).unwrap();
    assert_eq!(csv.lines().count(), 121);

    // Samples of another grid, or none beside the profile: errors that name the file.
    let err = error_of(&[
        "calibrate",
        "--refit",
        &shipped,
        "--samples",
        &samples,
        "--grid",
        "small",
        "--out",
        t,
    ]);
    assert!(
        err.contains("calibration_samples.csv") && err.contains("another grid"),
        "{err}"
    );
    let err = error_of(&["calibrate", "--refit", &shipped, "--out", t]);
    assert!(err.contains("h200-qwen3-0.6b.samples.csv"), "{err}");
}
