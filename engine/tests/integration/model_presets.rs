//! Every family preset has the shape of its published Hugging Face
//! `config.json` (the relevant fields of Qwen/Qwen3-*/config.json, as
//! transformers 4.51 wrote them). Qwen3-0.6B's whole file is checked in
//! `model_loading.rs`.

use engine::model::{ModelError, Qwen3Config, PRESETS};

/// The fields every dense Qwen3 `config.json` shares.
fn published(size_fields: &str) -> String {
    format!(
        r#"{{
  "architectures": ["Qwen3ForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
  "bos_token_id": 151643, "eos_token_id": 151645, "head_dim": 128, "hidden_act": "silu",
  "initializer_range": 0.02, "max_position_embeddings": 40960, "model_type": "qwen3",
  "num_key_value_heads": 8, "rms_norm_eps": 1e-06, "rope_scaling": null, "rope_theta": 1000000,
  "sliding_window": null, "torch_dtype": "bfloat16", "transformers_version": "4.51.0",
  "use_cache": true, "use_sliding_window": false, "vocab_size": 151936,
  {size_fields}
}}"#
    )
}

fn check(preset: &str, size_fields: &str) {
    let parsed = Qwen3Config::from_json_str(&published(size_fields)).unwrap();
    assert_eq!(Qwen3Config::preset(preset).unwrap(), parsed, "{preset}");
}

#[test]
fn qwen3_1_7b_is_the_published_shape() {
    check(
        "qwen3-1.7b",
        r#""hidden_size": 2048, "intermediate_size": 6144, "max_window_layers": 28,
  "num_attention_heads": 16, "num_hidden_layers": 28, "tie_word_embeddings": true"#,
    );
}

#[test]
fn qwen3_4b_is_the_published_shape() {
    check(
        "qwen3-4b",
        r#""hidden_size": 2560, "intermediate_size": 9728, "max_window_layers": 36,
  "num_attention_heads": 32, "num_hidden_layers": 36, "tie_word_embeddings": true"#,
    );
}

#[test]
fn qwen3_8b_is_the_published_shape() {
    check(
        "qwen3-8b",
        r#""hidden_size": 4096, "intermediate_size": 12288, "max_window_layers": 36,
  "num_attention_heads": 32, "num_hidden_layers": 36, "tie_word_embeddings": false"#,
    );
}

#[test]
fn qwen3_14b_is_the_published_shape() {
    check(
        "qwen3-14b",
        r#""hidden_size": 5120, "intermediate_size": 17408, "max_window_layers": 40,
  "num_attention_heads": 40, "num_hidden_layers": 40, "tie_word_embeddings": false"#,
    );
}

#[test]
fn qwen3_32b_is_the_published_shape() {
    check(
        "qwen3-32b",
        r#""hidden_size": 5120, "intermediate_size": 25600, "max_window_layers": 64,
  "num_attention_heads": 64, "num_hidden_layers": 64, "tie_word_embeddings": false"#,
    );
}

#[test]
fn the_preset_list_is_the_family_and_tiny() {
    assert_eq!(
        PRESETS,
        [
            "qwen3-0.6b",
            "qwen3-1.7b",
            "qwen3-4b",
            "qwen3-8b",
            "qwen3-14b",
            "qwen3-32b",
            "tiny"
        ]
    );
    assert_eq!(
        Qwen3Config::preset("qwen3-0.6b").unwrap(),
        Qwen3Config::qwen3_0_6b()
    );
    assert_eq!(Qwen3Config::preset("tiny").unwrap(), Qwen3Config::tiny());
    let err = Qwen3Config::preset("Qwen3-8B").unwrap_err();
    assert!(matches!(err, ModelError::UnknownPreset(_)));
    assert!(err.to_string().contains("qwen3-32b, tiny"), "{err}");
}
