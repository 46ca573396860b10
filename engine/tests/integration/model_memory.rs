//! Memory planning: a model too big for the memory is refused with what it
//! needs and what there is; one that fits gets the KV blocks the rest holds.

use engine::model::memory::{self, kv_block_bytes, weight_bytes};
use engine::model::{DeviceMemory, KvSettings, MemoryError, Precision, Qwen3Config};
use engine::EngineConfig;

const GIB: u64 = 1 << 30;

fn defaults() -> KvSettings {
    KvSettings::from(&EngineConfig::default())
}

#[test]
fn qwen3_32b_does_not_fit_16_gib_and_says_why() {
    let config = Qwen3Config::qwen3_32b();
    let err = memory::plan(
        &config,
        &defaults(),
        Precision::BF16,
        DeviceMemory::budget(16 * GIB),
    )
    .unwrap_err();
    let MemoryError::DoesNotFit(s) = &err else {
        panic!("expected DoesNotFit, got {err:?}");
    };
    // 32,762,123,264 parameters in bf16; 0.9 of 16 GiB; one 4,096-token
    // request: 256 blocks and the null block of 4 MiB (16 tokens x 64 layers x
    // K and V x 8 heads x 128 x 2 bytes).
    assert_eq!(s.weight_bytes, 65_524_246_528);
    assert_eq!(s.available_bytes, 15_461_882_265);
    assert_eq!((s.kv_blocks, s.kv_bytes), (257, 257 * 4 * (1 << 20)));
    assert_eq!(s.max_model_len, Some(4096));
    assert_eq!(
        err.to_string(),
        "the model does not fit: weights need 61.02 GiB, KV for one 4096-token sequence \
         needs 1.00 GiB (257 blocks of 16 tokens, null block included); available 14.40 GiB \
         (= 0.9 × 16.00 GiB total); lower max_model_len, raise gpu_memory_utilization or use \
         a device with more memory"
    );
}

#[test]
fn qwen3_0_6b_on_16_gib_gets_the_blocks_the_rest_holds() {
    let config = Qwen3Config::qwen3_0_6b();
    let plan = memory::plan(
        &config,
        &defaults(),
        Precision::BF16,
        DeviceMemory::budget(16 * GIB),
    )
    .unwrap();
    // (15,461,882,265 - 1,192,099,840) / 1,835,008 bytes a block.
    assert_eq!(plan.weight_bytes, 1_192_099_840);
    assert_eq!(plan.kv_block_bytes, 1_835_008);
    assert_eq!(plan.kv_blocks, 7776);
    assert!(plan.weight_bytes + plan.kv_bytes() <= plan.available_bytes);
}

#[test]
fn qwen3_32b_fits_one_h200_with_default_settings() {
    let config = Qwen3Config::qwen3_32b();
    let h200 = DeviceMemory::budget(141 * GIB);
    let plan = memory::plan(&config, &defaults(), Precision::BF16, h200).unwrap();
    // 0.9 x 141 GiB = 126.9 GiB; the weights (65.5 GB) leave 65.9 GiB of KV
    // cache: 16,864 blocks, 269,824 tokens at 256 KiB a token.
    assert_eq!(plan.available_bytes, 136_257_837_465);
    assert_eq!(plan.weight_bytes, 65_524_246_528);
    assert_eq!(plan.kv_blocks, 16_864);
    assert_eq!(plan.kv_blocks * 16, 269_824);
    assert_eq!(config.kv_bytes_per_token(2), 256 << 10);
    let kv_gib = plan.kv_bytes() as f64 / GIB as f64;
    assert!((kv_gib - 65.875).abs() < 1e-9, "{kv_gib}");
    // The lent H200 reports 143,771 MiB (nvidia-smi): 16,726 blocks.
    let lent = DeviceMemory::budget(143_771 << 20);
    let plan = memory::plan(&config, &defaults(), Precision::BF16, lent).unwrap();
    assert_eq!(plan.kv_blocks, 16_726);
}

#[test]
fn memory_in_use_by_others_comes_off_the_budget() {
    let config = Qwen3Config::qwen3_0_6b();
    let block = kv_block_bytes(&config, 16, Precision::BF16);
    let weights = weight_bytes(&config, Precision::BF16);
    // 100 GiB device, 20 GiB held elsewhere: 0.9 x 100 - 20 = 70 GiB.
    let busy = DeviceMemory {
        total_bytes: 100 * GIB,
        free_bytes: 80 * GIB,
    };
    let plan = memory::plan(&config, &defaults(), Precision::BF16, busy).unwrap();
    assert_eq!(plan.available_bytes, 70 * GIB);
    assert_eq!(plan.kv_blocks as u64, (70 * GIB - weights) / block);
    // Others holding more than the utilization allows leaves nothing.
    let crowded = DeviceMemory {
        total_bytes: 100 * GIB,
        free_bytes: 5 * GIB,
    };
    match memory::plan(&config, &defaults(), Precision::BF16, crowded) {
        Err(MemoryError::DoesNotFit(s)) => {
            assert_eq!((s.available_bytes, s.in_use_bytes), (0, 95 * GIB));
            assert!(MemoryError::DoesNotFit(s)
                .to_string()
                .contains("less 95.00 GiB in use"));
        }
        other => panic!("expected DoesNotFit, got {other:?}"),
    }
}

#[test]
fn num_gpu_blocks_is_planned_as_asked_if_it_fits_the_free_memory() {
    let config = Qwen3Config::qwen3_8b();
    let block = kv_block_bytes(&config, 16, Precision::BF16);
    let weights = weight_bytes(&config, Precision::BF16);
    let fixed = |n| KvSettings {
        num_gpu_blocks: Some(n),
        ..defaults()
    };
    let memory = DeviceMemory::budget(40 * GIB);
    let plan = memory::plan(&config, &fixed(1000), Precision::BF16, memory).unwrap();
    assert_eq!((plan.kv_blocks, plan.available_bytes), (1000, 40 * GIB));
    let most = ((40 * GIB - weights) / block) as usize;
    assert!(memory::plan(&config, &fixed(most), Precision::BF16, memory).is_ok());
    match memory::plan(&config, &fixed(most + 1), Precision::BF16, memory) {
        Err(MemoryError::DoesNotFit(s)) => {
            assert_eq!(
                (s.kv_blocks, s.max_model_len, s.utilization),
                (most + 1, None, None)
            );
            let msg = MemoryError::DoesNotFit(s).to_string();
            assert!(
                msg.contains(&format!("KV for num_gpu_blocks = {}", most + 1)),
                "{msg}"
            );
        }
        other => panic!("expected DoesNotFit, got {other:?}"),
    }
    // No overflow on absurd requests.
    assert!(memory::plan(&config, &fixed(usize::MAX), Precision::BF16, memory).is_err());
}

#[test]
fn the_cpu_runner_plans_f32_and_bad_settings_are_errors() {
    let config = Qwen3Config::tiny();
    assert_eq!(
        weight_bytes(&config, Precision::F32),
        2 * weight_bytes(&config, Precision::BF16)
    );
    let zero = KvSettings {
        block_size: 0,
        ..defaults()
    };
    assert!(matches!(
        memory::plan(&config, &zero, Precision::F32, DeviceMemory::budget(GIB)),
        Err(MemoryError::Settings(_))
    ));
    let over = KvSettings {
        gpu_memory_utilization: 1.5,
        ..defaults()
    };
    assert!(matches!(
        memory::plan(&config, &over, Precision::BF16, DeviceMemory::budget(GIB)),
        Err(MemoryError::Settings(_))
    ));
}
