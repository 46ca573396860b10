//! [`EngineConfig`] fields by name, for `--set` and RON files.
//!
//! Contract: [`ENGINE_KEYS`] lists every `EngineConfig` field (a test in
//! the parent module checks this against the struct's serialized form);
//! `set_engine_key` returns `Ok(false)` for a key that is not one of them.

use super::{bad, SettingsError};
use engine::{EngineConfig, HashAlgoError};

/// `EngineConfig` fields settable by key, with the expected text form.
pub const ENGINE_KEYS: &[(&str, &str)] = &[
    ("max_num_seqs", "a positive integer"),
    ("max_num_batched_tokens", "a positive integer"),
    ("max_model_len", "a positive integer"),
    ("enable_chunked_prefill", "true or false"),
    (
        "long_prefill_token_threshold",
        "a non-negative integer (0 = no cap)",
    ),
    ("block_size", "a positive integer"),
    ("enable_prefix_caching", "true or false"),
    ("prefix_caching_hash_algo", "sha256 or xxhash"),
    (
        "num_gpu_blocks",
        "a positive integer, or `auto` to size the pool from GPU memory",
    ),
    ("gpu_memory_utilization", "a fraction in (0, 1]"),
];

pub(super) fn set_engine_key(
    cfg: &mut EngineConfig,
    key: &str,
    value: &str,
) -> Result<bool, SettingsError> {
    let Some((_, expected)) = ENGINE_KEYS.iter().find(|(k, _)| *k == key) else {
        return Ok(false);
    };
    let v = value.trim();
    let err = || bad(key, value, *expected);
    let count = || v.parse::<usize>().map_err(|_| err());
    let flag = || v.parse::<bool>().map_err(|_| err());
    match key {
        "max_num_seqs" => cfg.max_num_seqs = count()?,
        "max_num_batched_tokens" => cfg.max_num_batched_tokens = count()?,
        "max_model_len" => cfg.max_model_len = count()?,
        "enable_chunked_prefill" => cfg.enable_chunked_prefill = flag()?,
        "long_prefill_token_threshold" => cfg.long_prefill_token_threshold = count()?,
        "block_size" => cfg.block_size = count()?,
        "enable_prefix_caching" => cfg.enable_prefix_caching = flag()?,
        "prefix_caching_hash_algo" => {
            cfg.prefix_caching_hash_algo = v.parse().map_err(|e| match e {
                HashAlgoError::RenamedFast => bad(
                    key,
                    value,
                    "xxhash (\"fast\" is now \"xxhash\", vLLM's name)",
                ),
                HashAlgoError::Unknown(_) => err(),
            })?;
        }
        "num_gpu_blocks" => {
            cfg.num_gpu_blocks = match v {
                "auto" | "none" => None,
                _ => Some(count()?),
            }
        }
        "gpu_memory_utilization" => {
            cfg.gpu_memory_utilization = v.parse::<f64>().map_err(|_| err())?;
        }
        // ENGINE_KEYS and this match list the same keys (checked by a test).
        _ => return Ok(false),
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use engine::HashAlgo;

    #[test]
    fn hash_algo_takes_vllms_names_and_fast_says_to_use_xxhash() {
        let mut cfg = EngineConfig::default();
        let key = "prefix_caching_hash_algo";
        assert!(set_engine_key(&mut cfg, key, "xxhash").unwrap());
        assert_eq!(cfg.prefix_caching_hash_algo, HashAlgo::Xxhash);
        assert!(set_engine_key(&mut cfg, key, " sha256 ").unwrap());
        assert_eq!(cfg.prefix_caching_hash_algo, HashAlgo::Sha256);
        let msg = set_engine_key(&mut cfg, key, "fast")
            .unwrap_err()
            .to_string();
        assert!(
            msg.contains("`fast`") && msg.contains("\"xxhash\""),
            "{msg}"
        );
        let msg = set_engine_key(&mut cfg, key, "md5")
            .unwrap_err()
            .to_string();
        assert!(msg.contains("sha256 or xxhash"), "{msg}");
        assert_eq!(cfg.prefix_caching_hash_algo, HashAlgo::Sha256);
    }
}
