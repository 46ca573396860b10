//! The model a run uses: a preset shape or a Hugging Face directory.
//!
//! Contract: `--model NAME` is a preset (engine's [`PRESETS`], the same names
//! engine-bench and cuda-check take) or a directory with `config.json`.
//! Presets, and directories without `*.safetensors` files, get synthetic
//! weights of their shape from a seed (same values on every backend);
//! directories with them load their weights. The records' model label says
//! which ([`LoadedModel::weights_label`]). Sim mode needs only the
//! configuration, so weights are produced on demand.

use super::BackendError;
pub use engine::model::PRESETS;
use engine::model::{ModelSpec, ModelWeights, Qwen3Config, Qwen3Weights};
use std::path::{Path, PathBuf};

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
    spec: ModelSpec,
}

impl LoadedModel {
    /// Reads the configuration only (preset table or `config.json`), and
    /// whether a directory holds a checkpoint.
    pub fn config_only(choice: &ModelChoice) -> Result<Self, BackendError> {
        let err = |message: String| BackendError::Model {
            name: choice.name(),
            message,
        };
        let spec = match choice {
            ModelChoice::Preset(p) => ModelSpec::parse(p),
            ModelChoice::Dir(d) => ModelSpec::from_dir(d),
        }
        .map_err(|e| err(e.to_string()))?;
        spec.config.validate().map_err(err)?;
        Ok(Self {
            choice: choice.clone(),
            config: spec.config.clone(),
            spec,
        })
    }

    pub fn name(&self) -> String {
        self.choice.name()
    }

    /// Whether the weights are synthetic (a preset, or a directory without safetensors).
    pub fn is_synthetic(&self) -> bool {
        self.spec.is_synthetic()
    }

    /// Prompt token ids are drawn below this: the model's vocabulary, without
    /// Qwen3's special (control) tokens above the regular ones.
    pub fn prompt_vocab(&self) -> u32 {
        let size = u32::try_from(self.config.vocab_size).unwrap_or(u32::MAX);
        size.min(sim::workload::QWEN3_REGULAR_VOCAB)
    }

    /// Host weights: synthetic from `seed`, or the directory's safetensors.
    pub fn weights(&self, seed: u64) -> Result<Qwen3Weights, BackendError> {
        self.spec.host_weights(seed).map_err(|e| self.model_err(e))
    }

    /// The weights as a runner takes them: the seed alone for synthetic ones
    /// (the CUDA runner generates them on the device), else the loaded
    /// checkpoint. `ModelWeights::source` gives the runners' `WeightSource`.
    pub fn runner_weights(&self, seed: u64) -> Result<ModelWeights, BackendError> {
        self.spec.weights(seed).map_err(|e| self.model_err(e))
    }

    /// The weights' provenance for records: `NAME (synthetic weights, seed
    /// N)` or `DIR (safetensors)`.
    pub fn weights_label(&self, seed: u64) -> String {
        self.spec.weights_label(seed)
    }

    fn model_err(&self, e: engine::model::ModelError) -> BackendError {
        BackendError::Model {
            name: self.name(),
            message: e.to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_engine_preset_is_a_choice() {
        for name in PRESETS {
            let model = LoadedModel::config_only(&ModelChoice::parse(name).unwrap()).unwrap();
            assert!(model.is_synthetic());
            assert_eq!(
                model.weights_label(3),
                format!("{name} (synthetic weights, seed 3)")
            );
        }
        let err = ModelChoice::parse("qwen3-72b").unwrap_err().to_string();
        assert!(err.contains(&PRESETS.join(", ")), "{err}");
    }

    #[test]
    fn config_only_directory_gets_synthetic_weights_of_its_shape() {
        let dir = std::env::temp_dir().join(format!("exp-config-only-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let config = r#"{"model_type": "qwen3", "vocab_size": 512, "hidden_size": 64,
            "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
            "num_key_value_heads": 2, "head_dim": 32, "rope_theta": 10000,
            "tie_word_embeddings": true, "max_position_embeddings": 4096}"#;
        std::fs::write(dir.join("config.json"), config).unwrap();
        let choice = ModelChoice::parse(&dir.display().to_string()).unwrap();
        let model = LoadedModel::config_only(&choice).unwrap();
        assert_eq!(model.config, Qwen3Config::tiny());
        assert!(model.is_synthetic());
        assert_eq!(
            model.weights_label(4),
            format!("{} (synthetic weights, seed 4)", dir.display())
        );
        let w = model.weights(4).unwrap();
        assert_eq!(
            w.embed_tokens.data,
            Qwen3Weights::synthetic(&model.config, 4).embed_tokens.data
        );
        assert!(matches!(
            model.runner_weights(4).unwrap(),
            ModelWeights::Synthetic { seed: 4 }
        ));
        std::fs::remove_dir_all(dir).unwrap();
    }
}
