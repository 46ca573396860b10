//! The legend's entries, their box size and drawing, in pixels.
//!
//! Contract: one entry per series (`"label (real)"` / `"label (sim)"`), in
//! series order (bar charts: in the order of the bars within a group), then
//! one per reference line (its label as given). Each entry's sample repeats
//! how the series is drawn: the line and marker, or a patch of the bar fill,
//! or the reference line's dashes.

use plotters::coord::Shift;
use plotters::element::DashedPathElement;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::bars::SIM_TINT;
use crate::font::FAMILY;
use crate::lines::{self, DrawResult, DASH, REFERENCE_COLOUR};
use crate::style::{label_indices, lighter, series_styles, SeriesStyle};
use crate::{Chart, Kind, Source};

pub(crate) const LEGEND_SIZE: u32 = 20;
/// Padding inside the legend box.
pub(crate) const PADDING: u32 = 12;
/// Width of the sample in front of each entry.
const SAMPLE_WIDTH: i32 = 34;
/// Gap between the sample and the text.
const SAMPLE_GAP: i32 = 10;
const ROW_HEIGHT: u32 = LEGEND_SIZE + 7;

pub(crate) enum Sample {
    Line {
        style: SeriesStyle,
        source: Source,
        wide: bool,
    },
    Bar {
        style: SeriesStyle,
        source: Source,
    },
    /// The chart's `index`-th reference line.
    Reference {
        index: usize,
    },
}

pub(crate) struct Entry {
    pub text: String,
    pub sample: Sample,
}

pub(crate) fn entries(chart: &Chart) -> Vec<Entry> {
    let styles = series_styles(chart);
    let mut order: Vec<usize> = (0..chart.series.len()).collect();
    if chart.kind == Kind::Bars {
        // The order of the bars within a group: by label, real before sim.
        let labels = label_indices(chart);
        order.sort_by_key(|&i| (labels[i], chart.series[i].source != Source::Real));
    }
    let mut out: Vec<Entry> = Vec::new();
    for i in order {
        let (series, style) = (&chart.series[i], styles[i]);
        let text = format!("{} ({})", series.label, series.source.legend_word());
        // A bar chart shows each (label, source) once however many series carry it.
        if out.iter().any(|e| e.text == text) {
            continue;
        }
        let sample = match chart.kind {
            Kind::Lines => Sample::Line {
                style,
                source: series.source,
                wide: series.wide,
            },
            Kind::Bars => Sample::Bar {
                style,
                source: series.source,
            },
        };
        out.push(Entry { text, sample });
    }
    out.extend(chart.references.iter().enumerate().map(|(index, r)| Entry {
        text: r.label.clone(),
        sample: Sample::Reference { index },
    }));
    out
}

fn font() -> FontDesc<'static> {
    (FAMILY, LEGEND_SIZE).into_font()
}

/// Width and height of the legend box in pixels; (0, 0) for no entries.
pub(crate) fn box_size<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    entries: &[Entry],
) -> (u32, u32) {
    if entries.is_empty() {
        return (0, 0);
    }
    let font = font();
    let widest = entries
        .iter()
        .filter_map(|e| {
            area.estimate_text_size(&e.text, &TextStyle::from(font.clone()))
                .ok()
        })
        .map(|(w, _)| w)
        .max()
        .unwrap_or(0);
    let width = widest + (SAMPLE_WIDTH + SAMPLE_GAP) as u32 + 2 * PADDING;
    let height = entries.len() as u32 * ROW_HEIGHT + 2 * PADDING - 7;
    (width, height)
}

/// Draws the legend box with its top left corner at `origin` (pixels of `area`).
pub(crate) fn draw<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    entries: &[Entry],
    origin: (i32, i32),
) -> DrawResult<DB> {
    if entries.is_empty() {
        return Ok(());
    }
    let (w, h) = box_size(area, entries);
    let (x, y) = origin;
    let corner = (x + w as i32, y + h as i32);
    area.draw(&Rectangle::new([origin, corner], WHITE.mix(0.88).filled()))?;
    area.draw(&Rectangle::new([origin, corner], RGBColor(160, 160, 160)))?;
    let text_style = TextStyle::from(font()).pos(Pos::new(HPos::Left, VPos::Center));
    for (row, entry) in entries.iter().enumerate() {
        let cy = y + PADDING as i32 + row as i32 * ROW_HEIGHT as i32 + LEGEND_SIZE as i32 / 2;
        let sx = x + PADDING as i32;
        draw_sample(area, &entry.sample, sx, cy)?;
        area.draw(&Text::new(
            entry.text.as_str(),
            (sx + SAMPLE_WIDTH + SAMPLE_GAP, cy),
            text_style.clone(),
        ))?;
    }
    Ok(())
}

fn draw_sample<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    sample: &Sample,
    x: i32,
    y: i32,
) -> DrawResult<DB> {
    let ends = vec![(x, y), (x + SAMPLE_WIDTH, y)];
    match sample {
        Sample::Line {
            style,
            source,
            wide,
        } => {
            let colour = style.rgb();
            let line = colour.stroke_width(lines::width(*wide));
            match source {
                Source::Real => area.draw(&PathElement::new(ends, line))?,
                Source::Sim => {
                    area.draw(&DashedPathElement::new(ends, DASH.0 / 2, DASH.1 / 2, line))?
                }
            }
            let filled = *source == Source::Real;
            let mid = (x + SAMPLE_WIDTH / 2, y);
            area.draw(&lines::marker::<DB, (i32, i32)>(
                mid,
                style.marker,
                colour,
                filled,
                *wide,
            ))?;
        }
        Sample::Bar { style, source } => {
            let colour = style.rgb();
            let corners = [(x + 4, y - 8), (x + SAMPLE_WIDTH - 4, y + 8)];
            match source {
                Source::Real => area.draw(&Rectangle::new(corners, colour.filled()))?,
                Source::Sim => {
                    area.draw(&Rectangle::new(corners, lighter(colour, SIM_TINT).filled()))?;
                    area.draw(&Rectangle::new(corners, colour.stroke_width(2)))?;
                }
            }
        }
        Sample::Reference { index } => {
            let line = REFERENCE_COLOUR.stroke_width(lines::LINE_WIDTH);
            let (dash, gap) = lines::reference_dash(*index);
            area.draw(&DashedPathElement::new(ends, dash / 2, gap / 2, line))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Reference, Series};

    #[test]
    fn bar_legends_follow_the_bars_and_references_come_last() {
        let mut chart = Chart {
            kind: Kind::Bars,
            series: vec![
                Series::new("reader", Source::Real, vec![]),
                Series::new("cold", Source::Real, vec![]),
                Series::new("reader", Source::Sim, vec![]),
                Series::new("cold", Source::Sim, vec![]),
            ],
            references: vec![Reference {
                label: "chance: 50% (nothing leaks)".into(),
                y: 50.0,
            }],
            ..Chart::default()
        };
        let texts = |c: &Chart| entries(c).into_iter().map(|e| e.text).collect::<Vec<_>>();
        assert_eq!(
            texts(&chart),
            [
                "reader (real)",
                "reader (sim)",
                "cold (real)",
                "cold (sim)",
                "chance: 50% (nothing leaks)"
            ]
        );
        chart.kind = Kind::Lines;
        assert_eq!(texts(&chart)[1], "cold (real)", "lines keep series order");
    }

    #[test]
    fn each_reference_line_has_its_own_dash() {
        let target = |label: &str, y| Reference {
            label: label.into(),
            y,
        };
        let chart = Chart {
            references: vec![target("8 % (sizes)", 8.0), target("10 % (SM counts)", 10.0)],
            ..Chart::default()
        };
        let indices: Vec<usize> = entries(&chart)
            .into_iter()
            .filter_map(|e| match e.sample {
                Sample::Reference { index } => Some(index),
                _ => None,
            })
            .collect();
        assert_eq!(indices, [0, 1]);
        assert_ne!(lines::reference_dash(0), lines::reference_dash(1));
        assert_ne!(lines::reference_dash(1), lines::reference_dash(2));
        // A dash is never a sim series' dash.
        assert!((0..3).all(|i| lines::reference_dash(i) != DASH));
    }
}
