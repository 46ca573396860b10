//! The one percentile method of the project.
//!
//! Linear interpolation between closest ranks, as numpy's default
//! (`method="linear"`, Hyndman & Fan type 7): for `n` sorted values the `p`-th
//! percentile sits at rank `h = p / 100 * (n - 1)` and is
//! `x[floor(h)] + (h - floor(h)) * (x[floor(h) + 1] - x[floor(h)])`. So the
//! median of an even count is the mean of the middle two, p0 is the minimum
//! and p100 the maximum. NaN values sort last (`f64::total_cmp`).

/// The `p`-th percentile (`0 <= p <= 100`, clamped) of `values`; `None` if empty.
pub fn percentile(values: &[f64], p: f64) -> Option<f64> {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    percentile_sorted(&sorted, p)
}

/// [`percentile`] of values already sorted ascending (no copy).
pub fn percentile_sorted(sorted: &[f64], p: f64) -> Option<f64> {
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

/// The 50th percentile.
pub fn median(values: &[f64]) -> Option<f64> {
    percentile(values, 50.0)
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
        assert_eq!(median(&v), Some(2.5));
        assert!((percentile(&v, 90.0).unwrap() - 3.7).abs() < 1e-12);
        assert_eq!(percentile(&v, 100.0), Some(4.0));
        assert_eq!(median(&[7.0, 1.0, 3.0]), Some(3.0));
    }

    #[test]
    fn empty_is_none_and_out_of_range_p_is_clamped() {
        assert_eq!(median(&[]), None);
        assert_eq!(percentile(&[5.0], 99.0), Some(5.0));
        assert_eq!(percentile(&[1.0, 2.0], 150.0), Some(2.0));
        assert_eq!(percentile(&[1.0, 2.0], -3.0), Some(1.0));
    }
}
