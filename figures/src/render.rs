//! Draws a [`Chart`] onto any plotters backend, so the PNG and the SVG come
//! from one code path: the header (title and subtitle), the axes, the data,
//! the category labels under the x axis, and the legend.

use std::ops::Range;

use plotters::coord::ranged1d::{DefaultFormatting, KeyPointHint, Ranged, ValueFormatter};
use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::font::FAMILY;
use crate::key::{self, Entry};
use crate::legend::{self, BoxFraction, Corner};
use crate::lines::{self, DrawResult};
use crate::style::{format_tick, log_ticks};
use crate::text::wrap;
use crate::{bars, bounds, Chart, Kind};

const TITLE_SIZE: u32 = 32;
const SUBTITLE_SIZE: u32 = 19;
const SUBTITLE_COLOUR: RGBColor = RGBColor(85, 85, 85);
const AXIS_DESC_SIZE: u32 = 24;
const TICK_SIZE: u32 = 20;
const MARGIN: u32 = 24;
/// Height under the x axis for one line of tick labels and the axis title.
const X_LABEL_AREA: u32 = 70;
const Y_LABEL_AREA: u32 = 100;
/// Extra height per wrapped line of a category label.
const TICK_LINE: u32 = TICK_SIZE + 4;
/// Distance of the legend box from the plot edges.
const LEGEND_INSET: i32 = 12;
/// A legend larger than this share of the plot goes outside it.
const INSIDE_MAX: BoxFraction = BoxFraction {
    width: 0.55,
    height: 0.5,
};

pub(crate) fn render<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    chart: &Chart,
) -> DrawResult<DB> {
    root.fill(&WHITE)?;
    let header = draw_header(root, chart)?;
    let (_, body) = root.split_vertically(header);
    let entries = key::entries(chart);
    let (legend_w, legend_h) = key::box_size(root, &entries);
    let (body_w, body_h) = body.dim_in_pixel();
    let x = bounds::x_range(chart);
    let plot_w = body_w.saturating_sub(2 * MARGIN + Y_LABEL_AREA).max(1);
    let labels = category_labels(root, chart, &x, plot_w);
    let label_lines = labels
        .iter()
        .map(|(_, l)| l.len())
        .max()
        .unwrap_or(1)
        .max(1) as u32;
    let x_area = X_LABEL_AREA + (label_lines - 1) * TICK_LINE;
    let plot_h = body_h.saturating_sub(2 * MARGIN + x_area).max(1);
    let fraction = BoxFraction {
        width: f64::from(legend_w + 2 * LEGEND_INSET as u32) / f64::from(plot_w),
        height: f64::from(legend_h + 2 * LEGEND_INSET as u32) / f64::from(plot_h),
    };
    let outside = fraction.width > INSIDE_MAX.width || fraction.height > INSIDE_MAX.height;
    let (area, y, corner) = if outside {
        let (left, _) = body.split_horizontally(body_w.saturating_sub(legend_w + MARGIN));
        (left, bounds::y_range(chart), None)
    } else {
        let p = legend::place(chart, &x, bounds::y_range(chart), fraction);
        (body, p.y, Some(p.corner))
    };
    let mut builder = ChartBuilder::on(&area);
    builder
        .margin(MARGIN)
        .x_label_area_size(x_area)
        .y_label_area_size(Y_LABEL_AREA);
    let layout = Layout {
        chart,
        root,
        x: x.clone(),
        y: y.clone(),
        labels,
        entries,
        corner,
    };
    let log_y = bounds::log_y(chart);
    // Each axis kind is a different coordinate type, hence one generic
    // `plot` instantiated per combination.
    let ticks = chart.x_ticks.as_ref().map(|ticks| {
        ticks
            .iter()
            .map(|(t, _)| *t)
            .filter(|v| x.contains(v) || *v == x.end)
            .collect::<Vec<f64>>()
    });
    let x_log = bounds::log_x(chart);
    let x_ticks = match ticks {
        Some(t) => t,
        None if x_log => log_ticks(x.start, x.end),
        None => {
            let y_axis = y_axis(y, log_y);
            let ctx = builder.build_cartesian_2d(x.clone(), y_axis)?;
            return plot(ctx, &layout);
        }
    };
    let y_axis = y_axis(y, log_y);
    if x_log {
        let axis = FixedTicks {
            inner: LogCoord::from(x.log_scale()),
            ticks: x_ticks,
        };
        plot(builder.build_cartesian_2d(axis, y_axis)?, &layout)
    } else {
        let axis = FixedTicks {
            inner: RangedCoordf64::from(x),
            ticks: x_ticks,
        };
        plot(builder.build_cartesian_2d(axis, y_axis)?, &layout)
    }
}

/// The y axis: linear, or log with our own ticks (see [`log_ticks`]).
fn y_axis(y: Range<f64>, log: bool) -> YAxis {
    if log {
        YAxis::Log(FixedTicks {
            ticks: log_ticks(y.start, y.end),
            inner: LogCoord::from(y.log_scale()),
        })
    } else {
        YAxis::Linear(RangedCoordf64::from(y))
    }
}

/// Everything `plot` needs besides the coordinate system.
struct Layout<'c, 'r, DB: DrawingBackend> {
    chart: &'c Chart,
    root: &'r DrawingArea<DB, Shift>,
    x: Range<f64>,
    y: Range<f64>,
    /// Category positions and their wrapped lines.
    labels: Vec<(f64, Vec<String>)>,
    entries: Vec<Entry>,
    /// Legend inside the plot at this corner; `None`: to the right of it.
    corner: Option<Corner>,
}

/// Title and wrapped subtitle, centred; returns the height they take.
fn draw_header<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    chart: &Chart,
) -> Result<u32, DrawingAreaErrorKind<DB::ErrorType>> {
    let (w, _) = root.dim_in_pixel();
    let centre = (w / 2) as i32;
    let title =
        TextStyle::from((FAMILY, TITLE_SIZE).into_font()).pos(Pos::new(HPos::Center, VPos::Top));
    let mut y = (MARGIN / 2) as i32;
    root.draw(&Text::new(chart.title.as_str(), (centre, y), title))?;
    y += TITLE_SIZE as i32 + 8;
    let font = (FAMILY, SUBTITLE_SIZE).into_font();
    let measure = |s: &str| {
        root.estimate_text_size(s, &TextStyle::from(font.clone()))
            .map_or(u32::MAX, |(w, _)| w)
    };
    let lines = if chart.subtitle.trim().is_empty() {
        Vec::new()
    } else {
        wrap(&chart.subtitle, w.saturating_sub(2 * MARGIN), measure)
    };
    let style = TextStyle::from(font.clone())
        .color(&SUBTITLE_COLOUR)
        .pos(Pos::new(HPos::Center, VPos::Top));
    for line in &lines {
        root.draw(&Text::new(line.as_str(), (centre, y), style.clone()))?;
        y += SUBTITLE_SIZE as i32 + 5;
    }
    Ok(y as u32 + 4)
}

/// Each category tick with its label wrapped to the width of its slot
/// (the distance to the nearest neighbouring tick).
fn category_labels<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    chart: &Chart,
    x: &Range<f64>,
    plot_w: u32,
) -> Vec<(f64, Vec<String>)> {
    let Some(ticks) = &chart.x_ticks else {
        return Vec::new();
    };
    let log = bounds::log_x(chart);
    let pixel = |v: f64| bounds::unit(v, x, log) * f64::from(plot_w);
    let shown: Vec<&(f64, String)> = ticks
        .iter()
        .filter(|(v, _)| v.is_finite() && (!log || *v > 0.0) && (x.contains(v) || *v == x.end))
        .collect();
    let font = (FAMILY, TICK_SIZE).into_font();
    let measure = |s: &str| {
        root.estimate_text_size(s, &TextStyle::from(font.clone()))
            .map_or(u32::MAX, |(w, _)| w)
    };
    shown
        .iter()
        .map(|(v, label)| {
            let slot = shown
                .iter()
                .filter(|(o, _)| o != v)
                .map(|(o, _)| (pixel(*o) - pixel(*v)).abs())
                .fold(f64::from(plot_w), f64::min);
            let width = (slot * 0.95).max(1.0) as u32;
            (*v, wrap(label, width, measure))
        })
        .collect()
}

/// The y coordinate: one type for both scales, so `plot` is instantiated
/// once per x axis kind rather than per (x, y) pair.
enum YAxis {
    Linear(RangedCoordf64),
    Log(FixedTicks<LogCoord<f64>>),
}

impl Ranged for YAxis {
    type FormatOption = DefaultFormatting;
    type ValueType = f64;

    fn map(&self, value: &f64, limit: (i32, i32)) -> i32 {
        match self {
            YAxis::Linear(axis) => axis.map(value, limit),
            YAxis::Log(axis) => axis.map(value, limit),
        }
    }

    fn key_points<Hint: KeyPointHint>(&self, hint: Hint) -> Vec<f64> {
        match self {
            YAxis::Linear(axis) => axis.key_points(hint),
            YAxis::Log(axis) => axis.key_points(hint),
        }
    }

    fn range(&self) -> Range<f64> {
        match self {
            YAxis::Linear(axis) => axis.range(),
            YAxis::Log(axis) => axis.range(),
        }
    }

    fn axis_pixel_range(&self, limit: (i32, i32)) -> Range<i32> {
        match self {
            YAxis::Linear(axis) => axis.axis_pixel_range(limit),
            YAxis::Log(axis) => axis.axis_pixel_range(limit),
        }
    }
}

fn plot<'a, DB, X>(
    ctx: ChartContext<'a, DB, Cartesian2d<X, YAxis>>,
    layout: &Layout<'_, '_, DB>,
) -> DrawResult<DB>
where
    DB: DrawingBackend + 'a,
    X: Ranged<ValueType = f64> + ValueFormatter<f64>,
{
    draw_plot(ctx, layout)
}

fn draw_plot<'a, DB, X, Y>(
    mut ctx: ChartContext<'a, DB, Cartesian2d<X, Y>>,
    layout: &Layout<'_, '_, DB>,
) -> DrawResult<DB>
where
    DB: DrawingBackend + 'a,
    X: Ranged<ValueType = f64> + ValueFormatter<f64>,
    Y: Ranged<ValueType = f64> + ValueFormatter<f64>,
{
    let chart = layout.chart;
    let categorical = chart.x_ticks.is_some();
    // Category labels are drawn below, wrapped; the mesh only marks ticks.
    let x_text = |v: &f64| {
        if categorical {
            String::new()
        } else {
            format_tick(*v)
        }
    };
    let y_text = |v: &f64| format_tick(*v);
    let mut mesh = ctx.configure_mesh();
    mesh.x_desc(chart.x_label.as_str())
        .y_desc(chart.y_label.as_str())
        .x_label_formatter(&x_text)
        .y_label_formatter(&y_text)
        .label_style((FAMILY, TICK_SIZE))
        .axis_desc_style((FAMILY, AXIS_DESC_SIZE))
        .light_line_style(RGBColor(235, 235, 235))
        .bold_line_style(RGBColor(205, 205, 205));
    if chart.kind == Kind::Bars {
        // Vertical grid lines would cut through the groups.
        mesh.disable_x_mesh();
    }
    mesh.draw()?;
    let base = if bounds::log_y(chart) {
        layout.y.start
    } else {
        0.0
    };
    match chart.kind {
        Kind::Lines => lines::draw_series(&mut ctx, chart)?,
        Kind::Bars => bars::draw(&mut ctx, chart, base)?,
    }
    lines::draw_references(&mut ctx, chart, &layout.x)?;
    if chart.kind == Kind::Bars {
        bars::draw_values(&mut ctx, chart, base)?;
    }
    let (px, py) = ctx.plotting_area().get_pixel_range();
    let style =
        TextStyle::from((FAMILY, TICK_SIZE).into_font()).pos(Pos::new(HPos::Center, VPos::Top));
    for (v, lines) in &layout.labels {
        let cx = ctx.backend_coord(&(*v, layout.y.start)).0;
        for (i, line) in lines.iter().enumerate() {
            let top = py.end + 8 + (i as u32 * TICK_LINE) as i32;
            layout
                .root
                .draw(&Text::new(line.as_str(), (cx, top), style.clone()))?;
        }
    }
    let (w, h) = key::box_size(layout.root, &layout.entries);
    let (w, h) = (w as i32, h as i32);
    let origin = match layout.corner {
        None => (px.end + MARGIN as i32, py.start),
        Some(Corner::UpperLeft) => (px.start + LEGEND_INSET, py.start + LEGEND_INSET),
        Some(Corner::UpperRight) => (px.end - LEGEND_INSET - w, py.start + LEGEND_INSET),
        Some(Corner::LowerLeft) => (px.start + LEGEND_INSET, py.end - LEGEND_INSET - h),
        Some(Corner::LowerRight) => (px.end - LEGEND_INSET - w, py.end - LEGEND_INSET - h),
    };
    key::draw(layout.root, &layout.entries, origin)
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
        // Fixed ticks get no light grid lines between them.
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
