//! `exp calibrate --operators` end to end without a GPU: a stand-in
//! engine-bench (a shell script) answers each command with the committed
//! rows (H200 or H100) of the models and SM counts it is asked for, and
//! names its device as engine-bench does, so the orchestration, the files
//! and the fit are what a GPU run would give.

use crate::common::scratch;
use calibration::operators::profile::OperatorProfile;
use std::path::Path;
use std::process::Command;

/// Writes the stand-in: `--family LIST [--operators] [--sm-counts C] --out D`
/// appends the committed rows of `results/GPU_DIR` for each (model, SM
/// count) to D's files, and prints each runner's line naming `device`.
fn fake_engine_bench(dir: &Path, gpu_dir: &str, device: &str) -> std::path::PathBuf {
    let results = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../results")
        .join(gpu_dir);
    let script = format!(
        r#"#!/usr/bin/env bash
set -euo pipefail
SRC={src}
models="" ops=0 counts=132 out=""
while [ $# -gt 0 ]; do
  case $1 in
    --family) models=$2; shift 2 ;;
    --operators) ops=1; shift ;;
    --sm-counts) counts=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    *) echo "unexpected argument $1" >&2; exit 2 ;;
  esac
done
copy() {{ # source file, destination file
  [ -s "$2" ] || head -1 "$1" > "$2"
  for m in ${{models//,/ }}; do
    for c in ${{counts//,/ }}; do
      echo "[$m] $c SMs: rows of $(basename "$1")" >&2
      grep "^$m,$c," "$1" >> "$2" || true
    done
  done
}}
mkdir -p "$out/operators"
for m in ${{models//,/ }}; do
  for c in ${{counts//,/ }}; do
    if [ $c = 132 ]; then label="whole GPU"; else label="$c SMs"; fi
    echo "[$m] $label: {device} with $c SMs, copy bandwidth 1.00 TB/s, 5384 KV blocks" >&2
  done
done
copy "$SRC/engine_family.csv" "$out/engine_family.csv"
if [ $ops = 1 ]; then
  copy "$SRC/operators/groups.csv" "$out/operators/groups.csv"
  copy "$SRC/operators/gemm_shapes.csv" "$out/operators/gemm_shapes.csv"
fi
"#,
        src = results.display()
    );
    let path = dir.join(format!("engine-bench-{gpu_dir}"));
    write_executable(&path, &script);
    path
}

/// Writes `text` to `path` as an executable script.
fn write_executable(path: &Path, text: &str) {
    std::fs::write(path, text).expect("write the script");
    let mut perm = std::fs::metadata(path).expect("the script").permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perm, 0o755);
    std::fs::set_permissions(path, perm).expect("make it executable");
}

fn calibrate(bench: &Path, out: &Path, extra: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_exp"))
        .args(["calibrate", "--operators", "--quiet", "--engine-bench"])
        .arg(bench)
        .arg("--out")
        .arg(out)
        .args(["--models", "qwen3-0.6b,qwen3-1.7b,qwen3-8b,qwen3-32b"])
        // What is measured, fitted and kept, not the fit's minimum: one
        // descent a fit (the transfer-check test checks the default's).
        .args(["--fit-starts", "0"])
        .args(extra)
        .output()
        .expect("exp runs")
}

/// Runs `exp calibrate --operators` through `bench` to `out`, which must
/// succeed, and loads the profile it wrote.
fn calibrated(bench: &Path, out: &Path) -> OperatorProfile {
    let run = calibrate(bench, out, &[]);
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    OperatorProfile::load(out).expect("the profile loads")
}

#[test]
fn calibrate_operators_measures_through_engine_bench_fits_and_keeps_what_it_measured() {
    let dir = scratch("calibrate_operators");
    let bench = fake_engine_bench(&dir, "h200", "NVIDIA H200");
    let out = dir.join("h200.ron");
    let profile = calibrated(&bench, &out);
    assert!(profile.fitted_on.contains("exp calibrate --operators"));
    assert_eq!(profile.gpu, "h200-sxm");
    let measured = dir.join("h200.measured");
    let family = std::fs::read_to_string(measured.join("engine_family.csv")).unwrap();
    // 4 sizes on the whole GPU and 2 on 16 and 32 SMs, 7 steps each.
    assert_eq!(family.lines().count(), 1 + 7 * (4 + 2 * 2), "{family}");
    let groups = std::fs::read_to_string(measured.join("operators/groups.csv")).unwrap();
    assert!(groups.lines().skip(1).all(|l| l.contains(",132,")));
    assert!(groups.lines().any(|l| l.starts_with("qwen3-8b,132,")));
    for f in ["transfer.csv", "transfer_groups.csv", "engine-bench.log"] {
        assert!(measured.join(f).is_file(), "{f}");
    }
    let log = std::fs::read_to_string(measured.join("engine-bench.log")).unwrap();
    assert!(log.contains("--sm-counts 16,32") && log.contains("[qwen3-8b] 32 SMs"));
    // A second run would append to the first one's rows: refused.
    let again = calibrate(&bench, &out, &[]);
    assert!(!again.status.success());
    let err = String::from_utf8_lossy(&again.stderr);
    assert!(err.contains("already holds measured rows"), "{err}");
}

#[test]
fn calibrate_operators_fits_the_gpu_it_ran_on_with_its_slices_measured_bandwidths() {
    let dir = scratch("calibrate_operators_h100");
    let bench = fake_engine_bench(&dir, "h100", "NVIDIA H100 80GB HBM3");
    let profile = calibrated(&bench, &dir.join("h100.ron"));
    assert_eq!(profile.gpu, "h100-sxm");
    // The slices were held out, each described by what its runners measured.
    let slices: Vec<u32> = profile
        .held_out
        .iter()
        .filter(|e| e.held_out == "sm_count")
        .map(|e| e.sm_count)
        .collect();
    assert!(slices.contains(&16) && slices.contains(&32), "{slices:?}");
    // Another GPU's name beside it is refused after the first command, not
    // after the slices.
    let wrong = dir.join("wrong.ron");
    let run = calibrate(&bench, &wrong, &["--gpu", "h200-sxm"]);
    assert!(!run.status.success());
    let err = String::from_utf8_lossy(&run.stderr);
    assert!(
        err.contains("--gpu h200-sxm") && err.contains("h100-sxm"),
        "{err}"
    );
    let log = std::fs::read_to_string(dir.join("wrong.measured/engine-bench.log")).unwrap();
    assert!(!log.contains("--sm-counts"), "{log}");
    assert!(!wrong.exists());
}

#[test]
fn a_single_runner_option_beside_operators_is_a_usage_error() {
    let dir = scratch("calibrate_operators_usage");
    for extra in [["--model", "qwen3-8b"], ["--sm-count", "16"]] {
        let run = Command::new(env!("CARGO_BIN_EXE_exp"))
            .args(["calibrate", "--operators", "--out"])
            .arg(dir.join("x.ron"))
            .args(extra)
            .output()
            .expect("exp runs");
        assert!(!run.status.success(), "{extra:?}");
        let err = String::from_utf8_lossy(&run.stderr);
        assert!(err.contains("cannot be used with"), "{err}");
    }
    assert!(!dir.join("x.measured").exists());
}

#[test]
fn a_failing_engine_bench_is_an_error_that_points_at_its_log() {
    let dir = scratch("calibrate_operators_fails");
    let bench = dir.join("engine-bench");
    write_executable(
        &bench,
        "#!/usr/bin/env bash\necho 'no CUDA device' >&2\nexit 1\n",
    );
    let run = calibrate(&bench, &dir.join("x.ron"), &[]);
    assert!(!run.status.success());
    let err = String::from_utf8_lossy(&run.stderr);
    assert!(
        err.contains("engine-bench.log") && err.contains("exit status"),
        "{err}"
    );
    let log = std::fs::read_to_string(dir.join("x.measured/engine-bench.log")).unwrap();
    assert!(log.contains("no CUDA device"));
    assert!(!dir.join("x.ron").exists());
}
