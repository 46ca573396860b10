//! Scheduler and prefix-cache costs on the hot paths.
//!
//! - `decode_step/HASH/N`: one `EngineCore::step` (schedule, runner, update)
//!   with N running decodes, with `FixedTokenRunner` (which computes nothing);
//!   HASH is the prefix-cache hash (`sha256`, vLLM's default; `fast`) or
//!   `no_caching`. A decoding sequence hashes one block every `block_size` steps.
//! - `closed_loop_64`: a 64-client closed loop of 256-token prompts and 128
//!   outputs (cb_sweep's load), per step, including admissions and finishes.
//! - `prefix_lookup/{sha256,fast}`: the cached-prefix lookup of a new
//!   3,200-token prompt whose prefix is cached (hashing included).

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use engine::config::HashAlgo;
use engine::kv_cache::{KvCacheManager, SeqBlocks};
use engine::testing::FixedTokenRunner;
use engine::{EngineConfig, EngineCore, Request};
use std::hint::black_box;
use std::time::{Duration, Instant};

const PROMPT: usize = 32;
const STEPS_PER_ENGINE: usize = 3_000;

fn decode_engine(num_seqs: usize, caching: Option<HashAlgo>) -> EngineCore<FixedTokenRunner> {
    let config = EngineConfig {
        num_gpu_blocks: Some(num_seqs * 256 + 1),
        enable_prefix_caching: caching.is_some(),
        prefix_caching_hash_algo: caching.unwrap_or_default(),
        ..EngineConfig::default()
    };
    let mut engine =
        EngineCore::new(config, FixedTokenRunner::new(0, 151_936)).expect("valid config");
    for i in 0..num_seqs as u64 {
        let prompt = (0..PROMPT as u32).map(|t| t + 1000 * i as u32).collect();
        engine
            .add_request(Request::new(i, prompt, 4096 - PROMPT))
            .expect("valid request");
    }
    // Prefill everything so the measured steps are pure decodes.
    loop {
        let outcome = engine.step().expect("step");
        if engine.num_waiting() == 0 && outcome.shape.is_decode_only() {
            break;
        }
    }
    engine
}

fn decode_step(c: &mut Criterion) {
    let mut group = c.benchmark_group("decode_step");
    let variants = [
        (64, Some(HashAlgo::Sha256)),
        (256, Some(HashAlgo::Sha256)),
        (64, Some(HashAlgo::Fast)),
        (64, None),
    ];
    for (num_seqs, caching) in variants {
        let hash = caching.map_or("no_caching".to_string(), |a| {
            format!("{a:?}").to_lowercase()
        });
        group.bench_function(BenchmarkId::new(hash, num_seqs), |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                let mut left = iters as usize;
                while left > 0 {
                    let mut engine = decode_engine(num_seqs, caching);
                    let n = left.min(STEPS_PER_ENGINE);
                    let start = Instant::now();
                    for _ in 0..n {
                        black_box(engine.step().expect("step"));
                    }
                    total += start.elapsed();
                    left -= n;
                }
                total
            })
        });
    }
    group.finish();
}

fn closed_loop_64(c: &mut Criterion) {
    let config = EngineConfig {
        num_gpu_blocks: Some(64 * 26 + 1),
        ..EngineConfig::default()
    };
    let mut engine =
        EngineCore::new(config, FixedTokenRunner::new(0, 151_936)).expect("valid config");
    let mut next_id = 0u64;
    let mut submit = |engine: &mut EngineCore<FixedTokenRunner>| {
        let prompt = (0..256u32)
            .map(|t| t.wrapping_mul(7919).wrapping_add(next_id as u32 * 131))
            .collect();
        engine
            .add_request(Request::new(next_id, prompt, 128))
            .expect("valid request");
        next_id += 1;
    };
    for _ in 0..64 {
        submit(&mut engine);
    }
    c.bench_function("closed_loop_64", |b| {
        b.iter(|| {
            let outcome = engine.step().expect("step");
            for _ in &outcome.finished {
                submit(&mut engine);
            }
            black_box(outcome)
        })
    });
}

fn prefix_lookup(c: &mut Criterion) {
    let mut group = c.benchmark_group("prefix_lookup");
    let prompt: Vec<u32> = (0..3_200u32)
        .map(|t| t.wrapping_mul(2_654_435_761) % 151_936)
        .collect();
    for (name, algo) in [("sha256", HashAlgo::Sha256), ("fast", HashAlgo::Fast)] {
        let mut kv = KvCacheManager::new(1_000, 16, true, algo);
        let mut writer = SeqBlocks::default();
        assert!(kv.allocate_slots(&mut writer, &prompt, None, 0, prompt.len(), &[]));
        let mut hits = Vec::with_capacity(200);
        let cached = kv.computed_blocks(&mut SeqBlocks::default(), &prompt, None, &mut hits);
        assert_eq!(cached, 199 * 16, "the lookup must find the cached prefix");
        group.bench_function(name, |b| {
            b.iter(|| {
                let mut reader = SeqBlocks::default();
                hits.clear();
                black_box(kv.computed_blocks(&mut reader, black_box(&prompt), None, &mut hits))
            })
        });
    }
    group.finish();
}

criterion_group!(benches, decode_step, closed_loop_64, prefix_lookup);
criterion_main!(benches);
