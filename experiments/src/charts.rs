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

/// Draws one chart into `dir` from the same spec as produced by one or more
/// modes (`--mode both` passes the real and the sim spec); series keep their
/// label and are marked with their mode. The first spec gives the title,
/// axes and ticks.
pub fn draw(specs: &[(Source, &ChartSpec)], dir: &Path) -> Result<Vec<PathBuf>, FigureError> {
    let Some((_, first)) = specs.first() else {
        return Ok(Vec::new());
    };
    let chart = Chart {
        title: first.title.clone(),
        x_label: first.x_label.clone(),
        y_label: first.y_label.clone(),
        series: specs
            .iter()
            .flat_map(|(source, spec)| {
                spec.series.iter().map(|s| Series {
                    label: s.label.clone(),
                    source: *source,
                    points: s.points.clone(),
                })
            })
            .collect(),
        x_ticks: first.x_ticks.clone(),
        log_x: first.log_x,
    };
    figures::draw(&chart, &dir.join(&first.stem))
}
