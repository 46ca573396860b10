//! `exp run`'s output folder, streams and `--seeds`, and `exp show` on a
//! closed pipe: through the binary where the streams matter, else the library.

use crate::common;

use common::scratch;
use experiments::run_cli;
use std::path::Path;
use std::process::{Command, Output, Stdio};

fn run(args: &[&str]) -> anyhow::Result<()> {
    run_cli(std::iter::once("exp").chain(args.iter().copied()))
}

fn exp(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_exp"))
        .args(args)
        .output()
        .expect("exp runs")
}

/// A small cb_sweep into `out`, with `concurrency` and the extra `args`.
fn small_cb<'a>(out: &'a Path, concurrency: &'a str, args: &[&'a str]) -> Vec<&'a str> {
    let mut all = vec![
        "run",
        "cb_sweep",
        "--out",
        out.to_str().unwrap(),
        "--set",
        concurrency,
        "--set",
        "prompt_tokens=32",
        "--set",
        "output_tokens=4",
        "--set",
        "batches=2",
    ];
    all.extend_from_slice(args);
    all
}

/// A small poisson_mix (random arrivals and lengths: metrics vary by seed).
fn small_mix<'a>(out: &'a Path, args: &[&'a str]) -> Vec<&'a str> {
    let mut all = vec![
        "run",
        "poisson_mix",
        "--out",
        out.to_str().unwrap(),
        "--set",
        "rates=20",
        "--set",
        "requests=30",
        "--set",
        "skip=5",
        "--set",
        "prompt_max=512",
        "--set",
        "prefix_tokens=128",
    ];
    all.extend_from_slice(args);
    all
}

fn svgs(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".svg"))
        .collect();
    names.sort();
    names
}

#[test]
fn a_rerun_replaces_the_folder_and_leaves_no_stale_file() {
    let out = scratch("run-output-rerun");
    run(&small_cb(&out, "concurrency=1,2", &["--quiet"])).expect("first run");
    let dir = out.join("cb_sweep");
    let before = svgs(&dir);
    assert!(!before.is_empty(), "figures drawn");
    let first = std::fs::read_to_string(dir.join("sim/summary.csv")).unwrap();
    // Fails while running the conditions, after staging began.
    let failing = small_cb(
        &out,
        "concurrency=1",
        &["--quiet", "--set", "max_num_seqs=4096"],
    );
    run(&failing).expect_err("engine settings refused");
    let kept = std::fs::read_to_string(dir.join("sim/summary.csv")).unwrap();
    assert_eq!(kept, first, "a failed run leaves the previous results");
    assert_eq!(
        std::fs::read_dir(&out).unwrap().count(),
        1,
        "no staging left"
    );
    // A file the previous run wrote but the next one does not.
    let stale = dir.join("cb_sweep_gone.svg");
    std::fs::write(&stale, "<svg/>").unwrap();
    let manifest = dir.join(".exp-files");
    let listed = std::fs::read_to_string(&manifest).unwrap();
    std::fs::write(&manifest, format!("{listed}cb_sweep_gone.svg\n")).unwrap();
    std::fs::write(dir.join("sim/old.csv"), "x").unwrap();
    let err = run(&small_cb(&out, "concurrency=1", &["--quiet"])).expect_err("old.csv is foreign");
    assert!(format!("{err:#}").contains("old.csv"), "{err:#}");
    std::fs::remove_file(dir.join("sim/old.csv")).unwrap();
    run(&small_cb(&out, "concurrency=1", &["--quiet"])).expect("rerun");
    assert!(!stale.exists(), "the previous run's files are gone");
    assert_eq!(svgs(&dir), before, "the same charts, redrawn");
    let summary = std::fs::read_to_string(dir.join("sim/summary.csv")).unwrap();
    assert_eq!(
        summary.lines().count(),
        3,
        "2 max_num_seqs x 1 concurrency: {summary}"
    );
    let leftovers: Vec<_> = std::fs::read_dir(&out)
        .unwrap()
        .filter_map(Result::ok)
        .map(|e| e.file_name())
        .collect();
    assert_eq!(leftovers, ["cb_sweep"], "no staging or old folder left");
}

#[test]
fn a_foreign_file_refuses_the_run_and_is_kept() {
    let out = scratch("run-output-foreign");
    let dir = out.join("cb_sweep");
    std::fs::create_dir_all(&dir).unwrap();
    let notes = dir.join("notes.txt");
    std::fs::write(&notes, "mine").unwrap();
    let msg = format!(
        "{:#}",
        run(&small_cb(&out, "concurrency=1", &["--quiet"])).expect_err("refused")
    );
    assert!(
        msg.contains("notes.txt") && msg.contains("cb_sweep"),
        "{msg}"
    );
    assert_eq!(std::fs::read_to_string(&notes).unwrap(), "mine");
    let entries = std::fs::read_dir(&out).unwrap().count();
    assert_eq!(entries, 1, "no staging folder left behind");
}

#[test]
fn a_folder_of_the_layout_without_a_manifest_is_replaced() {
    let out = scratch("run-output-legacy");
    let dir = out.join("cb_sweep");
    std::fs::create_dir_all(dir.join("sim")).unwrap();
    std::fs::write(dir.join("sim/summary.csv"), "old").unwrap();
    std::fs::write(dir.join("cb_sweep_stall.svg"), "<svg/>").unwrap();
    run(&small_cb(&out, "concurrency=1", &["--quiet"])).expect("exp's own files are replaced");
    assert!(!dir.join("cb_sweep_stall.svg").exists());
    assert!(dir.join(".exp-files").is_file());
}

#[test]
fn stdout_is_the_summary_csv_and_stderr_names_the_files() {
    let out = scratch("run-output-streams");
    let result = exp(&small_cb(&out, "concurrency=1,2", &[]));
    assert!(result.status.success(), "{result:?}");
    let stdout = String::from_utf8(result.stdout).unwrap();
    let summary = std::fs::read_to_string(out.join("cb_sweep/sim/summary.csv")).unwrap();
    assert_eq!(stdout, summary, "stdout is exactly summary.csv");
    let stderr = String::from_utf8(result.stderr).unwrap();
    let written: Vec<&str> = stderr
        .lines()
        .filter_map(|l| l.strip_prefix("wrote "))
        .collect();
    assert!(written.len() >= 5, "{stderr}");
    for path in &written {
        assert!(Path::new(path).is_file(), "{path} named on stderr exists");
    }
    assert!(written
        .iter()
        .any(|p| p.ends_with("cb_sweep/sim/summary.csv")));
    let quiet = exp(&small_cb(&out, "concurrency=1", &["--quiet"]));
    assert!(quiet.status.success());
    assert!(
        quiet.stdout.is_empty() && quiet.stderr.is_empty(),
        "{quiet:?}"
    );
}

#[test]
fn seeds_write_their_spread_identically_on_rerun() {
    let out = scratch("run-output-seeds");
    let result = exp(&small_mix(&out, &["--seed", "4", "--seeds", "3"]));
    assert!(result.status.success(), "{result:?}");
    let dir = out.join("poisson_mix/sim");
    let spread = std::fs::read_to_string(dir.join("seeds.csv")).unwrap();
    assert_eq!(String::from_utf8(result.stdout).unwrap(), spread);
    let (header, rows) = common::csv_rows(&spread);
    let col = |name: &str| header.iter().position(|h| h == name).unwrap();
    let num = |row: &Vec<String>, name: &str| row[col(name)].parse::<f64>().ok();
    assert!(!rows.is_empty());
    let mut varied = 0;
    for row in &rows {
        assert_eq!(row[col("seeds")], "3", "{row:?}");
        let (mean, low, high) = (
            num(row, "mean"),
            num(row, "ci95_low"),
            num(row, "ci95_high"),
        );
        let (mean, low, high) = (mean.unwrap(), low.unwrap(), high.unwrap());
        assert!(low <= mean && mean <= high, "{row:?}");
        varied += usize::from(num(row, "sd").unwrap_or(0.0) > 0.0);
    }
    assert!(
        varied > 0,
        "a stochastic metric varies across seeds: {spread}"
    );
    let per_seed = std::fs::read_to_string(dir.join("summary_seeds.csv")).unwrap();
    let (header, rows) = common::csv_rows(&per_seed);
    assert_eq!(header[0], "seed");
    let seeds: std::collections::BTreeSet<&str> = rows.iter().map(|r| r[0].as_str()).collect();
    assert_eq!(seeds.into_iter().collect::<Vec<_>>(), ["4", "5", "6"]);
    let meta = std::fs::read_to_string(dir.join("meta.ron")).unwrap();
    let listed = meta
        .split("seeds: [")
        .nth(1)
        .and_then(|t| t.split(']').next());
    let listed: String = listed.unwrap_or("").split_whitespace().collect();
    assert_eq!(listed, "4,5,6,", "meta.ron records the seeds: {meta}");
    run(&small_mix(
        &out,
        &["--seed", "4", "--seeds", "3", "--quiet"],
    ))
    .expect("rerun");
    let again = std::fs::read_to_string(dir.join("seeds.csv")).unwrap();
    assert_eq!(again, spread, "byte-identical on rerun");
}

#[test]
fn seeds_zero_and_seeds_in_real_mode_are_errors() {
    let out = scratch("run-output-seeds-bad");
    let msg = format!(
        "{:#}",
        run(&small_mix(&out, &["--seeds", "0"])).expect_err("0 seeds")
    );
    assert!(msg.contains("--seeds 0"), "{msg}");
    let msg = format!(
        "{:#}",
        run(&small_mix(&out, &["--seeds", "2", "--mode", "real"])).expect_err("real seeds")
    );
    assert!(
        msg.contains("--seeds 2") && msg.contains("sim runs only"),
        "{msg}"
    );
    assert_eq!(
        std::fs::read_dir(&out).unwrap().count(),
        0,
        "nothing written"
    );
}

#[test]
fn show_into_a_closed_pipe_exits_cleanly() {
    // The reading end is closed before exp starts, so its first write fails
    // with EPIPE whatever the timing.
    let (reader, writer) = std::io::pipe().expect("a pipe");
    drop(reader);
    let out = Command::new(env!("CARGO_BIN_EXE_exp"))
        .args(["show", "poisson_mix"])
        .stdout(writer)
        .stderr(Stdio::piped())
        .output()
        .expect("exp runs");
    assert!(out.status.success(), "{out:?}");
    assert!(out.stderr.is_empty(), "no panic message: {out:?}");
}

#[test]
fn the_real_backend_reports_steps_and_finished_requests_while_it_runs() {
    use experiments::backend::{build_backends, BackendSpec, Mode, ModelChoice, RunnerKind};
    use experiments::catalogue;
    use std::cell::RefCell;

    let exp = catalogue::find("cb_sweep").unwrap();
    let mut settings = catalogue::default_settings(exp).unwrap();
    for s in [
        "max_num_seqs=4",
        "concurrency=2",
        "prompt_tokens=16",
        "output_tokens=4",
        "batches=2",
        "max_model_len=256",
        "max_num_batched_tokens=256",
    ] {
        settings.set_arg(s).unwrap();
    }
    let spec = BackendSpec {
        model: ModelChoice::parse("tiny").unwrap(),
        runner: RunnerKind::Cpu,
        engine: settings.engine.clone(),
        ..BackendSpec::default()
    };
    let backends = build_backends(Mode::Real, &spec).expect("CPU runner");
    let real = backends[0].as_ref();
    let prompts = sim::workload::PromptSource::random_tokens(real.vocab()).unwrap();
    let conditions = exp.plan(&settings, 0, &prompts).unwrap();
    let c = &conditions[0];
    let events = RefCell::new(Vec::new());
    let records = real
        .run_observed(&c.engine, &c.script, &|e| events.borrow_mut().push(e))
        .expect("condition runs");
    let events = events.into_inner();
    let last = events.last().expect("progress was reported");
    assert_eq!(last.requests_done, c.script.requests.len(), "{events:?}");
    assert!(last.steps >= records.steps.len() as u64, "{events:?}");
    assert!(
        events
            .windows(2)
            .all(|w| w[0].steps <= w[1].steps && w[0].requests_done <= w[1].requests_done),
        "steps and finished requests never go back: {events:?}"
    );
}
