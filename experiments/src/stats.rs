//! Summary statistics, one method everywhere.
//!
//! Contract: percentiles interpolate linearly between the two closest ranks
//! (Hyndman–Fan type 7, NumPy's default): for sorted `x` of length `n`,
//! `p` maps to rank `p/100 * (n-1)`. The median is the 50th percentile.
//! Empty input gives `None`; NaN values are ignored.

/// The `p`-th percentile (0..=100) of `values`.
pub fn percentile(values: &[f64], p: f64) -> Option<f64> {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| !x.is_nan()).collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let rank = (p.clamp(0.0, 100.0) / 100.0) * (v.len() - 1) as f64;
    let lo = rank.floor() as usize;
    let hi = rank.ceil() as usize;
    Some(v[lo] + (v[hi] - v[lo]) * (rank - lo as f64))
}

pub fn median(values: &[f64]) -> Option<f64> {
    percentile(values, 50.0)
}

/// Spread across batches: (max − min) / median, in percent.
pub fn spread_pct(values: &[f64]) -> Option<f64> {
    let med = median(values)?;
    let max = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let min = values.iter().copied().fold(f64::INFINITY, f64::min);
    if med == 0.0 {
        return Some(0.0);
    }
    Some((max - min) / med * 100.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentile_interpolates_between_ranks() {
        let x = [4.0, 1.0, 3.0, 2.0];
        assert_eq!(median(&x), Some(2.5));
        assert_eq!(percentile(&x, 0.0), Some(1.0));
        assert_eq!(percentile(&x, 100.0), Some(4.0));
        assert!((percentile(&x, 99.0).unwrap() - 3.97).abs() < 1e-12);
        assert_eq!(median(&[]), None);
        assert_eq!(median(&[f64::NAN, 5.0]), Some(5.0));
    }

    #[test]
    fn spread_is_range_over_median() {
        assert_eq!(spread_pct(&[90.0, 100.0, 110.0]), Some(20.0));
        assert_eq!(spread_pct(&[7.0]), Some(0.0));
    }
}
