//! The one percentile method of the project, and the median.
//!
//! [`percentile`] is linear interpolation between closest ranks, as numpy's
//! default (`method="linear"`, Hyndman & Fan type 7), which is what vLLM's
//! benchmark reports (`np.percentile`), so our figures compare with vLLM's:
//! for `n` sorted values the `p`-th percentile sits at rank
//! `h = p / 100 * (n - 1)` and is
//! `x[floor(h)] + (h - floor(h)) * (x[floor(h) + 1] - x[floor(h)])`. So p0
//! is the minimum and p100 the maximum. NaN values sort last
//! (`f64::total_cmp`).
//!
//! It is not statrs': statrs' `OrderStatistics::quantile` (and
//! `percentile`, which also takes only a whole-number percent) is Hyndman &
//! Fan type 8, the "approximately median-unbiased" estimator, rank
//! `h = (n + 1/3) p + 1/3` (1-based). The two agree on the median, p0 and
//! p100 but nowhere else in general: for `[1, 2, 3, 4]` numpy's p25 is
//! 1.75, statrs' 1.4167; its p99 is 3.97, statrs' 4.0.
//!
//! [`median`] is statrs' (the mean of the two middle values of an even
//! count, which type 7 gives too).

use statrs::statistics::{Data, OrderStatistics};

/// The `p`-th percentile (`0 <= p <= 100`, clamped; NaN means 50) of
/// `values`; `None` if empty.
pub fn percentile(values: &[f64], p: f64) -> Option<f64> {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let n = sorted.len();
    if n == 0 {
        return None;
    }
    let p = if p.is_nan() {
        50.0
    } else {
        p.clamp(0.0, 100.0)
    };
    let h = p / 100.0 * (n - 1) as f64;
    let lo = h.floor() as usize;
    let hi = (lo + 1).min(n - 1);
    let frac = h - lo as f64;
    Some(sorted[lo] + frac * (sorted[hi] - sorted[lo]))
}

/// The median of the non-NaN `values` (statrs); `None` if there are none.
pub fn median(values: &[f64]) -> Option<f64> {
    let kept: Vec<f64> = values.iter().copied().filter(|x| !x.is_nan()).collect();
    (!kept.is_empty()).then(|| Data::new(kept).median())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_numpy_linear_interpolation() {
        // numpy.percentile([1, 2, 3, 4], [0, 25, 50, 90, 100]) = [1, 1.75, 2.5, 3.7, 4]
        let v = [4.0, 1.0, 3.0, 2.0];
        assert_eq!(percentile(&v, 0.0), Some(1.0));
        assert_eq!(percentile(&v, 25.0), Some(1.75));
        assert_eq!(percentile(&v, 50.0), Some(2.5));
        assert!((percentile(&v, 90.0).unwrap() - 3.7).abs() < 1e-12);
        assert!((percentile(&v, 99.0).unwrap() - 3.97).abs() < 1e-12);
        assert_eq!(percentile(&v, 100.0), Some(4.0));
        assert_eq!(median(&v), Some(2.5));
        assert_eq!(median(&[7.0, 1.0, 3.0]), Some(3.0));
    }

    /// Why the percentile is not statrs': its quantile is another estimator.
    #[test]
    fn statrs_quantile_is_type_8_not_numpys() {
        let mut v = Data::new(vec![4.0, 1.0, 3.0, 2.0]);
        let p25 = v.quantile(0.25);
        assert!((p25 - 17.0 / 12.0).abs() < 1e-12, "{p25}");
        assert_ne!(Some(p25), percentile(&[4.0, 1.0, 3.0, 2.0], 25.0));
        assert_eq!(v.percentile(99), 4.0);
        assert_eq!(v.median(), 2.5);
    }

    #[test]
    fn empty_is_none_and_out_of_range_p_is_clamped() {
        assert_eq!(median(&[]), None);
        assert_eq!(median(&[f64::NAN]), None);
        assert_eq!(median(&[f64::NAN, 5.0, 1.0]), Some(3.0));
        assert_eq!(percentile(&[], 50.0), None);
        assert_eq!(percentile(&[5.0], 99.0), Some(5.0));
        assert_eq!(percentile(&[1.0, 2.0], 150.0), Some(2.0));
        assert_eq!(percentile(&[1.0, 2.0], -3.0), Some(1.0));
        assert_eq!(percentile(&[1.0, 3.0], f64::NAN), Some(2.0));
    }
}
