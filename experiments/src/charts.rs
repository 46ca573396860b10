//! Charts an experiment asks for, independent of which mode produced them.
//!
//! Contract: an experiment describes each chart as a [`ChartSpec`] (title,
//! axis labels with units, one series per condition group). The driver draws
//! it with `figures::draw` as `DIR/NAME/<stem>.{png,svg}`, marking every series
//! with the mode that produced it (real solid, sim dashed); `--mode both`
//! puts the real and sim series of one spec on the same axes.

use figures::{Chart, FigureError, Series, Source};
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, PartialEq)]
pub struct SeriesSpec {
    pub label: String,
    pub points: Vec<(f64, f64)>,
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
        }
    }

    /// Adds a series, dropping points with a non-finite coordinate.
    pub fn series(mut self, label: impl Into<String>, points: Vec<(f64, f64)>) -> Self {
        let points = points
            .into_iter()
            .filter(|(x, y)| x.is_finite() && y.is_finite())
            .collect();
        self.series.push(SeriesSpec {
            label: label.into(),
            points,
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
}

/// Draws `spec` into `dir`, with every series marked as `source`.
pub fn draw(spec: &ChartSpec, source: Source, dir: &Path) -> Result<Vec<PathBuf>, FigureError> {
    let chart = Chart {
        title: spec.title.clone(),
        x_label: spec.x_label.clone(),
        y_label: spec.y_label.clone(),
        series: spec
            .series
            .iter()
            .map(|s| Series {
                label: s.label.clone(),
                source,
                points: s.points.clone(),
            })
            .collect(),
        x_ticks: spec.x_ticks.clone(),
        log_x: spec.log_x,
    };
    figures::draw(&chart, &dir.join(&spec.stem))
}
