//! Draws two sample charts (categorical ticks; log x) into the directory given
//! as the first argument (default: the current directory), to eyeball the
//! style: `cargo run -p figures --example demo -- /tmp`.

use std::path::PathBuf;

use figures::{draw, Chart, FigureError, Series, Source};

fn series(label: &str, source: Source, points: Vec<(f64, f64)>) -> Series {
    Series {
        label: label.to_string(),
        source,
        points,
    }
}

fn main() -> Result<(), FigureError> {
    let dir = PathBuf::from(std::env::args().nth(1).unwrap_or_else(|| ".".into()));
    let chunks = [0.0, 256.0, 512.0, 1024.0, 2048.0];
    let curve = |base: f64, scale: f64| -> Vec<(f64, f64)> {
        let shape = |c: f64| ((c - 900.0) / 600.0).powi(2);
        chunks
            .iter()
            .map(|&c| (c, base + scale * shape(c)))
            .collect()
    };
    let ticks = chunks
        .iter()
        .map(|&c| {
            (
                c,
                if c == 0.0 {
                    "off".to_string()
                } else {
                    format!("{c}")
                },
            )
        })
        .collect();
    let chunked = Chart {
        title: "TTFT p50 vs chunk size".into(),
        x_label: "chunk size (tokens)".into(),
        y_label: "TTFT p50 (ms)".into(),
        series: vec![
            series("qps 2", Source::Real, curve(80.0, 20.0)),
            series("qps 2", Source::Sim, curve(76.0, 22.0)),
            series("qps 8", Source::Real, curve(240.0, 60.0)),
            series("qps 8", Source::Sim, curve(250.0, 55.0)),
            series("qps 16", Source::Sim, curve(500.0, 90.0)),
        ],
        x_ticks: Some(ticks),
        log_x: false,
    };
    let log = Chart {
        title: "Throughput vs batch size".into(),
        x_label: "max batch size (requests)".into(),
        y_label: "throughput (tokens/s)".into(),
        series: vec![
            series(
                "h100-sxm",
                Source::Sim,
                (0..8)
                    .map(|i| (2f64.powi(i), 900.0 * 2f64.powi(i).sqrt()))
                    .collect(),
            ),
            series(
                "rtx-4090",
                Source::Real,
                (0..8)
                    .map(|i| (2f64.powi(i), 400.0 * 2f64.powi(i).sqrt()))
                    .collect(),
            ),
        ],
        x_ticks: None,
        log_x: true,
    };
    for (chart, stem) in [(chunked, "demo-chunk"), (log, "demo-log")] {
        for path in draw(&chart, &dir.join(stem))? {
            println!("{}", path.display());
        }
    }
    Ok(())
}
