//! Summary statistics, one method everywhere.
//!
//! Contract: percentiles are the project's single method,
//! `sim::records::percentile` (linear interpolation between closest ranks,
//! Hyndman–Fan type 7, NumPy's default); the median is the 50th percentile.
//! NaN values (a metric a batch does not have) are left out here before
//! ranking; empty input gives `None`.

fn finite(values: &[f64]) -> Vec<f64> {
    values.iter().copied().filter(|x| !x.is_nan()).collect()
}

/// The `p`-th percentile (0..=100) of the non-NaN `values`.
pub fn percentile(values: &[f64], p: f64) -> Option<f64> {
    sim::records::percentile(&finite(values), p)
}

pub fn median(values: &[f64]) -> Option<f64> {
    percentile(values, 50.0)
}

/// Spread across batches: (max − min) / median, in percent.
pub fn spread_pct(values: &[f64]) -> Option<f64> {
    let values = finite(values);
    let med = median(&values)?;
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
