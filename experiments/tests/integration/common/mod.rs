//! Helpers shared by the integration tests (included with `mod common;`).
#![allow(dead_code)]

use experiments::backend::{make_backends, CostSource, Mode, DEFAULT_GPU};
use experiments::catalogue;
use experiments::driver::{evaluate, Evaluation};
use experiments::table::{Cell, Table};
use indicatif::ProgressBar;
use std::sync::OnceLock;

/// Runs experiment `name` in sim mode with `sets` (key=value) applied, no files.
pub fn evaluate_sim(name: &str, sets: &[&str], seed: u64) -> Evaluation {
    let exp = catalogue::find(name).expect("experiment exists");
    let mut settings = catalogue::default_settings(exp).expect("defaults parse");
    for s in sets {
        settings.set_arg(s).unwrap_or_else(|e| panic!("{s}: {e}"));
    }
    let backends =
        make_backends(Mode::Sim, &CostSource::Datasheet(DEFAULT_GPU.into())).expect("sim backend");
    evaluate(
        exp,
        &settings,
        backends[0].as_ref(),
        seed,
        None,
        &ProgressBar::hidden(),
    )
    .expect("experiment runs")
}

/// The header and rows of CSV `text`, read by the `csv` crate (so a quoted
/// field holding a comma stays one field).
pub fn csv_rows(text: &str) -> (Vec<String>, Vec<Vec<String>>) {
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(false)
        .from_reader(text.as_bytes());
    let mut records = reader
        .records()
        .map(|r| r.expect("readable CSV").iter().map(String::from).collect());
    let header = records.next().unwrap_or_default();
    (header, records.collect())
}

/// Numeric value of `column` in every row where `key_column` == `key`.
pub fn values(table: &Table, key_column: &str, key: &str, column: &str) -> Vec<f64> {
    (0..table.rows.len())
        .filter(|&r| table.get(r, key_column).map(Cell::to_string).as_deref() == Some(key))
        .map(|r| {
            table
                .get(r, column)
                .and_then(Cell::as_f64)
                .unwrap_or_else(|| panic!("row {r} has no number in {column}"))
        })
        .collect()
}

/// A fresh, empty directory under cargo's test scratch folder.
pub fn scratch(name: &str) -> std::path::PathBuf {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

/// The CPU runner on the tiny model, quietly: real mode in a few seconds.
pub const TINY_CPU: &[&str] = &["--backend", "cpu", "--model", "tiny", "--quiet"];

/// A profile of the tiny model measured on the CPU runner: what `--mode
/// both --backend cpu` compares the CPU runner with. Calibrated once for
/// every test that needs it (one rep per grid point: the fit's quality does
/// not matter here).
pub fn tiny_cpu_profile() -> &'static str {
    static PROFILE: OnceLock<String> = OnceLock::new();
    PROFILE.get_or_init(|| {
        let path = scratch("real-cpu-profile").join("tiny-cpu.ron");
        let p = path.to_str().unwrap().to_string();
        let mut args = vec!["calibrate", "--out", &p, "--grid", "small"];
        args.extend_from_slice(&["--reps", "1", "--warmup", "0"]);
        args.extend_from_slice(TINY_CPU);
        experiments::run_cli(std::iter::once("exp").chain(args.iter().copied()))
            .unwrap_or_else(|e| panic!("calibrate: {e:#}"));
        p
    })
}

/// The date every reproducibility test pins with `SOURCE_DATE_EPOCH`:
/// 2026-12-04T00:00:00Z.
pub const EPOCH: &str = "1796342400";

/// Runs the `exp` binary with `args` and `SOURCE_DATE_EPOCH` = `epoch`
/// (unset for `None`), in its own process so the variable reaches no other
/// test; Ok(stdout) on success, Err(stderr) on failure.
pub fn exp_with_epoch(args: &[&str], epoch: Option<&str>) -> Result<String, String> {
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_exp"));
    command.args(args);
    match epoch {
        Some(value) => command.env("SOURCE_DATE_EPOCH", value),
        None => command.env_remove("SOURCE_DATE_EPOCH"),
    };
    let out = command.output().expect("exp runs");
    let text = |bytes: Vec<u8>| String::from_utf8_lossy(&bytes).into_owned();
    if out.status.success() {
        Ok(text(out.stdout))
    } else {
        Err(text(out.stderr))
    }
}

/// Every file under `dir`, by path relative to it, with its bytes.
pub fn file_tree(dir: &std::path::Path) -> std::collections::BTreeMap<std::path::PathBuf, Vec<u8>> {
    fn walk(
        root: &std::path::Path,
        dir: &std::path::Path,
        out: &mut std::collections::BTreeMap<std::path::PathBuf, Vec<u8>>,
    ) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(root, &path, out);
            } else {
                let bytes = std::fs::read(&path).unwrap();
                out.insert(path.strip_prefix(root).unwrap().to_path_buf(), bytes);
            }
        }
    }
    let mut out = std::collections::BTreeMap::new();
    walk(dir, dir, &mut out);
    out
}

/// Asserts `a` and `b` hold the same files with the same bytes.
pub fn assert_same_files(a: &std::path::Path, b: &std::path::Path) {
    let (ta, tb) = (file_tree(a), file_tree(b));
    assert_eq!(
        ta.keys().collect::<Vec<_>>(),
        tb.keys().collect::<Vec<_>>(),
        "same files in {} and {}",
        a.display(),
        b.display()
    );
    for (path, bytes) in &ta {
        assert!(bytes == &tb[path], "{} differs", path.display());
    }
}
