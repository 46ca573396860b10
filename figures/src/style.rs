//! Colours per label and tick-label text.

use plotters::style::RGBColor;

use crate::Chart;

/// Tableau 10: distinct hues that stay readable on white and in print.
const PALETTE: [RGBColor; 10] = [
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
];

/// Colour of every series, indexed like `chart.series`. Labels are numbered
/// in order of first appearance, so a real and a sim series with the same
/// label share a colour wherever they sit in the list.
pub(crate) fn series_colours(chart: &Chart) -> Vec<RGBColor> {
    let mut labels: Vec<&str> = Vec::new();
    chart
        .series
        .iter()
        .map(|s| {
            let index = match labels.iter().position(|l| *l == s.label) {
                Some(i) => i,
                None => {
                    labels.push(&s.label);
                    labels.len() - 1
                }
            };
            PALETTE[index % PALETTE.len()]
        })
        .collect()
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

/// The categorical label at `value`, when `value` is one of the given tick
/// positions (up to rounding in the coordinate mapping).
pub(crate) fn tick_label(ticks: &[(f64, String)], value: f64) -> Option<&str> {
    ticks
        .iter()
        .find(|(x, _)| (x - value).abs() <= 1e-9 * x.abs().max(1.0))
        .map(|(_, label)| label.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Series, Source};

    #[test]
    fn same_label_same_colour_distinct_labels_differ() {
        let series = |label: &str, source| Series {
            label: label.into(),
            source,
            points: vec![],
        };
        let chart = Chart {
            title: String::new(),
            x_label: String::new(),
            y_label: String::new(),
            series: vec![
                series("a", Source::Real),
                series("b", Source::Real),
                series("b", Source::Sim),
                series("a", Source::Sim),
            ],
            x_ticks: None,
            log_x: false,
        };
        let c = series_colours(&chart);
        assert_eq!(c[0], c[3]);
        assert_eq!(c[1], c[2]);
        assert_ne!(c[0], c[1]);
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
    fn tick_labels_match_positions_only() {
        let ticks = vec![(0.0, "off".to_string()), (512.0, "512".to_string())];
        assert_eq!(tick_label(&ticks, 0.0), Some("off"));
        assert_eq!(tick_label(&ticks, 512.0 + 1e-12), Some("512"));
        assert_eq!(tick_label(&ticks, 256.0), None);
    }
}
