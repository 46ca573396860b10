//! What can go wrong talking to an endpoint, each with what to do about it.
//!
//! Contract: every failure of the endpoint backend is an [`EndpointError`]
//! whose message names the URL (or the request: id, tag) and the server's
//! own words where it sent any (the `error.message` of an OpenAI/vLLM error
//! body); nothing panics on what a server sends.

use thiserror::Error;

#[derive(Debug, Error)]
pub enum EndpointError {
    #[error(
        "--endpoint {url}: give an http:// or https:// address of an OpenAI-compatible \
         server, e.g. http://localhost:8000"
    )]
    BadUrl { url: String },
    #[error(
        "cannot reach {url}: {message}; is the server running there? (`vllm serve MODEL`, \
         or `exp serve --mode sim` as a mock)"
    )]
    Unreachable { url: String, message: String },
    #[error("{url} answered HTTP {status}: {message}")]
    Status {
        url: String,
        status: u16,
        message: String,
    },
    #[error("{url}: {message}")]
    BadResponse { url: String, message: String },
    #[error("{url} lists no model in /v1/models; pass --model-name NAME")]
    NoModel { url: String },
    #[error("--model-name {name}: {url} serves {served}; pass one of those (or leave --model-name out for the first)")]
    ModelNotServed {
        name: String,
        url: String,
        served: String,
    },
    /// One request of a condition failed; the condition's run stops there.
    #[error(
        "request {id} ({tag}): {failure} (the condition's other requests in flight were cancelled)"
    )]
    Request {
        id: u64,
        tag: String,
        failure: RequestFailure,
    },
    /// The conditions change a setting only the server decides.
    #[error(
        "the conditions set {option} to {values}, but a server fixes its own {option}: \
         run this experiment with --mode sim, or give every condition the server's \
         {option} (--set {option}=VALUE, or one value of the experiment's parameter that \
         sweeps it: `exp show NAME`), which the sim twin of --mode both then uses too"
    )]
    SweepsServerOption { option: String, values: String },
    #[error(
        "condition {label}: request {id} needs {needed} tokens ({prompt} prompt + {output} \
         output) but {url} serves max_model_len {limit}; start the server with a larger \
         --max-model-len, or shrink the experiment's lengths with --set"
    )]
    TooLong {
        label: String,
        id: u64,
        needed: usize,
        prompt: usize,
        output: usize,
        url: String,
        limit: usize,
    },
    #[error("the HTTP client could not start: {0}")]
    Client(String),
}

/// Why one streamed completion failed.
#[derive(Debug, Error)]
pub enum RequestFailure {
    #[error("HTTP {status}: {message}")]
    Status { status: u16, message: String },
    #[error("the connection failed: {0}")]
    Transport(String),
    #[error("malformed server-sent event ({message}): {excerpt}")]
    MalformedSse { message: String, excerpt: String },
    #[error("the server reported an error in the stream: {0}")]
    InStream(String),
    #[error(
        "the server answered with content type `{content_type}`, not a stream of server-sent \
         events (text/event-stream): {excerpt}"
    )]
    NotAStream {
        content_type: String,
        excerpt: String,
    },
    #[error("the stream ended before `data: [DONE]`, after {tokens} output token(s)")]
    Truncated { tokens: usize },
    #[error("the client task ended abnormally: {0}")]
    Task(String),
}

/// The message of an error body: OpenAI's `{"error": {"message"}}`,
/// vLLM's older `{"object": "error", "message"}`, or the text itself
/// (cut to 500 characters) when it is neither.
pub fn error_message(body: &str) -> String {
    if let Ok(value) = serde_json::from_str::<serde_json::Value>(body) {
        let message = value
            .pointer("/error/message")
            .or_else(|| value.get("message"))
            .or_else(|| value.get("detail"))
            .and_then(|m| m.as_str());
        if let Some(m) = message {
            return m.to_string();
        }
    }
    let body = body.trim();
    if body.is_empty() {
        return "(empty body)".into();
    }
    excerpt(body)
}

/// At most 500 characters of `text`, for messages.
pub fn excerpt(text: &str) -> String {
    const MAX: usize = 500;
    match text.char_indices().nth(MAX) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_string(),
    }
}

/// A reqwest error with its causes, which reqwest's own text leaves out
/// (`error sending request` says nothing of the refused connection).
pub fn transport_message(error: &reqwest::Error) -> String {
    let mut text = error.to_string();
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_bodies_give_the_servers_message() {
        let openai = r#"{"error": {"message": "The model `x` does not exist.", "type": "NotFoundError", "code": 404}}"#;
        assert_eq!(error_message(openai), "The model `x` does not exist.");
        let vllm_old = r#"{"object": "error", "message": "too long", "type": "BadRequestError"}"#;
        assert_eq!(error_message(vllm_old), "too long");
        assert_eq!(error_message("  "), "(empty body)");
        assert_eq!(error_message("Bad Gateway"), "Bad Gateway");
        let long = "x".repeat(600);
        assert_eq!(error_message(&long).chars().count(), 501);
    }
}
