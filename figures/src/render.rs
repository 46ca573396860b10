//! Draws a [`Chart`] onto any plotters backend, so the PNG and the SVG come
//! from one code path.

use std::ops::Range;

use plotters::coord::ranged1d::{DefaultFormatting, KeyPointHint, Ranged, ValueFormatter};
use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::element::DashedPathElement;
use plotters::prelude::*;

use crate::bounds;
use crate::font::FAMILY;
use crate::legend::{self, BoxFraction, Corner};
use crate::style::{format_tick, series_colours, tick_label};
use crate::{Chart, Source};

type DrawResult<DB> = Result<(), DrawingAreaErrorKind<<DB as DrawingBackend>::ErrorType>>;

const TITLE_SIZE: u32 = 36;
const AXIS_DESC_SIZE: u32 = 26;
const TICK_SIZE: u32 = 21;
const LEGEND_SIZE: u32 = 21;
const LINE_WIDTH: u32 = 2;
const MARKER_SIZE: u32 = 4;
const MARGIN: u32 = 24;
const X_LABEL_AREA: u32 = 70;
const Y_LABEL_AREA: u32 = 100;
/// Padding inside the legend box and its distance from the plot edges.
const LEGEND_MARGIN: u32 = 12;
/// Width of the line-and-marker sample in front of each legend entry, plus
/// the gap to its text (plotters' default legend area).
const LEGEND_SAMPLE_WIDTH: u32 = 40;
/// Dash and gap lengths (pixels) of simulated series.
const DASH: (u32, u32) = (10, 6);

pub(crate) fn render<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    chart: &Chart,
) -> DrawResult<DB> {
    root.fill(&WHITE)?;
    let x = bounds::x_range(chart);
    let placement = legend::place(
        chart,
        &x,
        bounds::y_range(chart),
        legend_fraction(root, chart),
    );
    let (y, corner) = (placement.y, placement.corner);
    let mut builder = ChartBuilder::on(root);
    builder
        .caption(&chart.title, (FAMILY, TITLE_SIZE))
        .margin(MARGIN)
        .x_label_area_size(X_LABEL_AREA)
        .y_label_area_size(Y_LABEL_AREA);
    // Each axis kind is a different coordinate type, hence one generic
    // `plot` instantiated four ways.
    let tick_positions = chart.x_ticks.as_ref().map(|ticks| {
        ticks
            .iter()
            .map(|(x, _)| *x)
            .filter(|v| x.contains(v) || *v == x.end)
            .collect()
    });
    match (chart.log_x, tick_positions) {
        (false, None) => plot(builder.build_cartesian_2d(x, y)?, chart, corner),
        (true, None) => plot(builder.build_cartesian_2d(x.log_scale(), y)?, chart, corner),
        (false, Some(ticks)) => {
            let axis = FixedTicks {
                inner: RangedCoordf64::from(x),
                ticks,
            };
            plot(builder.build_cartesian_2d(axis, y)?, chart, corner)
        }
        (true, Some(ticks)) => {
            let axis = FixedTicks {
                inner: LogCoord::from(x.log_scale()),
                ticks,
            };
            plot(builder.build_cartesian_2d(axis, y)?, chart, corner)
        }
    }
}

/// Estimated legend box size as fractions of the plotting area, from the
/// measured width of the longest entry.
fn legend_fraction<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    chart: &Chart,
) -> BoxFraction {
    let style = TextStyle::from((FAMILY, LEGEND_SIZE).into_font());
    let widest = chart
        .series
        .iter()
        .filter_map(|s| root.estimate_text_size(&legend_text(s), &style).ok())
        .map(|(w, _)| w)
        .max()
        .unwrap_or(0);
    let rows = chart.series.len() as u32;
    let width = widest + LEGEND_SAMPLE_WIDTH + 3 * LEGEND_MARGIN;
    let height = rows * (LEGEND_SIZE + LEGEND_SIZE / 4) + 3 * LEGEND_MARGIN;
    let (w, h) = root.dim_in_pixel();
    // The caption takes about its font size plus a gap above the plot.
    let plot_w = w.saturating_sub(2 * MARGIN + Y_LABEL_AREA).max(1);
    let plot_h = h
        .saturating_sub(2 * MARGIN + X_LABEL_AREA + TITLE_SIZE + 10)
        .max(1);
    BoxFraction {
        width: f64::from(width) / f64::from(plot_w),
        height: f64::from(height) / f64::from(plot_h),
    }
}

fn legend_text(series: &crate::Series) -> String {
    format!("{} ({})", series.label, series.source.legend_word())
}

fn plot<'a, DB, X>(
    mut ctx: ChartContext<'a, DB, Cartesian2d<X, RangedCoordf64>>,
    chart: &Chart,
    corner: Corner,
) -> DrawResult<DB>
where
    DB: DrawingBackend + 'a,
    X: Ranged<ValueType = f64> + ValueFormatter<f64>,
{
    let x_text = |v: &f64| match chart.x_ticks.as_deref().and_then(|t| tick_label(t, *v)) {
        Some(label) => label.to_string(),
        None => format_tick(*v),
    };
    let y_text = |v: &f64| format_tick(*v);
    ctx.configure_mesh()
        .x_desc(chart.x_label.as_str())
        .y_desc(chart.y_label.as_str())
        .x_label_formatter(&x_text)
        .y_label_formatter(&y_text)
        .label_style((FAMILY, TICK_SIZE))
        .axis_desc_style((FAMILY, AXIS_DESC_SIZE))
        .light_line_style(RGBColor(235, 235, 235))
        .bold_line_style(RGBColor(205, 205, 205))
        .draw()?;

    let colours = series_colours(chart);
    let mut any_labelled = false;
    for (series, colour) in chart.series.iter().zip(colours) {
        let points = bounds::drawable_points(series, chart.log_x);
        let line = colour.stroke_width(LINE_WIDTH);
        let legend = legend_text(series);
        any_labelled = true;
        match series.source {
            Source::Real => {
                ctx.draw_series(LineSeries::new(points.iter().copied(), line))?
                    .label(legend)
                    .legend(move |(lx, ly)| {
                        EmptyElement::at((lx, ly))
                            + PathElement::new(vec![(0, 0), (24, 0)], line)
                            + Circle::new((12, 0), MARKER_SIZE, colour.filled())
                    });
                ctx.draw_series(
                    points
                        .iter()
                        .map(|&p| Circle::new(p, MARKER_SIZE, colour.filled())),
                )?;
            }
            Source::Sim => {
                ctx.draw_series(DashedLineSeries::new(
                    points.iter().copied(),
                    DASH.0,
                    DASH.1,
                    line,
                ))?
                .label(legend)
                .legend(move |(lx, ly)| {
                    EmptyElement::at((lx, ly))
                        + DashedPathElement::new(
                            vec![(0, 0), (24, 0)],
                            DASH.0 / 2,
                            DASH.1 / 2,
                            line,
                        )
                        + TriangleMarker::new((12, 0), MARKER_SIZE + 1, line)
                });
                ctx.draw_series(
                    points
                        .iter()
                        .map(|&p| TriangleMarker::new(p, MARKER_SIZE + 1, line)),
                )?;
            }
        }
    }
    if any_labelled {
        let position = match corner {
            Corner::UpperLeft => SeriesLabelPosition::UpperLeft,
            Corner::UpperRight => SeriesLabelPosition::UpperRight,
            Corner::LowerLeft => SeriesLabelPosition::LowerLeft,
            Corner::LowerRight => SeriesLabelPosition::LowerRight,
        };
        ctx.configure_series_labels()
            .position(position)
            .background_style(WHITE.mix(0.85))
            .border_style(RGBColor(160, 160, 160))
            .label_font((FAMILY, LEGEND_SIZE))
            .margin(12)
            .draw()?;
    }
    Ok(())
}

/// An axis whose ticks sit exactly at caller-given positions. plotters'
/// own `WithKeyPoints` drops the value formatter of the axis it wraps, which
/// the mesh needs even though our label formatter replaces its output.
struct FixedTicks<R> {
    inner: R,
    ticks: Vec<f64>,
}

impl<R: Ranged<ValueType = f64>> Ranged for FixedTicks<R> {
    type FormatOption = DefaultFormatting;
    type ValueType = f64;

    fn map(&self, value: &f64, limit: (i32, i32)) -> i32 {
        self.inner.map(value, limit)
    }

    fn key_points<Hint: KeyPointHint>(&self, hint: Hint) -> Vec<f64> {
        // Categorical ticks get no light grid lines between them.
        if hint.weight().allow_light_points() {
            Vec::new()
        } else {
            self.ticks.clone()
        }
    }

    fn range(&self) -> Range<f64> {
        self.inner.range()
    }

    fn axis_pixel_range(&self, limit: (i32, i32)) -> Range<i32> {
        self.inner.axis_pixel_range(limit)
    }
}
