//! `exp transfer-check` with another GPU held out: the committed H200 rows
//! fitted, the committed H100 steps predicted, the H100's decode mixes
//! each size's predicted by the fit without it; and the inputs it refuses
//! before it fits anything.

use crate::common::scratch;
use calibration::operators::profile::OperatorProfile;
use std::path::{Path, PathBuf};
use std::process::Command;

fn results(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../results")
        .join(path)
}

fn transfer_check(out: &Path, held_out: &str) -> std::process::Output {
    let mix = format!(
        "h100-sxm={}",
        results("h100/decode_mix/decode_mix.csv").display()
    );
    transfer_check_with(out, held_out, &mix, &[])
}

/// `exp transfer-check` on the committed H200 files, with `extra` options.
fn transfer_check_with(
    out: &Path,
    held_out: &str,
    mix: &str,
    extra: &[&str],
) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_exp"))
        .args(["transfer-check", "--quiet"])
        .args(extra)
        .arg("--family")
        .arg(results("h200/engine_family.csv"))
        .arg("--groups")
        .arg(results("h200/operators/groups.csv"))
        .arg("--gemm-shapes")
        .arg(results("h200/operators/gemm_shapes.csv"))
        .args(["--held-out-gpu", held_out, "--decode-mix", mix, "--out"])
        .arg(out)
        .output()
        .expect("exp runs")
}

#[test]
fn another_gpus_steps_are_predicted_by_the_fit_and_kept_as_its_expected_error() {
    let dir = scratch("transfer_check_gpu");
    let h100 = format!("h100-sxm={}", results("h100/engine_family.csv").display());
    let run = transfer_check(&dir, &h100);
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let rows = std::fs::read_to_string(dir.join("transfer.csv")).unwrap();
    let gpu_rows: Vec<&str> = rows.lines().filter(|l| l.starts_with("gpu,")).collect();
    let measured = std::fs::read_to_string(results("h100/engine_family.csv")).unwrap();
    let mixes = std::fs::read_to_string(results("h100/decode_mix/decode_mix.csv")).unwrap();
    // Every H100 step once, whole GPU and slices, named MODEL@GPU@Nsm.
    assert_eq!(gpu_rows.len(), measured.lines().count() - 1);
    // Every decode mix once, held out with its size, named by its GPU and
    // its contexts.
    let mix_rows: Vec<&str> = rows
        .lines()
        .filter(|l| l.contains(",decode_mix "))
        .collect();
    assert_eq!(mix_rows.len(), mixes.lines().count() - 1);
    assert!(mix_rows.iter().all(|l| l.starts_with("model,")));
    assert!(mix_rows
        .iter()
        .any(|l| l.starts_with("model,qwen3-0.6b@h100-sxm@132sm,decode_mix 2048/300x4,")));
    assert!(gpu_rows
        .iter()
        .any(|l| l.contains(",qwen3-32b@h100-sxm@132sm,")));
    assert!(gpu_rows
        .iter()
        .any(|l| l.contains(",qwen3-8b@h100-sxm@8sm,")));
    // The same run's profile is the committed one, H100 rows and all (but
    // for the file names it was fitted on).
    let written = OperatorProfile::load(&dir.join("operator_profile.ron")).unwrap();
    let shipped = OperatorProfile::load(&results("h200/operator_profile.ron")).unwrap();
    assert_eq!(
        (&written.params, &written.held_out),
        (&shipped.params, &shipped.held_out)
    );
    assert!(written
        .held_out
        .iter()
        .any(|e| e.held_out == "gpu" && e.gpu.as_deref() == Some("h100-sxm")));
}

#[test]
fn a_held_out_gpu_decode_mix_or_lone_blocks_file_the_fit_cannot_use_is_refused_before_the_fit() {
    let dir = scratch("transfer_check_refused");
    let h100 = results("h100/engine_family.csv");
    // Old rows without the copy bandwidth column: the H100's slices are undescribed.
    let old = dir.join("old.csv");
    let text = std::fs::read_to_string(&h100).unwrap();
    let stripped: String = text
        .lines()
        .map(|l| {
            let mut cells: Vec<&str> = l.split(',').collect();
            cells.remove(7);
            cells.join(",") + "\n"
        })
        .collect();
    std::fs::write(&old, stripped).unwrap();
    for (arg, says) in [
        ("h100-sxm".to_string(), "expected NAME=FILE"),
        (format!("h200-sxm={}", h100.display()), "cannot be held out"),
        (format!("b200={}", h100.display()), "b200"),
        (format!("h100-sxm={}", old.display()), "copy_bandwidth_tb_s"),
    ] {
        let run = transfer_check(&dir.join("out"), &arg);
        assert!(!run.status.success(), "{arg}");
        let err = String::from_utf8_lossy(&run.stderr);
        assert!(err.contains(says), "{arg}: {err}");
        assert!(!dir.join("out/transfer.csv").exists(), "{arg}");
    }
    let family = format!("h100-sxm={}", h100.display());
    for (arg, says) in [
        ("h100-sxm".to_string(), "expected NAME=FILE"),
        (format!("b200={}", h100.display()), "b200"),
        // A family file is no decode-mix file: its rows have no contexts.
        (format!("h100-sxm={}", h100.display()), "contexts"),
    ] {
        let run = transfer_check_with(&dir.join("out"), &family, &arg, &[]);
        assert!(!run.status.success(), "{arg}");
        let err = String::from_utf8_lossy(&run.stderr);
        assert!(err.contains(says), "{arg}: {err}");
        assert!(!dir.join("out/transfer.csv").exists(), "{arg}");
    }
    for (arg, says) in [
        ("h100-sxm".to_string(), "expected NAME=FILE"),
        // A family file is no lone-blocks file: its rows name no kernel.
        (format!("h100-sxm={}", h100.display()), "kernel"),
    ] {
        let run = transfer_check_with(&dir.join("out"), &family, "none", &["--lone-blocks", &arg]);
        assert!(!run.status.success(), "{arg}");
        let err = String::from_utf8_lossy(&run.stderr);
        assert!(
            err.contains(says) && err.contains("--lone-blocks"),
            "{arg}: {err}"
        );
        assert!(!dir.join("out/transfer.csv").exists(), "{arg}");
    }
}

#[test]
fn none_holds_out_no_other_gpu_and_predicts_no_decode_mix() {
    let dir = scratch("transfer_check_none");
    let out = transfer_check_with(&dir, "none", "none", &["--fit-starts", "0"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rows = std::fs::read_to_string(dir.join("transfer.csv")).unwrap();
    assert!(rows.lines().any(|l| l.starts_with("model,")));
    assert!(rows.lines().any(|l| l.starts_with("sm_count,")));
    assert!(
        !rows.lines().any(|l| l.starts_with("gpu,")),
        "no other GPU held out"
    );
    assert!(!rows.contains(",decode_mix "), "no decode mix predicted");
    let profile = OperatorProfile::load(&dir.join("operator_profile.ron")).unwrap();
    assert!(profile.held_out.iter().all(|e| e.held_out != "gpu"));
}
