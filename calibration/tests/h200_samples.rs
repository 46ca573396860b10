//! The fit on the grid measured on the H200 (results/h200/calibration_samples.csv,
//! 2026-11-30): the committed measurements, refitted by the current code.

use calibration::{fit, samples_from_csv, Grid, Provenance, Sample};
use sim::{GpuSpec, ModelShape};

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
    samples_from_csv(&text, &Grid::gpu_default())
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
    // These points (second session, engine a72c202) scored 5.4 % and 19.2 %
    // with the cost model of the GPU run, which priced a short prefill chunk
    // over a cached context as a prefill; the engine runs it through the
    // decode kernels, and the model now counts it so: 6.0 % and 10.9 %.
    // The first session's engine scored 3.9 % and 9.0 %; this one switches
    // decode kernels at 16 and 128 sequences, a step the linear KV term cannot
    // follow (results/h200/VALIDATION.md).
    assert!(p.provenance.holdout_error_pct_median < 6.5);
    assert!(p.provenance.holdout_error_pct_p90 < 11.5);
    for curve in [&p.dense, &p.lm_head] {
        for w in curve.windows(2) {
            assert!(w[1].seconds >= w[0].seconds, "{curve:?}");
        }
    }
}
