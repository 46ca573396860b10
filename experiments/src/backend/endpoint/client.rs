//! HTTP to an OpenAI-compatible server: the models it serves, and one
//! streamed completion read chunk by chunk.
//!
//! Contract: [`Http::new`] takes the server's base address (`http://host:8000`,
//! with or without a trailing `/` or `/v1`); every route is under `/v1`.
//! [`Http::models`] reads `GET /v1/models` (ids, and vLLM's `max_model_len`
//! when listed). [`Http::stream_completion`] posts a body made by
//! [`completion_body`], stamps the moment right before the POST goes out
//! (where vLLM's benchmark_serving starts a request's clock) and every
//! chunk when it is read, on the caller's clock ([`super::sse`] counts its
//! tokens). A connection left without a byte for [`READ_IDLE`] is a
//! failure, not a hang. One client (its connection pool) serves every
//! concurrent stream.

use super::error::{error_message, transport_message, EndpointError, RequestFailure};
use super::sse::{SseFramer, StreamTally, Streamed};
use futures_util::StreamExt;
use reqwest::header::CONTENT_TYPE;
use serde_json::{json, Value};
use std::time::Duration;
use tokio::time::Instant;

/// Time to open a connection.
const CONNECT: Duration = Duration::from_secs(10);
/// Longest wait for the next byte of a response: a server that long silent
/// is stuck (the slowest prefill of a long prompt takes seconds).
pub const READ_IDLE: Duration = Duration::from_secs(300);

/// A model `GET /v1/models` lists.
#[derive(Debug, Clone, PartialEq)]
pub struct ServedModel {
    pub id: String,
    /// vLLM lists it; other servers may not.
    pub max_model_len: Option<usize>,
}

/// One streamed completion: when its POST went out, and what the stream
/// showed (times in seconds on the caller's clock).
#[derive(Debug, Clone, PartialEq)]
pub struct Exchange {
    pub sent_s: f64,
    pub streamed: Streamed,
}

/// The client of one server.
#[derive(Debug, Clone)]
pub struct Http {
    client: reqwest::Client,
    /// `scheme://host:port[/prefix]`, no trailing `/` and no `/v1`.
    base: String,
}

/// The base address of `url`, or why it is not one.
pub fn base_url(url: &str) -> Result<String, EndpointError> {
    let bad = || EndpointError::BadUrl {
        url: url.to_string(),
    };
    let trimmed = url.trim().trim_end_matches('/');
    let trimmed = trimmed.strip_suffix("/v1").unwrap_or(trimmed);
    let parsed = reqwest::Url::parse(trimmed).map_err(|_| bad())?;
    if !matches!(parsed.scheme(), "http" | "https") || parsed.host_str().is_none() {
        return Err(bad());
    }
    Ok(trimmed.to_string())
}

/// A streamed `/v1/completions` request as vLLM takes it: the prompt as
/// token ids, exactly `max_tokens` outputs (`ignore_eos`), usage at the end
/// and with every chunk, and the prefix-cache salt.
pub fn completion_body(model: &str, prompt: &[u32], max_tokens: usize, salt: &str) -> Value {
    json!({
        "model": model,
        "prompt": prompt,
        "max_tokens": max_tokens,
        "ignore_eos": true,
        "temperature": 0,
        "stream": true,
        "stream_options": {"include_usage": true, "continuous_usage_stats": true},
        "cache_salt": salt,
    })
}

impl Http {
    pub fn new(url: &str) -> Result<Self, EndpointError> {
        let base = base_url(url)?;
        let client = reqwest::Client::builder()
            .connect_timeout(CONNECT)
            .read_timeout(READ_IDLE)
            .build()
            .map_err(|e| EndpointError::Client(transport_message(&e)))?;
        Ok(Self { client, base })
    }

    pub fn base(&self) -> &str {
        &self.base
    }

    fn route(&self, path: &str) -> String {
        format!("{}/v1/{path}", self.base)
    }

    /// The models the server lists, in its order.
    pub async fn models(&self) -> Result<Vec<ServedModel>, EndpointError> {
        let url = self.route("models");
        let response =
            self.client
                .get(&url)
                .send()
                .await
                .map_err(|e| EndpointError::Unreachable {
                    url: url.clone(),
                    message: transport_message(&e),
                })?;
        let status = response.status();
        let text = response
            .text()
            .await
            .map_err(|e| EndpointError::Unreachable {
                url: url.clone(),
                message: transport_message(&e),
            })?;
        if !status.is_success() {
            return Err(EndpointError::Status {
                url,
                status: status.as_u16(),
                message: error_message(&text),
            });
        }
        let bad = |message: String| EndpointError::BadResponse {
            url: url.clone(),
            message,
        };
        let value: Value = serde_json::from_str(&text)
            .map_err(|e| bad(format!("the model list is not JSON ({e})")))?;
        let data = value
            .get("data")
            .and_then(Value::as_array)
            .ok_or_else(|| bad("the model list has no `data` array".into()))?;
        data.iter()
            .map(|m| {
                let id = m.get("id").and_then(Value::as_str);
                let id = id.ok_or_else(|| bad(format!("a model without an `id`: {m}")))?;
                Ok(ServedModel {
                    id: id.to_string(),
                    max_model_len: m
                        .get("max_model_len")
                        .and_then(Value::as_u64)
                        .map(|n| n as usize),
                })
            })
            .collect()
    }

    /// Posts `body` to `/v1/completions` and reads the stream to its end;
    /// times are seconds since `start`.
    pub async fn stream_completion(
        &self,
        body: &Value,
        start: Instant,
    ) -> Result<Exchange, RequestFailure> {
        let transport = |e: reqwest::Error| RequestFailure::Transport(transport_message(&e));
        let request = self
            .client
            .post(self.route("completions"))
            .header(CONTENT_TYPE, "application/json")
            .body(body.to_string());
        // vLLM's benchmark_serving starts a request's clock here, right
        // before the POST goes out (after the body is built).
        let sent_s = start.elapsed().as_secs_f64();
        let response = request.send().await.map_err(transport)?;
        let status = response.status();
        if !status.is_success() {
            let text = response.text().await.unwrap_or_default();
            return Err(RequestFailure::Status {
                status: status.as_u16(),
                message: error_message(&text),
            });
        }
        let content_type = response
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string();
        if !content_type.starts_with("text/event-stream") {
            let text = response.text().await.unwrap_or_default();
            return Err(RequestFailure::NotAStream {
                content_type,
                excerpt: super::error::excerpt(&text),
            });
        }
        let mut framer = SseFramer::default();
        let mut tally = StreamTally::default();
        let mut bytes = response.bytes_stream();
        while let Some(piece) = bytes.next().await {
            let piece = piece.map_err(transport)?;
            // Each event is stamped when it is read, as vLLM's client stamps
            // each line: two chunks that came in one read are two
            // deliveries, and only the tokens of one chunk share a time.
            for data in framer.push(&piece) {
                tally.on_data(&data, start.elapsed().as_secs_f64())?;
            }
        }
        if let Some(data) = framer.finish() {
            tally.on_data(&data, start.elapsed().as_secs_f64())?;
        }
        Ok(Exchange {
            sent_s,
            streamed: tally.finish()?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base_urls_drop_the_v1_and_slashes_and_refuse_non_http() {
        for url in [
            "http://h:8000",
            "http://h:8000/",
            "http://h:8000/v1",
            " http://h:8000/v1/ ",
        ] {
            assert_eq!(base_url(url).unwrap(), "http://h:8000", "{url}");
        }
        assert_eq!(base_url("https://x/proxy/v1").unwrap(), "https://x/proxy");
        for url in ["h:8000", "ftp://h/", "localhost", ""] {
            let err = base_url(url).unwrap_err().to_string();
            assert!(err.contains("http:// or https://"), "{url}: {err}");
        }
    }

    #[test]
    fn the_body_asks_for_exact_lengths_usage_and_the_salt() {
        let body = completion_body("m", &[1, 2, 3], 7, "s");
        assert_eq!(body["prompt"], json!([1, 2, 3]));
        assert_eq!(body["max_tokens"], 7);
        assert_eq!(body["ignore_eos"], true);
        assert_eq!(body["stream"], true);
        assert_eq!(body["stream_options"]["include_usage"], true);
        assert_eq!(body["cache_salt"], "s");
    }
}
