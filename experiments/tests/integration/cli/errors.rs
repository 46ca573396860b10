//! `exp` refusing what it cannot run: unknown experiments, keys and
//! values, bad RON, profiles, models and GPUs, each error naming the problem.

use super::*;

#[test]
fn unknown_experiment_lists_known_ones() {
    let msg = error_of(&["run", "nope", "--mode", "sim"]);
    assert!(
        msg.contains("nope") && msg.contains("cb_sweep") && msg.contains("timing_leak"),
        "{msg}"
    );
}

#[test]
fn unknown_set_key_lists_valid_keys() {
    let msg = error_of(&["run", "cb_sweep", "--set", "concurency=4"]);
    assert!(
        msg.contains("concurency") && msg.contains("valid keys"),
        "{msg}"
    );
    assert!(
        msg.contains("concurrency") && msg.contains("enable_prefix_caching"),
        "{msg}"
    );
}

#[test]
fn bad_value_names_key_and_type() {
    let msg = error_of(&["run", "cb_sweep", "--set", "batches=many"]);
    assert!(
        msg.contains("batches") && msg.contains("many") && msg.contains("integer"),
        "{msg}"
    );
    let msg = error_of(&["run", "chunk_sweep", "--set", "chunk_tokens=512,none"]);
    assert!(msg.contains("chunk_tokens") && msg.contains("off"), "{msg}");
}

#[test]
fn engine_validation_errors_are_surfaced() {
    let msg = error_of(&["run", "cb_sweep", "--set", "max_num_seqs=4096", "--quiet"]);
    assert!(
        msg.contains("max_num_batched_tokens") && msg.contains("max_num_seqs"),
        "{msg}"
    );
    let msg = error_of(&[
        "run",
        "prefix_cache",
        "--set",
        "enable_chunked_prefill=false",
        "--quiet",
    ]);
    assert!(msg.contains("enable_chunked_prefill"), "{msg}");
}

#[test]
fn malformed_ron_reports_line_and_column() {
    let dir = scratch("cli-ron");
    let path = dir.join("bad.ron");
    std::fs::write(
        &path,
        "(\n  concurrency: [1, 4],\n  batches: 3\n  output_tokens: 8,\n)\n",
    )
    .unwrap();
    let msg = error_of(&["run", "cb_sweep", "--config", path.to_str().unwrap()]);
    assert!(
        msg.contains("bad.ron:4:"),
        "line of the error expected: {msg}"
    );
    std::fs::write(&path, "(concurrency: [1, \"x\"])").unwrap();
    let msg = error_of(&["run", "cb_sweep", "--config", path.to_str().unwrap()]);
    assert!(
        msg.contains("concurrency") && msg.contains("line 1"),
        "{msg}"
    );
}

#[test]
fn bad_profiles_models_and_gpus_fail_naming_them() {
    let out = scratch("cli-bad-profile");
    let missing = out.join("missing.ron");
    let msg = error_of(&["run", "cb_sweep", "--profile", missing.to_str().unwrap()]);
    assert!(msg.contains("missing.ron"), "{msg}");
    let garbage = out.join("garbage.ron");
    std::fs::create_dir_all(&out).unwrap();
    std::fs::write(&garbage, "CostProfile(provenance: 3").unwrap();
    let msg = error_of(&["run", "cb_sweep", "--profile", garbage.to_str().unwrap()]);
    assert!(
        msg.contains("garbage.ron") && msg.contains("line 1"),
        "{msg}"
    );
    let msg = error_of(&["run", "cb_sweep", "--model", "no-such-model"]);
    assert!(
        msg.contains("no-such-model") && msg.contains("tiny"),
        "{msg}"
    );
    let msg = error_of(&["run", "cb_sweep", "--gpu", "gtx-9999"]);
    assert!(msg.contains("gtx-9999"), "{msg}");
}

#[test]
fn binary_reports_an_error_once_without_backtrace() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_exp"))
        .args(["run", "cb_sweep", "--set", "max_num_seqs=4096", "--quiet"])
        .env("RUST_BACKTRACE", "1")
        .output()
        .expect("exp runs");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.starts_with("error: "), "{stderr}");
    assert_eq!(
        stderr.matches("must be >= max_num_seqs").count(),
        1,
        "{stderr}"
    );
    assert!(!stderr.contains("backtrace"), "{stderr}");
}

#[test]
fn sm_count_is_refused_where_there_are_no_sms_to_limit() {
    let out = scratch("cli-sm-count");
    let dir = out.to_str().unwrap();
    let msg = error_of(&[
        "run",
        "cb_sweep",
        "--mode",
        "real",
        "--backend",
        "cpu",
        "--sm-count",
        "8",
        "--out",
        dir,
    ]);
    assert!(
        msg.contains("--sm-count 8") && msg.contains("--backend cuda"),
        "{msg}"
    );
    let msg = error_of(&["run", "cb_sweep", "--sm-count", "0", "--out", dir]);
    assert!(msg.contains("--sm-count 0"), "{msg}");
    assert!(
        !out.join("cb_sweep").exists(),
        "nothing is written before the runner starts"
    );
}
