//! Where the legend goes. It sits in the corner of the plotting area where it
//! covers the least of the data (points, the lines between them, bars and
//! reference lines); when every corner would cover some, the y axis gets
//! headroom above the data and the legend goes in the freed upper right.
//! (A legend too big for either goes outside the plot: see `render`.)

use std::ops::Range;

use crate::bars;
use crate::bounds::{self, drawable_points, unit};
use crate::{Chart, Kind};

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

fn segment(samples: &mut Vec<(f64, f64)>, (x0, y0): (f64, f64), (x1, y1): (f64, f64)) {
    samples.extend((0..=SAMPLES_PER_SEGMENT).map(|i| {
        let t = i as f64 / SAMPLES_PER_SEGMENT as f64;
        (x0 + t * (x1 - x0), y0 + t * (y1 - y0))
    }));
}

/// Data samples in unit coordinates of the plotting area (0..1 on both axes).
fn unit_samples(chart: &Chart, x: &Range<f64>, y: &Range<f64>) -> Vec<(f64, f64)> {
    let (log_x, log_y) = (bounds::log_x(chart), bounds::log_y(chart));
    let to_unit = |p: (f64, f64)| (unit(p.0, x, log_x), unit(p.1, y, log_y));
    let mut samples = Vec::new();
    match chart.kind {
        Kind::Lines => {
            for series in &chart.series {
                let points: Vec<_> = drawable_points(series, chart)
                    .into_iter()
                    .map(to_unit)
                    .collect();
                samples.extend(points.iter().copied());
                for pair in points.windows(2) {
                    segment(&mut samples, pair[0], pair[1]);
                }
            }
        }
        Kind::Bars => {
            // A bar covers the column from the axis to its top: sample its
            // centre line and both edges.
            for bar in bars::layout(chart) {
                let top = unit(bar.value, y, log_y);
                for bx in [bar.x0, (bar.x0 + bar.x1) / 2.0, bar.x1] {
                    let ux = unit(bx, x, false);
                    segment(&mut samples, (ux, 0.0), (ux, top));
                }
            }
        }
    }
    for r in &chart.references {
        if r.y.is_finite() && (!log_y || r.y > 0.0) {
            let uy = unit(r.y, y, log_y);
            segment(&mut samples, (0.0, uy), (1.0, uy));
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
        y: bounds::stretch_end(&y, keep, bounds::log_y(chart)),
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
            series: curves
                .into_iter()
                .enumerate()
                .map(|(i, points)| Series::new(format!("s{i}"), Source::Real, points))
                .collect(),
            ..Chart::default()
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

    #[test]
    fn a_reference_line_along_the_top_counts_as_covered() {
        // Data in the lower left; the SLO line runs along the top.
        let mut c = chart(vec![vec![(0.0, 0.0), (1.0, 1.0)], vec![(10.0, 0.0)]]);
        c.references.push(crate::Reference {
            label: "SLO target".into(),
            y: 10.0,
        });
        let p = placed(&c);
        assert!(
            p.y.end > y_range(&c).end,
            "headroom above the reference: {:?}",
            p.y
        );
    }

    #[test]
    fn log_y_headroom_keeps_the_axis_positive() {
        let top: Vec<_> = (0..=10).map(|i| (i as f64, 5e4)).collect();
        let bottom: Vec<_> = (0..=10).map(|i| (i as f64, 5.0)).collect();
        let mut c = chart(vec![top, bottom]);
        c.y_scale = crate::YScale::Log;
        let before = y_range(&c);
        let p = placed(&c);
        assert_eq!(p.y.start, before.start);
        assert!(p.y.start > 0.0 && p.y.end > before.end, "{:?}", p.y);
    }
}
