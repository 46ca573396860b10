//! Summary statistics, one method everywhere.
//!
//! Contract: percentiles are the project's single method,
//! `sim::records::percentile` (linear interpolation between closest ranks,
//! Hyndman–Fan type 7, NumPy's default; its docs say why it is not statrs');
//! medians, minima and maxima are statrs'. NaN values (a metric a batch does
//! not have) are left out here before ranking; empty input gives `None`.
//! Exponential gaps are statrs' `Exp` by inversion of a uniform draw, so
//! that one uniform draw makes one gap whatever the rate.

use statrs::distribution::{ContinuousCDF, Exp};
use statrs::statistics::Statistics;

fn without_nan(values: &[f64]) -> Vec<f64> {
    values.iter().copied().filter(|x| !x.is_nan()).collect()
}

/// The `p`-th percentile (0..=100) of the non-NaN `values`.
pub fn percentile(values: &[f64], p: f64) -> Option<f64> {
    sim::records::percentile(&without_nan(values), p)
}

/// The median of the non-NaN `values`.
pub fn median(values: &[f64]) -> Option<f64> {
    sim::records::median(values)
}

/// Spread across batches: (max − min) / median, in percent.
pub fn spread_pct(values: &[f64]) -> Option<f64> {
    let values = without_nan(values);
    let med = median(&values)?;
    if med == 0.0 {
        return Some(0.0);
    }
    Some((Statistics::max(&values) - Statistics::min(&values)) / med * 100.0)
}

/// A gap of the exponential distribution of mean 1 (a Poisson process at
/// one event per second) for `u` uniform in [0, 1): statrs' inverse CDF,
/// `-ln(1 - u)`. Divide by a rate for that rate.
pub fn unit_exponential(u: f64) -> f64 {
    // Rate 1 is valid (finite and positive): `new` cannot fail here.
    Exp::new(1.0).map_or(f64::NAN, |e| e.inverse_cdf(u))
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
    fn unit_exponential_inverts_the_cdf() {
        assert_eq!(unit_exponential(0.0), 0.0);
        assert!((unit_exponential(0.5) - std::f64::consts::LN_2).abs() < 1e-15);
        assert!((unit_exponential(1.0 - (-3.0f64).exp()) - 3.0).abs() < 1e-12);
        assert!(unit_exponential(0.999_999).is_finite());
    }

    #[test]
    fn spread_is_range_over_median() {
        assert_eq!(spread_pct(&[90.0, 100.0, 110.0]), Some(20.0));
        assert_eq!(spread_pct(&[7.0]), Some(0.0));
        assert_eq!(spread_pct(&[f64::NAN, 90.0, 110.0, 100.0]), Some(20.0));
        assert_eq!(spread_pct(&[f64::NAN]), None);
    }
}
