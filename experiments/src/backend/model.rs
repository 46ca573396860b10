//! The model a run uses: a preset shape or a Hugging Face directory.
//!
//! Contract: `--model NAME` is a preset (`qwen3-0.6b`, `tiny`) or a directory
//! with `config.json` and `*.safetensors`. Presets get synthetic weights from
//! a seed (same values on every backend); directories load their weights.
//! Sim mode needs only the configuration, so weights are produced on demand.

use super::BackendError;
use engine::model::{Qwen3Config, Qwen3Weights};
use std::path::{Path, PathBuf};

/// Presets `--model` accepts.
pub const PRESETS: &[&str] = &["qwen3-0.6b", "tiny"];

#[derive(Debug, Clone, PartialEq)]
pub enum ModelChoice {
    Preset(String),
    Dir(PathBuf),
}

impl ModelChoice {
    /// A preset name, else an existing directory; anything else is an error
    /// naming the presets.
    pub fn parse(text: &str) -> Result<Self, BackendError> {
        if PRESETS.contains(&text) {
            return Ok(Self::Preset(text.to_string()));
        }
        let path = Path::new(text);
        if path.is_dir() {
            return Ok(Self::Dir(path.to_path_buf()));
        }
        Err(BackendError::Model {
            name: text.to_string(),
            message: format!(
                "neither a preset ({}) nor a directory with config.json",
                PRESETS.join(", ")
            ),
        })
    }

    /// How runs name the model (preset name or directory path).
    pub fn name(&self) -> String {
        match self {
            Self::Preset(p) => p.clone(),
            Self::Dir(d) => d.display().to_string(),
        }
    }
}

/// A model's configuration, and where its weights come from.
#[derive(Debug, Clone)]
pub struct LoadedModel {
    pub choice: ModelChoice,
    pub config: Qwen3Config,
}

impl LoadedModel {
    /// Reads the configuration only (preset table or `config.json`).
    pub fn config_only(choice: &ModelChoice) -> Result<Self, BackendError> {
        let err = |message: String| BackendError::Model {
            name: choice.name(),
            message,
        };
        let config = match choice {
            ModelChoice::Preset(p) => Qwen3Config::preset(p).map_err(|e| err(e.to_string()))?,
            ModelChoice::Dir(d) => {
                Qwen3Config::from_json_file(d).map_err(|e| err(e.to_string()))?
            }
        };
        config.validate().map_err(err)?;
        Ok(Self {
            choice: choice.clone(),
            config,
        })
    }

    pub fn name(&self) -> String {
        self.choice.name()
    }

    /// Prompt token ids are drawn below this: the model's vocabulary, without
    /// Qwen3's special (control) tokens above the regular ones.
    pub fn prompt_vocab(&self) -> u32 {
        let size = u32::try_from(self.config.vocab_size).unwrap_or(u32::MAX);
        size.min(sim::workload::QWEN3_REGULAR_VOCAB)
    }

    /// Synthetic weights from `seed` (presets) or the directory's safetensors.
    pub fn weights(&self, seed: u64) -> Result<Qwen3Weights, BackendError> {
        match &self.choice {
            ModelChoice::Preset(_) => Ok(Qwen3Weights::synthetic(&self.config, seed)),
            ModelChoice::Dir(d) => {
                Qwen3Weights::load(d, &self.config).map_err(|e| BackendError::Model {
                    name: self.name(),
                    message: e.to_string(),
                })
            }
        }
    }

    /// The weights' provenance for records: seed for presets.
    pub fn weights_label(&self, seed: u64) -> String {
        match &self.choice {
            ModelChoice::Preset(p) => format!("{p} (synthetic weights, seed {seed})"),
            ModelChoice::Dir(d) => format!("{} (safetensors)", d.display()),
        }
    }
}
