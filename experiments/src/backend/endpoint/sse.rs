//! Reading a streamed completion: server-sent event framing, and the
//! tokens, finish and usage each chunk carries.
//!
//! Contract: [`SseFramer`] turns response bytes, split anywhere (mid-line,
//! mid-UTF-8), into the `data` of each event (data lines joined by `\n`;
//! comments and other fields skipped; `\n`, `\r\n` or `\r` line ends).
//! [`StreamTally`] reads those payloads as OpenAI completion (or chat)
//! chunks, stamped with their arrival time on the client's clock.
//!
//! Counting tokens without logprobs: a chunk's tokens are the length of its
//! choice's `token_ids` when the server sends them (vLLM's
//! `return_token_ids`), else the rise of `usage.completion_tokens` when the
//! chunk carries usage (vLLM's `stream_options.continuous_usage_stats`),
//! else one token for a chunk whose text is not empty. At the end the
//! count is reconciled with the final `usage.completion_tokens` (the usage
//! chunk of `include_usage`): tokens the chunks did not show are stamped at
//! the last chunk that carried text, surplus ones dropped from the end.
//!
//! Gaps: the k tokens of one chunk are all stamped at the chunk's time,
//! which is when the client read it, and make one gap, the time since the
//! previous chunk (`RequestRecord::itls_s` counts tokens sharing a time as
//! one delivery), as vLLM's benchmark_serving appends one ITL per chunk. A
//! chunk without tokens (a closing chunk with only `finish_reason`, the
//! usage chunk) stamps none. (vLLM sends one chunk per engine step unless
//! the client reads too slowly and chunks merge; equal token times in
//! `requests.csv` show where that happened.)

use super::error::{excerpt, RequestFailure};
use serde_json::Value;

/// Splits a byte stream into server-sent events' `data`.
#[derive(Debug, Default)]
pub struct SseFramer {
    pending: Vec<u8>,
    /// `data` lines of the event being read.
    data: Vec<String>,
    /// The last byte seen was `\r` (a following `\n` belongs to it).
    after_cr: bool,
}

impl SseFramer {
    /// Feeds bytes; returns the data of every event they complete.
    pub fn push(&mut self, bytes: &[u8]) -> Vec<String> {
        let mut events = Vec::new();
        for &b in bytes {
            if std::mem::take(&mut self.after_cr) && b == b'\n' {
                continue;
            }
            match b {
                b'\n' | b'\r' => {
                    self.after_cr = b == b'\r';
                    let line = std::mem::take(&mut self.pending);
                    self.line(&line, &mut events);
                }
                _ => self.pending.push(b),
            }
        }
        events
    }

    /// The data of an event the stream ended without a blank line after.
    pub fn finish(&mut self) -> Option<String> {
        let line = std::mem::take(&mut self.pending);
        let mut events = Vec::new();
        self.line(&line, &mut events);
        self.line(&[], &mut events);
        events.pop()
    }

    fn line(&mut self, line: &[u8], events: &mut Vec<String>) {
        if line.is_empty() {
            if !self.data.is_empty() {
                events.push(std::mem::take(&mut self.data).join("\n"));
            }
            return;
        }
        let text = String::from_utf8_lossy(line);
        if let Some(value) = text.strip_prefix("data:") {
            self.data
                .push(value.strip_prefix(' ').unwrap_or(value).to_string());
        }
        // `:comment`, `event:`, `id:`, `retry:` carry nothing a completion needs.
    }
}

/// What one streamed completion showed the client.
#[derive(Debug, Clone, PartialEq)]
pub struct Streamed {
    /// Arrival time of every output token (seconds on the client's clock).
    pub token_times_s: Vec<f64>,
    /// The chunk with `finish_reason`, else `data: [DONE]`.
    pub finish_s: f64,
    pub finish_reason: String,
    /// `usage.prompt_tokens_details.cached_tokens`; `None` when the server
    /// sends no prompt token details (vLLM without
    /// `--enable-prompt-tokens-details`).
    pub cached_tokens: Option<usize>,
}

/// Reads the chunks of one stream as they arrive.
#[derive(Debug, Default)]
pub struct StreamTally {
    token_times_s: Vec<f64>,
    last_text_s: Option<f64>,
    finish_reason: Option<String>,
    finish_s: Option<f64>,
    done_s: Option<f64>,
    /// `usage.completion_tokens` of the latest chunk that had usage.
    reported: Option<usize>,
    cached_tokens: Option<usize>,
}

fn malformed(message: &str, data: &str) -> RequestFailure {
    RequestFailure::MalformedSse {
        message: message.to_string(),
        excerpt: excerpt(data),
    }
}

fn count(value: Option<&Value>) -> Option<usize> {
    value.and_then(Value::as_u64).map(|n| n as usize)
}

impl StreamTally {
    /// Output tokens seen so far.
    pub fn tokens(&self) -> usize {
        self.token_times_s.len()
    }

    /// Reads one event's data, arrived at `now`.
    pub fn on_data(&mut self, data: &str, now: f64) -> Result<(), RequestFailure> {
        if data.trim() == "[DONE]" {
            self.done_s = Some(now);
            return Ok(());
        }
        if self.done_s.is_some() {
            return Err(malformed("data after [DONE]", data));
        }
        let chunk: Value =
            serde_json::from_str(data).map_err(|e| malformed(&format!("not JSON: {e}"), data))?;
        if let Some(error) = chunk.get("error") {
            let message = error.get("message").and_then(Value::as_str);
            return Err(RequestFailure::InStream(
                message.map_or_else(|| excerpt(&error.to_string()), str::to_string),
            ));
        }
        let choices = match chunk.get("choices") {
            None | Some(Value::Null) => &[][..],
            Some(Value::Array(a)) => a.as_slice(),
            Some(_) => return Err(malformed("`choices` is not an array", data)),
        };
        let usage = chunk.get("usage").filter(|u| u.is_object());
        let usage_tokens = usage.and_then(|u| count(u.get("completion_tokens")));
        if let Some(choice) = choices.first() {
            let text = choice
                .get("text")
                .or_else(|| choice.pointer("/delta/content"))
                .and_then(Value::as_str)
                .unwrap_or("");
            let ids = choice.get("token_ids").and_then(Value::as_array);
            let new = match (ids, usage_tokens) {
                (Some(ids), _) => ids.len(),
                (None, Some(total)) => total.saturating_sub(self.tokens()),
                (None, None) => usize::from(!text.is_empty()),
            };
            if new > 0 || !text.is_empty() {
                self.last_text_s = Some(now);
            }
            self.token_times_s.extend(std::iter::repeat_n(now, new));
            if let Some(reason) = choice.get("finish_reason").and_then(Value::as_str) {
                self.finish_reason = Some(reason.to_string());
                self.finish_s = Some(now);
            }
        }
        if let Some(u) = usage {
            self.reported = usage_tokens.or(self.reported);
            if let Some(cached) = count(u.pointer("/prompt_tokens_details/cached_tokens")) {
                self.cached_tokens = Some(cached);
            }
        }
        Ok(())
    }

    /// The stream's record once it has ended.
    pub fn finish(mut self) -> Result<Streamed, RequestFailure> {
        let Some(done_s) = self.done_s else {
            return Err(RequestFailure::Truncated {
                tokens: self.tokens(),
            });
        };
        if let Some(total) = self.reported {
            let at = self.last_text_s.or(self.finish_s).unwrap_or(done_s);
            let missing = total.saturating_sub(self.tokens());
            self.token_times_s.extend(std::iter::repeat_n(at, missing));
            self.token_times_s.truncate(total);
        }
        Ok(Streamed {
            token_times_s: self.token_times_s,
            finish_s: self.finish_s.unwrap_or(done_s),
            finish_reason: self.finish_reason.unwrap_or_else(|| "unknown".into()),
            cached_tokens: self.cached_tokens,
        })
    }
}

#[cfg(test)]
#[path = "sse_tests.rs"]
mod tests;
