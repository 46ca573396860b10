//! Qwen3 configuration from a Hugging Face `config.json` (presets: `presets.rs`).
//!
//! Contract: [`Qwen3Config::from_json_file`] accepts the `config.json` that
//! `transformers` writes for `Qwen3ForCausalLM` (extra keys are ignored,
//! `head_dim` defaults to `hidden_size / num_attention_heads`, `eos_token_id`
//! may be a number or a list, of which the first is kept, RoPE's theta is read
//! from `rope_parameters` (transformers 5.x) or `rope_theta` (4.x)) and rejects
//! what the engine cannot run (another `model_type`, RoPE scaling,
//! sliding-window attention, inconsistent head counts) with an error naming the
//! file.

use serde::{Deserialize, Serialize};
use std::path::Path;
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
    #[error(
        "unknown model preset {0:?}: use one of {list}, or a directory with config.json",
        list = super::presets::PRESETS.join(", ")
    )]
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
    /// Reads a Hugging Face `config.json` (or a directory holding one).
    pub fn from_json_file(path: &Path) -> Result<Self, ModelError> {
        let path = if path.is_dir() {
            path.join("config.json")
        } else {
            path.to_path_buf()
        };
        let shown = path.display().to_string();
        let text = std::fs::read_to_string(&path).map_err(|e| ModelError::Io {
            path: shown.clone(),
            message: e.to_string(),
        })?;
        Self::from_json_str(&text).map_err(|message| ModelError::Config {
            path: shown,
            message,
        })
    }

    /// Parses the text of a `config.json`; the error is the problem alone,
    /// [`Self::from_json_file`] adds the file name.
    pub fn from_json_str(text: &str) -> Result<Self, String> {
        let raw: RawConfig = serde_json::from_str(text).map_err(|e| e.to_string())?;
        raw.into_config()
    }

    /// Checks that the shape is one the runners can execute.
    pub fn validate(&self) -> Result<(), String> {
        let positive = [
            ("vocab_size", self.vocab_size),
            ("hidden_size", self.hidden_size),
            ("intermediate_size", self.intermediate_size),
            ("num_hidden_layers", self.num_hidden_layers),
            ("num_attention_heads", self.num_attention_heads),
            ("num_key_value_heads", self.num_key_value_heads),
            ("head_dim", self.head_dim),
        ];
        if let Some((name, _)) = positive.iter().find(|(_, v)| *v == 0) {
            return Err(format!("{name} must be positive"));
        }
        if !self
            .num_attention_heads
            .is_multiple_of(self.num_key_value_heads)
        {
            return Err(format!(
                "num_attention_heads ({}) is not a multiple of num_key_value_heads ({})",
                self.num_attention_heads, self.num_key_value_heads
            ));
        }
        if !self.head_dim.is_multiple_of(2) {
            return Err(format!(
                "head_dim ({}) must be even for RoPE",
                self.head_dim
            ));
        }
        if !(self.rms_norm_eps > 0.0 && self.rms_norm_eps.is_finite()) {
            return Err(format!(
                "rms_norm_eps ({}) must be positive",
                self.rms_norm_eps
            ));
        }
        if !(self.rope_theta > 0.0 && self.rope_theta.is_finite()) {
            return Err(format!("rope_theta ({}) must be positive", self.rope_theta));
        }
        Ok(())
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

/// `config.json` as written by `transformers`: the optional and loosely typed
/// keys that [`Qwen3Config`] fixes.
#[derive(Deserialize)]
struct RawConfig {
    #[serde(default)]
    model_type: Option<String>,
    vocab_size: usize,
    hidden_size: usize,
    intermediate_size: usize,
    num_hidden_layers: usize,
    num_attention_heads: usize,
    #[serde(default)]
    num_key_value_heads: Option<usize>,
    #[serde(default)]
    head_dim: Option<usize>,
    #[serde(default = "default_rms_norm_eps")]
    rms_norm_eps: f64,
    #[serde(default)]
    rope_theta: Option<f64>,
    #[serde(default)]
    rope_parameters: Option<RopeParameters>,
    #[serde(default)]
    layer_types: Vec<String>,
    #[serde(default)]
    tie_word_embeddings: bool,
    #[serde(default = "default_max_position_embeddings")]
    max_position_embeddings: usize,
    #[serde(default)]
    eos_token_id: Option<serde_json::Value>,
    #[serde(default)]
    rope_scaling: Option<serde_json::Value>,
    #[serde(default)]
    use_sliding_window: bool,
    #[serde(default)]
    hidden_act: Option<String>,
}

fn default_rms_norm_eps() -> f64 {
    1e-6
}

/// transformers 5.x's `rope_parameters`.
#[derive(Deserialize)]
struct RopeParameters {
    #[serde(default)]
    rope_type: Option<String>,
    rope_theta: f64,
}

/// transformers' default when neither `rope_theta` nor `rope_parameters` is given.
const DEFAULT_ROPE_THETA: f64 = 10_000.0;

impl RawConfig {
    fn into_config(self) -> Result<Qwen3Config, String> {
        if let Some(t) = self.model_type.as_deref().filter(|t| *t != "qwen3") {
            return Err(format!("model_type {t:?} is not qwen3"));
        }
        if self.rope_scaling.as_ref().is_some_and(|v| !v.is_null()) {
            return Err("rope_scaling is not supported".into());
        }
        if self.use_sliding_window {
            return Err("use_sliding_window is not supported".into());
        }
        if let Some(t) = self.layer_types.iter().find(|t| *t != "full_attention") {
            return Err(format!(
                "layer type {t:?} is not supported (only full_attention)"
            ));
        }
        let rope_theta = match &self.rope_parameters {
            Some(p) => {
                if let Some(t) = p.rope_type.as_deref().filter(|t| *t != "default") {
                    return Err(format!(
                        "rope_parameters.rope_type {t:?} is not supported (only default)"
                    ));
                }
                p.rope_theta
            }
            None => self.rope_theta.unwrap_or(DEFAULT_ROPE_THETA),
        };
        if let Some(act) = self.hidden_act.as_deref().filter(|a| *a != "silu") {
            return Err(format!("hidden_act {act:?} is not supported (only silu)"));
        }
        if self.num_attention_heads == 0 {
            return Err("num_attention_heads must be positive".into());
        }
        let eos_token_id = match self.eos_token_id {
            None | Some(serde_json::Value::Null) => None,
            Some(v) => Some(parse_eos(&v)?),
        };
        let config = Qwen3Config {
            vocab_size: self.vocab_size,
            hidden_size: self.hidden_size,
            intermediate_size: self.intermediate_size,
            num_hidden_layers: self.num_hidden_layers,
            num_attention_heads: self.num_attention_heads,
            num_key_value_heads: self.num_key_value_heads.unwrap_or(self.num_attention_heads),
            head_dim: self
                .head_dim
                .unwrap_or(self.hidden_size / self.num_attention_heads),
            rms_norm_eps: self.rms_norm_eps,
            rope_theta,
            tie_word_embeddings: self.tie_word_embeddings,
            max_position_embeddings: self.max_position_embeddings,
            eos_token_id,
        };
        config.validate()?;
        Ok(config)
    }
}

fn parse_eos(v: &serde_json::Value) -> Result<u32, String> {
    let first = match v {
        serde_json::Value::Array(items) => items.first().ok_or("eos_token_id is an empty list")?,
        other => other,
    };
    first
        .as_u64()
        .and_then(|id| u32::try_from(id).ok())
        .ok_or_else(|| format!("eos_token_id {v} is not a token id"))
}
