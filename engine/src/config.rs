//! Engine settings, with vLLM's option names and defaults where vLLM has them.
//!
//! Contract: an [`EngineConfig`] is fixed at construction of the engine;
//! [`EngineConfig::validate`] rejects impossible combinations before anything
//! runs, with an error that names the option and says how to fix it.

use serde::de::{self, Deserializer, EnumAccess, VariantAccess, Visitor};
use serde::{Deserialize, Serialize};
use std::str::FromStr;
use thiserror::Error;

/// Hash used for prefix-cache block hashes, by vLLM's names for
/// `prefix_caching_hash_algo`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum HashAlgo {
    /// SHA-256 over the parent hash, the block's tokens and extra keys (vLLM's default).
    #[default]
    Sha256,
    /// xxh3, 128 bits (as vLLM's `xxhash`): non-cryptographic, so collisions
    /// could in principle be crafted; fine for simulation, not for multi-tenant
    /// isolation guarantees.
    Xxhash,
}

/// A `prefix_caching_hash_algo` name that is not one of [`HashAlgo`]'s.
#[derive(Debug, Clone, Error, PartialEq)]
pub enum HashAlgoError {
    #[error("prefix_caching_hash_algo \"fast\" is now \"xxhash\" (vLLM's name): use \"xxhash\"")]
    RenamedFast,
    #[error("unknown prefix_caching_hash_algo {0:?}: use \"sha256\" (the default) or \"xxhash\"")]
    Unknown(String),
}

impl FromStr for HashAlgo {
    type Err = HashAlgoError;
    fn from_str(name: &str) -> Result<Self, Self::Err> {
        match name {
            "sha256" => Ok(HashAlgo::Sha256),
            "xxhash" => Ok(HashAlgo::Xxhash),
            "fast" => Err(HashAlgoError::RenamedFast),
            other => Err(HashAlgoError::Unknown(other.to_string())),
        }
    }
}

/// Reads the name as a string (JSON) or a unit variant (RON), through
/// [`FromStr`], so that the old name `fast` gets an error saying what to use.
impl<'de> Deserialize<'de> for HashAlgo {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Name;
        impl<'de> Visitor<'de> for Name {
            type Value = HashAlgo;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("\"sha256\" or \"xxhash\"")
            }
            fn visit_str<E: de::Error>(self, name: &str) -> Result<HashAlgo, E> {
                name.parse().map_err(E::custom)
            }
            fn visit_enum<A: EnumAccess<'de>>(self, data: A) -> Result<HashAlgo, A::Error> {
                let (name, variant): (String, _) = data.variant()?;
                variant.unit_variant()?;
                name.parse().map_err(de::Error::custom)
            }
        }
        deserializer.deserialize_enum("HashAlgo", &["sha256", "xxhash"], Name)
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EngineConfig {
    /// Most sequences running at once.
    pub max_num_seqs: usize,
    /// Token budget of one step; with chunked prefill this *is* the chunk size.
    pub max_num_batched_tokens: usize,
    /// Longest sequence (prompt + output) the engine accepts.
    pub max_model_len: usize,
    pub enable_chunked_prefill: bool,
    /// Cap on tokens a single prefilling request takes in one step; 0 = no cap.
    pub long_prefill_token_threshold: usize,
    /// Tokens per KV-cache block.
    pub block_size: usize,
    pub enable_prefix_caching: bool,
    pub prefix_caching_hash_algo: HashAlgo,
    /// KV-cache blocks, including the null block. When `None`, the runner
    /// derives it from `gpu_memory_utilization` (real mode) or the cost model's
    /// GPU memory (sim mode).
    pub num_gpu_blocks: Option<usize>,
    pub gpu_memory_utilization: f64,
}

impl Default for EngineConfig {
    fn default() -> Self {
        Self {
            max_num_seqs: 256,
            max_num_batched_tokens: 2048,
            max_model_len: 4096,
            enable_chunked_prefill: true,
            long_prefill_token_threshold: 0,
            block_size: 16,
            enable_prefix_caching: true,
            prefix_caching_hash_algo: HashAlgo::Sha256,
            num_gpu_blocks: None,
            gpu_memory_utilization: 0.9,
        }
    }
}

#[derive(Debug, Error, PartialEq)]
pub enum ConfigError {
    #[error("{option} = {value} is invalid: {fix}")]
    Invalid {
        option: &'static str,
        value: String,
        fix: String,
    },
}

/// The largest block vLLM allows (`vllm.config.cache.BlockSize`).
pub const MAX_BLOCK_SIZE: usize = 256;

fn invalid(option: &'static str, value: impl ToString, fix: impl Into<String>) -> ConfigError {
    ConfigError::Invalid {
        option,
        value: value.to_string(),
        fix: fix.into(),
    }
}

impl EngineConfig {
    /// Blocks needed to hold `tokens` tokens.
    pub fn blocks_for(&self, tokens: usize) -> usize {
        tokens.div_ceil(self.block_size.max(1))
    }

    /// Rejects settings no engine could run with.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if !(self.block_size.is_power_of_two() && self.block_size <= MAX_BLOCK_SIZE) {
            return Err(invalid(
                "block_size",
                self.block_size,
                format!(
                    "use a power of two from 1 to {MAX_BLOCK_SIZE}: vLLM allows 1, 8, 16, 32, 64, \
                     128 and 256 (16 is its default); 2 and 4 are accepted here for small tests"
                ),
            ));
        }
        if self.max_model_len == 0 {
            return Err(invalid("max_model_len", 0, "use a positive length"));
        }
        if self.max_num_seqs == 0 {
            return Err(invalid("max_num_seqs", 0, "use at least 1"));
        }
        if self.max_num_batched_tokens == 0 {
            return Err(invalid("max_num_batched_tokens", 0, "use at least 1"));
        }
        if !self.enable_chunked_prefill && self.max_num_batched_tokens < self.max_model_len {
            return Err(invalid(
                "max_num_batched_tokens",
                self.max_num_batched_tokens,
                format!(
                    "with enable_chunked_prefill = false a whole prompt must fit in one step: \
                     set max_num_batched_tokens >= max_model_len ({}) or enable chunked prefill",
                    self.max_model_len
                ),
            ));
        }
        if self.max_num_batched_tokens < self.max_num_seqs {
            return Err(invalid(
                "max_num_batched_tokens",
                self.max_num_batched_tokens,
                format!(
                    "must be >= max_num_seqs ({}) so every running sequence can decode in one step",
                    self.max_num_seqs
                ),
            ));
        }
        if self.long_prefill_token_threshold > self.max_model_len {
            return Err(invalid(
                "long_prefill_token_threshold",
                self.long_prefill_token_threshold,
                format!(
                    "must be <= max_model_len ({}); 0 disables it",
                    self.max_model_len
                ),
            ));
        }
        if !(self.gpu_memory_utilization > 0.0 && self.gpu_memory_utilization <= 1.0) {
            return Err(invalid(
                "gpu_memory_utilization",
                self.gpu_memory_utilization,
                "use a fraction in (0, 1]",
            ));
        }
        if let Some(blocks) = self.num_gpu_blocks {
            self.validate_num_blocks(blocks)?;
        }
        Ok(())
    }

    /// Rejects a KV pool that cannot hold one request of `max_model_len` tokens
    /// (the null block is not usable).
    pub fn validate_num_blocks(&self, num_gpu_blocks: usize) -> Result<(), ConfigError> {
        let needed = self.blocks_for(self.max_model_len) + 1;
        if num_gpu_blocks < needed {
            return Err(invalid(
                "num_gpu_blocks",
                num_gpu_blocks,
                format!(
                    "the KV pool must hold one request of max_model_len = {} tokens: \
                     at least {needed} blocks of {} tokens (null block included); \
                     raise num_gpu_blocks / gpu_memory_utilization or lower max_model_len",
                    self.max_model_len, self.block_size
                ),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_algo_names_are_vllms_and_fast_says_to_use_xxhash() {
        assert_eq!("sha256".parse(), Ok(HashAlgo::Sha256));
        assert_eq!("xxhash".parse(), Ok(HashAlgo::Xxhash));
        let fast = "fast".parse::<HashAlgo>().unwrap_err();
        assert_eq!(fast, HashAlgoError::RenamedFast);
        assert!(fast.to_string().contains("use \"xxhash\""), "{fast}");
        assert!(matches!("md5".parse::<HashAlgo>(), Err(HashAlgoError::Unknown(n)) if n == "md5"));
        for algo in [HashAlgo::Sha256, HashAlgo::Xxhash] {
            let json = serde_json::to_string(&algo).unwrap();
            assert_eq!(serde_json::from_str::<HashAlgo>(&json).unwrap(), algo);
        }
        assert_eq!(
            serde_json::to_string(&HashAlgo::Xxhash).unwrap(),
            "\"xxhash\""
        );
        let err = serde_json::from_str::<EngineConfig>(r#"{"prefix_caching_hash_algo": "fast"}"#)
            .unwrap_err()
            .to_string();
        assert!(err.contains("use \"xxhash\""), "{err}");
    }
}
