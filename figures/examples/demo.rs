//! Draws sample charts into the directory given as the first argument
//! (default: the current directory), to eyeball the style:
//! `cargo run -p figures --example demo -- /tmp`.
//!
//! `demo-chunk`: categorical ticks, real and sim pairs, a subtitle;
//! `demo-log`: log x, a y span that [`YScale::Auto`] draws on a log axis,
//! and an SLO target line; `demo-bars`: grouped real and sim bars;
//! `demo-wide`: two series on the same points, the wide one underneath.

use std::path::PathBuf;

use figures::{draw, Chart, FigureError, Kind, Reference, Series, Source, YScale};

const SUBTITLE: &str = "sim: h200-sxm · profile h200-qwen3-0.6b.ron · qwen3-0.6b · \
                        1000 requests, 256-token prompts, 128 output tokens";

fn chunked() -> Chart {
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
            let label = if c == 0.0 {
                "off".into()
            } else {
                c.to_string()
            };
            (c, label)
        })
        .collect();
    Chart {
        title: "TTFT p50 vs chunk size".into(),
        subtitle: SUBTITLE.into(),
        x_label: "chunk size (tokens)".into(),
        y_label: "TTFT p50 (ms)".into(),
        series: vec![
            Series::new("qps 2", Source::Real, curve(80.0, 20.0)),
            Series::new("qps 2", Source::Sim, curve(76.0, 22.0)),
            Series::new("qps 8", Source::Real, curve(240.0, 60.0)),
            Series::new("qps 8", Source::Sim, curve(250.0, 55.0)),
            Series::new("qps 16", Source::Sim, curve(500.0, 90.0)),
        ],
        x_ticks: Some(ticks),
        ..Chart::default()
    }
}

fn log() -> Chart {
    let clients = [1.0, 4.0, 16.0, 64.0];
    let ttft = |base: f64, growth: f64| -> Vec<(f64, f64)> {
        clients
            .iter()
            .map(|&c: &f64| (c, base * growth.powf(c.log2())))
            .collect()
    };
    Chart {
        title: "median TTFT vs concurrency".into(),
        subtitle: SUBTITLE.into(),
        x_label: "concurrency (clients)".into(),
        y_label: "median TTFT (ms)".into(),
        series: vec![
            Series::new("max_num_seqs=1", Source::Sim, ttft(3.0, 5.2)),
            Series::new("max_num_seqs=256", Source::Sim, ttft(3.0, 1.1)),
        ],
        references: vec![Reference {
            label: "TTFT SLO 2000 ms (target)".into(),
            y: 2000.0,
        }],
        log_x: true,
        y_scale: YScale::Auto,
        ..Chart::default()
    }
}

fn bars() -> Chart {
    let cases = ["a then a", "a then b", "none then a", "a then none"];
    let values = |v: [f64; 4]| -> Vec<(f64, f64)> {
        v.iter()
            .copied()
            .enumerate()
            .map(|(i, y)| (i as f64, y))
            .collect()
    };
    Chart {
        title: "reader TTFT vs cold TTFT per case".into(),
        subtitle: SUBTITLE.into(),
        kind: Kind::Bars,
        x_label: "writer salt then reader salt".into(),
        y_label: "TTFT (ms)".into(),
        series: vec![
            Series::new("reader", Source::Real, values([11.0, 96.0, 95.0, 97.0])),
            Series::new("reader", Source::Sim, values([10.0, 92.0, 92.0, 92.0])),
            Series::new(
                "cold reference",
                Source::Real,
                values([97.0, 95.0, 96.0, 95.0]),
            ),
            Series::new(
                "cold reference",
                Source::Sim,
                values([92.0, 92.0, 92.0, 92.0]),
            ),
        ],
        x_ticks: Some(
            cases
                .iter()
                .enumerate()
                .map(|(i, c)| (i as f64, c.to_string()))
                .collect(),
        ),
        ..Chart::default()
    }
}

fn wide() -> Chart {
    let rounds: Vec<(f64, f64)> = (1..=5).map(|r| (f64::from(r), 92.0)).collect();
    let mut cold = Series::new("cold, caching off", Source::Sim, rounds.clone());
    cold.wide = true;
    Chart {
        title: "cold vs warm TTFT per round".into(),
        subtitle: SUBTITLE.into(),
        x_label: "round".into(),
        y_label: "TTFT (ms)".into(),
        series: vec![cold, Series::new("warm, caching off", Source::Sim, rounds)],
        ..Chart::default()
    }
}

fn main() -> Result<(), FigureError> {
    let dir = PathBuf::from(std::env::args().nth(1).unwrap_or_else(|| ".".into()));
    for (chart, stem) in [
        (chunked(), "demo-chunk"),
        (log(), "demo-log"),
        (bars(), "demo-bars"),
        (wide(), "demo-wide"),
    ] {
        for path in draw(&chart, &dir.join(stem))? {
            println!("{}", path.display());
        }
    }
    Ok(())
}
