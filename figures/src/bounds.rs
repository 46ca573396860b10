//! Axis ranges computed from the drawable points.
//!
//! A point is drawable when both coordinates are finite and, on a log axis,
//! that coordinate is > 0. Ranges cover every drawable point, every
//! reference line and every drawable `x_ticks` position with a margin, and
//! are never empty or inverted. Bar charts span their categories with half a
//! slot either side and, on a linear y axis, start at zero.

use std::ops::Range;

use crate::{Chart, Kind, Series, YScale, AUTO_LOG_RATIO};

/// Fraction of the data span added on each side.
const MARGIN: f64 = 0.05;

fn finite(point: (f64, f64), log_x: bool) -> bool {
    point.0.is_finite() && point.1.is_finite() && (!log_x || point.0 > 0.0)
}

/// Whether the chart's x axis is logarithmic (bars never are).
pub(crate) fn log_x(chart: &Chart) -> bool {
    chart.log_x && chart.kind == Kind::Lines
}

/// Whether the y axis is logarithmic; see the crate docs for `Auto`.
pub(crate) fn log_y(chart: &Chart) -> bool {
    match chart.y_scale {
        YScale::Linear => false,
        YScale::Log => true,
        YScale::Auto => {
            let lx = log_x(chart);
            let ys: Vec<f64> = chart
                .series
                .iter()
                .flat_map(|s| s.points.iter().copied())
                .filter(|&p| finite(p, lx))
                .map(|p| p.1)
                .chain(reference_values(chart))
                .collect();
            match min_max(ys.iter().copied()) {
                Some((lo, hi)) => lo > 0.0 && hi / lo > AUTO_LOG_RATIO,
                None => false,
            }
        }
    }
}

pub(crate) fn is_drawable(point: (f64, f64), log_x: bool, log_y: bool) -> bool {
    finite(point, log_x) && (!log_y || point.1 > 0.0)
}

pub(crate) fn drawable_points(series: &Series, chart: &Chart) -> Vec<(f64, f64)> {
    let (lx, ly) = (log_x(chart), log_y(chart));
    series
        .points
        .iter()
        .copied()
        .filter(|&p| is_drawable(p, lx, ly))
        .collect()
}

fn reference_values(chart: &Chart) -> impl Iterator<Item = f64> + '_ {
    chart
        .references
        .iter()
        .map(|r| r.y)
        .filter(|y| y.is_finite())
}

fn tick_positions(chart: &Chart) -> impl Iterator<Item = f64> + '_ {
    let lx = log_x(chart);
    chart
        .x_ticks
        .iter()
        .flatten()
        .map(|(x, _)| *x)
        .filter(move |x| x.is_finite() && (!lx || *x > 0.0))
}

fn all_points(chart: &Chart) -> Vec<(f64, f64)> {
    let (lx, ly) = (log_x(chart), log_y(chart));
    chart
        .series
        .iter()
        .flat_map(|s| s.points.iter().copied())
        .filter(|&p| is_drawable(p, lx, ly))
        .collect()
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

/// Pads `[lo, hi]` (both > 0) by the margin measured in decades; half a
/// decade around a single value.
fn pad_log(lo: f64, hi: f64) -> Range<f64> {
    let (llo, lhi) = (lo.log10(), hi.log10());
    let span = lhi - llo;
    let pad = if span > 0.0 { span * MARGIN } else { 0.5 };
    10f64.powf(llo - pad)..10f64.powf(lhi + pad)
}

pub(crate) fn x_range(chart: &Chart) -> Range<f64> {
    if chart.kind == Kind::Bars {
        let (lo, hi) = min_max(tick_positions(chart)).unwrap_or((0.0, 0.0));
        return (lo - 0.5)..(hi + 0.5);
    }
    let xs = all_points(chart)
        .into_iter()
        .map(|p| p.0)
        .chain(tick_positions(chart))
        .collect::<Vec<_>>();
    match (min_max(xs.into_iter()), log_x(chart)) {
        (None, false) => 0.0..1.0,
        (None, true) => 1.0..10.0,
        (Some((lo, hi)), false) => pad_linear(lo, hi),
        (Some((lo, hi)), true) => pad_log(lo, hi),
    }
}

pub(crate) fn y_range(chart: &Chart) -> Range<f64> {
    let log = log_y(chart);
    let bars = chart.kind == Kind::Bars;
    let ys = all_points(chart)
        .into_iter()
        .map(|p| p.1)
        .chain(reference_values(chart).filter(|y| !log || *y > 0.0))
        // Bars grow from zero, so zero belongs on a linear axis.
        .chain((bars && !log).then_some(0.0))
        .collect::<Vec<_>>();
    match (min_max(ys.into_iter()), log) {
        (None, false) => 0.0..1.0,
        (None, true) => 1.0..10.0,
        (Some((lo, hi)), true) => pad_log(lo, hi),
        (Some((lo, hi)), false) => {
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

/// Position of `v` along `range` as a fraction (0 at the start, 1 at the end).
pub(crate) fn unit(v: f64, range: &Range<f64>, log: bool) -> f64 {
    if log {
        (v.log10() - range.start.log10()) / (range.end.log10() - range.start.log10())
    } else {
        (v - range.start) / (range.end - range.start)
    }
}

/// The end of `range` moved so that its old span fills only `keep` of it.
pub(crate) fn stretch_end(range: &Range<f64>, keep: f64, log: bool) -> Range<f64> {
    if log {
        let (lo, hi) = (range.start.log10(), range.end.log10());
        range.start..10f64.powf(lo + (hi - lo) / keep)
    } else {
        range.start..range.start + (range.end - range.start) / keep
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Reference, Source};

    fn chart(points: Vec<(f64, f64)>, log_x: bool) -> Chart {
        Chart {
            series: vec![Series::new("a", Source::Real, points)],
            log_x,
            ..Chart::default()
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

    #[test]
    fn log_y_auto_rule_follows_the_ratio_and_needs_positive_values() {
        let wide = chart(vec![(1.0, 10.0), (2.0, 52_000.0)], false);
        assert!(!log_y(&wide), "linear unless asked");
        let auto = |c: Chart| Chart {
            y_scale: YScale::Auto,
            ..c
        };
        assert!(log_y(&auto(wide.clone())));
        assert!(!log_y(&auto(chart(vec![(1.0, 10.0), (2.0, 250.0)], false))));
        assert!(!log_y(&auto(chart(vec![(1.0, 0.0), (2.0, 5e4)], false))));
        let forced = Chart {
            y_scale: YScale::Log,
            ..chart(vec![(1.0, 0.0), (2.0, 5.0), (3.0, 500.0)], false)
        };
        assert!(log_y(&forced));
        let y = y_range(&forced);
        assert!(y.start > 0.0 && y.start < 5.0 && y.end > 500.0, "{y:?}");
    }

    #[test]
    fn references_and_bars_shape_the_ranges() {
        let mut c = chart(vec![(0.0, 10.0), (1.0, 20.0)], false);
        c.references.push(Reference {
            label: "SLO target".into(),
            y: 100.0,
        });
        assert!(y_range(&c).end > 100.0);
        c.kind = Kind::Bars;
        c.x_ticks = Some(vec![(0.0, "a".into()), (1.0, "b".into())]);
        assert_eq!(x_range(&c), -0.5..1.5);
        assert_eq!(y_range(&c).start, 0.0);
    }
}
