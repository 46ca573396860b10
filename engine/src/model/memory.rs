//! Whether a model fits a device, and how many KV-cache blocks the rest holds.
//!
//! Contract: [`plan`] is a pure function of the model shape, the KV-cache
//! settings ([`KvSettings`], vLLM's names), the runner's number formats
//! ([`Precision`]) and the memory there is ([`DeviceMemory`]). It returns the
//! weights' bytes and the KV blocks that fit ([`MemoryPlan`]) or a
//! [`MemoryError`] that states what the model needs and what there is, so a
//! runner can refuse a model before it allocates anything.
//!
//! The rule, as vLLM's: the engine may use `gpu_memory_utilization × total`,
//! less what other processes already hold (`total − free` when the runner
//! starts); the weights come first and the KV cache takes the rest, which
//! must hold at least one request of `max_model_len` tokens (its blocks plus
//! the null block). With `num_gpu_blocks` set, exactly that many blocks are
//! planned and the weights plus those blocks must fit in the free memory.
//! Activations and library workspaces are not counted: they are small next
//! to the weights and the cache, and a runner that allocates them measures
//! the memory left again before it sizes its cache.

use super::config::Qwen3Config;
use crate::config::EngineConfig;
use thiserror::Error;

const GIB: f64 = (1u64 << 30) as f64;

/// The KV-cache settings a memory plan needs (the [`EngineConfig`] fields).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct KvSettings {
    pub block_size: usize,
    pub max_model_len: usize,
    pub num_gpu_blocks: Option<usize>,
    pub gpu_memory_utilization: f64,
}

impl From<&EngineConfig> for KvSettings {
    fn from(e: &EngineConfig) -> Self {
        Self {
            block_size: e.block_size,
            max_model_len: e.max_model_len,
            num_gpu_blocks: e.num_gpu_blocks,
            gpu_memory_utilization: e.gpu_memory_utilization,
        }
    }
}

/// Bytes per stored number: of a weight, and of one K or V element.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Precision {
    pub weight_bytes: usize,
    pub kv_bytes: usize,
}

impl Precision {
    /// The CUDA runner: bf16 weights and cache.
    pub const BF16: Self = Self {
        weight_bytes: 2,
        kv_bytes: 2,
    };
    /// The CPU reference runner: weights widened to f32, f32 cache.
    pub const F32: Self = Self {
        weight_bytes: 4,
        kv_bytes: 4,
    };
}

/// Memory of a device, as `cuMemGetInfo` reports it, or a host budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeviceMemory {
    pub total_bytes: u64,
    pub free_bytes: u64,
}

impl DeviceMemory {
    /// A budget of `bytes`, none of it in use.
    pub fn budget(bytes: u64) -> Self {
        Self {
            total_bytes: bytes,
            free_bytes: bytes,
        }
    }

    /// Memory held by others when the runner starts.
    pub fn in_use_bytes(&self) -> u64 {
        self.total_bytes.saturating_sub(self.free_bytes)
    }
}

/// What fits: the weights, and the KV-cache blocks (null block included).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MemoryPlan {
    pub weight_bytes: u64,
    /// Bytes of one block: K and V of `block_size` tokens in every layer.
    pub kv_block_bytes: u64,
    pub kv_blocks: usize,
    /// What the engine may use: `utilization × total − in use`, at most the free memory.
    pub available_bytes: u64,
}

impl MemoryPlan {
    pub fn kv_bytes(&self) -> u64 {
        self.kv_blocks as u64 * self.kv_block_bytes
    }
}

/// Why a plan failed.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum MemoryError {
    /// Boxed: the numbers would make every error type that carries one large.
    #[error("{0}")]
    DoesNotFit(Box<Shortfall>),
    #[error("invalid KV-cache settings: {0}")]
    Settings(String),
}

/// A model that does not fit, with the numbers: what it needs, what there is.
#[derive(Debug, Clone, PartialEq)]
pub struct Shortfall {
    pub weight_bytes: u64,
    /// The least KV cache the settings need: one `max_model_len` request, or
    /// the `num_gpu_blocks` asked for.
    pub kv_bytes: u64,
    pub kv_blocks: usize,
    pub block_size: usize,
    /// `Some(max_model_len)` when the need is one request of that length,
    /// `None` when it is the blocks `num_gpu_blocks` asked for.
    pub max_model_len: Option<usize>,
    pub available_bytes: u64,
    pub total_bytes: u64,
    pub in_use_bytes: u64,
    /// `None` with `num_gpu_blocks` (the free memory is what there is).
    pub utilization: Option<f64>,
}

impl std::fmt::Display for Shortfall {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let gib = |b: u64| b as f64 / GIB;
        write!(
            f,
            "the model does not fit: weights need {:.2} GiB, ",
            gib(self.weight_bytes)
        )?;
        match self.max_model_len {
            Some(len) => write!(f, "KV for one {len}-token sequence needs ")?,
            None => write!(f, "KV for num_gpu_blocks = {} needs ", self.kv_blocks)?,
        }
        write!(
            f,
            "{:.2} GiB ({} blocks of {} tokens, null block included); available {:.2} GiB",
            gib(self.kv_bytes),
            self.kv_blocks,
            self.block_size,
            gib(self.available_bytes)
        )?;
        match self.utilization {
            Some(u) => write!(f, " (= {u} × {:.2} GiB total", gib(self.total_bytes))?,
            None => write!(f, " (free, of {:.2} GiB total", gib(self.total_bytes))?,
        }
        if self.in_use_bytes > 0 && self.utilization.is_some() {
            write!(f, ", less {:.2} GiB in use", gib(self.in_use_bytes))?;
        }
        write!(
            f,
            "); lower max_model_len, raise gpu_memory_utilization or use a device with more memory"
        )
    }
}

/// Bytes of the weights: every parameter once (a tied LM head is the embedding).
pub fn weight_bytes(config: &Qwen3Config, precision: Precision) -> u64 {
    config.num_params() as u64 * precision.weight_bytes as u64
}

/// Bytes of one KV-cache block of `block_size` tokens, all layers, K and V.
pub fn kv_block_bytes(config: &Qwen3Config, block_size: usize, precision: Precision) -> u64 {
    (block_size * config.kv_bytes_per_token(precision.kv_bytes)) as u64
}

/// The memory plan of `config` under `settings` on `memory` (see the module doc).
pub fn plan(
    config: &Qwen3Config,
    settings: &KvSettings,
    precision: Precision,
    memory: DeviceMemory,
) -> Result<MemoryPlan, MemoryError> {
    if settings.block_size == 0 || settings.max_model_len == 0 {
        return Err(MemoryError::Settings(format!(
            "block_size ({}) and max_model_len ({}) must be positive",
            settings.block_size, settings.max_model_len
        )));
    }
    let u = settings.gpu_memory_utilization;
    if settings.num_gpu_blocks.is_none() && !(u > 0.0 && u <= 1.0) {
        return Err(MemoryError::Settings(format!(
            "gpu_memory_utilization {u} is not a fraction in (0, 1]"
        )));
    }
    let weights = weight_bytes(config, precision);
    let block = kv_block_bytes(config, settings.block_size, precision);
    let in_use = memory.in_use_bytes();
    let shortfall = |kv_blocks: usize, max_model_len, available, utilization| {
        MemoryError::DoesNotFit(Box::new(Shortfall {
            weight_bytes: weights,
            kv_bytes: (kv_blocks as u64).saturating_mul(block),
            kv_blocks,
            block_size: settings.block_size,
            max_model_len,
            available_bytes: available,
            total_bytes: memory.total_bytes,
            in_use_bytes: in_use,
            utilization,
        }))
    };
    if let Some(n) = settings.num_gpu_blocks {
        let available = memory.free_bytes;
        let need = (n as u128) * block as u128 + weights as u128;
        if need > available as u128 {
            return Err(shortfall(n, None, available, None));
        }
        return Ok(MemoryPlan {
            weight_bytes: weights,
            kv_block_bytes: block,
            kv_blocks: n,
            available_bytes: available,
        });
    }
    let available = ((memory.total_bytes as f64 * u) as u64)
        .saturating_sub(in_use)
        .min(memory.free_bytes);
    let needed = settings.max_model_len.div_ceil(settings.block_size) + 1;
    let fitting = available.saturating_sub(weights) / block.max(1);
    if weights > available || fitting < needed as u64 {
        return Err(shortfall(
            needed,
            Some(settings.max_model_len),
            available,
            Some(u),
        ));
    }
    Ok(MemoryPlan {
        weight_bytes: weights,
        kv_block_bytes: block,
        kv_blocks: usize::try_from(fitting).unwrap_or(usize::MAX),
        available_bytes: available,
    })
}
