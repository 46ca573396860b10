//! Every `EngineConfig::validate` rejection names the option and the fix;
//! `EngineCore::new` applies the same checks to the runner's pool size.

use engine::config::ConfigError;
use engine::testing::FixedTokenRunner;
use engine::{EngineConfig, EngineCore, EngineError};

fn rejected_option(config: &EngineConfig) -> (&'static str, String) {
    match config.validate() {
        Err(ConfigError::Invalid { option, fix, .. }) => (option, fix),
        Ok(()) => panic!("{config:?} was accepted"),
    }
}

#[test]
fn defaults_are_vllms_and_valid() {
    let c = EngineConfig::default();
    assert_eq!(
        (c.max_num_seqs, c.max_num_batched_tokens, c.block_size),
        (256, 2048, 16)
    );
    assert!(c.enable_chunked_prefill && c.enable_prefix_caching);
    assert_eq!(c.long_prefill_token_threshold, 0);
    assert_eq!(c.validate(), Ok(()));
}

#[test]
fn rejects_chunking_off_with_budget_below_max_model_len() {
    let c = EngineConfig {
        enable_chunked_prefill: false,
        max_num_batched_tokens: 2048,
        ..Default::default()
    };
    let (option, fix) = rejected_option(&c);
    assert_eq!(option, "max_num_batched_tokens");
    assert!(
        fix.contains("max_model_len") && fix.contains("enable chunked prefill"),
        "{fix}"
    );
    let ok = EngineConfig {
        max_num_batched_tokens: 4096,
        ..c
    };
    assert_eq!(ok.validate(), Ok(()));
}

#[test]
fn rejects_budget_below_max_num_seqs() {
    let c = EngineConfig {
        max_num_seqs: 300,
        max_num_batched_tokens: 299,
        ..Default::default()
    };
    let (option, fix) = rejected_option(&c);
    assert_eq!(option, "max_num_batched_tokens");
    assert!(fix.contains("max_num_seqs"), "{fix}");
    assert_eq!(
        EngineConfig {
            max_num_batched_tokens: 300,
            ..c
        }
        .validate(),
        Ok(())
    );
}

#[test]
fn rejects_long_prefill_threshold_above_max_model_len() {
    let c = EngineConfig {
        long_prefill_token_threshold: 4097,
        ..Default::default()
    };
    let (option, fix) = rejected_option(&c);
    assert_eq!(option, "long_prefill_token_threshold");
    assert!(fix.contains("max_model_len"), "{fix}");
    assert_eq!(
        EngineConfig {
            long_prefill_token_threshold: 4096,
            ..c
        }
        .validate(),
        Ok(())
    );
}

#[test]
fn rejects_block_sizes_vllm_does_not_allow() {
    for bad in [0, 3, 24, 100, 512, 100_000] {
        let config = EngineConfig {
            block_size: bad,
            ..Default::default()
        };
        let (option, _) = rejected_option(&config);
        assert_eq!(option, "block_size", "{bad}");
        let message = config.validate().unwrap_err().to_string();
        assert!(
            message.contains(&format!("block_size = {bad}")) && message.contains("256"),
            "{message}"
        );
    }
    for good in [1, 2, 4, 8, 16, 32, 64, 128, 256] {
        let config = EngineConfig {
            block_size: good,
            ..Default::default()
        };
        assert_eq!(config.validate(), Ok(()), "{good}");
    }
}

#[test]
fn rejects_zero_sizes_and_bad_memory_fraction() {
    for (config, expected) in [
        (
            EngineConfig {
                max_model_len: 0,
                ..Default::default()
            },
            "max_model_len",
        ),
        (
            EngineConfig {
                max_num_seqs: 0,
                ..Default::default()
            },
            "max_num_seqs",
        ),
        (
            EngineConfig {
                max_num_batched_tokens: 0,
                ..Default::default()
            },
            "max_num_batched_tokens",
        ),
        (
            EngineConfig {
                gpu_memory_utilization: 0.0,
                ..Default::default()
            },
            "gpu_memory_utilization",
        ),
        (
            EngineConfig {
                gpu_memory_utilization: 1.5,
                ..Default::default()
            },
            "gpu_memory_utilization",
        ),
    ] {
        assert_eq!(rejected_option(&config).0, expected);
    }
}

#[test]
fn rejects_pool_too_small_for_one_max_model_len_request() {
    // 4096 tokens in blocks of 16 = 256 blocks, plus the null block.
    let c = EngineConfig {
        num_gpu_blocks: Some(256),
        ..Default::default()
    };
    let (option, fix) = rejected_option(&c);
    assert_eq!(option, "num_gpu_blocks");
    assert!(fix.contains("257"), "{fix}");
    assert_eq!(
        EngineConfig {
            num_gpu_blocks: Some(257),
            ..c
        }
        .validate(),
        Ok(())
    );
}

#[test]
fn engine_rejects_runner_pool_too_small() {
    let c = EngineConfig::default();
    let err = EngineCore::new(c.clone(), FixedTokenRunner::new(256, 100))
        .err()
        .expect("rejected");
    assert!(matches!(
        err,
        EngineError::Config(ConfigError::Invalid {
            option: "num_gpu_blocks",
            ..
        })
    ));
    assert!(EngineCore::new(c, FixedTokenRunner::new(257, 100)).is_ok());
}

#[test]
fn engine_rejects_invalid_config() {
    let c = EngineConfig {
        block_size: 0,
        ..Default::default()
    };
    assert!(matches!(
        EngineCore::new(c, FixedTokenRunner::new(1000, 100)),
        Err(EngineError::Config(_))
    ));
}

#[test]
fn num_gpu_blocks_overrides_the_runner() {
    let c = EngineConfig {
        num_gpu_blocks: Some(300),
        ..Default::default()
    };
    let e = EngineCore::new(c, FixedTokenRunner::new(10_000, 100)).unwrap();
    assert_eq!(e.kv_cache().num_blocks(), 300);
    assert_eq!(e.num_free_blocks(), 299);
}
