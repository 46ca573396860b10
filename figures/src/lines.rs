//! Line series, point markers and reference lines, drawn into a chart's
//! coordinates.
//!
//! Contract: real series are solid lines with filled markers, sim series
//! dashed with hollow (white-filled) markers; `wide` series go first, three
//! times as thick and with larger markers, so later series on the same
//! points sit visibly on top.
//! Reference lines span the whole x range, long-dashed in dark grey.

use std::ops::Range;

use plotters::coord::ranged1d::{Ranged, ValueFormatter};
use plotters::element::ComposedElement;
use plotters::prelude::*;

use crate::bounds;
use crate::style::{series_styles, Marker};
use crate::{Chart, Source};

pub(crate) type DrawResult<DB> =
    Result<(), DrawingAreaErrorKind<<DB as DrawingBackend>::ErrorType>>;

pub(crate) const LINE_WIDTH: u32 = 2;
/// Marker half-size in pixels.
pub(crate) const MARKER_SIZE: i32 = 5;
/// Marker half-size of a wide series.
pub(crate) const WIDE_MARKER_SIZE: i32 = 9;
/// Dash and gap lengths (pixels) of simulated series.
pub(crate) const DASH: (u32, u32) = (10, 6);
/// Dash and gap lengths of reference lines, by their order in the chart:
/// longer than a sim series' dashes, and each unlike the others so that two
/// references can be told apart in the legend.
pub(crate) const REFERENCE_DASHES: [(u32, u32); 3] = [(22, 8), (4, 6), (22, 6)];

/// The dash and gap of the `index`-th reference line.
pub(crate) fn reference_dash(index: usize) -> (u32, u32) {
    REFERENCE_DASHES[index % REFERENCE_DASHES.len()]
}
pub(crate) const REFERENCE_COLOUR: RGBColor = RGBColor(60, 60, 60);

/// Line width of a series.
pub(crate) fn width(wide: bool) -> u32 {
    if wide {
        3 * LINE_WIDTH
    } else {
        LINE_WIDTH
    }
}

/// A point marker: a filled polygon and its outline, at a data position.
pub(crate) type MarkerElement<C, DB> =
    ComposedElement<C, DB, Polygon<(i32, i32)>, PathElement<(i32, i32)>>;

/// A marker of `shape` centred on `at`; filled, or white inside with a
/// coloured outline; larger for a wide series, so that a marker drawn on
/// top of it at the same point leaves a rim of it visible. Every shape is a polygon (a circle has
/// [`CIRCLE_SIDES`] sides), so all markers share one element type and need
/// no boxing, which would tie the backend to `'static`.
pub(crate) fn marker<DB: DrawingBackend, C: Clone>(
    at: C,
    shape: Marker,
    colour: RGBColor,
    filled: bool,
    wide: bool,
) -> MarkerElement<C, DB> {
    let r = if wide { WIDE_MARKER_SIZE } else { MARKER_SIZE };
    let corners: Vec<(i32, i32)> = match shape {
        Marker::Circle => (0..CIRCLE_SIDES)
            .map(|i| {
                let a = std::f64::consts::TAU * f64::from(i) / f64::from(CIRCLE_SIDES);
                let r = f64::from(r);
                ((r * a.cos()).round() as i32, (r * a.sin()).round() as i32)
            })
            .collect(),
        Marker::Square => vec![
            (-r + 1, -r + 1),
            (r - 1, -r + 1),
            (r - 1, r - 1),
            (-r + 1, r - 1),
        ],
        Marker::Triangle => vec![(0, -r - 1), (r + 1, r), (-r - 1, r)],
        Marker::InvertedTriangle => vec![(0, r + 1), (r + 1, -r), (-r - 1, -r)],
        Marker::Diamond => vec![(0, -r - 1), (r + 1, 0), (0, r + 1), (-r - 1, 0)],
    };
    let mut closed = corners.clone();
    closed.push(corners[0]);
    let fill = if filled { colour } else { WHITE };
    EmptyElement::at(at)
        + Polygon::new(corners, fill.filled())
        + PathElement::new(closed, colour.stroke_width(2))
}

/// A series with more drawable points than this is a plain line, without
/// point markers (a distribution or a time series, not a sweep).
pub const MAX_MARKED_POINTS: usize = 60;

/// Sides of the polygon drawn for a circle marker.
pub(crate) const CIRCLE_SIDES: u32 = 16;

/// Draws every series of a line chart.
pub(crate) fn draw_series<'a, DB, X, Y>(
    ctx: &mut ChartContext<'a, DB, Cartesian2d<X, Y>>,
    chart: &Chart,
) -> DrawResult<DB>
where
    DB: DrawingBackend + 'a,
    X: Ranged<ValueType = f64> + ValueFormatter<f64>,
    Y: Ranged<ValueType = f64> + ValueFormatter<f64>,
{
    let styles = series_styles(chart);
    // Wide series first, so that they lie under the others.
    let mut order: Vec<usize> = (0..chart.series.len()).collect();
    order.sort_by_key(|&i| !chart.series[i].wide);
    for i in order {
        let series = &chart.series[i];
        let style = styles[i];
        let colour = style.rgb();
        let points = bounds::drawable_points(series, chart);
        let line = colour.stroke_width(width(series.wide));
        let filled = series.source == Source::Real;
        match series.source {
            Source::Real => {
                ctx.draw_series(LineSeries::new(points.iter().copied(), line))?;
            }
            Source::Sim => {
                ctx.draw_series(DashedLineSeries::new(
                    points.iter().copied(),
                    DASH.0,
                    DASH.1,
                    line,
                ))?;
            }
        }
        // Markers on hundreds of points would merge into a thick smear.
        if points.len() <= MAX_MARKED_POINTS {
            ctx.draw_series(
                points.iter().map(|&p| {
                    marker::<DB, (f64, f64)>(p, style.marker, colour, filled, series.wide)
                }),
            )?;
        }
    }
    Ok(())
}

/// Draws the reference lines across `x`.
pub(crate) fn draw_references<'a, DB, X, Y>(
    ctx: &mut ChartContext<'a, DB, Cartesian2d<X, Y>>,
    chart: &Chart,
    x: &Range<f64>,
) -> DrawResult<DB>
where
    DB: DrawingBackend + 'a,
    X: Ranged<ValueType = f64> + ValueFormatter<f64>,
    Y: Ranged<ValueType = f64> + ValueFormatter<f64>,
{
    let log_y = bounds::log_y(chart);
    for (i, r) in chart.references.iter().enumerate() {
        if !r.y.is_finite() || (log_y && r.y <= 0.0) {
            continue;
        }
        let (dash, gap) = reference_dash(i);
        ctx.draw_series(DashedLineSeries::new(
            [(x.start, r.y), (x.end, r.y)],
            dash,
            gap,
            REFERENCE_COLOUR.stroke_width(LINE_WIDTH),
        ))?;
    }
    Ok(())
}
