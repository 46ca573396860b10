//! Grouped bars: one group per category (`x_ticks` position), one bar per
//! (label, source) in each group.
//!
//! Contract: a bar chart without `x_ticks` has one category per distinct x
//! value of its drawable points ([`with_implied_categories`]). Slots are
//! the chart's labels in order of first appearance, real before sim within
//! a label, so the real and sim bars of one label stand
//! side by side. A group takes [`GROUP_WIDTH`] of its category's slot; a bar
//! exists where its series has a drawable point at the category's position.
//! Real bars are filled with the label's colour; sim bars with a lighter
//! tint of it and outlined in the full colour. Values are written above the
//! bars, on a pale backing and after any reference line, when every value's
//! text fits the width of its bar.

use plotters::coord::ranged1d::{Ranged, ValueFormatter};
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::bounds;
use crate::font::FAMILY;
use crate::lines::DrawResult;
use crate::style::{format_tick, label_indices, lighter, series_styles};
use crate::{Chart, Kind, Source};

/// Share of a category's slot its bars fill.
pub(crate) const GROUP_WIDTH: f64 = 0.8;
/// Share of a bar's slot inside the group that is painted (a thin gap
/// between neighbours).
const BAR_FILL: f64 = 0.9;
/// How much of the colour a sim bar's fill keeps.
pub(crate) const SIM_TINT: f64 = 0.35;
const VALUE_SIZE: u32 = 17;
/// Behind a bar's value text: white, mostly opaque.
const VALUE_BACKING: RGBAColor = RGBAColor(255, 255, 255, 0.9);

/// One bar in data coordinates.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Bar {
    /// Index into `chart.series`.
    pub series: usize,
    pub x0: f64,
    pub x1: f64,
    pub value: f64,
}

/// A bar chart without `x_ticks`, given its implied categories: the
/// distinct x values of its drawable points, in increasing order, each
/// labelled with its number. `None` for any other chart.
pub(crate) fn with_implied_categories(chart: &Chart) -> Option<Chart> {
    if chart.kind != Kind::Bars || chart.x_ticks.is_some() {
        return None;
    }
    let mut xs: Vec<f64> = chart
        .series
        .iter()
        .flat_map(|s| bounds::drawable_points(s, chart))
        .map(|p| p.0)
        .collect();
    xs.sort_by(f64::total_cmp);
    xs.dedup_by(|a, b| (*a - *b).abs() < 1e-9);
    Some(Chart {
        x_ticks: Some(xs.into_iter().map(|x| (x, format_tick(x))).collect()),
        ..chart.clone()
    })
}

/// (label index, source) of every slot, in drawing order within a group.
fn slots(chart: &Chart) -> Vec<(usize, Source)> {
    let indices = label_indices(chart);
    let mut slots: Vec<(usize, Source)> = Vec::new();
    let labels = indices.iter().copied().max().map_or(0, |m| m + 1);
    for label in 0..labels {
        for source in [Source::Real, Source::Sim] {
            let present = chart
                .series
                .iter()
                .zip(&indices)
                .any(|(s, &i)| i == label && s.source == source);
            if present {
                slots.push((label, source));
            }
        }
    }
    slots
}

/// Every bar of a bar chart.
pub(crate) fn layout(chart: &Chart) -> Vec<Bar> {
    let slots = slots(chart);
    let indices = label_indices(chart);
    let categories: Vec<f64> = chart.x_ticks.iter().flatten().map(|(x, _)| *x).collect();
    let slot_width = GROUP_WIDTH / slots.len().max(1) as f64;
    let mut bars = Vec::new();
    for &category in &categories {
        for (k, &(label, source)) in slots.iter().enumerate() {
            let found = chart
                .series
                .iter()
                .enumerate()
                .filter(|(i, s)| indices[*i] == label && s.source == source)
                .find_map(|(i, s)| {
                    bounds::drawable_points(s, chart)
                        .into_iter()
                        .find(|p| (p.0 - category).abs() < 1e-9)
                        .map(|p| (i, p.1))
                });
            if let Some((series, value)) = found {
                let x0 = category - GROUP_WIDTH / 2.0 + k as f64 * slot_width;
                let pad = slot_width * (1.0 - BAR_FILL) / 2.0;
                bars.push(Bar {
                    series,
                    x0: x0 + pad,
                    x1: x0 + slot_width - pad,
                    value,
                });
            }
        }
    }
    bars
}

/// Draws the bars from `base` (zero, or the bottom of a log axis) up.
pub(crate) fn draw<'a, DB, X, Y>(
    ctx: &mut ChartContext<'a, DB, Cartesian2d<X, Y>>,
    chart: &Chart,
    base: f64,
) -> DrawResult<DB>
where
    DB: DrawingBackend + 'a,
    X: Ranged<ValueType = f64> + ValueFormatter<f64>,
    Y: Ranged<ValueType = f64> + ValueFormatter<f64>,
{
    let styles = series_styles(chart);
    for bar in &layout(chart) {
        let colour = styles[bar.series].rgb();
        let corners = [(bar.x0, base), (bar.x1, bar.value)];
        match chart.series[bar.series].source {
            Source::Real => {
                ctx.draw_series([Rectangle::new(corners, colour.filled())])?;
            }
            Source::Sim => {
                ctx.draw_series([Rectangle::new(corners, lighter(colour, SIM_TINT).filled())])?;
                ctx.draw_series([Rectangle::new(corners, colour.stroke_width(2))])?;
            }
        }
    }
    Ok(())
}

/// Writes each bar's value above it, on a pale backing so that a reference
/// line drawn across the bars leaves it readable; nothing when a value's
/// text is wider than its bar.
pub(crate) fn draw_values<'a, DB, X, Y>(
    ctx: &mut ChartContext<'a, DB, Cartesian2d<X, Y>>,
    chart: &Chart,
    base: f64,
) -> DrawResult<DB>
where
    DB: DrawingBackend + 'a,
    X: Ranged<ValueType = f64> + ValueFormatter<f64>,
    Y: Ranged<ValueType = f64> + ValueFormatter<f64>,
{
    let bars = layout(chart);
    let font = (FAMILY, VALUE_SIZE).into_font();
    let sized: Vec<(String, (u32, u32))> = bars
        .iter()
        .map(|b| {
            let text = format_tick(round3(b.value));
            let size = ctx
                .plotting_area()
                .estimate_text_size(&text, &TextStyle::from(font.clone()))
                .unwrap_or((u32::MAX, u32::MAX));
            (text, size)
        })
        .collect();
    let fits = bars.iter().zip(&sized).all(|(b, (_, (width, _)))| {
        let left = ctx.backend_coord(&(b.x0, base)).0;
        let right = ctx.backend_coord(&(b.x1, base)).0;
        i64::from(*width) + 2 <= i64::from(right - left)
    });
    if !fits {
        return Ok(());
    }
    let style = TextStyle::from(font).pos(Pos::new(HPos::Center, VPos::Bottom));
    ctx.draw_series(bars.iter().zip(sized).map(|(b, (text, (w, h)))| {
        let (half, h) = (w as i32 / 2 + 6, h as i32);
        EmptyElement::at(((b.x0 + b.x1) / 2.0, b.value))
            + Rectangle::new([(-half, -5 - h), (half, -3)], VALUE_BACKING.filled())
            + Text::new(text, (0, -4), style.clone())
    }))?;
    Ok(())
}

/// Three significant digits (whole numbers from 100 up, and at most three
/// decimals), so bar labels stay short.
fn round3(v: f64) -> f64 {
    let magnitude = v.abs();
    let decimals = if magnitude >= 100.0 {
        0
    } else if magnitude >= 10.0 {
        1
    } else if magnitude >= 1.0 {
        2
    } else {
        3
    };
    let scale = 10f64.powi(decimals);
    (v * scale).round() / scale
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Series;

    fn chart() -> Chart {
        Chart {
            kind: Kind::Bars,
            series: vec![
                Series::new("reader", Source::Real, vec![(0.0, 10.0), (1.0, 90.0)]),
                Series::new("cold", Source::Real, vec![(0.0, 95.0), (1.0, 92.0)]),
                Series::new("reader", Source::Sim, vec![(0.0, 11.0), (1.0, 88.0)]),
                Series::new("cold", Source::Sim, vec![(0.0, 90.0)]),
            ],
            x_ticks: Some(vec![(0.0, "a then a".into()), (1.0, "a then b".into())]),
            ..Chart::default()
        }
    }

    #[test]
    fn one_group_per_category_with_real_and_sim_side_by_side() {
        let bars = layout(&chart());
        assert_eq!(bars.len(), 7, "cold sim has no bar in category 1");
        let group0: Vec<usize> = bars
            .iter()
            .filter(|b| b.x1 < 0.5)
            .map(|b| b.series)
            .collect();
        assert_eq!(
            group0,
            [0, 2, 1, 3],
            "reader real, reader sim, cold real, cold sim"
        );
        for b in &bars {
            assert!(b.x0 < b.x1);
            let centre = (b.x0 + b.x1) / 2.0;
            let category = centre.round();
            assert!((centre - category).abs() < GROUP_WIDTH / 2.0, "{b:?}");
        }
        let in_order = bars.windows(2).all(|w| w[0].x1 <= w[1].x0 + 1e-12);
        assert!(in_order, "bars do not overlap: {bars:?}");
    }

    #[test]
    fn bar_values_keep_three_significant_digits() {
        let shown: Vec<String> = [40.2234, 6.977, 11797.4, 0.01234, -2.5]
            .iter()
            .map(|&v| format_tick(round3(v)))
            .collect();
        assert_eq!(shown, ["40.2", "6.98", "11797", "0.012", "-2.5"]);
    }

    #[test]
    fn without_ticks_the_distinct_x_values_are_the_categories() {
        let c = Chart {
            kind: Kind::Bars,
            series: vec![
                Series::new(
                    "a",
                    Source::Sim,
                    vec![(2.0, 1.0), (0.5, 3.0), (f64::NAN, 2.0)],
                ),
                Series::new("b", Source::Sim, vec![(2.0, 4.0)]),
            ],
            ..Chart::default()
        };
        let with = with_implied_categories(&c).expect("a bar chart without ticks");
        assert_eq!(
            with.x_ticks,
            Some(vec![(0.5, "0.5".to_string()), (2.0, "2".to_string())])
        );
        assert_eq!(layout(&with).len(), 3, "a at 0.5 and 2, b at 2");
        assert!(with_implied_categories(&chart()).is_none(), "ticks given");
        let lines = Chart {
            kind: Kind::Lines,
            ..c
        };
        assert!(with_implied_categories(&lines).is_none());
    }
}
