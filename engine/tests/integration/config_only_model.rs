//! A model directory with only `config.json` runs on synthetic weights of its
//! shape; one with safetensors loads them; the CPU runner refuses a model
//! that does not fit its memory before allocating anything.

use engine::model::{
    tensor_specs, DeviceMemory, MemoryError, ModelError, ModelSpec, ModelWeights, Qwen3Config,
    Qwen3Weights, WeightSource, WeightsOrigin,
};
use engine::runner::cpu::CpuRunner;
use engine::{EngineConfig, EngineCore, Request, RequestId, RunnerError};
use half::bf16;
use safetensors::{Dtype, View};
use std::borrow::Cow;
use std::collections::HashMap;
use std::path::PathBuf;

/// The tiny preset's shape as a `config.json`.
const TINY_CONFIG: &str = r#"{
  "architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "vocab_size": 512,
  "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
  "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 32, "hidden_act": "silu",
  "rms_norm_eps": 1e-06, "rope_theta": 10000, "tie_word_embeddings": true,
  "max_position_embeddings": 4096, "torch_dtype": "bfloat16"
}"#;

fn config_dir(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "servetwin-config-only-{tag}-{}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("config.json"), TINY_CONFIG).unwrap();
    dir
}

/// Greedy outputs of a few requests served by `EngineCore` on `runner`.
fn serve(runner: CpuRunner) -> HashMap<RequestId, Vec<u32>> {
    let engine_config = EngineConfig {
        max_model_len: 128,
        max_num_batched_tokens: 32,
        max_num_seqs: 4,
        ..EngineConfig::default()
    };
    let mut engine = EngineCore::new(engine_config, runner).unwrap();
    for (i, len) in [19usize, 40, 7].into_iter().enumerate() {
        let prompt = (0..len as u32)
            .map(|t| (t * 37 + i as u32 * 11) % 500)
            .collect();
        let mut request = Request::new(i as u64, prompt, 6);
        request.ignore_eos = true;
        engine.add_request(request).unwrap();
    }
    let mut outputs: HashMap<RequestId, Vec<u32>> = HashMap::new();
    while engine.has_unfinished() {
        for (id, token) in engine.step().unwrap().tokens {
            outputs.entry(id).or_default().push(token);
        }
    }
    outputs
}

#[test]
fn config_only_directory_runs_on_synthetic_weights_through_the_engine() {
    let dir = config_dir("run");
    let text = dir.display().to_string();
    let spec = ModelSpec::parse(&text).unwrap();
    assert_eq!(spec.config, Qwen3Config::tiny());
    assert_eq!(spec.origin, WeightsOrigin::Synthetic);
    assert_eq!(
        spec.weights_label(5),
        format!("{text} (synthetic weights, seed 5)")
    );
    let weights = spec.weights(5).unwrap();
    assert!(matches!(weights, ModelWeights::Synthetic { seed: 5 }));

    let runner = CpuRunner::with_weights(spec.config.clone(), weights.source(), 64, 16, None);
    let outputs = serve(runner.unwrap());
    assert_eq!(outputs.len(), 3);
    assert!(outputs.values().all(|o| o.len() == 6), "{outputs:?}");
    // The runner's own generation gives the host generator's weights exactly.
    let host = Qwen3Weights::synthetic(&spec.config, 5);
    let from_host =
        CpuRunner::with_weights(spec.config.clone(), WeightSource::Host(&host), 64, 16, None);
    assert_eq!(serve(from_host.unwrap()), outputs);
    std::fs::remove_dir_all(dir).unwrap();
}

/// bf16 bytes of one tensor, for a checkpoint written by the test.
struct Raw(Vec<usize>, Vec<u8>);

impl View for &Raw {
    fn dtype(&self) -> Dtype {
        Dtype::BF16
    }
    fn shape(&self) -> &[usize] {
        &self.0
    }
    fn data(&self) -> Cow<'_, [u8]> {
        Cow::Borrowed(&self.1)
    }
    fn data_len(&self) -> usize {
        self.1.len()
    }
}

#[test]
fn directory_with_safetensors_loads_them() {
    let dir = config_dir("checkpoint");
    let config = Qwen3Config::tiny();
    let tensors: Vec<(String, Raw)> = tensor_specs(&config)
        .into_iter()
        .map(|(name, shape)| {
            let n: usize = shape.iter().product();
            let bytes = (0..n)
                .flat_map(|i| {
                    bf16::from_f32((i % 7) as f32 * 0.125)
                        .to_bits()
                        .to_le_bytes()
                })
                .collect();
            (name, Raw(shape, bytes))
        })
        .collect();
    let views: Vec<(&str, &Raw)> = tensors.iter().map(|(n, r)| (n.as_str(), r)).collect();
    safetensors::serialize_to_file(views, None, &dir.join("model.safetensors")).unwrap();

    let spec = ModelSpec::parse(&dir.display().to_string()).unwrap();
    assert_eq!(spec.origin, WeightsOrigin::Safetensors(dir.clone()));
    assert!(spec.weights_label(5).ends_with("(safetensors)"));
    let ModelWeights::Host(w) = spec.weights(5).unwrap() else {
        panic!("a checkpoint must load to the host");
    };
    assert_eq!(w.norm.data[3], bf16::from_f32(0.375));
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn neither_preset_nor_directory_lists_the_presets() {
    let err = ModelSpec::parse("/no/such/model").unwrap_err();
    assert!(matches!(err, ModelError::UnknownPreset(_)));
    assert!(err.to_string().contains("qwen3-8b"), "{err}");
    let dir = config_dir("noconfig");
    std::fs::remove_file(dir.join("config.json")).unwrap();
    let err = ModelSpec::parse(&dir.display().to_string()).unwrap_err();
    assert!(err.to_string().contains("config.json"), "{err}");
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn cpu_runner_refuses_a_model_too_big_for_its_budget_before_allocating() {
    // Refused before any of the 32.8 B parameters is generated.
    let budget = Some(DeviceMemory::budget(16 << 30));
    let seed = WeightSource::Synthetic { seed: 1 };
    match CpuRunner::with_weights(Qwen3Config::qwen3_32b(), seed, 300, 16, budget) {
        Err(RunnerError::Memory(MemoryError::DoesNotFit(s))) => {
            // f32: 4 bytes a parameter.
            assert_eq!(s.weight_bytes, 131_048_493_056);
            assert_eq!(s.available_bytes, 16 << 30);
            assert_eq!((s.kv_blocks, s.max_model_len), (300, None));
        }
        Err(e) => panic!("expected a memory error, got {e}"),
        Ok(_) => panic!("built a 32B runner in 16 GiB"),
    }
    let tiny = CpuRunner::with_weights(Qwen3Config::tiny(), seed, 300, 16, budget);
    assert!(tiny.is_ok());
}
