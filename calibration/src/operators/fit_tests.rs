use super::*;

#[test]
fn the_tails_cost_per_key_is_recovered_from_decode_mixes_and_kept_without_them() {
    use engine::{BatchShape, SeqShape};
    let gpu = crate::datasheet::lookup("h200-sxm").expect("h200 in the table");
    let shape = sim::ModelShape::qwen3_0_6b();
    let truth = OperatorParams {
        decode_lone_key_cost: 31e-9,
        ..OperatorParams::initial()
    };
    let points: Vec<FamilyPoint> = [
        &[2048u32, 300, 300, 300, 300][..],
        &[2048, 1000, 300],
        &[1500, 900, 600, 400, 300],
    ]
    .iter()
    .map(|ctx| {
        let step = BatchShape {
            seqs: ctx
                .iter()
                .map(|&c| SeqShape {
                    new_tokens: 1,
                    context_before: c,
                    samples: true,
                })
                .collect(),
        };
        let mut p = FamilyPoint {
            model: "qwen3-0.6b".into(),
            shape: shape.clone(),
            gpu: gpu.clone(),
            kind: super::super::decode_mix::KIND.into(),
            batch: ctx.len(),
            tokens: 2048,
            step,
            measured_s: 0.0,
        };
        p.measured_s = predict_s(&truth, &p);
        p
    })
    .collect();
    let start = OperatorParams::initial();
    let refs: Vec<&FamilyPoint> = points.iter().collect();
    let fitted = fit_lone_key_cost(&start, &refs);
    assert!((fitted / 31e-9 - 1.0).abs() < 1e-3, "{fitted}");
    assert_eq!(fit_lone_key_cost(&start, &[]), start.decode_lone_key_cost);
}

#[test]
fn the_free_parameters_keep_flop_shares_below_the_peak_exponents_above_one_and_the_power_window_bounded(
) {
    // Any positive point of the optimiser is a physical parameter set.
    for x in [1e-6, 0.5, 1.0, 40.0, 1e9] {
        let p = from_free(&[x; OperatorParams::LEN]);
        let v = p.to_vec();
        for i in FLOPS_SHARES {
            assert!(v[i] > 0.0 && v[i] < 1.0, "share {i} = {} at x = {x}", v[i]);
        }
        for i in EXPONENTS {
            assert!(v[i] > 1.0, "exponent {i} = {} at x = {x}", v[i]);
        }
        assert!(p.power_window > 0.0 && p.power_window < POWER_WINDOW_MAX);
    }
    // And the starting point goes there and back unchanged.
    let p = OperatorParams::initial();
    let back = from_free(&to_free(&p)).to_vec();
    for (a, b) in p.to_vec().iter().zip(back) {
        assert!((a - b).abs() <= 1e-12 * a.abs(), "{a} {b}");
    }
}
