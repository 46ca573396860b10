//! Qwen3 configuration from a Hugging Face `config.json`, and presets.

use serde::{Deserialize, Serialize};
use thiserror::Error;

#[derive(Debug, Error)]
pub enum ModelError {
    #[error("{path}: {message}")]
    Io { path: String, message: String },
    #[error("{path}: invalid config.json: {message}")]
    Config { path: String, message: String },
    #[error("tensor {name}: missing from the checkpoint")]
    MissingTensor { name: String },
    #[error("tensor {name}: shape {found:?}, expected {expected:?}")]
    BadShape {
        name: String,
        found: Vec<usize>,
        expected: Vec<usize>,
    },
    #[error("tensor {name}: dtype {found}, expected bf16, f16 or f32")]
    BadDtype { name: String, found: String },
    #[error("unknown model preset {0:?}: use qwen3-0.6b, tiny, or a directory with config.json")]
    UnknownPreset(String),
}

/// The fields of Hugging Face's Qwen3 `config.json` that the engine uses.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Qwen3Config {
    pub vocab_size: usize,
    pub hidden_size: usize,
    pub intermediate_size: usize,
    pub num_hidden_layers: usize,
    pub num_attention_heads: usize,
    pub num_key_value_heads: usize,
    pub head_dim: usize,
    pub rms_norm_eps: f64,
    pub rope_theta: f64,
    #[serde(default)]
    pub tie_word_embeddings: bool,
    #[serde(default = "default_max_position_embeddings")]
    pub max_position_embeddings: usize,
    #[serde(default)]
    pub eos_token_id: Option<u32>,
}

fn default_max_position_embeddings() -> usize {
    40960
}

impl Qwen3Config {
    /// The real Qwen3-0.6B shape.
    pub fn qwen3_0_6b() -> Self {
        Self {
            vocab_size: 151_936,
            hidden_size: 1024,
            intermediate_size: 3072,
            num_hidden_layers: 28,
            num_attention_heads: 16,
            num_key_value_heads: 8,
            head_dim: 128,
            rms_norm_eps: 1e-6,
            rope_theta: 1_000_000.0,
            tie_word_embeddings: true,
            max_position_embeddings: 40_960,
            eos_token_id: Some(151_645),
        }
    }

    /// A few layers and small widths, for tests (keeps GQA: 4 query heads, 2 KV heads).
    pub fn tiny() -> Self {
        Self {
            vocab_size: 512,
            hidden_size: 64,
            intermediate_size: 128,
            num_hidden_layers: 2,
            num_attention_heads: 4,
            num_key_value_heads: 2,
            head_dim: 32,
            rms_norm_eps: 1e-6,
            rope_theta: 10_000.0,
            tie_word_embeddings: true,
            max_position_embeddings: 4096,
            eos_token_id: None,
        }
    }

    pub fn preset(name: &str) -> Result<Self, ModelError> {
        match name {
            "qwen3-0.6b" => Ok(Self::qwen3_0_6b()),
            "tiny" => Ok(Self::tiny()),
            other => Err(ModelError::UnknownPreset(other.to_string())),
        }
    }

    pub fn q_size(&self) -> usize {
        self.num_attention_heads * self.head_dim
    }
    pub fn kv_size(&self) -> usize {
        self.num_key_value_heads * self.head_dim
    }
    /// Bytes of K and V for one token across all layers, at `bytes_per_elem`.
    pub fn kv_bytes_per_token(&self, bytes_per_elem: usize) -> usize {
        2 * self.num_hidden_layers * self.kv_size() * bytes_per_elem
    }
    /// Parameters, counting a tied LM head once.
    pub fn num_params(&self) -> usize {
        let h = self.hidden_size;
        let per_layer = h * (self.q_size() + 2 * self.kv_size()) // qkv
            + self.q_size() * h // o
            + 3 * h * self.intermediate_size // gate, up, down
            + 2 * h + 2 * self.head_dim; // norms
        let embed = self.vocab_size * h;
        let head = if self.tie_word_embeddings { 0 } else { embed };
        embed + head + self.num_hidden_layers * per_layer + h
    }
}
