//! The chart features of the crate contract, checked in the SVG drawn:
//! subtitle, bars, the log-y rule, reference lines, the palette, wide
//! series, legend placement and charts with awkward data.

mod common;

use std::collections::HashSet;

use common::{attr, draw_svg, elements, has_text, hex, points, series, texts, Scratch};
use figures::{style_of, Chart, Kind, Reference, Series, Source, YScale, AUTO_LOG_RATIO};

const SUBTITLE: &str = "sim: h200-sxm · profile h200-qwen3-0.6b.ron · qwen3-0.6b · \
     cb_sweep, 8 conditions, 96 requests, 256-token prompts, 128 output tokens each, \
     closed loop at concurrency 1, 4, 16 and 64\nsecond line: a100-80gb-sxm roofline";

fn lines_chart(series: Vec<Series>) -> Chart {
    Chart {
        title: "TTFT vs concurrency".into(),
        x_label: "concurrency (clients)".into(),
        y_label: "TTFT (ms)".into(),
        series,
        ..Chart::default()
    }
}

fn bar_chart() -> Chart {
    Chart {
        title: "salt isolation".into(),
        kind: Kind::Bars,
        series: vec![
            series(
                "reader",
                Source::Real,
                &[(0.0, 10.0), (1.0, 90.0), (2.0, 88.0)],
            ),
            series(
                "reader",
                Source::Sim,
                &[(0.0, 12.0), (1.0, 85.0), (2.0, 86.0)],
            ),
            series(
                "cold",
                Source::Real,
                &[(0.0, 95.0), (1.0, 92.0), (2.0, 91.0)],
            ),
        ],
        x_ticks: Some(vec![
            (0.0, "a then a".into()),
            (1.0, "a then b".into()),
            (2.0, "none then a".into()),
        ]),
        ..Chart::default()
    }
}

/// Rectangles filled with `colour`.
fn filled_rects(svg: &str, colour: (u8, u8, u8)) -> usize {
    let fill = hex(colour);
    elements(svg, "rect")
        .iter()
        .filter(|r| attr(r, "fill") == Some(fill.as_str()))
        .count()
}

#[test]
fn subtitle_is_drawn_under_the_title_wrapped_at_spaces() {
    let dir = Scratch::new("subtitle");
    let chart = Chart {
        subtitle: SUBTITLE.into(),
        ..lines_chart(vec![series("a", Source::Sim, &[(1.0, 2.0), (2.0, 3.0)])])
    };
    let svg = draw_svg(&chart, &dir, "subtitle");
    let all = texts(&svg);
    let title_at = all.iter().position(|t| t == "TTFT vs concurrency").unwrap();
    let sub: Vec<&String> = all
        .iter()
        .skip(title_at + 1)
        .take_while(|t| !t.is_empty() && SUBTITLE.contains(t.as_str()))
        .collect();
    assert!(
        sub.len() >= 3,
        "the long first line wraps, the \\n starts another: {sub:?}"
    );
    // Every word survives whole, in order: the lines joined give the text.
    let joined = sub.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(" ");
    assert_eq!(joined, SUBTITLE.replace('\n', " "));
    for name in [
        "h200-sxm",
        "h200-qwen3-0.6b.ron",
        "qwen3-0.6b",
        "a100-80gb-sxm",
    ] {
        let whole = sub
            .iter()
            .any(|l| l.split(' ').any(|word| word.trim_end_matches(',') == name));
        assert!(whole, "{name} is one word of a subtitle line: {sub:?}");
    }
    assert!(sub.last().unwrap().starts_with("second line"), "{sub:?}");
    let none = draw_svg(&lines_chart(vec![]), &dir, "none");
    assert_eq!(
        texts(&none).iter().filter(|t| t.contains("h200")).count(),
        0
    );
}

#[test]
fn bars_draw_one_rect_per_bar_with_sim_in_a_lighter_fill() {
    let dir = Scratch::new("bars");
    let svg = draw_svg(&bar_chart(), &dir, "bars");
    // Reader real: 3 bars + 1 legend patch; cold real: the same, in its own colour.
    assert_eq!(filled_rects(&svg, style_of(0).colour), 4, "reader, real");
    assert_eq!(filled_rects(&svg, style_of(1).colour), 4, "cold, real");
    // Sim bars are outlined in the label's colour (3 bars + 1 legend patch).
    let outlined = elements(&svg, "rect")
        .iter()
        .filter(|r| attr(r, "fill") == Some("none"))
        .filter(|r| attr(r, "stroke") == Some(hex(style_of(0).colour).as_str()))
        .count();
    assert_eq!(outlined, 4, "reader, sim");
    for text in [
        "a then a",
        "none then a",
        "reader (real)",
        "reader (sim)",
        "cold (real)",
        "90",
    ] {
        assert!(has_text(&svg, text), "SVG lacks {text:?}");
    }
    let as_lines = Chart {
        kind: Kind::Lines,
        ..bar_chart()
    };
    let svg = draw_svg(&as_lines, &dir, "lines");
    assert_eq!(
        filled_rects(&svg, style_of(0).colour),
        0,
        "no bars in a line chart"
    );
}

#[test]
fn a_bar_chart_without_ticks_has_a_category_per_x_value() {
    let dir = Scratch::new("bars-no-ticks");
    let chart = Chart {
        kind: Kind::Bars,
        series: vec![
            series("tok/s", Source::Sim, &[(2048.0, 900.0), (512.0, 700.0)]),
            series("other", Source::Sim, &[(512.0, 650.0), (f64::NAN, 1.0)]),
        ],
        ..Chart::default()
    };
    let svg = draw_svg(&chart, &dir, "bars");
    assert!(has_text(&svg, "512") && has_text(&svg, "2048"));
    let sim_fill = elements(&svg, "rect")
        .iter()
        .filter(|r| attr(r, "fill") == Some("none"))
        .filter(|r| {
            let stroke = attr(r, "stroke");
            stroke == Some(hex(style_of(0).colour).as_str())
                || stroke == Some(hex(style_of(1).colour).as_str())
        })
        .count();
    assert_eq!(sim_fill, 3 + 2, "three bars and two legend patches");
}

#[test]
fn auto_y_scale_turns_log_past_the_ratio() {
    let auto = |ys: &[f64], refs: &[f64]| Chart {
        y_scale: YScale::Auto,
        references: refs
            .iter()
            .map(|&y| Reference {
                label: "target".into(),
                y,
            })
            .collect(),
        ..lines_chart(vec![Series::new(
            "a",
            Source::Sim,
            ys.iter().enumerate().map(|(i, &y)| (i as f64, y)).collect(),
        )])
    };
    assert!(
        auto(&[3.0, 120.0, 52_000.0], &[]).log_y(),
        "cb_sweep's TTFT"
    );
    assert!(!auto(&[10.0, 250.0], &[]).log_y());
    assert!(
        !auto(&[10.0, 10.0 * AUTO_LOG_RATIO], &[]).log_y(),
        "at the ratio"
    );
    assert!(auto(&[10.0, 10.0 * AUTO_LOG_RATIO * 1.01], &[]).log_y());
    assert!(
        !auto(&[0.0, 5.0, 50_000.0], &[]).log_y(),
        "zero cannot be on log"
    );
    assert!(!auto(&[10.0, f64::NAN, f64::INFINITY, 20.0], &[]).log_y());
    assert!(auto(&[10.0, 20.0], &[2000.0]).log_y(), "references count");
    assert!(!auto(&[], &[]).log_y());
    let fixed = |scale| Chart {
        y_scale: scale,
        ..auto(&[3.0, 52_000.0], &[])
    };
    assert!(!fixed(YScale::Linear).log_y() && fixed(YScale::Log).log_y());

    let dir = Scratch::new("auto-log");
    let svg = draw_svg(&auto(&[3.0, 120.0, 52_000.0], &[]), &dir, "log");
    for tick in ["10", "100", "1000", "10000"] {
        assert!(has_text(&svg, tick), "decade tick {tick}");
    }
    assert!(
        !has_text(&svg, "20000"),
        "linear ticks would step by 10000s"
    );
    let svg = draw_svg(&auto(&[10.0, 250.0], &[]), &dir, "linear");
    assert!(
        has_text(&svg, "100") && has_text(&svg, "200"),
        "linear ticks"
    );
}

#[test]
fn a_reference_is_a_labelled_target_line_not_a_series() {
    let dir = Scratch::new("reference");
    let chart = Chart {
        references: vec![Reference {
            label: "TTFT SLO 2000 ms (target)".into(),
            y: 2000.0,
        }],
        ..lines_chart(vec![series(
            "h200-sxm",
            Source::Sim,
            &[(1.0, 300.0), (10.0, 900.0), (40.0, 5000.0)],
        )])
    };
    let svg = draw_svg(&chart, &dir, "reference");
    let all = texts(&svg);
    assert!(has_text(&svg, "TTFT SLO 2000 ms (target)"), "{all:?}");
    assert!(has_text(&svg, "h200-sxm (sim)"));
    let tagged = all.iter().filter(|t| t.ends_with("(sim)")).count();
    assert_eq!(tagged, 1, "only the series says sim: {all:?}");
    assert!(!all.iter().any(|t| t.contains("(target) (")), "{all:?}");
    // The line: dark grey dashes at one height across the whole plot.
    let dashes: Vec<Vec<(f64, f64)>> = elements(&svg, "polyline")
        .iter()
        .filter(|l| attr(l, "stroke") == Some("#3C3C3C"))
        .map(|l| points(l))
        .collect();
    let mut spans: std::collections::BTreeMap<i64, (f64, f64)> = Default::default();
    for &(x, y) in dashes.iter().flatten() {
        let e = spans.entry(y.round() as i64).or_insert((x, x));
        *e = (e.0.min(x), e.1.max(x));
    }
    // One height across the plot, one for the legend's sample.
    assert_eq!(spans.len(), 2, "{spans:?}");
    let span = spans.values().map(|(lo, hi)| hi - lo).fold(0.0, f64::max);
    assert!(
        span > 0.7 * f64::from(figures::FIGURE_SIZE.0),
        "span {span}"
    );
}

#[test]
fn thirteen_labels_get_twelve_colours_before_one_repeats() {
    let styles: Vec<_> = (0..13).map(style_of).collect();
    let first12: HashSet<(u8, u8, u8)> = styles[..12].iter().map(|s| s.colour).collect();
    assert_eq!(first12.len(), 12);
    assert_eq!(
        styles[12].colour, styles[0].colour,
        "the 13th reuses a colour"
    );
    assert_ne!(styles[12].marker, styles[0].marker, "with another marker");

    let dir = Scratch::new("palette");
    let chart = lines_chart(
        (0..13)
            .map(|i| {
                let pts: Vec<(f64, f64)> = (0..4).map(|x| (x as f64, (x * i) as f64)).collect();
                Series::new(format!("gpu-{i}"), Source::Real, pts)
            })
            .collect(),
    );
    let svg = draw_svg(&chart, &dir, "palette");
    let strokes: HashSet<&str> = elements(&svg, "polyline")
        .iter()
        .filter(|l| attr(l, "stroke-width") == Some("2"))
        .filter_map(|l| attr(l, "stroke"))
        .collect();
    for s in &styles[..12] {
        assert!(
            strokes.contains(hex(s.colour).as_str()),
            "{:?} drawn",
            s.colour
        );
    }
    assert!(has_text(&svg, "gpu-12 (real)"));
}

#[test]
fn a_wide_series_is_drawn_first_and_thicker() {
    let dir = Scratch::new("wide");
    let same = [(1.0, 5.0), (2.0, 5.0), (3.0, 6.0)];
    let mut cold = series("cold", Source::Sim, &same);
    cold.wide = true;
    let warm = series("warm", Source::Sim, &same);
    let svg = draw_svg(&lines_chart(vec![warm, cold]), &dir, "wide");
    let lines = elements(&svg, "polyline");
    let first = |colour: (u8, u8, u8), width: &str| {
        lines.iter().position(|l| {
            attr(l, "stroke") == Some(hex(colour).as_str())
                && attr(l, "stroke-width") == Some(width)
        })
    };
    let wide = first(style_of(1).colour, "6").expect("the wide series, 3x thick");
    let thin = first(style_of(0).colour, "2").expect("the thin series");
    assert!(
        wide < thin,
        "wide underneath: drawn at {wide}, thin at {thin}"
    );
}

#[test]
fn a_series_of_hundreds_of_points_is_a_line_without_markers() {
    let dir = Scratch::new("unmarked");
    let dense: Vec<(f64, f64)> = (0..300).map(|i| (i as f64, (i % 7) as f64)).collect();
    let sparse: Vec<(f64, f64)> = (0..=figures::MAX_MARKED_POINTS)
        .map(|i| (i as f64, 3.0))
        .collect();
    let polygons = |points: &[(f64, f64)]| {
        let chart = lines_chart(vec![series("s", Source::Real, points)]);
        let svg = draw_svg(&chart, &dir, &format!("n{}", points.len()));
        assert!(!elements(&svg, "polyline").is_empty(), "the line is drawn");
        elements(&svg, "polygon").len()
    };
    // The legend's sample marker is a polygon too.
    let legend = polygons(&dense);
    assert!(legend <= 2, "no marker per point: {legend} polygons");
    let marked = &sparse[..figures::MAX_MARKED_POINTS];
    assert_eq!(polygons(marked), figures::MAX_MARKED_POINTS + legend);
    assert_eq!(polygons(&sparse), legend, "one point past the limit");
}

#[test]
fn the_legend_box_covers_no_marker() {
    let dir = Scratch::new("legend");
    // Curves along the top and the bottom leave no free corner.
    let top: Vec<(f64, f64)> = (0..=10).map(|i| (i as f64, 100.0)).collect();
    let bottom: Vec<(f64, f64)> = (0..=10).map(|i| (i as f64, 0.0)).collect();
    let rising: Vec<(f64, f64)> = (0..=10).map(|i| (i as f64, (i * i) as f64)).collect();
    for (name, curves) in [("full", vec![top, bottom]), ("rising", vec![rising])] {
        let chart = lines_chart(
            curves
                .into_iter()
                .enumerate()
                .map(|(i, p)| Series::new(format!("s{i}"), Source::Real, p))
                .collect(),
        );
        let svg = draw_svg(&chart, &dir, name);
        let legend = elements(&svg, "rect")
            .into_iter()
            .find(|r| attr(r, "opacity") == Some("0.88"))
            .expect("legend box");
        let num = |k: &str| attr(legend, k).unwrap().parse::<f64>().unwrap();
        let (x, y, w, h) = (num("x"), num("y"), num("width"), num("height"));
        let markers = elements(&svg, "polygon");
        assert!(markers.len() > 10, "{name}: one polygon per marker");
        for marker in markers {
            let p = points(marker);
            let cx = p.iter().map(|q| q.0).sum::<f64>() / p.len() as f64;
            let cy = p.iter().map(|q| q.1).sum::<f64>() / p.len() as f64;
            let inside = cx > x && cx < x + w && cy > y && cy < y + h;
            // The legend's own sample markers sit inside it, left of the text.
            let sample = cx < x + 60.0;
            assert!(
                !inside || sample,
                "{name}: marker at ({cx}, {cy}) under the legend"
            );
        }
    }
}

#[test]
fn awkward_data_still_draws_in_every_kind_and_scale() {
    let dir = Scratch::new("awkward");
    let bad = [
        (1.0, 5.0),
        (f64::NAN, 1.0),
        (2.0, f64::INFINITY),
        (3.0, f64::NEG_INFINITY),
    ];
    let equal = [(1.0, 7.0), (2.0, 7.0), (3.0, 7.0)];
    let reference = vec![Reference {
        label: "target".into(),
        y: f64::NAN,
    }];
    for kind in [Kind::Lines, Kind::Bars] {
        for scale in [YScale::Linear, YScale::Log, YScale::Auto] {
            for (data, points) in [("bad", &bad[..]), ("equal", &equal[..]), ("none", &[][..])] {
                let name = format!("{kind:?}-{scale:?}-{data}");
                let chart = Chart {
                    kind,
                    y_scale: scale,
                    references: reference.clone(),
                    ..lines_chart(vec![series("a", Source::Real, points)])
                };
                let svg = draw_svg(&chart, &dir, &name);
                assert!(has_text(&svg, "a (real)"), "{name}");
            }
        }
    }
}
