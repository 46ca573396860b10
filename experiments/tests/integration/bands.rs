//! `bands.csv`: a sim run on the operator model carries its held-out step
//! error through the run; one on a calibrated profile (no hold-outs) does not.

use crate::common::{csv_rows, scratch};
use std::process::Command;

fn exp(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_exp"))
        .args(args)
        .output()
        .expect("exp runs")
}

/// A loaded poisson_mix of qwen3-8b: requests queue at 40 req/s.
const MIX: [&str; 12] = [
    "run",
    "poisson_mix",
    "--model",
    "qwen3-8b",
    "--set",
    "rates=5,40",
    "--set",
    "requests=60",
    "--set",
    "skip=5",
    "--gpu",
    "h200-sxm",
];

#[test]
fn every_figure_gets_a_band_that_holds_it_and_queueing_widens_it() {
    let out = scratch("bands-operators");
    let mut args = MIX.to_vec();
    args.extend(["--cost-model", "operators", "--out", out.to_str().unwrap()]);
    let run = exp(&args);
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "{stderr}");
    assert!(
        stderr.contains("bands.csv") && stderr.contains("figures move by up to"),
        "{stderr}"
    );
    let text = std::fs::read_to_string(out.join("poisson_mix/sim/bands.csv")).unwrap();
    let (header, rows) = csv_rows(&text);
    assert_eq!(
        header,
        ["condition", "metric", "value", "low", "high", "error_pct"]
    );
    let num = |r: &[String], i: usize| r[i].parse::<f64>().unwrap();
    let find = |cond: &str, metric: &str| {
        rows.iter()
            .find(|r| r[0] == cond && r[1] == metric)
            .unwrap_or_else(|| panic!("no {cond} {metric}: {text}"))
    };
    for r in &rows {
        let (value, low, high) = (num(r, 2), num(r, 3), num(r, 4));
        assert!(low <= value && value <= high, "{r:?}");
    }
    // The requests and cached tokens do not move with the step costs.
    let counted = find("rate_rps=40", "measured_requests");
    assert_eq!(
        (num(counted, 3), num(counted, 4), num(counted, 5)),
        (55.0, 55.0, 0.0)
    );
    // The prefill error is the stated one; queueing at 40 req/s widens it.
    let idle = num(find("rate_rps=5", "ttft_median_ms"), 5);
    let loaded = num(find("rate_rps=40", "ttft_median_ms"), 5);
    assert!(
        idle > 0.0 && loaded > idle,
        "TTFT median band ±{idle} % idle, ±{loaded} % loaded"
    );
    let meta = std::fs::read_to_string(out.join("poisson_mix/sim/meta.ron")).unwrap();
    let prefill: f64 = meta
        .split("prefill_pct: ")
        .nth(1)
        .and_then(|s| s.split(',').next())
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or_else(|| panic!("no prefill_pct in {meta}"));
    assert!(
        loaded > prefill,
        "±{loaded} % against a stated ±{prefill:.1} %"
    );
}

#[test]
fn a_cost_model_without_hold_outs_writes_no_bands() {
    let out = scratch("bands-roofline");
    let mut args = MIX.to_vec();
    args.extend(["--out", out.to_str().unwrap()]);
    let run = exp(&args);
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    assert!(out.join("poisson_mix/sim/summary.csv").exists());
    assert!(!out.join("poisson_mix/sim/bands.csv").exists());
    assert!(!String::from_utf8_lossy(&run.stderr).contains("bands.csv"));
}
