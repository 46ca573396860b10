//! Host-side Qwen3 weights.

use half::bf16;

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

impl Qwen3Weights {
    /// The LM head matrix `[vocab, hidden]`.
    pub fn lm_head(&self) -> &HostTensor {
        self.lm_head.as_ref().unwrap_or(&self.embed_tokens)
    }
}
