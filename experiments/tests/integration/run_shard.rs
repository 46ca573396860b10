//! `exp run NAME --mode sim --shard K/N` and `exp merge`: N shards merged
//! give the unsharded run's files byte for byte (every file, figures and
//! `meta.ron` included, with `SOURCE_DATE_EPOCH` set for both), and every
//! way of getting the shards wrong fails saying what to fix.

use crate::common::{assert_same_files, exp_with_epoch, scratch, EPOCH};
use std::path::{Path, PathBuf};

/// cb_sweep at 2 x 2 conditions, seconds in all.
const SWEEP: &[&str] = &[
    "run",
    "cb_sweep",
    "--mode",
    "sim",
    "--quiet",
    "--set",
    "concurrency=1,4",
    "--set",
    "batches=2",
    "--set",
    "prompt_tokens=64",
    "--set",
    "output_tokens=8",
];

fn sweep(out: &Path, extra: &[&str]) -> Result<String, String> {
    let mut args = SWEEP.to_vec();
    args.extend(["--out", out.to_str().unwrap()]);
    args.extend_from_slice(extra);
    exp_with_epoch(&args, Some(EPOCH))
}

fn merge(dirs: &[PathBuf], out: &Path) -> Result<String, String> {
    let mut args = vec!["merge".to_string()];
    args.extend(
        dirs.iter()
            .map(|d| d.join("cb_sweep").display().to_string()),
    );
    args.extend(["--out".into(), out.display().to_string(), "--quiet".into()]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    exp_with_epoch(&args, None)
}

#[test]
fn merged_shards_equal_the_unsharded_sweep_byte_for_byte() {
    let root = scratch("run_shard");
    let full = root.join("full");
    sweep(&full, &[]).expect("unsharded run");
    let shards: Vec<PathBuf> = (1..=3).map(|k| root.join(format!("shard{k}"))).collect();
    for (k, dir) in shards.iter().enumerate() {
        sweep(dir, &["--shard", &format!("{}/3", k + 1)]).expect("shard");
        let files: Vec<_> = std::fs::read_dir(dir.join("cb_sweep"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        let mut files = files;
        files.sort();
        assert_eq!(
            files,
            [".exp-files", "shard.ron"],
            "a shard writes only shard.ron"
        );
    }
    let merged = root.join("merged");
    let reordered = vec![shards[2].clone(), shards[0].clone(), shards[1].clone()];
    merge(&reordered, &merged).expect("merge, shards in any order");
    assert_same_files(&full.join("cb_sweep"), &merged.join("cb_sweep"));
    let meta = std::fs::read_to_string(merged.join("cb_sweep/sim/meta.ron")).unwrap();
    assert!(
        meta.contains("date_utc: \"2026-12-04T00:00:00Z\""),
        "{meta}"
    );
    for figure in ["cb_sweep_throughput.png", "cb_sweep_ttft.svg"] {
        assert!(merged.join("cb_sweep").join(figure).exists(), "{figure}");
    }

    // Missing, repeated, of another N or of other settings.
    let msg = merge(&[shards[0].clone(), shards[2].clone()], &merged).unwrap_err();
    assert!(msg.contains("2/3") && msg.contains("missing"), "{msg}");
    let twice = vec![shards[0].clone(), shards[1].clone(), shards[1].clone()];
    let msg = merge(&twice, &merged).unwrap_err();
    assert!(msg.contains("given twice"), "{msg}");
    let half = root.join("half");
    sweep(&half, &["--shard", "1/2"]).unwrap();
    let msg = merge(&[shards[0].clone(), half], &merged).unwrap_err();
    assert!(msg.contains("same N"), "{msg}");
    let other = root.join("other");
    sweep(&other, &["--shard", "2/3", "--set", "output_tokens=9"]).unwrap();
    let mixed = vec![shards[0].clone(), other, shards[2].clone()];
    let msg = merge(&mixed, &merged).unwrap_err();
    assert!(
        msg.contains("different arguments") && msg.contains("output_tokens=9"),
        "{msg}"
    );
}

#[test]
fn a_merge_refuses_inputs_edited_since_the_shards_ran() {
    let root = scratch("run_shard_inputs");
    let config = root.join("settings.ron");
    std::fs::write(&config, "(max_num_seqs: [1, 256])").unwrap();
    let shards: Vec<PathBuf> = (1..=2).map(|k| root.join(format!("s{k}"))).collect();
    for (k, dir) in shards.iter().enumerate() {
        let spec = format!("{}/2", k + 1);
        sweep(
            dir,
            &["--shard", &spec, "--config", config.to_str().unwrap()],
        )
        .expect("shard");
    }
    std::fs::write(&config, "(max_num_seqs: [1, 128])").unwrap();
    let msg = merge(&shards, &root.join("merged")).unwrap_err();
    assert!(
        msg.contains("inputs differ") && msg.contains("128"),
        "{msg}"
    );
    assert!(!root.join("merged").exists(), "nothing is written");
}

#[test]
fn sharding_splits_sim_runs_only_and_checks_its_spec() {
    let root = scratch("run_shard_refused");
    let out = root.join("out");
    let o = out.to_str().unwrap();
    for (extra, needle) in [
        (vec!["--mode", "both", "--backend", "cpu"], "--mode both"),
        (vec!["--endpoint", "http://127.0.0.1:9"], "--endpoint"),
        (vec!["--seeds", "2"], "--seeds 2"),
    ] {
        let mut args = vec!["run", "cb_sweep", "--out", o, "--shard", "1/2"];
        args.extend(extra);
        let msg = exp_with_epoch(&args, None).unwrap_err();
        assert!(msg.contains("--shard 1/2") && msg.contains(needle), "{msg}");
    }
    for (spec, needle) in [
        ("0/2", "count from 1"),
        ("3/2", "more than N"),
        ("1/9", "at most 8"),
    ] {
        let msg =
            exp_with_epoch(&["run", "cb_sweep", "--out", o, "--shard", spec], None).unwrap_err();
        assert!(msg.contains(needle), "{spec}: {msg}");
    }
    assert!(!out.exists(), "nothing is written");
}

#[test]
fn source_date_epoch_dates_meta_ron_and_a_bad_one_is_refused() {
    let root = scratch("source_date_epoch");
    let out = root.join("out");
    let mut args = SWEEP.to_vec();
    args.extend(["--out", out.to_str().unwrap(), "--set", "concurrency=1"]);
    exp_with_epoch(&args, Some("0")).expect("run");
    let meta = std::fs::read_to_string(out.join("cb_sweep/sim/meta.ron")).unwrap();
    assert!(
        meta.contains("date_utc: \"1970-01-01T00:00:00Z\""),
        "{meta}"
    );
    let msg = exp_with_epoch(&args, Some("yesterday")).unwrap_err();
    assert!(
        msg.contains("SOURCE_DATE_EPOCH") && msg.contains("\"yesterday\""),
        "{msg}"
    );
}
