//! OpenAI response bodies and stream chunks, as JSON values.
//!
//! Contract: [`Kind`] picks the endpoint's shapes (`text_completion` with
//! `text`, or `chat.completion[.chunk]` with `message`/`delta`); [`Usage`]
//! always carries `prompt_tokens_details.cached_tokens` (vLLM sends it only
//! with `--enable-prompt-tokens-details`; here it is always on). Choices
//! carry `token_ids` (the output tokens, or a chunk's) when given them, as
//! vLLM's do with `return_token_ids`.

use engine::FinishReason;
use serde_json::{json, Value};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Completion,
    Chat,
}

/// Fields every body of one request shares.
#[derive(Debug, Clone)]
pub struct Header {
    pub kind: Kind,
    pub id: String,
    pub created: u64,
    pub model: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Usage {
    pub prompt_tokens: usize,
    pub completion_tokens: usize,
    pub cached_tokens: usize,
}

impl Usage {
    pub fn to_json(self) -> Value {
        json!({
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "total_tokens": self.prompt_tokens + self.completion_tokens,
            "prompt_tokens_details": {"cached_tokens": self.cached_tokens},
        })
    }
}

/// OpenAI's `finish_reason` for an engine finish.
pub fn finish_reason(reason: FinishReason) -> &'static str {
    match reason {
        FinishReason::Length => "length",
        FinishReason::Stop => "stop",
        FinishReason::Aborted => "abort",
    }
}

impl Header {
    fn object(&self, chunk: bool) -> &'static str {
        match (self.kind, chunk) {
            (Kind::Completion, _) => "text_completion",
            (Kind::Chat, false) => "chat.completion",
            (Kind::Chat, true) => "chat.completion.chunk",
        }
    }

    fn with_choices(&self, chunk: bool, choices: Value) -> Value {
        json!({
            "id": self.id,
            "object": self.object(chunk),
            "created": self.created,
            "model": self.model,
            "choices": choices,
        })
    }

    /// The whole answer of a non-streaming request.
    pub fn full(
        &self,
        text: &str,
        token_ids: Option<&[u32]>,
        reason: FinishReason,
        usage: Usage,
    ) -> Value {
        let mut choice = match self.kind {
            Kind::Completion => json!({
                "index": 0, "text": text, "logprobs": null,
                "finish_reason": finish_reason(reason), "stop_reason": null,
            }),
            Kind::Chat => json!({
                "index": 0, "message": {"role": "assistant", "content": text},
                "logprobs": null, "finish_reason": finish_reason(reason), "stop_reason": null,
            }),
        };
        if let Some(ids) = token_ids {
            choice["token_ids"] = json!(ids);
        }
        let mut body = self.with_choices(false, json!([choice]));
        body["usage"] = usage.to_json();
        body
    }

    /// A streamed piece of text (`finish_reason` null), or with `reason` the
    /// chunk that ends the choice.
    pub fn chunk(
        &self,
        text: &str,
        token_ids: Option<&[u32]>,
        reason: Option<FinishReason>,
    ) -> Value {
        let reason = reason.map(finish_reason);
        let mut choice = match self.kind {
            Kind::Completion => json!({
                "index": 0, "text": text, "logprobs": null, "finish_reason": reason,
            }),
            Kind::Chat if reason.is_some() => json!({
                "index": 0, "delta": {}, "logprobs": null, "finish_reason": reason,
            }),
            Kind::Chat => json!({
                "index": 0, "delta": {"content": text}, "logprobs": null, "finish_reason": null,
            }),
        };
        if let Some(ids) = token_ids {
            choice["token_ids"] = json!(ids);
        }
        self.with_choices(true, json!([choice]))
    }

    /// Chat streams open with the assistant's role, as OpenAI's do.
    pub fn role_chunk(&self) -> Value {
        self.with_choices(
            true,
            json!([{"index": 0, "delta": {"role": "assistant", "content": ""},
                    "logprobs": null, "finish_reason": null}]),
        )
    }

    /// `stream_options.include_usage`: the last chunk, no choices.
    pub fn usage_chunk(&self, usage: Usage) -> Value {
        let mut body = self.with_choices(true, json!([]));
        body["usage"] = usage.to_json();
        body
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(kind: Kind) -> Header {
        Header {
            kind,
            id: "x".into(),
            created: 1,
            model: "m".into(),
        }
    }

    #[test]
    fn bodies_carry_openai_fields() {
        let usage = Usage {
            prompt_tokens: 5,
            completion_tokens: 2,
            cached_tokens: 0,
        };
        let full = header(Kind::Completion).full("ab", None, FinishReason::Length, usage);
        assert_eq!(full["object"], "text_completion");
        assert_eq!(full["choices"][0]["text"], "ab");
        assert!(full["choices"][0].get("token_ids").is_none());
        let with_ids =
            header(Kind::Completion).full("ab", Some(&[0, 1]), FinishReason::Length, usage);
        assert_eq!(with_ids["choices"][0]["token_ids"], json!([0, 1]));
        let piece = header(Kind::Completion).chunk("b", Some(&[27]), None);
        assert_eq!(piece["choices"][0]["token_ids"], json!([27]));
        assert_eq!(full["usage"]["total_tokens"], 7);
        assert_eq!(full["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
        let chat = header(Kind::Chat).full("ab", None, FinishReason::Stop, usage);
        assert_eq!(chat["choices"][0]["message"]["content"], "ab");
        assert_eq!(chat["choices"][0]["finish_reason"], "stop");
        let end = header(Kind::Chat).chunk("", None, Some(FinishReason::Length));
        assert_eq!(end["object"], "chat.completion.chunk");
        assert_eq!(end["choices"][0]["finish_reason"], "length");
        assert!(header(Kind::Chat).usage_chunk(usage)["choices"]
            .as_array()
            .unwrap()
            .is_empty());
    }
}
