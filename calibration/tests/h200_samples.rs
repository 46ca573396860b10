//! The fit on the grid measured on the H200: results/h200/calibration_samples.csv,
//! the 120 points of `Grid::gpu_default` measured on 2026-11-30 at 21:03 UTC by
//! the engine of commit 3067d47 (with uncommitted changes: `-dirty`), on which the
//! shipped profile calibration/profiles/h200-qwen3-0.6b.ron was fitted, refitted
//! by the current code.

use calibration::{fit, samples_from_csv, Grid, Provenance, Sample};
use sim::{GpuSpec, ModelShape};
use std::path::Path;

fn h200() -> GpuSpec {
    GpuSpec {
        name: "h200-sxm".into(),
        bf16_flops: 989.4e12,
        mem_bandwidth: 4.8e12,
        mem_bytes: 141e9,
        sm_count: 132,
        source: "test literal".into(),
    }
}

/// The measured samples, paired with the grid shapes they were measured on.
fn h200_samples() -> Vec<Sample> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../results/h200/calibration_samples.csv"
    );
    let text = std::fs::read_to_string(path).expect("committed samples");
    samples_from_csv(&text, Path::new(path), &Grid::gpu_default())
        .expect("samples were measured on Grid::gpu_default")
}

fn provenance() -> Provenance {
    Provenance {
        device: "NVIDIA H200".into(),
        model: "qwen3-0.6b".into(),
        engine_commit: "test".into(),
        date: "2026-11-30".into(),
        method: "refit".into(),
        samples: 0,
        holdout_error_pct_median: 0.0,
        holdout_error_pct_p90: 0.0,
    }
}

#[test]
fn refit_of_the_h200_grid_is_accurate_and_its_curves_never_fall() {
    let fitted = fit(
        &h200_samples(),
        h200(),
        ModelShape::qwen3_0_6b(),
        provenance(),
    )
    .unwrap();
    let p = &fitted.profile;
    eprintln!(
        "held-out median {:.2} %, p90 {:.2} %",
        p.provenance.holdout_error_pct_median, p.provenance.holdout_error_pct_p90
    );
    // These points score 5.5 % and 12.4 % (the shipped profile's provenance).
    // Earlier calibrations that day, of earlier engines on other lent H200s,
    // scored from 3.9 % / 9.0 % to 6.2 % / 17.1 %. The p90 comes from host-bound
    // eager steps: in these points 24 decodes at context 3,000 (17 % over the
    // fit) and a 64-token prefill beside one decode (16 %). Their launches
    // take longer than their GPU work, and the lent machines differ there (a
    // 64-token prefill alone took 1.42 ms at 08:18 UTC, 1.87 at 13:32, 2.31
    // at 13:40, 1.53 at 15:18 and 1.36 at 21:03), which no GPU cost term
    // follows.
    // Validation on real runs with this profile: every step priced within
    // 1.2 % median, 2.3 % p90 (results/h200/VALIDATION.md).
    assert!(p.provenance.holdout_error_pct_median < 6.0);
    assert!(p.provenance.holdout_error_pct_p90 < 13.0);
    for curve in [&p.dense, &p.lm_head] {
        for w in curve.windows(2) {
            assert!(w[1].seconds >= w[0].seconds, "{curve:?}");
        }
    }
}
