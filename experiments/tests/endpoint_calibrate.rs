//! `exp calibrate --endpoint URL` against `exp serve --mode sim`'s server:
//! the black-box profile's provenance names the endpoint, and its decode
//! steps match the cost model the server runs on. Its own test binary
//! (cargo runs test binaries one after another), so no other test loads
//! the two cores while the probes time the server.

#[path = "integration/sim_server.rs"]
mod sim_server;

use experiments::backend::cost::resolve;
use experiments::backend::{CostSource, LoadedModel, ModelChoice};
use sim_server::SimServer;

/// Tolerance of the black-box profile's decode steps against the cost
/// model the mock server runs on: 25 %, or 0.25 ms where that is larger.
/// The probes see the server's steps through its engine loop, its sleeps
/// and HTTP, which add a roughly constant time to every step, and more
/// while other tests load the two cores (a 0.5 ms step measured 0.65 ms
/// then).
const CALIBRATION_TOLERANCE_PCT: f64 = 25.0;
const CALIBRATION_TOLERANCE_S: f64 = 0.25e-3;

#[test]
fn calibrating_against_the_mock_recovers_its_decode_steps() {
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
    for concurrency in [1, 8, 32, 64] {
        let shape = engine::BatchShape {
            seqs: vec![
                engine::SeqShape {
                    new_tokens: 1,
                    context_before: 600,
                    samples: true,
                };
                concurrency
            ],
        };
        let expected = truth.model.step_seconds(&shape) * time_scale;
        let got = sim::CostModel::step_seconds(&fitted, &shape);
        let error = (got - expected).abs() / expected * 100.0;
        assert!(
            error < CALIBRATION_TOLERANCE_PCT || (got - expected).abs() < CALIBRATION_TOLERANCE_S,
            "{concurrency} decodes: fitted {:.3} ms, server {:.3} ms ({error:.1} %)",
            got * 1e3,
            expected * 1e3
        );
    }
}
