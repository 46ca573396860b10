//! OpenAI request bodies, read and checked field by field.
//!
//! Contract: [`parse_completion`] and [`parse_chat`] take the raw body and
//! return a checked request, or an [`ApiError`] (400) naming the field and
//! what to send instead: malformed JSON, a body that is not an object, a
//! field of the wrong type, `max_tokens` below 1, `n` other than 1, an empty
//! prompt or a batch of prompts. Fields this server does not act on
//! (`temperature`, `top_p`, `seed`, ...) are accepted and ignored, so stock
//! OpenAI clients work unchanged; docs/serve.md lists them.
//!
//! The body is read as a `serde_json::Value` first rather than derived
//! types, so a wrong type is reported with the field's name and the type
//! expected instead of serde's position in the text.

use crate::error::ApiError;
use serde_json::{Map, Value};

/// A completion prompt: text, or token ids as vLLM accepts them.
#[derive(Debug, Clone, PartialEq)]
pub enum PromptInput {
    Text(String),
    Tokens(Vec<u32>),
}

/// One chat message, its content flattened to text.
#[derive(Debug, Clone, PartialEq)]
pub struct ChatMessage {
    pub role: String,
    pub content: String,
}

/// Fields shared by both endpoints.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct GenerationParams {
    pub model: Option<String>,
    /// `None`: the endpoint's default (see docs/serve.md).
    pub max_tokens: Option<usize>,
    pub stream: bool,
    /// `stream_options.include_usage`: a last chunk with `usage`.
    pub include_usage: bool,
    pub ignore_eos: bool,
    /// vLLM's `cache_salt`: requests with different salts share no cached blocks.
    pub cache_salt: Option<String>,
    /// vLLM's `return_token_ids`: each choice (each chunk's, when
    /// streaming) also carries its output `token_ids`.
    pub return_token_ids: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub struct CompletionRequest {
    pub prompt: PromptInput,
    pub params: GenerationParams,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ChatRequest {
    pub messages: Vec<ChatMessage>,
    pub params: GenerationParams,
}

fn wrong_type(field: &str, expected: &str, got: &Value) -> ApiError {
    ApiError::bad_request(
        format!("`{field}` must be {expected}, got {}", type_name(got)),
        Some(field),
    )
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn object(body: &[u8]) -> Result<Map<String, Value>, ApiError> {
    let value: Value = serde_json::from_slice(body).map_err(|e| {
        ApiError::bad_request(
            format!("the body is not valid JSON ({e}); send a JSON object"),
            None,
        )
    })?;
    match value {
        Value::Object(map) => Ok(map),
        other => Err(ApiError::bad_request(
            format!("the body must be a JSON object, got {}", type_name(&other)),
            None,
        )),
    }
}

/// A field that may be absent or null.
fn present<'a>(map: &'a Map<String, Value>, field: &str) -> Option<&'a Value> {
    map.get(field).filter(|v| !v.is_null())
}

fn boolean(map: &Map<String, Value>, field: &str) -> Result<bool, ApiError> {
    match present(map, field) {
        None => Ok(false),
        Some(Value::Bool(b)) => Ok(*b),
        Some(v) => Err(wrong_type(field, "true or false", v)),
    }
}

fn string(map: &Map<String, Value>, field: &str) -> Result<Option<String>, ApiError> {
    match present(map, field) {
        None => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(v) => Err(wrong_type(field, "a string", v)),
    }
}

fn max_tokens(map: &Map<String, Value>, field: &str) -> Result<Option<usize>, ApiError> {
    let Some(v) = present(map, field) else {
        return Ok(None);
    };
    let Some(n) = v.as_i64().or_else(|| v.as_u64().map(|_| i64::MAX)) else {
        return Err(wrong_type(field, "an integer", v));
    };
    if n < 1 {
        return Err(ApiError::bad_request(
            format!("`{field}` = {n}: ask for at least 1 output token"),
            Some(field),
        ));
    }
    Ok(Some(usize::try_from(n).unwrap_or(usize::MAX)))
}

fn params(
    map: &Map<String, Value>,
    max_tokens_fields: &[&str],
) -> Result<GenerationParams, ApiError> {
    match present(map, "n") {
        None => {}
        Some(v) if v.as_u64() == Some(1) => {}
        Some(v) => {
            return Err(ApiError::bad_request(
                format!("`n` = {v}: only n = 1 is supported; send one request per choice"),
                Some("n"),
            ))
        }
    }
    let mut limit = None;
    for field in max_tokens_fields {
        if let Some(n) = max_tokens(map, field)? {
            limit = Some(n);
        }
    }
    let include_usage = match present(map, "stream_options") {
        None => false,
        Some(Value::Object(options)) => boolean(options, "include_usage")
            .map_err(|e| ApiError::bad_request(e.message, Some("stream_options.include_usage")))?,
        Some(v) => return Err(wrong_type("stream_options", "an object", v)),
    };
    Ok(GenerationParams {
        model: string(map, "model")?,
        max_tokens: limit,
        stream: boolean(map, "stream")?,
        include_usage,
        ignore_eos: boolean(map, "ignore_eos")?,
        cache_salt: string(map, "cache_salt")?,
        return_token_ids: boolean(map, "return_token_ids")?,
    })
}

fn token_ids(items: &[Value]) -> Option<Vec<u32>> {
    items
        .iter()
        .map(|v| v.as_u64().and_then(|n| u32::try_from(n).ok()))
        .collect()
}

fn prompt(map: &Map<String, Value>) -> Result<PromptInput, ApiError> {
    let field = "prompt";
    let batch_error = || {
        ApiError::bad_request(
            "`prompt` holds several prompts; batched prompts are not supported, send one prompt per request",
            Some(field),
        )
    };
    let input = match present(map, field) {
        None => {
            return Err(ApiError::bad_request(
                "`prompt` is missing: send text or a list of token ids",
                Some(field),
            ))
        }
        Some(Value::String(s)) => PromptInput::Text(s.clone()),
        Some(Value::Array(items)) => match items.first() {
            Some(Value::String(_)) | Some(Value::Array(_)) if items.len() > 1 => {
                return Err(batch_error())
            }
            Some(Value::String(s)) => PromptInput::Text(s.clone()),
            Some(Value::Array(inner)) => {
                PromptInput::Tokens(token_ids(inner).ok_or_else(|| {
                    ApiError::bad_request(
                        "`prompt` token ids must be integers in 0..2^32",
                        Some(field),
                    )
                })?)
            }
            _ => PromptInput::Tokens(token_ids(items).ok_or_else(|| {
                ApiError::bad_request(
                    "`prompt` must be a string or a list of non-negative integer token ids",
                    Some(field),
                )
            })?),
        },
        Some(v) => return Err(wrong_type(field, "a string or a list of token ids", v)),
    };
    let empty = match &input {
        PromptInput::Text(s) => s.is_empty(),
        PromptInput::Tokens(t) => t.is_empty(),
    };
    if empty {
        return Err(ApiError::bad_request(
            "`prompt` is empty: send at least one token",
            Some(field),
        ));
    }
    Ok(input)
}

/// The text of a message's `content`: a string, or text parts.
fn content(value: Option<&Value>, index: usize) -> Result<String, ApiError> {
    let field = format!("messages[{index}].content");
    match value {
        None | Some(Value::Null) => Ok(String::new()),
        Some(Value::String(s)) => Ok(s.clone()),
        Some(Value::Array(parts)) => {
            let mut text = String::new();
            for part in parts {
                match part.get("type").and_then(Value::as_str) {
                    Some("text") => match part.get("text") {
                        Some(Value::String(s)) => text.push_str(s),
                        _ => {
                            return Err(ApiError::bad_request(
                                format!("`{field}`: a text part needs a string `text`"),
                                Some(&field),
                            ))
                        }
                    },
                    other => {
                        return Err(ApiError::bad_request(
                            format!(
                                "`{field}`: part type {} is not supported; send text parts only",
                                other.unwrap_or("(none)")
                            ),
                            Some(&field),
                        ))
                    }
                }
            }
            Ok(text)
        }
        Some(v) => Err(wrong_type(&field, "a string or a list of text parts", v)),
    }
}

fn messages(map: &Map<String, Value>) -> Result<Vec<ChatMessage>, ApiError> {
    let field = "messages";
    let items = match present(map, field) {
        Some(Value::Array(items)) if !items.is_empty() => items,
        Some(Value::Array(_)) | None => {
            return Err(ApiError::bad_request(
                "`messages` is missing or empty: send at least one message",
                Some(field),
            ))
        }
        Some(v) => return Err(wrong_type(field, "a list of messages", v)),
    };
    items
        .iter()
        .enumerate()
        .map(|(i, item)| {
            let Value::Object(m) = item else {
                return Err(wrong_type(&format!("messages[{i}]"), "an object", item));
            };
            let role = match m.get("role") {
                Some(Value::String(r)) => r.clone(),
                Some(v) => return Err(wrong_type(&format!("messages[{i}].role"), "a string", v)),
                None => {
                    return Err(ApiError::bad_request(
                        format!("`messages[{i}].role` is missing"),
                        Some(&format!("messages[{i}].role")),
                    ))
                }
            };
            Ok(ChatMessage {
                role,
                content: content(m.get("content"), i)?,
            })
        })
        .collect()
}

/// Reads a `/v1/completions` body.
pub fn parse_completion(body: &[u8]) -> Result<CompletionRequest, ApiError> {
    let map = object(body)?;
    Ok(CompletionRequest {
        prompt: prompt(&map)?,
        params: params(&map, &["max_tokens"])?,
    })
}

/// Reads a `/v1/chat/completions` body; `max_completion_tokens` (OpenAI's
/// newer name) wins over `max_tokens` when both are given.
pub fn parse_chat(body: &[u8]) -> Result<ChatRequest, ApiError> {
    let map = object(body)?;
    Ok(ChatRequest {
        messages: messages(&map)?,
        params: params(&map, &["max_tokens", "max_completion_tokens"])?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_text_and_token_prompts_with_their_options() {
        let r = parse_completion(
            br#"{"model":"m","prompt":"hi","max_tokens":3,"stream":true,
                "stream_options":{"include_usage":true},"cache_salt":"a","temperature":0.7,
                "return_token_ids":true}"#,
        )
        .unwrap();
        assert!(r.params.return_token_ids);
        assert_eq!(r.prompt, PromptInput::Text("hi".into()));
        assert_eq!(r.params.max_tokens, Some(3));
        assert!(r.params.stream && r.params.include_usage);
        assert_eq!(r.params.cache_salt.as_deref(), Some("a"));
        let r = parse_completion(br#"{"prompt":[1,2,3]}"#).unwrap();
        assert_eq!(r.prompt, PromptInput::Tokens(vec![1, 2, 3]));
        assert!(!r.params.return_token_ids);
        let r = parse_completion(br#"{"prompt":[[4,5]]}"#).unwrap();
        assert_eq!(r.prompt, PromptInput::Tokens(vec![4, 5]));
    }

    #[test]
    fn refuses_bad_fields_naming_them() {
        let cases: &[(&[u8], Option<&str>)] = &[
            (b"{not json", None),
            (b"[1]", None),
            (br#"{"prompt":"a","max_tokens":-1}"#, Some("max_tokens")),
            (br#"{"prompt":"a","max_tokens":"ten"}"#, Some("max_tokens")),
            (br#"{"prompt":"a","stream":"yes"}"#, Some("stream")),
            (br#"{"prompt":5}"#, Some("prompt")),
            (br#"{"prompt":[1,-2]}"#, Some("prompt")),
            (br#"{"prompt":["a","b"]}"#, Some("prompt")),
            (br#"{"prompt":""}"#, Some("prompt")),
            (br#"{"prompt":"a","n":2}"#, Some("n")),
            (
                br#"{"prompt":"a","return_token_ids":1}"#,
                Some("return_token_ids"),
            ),
        ];
        for (body, param) in cases {
            let e = parse_completion(body).unwrap_err();
            assert_eq!(e.status.as_u16(), 400, "{}", String::from_utf8_lossy(body));
            assert_eq!(e.param.as_deref(), *param, "{}", e.message);
        }
    }

    #[test]
    fn reads_chat_messages_and_text_parts() {
        let r = parse_chat(
            br#"{"messages":[{"role":"system","content":"be brief"},
                {"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}],
                "max_completion_tokens":4}"#,
        )
        .unwrap();
        assert_eq!(r.messages[1].content, "ab");
        assert_eq!(r.params.max_tokens, Some(4));
        let e = parse_chat(br#"{"messages":[{"content":"x"}]}"#).unwrap_err();
        assert_eq!(e.param.as_deref(), Some("messages[0].role"));
        let e = parse_chat(br#"{"messages":[]}"#).unwrap_err();
        assert_eq!(e.param.as_deref(), Some("messages"));
    }
}
