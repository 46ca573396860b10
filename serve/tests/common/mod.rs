//! Shared by the integration tests: an in-process server on an ephemeral
//! loopback port with a simulated engine, and small HTTP helpers.

#![allow(dead_code)] // each test file uses its own subset

use engine::{BatchShape, EngineConfig, EngineCore};
use serde_json::Value;
use serve::{RunningServer, ServerConfig};
use sim::{CostModel, SimRunner};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub const MODEL: &str = "test-model";

/// 2 ms a step plus 10 µs a token: steps long enough to interleave requests,
/// short enough for a quick test.
struct FixedCost;

impl CostModel for FixedCost {
    fn step_seconds(&self, batch: &BatchShape) -> f64 {
        2e-3 + 1e-5 * batch.num_tokens() as f64
    }
}

/// Engine options of most tests: a 256-token context, 16-token blocks.
pub fn small_config() -> EngineConfig {
    EngineConfig {
        max_model_len: 256,
        num_gpu_blocks: Some(1024),
        ..EngineConfig::default()
    }
}

pub async fn start_with(config: EngineConfig, time_scale: f64) -> RunningServer {
    let mut server = ServerConfig::local(MODEL);
    server.time_scale = time_scale;
    start_server(config, server).await
}

pub async fn start_server(config: EngineConfig, server: ServerConfig) -> RunningServer {
    let blocks = config.num_gpu_blocks.unwrap_or(1024);
    let runner = SimRunner::new(Arc::new(FixedCost), blocks);
    let engine = EngineCore::new(config, runner).expect("valid engine config");
    serve::start(engine, server).await.expect("server starts")
}

pub async fn start() -> RunningServer {
    start_with(small_config(), 0.5).await
}

pub fn url(server: &RunningServer, path: &str) -> String {
    format!("http://{}{path}", server.addr())
}

pub async fn post(server: &RunningServer, path: &str, body: &Value) -> (u16, Value) {
    let response = reqwest::Client::new()
        .post(url(server, path))
        .json(body)
        .send()
        .await
        .expect("request sent");
    let status = response.status().as_u16();
    (status, response.json().await.expect("JSON body"))
}

pub async fn post_raw(server: &RunningServer, path: &str, body: &'static str) -> (u16, Value) {
    let response = reqwest::Client::new()
        .post(url(server, path))
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .expect("request sent");
    let status = response.status().as_u16();
    (status, response.json().await.expect("JSON body"))
}

/// The `data:` payloads of a whole SSE response, in order.
pub async fn stream(server: &RunningServer, path: &str, body: &Value) -> Vec<String> {
    let response = reqwest::Client::new()
        .post(url(server, path))
        .json(body)
        .send()
        .await
        .expect("request sent");
    assert_eq!(response.status().as_u16(), 200);
    let text = response.text().await.expect("stream read");
    sse_data(&text)
}

pub fn sse_data(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|l| l.strip_prefix("data: ").or_else(|| l.strip_prefix("data:")))
        .map(|d| d.trim().to_string())
        .collect()
}

/// `NAME{model_name="test-model"} VALUE` from `/metrics`.
pub async fn metric(server: &RunningServer, name: &str) -> f64 {
    let text = reqwest::get(url(server, "/metrics"))
        .await
        .expect("metrics")
        .text()
        .await
        .expect("metrics text");
    metric_value(&text, name)
}

pub fn metric_value(text: &str, name: &str) -> f64 {
    let prefix = format!("{name}{{model_name=\"{MODEL}\"}} ");
    text.lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .unwrap_or_else(|| panic!("no {name} in\n{text}"))
        .parse()
        .expect("a number")
}

/// Polls `/metrics` until `name` equals `value`; panics after 20 s, which
/// only a broken server reaches (the state it waits for takes milliseconds).
pub async fn wait_for_metric(server: &RunningServer, name: &str, value: f64) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let now = metric(server, name).await;
        if now == value {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{name} stayed at {now}, expected {value}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

pub fn prompt_ids(start: u32, len: u32) -> Vec<u32> {
    (start..start + len).collect()
}
