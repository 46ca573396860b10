//! Charts an experiment asks for, independent of which mode produced them.
//!
//! Contract: an experiment describes each chart as a [`ChartSpec`] (title,
//! axis labels with units, one series per condition group, and how to draw
//! it: lines or bars, y scale, reference lines such as a target). The
//! driver draws it with `figures::draw` as `DIR/NAME/<stem>.{png,svg}`,
//! marking every series with the mode that produced it (real solid, sim
//! dashed) and putting the caller's subtitle (what ran: GPU, cost model,
//! model, workload) under the title; `--mode both` puts the real and sim
//! series of one spec on the same axes.

use figures::{Chart, FigureError, Kind, Reference, Series, Source, YScale};
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, PartialEq)]
pub struct SeriesSpec {
    pub label: String,
    pub points: Vec<(f64, f64)>,
    /// Drawn thick and underneath (`figures::Series::wide`), for a series
    /// another one may cover.
    pub wide: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ChartSpec {
    /// File name without extension.
    pub stem: String,
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    pub series: Vec<SeriesSpec>,
    pub x_ticks: Option<Vec<(f64, String)>>,
    pub log_x: bool,
    pub kind: Kind,
    pub y_scale: YScale,
    /// Horizontal target lines (not data: no mode in the legend).
    pub references: Vec<Reference>,
}

impl ChartSpec {
    pub fn new(stem: &str, title: &str, x_label: &str, y_label: &str) -> Self {
        Self {
            stem: stem.into(),
            title: title.into(),
            x_label: x_label.into(),
            y_label: y_label.into(),
            series: Vec::new(),
            x_ticks: None,
            log_x: false,
            kind: Kind::Lines,
            y_scale: YScale::Linear,
            references: Vec::new(),
        }
    }

    /// Adds a series, dropping points with a non-finite coordinate.
    pub fn series(self, label: impl Into<String>, points: Vec<(f64, f64)>) -> Self {
        self.push_series(label.into(), points, false)
    }

    /// Adds a series drawn thick and underneath the others, so that one on
    /// the same points stays visible on top of it.
    pub fn wide_series(self, label: impl Into<String>, points: Vec<(f64, f64)>) -> Self {
        self.push_series(label.into(), points, true)
    }

    fn push_series(mut self, label: String, points: Vec<(f64, f64)>, wide: bool) -> Self {
        let points = points
            .into_iter()
            .filter(|(x, y)| x.is_finite() && y.is_finite())
            .collect();
        self.series.push(SeriesSpec {
            label,
            points,
            wide,
        });
        self
    }

    /// Categorical x axis: point `i` of every series sits at `x = i`.
    pub fn categories(mut self, names: &[String]) -> Self {
        self.x_ticks = Some(
            names
                .iter()
                .enumerate()
                .map(|(i, n)| (i as f64, n.clone()))
                .collect(),
        );
        self
    }

    pub fn log_x(mut self) -> Self {
        self.log_x = true;
        self
    }

    /// Grouped bars, one group per category (with [`Self::categories`]).
    pub fn bars(mut self) -> Self {
        self.kind = Kind::Bars;
        self
    }

    pub fn y_scale(mut self, scale: YScale) -> Self {
        self.y_scale = scale;
        self
    }

    /// A horizontal line at `y`, labelled as given (say what it is, e.g.
    /// `"TTFT SLO 2000 ms (target)"`).
    pub fn reference(mut self, label: impl Into<String>, y: f64) -> Self {
        self.references.push(Reference {
            label: label.into(),
            y,
        });
        self
    }
}

/// The chart drawn for one spec as produced by one or more modes (`--mode
/// both` passes the real and the sim spec): series keep their label and are
/// marked with their mode. The first spec gives the title, axes, ticks,
/// kind, scale and reference lines.
pub fn chart(specs: &[(Source, &ChartSpec)], subtitle: &str) -> Option<Chart> {
    let (_, first) = specs.first()?;
    Some(Chart {
        title: first.title.clone(),
        subtitle: subtitle.to_string(),
        x_label: first.x_label.clone(),
        y_label: first.y_label.clone(),
        kind: first.kind,
        series: specs
            .iter()
            .flat_map(|(source, spec)| {
                spec.series.iter().map(|s| Series {
                    wide: s.wide,
                    ..Series::new(s.label.clone(), *source, s.points.clone())
                })
            })
            .collect(),
        references: first.references.clone(),
        x_ticks: first.x_ticks.clone(),
        log_x: first.log_x,
        y_scale: first.y_scale,
    })
}

/// Draws [`chart`] into `dir` as `<stem>.{png,svg}` with `subtitle` under
/// the title; returns the files written (none for no spec).
pub fn draw(
    specs: &[(Source, &ChartSpec)],
    dir: &Path,
    subtitle: &str,
) -> Result<Vec<PathBuf>, FigureError> {
    match (chart(specs, subtitle), specs.first()) {
        (Some(chart), Some((_, first))) => figures::draw(&chart, &dir.join(&first.stem)),
        _ => Ok(Vec::new()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_spec_shapes_the_chart_and_every_mode_adds_series() {
        let spec = |y: f64| {
            ChartSpec::new("s", "t", "x", "y")
                .categories(&["a".into(), "b".into()])
                .bars()
                .y_scale(YScale::Auto)
                .reference("SLO 5 ms (target)", 5.0)
                .wide_series("cold", vec![(0.0, y), (1.0, f64::NAN)])
                .series("warm", vec![(0.0, y / 2.0)])
        };
        let (real, sim) = (spec(10.0), spec(12.0));
        let chart = chart(&[(Source::Real, &real), (Source::Sim, &sim)], "h200-sxm").unwrap();
        assert_eq!(chart.subtitle, "h200-sxm");
        assert_eq!((chart.kind, chart.y_scale), (Kind::Bars, YScale::Auto));
        assert_eq!(chart.references.len(), 1, "a target once, not per mode");
        assert_eq!(chart.series.len(), 4);
        assert!(chart.series[0].wide && !chart.series[1].wide);
        assert_eq!(chart.series[0].points, vec![(0.0, 10.0)], "NaN dropped");
        assert_eq!(chart.series[2].source, Source::Sim);
        assert!(super::chart(&[], "").is_none());
    }
}
