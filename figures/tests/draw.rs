//! Drawing to disk: both files, their content, and the failure paths.

mod common;

use std::path::Path;

use common::{check_outputs, series, Scratch};
use figures::{draw, Chart, FigureError, Source};

fn ttft_chart() -> Chart {
    Chart {
        title: "TTFT vs chunk size".to_string(),
        x_label: "chunk size (tokens)".to_string(),
        y_label: "TTFT (ms)".to_string(),
        series: vec![
            series(
                "qps 2",
                Source::Real,
                &[(0.0, 90.0), (256.0, 120.0), (512.0, 100.0), (1024.0, 95.0)],
            ),
            series(
                "qps 2",
                Source::Sim,
                &[(0.0, 85.0), (256.0, 115.0), (512.0, 104.0), (1024.0, 92.0)],
            ),
            series(
                "qps 8",
                Source::Real,
                &[
                    (0.0, 400.0),
                    (256.0, 260.0),
                    (512.0, 240.0),
                    (1024.0, 300.0),
                ],
            ),
            series(
                "qps 8",
                Source::Sim,
                &[
                    (0.0, 380.0),
                    (256.0, 270.0),
                    (512.0, 230.0),
                    (1024.0, 310.0),
                ],
            ),
        ],
        x_ticks: Some(vec![
            (0.0, "off".to_string()),
            (256.0, "256".to_string()),
            (512.0, "512".to_string()),
            (1024.0, "1024".to_string()),
        ]),
        ..Chart::default()
    }
}

#[test]
fn draws_png_and_svg_with_title_labels_legend_and_ticks() {
    let scratch = Scratch::new("ttft");
    let stem = scratch.join("ttft");
    let paths = draw(&ttft_chart(), &stem).expect("draw");
    let (_, svg) = check_outputs(&paths, &stem);
    for text in [
        "TTFT vs chunk size",
        "chunk size (tokens)",
        "TTFT (ms)",
        "qps 2 (real)",
        "qps 2 (sim)",
        "qps 8 (sim)",
        "off",
        "1024",
    ] {
        // plotters writes each text element's content on a line of its own.
        assert!(
            svg.lines().any(|line| line.trim() == text),
            "SVG lacks text {text:?}"
        );
    }
}

#[test]
fn sim_series_are_dashed_and_real_series_are_not() {
    let only = |source| Chart {
        series: vec![series("a", source, &[(1.0, 1.0), (100.0, 2.0)])],
        ..ttft_chart()
    };
    let dir = Scratch::new("dash");
    let real = draw(&only(Source::Real), &dir.join("real")).expect("draw real");
    let sim = draw(&only(Source::Sim), &dir.join("sim")).expect("draw sim");
    // A dashed line is drawn as many short segments, a solid one as one
    // polyline, so the sim SVG has many more line elements.
    let count = |p: &Path| {
        let text = std::fs::read_to_string(p).expect("read svg");
        text.matches("<polyline").count() + text.matches("<line").count()
    };
    assert!(
        count(&sim[1]) > count(&real[1]) + 5,
        "{} vs {}",
        count(&sim[1]),
        count(&real[1])
    );
}

#[test]
fn stem_with_dot_keeps_its_name() {
    let scratch = Scratch::new("dot");
    let stem = scratch.join("ttft.v2");
    let paths = draw(&ttft_chart(), &stem).expect("draw");
    check_outputs(&paths, &stem);
}

#[test]
fn empty_and_degenerate_charts_draw() {
    let dir = Scratch::new("degenerate");
    let empty = Chart {
        series: vec![],
        x_ticks: None,
        ..ttft_chart()
    };
    let no_points = Chart {
        series: vec![series("a", Source::Real, &[])],
        ..empty.clone()
    };
    let single = Chart {
        series: vec![series("a", Source::Sim, &[(3.0, 3.0)])],
        ..empty.clone()
    };
    let equal_and_bad = Chart {
        series: vec![series(
            "a",
            Source::Real,
            &[
                (1.0, 5.0),
                (f64::NAN, 1.0),
                (2.0, f64::INFINITY),
                (3.0, 5.0),
            ],
        )],
        ..empty.clone()
    };
    let log_with_zero = Chart {
        series: vec![series(
            "a",
            Source::Real,
            &[(0.0, 1.0), (10.0, 2.0), (1000.0, 3.0)],
        )],
        log_x: true,
        ..empty.clone()
    };
    let log_ticks = Chart {
        x_ticks: Some(vec![(10.0, "ten".to_string()), (1000.0, "1k".to_string())]),
        ..log_with_zero.clone()
    };
    for (name, chart) in [
        ("empty", empty),
        ("no_points", no_points),
        ("single", single),
        ("equal_and_bad", equal_and_bad),
        ("log_with_zero", log_with_zero),
        ("log_ticks", log_ticks),
    ] {
        let stem = dir.join(name);
        let paths = draw(&chart, &stem).unwrap_or_else(|e| panic!("{name}: {e}"));
        check_outputs(&paths, &stem);
    }
}

#[test]
fn missing_output_dir_is_a_typed_error_naming_it() {
    let scratch = Scratch::new("missing");
    let dir = scratch.join("does-not-exist");
    let err = draw(&ttft_chart(), &dir.join("fig")).expect_err("must fail");
    match &err {
        FigureError::MissingOutputDir { dir: reported } => assert_eq!(reported, &dir),
        other => panic!("unexpected error {other:?}"),
    }
    assert!(err.to_string().contains("does-not-exist"), "{err}");
}

#[test]
fn output_dir_that_is_a_file_is_rejected() {
    let scratch = Scratch::new("file");
    let file = scratch.join("plain-file");
    std::fs::write(&file, b"x").expect("write file");
    let err = draw(&ttft_chart(), &file.join("fig")).expect_err("must fail");
    assert!(
        matches!(err, FigureError::MissingOutputDir { .. }),
        "{err:?}"
    );
    assert!(err.to_string().contains("plain-file"), "{err}");
}

#[test]
fn unwritable_output_file_is_a_typed_error_naming_it() {
    // A directory where the SVG should go makes the write itself fail.
    let dir = Scratch::new("blocked");
    std::fs::create_dir_all(dir.join("fig.svg")).expect("create blocking dir");
    let err = draw(&ttft_chart(), &dir.join("fig")).expect_err("must fail");
    match &err {
        FigureError::Write { path, .. } => assert_eq!(path, &dir.join("fig.svg")),
        other => panic!("unexpected error {other:?}"),
    }
    assert!(err.to_string().contains("fig.svg"), "{err}");
}
