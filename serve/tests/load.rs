//! Concurrency, overload, client disconnects and draining against an
//! in-process server with a simulated engine.

mod common;

use common::*;
use serde_json::{json, Value};
use std::time::Duration;

/// Token chunks, the usage chunk's completion_tokens, and whether `[DONE]` closed it.
fn tally(data: &[String]) -> (usize, u64, bool) {
    let mut tokens = 0;
    let mut usage = 0;
    for d in data {
        let Ok(chunk) = serde_json::from_str::<Value>(d) else {
            continue;
        };
        if let Some(n) = chunk["usage"]["completion_tokens"].as_u64() {
            usage = n;
        } else if chunk["choices"][0]["finish_reason"].is_null() {
            tokens += 1;
        }
    }
    (
        tokens,
        usage,
        data.last().map(String::as_str) == Some("[DONE]"),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_hundred_concurrent_streams_get_every_token() {
    let server = start_with(
        engine::EngineConfig {
            max_model_len: 256,
            num_gpu_blocks: Some(1024),
            ..engine::EngineConfig::default()
        },
        0.2,
    )
    .await;
    let client = reqwest::Client::new();
    let tasks: Vec<_> = (0..200u32)
        .map(|i| {
            let client = client.clone();
            let url = url(&server, "/v1/completions");
            tokio::spawn(async move {
                let body = json!({"prompt": prompt_ids(i * 40, 32), "max_tokens": 20, "stream": true,
                                  "stream_options": {"include_usage": true}});
                let text = client.post(url).json(&body).send().await?.text().await?;
                Ok::<_, reqwest::Error>(sse_data(&text))
            })
        })
        .collect();
    for (i, task) in tasks.into_iter().enumerate() {
        let data = task.await.unwrap().unwrap();
        assert_eq!(tally(&data), (20, 20, true), "stream {i}: {data:?}");
    }
    assert_eq!(
        metric(&server, "vllm:generation_tokens_total").await,
        4000.0
    );
    assert_eq!(metric(&server, "vllm:num_requests_running").await, 0.0);
    server.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn overload_queues_and_preempts_but_loses_nothing() {
    // 4 sequences at a time and a pool of 32 blocks (31 usable, 496 tokens):
    // 40 requests of 100 + 60 tokens wait, and running ones get preempted.
    let server = start_with(
        engine::EngineConfig {
            max_model_len: 256,
            max_num_seqs: 4,
            num_gpu_blocks: Some(32),
            ..engine::EngineConfig::default()
        },
        0.2,
    )
    .await;
    let client = reqwest::Client::new();
    let tasks: Vec<_> = (0..40u32)
        .map(|i| {
            let client = client.clone();
            let url = url(&server, "/v1/completions");
            tokio::spawn(async move {
                let body = json!({"prompt": prompt_ids(i * 200, 100), "max_tokens": 60});
                client
                    .post(url)
                    .json(&body)
                    .send()
                    .await?
                    .json::<Value>()
                    .await
            })
        })
        .collect();
    for task in tasks {
        let reply = task.await.unwrap().unwrap();
        assert_eq!(reply["usage"]["completion_tokens"], 60, "{reply}");
        assert_eq!(reply["choices"][0]["text"].as_str().unwrap().len(), 60);
    }
    assert_eq!(
        metric(&server, "vllm:generation_tokens_total").await,
        2400.0
    );
    assert!(metric(&server, "vllm:num_preemptions_total").await > 0.0);
    assert_eq!(metric(&server, "vllm:kv_cache_usage_perc").await, 0.0);
    server.shutdown().await.unwrap();
}

/// A request far longer than the test: only an abort ends it early.
fn endless() -> Value {
    json!({"prompt": prompt_ids(1, 40), "max_tokens": 4000})
}

fn long_config() -> engine::EngineConfig {
    engine::EngineConfig {
        num_gpu_blocks: Some(1024),
        ..engine::EngineConfig::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_whose_client_disconnects_is_aborted_and_frees_its_blocks() {
    let server = start_with(long_config(), 1.0).await;
    let mut body = endless();
    body["stream"] = json!(true);
    let mut response = reqwest::Client::new()
        .post(url(&server, "/v1/completions"))
        .json(&body)
        .send()
        .await
        .unwrap();
    let first = response.chunk().await.unwrap().expect("a first chunk");
    assert!(String::from_utf8_lossy(&first).starts_with("data: "));
    assert!(metric(&server, "vllm:kv_cache_usage_perc").await > 0.0);
    drop(response);
    wait_for_metric(&server, "vllm:num_requests_running", 0.0).await;
    wait_for_metric(&server, "vllm:kv_cache_usage_perc", 0.0).await;
    let generated = metric(&server, "vllm:generation_tokens_total").await;
    assert!(generated < 4000.0, "aborted after {generated} tokens");
    server.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiting_client_that_gives_up_is_aborted_too() {
    let server = start_with(long_config(), 1.0).await;
    let client = reqwest::Client::builder()
        .timeout(Duration::from_millis(200))
        .build()
        .unwrap();
    let gave_up = client
        .post(url(&server, "/v1/completions"))
        .json(&endless())
        .send()
        .await;
    assert!(gave_up.is_err(), "the client timed out");
    wait_for_metric(&server, "vllm:num_requests_running", 0.0).await;
    wait_for_metric(&server, "vllm:kv_cache_usage_perc", 0.0).await;
    assert!(metric(&server, "vllm:generation_tokens_total").await < 4000.0);
    server.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_drains_running_requests_and_refuses_new_ones() {
    let server = start_with(long_config(), 1.0).await;
    let body = json!({"prompt": prompt_ids(1, 40), "max_tokens": 300, "stream": true});
    let running = reqwest::Client::new()
        .post(url(&server, "/v1/completions"))
        .json(&body)
        .send()
        .await
        .unwrap();
    wait_for_metric(&server, "vllm:num_requests_running", 1.0).await;
    let health_url = url(&server, "/health");
    let refused_url = url(&server, "/v1/completions");
    let stopping = tokio::spawn(server.shutdown());
    let client = reqwest::Client::new();
    // The drain starts at once; the bound only stops a broken server hanging the test.
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let status = client.get(&health_url).send().await.unwrap().status();
        if status == 503 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "/health never turned 503"
        );
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let refused = client
        .post(&refused_url)
        .json(&json!({"prompt": "late"}))
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status().as_u16(), 503);
    let reply: Value = refused.json().await.unwrap();
    assert_eq!(reply["error"]["type"], "ServiceUnavailableError");
    let data = sse_data(&running.text().await.unwrap());
    let (tokens, _, done) = tally(&data);
    assert_eq!(
        (tokens, done),
        (300, true),
        "the running request finished whole"
    );
    stopping.await.unwrap().unwrap();
    assert!(
        client.get(&health_url).send().await.is_err(),
        "the listener is closed after the drain"
    );
}
