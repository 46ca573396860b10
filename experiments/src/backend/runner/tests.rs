use super::*;

#[test]
fn limits_cover_smaller_settings_and_chunking_off() {
    let base = EngineConfig::default();
    let limits = RunnerLimits::for_engine(&base);
    assert!(limits.covers(&base, 1000));
    let off = EngineConfig {
        enable_chunked_prefill: false,
        max_num_batched_tokens: base.max_model_len,
        ..base.clone()
    };
    assert!(
        limits.covers(&off, 1000),
        "chunking off fits the same runner"
    );
    let fewer = EngineConfig {
        max_num_seqs: 1,
        ..base.clone()
    };
    assert!(limits.covers(&fewer, 1000));
    let more = EngineConfig {
        max_num_seqs: 512,
        max_num_batched_tokens: 8192,
        ..base.clone()
    };
    assert!(!limits.covers(&more, 1000));
    let grown = limits.grown(&more);
    assert!(grown.covers(&more, 1000) && grown.covers(&base, 1000));
    let fixed = |n| EngineConfig {
        num_gpu_blocks: Some(n),
        ..base.clone()
    };
    assert!(limits.covers(&fixed(1000), 1000));
    assert!(!limits.covers(&fixed(1001), 1000));
    let util = EngineConfig {
        gpu_memory_utilization: 0.5,
        ..base.clone()
    };
    assert!(
        !limits.covers(&util, 1000),
        "another memory share sizes another cache"
    );
    let blocks = EngineConfig {
        block_size: 32,
        ..base
    };
    assert!(!limits.covers(&blocks, 1000));
}

#[test]
fn cpu_kv_blocks_fixed_budgeted_and_at_least_one_sequence() {
    let tiny = Qwen3Config::tiny();
    let small = RunnerLimits::for_engine(&EngineConfig {
        max_model_len: 256,
        max_num_batched_tokens: 256,
        max_num_seqs: 4,
        ..EngineConfig::default()
    });
    assert_eq!(
        small.cpu_kv_blocks(&tiny),
        4 * 16 + 1,
        "room for every sequence"
    );
    let fixed = RunnerLimits {
        num_gpu_blocks: Some(77),
        ..small.clone()
    };
    assert_eq!(fixed.cpu_kv_blocks(&tiny), 77);
    let qwen = Qwen3Config::qwen3_0_6b();
    let big = RunnerLimits::for_engine(&EngineConfig::default());
    let blocks = big.cpu_kv_blocks(&qwen);
    let per_seq = 4096 / 16;
    let block_bytes = 2 * 28 * qwen.kv_size() * 16 * 4;
    assert!(blocks > per_seq, "one full-length sequence fits");
    assert!(
        (blocks - 1) * block_bytes <= CPU_KV_BUDGET_BYTES.max(per_seq * block_bytes),
        "{blocks} blocks"
    );
}

#[test]
fn cuda_is_the_default_even_where_it_is_not_built_in() {
    // Real mode without --backend means the GPU; the CPU only when asked.
    assert_eq!(RunnerKind::default(), RunnerKind::Cuda);
}

#[test]
fn warm_up_runs_a_prefill_and_every_decode_batch_size() {
    /// (sequences, tokens, context of the first sequence) of each batch.
    struct Counting(Vec<(usize, usize, usize)>);
    impl ModelRunner for Counting {
        fn num_kv_blocks(&self) -> usize {
            10_000
        }
        fn execute(&mut self, b: &ScheduledBatch<'_>) -> Result<RunnerOutput, RunnerError> {
            self.0
                .push((b.seqs.len(), b.num_tokens(), b.seqs[0].start_pos));
            let sampled = b.seqs.iter().filter(|s| s.samples).map(|_| 1).collect();
            Ok(RunnerOutput {
                sampled,
                modeled_seconds: None,
            })
        }
    }
    let limits = RunnerLimits::for_engine(&EngineConfig {
        max_num_seqs: 8,
        max_model_len: 128,
        max_num_batched_tokens: 64,
        ..EngineConfig::default()
    });
    let mut r = Counting(Vec::new());
    warm_up(&mut r, &limits).unwrap();
    // The runner must take a whole max_model_len prompt (chunking off):
    // prefills of 16, 32, 48 and 64 tokens (powers of two also over
    // context), the largest (127), a mixed batch of 7 decodes + a
    // 120-token chunk, then decode-only batches of 1..=8.
    let mut expected = vec![];
    for t in [16, 32, 48, 64] {
        expected.push((1, t, 0));
        if t != 48 {
            expected.push((1, t, 127 - t));
        }
    }
    expected.extend([(1, 127, 0), (8, 127, 15)]);
    expected.extend((1..=8).map(|b| (b, b, 15)));
    assert_eq!(r.0, expected);
}
