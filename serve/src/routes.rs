//! The HTTP routes: `/v1/completions`, `/v1/chat/completions`, `/v1/models`,
//! `/health`, `/metrics`.
//!
//! Contract: a generation request is read ([`crate::openai`]), turned into
//! token ids ([`crate::text`]), submitted to the engine loop and answered as
//! one JSON body or as server-sent events (`data: {chunk}` lines, then
//! `data: [DONE]`). Every failure is the OpenAI error body
//! ([`crate::error::ApiError`]). A `model` other than the served one is a
//! 404, as in vLLM; a missing `model` means the served one. `max_tokens`
//! defaults to 16 for completions and to the rest of `max_model_len` for
//! chat, as in vLLM. A request without `ignore_eos` stops at the model's EOS
//! token when the server has one ([`crate::ServerConfig::eos_token_id`]);
//! `return_token_ids` adds each choice's output token ids. `/health` is 200
//! while serving and 503 while draining.

use crate::error::ApiError;
use crate::handle::{EngineHandle, Event, RequestStream};
use crate::metrics::Metrics;
use crate::openai::{parse_chat, parse_completion, GenerationParams, PromptInput};
use crate::response::{Header, Kind, Usage};
use crate::text::{chat_prompt, TextCodec};
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::sse::{Event as SseEvent, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use futures_util::stream::{self, Stream, StreamExt};
use serde_json::{json, Value};
use std::convert::Infallible;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

/// vLLM's default `max_tokens` for `/v1/completions`.
const DEFAULT_COMPLETION_TOKENS: usize = 16;

pub struct App {
    pub engine: EngineHandle,
    pub codec: TextCodec,
    pub model: String,
    pub eos_token_id: Option<u32>,
    pub metrics: Arc<Metrics>,
}

pub fn router(app: Arc<App>) -> Router {
    Router::new()
        .route("/v1/completions", post(completions))
        .route("/v1/chat/completions", post(chat_completions))
        .route("/v1/models", get(models))
        .route("/health", get(health))
        .route("/metrics", get(metrics))
        .with_state(app)
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

async fn completions(State(app): State<Arc<App>>, body: Bytes) -> Response {
    let request = match parse_completion(&body) {
        Ok(r) => r,
        Err(e) => return e.into_response(),
    };
    let tokens = match request.prompt {
        PromptInput::Tokens(t) => Ok(t),
        PromptInput::Text(text) => encode(&app, &text),
    };
    match tokens {
        Ok(t) => {
            generate(
                app,
                Kind::Completion,
                t,
                request.params,
                DEFAULT_COMPLETION_TOKENS,
            )
            .await
        }
        Err(e) => e.into_response(),
    }
}

async fn chat_completions(State(app): State<Arc<App>>, body: Bytes) -> Response {
    let request = match parse_chat(&body) {
        Ok(r) => r,
        Err(e) => return e.into_response(),
    };
    match encode(&app, &chat_prompt(&request.messages)) {
        Ok(tokens) => {
            let rest = app.engine.limits.max_model_len.saturating_sub(tokens.len());
            generate(app, Kind::Chat, tokens, request.params, rest).await
        }
        Err(e) => e.into_response(),
    }
}

fn encode(app: &App, text: &str) -> Result<Vec<u32>, ApiError> {
    app.codec
        .encode(text)
        .map_err(|e| ApiError::bad_request(format!("tokenizing the prompt: {e}"), Some("prompt")))
}

async fn generate(
    app: Arc<App>,
    kind: Kind,
    tokens: Vec<u32>,
    params: GenerationParams,
    default_max_tokens: usize,
) -> Response {
    if let Some(model) = &params.model {
        if *model != app.model {
            return ApiError::not_found(
                format!(
                    "The model `{model}` does not exist; this server serves `{}`",
                    app.model
                ),
                Some("model"),
            )
            .into_response();
        }
    }
    let prompt_tokens = tokens.len();
    let max_tokens = params.max_tokens.unwrap_or(default_max_tokens).max(1);
    let stream = match app
        .engine
        .submit(
            tokens,
            max_tokens,
            params.ignore_eos,
            app.eos_token_id,
            params.cache_salt.clone(),
        )
        .await
    {
        Ok(s) => s,
        Err(e) => return e.into_response(),
    };
    let prefix = if kind == Kind::Chat {
        "chatcmpl"
    } else {
        "cmpl"
    };
    let header = Header {
        kind,
        id: format!("{prefix}-{:016x}", stream.id().0),
        created: unix_now(),
        model: app.model.clone(),
    };
    let usage = Usage {
        prompt_tokens,
        ..Usage::default()
    };
    let shape = Shape {
        include_usage: params.include_usage,
        token_ids: params.return_token_ids,
    };
    if params.stream {
        return Sse::new(sse_stream(app, header, stream, usage, shape)).into_response();
    }
    collect(&app, header, stream, usage, shape).await
}

/// What a response carries besides text.
#[derive(Debug, Clone, Copy)]
struct Shape {
    /// `stream_options.include_usage`: a last chunk with `usage`.
    include_usage: bool,
    /// `return_token_ids`: `token_ids` on every choice.
    token_ids: bool,
}

/// Waits for every token; dropping this future (a client gone) drops the
/// stream, which aborts the request.
async fn collect(
    app: &App,
    header: Header,
    mut stream: RequestStream,
    mut usage: Usage,
    shape: Shape,
) -> Response {
    let mut text = String::new();
    let mut ids = Vec::new();
    while let Some(event) = stream.next().await {
        match event {
            Event::Admitted { cached_tokens } => usage.cached_tokens = cached_tokens,
            Event::Token(t) => {
                usage.completion_tokens += 1;
                text.push_str(&app.codec.decode_token(t));
                ids.push(t);
            }
            Event::Finished(reason) => {
                let ids = shape.token_ids.then_some(ids.as_slice());
                return Json(header.full(&text, ids, reason, usage)).into_response();
            }
            Event::Failed(message) => return engine_failed(&message),
        }
    }
    engine_failed("the engine loop stopped before the request finished")
}

fn engine_failed(message: &str) -> Response {
    let body = json!({"error": {"message": message, "type": "InternalServerError",
                                "param": null, "code": 500}});
    (StatusCode::INTERNAL_SERVER_ERROR, Json(body)).into_response()
}

struct StreamState {
    app: Arc<App>,
    header: Header,
    stream: RequestStream,
    usage: Usage,
    shape: Shape,
    done: bool,
}

fn data(value: &Value) -> Result<SseEvent, Infallible> {
    Ok(SseEvent::default().data(value.to_string()))
}

/// One SSE event per token; after the finish, the closing chunk, the usage
/// chunk if asked for, and `[DONE]`. The stream owns the request: when the
/// client goes, the body is dropped and the request aborted.
fn sse_stream(
    app: Arc<App>,
    header: Header,
    stream: RequestStream,
    usage: Usage,
    shape: Shape,
) -> impl Stream<Item = Result<SseEvent, Infallible>> {
    let opening = match header.kind {
        Kind::Chat => vec![data(&header.role_chunk())],
        Kind::Completion => Vec::new(),
    };
    let state = StreamState {
        app,
        header,
        stream,
        usage,
        shape,
        done: false,
    };
    let body = stream::unfold(state, |mut s| async move {
        if s.done {
            return None;
        }
        let events = match s.stream.next().await {
            Some(Event::Admitted { cached_tokens }) => {
                s.usage.cached_tokens = cached_tokens;
                Vec::new()
            }
            Some(Event::Token(t)) => {
                s.usage.completion_tokens += 1;
                let text = s.app.codec.decode_token(t);
                let token = [t];
                let ids = s.shape.token_ids.then_some(&token[..]);
                vec![data(&s.header.chunk(&text, ids, None))]
            }
            Some(Event::Finished(reason)) => {
                s.done = true;
                let ids = s.shape.token_ids.then_some(&[][..]);
                let mut out = vec![data(&s.header.chunk("", ids, Some(reason)))];
                if s.shape.include_usage {
                    out.push(data(&s.header.usage_chunk(s.usage)));
                }
                out.push(Ok(SseEvent::default().data("[DONE]")));
                out
            }
            Some(Event::Failed(message)) => {
                s.done = true;
                vec![failed_events(&message)]
            }
            None => {
                s.done = true;
                vec![failed_events(
                    "the engine loop stopped before the request finished",
                )]
            }
        };
        Some((stream::iter(events), s))
    });
    stream::iter(opening).chain(body.flatten())
}

fn failed_events(message: &str) -> Result<SseEvent, Infallible> {
    data(
        &json!({"error": {"message": message, "type": "InternalServerError",
                           "param": null, "code": 500}}),
    )
}

async fn models(State(app): State<Arc<App>>) -> Json<Value> {
    Json(json!({
        "object": "list",
        "data": [{
            "id": app.model,
            "object": "model",
            "created": unix_now(),
            "owned_by": "servetwin",
            "root": app.model,
            "parent": null,
            "max_model_len": app.engine.limits.max_model_len,
        }],
    }))
}

async fn health(State(app): State<Arc<App>>) -> StatusCode {
    if app.engine.is_draining() {
        StatusCode::SERVICE_UNAVAILABLE
    } else {
        StatusCode::OK
    }
}

async fn metrics(State(app): State<Arc<App>>) -> Response {
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        app.metrics.render(),
    )
        .into_response()
}
