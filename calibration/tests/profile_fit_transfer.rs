//! Fitting recovers a known profile, transfer behaves as its contract says,
//! and profile files fail loudly.

use calibration::features::{DENSE_KNOTS, LM_KNOTS, NUM_FEATURES};
use calibration::transfer::transfer;
use calibration::{fit, CostProfile, Grid, Provenance, Sample};
use engine::{BatchShape, SeqShape};
use rand::{Rng, SeedableRng};
use sim::{CostModel, GpuSpec, ModelShape};

fn h200() -> GpuSpec {
    GpuSpec {
        name: "h200-sxm".into(),
        bf16_flops: 989e12,
        mem_bandwidth: 4.8e12,
        mem_bytes: 141e9,
        sm_count: 132,
        source: "test literal".into(),
    }
}

fn qwen3_0_6b() -> ModelShape {
    ModelShape {
        num_layers: 28,
        hidden: 1024,
        intermediate: 3072,
        num_q_heads: 16,
        num_kv_heads: 8,
        head_dim: 128,
        vocab: 151_936,
        bytes_per_param: 2,
        tied_embeddings: true,
    }
}

fn provenance() -> Provenance {
    Provenance {
        device: "NVIDIA H200".into(),
        model: "qwen3-0.6b".into(),
        engine_commit: "test".into(),
        date: "2026-11-30".into(),
        method: "measured".into(),
        samples: 0,
        holdout_error_pct_median: 0.0,
        holdout_error_pct_p90: 0.0,
    }
}

/// A profile shaped like a real GPU's: flat dense cost while memory bound,
/// then linear in tokens.
fn reference_profile() -> CostProfile {
    let mut c = [0.0; NUM_FEATURES];
    c[0] = 150e-6;
    c[1] = 400e-6;
    for (i, &t) in DENSE_KNOTS.iter().enumerate() {
        c[2 + i] = 0.6e-3_f64.max(t * 1.7e-6);
    }
    let lm = 2 + DENSE_KNOTS.len();
    for (i, &s) in LM_KNOTS.iter().enumerate() {
        c[lm + i] = 80e-6_f64.max(s * 0.8e-6);
    }
    let kv = lm + LM_KNOTS.len();
    c[kv] = 0.9e-9 * 28.0;
    c[kv + 1] = 2e-6;
    c[kv + 2] = 2.5e-12 * 28.0;
    c[kv + 3] = 5e-6;
    CostProfile::from_coefficients(&c, h200(), qwen3_0_6b(), provenance())
}

fn decode_batch(b: usize, ctx: u32) -> BatchShape {
    BatchShape {
        seqs: vec![
            SeqShape {
                new_tokens: 1,
                context_before: ctx,
                samples: true
            };
            b
        ],
    }
}

#[test]
fn fit_recovers_a_known_profile_within_noise() {
    let truth = reference_profile();
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    let samples: Vec<Sample> = Grid::gpu_default()
        .shapes()
        .into_iter()
        .map(|shape| {
            let noise = 1.0 + rng.random_range(-0.01..0.01);
            Sample {
                seconds: truth.step_seconds(&shape) * noise,
                shape,
            }
        })
        .collect();
    let fitted = fit(&samples, h200(), qwen3_0_6b(), provenance()).unwrap();
    let p = &fitted.profile.provenance;
    assert!(
        p.holdout_error_pct_median < 2.0,
        "median {}",
        p.holdout_error_pct_median
    );
    assert!(
        p.holdout_error_pct_p90 < 5.0,
        "p90 {}",
        p.holdout_error_pct_p90
    );
    assert_eq!(p.samples, samples.len());
    // Shapes outside the grid still land near the truth.
    for shape in [decode_batch(40, 500), decode_batch(3, 2000)] {
        let (f, t) = (
            fitted.profile.step_seconds(&shape),
            truth.step_seconds(&shape),
        );
        assert!((f - t).abs() / t < 0.05, "{f} vs {t}");
    }
}

#[test]
fn fit_rejects_too_few_samples() {
    let samples = vec![
        Sample {
            shape: decode_batch(1, 10),
            seconds: 1e-3
        };
        3
    ];
    assert!(fit(&samples, h200(), qwen3_0_6b(), provenance()).is_err());
}

#[test]
fn transfer_to_the_measured_gpu_returns_the_profile_unchanged() {
    let p = reference_profile();
    assert_eq!(transfer(&p, &h200()), p);
}

#[test]
fn twice_the_bandwidth_speeds_decode_but_not_twofold_when_overheads_dominate() {
    let p = reference_profile();
    let mut fast = h200();
    fast.name = "h200-2x-bandwidth".into();
    fast.mem_bandwidth *= 2.0;
    let moved = transfer(&p, &fast);
    let shape = decode_batch(1, 300);
    let (before, after) = (p.step_seconds(&shape), moved.step_seconds(&shape));
    assert!(after < before, "{after} >= {before}");
    assert!(
        after > before / 2.0,
        "{after} is at least twice as fast as {before}"
    );
    assert_eq!(moved.step_overhead_graph_s, p.step_overhead_graph_s);
    assert!(moved
        .provenance
        .method
        .contains("transferred from h200-sxm"));
    // A compute-bound prefill does not speed up with bandwidth alone.
    let prefill = BatchShape {
        seqs: vec![SeqShape {
            new_tokens: 4096,
            context_before: 0,
            samples: true,
        }],
    };
    let (b, a) = (p.step_seconds(&prefill), moved.step_seconds(&prefill));
    assert!((a - b).abs() / b < 0.05, "{a} vs {b}");
}

#[test]
fn profile_round_trips_and_bad_files_name_the_problem() {
    let dir = std::env::temp_dir().join(format!("servetwin-profile-{}", std::process::id()));
    let path = dir.join("p.ron");
    let p = reference_profile();
    p.save(&path).unwrap();
    assert_eq!(CostProfile::load(&path).unwrap(), p);

    let text = std::fs::read_to_string(&path).unwrap();
    let negative = text.replacen("decode_s_per_seq: ", "decode_s_per_seq: -", 1);
    std::fs::write(&path, negative).unwrap();
    let err = CostProfile::load(&path).unwrap_err().to_string();
    assert!(err.contains("decode_s_per_seq"), "{err}");

    std::fs::write(&path, "(provenance: oops").unwrap();
    let err = CostProfile::load(&path).unwrap_err().to_string();
    assert!(err.contains("line 1"), "{err}");

    let err = CostProfile::load(&dir.join("missing.ron"))
        .unwrap_err()
        .to_string();
    assert!(err.contains("missing.ron"), "{err}");
    std::fs::remove_dir_all(&dir).ok();
}
