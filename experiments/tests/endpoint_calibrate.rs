//! `exp calibrate --endpoint URL` against `exp serve --mode sim`'s server:
//! the black-box profile's provenance names the endpoint, and its decode
//! and prefill steps (a cached prefix's among them) match the cost model
//! the server runs on, all but at most one of the checks, with no HTTP
//! round trip in them. Its own test binary (cargo runs test binaries one
//! after another), so no other test loads the two cores while the probes
//! time the server.

#[path = "integration/sim_server.rs"]
mod sim_server;

use experiments::backend::cost::resolve;
use experiments::backend::{CostSource, LoadedModel, ModelChoice};
use sim_server::SimServer;

/// Tolerance of the black-box profile's steps against the cost model the
/// mock server runs on: 25 %, or 0.25 ms where that is larger. A profile
/// that kept the HTTP round trip of a TTFT in its prefill steps is 36-40 %
/// (0.9-1.6 ms) off on the prefills checked here.
const CALIBRATION_TOLERANCE_PCT: f64 = 25.0;
const CALIBRATION_TOLERANCE_S: f64 = 0.25e-3;
/// Tolerance of 32 and 64 decodes: the mock's engine loop writes an SSE
/// chunk per sequence each step on the same two cores as the client, so
/// while other tests or builds load them a 1.1 ms step of 64 decodes
/// measures up to 1.5 ms (0.87 ms at 32).
const BUSY_DECODE_TOLERANCE_PCT: f64 = 50.0;
/// Checks that may fall outside their tolerance. On two cores shared by
/// the client and the server, one probe in some runs lands that far off on
/// its own (seen: 64 decodes 56 %, or the cached prefill 26 %, each alone,
/// on an idle machine); a profile that kept the round trip is off on all
/// three prefills, and a broken fit on most checks.
const CHECKS_ALLOWED_OFF: usize = 1;

#[test]
fn calibrating_against_the_mock_recovers_its_decode_and_prefill_steps() {
    let time_scale = 0.5;
    let server = SimServer::start(time_scale);
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("endpoint-calibrate");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch dir");
    let out = dir.join("endpoint.ron");
    let args = [
        "calibrate",
        "--endpoint",
        &server.url,
        "--out",
        out.to_str().unwrap(),
    ];
    experiments::run_cli(std::iter::once("exp").chain(args.iter().copied().chain(["--quiet"])))
        .expect("calibration runs against the endpoint");
    let fitted = calibration::CostProfile::load(&out).expect("profile written");
    assert!(fitted
        .provenance
        .device
        .starts_with("endpoint http://127.0.0.1:"));
    assert!(fitted
        .provenance
        .method
        .starts_with("black-box: endpoint probes"));
    let model = LoadedModel::config_only(&ModelChoice::Preset("qwen3-0.6b".into())).unwrap();
    let truth = resolve(&CostSource::Default("h200-sxm".into()), &model).unwrap();
    let mut report = Vec::new();
    let mut off = 0;
    for (what, shape, tolerance_pct) in probe_checks() {
        let expected = truth.model.step_seconds(&shape) * time_scale;
        let got = sim::CostModel::step_seconds(&fitted, &shape);
        let error = (got - expected).abs() / expected * 100.0;
        if error >= tolerance_pct && (got - expected).abs() >= CALIBRATION_TOLERANCE_S {
            off += 1;
        }
        report.push(format!(
            "{what}: fitted {:.3} ms, server {:.3} ms ({error:.1} %)",
            got * 1e3,
            expected * 1e3
        ));
    }
    assert!(
        off <= CHECKS_ALLOWED_OFF,
        "{off} steps off the server's:\n{}",
        report.join("\n")
    );
}

fn seqs(n: usize, new_tokens: u32, context_before: u32) -> Vec<engine::SeqShape> {
    let seq = engine::SeqShape {
        new_tokens,
        context_before,
        samples: true,
    };
    vec![seq; n]
}

/// The steps the experiments run: decodes at 1-64 sequences, cb_sweep's
/// cold prefill and its prefill beside 16 decodes, and prefix_cache's warm
/// prefill (32 new tokens over a 3200-token cached prefix), whose TTFT
/// also holds the HTTP round trip that a profile of the server's steps
/// must leave out.
fn probe_checks() -> Vec<(String, engine::BatchShape, f64)> {
    let mut out: Vec<(String, engine::BatchShape, f64)> = [1, 8, 32, 64]
        .into_iter()
        .map(|c| {
            let tolerance = if c >= 32 {
                BUSY_DECODE_TOLERANCE_PCT
            } else {
                CALIBRATION_TOLERANCE_PCT
            };
            let seqs = seqs(c, 1, 600);
            (
                format!("{c} decodes"),
                engine::BatchShape { seqs },
                tolerance,
            )
        })
        .collect();
    let mut mixed = seqs(16, 1, 300);
    mixed.extend(seqs(1, 1800, 0));
    for (what, seqs) in [
        ("cold 2048-token prefill", seqs(1, 2048, 0)),
        ("1800-token prefill beside 16 decodes", mixed),
        ("32-token prefill over a cached 3200", seqs(1, 32, 3200)),
    ] {
        out.push((
            what.into(),
            engine::BatchShape { seqs },
            CALIBRATION_TOLERANCE_PCT,
        ));
    }
    out
}
