//! The CPU reference runner: Qwen3 in f32 on candle-core's CPU backend.
//!
//! Contract: implements [`ModelRunner`] exactly as `runner.rs` states, with
//! f32 compute from the bf16 weights (widened once at construction) and an f32
//! paged KV cache of `num_kv_blocks * block_size` slots per layer. One step
//! runs every token of the batch through each layer together (the linear
//! layers are one matmul over all tokens); within a layer, the K/V of every
//! sequence are written to the cache before any sequence attends, so a
//! sequence may read blocks that another sequence of the same batch writes.
//! The LM head runs only for sequences that sample; sampling is greedy
//! (argmax, first index on ties). The logits of the last step stay readable
//! through [`CpuRunner::last_logits`] for comparisons.
//!
//! Construction ([`CpuRunner::with_weights`]) takes host weights or a seed
//! and a memory budget; a model whose f32 weights and cache exceed the
//! budget is refused with [`RunnerError::Memory`] before anything is
//! allocated.
//!
//! The model follows Hugging Face's `Qwen3ForCausalLM`: RMSNorm, per-head
//! q_norm/k_norm before RoPE (rotate_half convention), GQA, SiLU-gated MLP,
//! final norm, tied or untied LM head.

mod attention;
mod load;
mod ops;
mod paged_kv;

use crate::model::memory::{self, DeviceMemory, KvSettings, Precision};
use crate::model::{Qwen3Config, Qwen3Weights, WeightSource};
use crate::runner::{ModelRunner, RunnerError, RunnerOutput, ScheduledBatch};
use attention::TokenContext;
use candle_core::{Device, Tensor};
use load::{fused, matrix, widen, Tensors};
use ops::{device_error, linear, rms_norm_rows, RopeTable};
use paged_kv::PagedKv;

pub use load::host_memory;

/// One decoder layer, widened to f32; q/k/v and gate/up fused into one matrix each.
struct CpuLayer {
    input_layernorm: Vec<f32>,
    qkv_proj: Tensor,
    q_norm: Vec<f32>,
    k_norm: Vec<f32>,
    o_proj: Tensor,
    post_attention_layernorm: Vec<f32>,
    gate_up_proj: Tensor,
    down_proj: Tensor,
}

pub struct CpuRunner {
    config: Qwen3Config,
    embed_tokens: Tensor,
    layers: Vec<CpuLayer>,
    norm: Vec<f32>,
    /// `None`: tied to `embed_tokens`.
    lm_head: Option<Tensor>,
    rope: RopeTable,
    kv: PagedKv,
    num_kv_blocks: usize,
    block_size: usize,
    last_logits: Vec<Vec<f32>>,
}

impl CpuRunner {
    /// From host weights, in the host's available memory (`/proc/meminfo`,
    /// not checked where that cannot be read).
    pub fn new(
        config: Qwen3Config,
        weights: &Qwen3Weights,
        num_kv_blocks: usize,
        block_size: usize,
    ) -> Result<Self, RunnerError> {
        let source = WeightSource::Host(weights);
        Self::with_weights(config, source, num_kv_blocks, block_size, host_memory())
    }

    /// From `weights`, refusing (before anything is allocated) a model whose
    /// f32 weights and `num_kv_blocks` cache blocks do not fit in `memory`
    /// (`None`: no check). Synthetic weights are generated a tensor at a
    /// time, so no whole bf16 copy exists next to the f32 one.
    pub fn with_weights(
        config: Qwen3Config,
        weights: WeightSource<'_>,
        num_kv_blocks: usize,
        block_size: usize,
        memory: Option<DeviceMemory>,
    ) -> Result<Self, RunnerError> {
        config.validate().map_err(RunnerError::Model)?;
        if num_kv_blocks == 0 || block_size == 0 {
            return Err(RunnerError::Model(format!(
                "KV cache needs at least one block of at least one token (got {num_kv_blocks} blocks of {block_size})"
            )));
        }
        if let Some(memory) = memory {
            let settings = KvSettings {
                block_size,
                max_model_len: block_size,
                num_gpu_blocks: Some(num_kv_blocks),
                gpu_memory_utilization: 1.0,
            };
            memory::plan(&config, &settings, Precision::F32, memory)?;
        }
        let tensors = Tensors::new(&config, weights)?;
        let t = |name: &str| tensors.get(name);
        let layers = (0..config.num_hidden_layers)
            .map(|i| {
                let n = |suffix: &str| format!("model.layers.{i}.{suffix}");
                let fused_of = |suffixes: &[&str]| {
                    let parts = suffixes
                        .iter()
                        .map(|s| t(&n(s)))
                        .collect::<Result<Vec<_>, _>>()?;
                    fused(&parts.iter().map(|p| p.as_ref()).collect::<Vec<_>>())
                };
                Ok(CpuLayer {
                    input_layernorm: widen(&*t(&n("input_layernorm.weight"))?),
                    qkv_proj: fused_of(&[
                        "self_attn.q_proj.weight",
                        "self_attn.k_proj.weight",
                        "self_attn.v_proj.weight",
                    ])?,
                    q_norm: widen(&*t(&n("self_attn.q_norm.weight"))?),
                    k_norm: widen(&*t(&n("self_attn.k_norm.weight"))?),
                    o_proj: matrix(&*t(&n("self_attn.o_proj.weight"))?)?,
                    post_attention_layernorm: widen(&*t(&n("post_attention_layernorm.weight"))?),
                    gate_up_proj: fused_of(&["mlp.gate_proj.weight", "mlp.up_proj.weight"])?,
                    down_proj: matrix(&*t(&n("mlp.down_proj.weight"))?)?,
                })
            })
            .collect::<Result<Vec<_>, RunnerError>>()?;
        let lm_head = if config.tie_word_embeddings {
            None
        } else {
            Some(matrix(&*t("lm_head.weight")?)?)
        };
        Ok(Self {
            embed_tokens: matrix(&*t("model.embed_tokens.weight")?)?,
            layers,
            norm: widen(&*t("model.norm.weight")?),
            lm_head,
            rope: RopeTable::new(config.head_dim, config.rope_theta),
            kv: PagedKv::new(
                config.num_hidden_layers,
                num_kv_blocks,
                block_size,
                config.kv_size(),
            ),
            num_kv_blocks,
            block_size,
            last_logits: Vec::new(),
            config,
        })
    }

    pub fn config(&self) -> &Qwen3Config {
        &self.config
    }

    pub fn block_size(&self) -> usize {
        self.block_size
    }

    /// Logits (`vocab_size` each) of every sampling sequence of the last
    /// [`ModelRunner::execute`], in batch order: the distribution each
    /// sampled token was taken from.
    pub fn last_logits(&self) -> &[Vec<f32>] {
        &self.last_logits
    }

    /// Rejects a batch this runner cannot execute, before anything is written.
    fn validate(&self, batch: &ScheduledBatch<'_>) -> Result<(), RunnerError> {
        let bad = |msg: String| Err(RunnerError::BadBatch(msg));
        if batch.block_size != self.block_size {
            return bad(format!(
                "block_size {} but the KV cache uses {}",
                batch.block_size, self.block_size
            ));
        }
        for s in &batch.seqs {
            let id = s.request_id;
            if s.token_ids.is_empty() {
                return bad(format!("request {id:?} has no tokens to compute"));
            }
            if let Some(t) = s
                .token_ids
                .iter()
                .find(|&&t| t as usize >= self.config.vocab_size)
            {
                return bad(format!(
                    "request {id:?}: token {t} outside the vocabulary of {}",
                    self.config.vocab_size
                ));
            }
            let end = s.start_pos + s.token_ids.len();
            let blocks = end.div_ceil(self.block_size);
            if s.block_table.len() < blocks {
                return bad(format!(
                    "request {id:?}: {} blocks cover {} positions, {end} needed",
                    s.block_table.len(),
                    s.block_table.len() * self.block_size
                ));
            }
            if let Some(b) = s.block_table[..blocks]
                .iter()
                .find(|&&b| b as usize >= self.num_kv_blocks)
            {
                return bad(format!(
                    "request {id:?}: block {b} outside the cache of {} blocks",
                    self.num_kv_blocks
                ));
            }
        }
        Ok(())
    }
}

impl ModelRunner for CpuRunner {
    fn num_kv_blocks(&self) -> usize {
        self.num_kv_blocks
    }

    fn vocab_size(&self) -> Option<usize> {
        Some(self.config.vocab_size)
    }

    fn execute(&mut self, batch: &ScheduledBatch<'_>) -> Result<RunnerOutput, RunnerError> {
        self.validate(batch)?;
        self.last_logits.clear();
        if batch.seqs.is_empty() {
            return Ok(RunnerOutput::default());
        }
        let hidden = self.forward(batch)?;
        let logits = self.lm_head_logits(batch, &hidden)?;
        let sampled = logits.iter().map(|row| ops::argmax(row)).collect();
        self.last_logits = logits;
        Ok(RunnerOutput {
            sampled,
            modeled_seconds: None,
        })
    }
}

impl CpuRunner {
    /// The residual stream `[num_tokens, hidden]` after the last layer.
    fn forward(&mut self, batch: &ScheduledBatch<'_>) -> Result<Vec<f32>, RunnerError> {
        let c = &self.config;
        let (h, q_size, kv_size, hd) = (c.hidden_size, c.q_size(), c.kv_size(), c.head_dim);
        let eps = c.rms_norm_eps as f32;
        let n = batch.num_tokens();
        let ids: Vec<u32> = batch
            .seqs
            .iter()
            .flat_map(|s| s.token_ids.iter().copied())
            .collect();
        let contexts: Vec<TokenContext<'_>> = batch
            .seqs
            .iter()
            .flat_map(|s| {
                (s.start_pos..s.start_pos + s.token_ids.len()).map(|position| TokenContext {
                    position,
                    block_table: s.block_table,
                })
            })
            .collect();
        let rope: Vec<_> = contexts
            .iter()
            .map(|t| self.rope.cos_sin(t.position))
            .collect();
        let ids = Tensor::from_vec(ids, n, &Device::Cpu).map_err(device_error)?;
        let mut x: Vec<f32> = self
            .embed_tokens
            .index_select(&ids, 0)
            .and_then(|t| t.flatten_all())
            .and_then(|t| t.to_vec1())
            .map_err(device_error)?;

        for (li, layer) in self.layers.iter().enumerate() {
            let mut normed = x.clone();
            rms_norm_rows(&mut normed, &layer.input_layernorm, eps);
            let qkv = linear(&normed, n, &layer.qkv_proj)?;
            let mut q = Vec::with_capacity(n * q_size);
            for (t, row) in qkv.chunks_exact(q_size + 2 * kv_size).enumerate() {
                let (q_row, kv) = row.split_at(q_size);
                let (k_row, v_row) = kv.split_at(kv_size);
                let mut q_row = q_row.to_vec();
                let mut k_row = k_row.to_vec();
                rms_norm_rows(&mut q_row, &layer.q_norm, eps);
                rms_norm_rows(&mut k_row, &layer.k_norm, eps);
                let (cos, sin) = &rope[t];
                ops::apply_rope(&mut q_row, hd, cos, sin);
                ops::apply_rope(&mut k_row, hd, cos, sin);
                q.extend_from_slice(&q_row);
                let slot = self.kv.slot(contexts[t].block_table, contexts[t].position);
                self.kv.write(li, slot, &k_row, v_row);
            }
            let attn = attention::batch_attention(&self.kv, li, c, &contexts, &q);
            let o = linear(&attn, n, &layer.o_proj)?;
            x.iter_mut().zip(&o).for_each(|(x, o)| *x += o);

            let mut normed = x.clone();
            rms_norm_rows(&mut normed, &layer.post_attention_layernorm, eps);
            let gate_up = linear(&normed, n, &layer.gate_up_proj)?;
            let act = ops::silu_mul(&gate_up, c.intermediate_size);
            let down = linear(&act, n, &layer.down_proj)?;
            x.iter_mut().zip(&down).for_each(|(x, d)| *x += d);
        }
        debug_assert_eq!(x.len(), n * h);
        Ok(x)
    }

    /// Final norm and LM head on the last token of each sampling sequence.
    fn lm_head_logits(
        &self,
        batch: &ScheduledBatch<'_>,
        hidden: &[f32],
    ) -> Result<Vec<Vec<f32>>, RunnerError> {
        let h = self.config.hidden_size;
        let mut rows = Vec::new();
        let mut end = 0;
        for s in &batch.seqs {
            end += s.token_ids.len();
            if s.samples {
                rows.extend_from_slice(&hidden[(end - 1) * h..end * h]);
            }
        }
        let count = rows.len() / h;
        if count == 0 {
            return Ok(Vec::new());
        }
        rms_norm_rows(&mut rows, &self.norm, self.config.rms_norm_eps as f32);
        let head = self.lm_head.as_ref().unwrap_or(&self.embed_tokens);
        let logits = linear(&rows, count, head)?;
        Ok(logits
            .chunks_exact(self.config.vocab_size)
            .map(<[f32]>::to_vec)
            .collect())
    }
}
