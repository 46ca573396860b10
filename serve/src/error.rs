//! Errors of the server: [`ServeError`] for starting and running it,
//! [`ApiError`] for one HTTP request.
//!
//! Contract: an [`ApiError`] becomes the OpenAI/vLLM error body
//! `{"error": {"message", "type", "param", "code"}}` with `code` equal to the
//! HTTP status; `type` is `BadRequestError` (400), `NotFoundError` (404) or
//! `ServiceUnavailableError` (503), as vLLM names them.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::json;
use thiserror::Error;

/// Why the server could not start or stopped with a failure.
#[derive(Debug, Error)]
pub enum ServeError {
    #[error("binding {addr}: {source}; pick another --host/--port or free the port")]
    Bind {
        addr: String,
        #[source]
        source: std::io::Error,
    },
    #[error("serving HTTP: {0}")]
    Http(#[source] std::io::Error),
    #[error("tokenizer {path}: {message}")]
    Tokenizer { path: String, message: String },
    #[error(
        "time_scale = {0} is invalid: give a finite number > 0 (1 = real time, 0.01 = 100x faster)"
    )]
    TimeScale(f64),
    #[error("starting the tokio runtime: {0}")]
    Runtime(#[source] std::io::Error),
    #[error("installing the SIGINT/SIGTERM handlers: {0}")]
    Signal(#[source] std::io::Error),
    #[error("the engine loop failed: {0}")]
    Engine(String),
    #[error("the engine loop thread panicked")]
    EnginePanicked,
    #[error("starting the engine loop thread: {0}")]
    Spawn(#[source] std::io::Error),
    /// The engine could not be built on the engine loop thread (a runner
    /// that failed to start or warm up, engine settings it cannot serve).
    /// Not a `#[source]`: the message already says it, and `{:#}` would
    /// print it twice.
    #[error("building the engine: {0}")]
    Build(Box<dyn std::error::Error + Send + Sync>),
    #[error("interrupted (SIGINT or SIGTERM) while the engine was being built")]
    InterruptedBuild,
}

/// One request's failure, sent back as the OpenAI error body.
#[derive(Debug, Clone, PartialEq, Error)]
#[error("{message}")]
pub struct ApiError {
    pub status: StatusCode,
    pub message: String,
    /// The request field at fault, if one is.
    pub param: Option<String>,
}

impl ApiError {
    pub fn bad_request(message: impl Into<String>, param: Option<&str>) -> Self {
        Self {
            status: StatusCode::BAD_REQUEST,
            message: message.into(),
            param: param.map(str::to_string),
        }
    }

    pub fn not_found(message: impl Into<String>, param: Option<&str>) -> Self {
        Self {
            status: StatusCode::NOT_FOUND,
            message: message.into(),
            param: param.map(str::to_string),
        }
    }

    pub fn unavailable(message: impl Into<String>) -> Self {
        Self {
            status: StatusCode::SERVICE_UNAVAILABLE,
            message: message.into(),
            param: None,
        }
    }

    /// vLLM's name for the error class of a status.
    pub fn error_type(&self) -> &'static str {
        match self.status {
            StatusCode::BAD_REQUEST => "BadRequestError",
            StatusCode::NOT_FOUND => "NotFoundError",
            StatusCode::SERVICE_UNAVAILABLE => "ServiceUnavailableError",
            _ => "InternalServerError",
        }
    }

    /// The JSON body clients parse.
    pub fn body(&self) -> serde_json::Value {
        json!({
            "error": {
                "message": self.message,
                "type": self.error_type(),
                "param": self.param,
                "code": self.status.as_u16(),
            }
        })
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.status, axum::Json(self.body())).into_response()
    }
}
