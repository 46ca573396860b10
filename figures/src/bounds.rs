//! Axis ranges computed from the drawable points.
//!
//! A point is drawable when both coordinates are finite and, on a log x axis,
//! x > 0. Ranges cover every drawable point (and every drawable `x_ticks`
//! position) with a margin, and are never empty or inverted.

use std::ops::Range;

use crate::{Chart, Series};

/// Fraction of the data span added on each side.
const MARGIN: f64 = 0.05;

pub(crate) fn is_drawable(point: (f64, f64), log_x: bool) -> bool {
    point.0.is_finite() && point.1.is_finite() && (!log_x || point.0 > 0.0)
}

pub(crate) fn drawable_points(series: &Series, log_x: bool) -> Vec<(f64, f64)> {
    series
        .points
        .iter()
        .copied()
        .filter(|&p| is_drawable(p, log_x))
        .collect()
}

fn tick_positions(chart: &Chart) -> impl Iterator<Item = f64> + '_ {
    chart
        .x_ticks
        .iter()
        .flatten()
        .map(|(x, _)| *x)
        .filter(|x| x.is_finite() && (!chart.log_x || *x > 0.0))
}

fn all_points(chart: &Chart) -> impl Iterator<Item = (f64, f64)> + '_ {
    chart
        .series
        .iter()
        .flat_map(|s| s.points.iter().copied())
        .filter(|&p| is_drawable(p, chart.log_x))
}

fn min_max(values: impl Iterator<Item = f64>) -> Option<(f64, f64)> {
    values.fold(None, |acc, v| match acc {
        None => Some((v, v)),
        Some((lo, hi)) => Some((lo.min(v), hi.max(v))),
    })
}

/// Pads `[lo, hi]` by the margin; a zero-width span is widened around its
/// value so a single point sits in the middle of the axis.
fn pad_linear(lo: f64, hi: f64) -> Range<f64> {
    let span = hi - lo;
    if span > 0.0 {
        let pad = span * MARGIN;
        return (lo - pad)..(hi + pad);
    }
    let half = if lo == 0.0 { 1.0 } else { lo.abs() * 0.1 };
    (lo - half)..(hi + half)
}

pub(crate) fn x_range(chart: &Chart) -> Range<f64> {
    let xs = all_points(chart).map(|p| p.0).chain(tick_positions(chart));
    match (min_max(xs), chart.log_x) {
        (None, false) => 0.0..1.0,
        (None, true) => 1.0..10.0,
        (Some((lo, hi)), false) => pad_linear(lo, hi),
        (Some((lo, hi)), true) => {
            let (llo, lhi) = (lo.log10(), hi.log10());
            let span = lhi - llo;
            // Half a decade around a single value; otherwise the usual margin
            // measured in decades.
            let pad = if span > 0.0 { span * MARGIN } else { 0.5 };
            10f64.powf(llo - pad)..10f64.powf(lhi + pad)
        }
    }
}

pub(crate) fn y_range(chart: &Chart) -> Range<f64> {
    match min_max(all_points(chart).map(|p| p.1)) {
        None => 0.0..1.0,
        Some((lo, hi)) => {
            let padded = pad_linear(lo, hi);
            // Times and rates are non-negative; the margin should not invent a
            // negative region below them.
            if lo >= 0.0 && padded.start < 0.0 {
                0.0..padded.end
            } else {
                padded
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Source;

    fn chart(points: Vec<(f64, f64)>, log_x: bool) -> Chart {
        Chart {
            title: "t".into(),
            x_label: "x".into(),
            y_label: "y".into(),
            series: vec![Series {
                label: "a".into(),
                source: Source::Real,
                points,
            }],
            x_ticks: None,
            log_x,
        }
    }

    fn assert_valid(r: &Range<f64>) {
        assert!(r.start.is_finite() && r.end.is_finite(), "{r:?}");
        assert!(r.start < r.end, "{r:?}");
    }

    #[test]
    fn ranges_cover_data_with_margin() {
        let c = chart(vec![(1.0, 10.0), (3.0, 30.0)], false);
        let (x, y) = (x_range(&c), y_range(&c));
        assert!(x.start < 1.0 && x.end > 3.0, "{x:?}");
        assert!(y.start < 10.0 && y.end > 30.0, "{y:?}");
    }

    #[test]
    fn non_finite_points_are_ignored() {
        let c = chart(
            vec![
                (1.0, 2.0),
                (f64::NAN, 5.0),
                (2.0, f64::INFINITY),
                (3.0, 4.0),
            ],
            false,
        );
        let (x, y) = (x_range(&c), y_range(&c));
        assert_valid(&x);
        assert_valid(&y);
        assert!(y.end < 5.0, "{y:?}");
    }

    #[test]
    fn single_point_and_equal_values_give_valid_ranges() {
        for c in [
            chart(vec![(4.0, 7.0)], false),
            chart(vec![(0.0, 0.0)], false),
            chart(vec![(1.0, 3.0), (2.0, 3.0)], false),
            chart(vec![(100.0, -2.0)], true),
        ] {
            let (x, y) = (x_range(&c), y_range(&c));
            assert_valid(&x);
            assert_valid(&y);
            let p = c.series[0].points[0];
            assert!(x.contains(&p.0) && y.contains(&p.1), "{p:?} {x:?} {y:?}");
        }
    }

    #[test]
    fn empty_chart_has_default_ranges() {
        let c = chart(vec![], false);
        assert_valid(&x_range(&c));
        assert_valid(&y_range(&c));
        let log = chart(vec![(f64::NAN, 1.0)], true);
        assert!(x_range(&log).start > 0.0);
    }

    #[test]
    fn log_axis_skips_non_positive_x_and_stays_positive() {
        let c = chart(
            vec![(0.0, 1.0), (-3.0, 1.0), (10.0, 1.0), (1000.0, 2.0)],
            true,
        );
        let x = x_range(&c);
        assert!(x.start > 1.0 && x.start < 10.0, "{x:?}");
        assert!(x.end > 1000.0, "{x:?}");
    }

    #[test]
    fn non_negative_data_keeps_y_at_or_above_zero() {
        let c = chart(vec![(0.0, 0.0), (1.0, 100.0)], false);
        assert_eq!(y_range(&c).start, 0.0);
    }

    #[test]
    fn tick_positions_extend_the_x_range() {
        let mut c = chart(vec![(256.0, 1.0), (512.0, 2.0)], false);
        c.x_ticks = Some(vec![(0.0, "off".into()), (256.0, "256".into())]);
        assert!(x_range(&c).start < 0.0);
    }
}
