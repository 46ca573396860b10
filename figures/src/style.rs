//! Styles per label (colour and marker), tick-label text and log-axis ticks.

use plotters::style::RGBColor;

use crate::Chart;

/// Tableau 10, then navy and wine: distinct hues that stay readable on white
/// and in print. Twelve, so that a plan over a dozen GPUs gives each its own
/// colour; the marker shape varies too, with a period (5) coprime to 12.
const PALETTE: [RGBColor; 12] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
    RGBColor(0, 0, 128),
    RGBColor(128, 0, 64),
];

/// Point marker shapes, in the order labels get them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Marker {
    Circle,
    Triangle,
    Square,
    Diamond,
    InvertedTriangle,
}

const MARKERS: [Marker; 5] = [
    Marker::Circle,
    Marker::Triangle,
    Marker::Square,
    Marker::Diamond,
    Marker::InvertedTriangle,
];

/// Colour and marker of one label.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SeriesStyle {
    pub colour: (u8, u8, u8),
    pub marker: Marker,
}

impl SeriesStyle {
    pub(crate) fn rgb(self) -> RGBColor {
        RGBColor(self.colour.0, self.colour.1, self.colour.2)
    }
}

/// The style of the `index`-th distinct label of a chart.
pub fn style_of(index: usize) -> SeriesStyle {
    let RGBColor(r, g, b) = PALETTE[index % PALETTE.len()];
    SeriesStyle {
        colour: (r, g, b),
        marker: MARKERS[index % MARKERS.len()],
    }
}

/// Index of each series' label among the chart's distinct labels, in order
/// of first appearance, so a real and a sim series with the same label share
/// a style wherever they sit in the list.
pub(crate) fn label_indices(chart: &Chart) -> Vec<usize> {
    let mut labels: Vec<&str> = Vec::new();
    chart
        .series
        .iter()
        .map(|s| match labels.iter().position(|l| *l == s.label) {
            Some(i) => i,
            None => {
                labels.push(&s.label);
                labels.len() - 1
            }
        })
        .collect()
}

/// Style of every series, indexed like `chart.series`.
pub(crate) fn series_styles(chart: &Chart) -> Vec<SeriesStyle> {
    label_indices(chart).into_iter().map(style_of).collect()
}

/// `colour` blended towards white: `keep` of the colour remains.
pub(crate) fn lighter(colour: RGBColor, keep: f64) -> RGBColor {
    let mix = |c: u8| (f64::from(c) * keep + 255.0 * (1.0 - keep)).round() as u8;
    RGBColor(mix(colour.0), mix(colour.1), mix(colour.2))
}

/// Short text for a numeric tick: at most four decimals, trailing zeros
/// dropped, scientific notation for very large or very small magnitudes.
pub(crate) fn format_tick(value: f64) -> String {
    let magnitude = value.abs();
    let text = if magnitude != 0.0 && !(1e-3..1e6).contains(&magnitude) {
        let s = format!("{value:.2e}");
        match s.split_once('e') {
            Some((mantissa, exponent)) => format!("{}e{exponent}", trim_zeros(mantissa)),
            None => s,
        }
    } else {
        trim_zeros(&format!("{value:.4}")).to_string()
    };
    if text == "-0" {
        "0".to_string()
    } else {
        text
    }
}

fn trim_zeros(s: &str) -> &str {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.')
    } else {
        s
    }
}

/// Tick positions on a log axis over `lo..hi` (both > 0): the powers of ten
/// inside, plus 2x and 5x them when fewer than three powers fit (plotters'
/// own log ticks leave a range inside one decade with no tick at all), then
/// every integer multiple, then evenly spaced round values.
pub(crate) fn log_ticks(lo: f64, hi: f64) -> Vec<f64> {
    let in_range = |v: &f64| *v >= lo * (1.0 - 1e-9) && *v <= hi * (1.0 + 1e-9);
    let first = lo.log10().floor() as i32;
    let last = hi.log10().ceil() as i32;
    let with = |multiples: &[f64]| -> Vec<f64> {
        (first..=last)
            .flat_map(|e| multiples.iter().map(move |m| m * 10f64.powi(e)))
            .filter(in_range)
            .collect()
    };
    let all = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0];
    for multiples in [&[1.0][..], &[1.0, 2.0, 5.0], &all] {
        let ticks = with(multiples);
        if ticks.len() >= 3 {
            return ticks;
        }
    }
    linear_ticks(lo, hi)
}

/// About four round values (1, 2 or 5 times a power of ten apart) in `lo..=hi`.
fn linear_ticks(lo: f64, hi: f64) -> Vec<f64> {
    let raw = (hi - lo) / 4.0;
    if !(raw.is_finite() && raw > 0.0) {
        return vec![lo];
    }
    let magnitude = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * magnitude)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * magnitude);
    let mut v = (lo / step).ceil() * step;
    let mut out = Vec::new();
    while v <= hi * (1.0 + 1e-9) && out.len() < 20 {
        out.push(v);
        v += step;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Series, Source};
    use std::collections::HashSet;

    #[test]
    fn same_label_same_style_distinct_labels_differ() {
        let chart = Chart {
            series: vec![
                Series::new("a", Source::Real, vec![]),
                Series::new("b", Source::Real, vec![]),
                Series::new("b", Source::Sim, vec![]),
                Series::new("a", Source::Sim, vec![]),
            ],
            ..Chart::default()
        };
        let c = series_styles(&chart);
        assert_eq!(c[0], c[3]);
        assert_eq!(c[1], c[2]);
        assert_ne!(c[0], c[1]);
    }

    #[test]
    fn twelve_labels_get_twelve_distinct_colours_and_styles() {
        let chart = Chart {
            series: (0..12)
                .map(|i| Series::new(format!("gpu-{i}"), Source::Sim, vec![]))
                .collect(),
            ..Chart::default()
        };
        let styles = series_styles(&chart);
        let distinct: HashSet<SeriesStyle> = styles.iter().copied().collect();
        assert_eq!(distinct.len(), 12, "{styles:?}");
        let colours: HashSet<(u8, u8, u8)> = styles.iter().map(|s| s.colour).collect();
        assert_eq!(colours.len(), 12, "every label its own colour");
        let all: HashSet<SeriesStyle> = (0..60).map(style_of).collect();
        assert_eq!(all.len(), 60, "60 labels before a (colour, marker) repeats");
    }

    #[test]
    fn ticks_are_short() {
        assert_eq!(format_tick(0.30000000000000004), "0.3");
        assert_eq!(format_tick(250.0), "250");
        assert_eq!(format_tick(-0.00001), "-1e-5");
        assert_eq!(format_tick(1.5e9), "1.5e9");
        assert_eq!(format_tick(-0.0), "0");
        assert_eq!(format_tick(0.0), "0");
    }

    #[test]
    fn log_ticks_are_decades_or_finer_in_a_narrow_range() {
        assert_eq!(
            log_ticks(3.0, 52_000.0),
            vec![10.0, 100.0, 1000.0, 10_000.0]
        );
        assert_eq!(log_ticks(1.5, 90.0), vec![2.0, 5.0, 10.0, 20.0, 50.0]);
        assert_eq!(log_ticks(15.0, 45.0), vec![20.0, 30.0, 40.0]);
        let tiny = log_ticks(31.0, 39.0);
        assert!(tiny.len() >= 3, "{tiny:?}");
        assert!(tiny.iter().all(|t| (31.0..=39.0).contains(t)), "{tiny:?}");
    }
}
