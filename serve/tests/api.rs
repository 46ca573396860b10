//! The HTTP API against an in-process server with a simulated engine:
//! bodies, streaming, usage and cached tokens, error bodies, metrics.

mod common;

use common::*;
use serde_json::{json, Value};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn completion_returns_every_token_and_usage() {
    let server = start().await;
    let body = json!({"model": MODEL, "prompt": prompt_ids(1, 40), "max_tokens": 7});
    let (status, reply) = post(&server, "/v1/completions", &body).await;
    assert_eq!(status, 200, "{reply}");
    assert_eq!(reply["object"], "text_completion");
    assert_eq!(reply["model"], MODEL);
    let choice = &reply["choices"][0];
    assert_eq!(choice["finish_reason"], "length");
    assert_eq!(
        choice["text"].as_str().unwrap().len(),
        7,
        "one letter per token"
    );
    let usage = &reply["usage"];
    assert_eq!(usage["prompt_tokens"], 40);
    assert_eq!(usage["completion_tokens"], 7);
    assert_eq!(usage["total_tokens"], 47);
    assert_eq!(usage["prompt_tokens_details"]["cached_tokens"], 0);
    server.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn text_prompts_count_one_token_per_byte_and_default_to_16_tokens() {
    let server = start().await;
    let (status, reply) = post(&server, "/v1/completions", &json!({"prompt": "héllo"})).await;
    assert_eq!(status, 200, "{reply}");
    assert_eq!(reply["usage"]["prompt_tokens"], 6);
    assert_eq!(reply["usage"]["completion_tokens"], 16);
    server.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streamed_completion_sends_each_token_then_usage_then_done() {
    let server = start().await;
    let body = json!({"prompt": prompt_ids(1, 20), "max_tokens": 5, "stream": true,
                      "stream_options": {"include_usage": true}});
    let data = stream(&server, "/v1/completions", &body).await;
    assert_eq!(data.last().map(String::as_str), Some("[DONE]"));
    let chunks: Vec<Value> = data[..data.len() - 1]
        .iter()
        .map(|d| serde_json::from_str(d).unwrap())
        .collect();
    let texts: Vec<&Value> = chunks
        .iter()
        .filter(|c| c["choices"][0]["finish_reason"].is_null() && !c["choices"][0].is_null())
        .collect();
    assert_eq!(texts.len(), 5, "{data:?}");
    let end = &chunks[chunks.len() - 2];
    assert_eq!(end["choices"][0]["finish_reason"], "length");
    let usage = &chunks[chunks.len() - 1];
    assert!(usage["choices"].as_array().unwrap().is_empty());
    assert_eq!(usage["usage"]["completion_tokens"], 5);
    assert_eq!(usage["usage"]["prompt_tokens"], 20);
    server.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stream_without_include_usage_has_no_usage_chunk() {
    let server = start().await;
    let body = json!({"prompt": prompt_ids(1, 20), "max_tokens": 3, "stream": true});
    let data = stream(&server, "/v1/completions", &body).await;
    assert_eq!(
        data.len(),
        3 + 1 + 1,
        "tokens, the closing chunk, [DONE]: {data:?}"
    );
    assert!(data.iter().all(|d| !d.contains("\"usage\"")));
    server.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chat_answers_whole_and_streamed() {
    let server = start().await;
    let messages = json!([{"role": "system", "content": "be brief"},
                          {"role": "user", "content": "hello"}]);
    let (status, reply) = post(
        &server,
        "/v1/chat/completions",
        &json!({"messages": messages, "max_tokens": 4}),
    )
    .await;
    assert_eq!(status, 200, "{reply}");
    assert_eq!(reply["object"], "chat.completion");
    assert_eq!(reply["choices"][0]["message"]["role"], "assistant");
    assert_eq!(
        reply["choices"][0]["message"]["content"]
            .as_str()
            .unwrap()
            .len(),
        4
    );
    // The ChatML template around 8 + 5 bytes of content.
    let template = "<|im_start|>system\nbe brief<|im_end|>\n<|im_start|>user\nhello<|im_end|>\n<|im_start|>assistant\n";
    assert_eq!(reply["usage"]["prompt_tokens"], template.len());

    let body = json!({"messages": messages, "max_tokens": 4, "stream": true});
    let data = stream(&server, "/v1/chat/completions", &body).await;
    let first: Value = serde_json::from_str(&data[0]).unwrap();
    assert_eq!(first["object"], "chat.completion.chunk");
    assert_eq!(first["choices"][0]["delta"]["role"], "assistant");
    let content: String = data[1..]
        .iter()
        .filter_map(|d| serde_json::from_str::<Value>(d).ok())
        .filter_map(|c| {
            c["choices"][0]["delta"]["content"]
                .as_str()
                .map(String::from)
        })
        .collect();
    assert_eq!(content.len(), 4);
    assert_eq!(data.last().map(String::as_str), Some("[DONE]"));
    server.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn repeated_prompt_reports_cached_tokens_unless_the_salt_differs() {
    let server = start().await;
    let ask = |salt: Option<&str>| {
        let mut body = json!({"prompt": prompt_ids(100, 64), "max_tokens": 2});
        if let Some(s) = salt {
            body["cache_salt"] = json!(s);
        }
        body
    };
    let cached = |reply: &Value| reply["usage"]["prompt_tokens_details"]["cached_tokens"].clone();
    let (_, cold) = post(&server, "/v1/completions", &ask(None)).await;
    assert_eq!(cached(&cold), 0);
    let (_, warm) = post(&server, "/v1/completions", &ask(None)).await;
    // Every full block but the one holding the last prompt token.
    assert_eq!(cached(&warm), 48, "{warm}");
    let (_, salted) = post(&server, "/v1/completions", &ask(Some("tenant-a"))).await;
    assert_eq!(cached(&salted), 0, "another salt shares nothing");
    let (_, other) = post(&server, "/v1/completions", &ask(Some("tenant-b"))).await;
    assert_eq!(cached(&other), 0);
    let (_, again) = post(&server, "/v1/completions", &ask(Some("tenant-a"))).await;
    assert_eq!(cached(&again), 48, "the same salt shares its own blocks");
    server.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_count_known_requests() {
    let server = start().await;
    for _ in 0..2 {
        let body = json!({"prompt": prompt_ids(7, 32), "max_tokens": 4});
        assert_eq!(post(&server, "/v1/completions", &body).await.0, 200);
    }
    let text = reqwest::get(url(&server, "/metrics"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert_eq!(metric_value(&text, "vllm:num_requests_running"), 0.0);
    assert_eq!(metric_value(&text, "vllm:num_requests_waiting"), 0.0);
    assert_eq!(metric_value(&text, "vllm:kv_cache_usage_perc"), 0.0);
    assert_eq!(metric_value(&text, "vllm:prompt_tokens_total"), 64.0);
    assert_eq!(metric_value(&text, "vllm:generation_tokens_total"), 8.0);
    assert_eq!(metric_value(&text, "vllm:prefix_cache_queries_total"), 64.0);
    // The second request found the first's two full blocks but the last.
    assert_eq!(metric_value(&text, "vllm:prefix_cache_hits_total"), 16.0);
    assert_eq!(
        metric_value(&text, "vllm:time_to_first_token_seconds_count"),
        2.0
    );
    assert_eq!(
        metric_value(&text, "vllm:inter_token_latency_seconds_count"),
        6.0
    );
    assert!(metric_value(&text, "vllm:time_to_first_token_seconds_sum") > 0.0);
    assert!(text.contains("# TYPE vllm:inter_token_latency_seconds histogram"));
    assert!(text.contains(&format!(
        "vllm:time_to_first_token_seconds_bucket{{model_name=\"{MODEL}\",le=\"+Inf\"}} 2"
    )));
    server.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn models_and_health_answer() {
    let server = start().await;
    let models: Value = reqwest::get(url(&server, "/v1/models"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(models["object"], "list");
    assert_eq!(models["data"][0]["id"], MODEL);
    assert_eq!(models["data"][0]["max_model_len"], 256);
    let health = reqwest::get(url(&server, "/health")).await.unwrap();
    assert_eq!(health.status().as_u16(), 200);
    server.shutdown().await.unwrap();
}

fn assert_bad_request(status: u16, reply: &Value, param: Option<&str>) {
    assert_eq!(status, 400, "{reply}");
    let error = &reply["error"];
    assert_eq!(error["type"], "BadRequestError", "{reply}");
    assert_eq!(error["code"], 400);
    assert!(!error["message"].as_str().unwrap().is_empty());
    assert_eq!(error["param"].as_str(), param, "{reply}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_and_impossible_requests_get_400_bodies() {
    // The smallest pool the engine accepts: one request of max_model_len.
    let server = start_with(
        engine::EngineConfig {
            max_model_len: 256,
            num_gpu_blocks: Some(17),
            ..engine::EngineConfig::default()
        },
        0.5,
    )
    .await;
    let (s, r) = post_raw(&server, "/v1/completions", "{\"prompt\": [1, 2").await;
    assert_bad_request(s, &r, None);
    let (s, r) = post_raw(&server, "/v1/chat/completions", "not json").await;
    assert_bad_request(s, &r, None);
    let (s, r) = post(
        &server,
        "/v1/completions",
        &json!({"prompt": [1, 2], "max_tokens": -4}),
    )
    .await;
    assert_bad_request(s, &r, Some("max_tokens"));
    let (s, r) = post(
        &server,
        "/v1/completions",
        &json!({"prompt": [1, 2], "max_tokens": "4"}),
    )
    .await;
    assert_bad_request(s, &r, Some("max_tokens"));
    let (s, r) = post(
        &server,
        "/v1/completions",
        &json!({"prompt": {"text": "a"}}),
    )
    .await;
    assert_bad_request(s, &r, Some("prompt"));
    let (s, r) = post(
        &server,
        "/v1/completions",
        &json!({"prompt": "a", "stream": 1}),
    )
    .await;
    assert_bad_request(s, &r, Some("stream"));
    let (s, r) = post(&server, "/v1/chat/completions", &json!({"messages": "hi"})).await;
    assert_bad_request(s, &r, Some("messages"));
    // Longer than max_model_len: the engine's own check.
    let (s, r) = post(
        &server,
        "/v1/completions",
        &json!({"prompt": prompt_ids(0, 250), "max_tokens": 10}),
    )
    .await;
    assert_bad_request(s, &r, Some("prompt"));
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap()
            .contains("max_model_len"),
        "{r}"
    );
    let (s, r) = post(
        &server,
        "/v1/completions",
        &json!({"prompt": [], "max_tokens": 10}),
    )
    .await;
    assert_bad_request(s, &r, Some("prompt"));
    // None of them took a block or stayed in a queue.
    assert_eq!(metric(&server, "vllm:num_requests_waiting").await, 0.0);
    let (s, _) = post(
        &server,
        "/v1/completions",
        &json!({"prompt": prompt_ids(0, 240), "max_tokens": 16}),
    )
    .await;
    assert_eq!(s, 200, "a request of max_model_len still runs");
    server.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_model_name_is_404() {
    let server = start().await;
    let (status, reply) = post(
        &server,
        "/v1/completions",
        &json!({"model": "gpt-4", "prompt": "a"}),
    )
    .await;
    assert_eq!(status, 404);
    assert_eq!(reply["error"]["type"], "NotFoundError");
    assert_eq!(reply["error"]["param"], "model");
    server.shutdown().await.unwrap();
}

/// A word-level tokenizer knowing three words (ids 1-3); others are `[UNK]` (0).
const TOKENIZER_JSON: &str = r###"{
  "version": "1.0", "truncation": null, "padding": null, "added_tokens": [],
  "normalizer": null, "pre_tokenizer": {"type": "Whitespace"}, "post_processor": null,
  "decoder": {"type": "WordPiece", "prefix": "##", "cleanup": true},
  "model": {"type": "WordLevel", "vocab": {"[UNK]": 0, "the": 1, "of": 2, "and": 3}, "unk_token": "[UNK]"}
}"###;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tokenizer_counts_words_and_decodes_outputs() {
    let path = std::env::temp_dir().join(format!("serve-tokenizer-{}.json", std::process::id()));
    std::fs::write(&path, TOKENIZER_JSON).unwrap();
    let mut config = serve::ServerConfig::local(MODEL);
    config.codec = serve::TextCodec::from_file(&path).unwrap();
    std::fs::remove_file(&path).unwrap();
    let server = start_server(small_config(), config).await;
    let body = json!({"prompt": "the of and the", "max_tokens": 3});
    let (status, reply) = post(&server, "/v1/completions", &body).await;
    assert_eq!(status, 200, "{reply}");
    assert_eq!(reply["usage"]["prompt_tokens"], 4, "one token per word");
    let text = reply["choices"][0]["text"].as_str().unwrap();
    let words = ["[UNK]", "the", "of", "and"];
    let mut rest = text;
    for _ in 0..3 {
        let word = words
            .iter()
            .find(|w| rest.trim_start().starts_with(*w))
            .unwrap_or_else(|| panic!("{text:?} is not made of the vocabulary's words"));
        rest = &rest.trim_start()[word.len()..];
    }
    assert!(rest.trim().is_empty(), "{text:?}");
    server.shutdown().await.unwrap();
}
