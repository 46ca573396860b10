//! Config parsing, safetensors loading and synthetic weights.

use engine::model::{tensor_specs, ModelError, Qwen3Config, Qwen3Weights};
use half::{bf16, f16};
use safetensors::{Dtype, View};
use std::borrow::Cow;
use std::path::{Path, PathBuf};

/// A tensor to write: dtype, shape, raw little-endian bytes.
struct Raw {
    dtype: Dtype,
    shape: Vec<usize>,
    bytes: Vec<u8>,
}

impl View for &Raw {
    fn dtype(&self) -> Dtype {
        self.dtype
    }
    fn shape(&self) -> &[usize] {
        &self.shape
    }
    fn data(&self) -> Cow<'_, [u8]> {
        Cow::Borrowed(&self.bytes)
    }
    fn data_len(&self) -> usize {
        self.bytes.len()
    }
}

fn temp_dir(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("servetwin-model-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn write_shard(path: &Path, tensors: &[(String, Raw)]) {
    let views: Vec<(&str, &Raw)> = tensors.iter().map(|(n, r)| (n.as_str(), r)).collect();
    safetensors::serialize_to_file(views, None, path).unwrap();
}

/// The weights as f32 tensors, values `i * 0.01` per tensor (distinct, exact in bf16 only
/// when small, so the test compares against bf16 rounding of the same values).
fn f32_tensors(config: &Qwen3Config) -> Vec<(String, Raw)> {
    tensor_specs(config)
        .into_iter()
        .map(|(name, shape)| {
            let n: usize = shape.iter().product();
            let bytes = (0..n)
                .flat_map(|i| (i as f32 * 0.01 - 1.0).to_le_bytes())
                .collect();
            (
                name,
                Raw {
                    dtype: Dtype::F32,
                    shape,
                    bytes,
                },
            )
        })
        .collect()
}

#[test]
fn loads_sharded_f32_f16_bf16_and_converts_to_bf16() {
    let config = Qwen3Config {
        tie_word_embeddings: false,
        ..Qwen3Config::tiny()
    };
    let mut tensors = f32_tensors(&config);
    // Re-encode one tensor as f16 and one as bf16.
    for (idx, dtype) in [(1, Dtype::F16), (2, Dtype::BF16)] {
        let raw = &mut tensors[idx].1;
        let values: Vec<f32> = raw
            .bytes
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
            .collect();
        raw.bytes = match dtype {
            Dtype::F16 => values
                .iter()
                .flat_map(|v| f16::from_f32(*v).to_bits().to_le_bytes())
                .collect(),
            _ => values
                .iter()
                .flat_map(|v| bf16::from_f32(*v).to_bits().to_le_bytes())
                .collect(),
        };
        raw.dtype = dtype;
    }
    let dir = temp_dir("sharded");
    let second = tensors.split_off(tensors.len() / 2);
    write_shard(&dir.join("model-00001-of-00002.safetensors"), &tensors);
    write_shard(&dir.join("model-00002-of-00002.safetensors"), &second);
    tensors.extend(second);

    let weights = Qwen3Weights::load(&dir, &config).unwrap();
    let loaded = weights.named_tensors();
    assert_eq!(loaded.len(), tensors.len());
    for ((name, raw), (loaded_name, t)) in tensors.iter().zip(&loaded) {
        assert_eq!(name, loaded_name);
        assert_eq!(&raw.shape, &t.shape, "{name}");
        let expected: Vec<bf16> = (0..t.numel())
            .map(|i| bf16::from_f32(i as f32 * 0.01 - 1.0))
            .collect();
        if raw.dtype == Dtype::F16 {
            // f16 then bf16 rounds twice: allow one bf16 ulp.
            for (a, b) in t.data.iter().zip(&expected) {
                assert!(
                    (a.to_f32() - b.to_f32()).abs() <= b.to_f32().abs() / 128.0 + 1e-6,
                    "{name}"
                );
            }
        } else {
            assert_eq!(t.data, expected, "{name}");
        }
    }
    assert!(weights.lm_head.is_some());
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn missing_tensor_is_named() {
    let config = Qwen3Config::tiny();
    let mut tensors = f32_tensors(&config);
    tensors.retain(|(n, _)| n != "model.layers.1.self_attn.k_norm.weight");
    let dir = temp_dir("missing");
    write_shard(&dir.join("model.safetensors"), &tensors);
    match Qwen3Weights::load(&dir, &config) {
        Err(ModelError::MissingTensor { name }) => {
            assert_eq!(name, "model.layers.1.self_attn.k_norm.weight")
        }
        other => panic!("expected MissingTensor, got {other:?}"),
    }
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn misshaped_tensor_is_named_with_both_shapes() {
    let config = Qwen3Config::tiny();
    let mut tensors = f32_tensors(&config);
    let (_, raw) = tensors
        .iter_mut()
        .find(|(n, _)| n == "model.layers.0.mlp.up_proj.weight")
        .unwrap();
    raw.shape = vec![config.hidden_size, config.intermediate_size];
    let dir = temp_dir("shape");
    write_shard(&dir.join("model.safetensors"), &tensors);
    let err = Qwen3Weights::load(&dir, &config).unwrap_err();
    match &err {
        ModelError::BadShape {
            name,
            found,
            expected,
        } => {
            assert_eq!(name, "model.layers.0.mlp.up_proj.weight");
            assert_eq!(found, &vec![64, 128]);
            assert_eq!(expected, &vec![128, 64]);
        }
        other => panic!("expected BadShape, got {other:?}"),
    }
    assert!(err.to_string().contains("up_proj"));
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn integer_tensor_and_empty_directory_are_errors() {
    let config = Qwen3Config::tiny();
    let dir = temp_dir("dtype");
    assert!(matches!(
        Qwen3Weights::load(&dir, &config),
        Err(ModelError::Io { .. })
    ));
    let mut tensors = f32_tensors(&config);
    tensors[0].1.dtype = Dtype::I32;
    write_shard(&dir.join("model.safetensors"), &tensors);
    match Qwen3Weights::load(&dir, &config) {
        Err(ModelError::BadDtype { name, .. }) => assert_eq!(name, "model.embed_tokens.weight"),
        other => panic!("expected BadDtype, got {other:?}"),
    }
    std::fs::remove_dir_all(dir).unwrap();
}

const QWEN3_0_6B_CONFIG: &str = r#"{
  "architectures": ["Qwen3ForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
  "bos_token_id": 151643, "eos_token_id": 151645, "head_dim": 128, "hidden_act": "silu",
  "hidden_size": 1024, "initializer_range": 0.02, "intermediate_size": 3072,
  "max_position_embeddings": 40960, "max_window_layers": 28, "model_type": "qwen3",
  "num_attention_heads": 16, "num_hidden_layers": 28, "num_key_value_heads": 8,
  "rms_norm_eps": 1e-06, "rope_scaling": null, "rope_theta": 1000000, "sliding_window": null,
  "tie_word_embeddings": true, "torch_dtype": "bfloat16", "transformers_version": "4.51.0",
  "use_cache": true, "use_sliding_window": false, "vocab_size": 151936
}"#;

#[test]
fn hf_config_json_parses_to_the_preset() {
    let dir = temp_dir("config");
    std::fs::write(dir.join("config.json"), QWEN3_0_6B_CONFIG).unwrap();
    assert_eq!(
        Qwen3Config::from_json_file(&dir).unwrap(),
        Qwen3Config::qwen3_0_6b()
    );
    let list_eos =
        QWEN3_0_6B_CONFIG.replace("\"eos_token_id\": 151645", "\"eos_token_id\": [7, 8]");
    assert_eq!(
        Qwen3Config::from_json_str(&list_eos).unwrap().eos_token_id,
        Some(7)
    );
    std::fs::remove_dir_all(dir).unwrap();
}

/// As transformers 5.24 writes it for `scripts/hf_reference.py`'s model.
const TRANSFORMERS_5_CONFIG: &str = r#"{
  "architectures": ["Qwen3ForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
  "bos_token_id": null, "dtype": "float32", "eos_token_id": null, "head_dim": 32,
  "hidden_act": "silu", "hidden_size": 128, "initializer_range": 0.05, "intermediate_size": 256,
  "layer_types": ["full_attention", "full_attention", "full_attention"],
  "max_position_embeddings": 4096, "max_window_layers": 28, "model_type": "qwen3",
  "num_attention_heads": 4, "num_hidden_layers": 3, "num_key_value_heads": 2,
  "pad_token_id": null, "rms_norm_eps": 1e-06,
  "rope_parameters": {"rope_theta": 1000000.0, "rope_type": "default"},
  "sliding_window": null, "tie_word_embeddings": true, "transformers_version": "5.24.0",
  "use_cache": true, "use_sliding_window": false, "vocab_size": 1000
}"#;

#[test]
fn transformers_5_config_reads_rope_parameters() {
    let c = Qwen3Config::from_json_str(TRANSFORMERS_5_CONFIG).unwrap();
    assert_eq!(c.rope_theta, 1_000_000.0);
    assert_eq!(
        (
            c.num_hidden_layers,
            c.head_dim,
            c.vocab_size,
            c.eos_token_id
        ),
        (3, 32, 1000, None)
    );
    let yarn =
        TRANSFORMERS_5_CONFIG.replace("\"rope_type\": \"default\"", "\"rope_type\": \"yarn\"");
    assert!(Qwen3Config::from_json_str(&yarn)
        .unwrap_err()
        .contains("yarn"));
    let sliding = TRANSFORMERS_5_CONFIG.replacen("\"full_attention\"", "\"sliding_attention\"", 1);
    assert!(Qwen3Config::from_json_str(&sliding)
        .unwrap_err()
        .contains("sliding_attention"));
}

#[test]
fn bad_config_errors_name_the_file_and_the_problem() {
    let dir = temp_dir("badconfig");
    let path = dir.join("config.json");
    let cases = [
        (
            QWEN3_0_6B_CONFIG.replace("\"num_key_value_heads\": 8", "\"num_key_value_heads\": 5"),
            "num_key_value_heads",
        ),
        (
            QWEN3_0_6B_CONFIG.replace(
                "\"rope_scaling\": null",
                "\"rope_scaling\": {\"type\": \"yarn\"}",
            ),
            "rope_scaling",
        ),
        (
            QWEN3_0_6B_CONFIG.replace("\"model_type\": \"qwen3\"", "\"model_type\": \"llama\""),
            "llama",
        ),
        (
            QWEN3_0_6B_CONFIG.replace("\"vocab_size\": 151936", "\"vocab\": 151936"),
            "vocab_size",
        ),
        ("{ not json".to_string(), "key must be a string"),
    ];
    for (text, problem) in cases {
        std::fs::write(&path, text).unwrap();
        let err = Qwen3Config::from_json_file(&path).unwrap_err();
        let msg = err.to_string();
        assert!(matches!(err, ModelError::Config { .. }), "{msg}");
        assert!(
            msg.contains("config.json") && msg.contains(problem),
            "{msg}"
        );
    }
    let missing = Qwen3Config::from_json_file(&dir.join("nope.json")).unwrap_err();
    assert!(matches!(missing, ModelError::Io { ref path, .. } if path.ends_with("nope.json")));
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn synthetic_weights_are_deterministic_random_and_shaped() {
    let config = Qwen3Config {
        tie_word_embeddings: false,
        ..Qwen3Config::tiny()
    };
    let a = Qwen3Weights::synthetic(&config, 7);
    let b = Qwen3Weights::synthetic(&config, 7);
    let c = Qwen3Weights::synthetic(&config, 8);
    let (ta, tb, tc) = (a.named_tensors(), b.named_tensors(), c.named_tensors());
    let specs = tensor_specs(&config);
    assert_eq!(ta.len(), specs.len());
    for (((name, shape), (na, x)), ((_, y), (_, z))) in
        specs.iter().zip(&ta).zip(tb.iter().zip(&tc))
    {
        assert_eq!(name, na);
        assert_eq!(&x.shape, shape);
        assert_eq!(
            x.data, y.data,
            "{name}: same seed must give the same values"
        );
        assert_ne!(
            x.data, z.data,
            "{name}: another seed must give other values"
        );
        let v = x.to_f32();
        let n = v.len() as f32;
        let mean = v.iter().sum::<f32>() / n;
        let std = (v.iter().map(|x| (x - mean).powi(2)).sum::<f32>() / n).sqrt();
        let (want_mean, want_std) = if shape.len() == 1 {
            (1.0, engine::model::synthetic::NORM_STD)
        } else {
            (0.0, engine::model::synthetic::linear_std(shape[1]))
        };
        assert!(
            (mean - want_mean).abs() < 4.0 * want_std / n.sqrt() + 1e-3,
            "{name}: mean {mean}"
        );
        assert!(
            (std / want_std - 1.0).abs() < 0.25,
            "{name}: std {std} vs {want_std}"
        );
    }
    // Rows of a tensor are not copies of one another (each element has its own draw).
    let embed = &a.embed_tokens;
    let row = config.hidden_size;
    assert_ne!(embed.data[..row], embed.data[row..2 * row]);
}
