//! Charts drawn from run records: real and simulated series on the same axes.
//!
//! Contract:
//! - [`draw`] writes `<stem>.png` and `<stem>.svg` (the suffix is appended, so
//!   a stem like `out/ttft.v2` keeps its dot) and returns both paths, PNG first.
//! - Header: the title, then the [`Chart::subtitle`] in smaller grey text
//!   under it: what ran (GPU, cost model, model, workload), as plain text
//!   from the caller. Its `\n` starts a new line, and a line wider than the
//!   figure wraps at spaces (a word is never split, so names such as a GPU's
//!   stay searchable in the SVG).
//! - [`Kind::Lines`]: every series is a line with point markers. A label gets
//!   one style (colour and marker shape, [`style_of`]) in both sources, so the
//!   real and simulated curves of one configuration read as a pair:
//!   [`Source::Real`] solid with filled markers, [`Source::Sim`] dashed with
//!   hollow ones. A [`Series::wide`] series is drawn three times as thick,
//!   with larger markers, and before the others, so a thinner series on the
//!   same points stays visible on top of it. A series with more than
//!   [`MAX_MARKED_POINTS`] drawable points (a distribution, a time series)
//!   is drawn as a line without markers; its legend entry keeps the marker.
//! - [`Kind::Bars`]: grouped bars on a categorical axis. `x_ticks` names the
//!   categories; a series' point `(i, v)` is its bar in category `i` (other
//!   x values are ignored). Without `x_ticks`, the distinct x values of the
//!   drawable points are the categories, in increasing order, labelled
//!   with their numbers. One bar per (label, source) in each group, labels
//!   in order of first appearance, real before sim; real bars solid, sim bars
//!   a lighter fill of the same colour with a border. Each bar carries its
//!   value when the values fit above the bars.
//! - Legend entries are `"label (real)"` / `"label (sim)"`. [`Reference`]
//!   lines (e.g. an SLO target) are horizontal, dashed, dark grey, span the
//!   whole plot, and appear in the legend with their own text only: they are
//!   targets, not data of either source. The first is long-dashed, the
//!   second dotted, the third dashed again with shorter gaps, so that
//!   references differ from each other and from a sim series.
//! - The palette has 12 colours and 5 marker shapes; label `i` gets colour
//!   `i mod 12` and marker `i mod 5`, so the first 60 labels all differ in
//!   (colour, marker) and the first 12 in colour alone.
//! - Axis ranges come from the data (and the reference lines) with a margin.
//!   Points with a NaN or infinite coordinate are skipped (and, on a log
//!   axis, points with that coordinate <= 0); a single point, all-equal
//!   values or no drawable point at all still give a valid chart.
//! - Log y: [`YScale::Log`] always, [`YScale::Linear`] never, [`YScale::Auto`]
//!   when every drawable y value (references included) is positive and the
//!   largest is more than [`AUTO_LOG_RATIO`] times the smallest: past that, a
//!   linear axis squeezes the small values onto zero. Log ticks sit at
//!   powers of ten, with 2 and 5 times them when the range spans less than
//!   two decades.
//! - The legend sits in the corner of the plot where it hides the least of
//!   the data; when every corner is taken, the y axis gets headroom above the
//!   data and the legend goes in the freed upper right. A legend too tall or
//!   too wide for that goes outside, to the right of the plot.
//! - `x_ticks`, when given, replaces the automatic x ticks with labelled ones
//!   at the given positions (e.g. `(0.0, "off")` for "no chunking"); a label
//!   wider than its slot wraps at spaces onto more lines, and the space under
//!   the axis grows to hold them.
//! - Text is drawn with DejaVu Sans embedded in this crate, so the PNG renders
//!   the same on a machine with no system fonts.
//!
//! ```
//! use figures::{draw, Chart, Series, Source};
//! # let dir = std::env::temp_dir().join(format!("figures-doc-{}", std::process::id()));
//! # std::fs::create_dir_all(&dir).unwrap();
//! let chart = Chart {
//!     title: "TTFT vs chunk size".into(),
//!     subtitle: "h200-sxm, roofline; qwen3-0.6b; 256-token prompts".into(),
//!     x_label: "chunk size (tokens)".into(),
//!     y_label: "TTFT (ms)".into(),
//!     series: vec![
//!         Series::new("qps 4", Source::Real, vec![(0.0, 310.0), (512.0, 180.0)]),
//!         Series::new("qps 4", Source::Sim, vec![(0.0, 290.0), (512.0, 175.0)]),
//!     ],
//!     x_ticks: Some(vec![(0.0, "off".into()), (512.0, "512".into())]),
//!     ..Chart::default()
//! };
//! let written = draw(&chart, &dir.join("ttft"))?;
//! assert_eq!(written, vec![dir.join("ttft.png"), dir.join("ttft.svg")]);
//! # std::fs::remove_dir_all(&dir).unwrap();
//! # Ok::<(), figures::FigureError>(())
//! ```

mod bars;
mod bounds;
mod font;
mod key;
mod legend;
mod lines;
mod render;
mod style;
mod text;

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use plotters::prelude::{BitMapBackend, IntoDrawingArea, SVGBackend};

pub use lines::MAX_MARKED_POINTS;
pub use style::{style_of, Marker, SeriesStyle};

/// Where a series' numbers come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Source {
    /// Measured on a real runner.
    Real,
    /// Produced by the simulator.
    #[default]
    Sim,
}

impl Source {
    /// The word shown in legend entries.
    pub fn legend_word(self) -> &'static str {
        match self {
            Source::Real => "real",
            Source::Sim => "sim",
        }
    }
}

/// One curve (or, in a bar chart, one bar per category): `(x, y)` points in
/// drawing order.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Series {
    pub label: String,
    pub source: Source,
    pub points: Vec<(f64, f64)>,
    /// Line charts: drawn thick and underneath, so that a series on the same
    /// points drawn after it stays visible.
    pub wide: bool,
}

impl Series {
    pub fn new(label: impl Into<String>, source: Source, points: Vec<(f64, f64)>) -> Self {
        Self {
            label: label.into(),
            source,
            points,
            wide: false,
        }
    }
}

/// How the series are drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Kind {
    /// Lines with point markers.
    #[default]
    Lines,
    /// Grouped bars, one group per `x_ticks` category.
    Bars,
}

/// The y axis' scale (see the crate docs for the `Auto` rule).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum YScale {
    #[default]
    Linear,
    Log,
    Auto,
}

/// With [`YScale::Auto`], a log y axis when max / min of the positive y
/// values exceeds this.
pub const AUTO_LOG_RATIO: f64 = 30.0;

/// A horizontal target line (an SLO, a chance level): not data, so it has no
/// source and its legend text is `label` as given.
#[derive(Debug, Clone, PartialEq)]
pub struct Reference {
    pub label: String,
    pub y: f64,
}

/// A chart. Units belong in the axis labels, e.g. `"TTFT (ms)"`.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Chart {
    pub title: String,
    /// What produced the data, under the title; empty for none.
    pub subtitle: String,
    pub x_label: String,
    pub y_label: String,
    pub kind: Kind,
    pub series: Vec<Series>,
    pub references: Vec<Reference>,
    /// Categorical x tick labels at the given positions; `None` for automatic
    /// numeric ticks. In a bar chart, one category per tick (`None`: one per
    /// distinct x value).
    pub x_ticks: Option<Vec<(f64, String)>>,
    /// Logarithmic x axis (line charts).
    pub log_x: bool,
    pub y_scale: YScale,
}

impl Chart {
    /// Whether the y axis is drawn logarithmic (resolves [`YScale::Auto`]).
    pub fn log_y(&self) -> bool {
        bounds::log_y(self)
    }
}

/// Size of both the PNG (pixels) and the SVG (user units).
pub const FIGURE_SIZE: (u32, u32) = (1200, 750);

#[derive(Debug, thiserror::Error)]
pub enum FigureError {
    #[error("output directory {} does not exist or is not a directory", dir.display())]
    MissingOutputDir { dir: PathBuf },
    #[error("the embedded font could not be registered with plotters")]
    Font,
    #[error("drawing {}: {message}", path.display())]
    Render { path: PathBuf, message: String },
    #[error("writing {}: {source}", path.display())]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// Draws `chart` to `<out_stem>.png` and `<out_stem>.svg`; returns
/// `[png, svg]`. The directory of `out_stem` must exist.
pub fn draw(chart: &Chart, out_stem: &Path) -> Result<Vec<PathBuf>, FigureError> {
    font::ensure_registered()?;
    let implied = bars::with_implied_categories(chart);
    let chart = implied.as_ref().unwrap_or(chart);
    let dir = match out_stem.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    };
    if !dir.is_dir() {
        return Err(FigureError::MissingOutputDir {
            dir: dir.to_path_buf(),
        });
    }
    let png_path = with_suffix(out_stem, "png");
    let svg_path = with_suffix(out_stem, "svg");

    let mut svg_text = String::new();
    {
        let root = SVGBackend::with_string(&mut svg_text, FIGURE_SIZE).into_drawing_area();
        let drawn = render::render(&root, chart).and_then(|()| root.present());
        drawn.map_err(|e| render_error(&svg_path, e))?;
    }
    std::fs::write(&svg_path, svg_text).map_err(|source| FigureError::Write {
        path: svg_path.clone(),
        source,
    })?;

    {
        let root = BitMapBackend::new(&png_path, FIGURE_SIZE).into_drawing_area();
        // The bitmap backend encodes and writes the file in `present`, so an
        // unwritable path surfaces here rather than at construction.
        let drawn = render::render(&root, chart).and_then(|()| root.present());
        drawn.map_err(|e| render_error(&png_path, e))?;
    }
    Ok(vec![png_path, svg_path])
}

fn with_suffix(stem: &Path, extension: &str) -> PathBuf {
    let mut name = OsString::from(stem.as_os_str());
    name.push(".");
    name.push(extension);
    PathBuf::from(name)
}

fn render_error(path: &Path, error: impl std::fmt::Display) -> FigureError {
    FigureError::Render {
        path: path.to_path_buf(),
        message: error.to_string(),
    }
}
