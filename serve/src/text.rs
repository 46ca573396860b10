//! Text to token ids and back, and the chat template.
//!
//! Contract: with a Hugging Face `tokenizer.json` ([`TextCodec::from_file`])
//! text is encoded without added special tokens and each output token is
//! decoded on its own (ids beyond the vocabulary wrap around it, since the
//! simulated runner's tokens are placeholders). Without one
//! ([`TextCodec::Bytes`]) a text prompt is one token per UTF-8 byte (ids
//! 0..=255) and an output token `t` is the letter `a + t mod 26`: a stand-in
//! that keeps prompt lengths and the prefix cache honest when no tokenizer
//! is at hand. Chat messages go through [`chat_prompt`], Qwen's ChatML
//! layout, whatever the codec.

use crate::error::ServeError;
use crate::openai::ChatMessage;
use std::path::Path;

pub enum TextCodec {
    /// One token per byte in, a letter per token out.
    Bytes,
    Tokenizer(Box<tokenizers::Tokenizer>),
}

impl std::fmt::Debug for TextCodec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TextCodec::Bytes => f.write_str("TextCodec::Bytes"),
            TextCodec::Tokenizer(_) => f.write_str("TextCodec::Tokenizer"),
        }
    }
}

impl TextCodec {
    pub fn from_file(path: &Path) -> Result<Self, ServeError> {
        let tokenizer =
            tokenizers::Tokenizer::from_file(path).map_err(|e| ServeError::Tokenizer {
                path: path.display().to_string(),
                message: e.to_string(),
            })?;
        Ok(TextCodec::Tokenizer(Box::new(tokenizer)))
    }

    /// Token ids of `text`.
    pub fn encode(&self, text: &str) -> Result<Vec<u32>, String> {
        match self {
            TextCodec::Bytes => Ok(text.bytes().map(u32::from).collect()),
            TextCodec::Tokenizer(t) => t
                .encode(text, false)
                .map(|e| e.get_ids().to_vec())
                .map_err(|e| e.to_string()),
        }
    }

    /// The text of one output token.
    pub fn decode_token(&self, token: u32) -> String {
        match self {
            TextCodec::Bytes => char::from(b'a' + (token % 26) as u8).to_string(),
            TextCodec::Tokenizer(t) => {
                let vocab = t.get_vocab_size(true).max(1) as u32;
                t.decode(&[token % vocab], false).unwrap_or_default()
            }
        }
    }
}

/// Qwen's ChatML layout: each message as `<|im_start|>ROLE\nCONTENT<|im_end|>\n`,
/// then `<|im_start|>assistant\n` for the reply.
pub fn chat_prompt(messages: &[ChatMessage]) -> String {
    let mut text = String::new();
    for m in messages {
        text.push_str("<|im_start|>");
        text.push_str(&m.role);
        text.push('\n');
        text.push_str(&m.content);
        text.push_str("<|im_end|>\n");
    }
    text.push_str("<|im_start|>assistant\n");
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_stand_in_counts_bytes_and_spells_letters() {
        let codec = TextCodec::Bytes;
        assert_eq!(codec.encode("hé").unwrap(), vec![104, 195, 169]);
        assert_eq!(codec.decode_token(0), "a");
        assert_eq!(codec.decode_token(27), "b");
    }

    #[test]
    fn chat_template_ends_with_the_assistant_turn() {
        let text = chat_prompt(&[ChatMessage {
            role: "user".into(),
            content: "hi".into(),
        }]);
        assert_eq!(
            text,
            "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
        );
    }

    #[test]
    fn a_missing_tokenizer_file_is_an_error_naming_it() {
        let e = TextCodec::from_file(Path::new("/nonexistent/tokenizer.json")).unwrap_err();
        assert!(e.to_string().contains("/nonexistent/tokenizer.json"), "{e}");
    }
}
