//! Host-side Qwen3 weights.
//!
//! Contract: a [`Qwen3Weights`] always has the shapes its [`Qwen3Config`]
//! implies (checked by the loader, guaranteed by the generator), so runners
//! index it without further checks. [`Qwen3Weights::load`] reads a checkpoint
//! directory (see [`super::safetensors_loader`]); [`Qwen3Weights::synthetic`]
//! generates seeded random values (see [`super::synthetic`]). A runner takes
//! a [`WeightSource`]: host tensors, or a seed from which it generates the
//! synthetic values where it keeps them (the CUDA runner on the GPU, with no
//! host copy).

use super::config::{ModelError, Qwen3Config};
use half::bf16;
use std::path::Path;

/// Where a runner's weights come from.
#[derive(Debug, Clone, Copy)]
pub enum WeightSource<'a> {
    /// Host tensors: loaded from a checkpoint, or generated.
    Host(&'a Qwen3Weights),
    /// The synthetic weights of `seed` ([`super::synthetic`]): bit-identical
    /// to [`Qwen3Weights::synthetic`] of the same seed, made by the runner.
    Synthetic { seed: u64 },
}

/// A bf16 tensor on the host, row-major.
#[derive(Debug, Clone, PartialEq)]
pub struct HostTensor {
    pub shape: Vec<usize>,
    pub data: Vec<bf16>,
}

impl HostTensor {
    pub fn numel(&self) -> usize {
        self.shape.iter().product()
    }

    /// The values widened to f32 (exact: every bf16 is an f32).
    pub fn to_f32(&self) -> Vec<f32> {
        self.data.iter().map(|v| v.to_f32()).collect()
    }
}

/// One decoder layer, Hugging Face names (`model.layers.N.*`).
#[derive(Debug, Clone)]
pub struct LayerWeights {
    pub input_layernorm: HostTensor,
    pub q_proj: HostTensor,
    pub k_proj: HostTensor,
    pub v_proj: HostTensor,
    pub o_proj: HostTensor,
    pub q_norm: HostTensor,
    pub k_norm: HostTensor,
    pub post_attention_layernorm: HostTensor,
    pub gate_proj: HostTensor,
    pub up_proj: HostTensor,
    pub down_proj: HostTensor,
}

#[derive(Debug, Clone)]
pub struct Qwen3Weights {
    pub embed_tokens: HostTensor,
    pub layers: Vec<LayerWeights>,
    pub norm: HostTensor,
    /// `None` when the LM head is tied to `embed_tokens`.
    pub lm_head: Option<HostTensor>,
}

/// The tensors of one decoder layer: suffix after `model.layers.N.` and shape.
fn layer_specs(c: &Qwen3Config) -> [(&'static str, Vec<usize>); 11] {
    let h = c.hidden_size;
    [
        ("input_layernorm.weight", vec![h]),
        ("self_attn.q_proj.weight", vec![c.q_size(), h]),
        ("self_attn.k_proj.weight", vec![c.kv_size(), h]),
        ("self_attn.v_proj.weight", vec![c.kv_size(), h]),
        ("self_attn.o_proj.weight", vec![h, c.q_size()]),
        ("self_attn.q_norm.weight", vec![c.head_dim]),
        ("self_attn.k_norm.weight", vec![c.head_dim]),
        ("post_attention_layernorm.weight", vec![h]),
        ("mlp.gate_proj.weight", vec![c.intermediate_size, h]),
        ("mlp.up_proj.weight", vec![c.intermediate_size, h]),
        ("mlp.down_proj.weight", vec![h, c.intermediate_size]),
    ]
}

/// Every tensor the model needs, Hugging Face name and shape, in a fixed order
/// (embedding, layers in order, final norm, untied LM head last).
pub fn tensor_specs(c: &Qwen3Config) -> Vec<(String, Vec<usize>)> {
    let mut specs = vec![(
        "model.embed_tokens.weight".to_string(),
        vec![c.vocab_size, c.hidden_size],
    )];
    for layer in 0..c.num_hidden_layers {
        for (suffix, shape) in layer_specs(c) {
            specs.push((format!("model.layers.{layer}.{suffix}"), shape));
        }
    }
    specs.push(("model.norm.weight".to_string(), vec![c.hidden_size]));
    if !c.tie_word_embeddings {
        specs.push((
            "lm_head.weight".to_string(),
            vec![c.vocab_size, c.hidden_size],
        ));
    }
    specs
}

impl Qwen3Weights {
    /// The LM head matrix `[vocab, hidden]`.
    pub fn lm_head(&self) -> &HostTensor {
        self.lm_head.as_ref().unwrap_or(&self.embed_tokens)
    }

    /// Loads every `*.safetensors` file of `dir` (all shards), converting
    /// bf16/f16/f32 to bf16. A missing, mis-shaped or non-float tensor is an
    /// error naming it.
    pub fn load(dir: &Path, config: &Qwen3Config) -> Result<Self, ModelError> {
        super::safetensors_loader::load_dir(dir, config)
    }

    /// Deterministic random weights of `config`'s shape (the distribution is
    /// documented in [`super::synthetic`]); equal seeds give bit-identical weights.
    pub fn synthetic(config: &Qwen3Config, seed: u64) -> Self {
        super::synthetic::generate(config, seed)
    }

    /// Builds the weights from a source called once per tensor of
    /// [`tensor_specs`], in that order, with its name and expected shape.
    pub fn from_fn<E>(
        config: &Qwen3Config,
        mut tensor: impl FnMut(&str, &[usize]) -> Result<HostTensor, E>,
    ) -> Result<Self, E> {
        let h = config.hidden_size;
        let embed_tokens = tensor("model.embed_tokens.weight", &[config.vocab_size, h])?;
        let mut layers = Vec::with_capacity(config.num_hidden_layers);
        for layer in 0..config.num_hidden_layers {
            let [ln1, q, k, v, o, qn, kn, ln2, gate, up, down] = layer_specs(config)
                .map(|(suffix, shape)| tensor(&format!("model.layers.{layer}.{suffix}"), &shape));
            layers.push(LayerWeights {
                input_layernorm: ln1?,
                q_proj: q?,
                k_proj: k?,
                v_proj: v?,
                o_proj: o?,
                q_norm: qn?,
                k_norm: kn?,
                post_attention_layernorm: ln2?,
                gate_proj: gate?,
                up_proj: up?,
                down_proj: down?,
            });
        }
        let norm = tensor("model.norm.weight", &[h])?;
        let lm_head = if config.tie_word_embeddings {
            None
        } else {
            Some(tensor("lm_head.weight", &[config.vocab_size, h])?)
        };
        Ok(Self {
            embed_tokens,
            layers,
            norm,
            lm_head,
        })
    }

    /// Every tensor with its Hugging Face name, in [`tensor_specs`] order
    /// (the tied LM head is not listed twice).
    pub fn named_tensors(&self) -> Vec<(String, &HostTensor)> {
        let mut out = vec![("model.embed_tokens.weight".to_string(), &self.embed_tokens)];
        for (i, l) in self.layers.iter().enumerate() {
            let fields = [
                ("input_layernorm.weight", &l.input_layernorm),
                ("self_attn.q_proj.weight", &l.q_proj),
                ("self_attn.k_proj.weight", &l.k_proj),
                ("self_attn.v_proj.weight", &l.v_proj),
                ("self_attn.o_proj.weight", &l.o_proj),
                ("self_attn.q_norm.weight", &l.q_norm),
                ("self_attn.k_norm.weight", &l.k_norm),
                (
                    "post_attention_layernorm.weight",
                    &l.post_attention_layernorm,
                ),
                ("mlp.gate_proj.weight", &l.gate_proj),
                ("mlp.up_proj.weight", &l.up_proj),
                ("mlp.down_proj.weight", &l.down_proj),
            ];
            out.extend(
                fields
                    .into_iter()
                    .map(|(s, t)| (format!("model.layers.{i}.{s}"), t)),
            );
        }
        out.push(("model.norm.weight".to_string(), &self.norm));
        if let Some(head) = &self.lm_head {
            out.push(("lm_head.weight".to_string(), head));
        }
        out
    }
}
