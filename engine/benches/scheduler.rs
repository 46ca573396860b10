//! Scheduler and prefix-cache costs on the hot paths.
//!
//! - `decode_step/HASH/N`: one `EngineCore::step` (schedule, runner, update)
//!   with N running decodes, with `FixedTokenRunner` (which computes nothing);
//!   HASH is the prefix-cache hash (`sha256`, vLLM's default, or `xxhash`) or
//!   `no_caching`. A decoding sequence hashes one block every `block_size` steps.
//! - `closed_loop_64/HASH`: a 64-client closed loop of 256-token prompts and
//!   128 outputs (cb_sweep's load), per step, including admissions, finishes
//!   and building the next request's prompt.
//! - `prefix_lookup/{sha256,xxhash}`: the cached-prefix lookup of a new
//!   3,200-token prompt whose prefix is cached (hashing included).
//!
//! `cargo bench -p engine --bench scheduler` prints each case's median time
//! per iteration and the range over rounds (`common`).

mod common;

use engine::config::HashAlgo;
use engine::kv_cache::{KvCacheManager, SeqBlocks};
use engine::testing::FixedTokenRunner;
use engine::{EngineConfig, EngineCore, Request};
use std::hint::black_box;
use std::time::{Duration, Instant};

const PROMPT: usize = 32;
const STEPS_PER_ROUND: usize = 3_000;

/// An engine whose `num_seqs` requests all decode, refilled between timed
/// rounds (untimed) before any request runs out of outputs. Requests are
/// replaced inside one engine rather than building a new one, so the timed
/// steps run on memory the allocator reuses, as in a long simulation.
struct DecodeBed {
    engine: EngineCore<FixedTokenRunner>,
    num_seqs: usize,
    next_id: u64,
    steps_left: usize,
}

impl DecodeBed {
    fn new(num_seqs: usize, caching: Option<HashAlgo>) -> Self {
        let config = EngineConfig {
            num_gpu_blocks: Some(num_seqs * 256 + 1),
            enable_prefix_caching: caching.is_some(),
            prefix_caching_hash_algo: caching.unwrap_or_default(),
            ..EngineConfig::default()
        };
        let runner = FixedTokenRunner::new(0, 151_936);
        let engine = EngineCore::new(config, runner).expect("valid config");
        let mut bed = Self {
            engine,
            num_seqs,
            next_id: 0,
            steps_left: 0,
        };
        bed.refill();
        bed
    }

    /// Replaces every request by a fresh one and prefills them all.
    fn refill(&mut self) {
        let running: Vec<_> = self.engine.running_ids().collect();
        for id in running {
            self.engine.abort(id).expect("running request");
        }
        for _ in 0..self.num_seqs {
            let id = self.next_id;
            self.next_id += 1;
            let prompt = (0..PROMPT as u32).map(|t| t + 1000 * id as u32).collect();
            let request = Request::new(id, prompt, 4096 - PROMPT);
            self.engine.add_request(request).expect("valid request");
        }
        loop {
            let outcome = self.engine.step().expect("step");
            if self.engine.num_waiting() == 0 && outcome.shape.is_decode_only() {
                break;
            }
        }
        self.steps_left = 4096 - PROMPT - 8;
    }
}

fn decode_step() {
    let variants = [
        (64, Some(HashAlgo::Sha256)),
        (256, Some(HashAlgo::Sha256)),
        (64, Some(HashAlgo::Xxhash)),
        (64, None),
    ];
    for (num_seqs, caching) in variants {
        let hash = caching.map_or("no_caching".to_string(), |a| {
            format!("{a:?}").to_lowercase()
        });
        let mut bed = DecodeBed::new(num_seqs, caching);
        let timing = common::time_custom(|iters| {
            let mut total = Duration::ZERO;
            let mut left = iters as usize;
            while left > 0 {
                if bed.steps_left == 0 {
                    bed.refill();
                }
                let n = left.min(bed.steps_left).min(STEPS_PER_ROUND);
                let start = Instant::now();
                for _ in 0..n {
                    black_box(bed.engine.step().expect("step"));
                }
                total += start.elapsed();
                left -= n;
                bed.steps_left -= n;
            }
            total
        });
        common::report(&format!("decode_step/{hash}/{num_seqs}"), &timing, None);
    }
}

fn closed_loop_64() {
    for algo in [HashAlgo::Sha256, HashAlgo::Xxhash] {
        let config = EngineConfig {
            num_gpu_blocks: Some(64 * 26 + 1),
            prefix_caching_hash_algo: algo,
            ..EngineConfig::default()
        };
        let runner = FixedTokenRunner::new(0, 151_936);
        let mut engine = EngineCore::new(config, runner).expect("valid config");
        let mut next_id = 0u64;
        let mut submit = |engine: &mut EngineCore<FixedTokenRunner>| {
            let prompt = (0..256u32)
                .map(|t| t.wrapping_mul(7919).wrapping_add(next_id as u32 * 131))
                .collect();
            let request = Request::new(next_id, prompt, 128);
            engine.add_request(request).expect("valid request");
            next_id += 1;
        };
        for _ in 0..64 {
            submit(&mut engine);
        }
        let timing = common::time(|| {
            let outcome = engine.step().expect("step");
            for _ in &outcome.finished {
                submit(&mut engine);
            }
            black_box(outcome);
        });
        let name = format!("closed_loop_64/{algo:?}").to_lowercase();
        common::report(&name, &timing, None);
    }
}

fn prefix_lookup() {
    let prompt: Vec<u32> = (0..3_200u32)
        .map(|t| t.wrapping_mul(2_654_435_761) % 151_936)
        .collect();
    for (name, algo) in [("sha256", HashAlgo::Sha256), ("xxhash", HashAlgo::Xxhash)] {
        let mut kv = KvCacheManager::new(1_000, 16, true, algo);
        let mut writer = SeqBlocks::default();
        assert!(kv.allocate_slots(&mut writer, &prompt, None, 0, prompt.len(), &[]));
        let mut hits = Vec::with_capacity(200);
        let cached = kv.computed_blocks(&mut SeqBlocks::default(), &prompt, None, &mut hits);
        assert_eq!(cached, 199 * 16, "the lookup must find the cached prefix");
        let timing = common::time(|| {
            let mut reader = SeqBlocks::default();
            hits.clear();
            black_box(kv.computed_blocks(&mut reader, black_box(&prompt), None, &mut hits));
        });
        common::report(&format!("prefix_lookup/{name}"), &timing, None);
    }
}

fn main() {
    decode_step();
    closed_loop_64();
    prefix_lookup();
}
