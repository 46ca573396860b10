//! Prefill/decode disaggregation: every request finishes exactly once
//! across both pools, a lone request takes exactly the cost model's prefill
//! and decode steps plus the link's `latency + bytes / bandwidth`, and bad
//! settings are refused.

use crate::common::roofline;
use engine::{BatchShape, EngineConfig, EngineCore, HashAlgo, Request, SeqShape};
use proptest::prelude::*;
use sim::cluster::{
    run_disaggregated, ClusterError, DisaggConfig, DisaggFleet, DisaggRun, KvLink,
    LeastOutstanding, Pool, PrefixCacheAware, RoundRobin, Router,
};
use sim::workload::{ScriptEntry, Scripted, Trigger};
use sim::{
    run, Arrival, CostModel, ModelShape, RunError, RunOptions, SimRunner, VirtualClock, Workload,
};
use std::collections::HashMap;
use std::sync::Arc;

fn engine(num_gpu_blocks: usize) -> EngineCore<SimRunner> {
    let config = EngineConfig {
        num_gpu_blocks: Some(num_gpu_blocks),
        max_model_len: (num_gpu_blocks.saturating_sub(1) * 16).min(4096),
        prefix_caching_hash_algo: HashAlgo::Xxhash,
        ..EngineConfig::default()
    };
    EngineCore::new(config, SimRunner::new(Arc::new(roofline()), num_gpu_blocks))
        .expect("valid engine")
}

fn engines(n: usize, blocks: usize) -> Vec<EngineCore<SimRunner>> {
    (0..n).map(|_| engine(blocks)).collect()
}

fn qwen_link(bandwidth: f64, latency: f64) -> DisaggConfig {
    let link = KvLink::new(bandwidth, latency).expect("valid link");
    DisaggConfig::for_model(link, &ModelShape::qwen3_0_6b())
}

fn disagg(
    prefill: usize,
    decode: usize,
    blocks: usize,
    config: &DisaggConfig,
    workload: &mut dyn Workload,
    routers: (&mut dyn Router, &mut dyn Router),
) -> Result<DisaggRun, RunError> {
    let (mut p, mut d) = (engines(prefill, blocks), engines(decode, blocks));
    let fleet = DisaggFleet {
        prefill: &mut p,
        decode: &mut d,
        prefill_router: routers.0,
        decode_router: routers.1,
    };
    let options = RunOptions::default();
    run_disaggregated(fleet, &mut VirtualClock::new(), workload, config, &options)
}

fn at_zero(requests: Vec<Request>) -> Scripted {
    let entries = requests
        .into_iter()
        .map(|r| ScriptEntry::new(r, "r", Trigger::At(0.0)))
        .collect();
    Scripted::new(entries).expect("script")
}

/// Counts the finishes the loop reports to the workload.
struct Counting {
    inner: Scripted,
    finishes: HashMap<u64, usize>,
}

impl Workload for Counting {
    fn initial(&mut self) -> Vec<Arrival> {
        self.inner.initial()
    }
    fn on_finish(&mut self, id: u64, now: f64) -> Vec<Arrival> {
        *self.finishes.entry(id).or_default() += 1;
        self.inner.on_finish(id, now)
    }
}

fn step(seqs: &[(u32, u32)]) -> BatchShape {
    BatchShape {
        seqs: seqs
            .iter()
            .map(|&(new_tokens, context_before)| SeqShape {
                new_tokens,
                context_before,
                samples: true,
            })
            .collect(),
    }
}

const PROMPT: usize = 1000;
const OUTPUTS: usize = 8;

/// One request alone: TTFT is its prefill step, each later token one decode
/// step, by hand from the cost model; the link adds `transfer` before the
/// first decode.
fn expected_times(transfer: f64) -> Vec<f64> {
    let cost = roofline();
    let mut t = cost.step_seconds(&step(&[(PROMPT as u32, 0)]));
    let mut times = vec![t];
    t += transfer;
    for k in 1..OUTPUTS {
        t += cost.step_seconds(&step(&[(1, (PROMPT + k - 1) as u32)]));
        times.push(t);
    }
    times
}

fn lone_request() -> Scripted {
    at_zero(vec![Request::new(0, (0..PROMPT as u32).collect(), OUTPUTS)])
}

fn lone_run(config: &DisaggConfig) -> DisaggRun {
    let routers = (
        &mut RoundRobin::default() as &mut dyn Router,
        &mut LeastOutstanding as _,
    );
    disagg(1, 1, 400, config, &mut lone_request(), routers).expect("run")
}

#[test]
fn a_lone_request_over_an_instant_link_takes_its_prefill_and_decode_steps() {
    let config = DisaggConfig::for_model(KvLink::instant(), &ModelShape::qwen3_0_6b());
    let out = lone_run(&config);
    let r = &out.records.requests[0];
    let expected = expected_times(0.0);
    assert_eq!(r.token_times_s, expected);
    assert_eq!(r.ttft_s(), Some(expected[0]));
    assert_eq!(r.finish_s, expected.last().copied());
    assert_eq!(r.finish_reason, "length");
    // The same as one engine serving it whole.
    let mut one = engines(1, 400);
    let whole = run(&mut one, &mut VirtualClock::new(), &mut lone_request()).expect("run");
    assert_eq!(whole.requests[0].token_times_s, expected);
    let t = out.transfers[0];
    assert_eq!((t.start_s, t.end_s), (expected[0], expected[0]));
}

#[test]
fn a_finite_link_adds_exactly_latency_plus_bytes_over_bandwidth() {
    let config = qwen_link(25e9, 2e-4);
    let bytes = (PROMPT * 2 * 28 * 8 * 128 * 2) as u64;
    assert_eq!(config.kv_bytes_per_token, 114_688);
    let transfer = 2e-4 + bytes as f64 / 25e9;
    let run = lone_run(&config);
    let r = &run.records.requests[0];
    assert_eq!(r.token_times_s, expected_times(transfer));
    let instant = expected_times(0.0);
    assert_eq!(r.ttft_s(), Some(instant[0]), "TTFT is the prefill's");
    for (slow, fast) in r.token_times_s[1..].iter().zip(&instant[1..]) {
        assert!((slow - fast - transfer).abs() < 1e-12, "{slow} {fast}");
    }
    let t = run.transfers[0];
    assert_eq!((t.id, t.prefill, t.bytes), (0, 0, bytes));
    assert_eq!((t.start_s, t.end_s), (instant[0], instant[0] + transfer));
    // The decode replica saw the request arrive with its K/V.
    let decode = run.replica(Pool::Decode, 0).expect("decode replica");
    let on_decode = &decode.requests[0];
    assert_eq!(on_decode.arrival_s, t.end_s);
    assert_eq!(on_decode.max_tokens, OUTPUTS - 1);
    assert_eq!(on_decode.token_times_s, r.token_times_s[1..]);
    assert!(decode.steps.iter().all(|s| s.prefill_tokens == 0));
    let prefill = run.replica(Pool::Prefill, 0).expect("prefill replica");
    assert_eq!(prefill.requests[0].token_times_s, r.token_times_s[..1]);
    assert_eq!(prefill.steps.len(), 1);
    assert!(run.replica(Pool::Prefill, 1).is_none());
}

#[test]
fn one_link_per_prefill_replica_sends_one_transfer_at_a_time() {
    let config = qwen_link(10e9, 1e-3);
    let prompt = |first: u32| (first..first + 500).collect::<Vec<u32>>();
    let mut script = at_zero(vec![
        Request::new(0, prompt(0), 4),
        Request::new(1, prompt(10_000), 4),
    ]);
    let routers = (
        &mut RoundRobin::default() as &mut dyn Router,
        &mut LeastOutstanding as _,
    );
    let run = disagg(1, 2, 400, &config, &mut script, routers).expect("run");
    // Both prefills share one step, then queue on the one link.
    let [a, b] = [run.transfers[0], run.transfers[1]];
    assert_eq!(b.start_s, a.end_s);
    assert_eq!(run.records.requests[0].token_times_s[0], a.start_s);
    let decoded: Vec<_> = run.placement.iter().map(|p| p.decode).collect();
    assert_eq!(decoded, vec![Some(0), Some(0)], "the first had finished");
}

#[test]
fn a_one_token_request_finishes_on_its_prefill_replica() {
    let config = qwen_link(10e9, 1e-3);
    let mut script = at_zero(vec![Request::new(0, vec![1, 2, 3], 1)]);
    let routers = (
        &mut RoundRobin::default() as &mut dyn Router,
        &mut LeastOutstanding as _,
    );
    let run = disagg(2, 2, 400, &config, &mut script, routers).expect("run");
    assert!(run.transfers.is_empty());
    assert_eq!(run.placement[0].decode, None);
    let r = &run.records.requests[0];
    assert_eq!(r.finish_s, r.token_times_s.first().copied());
}

#[test]
fn empty_pools_and_bad_links_are_refused() {
    let config = qwen_link(10e9, 0.0);
    for (p, d, pool) in [(0, 1, "prefill"), (1, 0, "decode")] {
        let routers = (
            &mut RoundRobin::default() as &mut dyn Router,
            &mut LeastOutstanding as _,
        );
        let err = disagg(p, d, 400, &config, &mut lone_request(), routers).expect_err("empty");
        assert!(matches!(err, RunError::EmptyPool { pool: named } if named == pool));
        assert!(err.to_string().contains(pool), "{err}");
    }
    assert_eq!(
        KvLink::new(0.0, 0.0),
        Err(ClusterError::BadLinkBandwidth(0.0))
    );
    assert_eq!(
        KvLink::new(-5.0, 0.0),
        Err(ClusterError::BadLinkBandwidth(-5.0))
    );
    assert!(matches!(
        KvLink::new(f64::NAN, 0.0),
        Err(ClusterError::BadLinkBandwidth(_))
    ));
    assert_eq!(
        KvLink::new(1e9, -1.0),
        Err(ClusterError::BadLinkLatency(-1.0))
    );
    assert!(
        KvLink::new(f64::INFINITY, 0.0).is_ok(),
        "an instant link, said explicitly"
    );
}

/// (arrival, prompt length, output tokens, shares the common prefix, waits
/// for the previous request to finish)
fn requests() -> impl Strategy<Value = Vec<(f64, usize, usize, bool, bool)>> {
    prop::collection::vec(
        (
            0.0..0.05f64,
            1..200usize,
            1..24usize,
            any::<bool>(),
            any::<bool>(),
        ),
        1..30,
    )
}

fn script(reqs: &[(f64, usize, usize, bool, bool)]) -> Counting {
    let common: Vec<u32> = (1000..1200).collect();
    let entries = reqs
        .iter()
        .enumerate()
        .map(|(i, &(t, prompt, output, shared, after))| {
            let tokens: Vec<u32> = if shared {
                common[..prompt].to_vec()
            } else {
                (0..prompt as u32)
                    .map(|k| k + 10_000 * (i as u32 + 1))
                    .collect()
            };
            let trigger = match i {
                i if i > 0 && after => Trigger::AfterFinish {
                    id: i as u64 - 1,
                    delay_s: 1e-3,
                },
                _ => Trigger::At(t),
            };
            ScriptEntry::new(Request::new(i as u64, tokens, output), "t", trigger)
        })
        .collect();
    Counting {
        inner: Scripted::new(entries).expect("script"),
        finishes: HashMap::new(),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(16))]

    #[test]
    fn every_request_finishes_exactly_once_across_the_fleet(
        reqs in requests(),
        prefill in 1..=3usize,
        decode in 1..=3usize,
        prefix_aware in any::<bool>(),
    ) {
        let config = qwen_link(5e9, 1e-4);
        let mut workload = script(&reqs);
        let mut round_robin = RoundRobin::default();
        let mut aware = PrefixCacheAware::new(64.0).expect("valid weight");
        let prefill_router: &mut dyn Router =
            if prefix_aware { &mut aware } else { &mut round_robin };
        let routers = (prefill_router, &mut LeastOutstanding as &mut dyn Router);
        let run = disagg(prefill, decode, 64, &config, &mut workload, routers).expect("run");
        let n = reqs.len();
        let mut ids: Vec<u64> = run.records.requests.iter().map(|r| r.id).collect();
        ids.sort_unstable();
        prop_assert_eq!(ids, (0..n as u64).collect::<Vec<_>>());
        prop_assert!(workload.finishes.values().all(|&c| c == 1));
        prop_assert_eq!(workload.finishes.len(), n);
        for (r, p) in run.records.requests.iter().zip(&run.placement) {
            prop_assert!(r.is_finished());
            prop_assert_eq!(r.output_tokens(), r.max_tokens);
            prop_assert!(p.prefill < prefill);
            prop_assert_eq!(p.decode.is_some(), r.max_tokens > 1);
            prop_assert!(p.decode.is_none_or(|d| d < decode));
        }
        let multi = run.records.requests.iter().filter(|r| r.max_tokens > 1).count();
        prop_assert_eq!(run.transfers.len(), multi);
        let served = |pool, size| -> usize {
            (0..size).map(|i| run.replica(pool, i).map_or(0, |r| r.requests.len())).sum()
        };
        prop_assert_eq!(served(Pool::Prefill, prefill), n);
        prop_assert_eq!(served(Pool::Decode, decode), multi);
        // Each prefill replica's link carries one transfer at a time.
        for p in 0..prefill {
            let mine: Vec<_> = run.transfers.iter().filter(|t| t.prefill == p).collect();
            for w in mine.windows(2) {
                prop_assert!(w[1].start_s >= w[0].end_s);
            }
        }
        let steps: usize = (0..prefill).map(|i| run.replica(Pool::Prefill, i).map_or(0, |r| r.steps.len())).sum::<usize>()
            + (0..decode).map(|i| run.replica(Pool::Decode, i).map_or(0, |r| r.steps.len())).sum::<usize>();
        prop_assert_eq!(steps, run.records.steps.len());
    }
}
