//! The `exp` binary carries the shipped calibration profiles: a copy run
//! outside the source tree prices sim steps with the H200 profile and names
//! it `shipped:h200-qwen3-0.6b.ron` (`exp run`'s meta.ron, `exp plan`'s
//! assumptions); `--profiles-dir` replaces the shipped set.

use std::path::{Path, PathBuf};
use std::process::Command;

/// A fresh folder under the system's temporary directory, outside the
/// source tree (cargo's own scratch folder lies inside it).
fn outside(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("servetwin-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The built `exp`, copied into `dir`.
fn copied_exp(dir: &Path) -> PathBuf {
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let exp = bin.join("exp");
    // `fs::copy` keeps the permission bits, so the copy stays executable.
    std::fs::copy(env!("CARGO_BIN_EXE_exp"), &exp).unwrap();
    exp
}

/// A short chunk_sweep (its load part, one chunk size, few requests).
const SMALL_CHUNK_SWEEP: &[&str] = &[
    "run",
    "chunk_sweep",
    "--mode",
    "sim",
    "--quiet",
    "--set",
    "part=load",
    "--set",
    "load_chunk_tokens=512",
    "--set",
    "concurrency=2",
    "--set",
    "batches=2",
    "--set",
    "output_tokens=8",
];

/// Runs `exp args` in `cwd`; panics with its stderr unless it succeeds.
/// A freshly copied binary can be "busy" for a moment: another test's
/// process forked while the copy's file was open holds it until it execs,
/// so that start is tried again.
fn exp_in(exp: &Path, cwd: &Path, args: &[&str]) {
    let mut tries = 0;
    let out = loop {
        match Command::new(exp).args(args).current_dir(cwd).output() {
            Err(e) if e.kind() == std::io::ErrorKind::ExecutableFileBusy && tries < 20 => {
                tries += 1;
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
            other => break other.unwrap(),
        }
    };
    assert!(
        out.status.success(),
        "exp {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn chunk_sweep_meta(exp: &Path, cwd: &Path, out: &Path, extra: &[&str]) -> String {
    let mut args = SMALL_CHUNK_SWEEP.to_vec();
    args.extend(["--out", out.to_str().unwrap()]);
    args.extend_from_slice(extra);
    exp_in(exp, cwd, &args);
    std::fs::read_to_string(out.join("chunk_sweep/sim/meta.ron")).unwrap()
}

#[test]
fn a_copied_exp_run_elsewhere_uses_its_shipped_profile() {
    let dir = outside("shipped-copy");
    let exp = copied_exp(&dir);
    // Neither the working directory nor the binary's folder is in the source tree.
    let elsewhere = dir.join("elsewhere");
    std::fs::create_dir_all(&elsewhere).unwrap();
    let meta = chunk_sweep_meta(&exp, &elsewhere, &dir.join("o"), &[]);
    assert!(
        meta.contains(
            "cost_model: \"calibrated profile shipped:h200-qwen3-0.6b.ron (as measured on h200-sxm"
        ),
        "{meta}"
    );

    // exp plan finds the same profile, for the measured GPU and for a transfer.
    let plan_out = dir.join("plan");
    let args = [
        "plan",
        "--gpu",
        "h200-sxm,l4",
        "--quiet",
        "--out",
        plan_out.to_str().unwrap(),
        "--set",
        "requests=40",
        "--set",
        "max_num_batched_tokens=1024",
        "--set",
        "max_num_seqs=32",
        "--set",
        "precision_pct=10",
        "--cb-set",
        "concurrency=1",
        "--cb-set",
        "batches=2",
        "--cb-set",
        "output_tokens=4",
    ];
    exp_in(&exp, &elsewhere, &args);
    let text = std::fs::read_to_string(plan_out.join("assumptions.txt")).unwrap();
    assert!(
        text.contains("h200-sxm: calibrated profile shipped:h200-qwen3-0.6b.ron (as measured")
            && text.contains(
                "l4: calibrated profile shipped:h200-qwen3-0.6b.ron (measured on h200-sxm, transferred to l4"
            ),
        "{text}"
    );
    let meta = std::fs::read_to_string(plan_out.join("meta.ron")).unwrap();
    assert!(
        meta.contains("profile: Some(\"shipped:h200-qwen3-0.6b.ron\")"),
        "{meta}"
    );
    std::fs::remove_dir_all(dir).ok();
}

#[test]
fn profiles_dir_replaces_the_shipped_profiles() {
    let dir = outside("shipped-override");
    let exp = copied_exp(&dir);
    // An empty folder: nothing fits, so the roofline, not the shipped profile.
    let empty = dir.join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    let meta = chunk_sweep_meta(
        &exp,
        &dir,
        &dir.join("o-empty"),
        &["--profiles-dir", empty.to_str().unwrap()],
    );
    assert!(
        meta.contains("cost_model: \"roofline (datasheet h200-sxm)\""),
        "{meta}"
    );
    // A folder holding a profile of the model's shape: that file, by its path.
    let mine = dir.join("mine");
    std::fs::create_dir_all(&mine).unwrap();
    let shipped = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../calibration/profiles/h200-qwen3-0.6b.ron"
    );
    let file = mine.join("local.ron");
    std::fs::copy(shipped, &file).unwrap();
    let meta = chunk_sweep_meta(
        &exp,
        &dir,
        &dir.join("o-mine"),
        &["--profiles-dir", mine.to_str().unwrap()],
    );
    assert!(
        meta.contains(&format!("calibrated profile {}", file.display())),
        "{meta}"
    );
    assert!(!meta.contains("shipped:"), "{meta}");
    // --profile still names one file, whatever --profiles-dir says.
    let meta = chunk_sweep_meta(
        &exp,
        &dir,
        &dir.join("o-file"),
        &[
            "--profile",
            file.to_str().unwrap(),
            "--profiles-dir",
            empty.to_str().unwrap(),
        ],
    );
    assert!(
        meta.contains(&format!("calibrated profile {}", file.display())),
        "{meta}"
    );
    // A folder with a broken profile is an error naming the file.
    std::fs::write(mine.join("broken.ron"), "(not a profile").unwrap();
    let out = Command::new(&exp)
        .args(SMALL_CHUNK_SWEEP)
        .args(["--out", dir.join("o-broken").to_str().unwrap()])
        .args(["--profiles-dir", mine.to_str().unwrap()])
        .current_dir(&dir)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("broken.ron"), "{err}");
    std::fs::remove_dir_all(dir).ok();
}
