//! `serve::start_with`: the engine built on the engine loop thread. A runner
//! that is not `Send` is served; a failed build is the start's error and
//! binds nothing; the server's EOS token ends requests that do not ignore
//! it; `return_token_ids` gives each choice its output ids.

mod common;

use common::{post, prompt_ids, small_config, sse_data, MODEL};
use engine::{EngineCore, ModelRunner, RunnerError, RunnerOutput, ScheduledBatch};
use serde_json::{json, Value};
use serve::{ServeError, ServerConfig};
use sim::{CostModel, SimRunner};
use std::marker::PhantomData;
use std::rc::Rc;
use std::sync::Arc;

struct Fast;

impl CostModel for Fast {
    fn step_seconds(&self, _batch: &engine::BatchShape) -> f64 {
        1e-4
    }
}

/// The simulated runner (token = position), pinned to its thread as the
/// CUDA runner is: it holds an `Rc`, so it is neither `Send` nor `Sync`.
struct ThreadBound {
    inner: SimRunner,
    _pinned: PhantomData<Rc<()>>,
}

impl ModelRunner for ThreadBound {
    fn num_kv_blocks(&self) -> usize {
        self.inner.num_kv_blocks()
    }
    fn execute(&mut self, batch: &ScheduledBatch<'_>) -> Result<RunnerOutput, RunnerError> {
        self.inner.execute(batch)
    }
}

fn thread_bound() -> Result<EngineCore<ThreadBound>, engine::EngineError> {
    let runner = ThreadBound {
        inner: SimRunner::new(Arc::new(Fast), 1024),
        _pinned: PhantomData,
    };
    EngineCore::new(small_config(), runner)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_runner_that_is_not_send_is_built_and_served_on_the_loop_thread() {
    let mut config = ServerConfig::local(MODEL);
    // The simulated runner's token k of a 10-token prompt is 10 + k.
    config.eos_token_id = Some(12);
    let server = serve::start_with(thread_bound, config).await.unwrap();
    assert_eq!(server.engine_limits().kv_blocks, 1024);
    assert_eq!(server.engine_limits().max_model_len, 256);
    let body = |ignore_eos: bool, stream: bool| {
        json!({"prompt": prompt_ids(0, 10), "max_tokens": 6, "ignore_eos": ignore_eos,
               "stream": stream, "return_token_ids": true})
    };
    let (status, reply) = post(&server, "/v1/completions", &body(true, false)).await;
    assert_eq!(status, 200, "{reply}");
    assert_eq!(
        reply["choices"][0]["token_ids"],
        json!([10, 11, 12, 13, 14, 15])
    );
    assert_eq!(reply["choices"][0]["finish_reason"], "length");
    let (_, reply) = post(&server, "/v1/completions", &body(false, false)).await;
    assert_eq!(
        reply["choices"][0]["token_ids"],
        json!([10, 11, 12]),
        "{reply}"
    );
    assert_eq!(reply["choices"][0]["finish_reason"], "stop");
    let text = reqwest::Client::new()
        .post(common::url(&server, "/v1/completions"))
        .json(&body(true, true))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let streamed: Vec<Value> = sse_data(&text)
        .iter()
        .filter(|d| *d != "[DONE]")
        .map(|d| serde_json::from_str::<Value>(d).unwrap()["choices"][0]["token_ids"].clone())
        .collect();
    let expected: Vec<Value> = (10..16).map(|t| json!([t])).chain([json!([])]).collect();
    assert_eq!(
        streamed, expected,
        "one id a chunk, none on the closing one"
    );
    server.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_build_is_the_error_and_binds_nothing() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let mut config = ServerConfig::local(MODEL);
    config.addr = taken.local_addr().unwrap();
    let failing = || -> Result<EngineCore<SimRunner>, std::io::Error> {
        Err(std::io::Error::other("no device"))
    };
    match serve::start_with(failing, config).await {
        Err(ServeError::Build(e)) => assert_eq!(e.to_string(), "no device"),
        Err(e) => panic!("expected a build error, got {e}"),
        Ok(_) => panic!("a failed build must not serve"),
    }
    // The build ran before the bind: the port already taken was not the error.
    let mut config = ServerConfig::local(MODEL);
    config.addr = taken.local_addr().unwrap();
    let err = serve::start_with(thread_bound, config).await.err();
    assert!(
        matches!(err, Some(ServeError::Bind { .. })),
        "a built engine then fails to bind: {err:?}"
    );
}

/// 1 ms a step; keeps the idle time each step was priced after.
struct IdleRecorder(std::sync::Mutex<Vec<f64>>);

impl CostModel for IdleRecorder {
    fn step_seconds(&self, _batch: &engine::BatchShape) -> f64 {
        1e-3
    }
    fn step_seconds_after(
        &self,
        batch: &engine::BatchShape,
        idle_s: f64,
        _history: &mut sim::GpuHistory,
    ) -> f64 {
        self.0.lock().unwrap().push(idle_s);
        self.step_seconds(batch)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_served_runner_is_told_how_long_the_engine_sat_idle_in_its_own_time() {
    let cost = Arc::new(IdleRecorder(Default::default()));
    let engine = EngineCore::new(small_config(), SimRunner::new(cost.clone(), 1024)).unwrap();
    let mut config = ServerConfig::local(MODEL);
    config.time_scale = 0.5;
    let server = serve::start(engine, config).await.unwrap();
    let body = json!({"prompt": prompt_ids(0, 10), "max_tokens": 2, "ignore_eos": true});
    let (status, _) = post(&server, "/v1/completions", &body).await;
    assert_eq!(status, 200);
    let steps = cost.0.lock().unwrap().len();
    // 100 ms of wall clock idle at time_scale 0.5: 200 ms of the runner's time.
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    let (status, _) = post(&server, "/v1/completions", &body).await;
    assert_eq!(status, 200);
    let idle = cost.0.lock().unwrap().clone();
    assert_eq!(idle[0], f64::INFINITY, "rested before the first step");
    assert!(idle[1] < 0.2, "back to back within a request: {idle:?}");
    assert!(
        idle[steps] >= 0.2,
        "the pause, in the runner's time: {idle:?}"
    );
}
