//! Helpers shared by the drawing tests: scratch folders, output checks and
//! a little reading of the SVG that `figures::draw` writes.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

use figures::{Chart, Series, Source, FIGURE_SIZE};

/// A per-test directory, removed when the test ends.
pub struct Scratch(PathBuf);

impl Scratch {
    pub fn new(name: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("figures-test-{}-{name}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("create scratch dir");
        Scratch(dir)
    }

    pub fn join(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

pub fn series(label: &str, source: Source, points: &[(f64, f64)]) -> Series {
    Series::new(label, source, points.to_vec())
}

/// Width and height from the IHDR chunk, after checking the PNG signature.
pub fn png_size(bytes: &[u8]) -> (u32, u32) {
    assert!(bytes.len() > 24, "PNG too short: {} bytes", bytes.len());
    assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n", "PNG signature");
    assert_eq!(&bytes[12..16], b"IHDR", "first chunk is IHDR");
    let be = |b: &[u8]| u32::from_be_bytes([b[0], b[1], b[2], b[3]]);
    (be(&bytes[16..20]), be(&bytes[20..24]))
}

/// Checks that `paths` are `<stem>.png` and `<stem>.svg`, both well formed
/// at [`FIGURE_SIZE`]; returns their contents.
pub fn check_outputs(paths: &[PathBuf], stem: &Path) -> (Vec<u8>, String) {
    assert_eq!(paths.len(), 2);
    let png = &paths[0];
    let svg = &paths[1];
    assert_eq!(png.as_os_str(), format!("{}.png", stem.display()).as_str());
    assert_eq!(svg.as_os_str(), format!("{}.svg", stem.display()).as_str());
    let png_bytes = std::fs::read(png).expect("read png");
    let svg_text = std::fs::read_to_string(svg).expect("read svg");
    assert!(!png_bytes.is_empty() && !svg_text.is_empty());
    assert_eq!(png_size(&png_bytes), FIGURE_SIZE);
    assert!(
        svg_text.starts_with("<svg"),
        "{}",
        &svg_text[..svg_text.len().min(80)]
    );
    // Coordinates computed from NaN or infinite data would print as such.
    for bad in ["NaN", "=\"inf", "=\"-inf", "inf,", ",inf", ",-inf"] {
        assert!(!svg_text.contains(bad), "SVG holds {bad}");
    }
    (png_bytes, svg_text)
}

/// Draws `chart` into `dir` as `name` and returns the checked SVG text.
pub fn draw_svg(chart: &Chart, dir: &Scratch, name: &str) -> String {
    let stem = dir.join(name);
    let paths = figures::draw(chart, &stem).unwrap_or_else(|e| panic!("{name}: {e}"));
    check_outputs(&paths, &stem).1
}

/// The content of every text element: plotters writes each on a line of
/// its own, between the `<text ...>` and `</text>` lines.
pub fn texts(svg: &str) -> Vec<String> {
    let lines: Vec<&str> = svg.lines().collect();
    lines
        .windows(2)
        .filter(|w| w[0].trim_start().starts_with("<text"))
        .map(|w| w[1].trim().to_string())
        .collect()
}

pub fn has_text(svg: &str, text: &str) -> bool {
    texts(svg).iter().any(|t| t == text)
}

/// The value of attribute `name` in one SVG element's line.
pub fn attr<'a>(element: &'a str, name: &str) -> Option<&'a str> {
    let key = format!(" {name}=\"");
    let start = element.find(&key)? + key.len();
    let len = element[start..].find('"')?;
    Some(&element[start..start + len])
}

/// Lines of the SVG holding an element of this tag (`rect`, `polyline`, ...).
pub fn elements<'a>(svg: &'a str, tag: &str) -> Vec<&'a str> {
    let open = format!("<{tag} ");
    svg.lines()
        .filter(|l| l.trim_start().starts_with(&open))
        .collect()
}

/// The `points` of a polyline or polygon element.
pub fn points(element: &str) -> Vec<(f64, f64)> {
    attr(element, "points")
        .unwrap_or("")
        .split_whitespace()
        .filter_map(|p| {
            let (x, y) = p.split_once(',')?;
            Some((x.parse().ok()?, y.parse().ok()?))
        })
        .collect()
}

/// `#RRGGBB` as plotters writes colours.
pub fn hex((r, g, b): (u8, u8, u8)) -> String {
    format!("#{r:02X}{g:02X}{b:02X}")
}
