//! Charts drawn from run records: real and simulated series on the same axes.
//!
//! Contract:
//! - [`draw`] writes `<stem>.png` and `<stem>.svg` (the suffix is appended, so
//!   a stem like `out/ttft.v2` keeps its dot) and returns both paths, PNG first.
//! - Every series is a line with point markers. [`Source::Real`] series are
//!   solid with filled circles, [`Source::Sim`] series dashed with hollow
//!   triangles; a label gets the same colour in both sources, so the real and
//!   simulated curves of one configuration read as a pair. Legend entries are
//!   `"label (real)"` / `"label (sim)"`.
//! - Axis ranges come from the data with a margin. Points with a NaN or
//!   infinite coordinate are skipped (and, with `log_x`, points with x <= 0);
//!   a single point, all-equal values or no drawable point at all still give a
//!   valid chart.
//! - The legend sits in the corner where it hides the least of the curves;
//!   when every corner is taken, the y axis gets headroom above the data.
//! - `x_ticks`, when given, replaces the automatic x ticks with labelled ones at
//!   the given positions (e.g. `(0.0, "off")` for "no chunking").
//! - Text is drawn with DejaVu Sans embedded in this crate, so the PNG renders
//!   the same on a machine with no system fonts.
//!
//! ```
//! use figures::{draw, Chart, Series, Source};
//! # let dir = std::env::temp_dir().join(format!("figures-doc-{}", std::process::id()));
//! # std::fs::create_dir_all(&dir).unwrap();
//! let chart = Chart {
//!     title: "TTFT vs chunk size".into(),
//!     x_label: "chunk size (tokens)".into(),
//!     y_label: "TTFT (ms)".into(),
//!     series: vec![
//!         Series { label: "qps 4".into(), source: Source::Real, points: vec![(0.0, 310.0), (512.0, 180.0)] },
//!         Series { label: "qps 4".into(), source: Source::Sim, points: vec![(0.0, 290.0), (512.0, 175.0)] },
//!     ],
//!     x_ticks: Some(vec![(0.0, "off".into()), (512.0, "512".into())]),
//!     log_x: false,
//! };
//! let written = draw(&chart, &dir.join("ttft"))?;
//! assert_eq!(written, vec![dir.join("ttft.png"), dir.join("ttft.svg")]);
//! # std::fs::remove_dir_all(&dir).unwrap();
//! # Ok::<(), figures::FigureError>(())
//! ```

mod bounds;
mod font;
mod legend;
mod render;
mod style;

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use plotters::prelude::{BitMapBackend, IntoDrawingArea, SVGBackend};

/// Where a series' numbers come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Source {
    /// Measured on a real runner.
    Real,
    /// Produced by the simulator.
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

/// One curve: `(x, y)` points in drawing order.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    pub label: String,
    pub source: Source,
    pub points: Vec<(f64, f64)>,
}

/// A line chart. Units belong in the axis labels, e.g. `"TTFT (ms)"`.
#[derive(Debug, Clone, PartialEq)]
pub struct Chart {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    pub series: Vec<Series>,
    /// Categorical x tick labels at the given positions; `None` for automatic
    /// numeric ticks.
    pub x_ticks: Option<Vec<(f64, String)>>,
    /// Logarithmic x axis.
    pub log_x: bool,
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
