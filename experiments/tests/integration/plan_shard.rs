//! `exp plan --shard K/N` and `exp merge`: N shards merged give the
//! unsharded plan's files byte for byte (every file, `meta.ron` and the
//! figures included, with `SOURCE_DATE_EPOCH` set for both), and every way
//! of getting the shards wrong fails saying what to fix.

use crate::common;
use crate::plan_fleet::{short_workload, SMALL};

use common::{assert_same_files, exp_with_epoch, scratch, EPOCH};
use std::path::{Path, PathBuf};

fn error_of(args: &[&str]) -> String {
    exp_with_epoch(args, None).expect_err("command should fail")
}

/// Two GPUs x two settings (4 grid points), with a fleet to size.
fn plan(out: &Path, workload: &str, extra: &[&str]) -> Result<String, String> {
    let mut args = vec![
        "plan",
        "--out",
        out.to_str().unwrap(),
        "--workload",
        workload,
        "--gpu",
        "h100-sxm,l40s",
        "--set",
        "qps=2000",
    ];
    args.extend_from_slice(SMALL);
    args.extend_from_slice(extra);
    exp_with_epoch(&args, Some(EPOCH))
}

fn merge(dirs: &[&Path], out: &Path) -> Result<String, String> {
    let mut args = vec!["merge".to_string()];
    args.extend(dirs.iter().map(|d| d.display().to_string()));
    args.extend(["--out".into(), out.display().to_string(), "--quiet".into()]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    exp_with_epoch(&args, None)
}

#[test]
fn merged_shards_equal_the_unsharded_plan_and_bad_shards_are_refused() {
    let root = scratch("plan_shard");
    let workload = short_workload(&root);
    let full = root.join("full");
    plan(&full, &workload, &[]).expect("unsharded plan");
    let shards: Vec<PathBuf> = (1..=3).map(|k| root.join(format!("shard{k}"))).collect();
    for (k, dir) in shards.iter().enumerate() {
        let spec = format!("{}/3", k + 1);
        plan(dir, &workload, &["--shard", &spec]).expect("shard");
        let files: Vec<_> = std::fs::read_dir(dir).unwrap().collect();
        assert_eq!(files.len(), 1, "a shard writes only shard.ron");
    }
    let merged = root.join("merged");
    let (s1, s2, s3) = (&shards[0], &shards[1], &shards[2]);
    merge(&[s3, s1, s2], &merged).expect("merge, shards in any order");
    assert_same_files(&full, &merged);
    assert!(merged.join("fleet_plan.csv").exists());
    let meta = std::fs::read_to_string(merged.join("meta.ron")).unwrap();
    assert!(
        meta.contains("date_utc: \"2026-12-04T00:00:00Z\""),
        "{meta}"
    );

    // Missing, repeated, of another N, of other inputs, or no shard at all.
    let msg = merge(&[s1, s3], &merged).unwrap_err();
    assert!(msg.contains("2/3") && msg.contains("missing"), "{msg}");
    let msg = merge(&[s1, s2, s2, s3], &merged).unwrap_err();
    assert!(msg.contains("given twice"), "{msg}");
    let other_n = root.join("half1");
    plan(&other_n, &workload, &["--shard", "1/2"]).unwrap();
    let msg = merge(&[s1, &other_n], &merged).unwrap_err();
    assert!(msg.contains("same N"), "{msg}");
    let other_seed = root.join("seed7");
    plan(&other_seed, &workload, &["--shard", "2/3", "--seed", "7"]).unwrap();
    let msg = merge(&[s1, &other_seed, s3], &merged).unwrap_err();
    assert!(msg.contains("different arguments"), "{msg}");
    let msg = merge(&[s1, &root.join("nowhere")], &merged).unwrap_err();
    assert!(msg.contains("shard.ron"), "{msg}");
    // Inputs edited since the shards ran.
    std::fs::write(
        &workload,
        "(prompt_tokens: Fixed(120), output_tokens: Fixed(16))",
    )
    .unwrap();
    let msg = merge(&[s1, s2, s3], &merged).unwrap_err();
    assert!(msg.contains("inputs differ"), "{msg}");
}

#[test]
fn bad_shard_specs_say_what_to_give() {
    let root = scratch("plan_shard_specs");
    let workload = short_workload(&root);
    let out = root.join("out");
    let o = out.to_str().unwrap();
    for (spec, needle) in [
        ("0/3", "count from 1"),
        ("4/3", "more than N"),
        ("1/0", "N = 0"),
        ("two", "expected K/N"),
        ("1/5", "at most 4"),
    ] {
        let mut args = vec!["plan", "--out", o, "--workload", &workload, "--gpu"];
        args.extend(["h100-sxm,l40s", "--shard", spec]);
        args.extend_from_slice(SMALL);
        let msg = error_of(&args);
        assert!(msg.contains(needle), "{spec}: {msg}");
    }
    assert!(!out.exists(), "nothing is written");
}
