//! `exp plan`'s error columns: the operator model states its held-out
//! error; a calibrated profile leaves them empty.

use super::*;

#[test]
fn the_operator_model_plans_qwen3_8b_on_an_l4_with_its_error_bars() {
    let out = std::env::temp_dir().join(format!("plan-operators-{}", std::process::id()));
    small_plan(
        &out,
        &[
            "--model",
            "qwen3-8b",
            "--gpu",
            "l4",
            "--cost-model",
            "operators",
        ],
    )
    .expect("plan runs");
    let (header, rows) = read_plan(&out);
    assert_eq!(rows.len(), 1);
    let row = &rows[0];
    // The held-out errors of qwen3-8b on the whole H200 plus its 64-SM slice.
    let decode = num(&header, row, "expected_error_decode_pct");
    let prefill = num(&header, row, "expected_error_prefill_pct");
    assert!(decode > 0.0 && prefill > 0.0, "{decode} {prefill}");
    // The QPS's error is its own band's wider side: the best setting
    // searched again with every step off by -1 and +1 times those errors.
    let qps = num(&header, row, "max_qps_under_slo");
    let (low, high) = (
        num(&header, row, "max_qps_low"),
        num(&header, row, "max_qps_high"),
    );
    assert!(
        qps > 0.0 && low <= qps && qps <= high && low < high,
        "{row:?}"
    );
    let wider = (qps - low).max(high - qps) / qps * 100.0;
    // plan.csv writes each figure to three decimals: at about 5 req/s
    // rounding the rates moves the recomputed percentage by up to 0.03.
    assert!(
        (num(&header, row, "expected_error_qps_pct") - wider).abs() < 0.05,
        "{row:?}"
    );
    assert!(
        cell(&header, row, "off_measured_ground").contains("another architecture"),
        "{row:?}"
    );
    let text = std::fs::read_to_string(out.join("assumptions.txt")).expect("assumptions");
    assert!(
        text.contains("expected error (held out): decode step") && text.contains('\u{b1}'),
        "{text}"
    );
    // A calibrated profile beside the operator model is refused.
    let err = error_of(&[
        "plan",
        "--out",
        out.to_str().unwrap(),
        "--model",
        "qwen3-8b",
        "--gpu",
        "l4",
        "--cost-model",
        "operators",
        "--profile",
        "mine.ron",
        "--quiet",
    ]);
    assert!(
        err.contains("mine.ron") && err.contains("--cost-model profile"),
        "{err}"
    );
}

#[test]
fn a_calibrated_profile_leaves_the_error_columns_empty() {
    let out = std::env::temp_dir().join(format!("plan-no-bars-{}", std::process::id()));
    small_plan(&out, &["--gpu", "h200-sxm"]).expect("plan runs");
    let (header, rows) = read_plan(&out);
    assert_eq!(cell(&header, &rows[0], "expected_error_decode_pct"), "");
    assert_eq!(cell(&header, &rows[0], "max_qps_low"), "");
    assert_eq!(cell(&header, &rows[0], "off_measured_ground"), "");
}
