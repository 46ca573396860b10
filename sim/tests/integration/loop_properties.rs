//! Invariants of the event loop over random workloads, including a KV cache
//! small enough to force preemptions.

use crate::common;

use common::roofline;
use engine::{EngineConfig, EngineCore, HashAlgo, Request};
use proptest::prelude::*;
use sim::workload::{ScriptEntry, Scripted, Trigger};
use sim::{run, SimRunner, VirtualClock};
use std::sync::Arc;

fn small_engine(num_gpu_blocks: usize) -> EngineCore<SimRunner> {
    let config = EngineConfig {
        max_num_seqs: 8,
        max_num_batched_tokens: 64,
        max_model_len: 256,
        num_gpu_blocks: Some(num_gpu_blocks),
        prefix_caching_hash_algo: HashAlgo::Xxhash,
        ..EngineConfig::default()
    };
    EngineCore::new(config, SimRunner::new(Arc::new(roofline()), num_gpu_blocks)).unwrap()
}

/// (arrival, prompt length, output tokens, shares the common prefix)
fn requests() -> impl Strategy<Value = Vec<(f64, usize, usize, bool)>> {
    prop::collection::vec(
        (0.0..0.05f64, 1..200usize, 1..56usize, any::<bool>()),
        1..40,
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]

    #[test]
    fn every_request_finishes_in_order_and_steps_never_overlap(
        reqs in requests(),
        blocks in 18..80usize,
    ) {
        let common: Vec<u32> = (1000..1200).collect();
        let entries: Vec<ScriptEntry> = reqs
            .iter()
            .enumerate()
            .map(|(i, &(t, prompt, output, shared))| {
                let tokens: Vec<u32> = if shared {
                    common[..prompt].to_vec()
                } else {
                    (0..prompt as u32).map(|k| k + 10_000 * (i as u32 + 1)).collect()
                };
                let request = Request::new(i as u64, tokens, output);
                ScriptEntry::new(request, "p", Trigger::At(t))
            })
            .collect();
        let mut engines = vec![small_engine(blocks)];
        let records = run(&mut engines, &mut VirtualClock::new(), &mut Scripted::new(entries).unwrap()).unwrap();

        prop_assert_eq!(records.requests.len(), reqs.len());
        for r in &records.requests {
            prop_assert_eq!(r.output_tokens(), r.max_tokens);
            prop_assert_eq!(r.finish_reason.as_str(), "length");
            prop_assert!(r.token_times_s[0] > r.arrival_s);
            prop_assert!(r.token_times_s.windows(2).all(|w| w[1] > w[0]));
            prop_assert!(r.cached_tokens < r.prompt_tokens);
            prop_assert_eq!(r.cached_tokens % 16, 0);
        }
        for w in records.steps.windows(2) {
            prop_assert!(w[1].start_s >= w[0].start_s + w[0].duration_s);
        }
        for s in &records.steps {
            prop_assert!(s.scheduled_tokens <= 64 && s.prefill_seqs + s.decode_seqs <= 8);
            prop_assert!(s.kv_blocks_used < blocks);
            prop_assert!(s.duration_s > 0.0);
        }
        // Counters count first admissions only, as the records do.
        let prompts: usize = records.requests.iter().map(|r| r.prompt_tokens).sum();
        let cached: usize = records.requests.iter().map(|r| r.cached_tokens).sum();
        prop_assert_eq!(records.prefix_cache_queries, prompts as u64);
        prop_assert_eq!(records.prefix_cache_hits, cached as u64);
        // Without preemption every position but the cached ones and the last
        // output is computed exactly once.
        let preemptions: usize = records.requests.iter().map(|r| r.preemptions).sum();
        if preemptions == 0 {
            let scheduled: usize = records.steps.iter().map(|s| s.scheduled_tokens).sum();
            let once: usize = records
                .requests
                .iter()
                .map(|r| r.prompt_tokens + r.max_tokens - 1 - r.cached_tokens)
                .sum();
            prop_assert_eq!(scheduled, once);
        }
    }
}
