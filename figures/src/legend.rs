//! Where the legend goes. It sits in the corner of the plotting area where it
//! covers the least of the curves (points and the lines between them); when
//! every corner would cover some, the y axis gets headroom above the data and
//! the legend goes in the freed upper right.

use std::ops::Range;

use crate::bounds::drawable_points;
use crate::Chart;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Corner {
    UpperLeft,
    UpperRight,
    LowerLeft,
    LowerRight,
}

/// Legend box size as fractions of the plotting area's width and height.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct BoxFraction {
    pub width: f64,
    pub height: f64,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Placement {
    pub corner: Corner,
    /// The y range to draw with: the input range, or one with headroom.
    pub y: Range<f64>,
}

/// Points sampled along each segment, so a line crossing a corner counts
/// even when no data point lies in it.
const SAMPLES_PER_SEGMENT: usize = 16;
/// Gap left between the data and the legend when headroom is added.
const HEADROOM_GAP: f64 = 0.04;

/// Curve samples in unit coordinates of the plotting area (0..1 on both axes).
fn unit_samples(chart: &Chart, x: &Range<f64>, y: &Range<f64>) -> Vec<(f64, f64)> {
    let to_unit = |p: (f64, f64)| {
        let ux = if chart.log_x {
            (p.0.log10() - x.start.log10()) / (x.end.log10() - x.start.log10())
        } else {
            (p.0 - x.start) / (x.end - x.start)
        };
        (ux, (p.1 - y.start) / (y.end - y.start))
    };
    let mut samples = Vec::new();
    for series in &chart.series {
        let unit: Vec<_> = drawable_points(series, chart.log_x)
            .into_iter()
            .map(to_unit)
            .collect();
        samples.extend(unit.iter().copied());
        for pair in unit.windows(2) {
            let ((x0, y0), (x1, y1)) = (pair[0], pair[1]);
            samples.extend((1..SAMPLES_PER_SEGMENT).map(|i| {
                let t = i as f64 / SAMPLES_PER_SEGMENT as f64;
                (x0 + t * (x1 - x0), y0 + t * (y1 - y0))
            }));
        }
    }
    samples
}

fn covers(corner: Corner, size: BoxFraction, (ux, uy): (f64, f64)) -> bool {
    let in_x = match corner {
        Corner::UpperLeft | Corner::LowerLeft => ux <= size.width,
        Corner::UpperRight | Corner::LowerRight => ux >= 1.0 - size.width,
    };
    let in_y = match corner {
        Corner::UpperLeft | Corner::UpperRight => uy >= 1.0 - size.height,
        Corner::LowerLeft | Corner::LowerRight => uy <= size.height,
    };
    in_x && in_y
}

pub(crate) fn place(chart: &Chart, x: &Range<f64>, y: Range<f64>, size: BoxFraction) -> Placement {
    let samples = unit_samples(chart, x, &y);
    // Ties keep this order: upper corners read first.
    let best = [
        Corner::UpperRight,
        Corner::UpperLeft,
        Corner::LowerRight,
        Corner::LowerLeft,
    ]
    .into_iter()
    .map(|c| (c, samples.iter().filter(|&&p| covers(c, size, p)).count()))
    .min_by_key(|&(_, covered)| covered)
    .unwrap_or((Corner::UpperRight, 0));
    let (corner, covered) = best;
    // A legend nearly as tall as the plot cannot be given headroom.
    if covered == 0 || size.height >= 1.0 - HEADROOM_GAP {
        return Placement { corner, y };
    }
    let keep = 1.0 - size.height - HEADROOM_GAP;
    Placement {
        corner: Corner::UpperRight,
        y: y.start..y.start + (y.end - y.start) / keep,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bounds::{x_range, y_range};
    use crate::{Series, Source};

    const SIZE: BoxFraction = BoxFraction {
        width: 0.3,
        height: 0.25,
    };

    fn chart(curves: Vec<Vec<(f64, f64)>>) -> Chart {
        Chart {
            title: String::new(),
            x_label: String::new(),
            y_label: String::new(),
            series: curves
                .into_iter()
                .enumerate()
                .map(|(i, points)| Series {
                    label: format!("s{i}"),
                    source: Source::Real,
                    points,
                })
                .collect(),
            x_ticks: None,
            log_x: false,
        }
    }

    fn placed(c: &Chart) -> Placement {
        place(c, &x_range(c), y_range(c), SIZE)
    }

    #[test]
    fn legend_avoids_the_crowded_corner() {
        let rising: Vec<_> = (0..20).map(|i| (i as f64, (i * i) as f64)).collect();
        let p = placed(&chart(vec![rising]));
        assert_eq!(p.corner, Corner::UpperLeft);
        let falling: Vec<_> = (0..20).map(|i| (i as f64, (400 - i * i) as f64)).collect();
        let p = placed(&chart(vec![falling]));
        assert_eq!(p.corner, Corner::UpperRight);
    }

    #[test]
    fn lines_between_points_count_as_covered() {
        // The line from (0, 3) to (3, 10) crosses the upper left corner
        // without a data point there; each other corner holds one point.
        let c = chart(vec![
            vec![(0.0, 3.0), (3.0, 10.0)],
            vec![(10.0, 10.0)],
            vec![(10.0, 0.0)],
            vec![(0.0, 0.0)],
        ]);
        assert_ne!(placed(&c).corner, Corner::UpperLeft);
    }

    #[test]
    fn headroom_is_added_when_every_corner_is_taken() {
        // Curves along the top and the bottom edge fill all four corners.
        let top: Vec<_> = (0..=10).map(|i| (i as f64, 100.0)).collect();
        let bottom: Vec<_> = (0..=10).map(|i| (i as f64, 0.0)).collect();
        let c = chart(vec![top, bottom]);
        let before = y_range(&c);
        let p = placed(&c);
        assert_eq!(p.y.start, before.start);
        assert!(p.y.end > before.end, "{:?} vs {before:?}", p.y);
        // With the new range the top curve sits below the legend box.
        let top_unit = (100.0 - p.y.start) / (p.y.end - p.y.start);
        assert!(top_unit < 1.0 - SIZE.height, "{top_unit}");
    }

    #[test]
    fn empty_chart_keeps_its_range() {
        let c = chart(vec![]);
        assert_eq!(placed(&c).y, y_range(&c));
    }
}
