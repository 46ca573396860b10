//! `exp plan` at steady state: the answer does not depend on the run length
//! it starts from, a trace is planned whole, and what the search could not
//! settle (run length, grid edge) is said in the output.

use crate::common::{self, scratch};
use experiments::run_cli;
use std::path::Path;

fn run(args: &[&str]) -> anyhow::Result<()> {
    run_cli(std::iter::once("exp").chain(args.iter().copied()))
}

/// `plan.csv`'s only row as (column, cell) lookups.
fn plan_row(out: &Path) -> impl Fn(&str) -> String {
    let text = std::fs::read_to_string(out.join("plan.csv")).expect("plan.csv");
    let (header, rows) = common::csv_rows(&text);
    assert_eq!(rows.len(), 1, "{text}");
    let row = rows[0].clone();
    move |column: &str| {
        let i = header.iter().position(|c| c == column).expect(column);
        row[i].clone()
    }
}

fn rate(cell: String) -> f64 {
    cell.parse().unwrap_or_else(|_| panic!("rate {cell:?}"))
}

/// The H200 with its shipped profile, one setting (the best of the default
/// grid), default workload and SLO.
fn h200_plan(out: &Path, extra: &[&str]) -> impl Fn(&str) -> String {
    let mut args = vec![
        "plan",
        "--gpu",
        "h200-sxm",
        "--out",
        out.to_str().unwrap(),
        "--quiet",
        "--cb-set",
        "concurrency=1",
        "--cb-set",
        "batches=2",
        "--set",
        "max_num_batched_tokens=2048",
        "--set",
        "max_num_seqs=256",
    ];
    args.extend_from_slice(extra);
    run(&args).expect("plan runs");
    plan_row(out)
}

#[test]
fn the_highest_rate_is_the_same_from_the_default_run_length_and_from_20000_requests() {
    let dir = scratch("plan_steady_h200");
    let default = h200_plan(&dir.join("default"), &[]);
    let long = h200_plan(
        &dir.join("long"),
        &["--set", "requests=20000", "--set", "max_requests=20000"],
    );
    let (a, b) = (
        rate(default("max_qps_under_slo")),
        rate(long("max_qps_under_slo")),
    );
    // The default precision_pct is 2.
    assert!(
        (a - b).abs() / b <= 0.02,
        "{a} req/s by default, {b} at 20,000"
    );
    assert_eq!(default("steady_state"), "converged");
    assert!(rate(default("requests_per_run")) >= 2000.0);
    // One length only: the run is as asked, and the output says it was not
    // checked for steady state.
    assert_eq!(long("requests_per_run"), "20000");
    assert_eq!(long("steady_state"), "not converged");
    assert!(
        long("note").contains("steady state not checked"),
        "{}",
        long("note")
    );
}

#[test]
fn a_trace_of_5000_requests_is_planned_whole_and_its_rate_meets_its_own_curve() {
    let dir = scratch("plan_steady_trace");
    let trace = dir.join("t.csv");
    let mut csv = String::from("arrival_s,prompt_tokens,output_tokens\n");
    for i in 0..5000 {
        // Bursts of 5 requests every second: not a Poisson process.
        csv.push_str(&format!(
            "{},{},{}\n",
            (i / 5) as f64,
            64 + i % 97,
            4 + i % 13
        ));
    }
    std::fs::write(&trace, csv).unwrap();
    let out = dir.join("out");
    let row = h200_plan(
        &out,
        &[
            "--workload",
            trace.to_str().unwrap(),
            "--set",
            "requests=100",
        ],
    );
    assert_eq!(row("requests_per_run"), "5000");
    assert_eq!(row("steady_state"), "whole trace");
    let max = rate(row("max_qps_under_slo"));
    assert!(max > 0.0);
    let curve = std::fs::read_to_string(out.join("plan_curve.csv")).unwrap();
    let (header, rows) = common::csv_rows(&curve);
    let col = |name: &str| header.iter().position(|c| c == name).expect(name);
    let at_max = rows
        .iter()
        .find(|r| r[col("fraction_of_max")] == "1.000")
        .expect("a curve point at the maximum");
    assert_eq!(at_max[col("meets_slo")], "yes", "{curve}");
}

#[test]
fn a_best_setting_at_the_end_of_the_grid_and_a_run_too_short_to_settle_are_noted() {
    let dir = scratch("plan_steady_notes");
    let row = h200_plan(
        &dir.join("edge"),
        &[
            "--set",
            "max_num_seqs=16,256",
            "--set",
            "requests=50",
            "--set",
            "max_requests=50",
        ],
    );
    assert_eq!(row("best_max_num_seqs"), "256");
    let note = row("note");
    assert!(
        note.contains("max_num_seqs=256 is the largest searched")
            && note.contains("--set max_num_seqs="),
        "{note}"
    );
    assert!(note.contains("raise max_requests"), "{note}");
    let text = std::fs::read_to_string(dir.join("edge/assumptions.txt")).unwrap();
    assert!(text.contains("largest searched"), "{text}");
}

#[test]
fn max_requests_below_requests_is_refused() {
    let out = scratch("plan_steady_bad");
    let err = run(&[
        "plan",
        "--gpu",
        "h200-sxm",
        "--out",
        out.to_str().unwrap(),
        "--set",
        "requests=2000",
        "--set",
        "max_requests=1000",
    ])
    .expect_err("refused");
    let msg = format!("{err:#}");
    assert!(
        msg.contains("max_requests") && msg.contains("2000"),
        "{msg}"
    );
}
