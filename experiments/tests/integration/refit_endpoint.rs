//! `exp calibrate --refit` of the profile fitted from outside on the H200
//! (results/h200/serve/endpoint.ron and its probe points): no server
//! needed, the refit keeps the provenance, and with short chunks' keys a
//! term of their own it prices prefix_cache's warm request (32 tokens over
//! 3,200 cached; 3.71–3.73 ms in process on that H200) within 10 %, where
//! the committed profile, fitted with one coefficient for decode and
//! short-chunk keys, is 12.7 % over.

use crate::common::scratch;
use calibration::CostProfile;
use engine::{BatchShape, SeqShape};
use sim::CostModel;
use std::path::Path;

/// prefix_cache's warm request on the H200, in process (inprocess/prefix_cache).
const WARM_MS: f64 = 3.73;

fn warm_ms(p: &CostProfile) -> f64 {
    let warm = BatchShape {
        seqs: vec![SeqShape {
            new_tokens: 32,
            context_before: 3200,
            samples: true,
        }],
    };
    p.step_seconds(&warm) * 1e3
}

#[test]
fn an_endpoint_profile_refits_from_its_probe_points() {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../results/h200/serve");
    let old_path = format!("{root}/endpoint.ron");
    let target = scratch("refit-endpoint").join("endpoint.ron");
    experiments::run_cli([
        "exp",
        "calibrate",
        "--refit",
        &old_path,
        "--out",
        target.to_str().unwrap(),
    ])
    .unwrap_or_else(|e| panic!("refit: {e:#}"));
    let old = CostProfile::load(Path::new(&old_path)).unwrap();
    let new = CostProfile::load(&target).unwrap();
    assert_eq!(new.provenance.device, old.provenance.device);
    assert_eq!(new.provenance.samples, 67);
    assert!(new.chunk_s_per_kv_token.is_some());
    let (before, after) = (warm_ms(&old), warm_ms(&new));
    assert!(before / WARM_MS > 1.12, "{before:.3} ms");
    assert!(after / WARM_MS < 1.10, "{after:.3} ms");
    // A cold 3,232-token prompt's two chunks stay where they were.
    let cold = |p: &CostProfile| {
        let chunk = |new: u32, ctx: u32| BatchShape {
            seqs: vec![SeqShape {
                new_tokens: new,
                context_before: ctx,
                samples: ctx > 0,
            }],
        };
        p.step_seconds(&chunk(2048, 0)) + p.step_seconds(&chunk(1184, 2048))
    };
    assert!((cold(&new) / cold(&old) - 1.0).abs() < 0.01);
}
