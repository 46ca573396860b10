//! `exp plan --shard K/N` and `exp merge`: N shards merged give the
//! unsharded plan's files byte for byte (but for when each ran), and every
//! way of getting the shards wrong fails saying what to fix.

use crate::common;
use crate::plan_fleet::{short_workload, SMALL};

use common::scratch;
use experiments::run_cli;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

fn run(args: &[&str]) -> anyhow::Result<()> {
    run_cli(std::iter::once("exp").chain(args.iter().copied()))
}

fn error_of(args: &[&str]) -> String {
    format!("{:#}", run(args).expect_err("command should fail"))
}

/// Two GPUs x two settings (4 grid points), with a fleet to size.
fn plan(out: &Path, workload: &str, extra: &[&str]) -> anyhow::Result<()> {
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
    run(&args)
}

fn merge(dirs: &[&Path], out: &Path) -> anyhow::Result<()> {
    let mut args = vec!["merge".to_string()];
    args.extend(dirs.iter().map(|d| d.display().to_string()));
    args.extend(["--out".into(), out.display().to_string(), "--quiet".into()]);
    run_cli(std::iter::once("exp".to_string()).chain(args))
}

/// Every file under `dir` by relative path, `date_utc` lines blanked (they
/// say when the files were written).
fn tree(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<PathBuf, Vec<u8>>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(root, &path, out);
                continue;
            }
            let mut bytes = std::fs::read(&path).unwrap();
            if path.extension().is_some_and(|e| e == "ron") {
                let text = String::from_utf8(bytes).unwrap();
                let kept: Vec<&str> = text
                    .lines()
                    .filter(|l| !l.trim_start().starts_with("date_utc:"))
                    .collect();
                bytes = kept.join("\n").into_bytes();
            }
            out.insert(path.strip_prefix(root).unwrap().to_path_buf(), bytes);
        }
    }
    let mut out = BTreeMap::new();
    walk(dir, dir, &mut out);
    out
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
    let (a, b) = (tree(&full), tree(&merged));
    assert_eq!(
        a.keys().collect::<Vec<_>>(),
        b.keys().collect::<Vec<_>>(),
        "same files"
    );
    for (path, bytes) in &a {
        assert!(bytes == &b[path], "{} differs", path.display());
    }
    assert!(a.contains_key(Path::new("fleet_plan.csv")));

    // Missing, repeated, of another N, of other inputs, or no shard at all.
    let msg = format!("{:#}", merge(&[s1, s3], &merged).unwrap_err());
    assert!(msg.contains("2/3") && msg.contains("missing"), "{msg}");
    let msg = format!("{:#}", merge(&[s1, s2, s2, s3], &merged).unwrap_err());
    assert!(msg.contains("given twice"), "{msg}");
    let other_n = root.join("half1");
    plan(&other_n, &workload, &["--shard", "1/2"]).unwrap();
    let msg = format!("{:#}", merge(&[s1, &other_n], &merged).unwrap_err());
    assert!(msg.contains("same N"), "{msg}");
    let other_seed = root.join("seed7");
    plan(&other_seed, &workload, &["--shard", "2/3", "--seed", "7"]).unwrap();
    let msg = format!("{:#}", merge(&[s1, &other_seed, s3], &merged).unwrap_err());
    assert!(msg.contains("different arguments"), "{msg}");
    let msg = format!(
        "{:#}",
        merge(&[s1, &root.join("nowhere")], &merged).unwrap_err()
    );
    assert!(msg.contains("shard.ron"), "{msg}");
    // Inputs edited since the shards ran.
    std::fs::write(
        &workload,
        "(prompt_tokens: Fixed(120), output_tokens: Fixed(16))",
    )
    .unwrap();
    let msg = format!("{:#}", merge(&[s1, s2, s3], &merged).unwrap_err());
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
