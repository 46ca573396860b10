use super::*;

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
