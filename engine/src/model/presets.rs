//! Model presets: the Qwen3 dense family's shapes, and a tiny one for tests.
//!
//! Contract: [`PRESETS`] is the one list of names that `--model` accepts in
//! every tool (engine-bench, cuda-check, exp); [`Qwen3Config::preset`] resolves
//! exactly those names, and an unknown name's error lists them. Each family
//! preset has the fields of its published Hugging Face `config.json` (bf16,
//! vocabulary 151,936, 40,960 positions, RoPE theta 1e6, RMSNorm eps 1e-6,
//! head_dim 128, 8 KV heads); `tests/integration/model_presets.rs` parses those files'
//! text and compares.

use super::config::{ModelError, Qwen3Config};

/// A preset's shape.
type Shape = fn() -> Qwen3Config;

/// Name and shape of every preset, in the order error messages list them.
const TABLE: [(&str, Shape); 7] = [
    ("qwen3-0.6b", Qwen3Config::qwen3_0_6b),
    ("qwen3-1.7b", Qwen3Config::qwen3_1_7b),
    ("qwen3-4b", Qwen3Config::qwen3_4b),
    ("qwen3-8b", Qwen3Config::qwen3_8b),
    ("qwen3-14b", Qwen3Config::qwen3_14b),
    ("qwen3-32b", Qwen3Config::qwen3_32b),
    ("tiny", Qwen3Config::tiny),
];

/// The preset names, taken from the table so the two cannot disagree.
pub const PRESETS: &[&str] = &preset_names();

const fn preset_names() -> [&'static str; TABLE.len()] {
    let mut names = [""; TABLE.len()];
    let mut i = 0;
    while i < TABLE.len() {
        names[i] = TABLE[i].0;
        i += 1;
    }
    names
}

/// Qwen3's end-of-turn token (`<|im_end|>`), the `eos_token_id` of every
/// published dense config.
const QWEN3_EOS: u32 = 151_645;

/// A member of the dense family: what varies between sizes.
fn dense(
    hidden: usize,
    intermediate: usize,
    layers: usize,
    heads: usize,
    tied: bool,
) -> Qwen3Config {
    Qwen3Config {
        vocab_size: 151_936,
        hidden_size: hidden,
        intermediate_size: intermediate,
        num_hidden_layers: layers,
        num_attention_heads: heads,
        num_key_value_heads: 8,
        head_dim: 128,
        rms_norm_eps: 1e-6,
        rope_theta: 1_000_000.0,
        tie_word_embeddings: tied,
        max_position_embeddings: 40_960,
        eos_token_id: Some(QWEN3_EOS),
    }
}

impl Qwen3Config {
    /// Qwen3-0.6B: hidden 1024, 28 layers, 16 query heads, tied embeddings.
    pub fn qwen3_0_6b() -> Self {
        dense(1024, 3072, 28, 16, true)
    }

    /// Qwen3-1.7B: hidden 2048, 28 layers, 16 query heads, tied embeddings.
    pub fn qwen3_1_7b() -> Self {
        dense(2048, 6144, 28, 16, true)
    }

    /// Qwen3-4B: hidden 2560, 36 layers, 32 query heads, tied embeddings.
    pub fn qwen3_4b() -> Self {
        dense(2560, 9728, 36, 32, true)
    }

    /// Qwen3-8B: hidden 4096, 36 layers, 32 query heads, its own LM head.
    pub fn qwen3_8b() -> Self {
        dense(4096, 12_288, 36, 32, false)
    }

    /// Qwen3-14B: hidden 5120, 40 layers, 40 query heads, its own LM head.
    pub fn qwen3_14b() -> Self {
        dense(5120, 17_408, 40, 40, false)
    }

    /// Qwen3-32B: hidden 5120, 64 layers, 64 query heads, its own LM head.
    pub fn qwen3_32b() -> Self {
        dense(5120, 25_600, 64, 64, false)
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

    /// The preset called `name` (one of [`PRESETS`]).
    pub fn preset(name: &str) -> Result<Self, ModelError> {
        TABLE
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, shape)| shape())
            .ok_or_else(|| ModelError::UnknownPreset(name.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_listed_name_resolves_to_a_valid_shape() {
        assert_eq!(PRESETS.len(), TABLE.len());
        for name in PRESETS {
            let config = Qwen3Config::preset(name).unwrap();
            assert_eq!(config.validate(), Ok(()), "{name}");
        }
    }

    #[test]
    fn unknown_name_lists_every_preset() {
        let err = Qwen3Config::preset("qwen3-70b").unwrap_err();
        let msg = err.to_string();
        assert!(matches!(err, ModelError::UnknownPreset(ref n) if n == "qwen3-70b"));
        for name in PRESETS {
            assert!(msg.contains(name), "{msg}");
        }
    }

    #[test]
    fn parameter_counts_are_the_published_sizes() {
        // Hugging Face model cards: 0.6B, 1.7B, 4.0B, 8.2B, 14.8B, 32.8B parameters.
        let billions = |c: Qwen3Config| c.num_params() as f64 / 1e9;
        let expected = [
            (Qwen3Config::qwen3_0_6b(), 0.6),
            (Qwen3Config::qwen3_1_7b(), 1.7),
            (Qwen3Config::qwen3_4b(), 4.0),
            (Qwen3Config::qwen3_8b(), 8.2),
            (Qwen3Config::qwen3_14b(), 14.8),
            (Qwen3Config::qwen3_32b(), 32.8),
        ];
        for (config, want) in expected {
            let got = billions(config);
            assert!(
                (got - want).abs() < 0.05,
                "{got} B parameters, card says {want}"
            );
        }
    }
}
