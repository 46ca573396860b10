//! Routing over a fleet: one replica reproduces the single-engine run, every
//! request finishes exactly once, routers are deterministic, and
//! prefix-cache-aware routing beats round-robin on a shared-prefix,
//! multi-tenant workload.

use crate::common::{self, roofline};
use engine::{EngineConfig, EngineCore, HashAlgo, Request};
use proptest::prelude::*;
use sim::cluster::{
    cached_prefix_tokens, AffinityKey, ClusterError, ConversationAffinity, Fleet, LeastKvUsage,
    LeastOutstanding, PrefixCacheAware, ReplicaState, RoundRobin, Router,
};
use sim::records::{median, write_requests_csv};
use sim::workload::{
    ArrivalProcess, OpenLoop, OpenLoopConfig, PromptLayout, PromptSource, RequestMaker,
    ScriptEntry, Scripted, Tenants, Trigger,
};
use sim::{
    run, run_routed, Arrival, RoutedRun, RunError, RunOptions, SimRunner, VirtualClock, Workload,
};
use std::sync::Arc;

const ROUTERS: [&str; 6] = [
    "round-robin",
    "least-outstanding",
    "least-kv",
    "prefix-aware",
    "affinity-salt",
    "affinity-tag",
];

fn router(name: &str) -> Box<dyn Router> {
    match name {
        "round-robin" => Box::new(RoundRobin::default()),
        "least-outstanding" => Box::new(LeastOutstanding),
        "least-kv" => Box::new(LeastKvUsage),
        "prefix-aware" => Box::new(PrefixCacheAware::new(64.0).expect("valid weight")),
        "affinity-salt" => Box::new(ConversationAffinity::new(AffinityKey::Salt)),
        "affinity-tag" => Box::new(ConversationAffinity::new(AffinityKey::Tag)),
        other => panic!("no router {other}"),
    }
}

fn engine_with_blocks(num_gpu_blocks: usize) -> EngineCore<SimRunner> {
    let config = EngineConfig {
        num_gpu_blocks: Some(num_gpu_blocks),
        // The pool must hold one request of the longest length.
        max_model_len: (num_gpu_blocks.saturating_sub(1) * 16).min(4096),
        prefix_caching_hash_algo: HashAlgo::Xxhash,
        ..EngineConfig::default()
    };
    EngineCore::new(config, SimRunner::new(Arc::new(roofline()), num_gpu_blocks))
        .expect("valid engine")
}

/// Shared-prefix prompts spread over salted tenants, Poisson arrivals.
fn multi_tenant(requests: usize, rate_per_s: f64, seed: u64) -> OpenLoop {
    let layout = PromptLayout::SharedPrefix {
        groups: 5,
        prefix_tokens: 2048,
        unique_tokens: 64,
    };
    let maker = RequestMaker::new(PromptSource::default(), layout, 16, seed)
        .expect("valid maker")
        .with_tenants(Tenants {
            tenants: 3,
            salted: true,
        })
        .expect("valid tenants");
    let config = OpenLoopConfig::new(ArrivalProcess::Poisson { rate_per_s }, requests, seed);
    OpenLoop::new(config, maker).expect("valid workload")
}

fn routed(replicas: usize, blocks: usize, name: &str, workload: &mut dyn Workload) -> RoutedRun {
    let mut engines: Vec<_> = (0..replicas).map(|_| engine_with_blocks(blocks)).collect();
    run_routed(
        &mut engines,
        &mut VirtualClock::new(),
        workload,
        router(name).as_mut(),
        &RunOptions::default(),
    )
    .expect("routed run")
}

fn csv_of(records: &sim::RunRecords) -> Vec<u8> {
    let mut out = Vec::new();
    write_requests_csv(&mut out, &records.requests).expect("csv");
    out
}

#[test]
fn one_replica_reproduces_the_single_engine_run_for_every_router() {
    let mut engines = vec![common::sim_engine(common::config())];
    let plain = run(
        &mut engines,
        &mut VirtualClock::new(),
        &mut multi_tenant(60, 40.0, 1),
    )
    .expect("plain run");
    for name in ROUTERS {
        let mut engines = vec![common::sim_engine(common::config())];
        let run = run_routed(
            &mut engines,
            &mut VirtualClock::new(),
            &mut multi_tenant(60, 40.0, 1),
            router(name).as_mut(),
            &RunOptions::default(),
        )
        .expect("routed run");
        assert_eq!(run.records, plain, "{name}");
        assert_eq!(csv_of(&run.records), csv_of(&plain), "{name}");
        assert!(run.replica_of.iter().all(|&r| r == 0), "{name}");
    }
}

#[test]
fn routers_are_deterministic() {
    for name in ROUTERS {
        let a = routed(4, 4000, name, &mut multi_tenant(80, 200.0, 3));
        let b = routed(4, 4000, name, &mut multi_tenant(80, 200.0, 3));
        assert_eq!(a, b, "{name}");
        assert!(
            a.replica_of.iter().any(|&r| r != 0),
            "{name} used one replica"
        );
    }
}

#[test]
fn prefix_aware_routing_beats_round_robin_on_hits_and_median_ttft() {
    // 15 (group, tenant) prefixes of 128 blocks; a replica holds about 6 of
    // them, so spreading every prefix over all replicas thrashes the caches.
    let blocks = 800;
    let measure = |name: &str| {
        let run = routed(4, blocks, name, &mut multi_tenant(600, 150.0, 7));
        assert!(run.records.requests.iter().all(|r| r.is_finished()));
        let ttfts: Vec<f64> = run
            .records
            .requests
            .iter()
            .filter_map(|r| r.ttft_s())
            .collect();
        let ttft = median(&ttfts).expect("finished requests");
        (run.records.prefix_cache_hit_rate(), ttft)
    };
    let (rr_hits, rr_ttft) = measure("round-robin");
    let (pa_hits, pa_ttft) = measure("prefix-aware");
    eprintln!("round-robin: hit rate {rr_hits:.3}, median TTFT {rr_ttft:.5} s");
    eprintln!("prefix-aware: hit rate {pa_hits:.3}, median TTFT {pa_ttft:.5} s");
    assert!(pa_hits > rr_hits + 0.1, "{pa_hits} vs {rr_hits}");
    assert!(pa_ttft < rr_ttft, "{pa_ttft} vs {rr_ttft}");
}

#[test]
fn conversation_affinity_keeps_each_tenant_on_one_replica() {
    let run = routed(4, 4000, "affinity-salt", &mut multi_tenant(90, 300.0, 5));
    for tenant in 0..3 {
        let suffix = format!("t{tenant}");
        let replicas: Vec<usize> = run
            .records
            .requests
            .iter()
            .zip(&run.replica_of)
            .filter(|(r, _)| r.tag.ends_with(&suffix))
            .map(|(_, &e)| e)
            .collect();
        assert_eq!(replicas.len(), 30);
        assert!(
            replicas.iter().all(|&e| e == replicas[0]),
            "{suffix}: {replicas:?}"
        );
    }
    // Three tenants met three idle replicas in turn.
    let mut firsts = run.replica_of[..3].to_vec();
    firsts.sort_unstable();
    assert_eq!(firsts, vec![0, 1, 2]);
}

#[test]
fn cached_prefix_query_matches_what_the_engine_reports_on_admission() {
    let prompt: Vec<u32> = (0..100).collect();
    let entries = vec![
        ScriptEntry::new(Request::new(0, prompt.clone(), 2), "a", Trigger::At(0.0)),
        ScriptEntry::new(
            Request::new(1, prompt.clone(), 2).with_salt("other"),
            "b",
            Trigger::At(0.0),
        ),
    ];
    let mut engines = vec![engine_with_blocks(200)];
    run(
        &mut engines,
        &mut VirtualClock::new(),
        &mut Scripted::new(entries).expect("script"),
    )
    .expect("run");
    // 6 full blocks of 16 cached; a salted prompt shares none of them.
    assert_eq!(
        cached_prefix_tokens(&engines[0], &Request::new(2, prompt.clone(), 2)),
        96
    );
    let salted = Request::new(3, prompt.clone(), 2).with_salt("other");
    assert_eq!(cached_prefix_tokens(&engines[0], &salted), 96);
    let stranger = Request::new(4, prompt.clone(), 2).with_salt("stranger");
    assert_eq!(cached_prefix_tokens(&engines[0], &stranger), 0);
    // The whole prompt is cached: the last token is still left to compute,
    // as on admission.
    assert_eq!(
        cached_prefix_tokens(&engines[0], &Request::new(5, prompt[..96].to_vec(), 2)),
        80
    );
    let again = ScriptEntry::new(Request::new(6, prompt, 2), "a", Trigger::At(1.0));
    let records = run(
        &mut engines,
        &mut VirtualClock::new(),
        &mut Scripted::new(vec![again]).expect("script"),
    )
    .expect("second run");
    assert_eq!(records.requests[0].cached_tokens, 96);
}

#[test]
fn prefix_aware_load_weight_must_be_finite_and_non_negative() {
    for bad in [-1.0, f64::NAN, f64::INFINITY] {
        let err = PrefixCacheAware::new(bad).expect_err("rejected");
        assert!(matches!(err, ClusterError::BadLoadWeight(_)));
        assert!(err.to_string().contains("lambda"), "{err}");
    }
    assert!(PrefixCacheAware::new(0.0).is_ok());
}

/// A fleet whose replica `i` caches `cached[i]` tokens of every request.
struct FixedCache(Vec<usize>);
impl sim::cluster::PrefixLookup for FixedCache {
    fn cached_prefix_tokens(&self, replica: usize, _request: &Request) -> usize {
        self.0[replica]
    }
}

fn fleet(outstanding: &[usize], kv_used: &[usize], cached: &[usize]) -> Fleet<'static> {
    let states = outstanding
        .iter()
        .zip(kv_used)
        .map(|(&waiting, &kv_blocks_used)| ReplicaState {
            running: 0,
            waiting,
            kv_blocks_used,
            kv_blocks_total: 100,
        })
        .collect();
    Fleet::new(states, Box::new(FixedCache(cached.to_vec())))
}

#[test]
fn routers_pick_by_their_rule_with_ties_to_the_lowest_index() {
    let arrival = Arrival {
        request: Request::new(0, vec![1; 64], 1),
        engine: 3,
        tag: String::new(),
    };
    let f = fleet(&[2, 1, 1, 5], &[10, 30, 5, 5], &[0, 32, 64, 640]);
    let mut rr = RoundRobin::default();
    let picks: Vec<usize> = (0..5).map(|_| rr.route(&arrival, &f)).collect();
    assert_eq!(picks, vec![0, 1, 2, 3, 0]);
    assert_eq!(LeastOutstanding.route(&arrival, &f), 1);
    // Replicas 2 and 3 use 5 % of their blocks; 2 has fewer requests.
    assert_eq!(LeastKvUsage.route(&arrival, &f), 2);
    // Scores with lambda 64: 0-128, 32-64, 64-64, 640-320.
    assert_eq!(PrefixCacheAware::new(64.0).unwrap().route(&arrival, &f), 3);
    // Lambda 200: -400, -168, -136, -360.
    assert_eq!(PrefixCacheAware::new(200.0).unwrap().route(&arrival, &f), 2);
    let even = fleet(&[1, 1], &[0, 0], &[16, 16]);
    assert_eq!(
        PrefixCacheAware::new(1.0).unwrap().route(&arrival, &even),
        0
    );
}

#[test]
fn routed_run_refuses_an_empty_fleet() {
    let mut engines: Vec<EngineCore<SimRunner>> = Vec::new();
    let err = run_routed(
        &mut engines,
        &mut VirtualClock::new(),
        &mut multi_tenant(3, 10.0, 0),
        &mut RoundRobin::default(),
        &RunOptions::default(),
    )
    .expect_err("empty fleet");
    assert!(matches!(err, RunError::EmptyFleet));
}

/// (arrival, prompt length, output tokens, shares the common prefix, tenant)
fn requests() -> impl Strategy<Value = Vec<(f64, usize, usize, bool, u8)>> {
    prop::collection::vec(
        (0.0..0.05f64, 1..200usize, 1..24usize, any::<bool>(), 0..3u8),
        1..30,
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(16))]

    #[test]
    fn every_request_finishes_exactly_once_across_the_fleet(
        reqs in requests(),
        replicas in 1..=4usize,
    ) {
        let common: Vec<u32> = (1000..1200).collect();
        let script = || {
            let entries: Vec<ScriptEntry> = reqs
                .iter()
                .enumerate()
                .map(|(i, &(t, prompt, output, shared, tenant))| {
                    let tokens: Vec<u32> = if shared {
                        common[..prompt].to_vec()
                    } else {
                        (0..prompt as u32).map(|k| k + 10_000 * (i as u32 + 1)).collect()
                    };
                    let request = Request::new(i as u64, tokens, output)
                        .with_salt(format!("tenant-{tenant}"));
                    ScriptEntry::new(request, format!("t{tenant}"), Trigger::At(t))
                })
                .collect();
            Scripted::new(entries).expect("script")
        };
        for name in ROUTERS {
            let run = routed(replicas, 64, name, &mut script());
            let mut ids: Vec<u64> = run.records.requests.iter().map(|r| r.id).collect();
            ids.sort_unstable();
            prop_assert_eq!(ids, (0..reqs.len() as u64).collect::<Vec<_>>());
            prop_assert_eq!(run.replica_of.len(), reqs.len());
            prop_assert!(run.replica_of.iter().all(|&r| r < replicas));
            for r in &run.records.requests {
                prop_assert!(r.is_finished());
                prop_assert_eq!(r.output_tokens(), r.max_tokens);
            }
            let decoded: usize = run.records.steps.iter().map(|s| s.scheduled_tokens).sum();
            prop_assert!(decoded > 0);
        }
    }
}

#[test]
fn routing_ignores_the_engine_the_workload_named() {
    let workload = || {
        let maker = RequestMaker::new(
            PromptSource::default(),
            PromptLayout::Unique { tokens: 8 },
            2,
            0,
        )
        .expect("valid maker");
        let mut config = OpenLoopConfig::new(ArrivalProcess::Poisson { rate_per_s: 50.0 }, 12, 0);
        config.num_engines = 8;
        OpenLoop::new(config, maker).expect("valid workload")
    };
    let mut engines = vec![engine_with_blocks(400), engine_with_blocks(400)];
    let err = run(&mut engines, &mut VirtualClock::new(), &mut workload()).expect_err("engine 2");
    assert!(
        matches!(err, RunError::NoSuchEngine { engines: 2, .. }),
        "{err}"
    );
    let run = routed(2, 400, "least-outstanding", &mut workload());
    assert_eq!(run.records.requests.len(), 12);
    assert!(run.replica_of.iter().all(|&r| r < 2));
}

/// A small prefix-aware fleet under cache pressure (15 salted prefixes, 3
/// replicas holding about 3 each): its request and step records and
/// placements, byte for byte as recorded before the routers' prompt hashes
/// were memoised and handed to the engines and before the arrival queue
/// took in-order arrivals aside.
#[test]
fn a_small_prefix_aware_fleet_keeps_its_recorded_records() {
    let mut workload = multi_tenant(90, 60.0, 5);
    let run = routed(3, 400, "prefix-aware", &mut workload);
    let mut text = csv_of(&run.records);
    sim::records::write_steps_csv(&mut text, &run.records.steps).expect("csv");
    let placements: Vec<String> = run.replica_of.iter().map(usize::to_string).collect();
    text.extend_from_slice(format!("{}\n", placements.join(",")).as_bytes());
    let recorded = include_bytes!("../data/golden/prefix_aware_fleet.txt");
    assert!(
        text == recorded,
        "the fleet's records changed (compare with tests/data/golden/prefix_aware_fleet.txt)"
    );
}
