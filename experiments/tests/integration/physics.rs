//! The physics each experiment exists to show, checked in sim mode with small settings.

use crate::common;

use common::{evaluate_sim, values};

#[test]
fn throughput_grows_with_concurrency_only_with_continuous_batching() {
    let e = evaluate_sim(
        "cb_sweep",
        &[
            "concurrency=1,8",
            "prompt_tokens=64",
            "output_tokens=16",
            "batches=2",
        ],
        1,
    );
    let t = &e.report.summary;
    let serial = values(t, "max_num_seqs", "1", "throughput_tok_s");
    let batched = values(t, "max_num_seqs", "256", "throughput_tok_s");
    assert_eq!((serial.len(), batched.len()), (2, 2));
    assert!(
        serial[1] < serial[0] * 1.2,
        "max_num_seqs=1 should not scale: {serial:?}"
    );
    assert!(
        batched[1] > batched[0] * 3.0,
        "max_num_seqs=256 should scale: {batched:?}"
    );
}

#[test]
fn decode_stall_grows_with_chunk_size() {
    let e = evaluate_sim(
        "chunk_sweep",
        &["part=stall", "decode_tokens=400", "long_prompts=3"],
        2,
    );
    let t = &e.report.summary;
    let stalls: Vec<f64> = ["512", "1024", "2048", "off"]
        .iter()
        .map(|c| values(t, "chunk_tokens", c, "max_stall_ms")[0])
        .collect();
    assert!(
        stalls.windows(2).all(|w| w[0] < w[1]),
        "stall must grow with the chunk: {stalls:?}"
    );
    let ttft_512 = values(t, "chunk_tokens", "512", "interleaved_ttft_ms")[0];
    assert!(
        ttft_512 > stalls[0],
        "a chunked long prompt takes several steps"
    );
}

#[test]
fn warm_requests_are_faster_only_with_prefix_caching() {
    let e = evaluate_sim(
        "prefix_cache",
        &[
            "rounds=2",
            "warm_requests=2",
            "prefix_tokens=1000",
            "unique_tokens=32",
        ],
        3,
    );
    let t = &e.report.summary;
    let block = 16.0;
    for (cold, warm) in values(t, "caching", "on", "cold_ttft_ms")
        .iter()
        .zip(values(t, "caching", "on", "warm_ttft_ms"))
    {
        assert!(warm < cold * 0.5, "caching on: warm {warm} vs cold {cold}");
    }
    for cached in values(t, "caching", "on", "warm_cached_tokens") {
        assert!(
            cached > 0.0 && cached % block == 0.0,
            "cached tokens {cached} not whole blocks"
        );
        assert!(cached <= 1000.0);
    }
    for (cold, warm) in values(t, "caching", "off", "cold_ttft_ms")
        .iter()
        .zip(values(t, "caching", "off", "warm_ttft_ms"))
    {
        assert!(
            (warm - cold).abs() < cold * 0.1,
            "caching off: warm {warm} vs cold {cold}"
        );
    }
    assert!(values(t, "caching", "off", "warm_cached_tokens")
        .iter()
        .all(|c| *c == 0.0));
}

#[test]
fn no_tokens_are_shared_across_salts() {
    let e = evaluate_sim("salt_isolation", &["rounds=2", "prefix_tokens=640"], 4);
    let t = &e.report.summary;
    for cached in values(t, "case", "same_salt", "cached_tokens") {
        assert!(
            cached >= 624.0 && cached % 16.0 == 0.0,
            "same salt reuses whole blocks: {cached}"
        );
    }
    for case in ["different_salt", "none_after_salted", "salted_after_none"] {
        let cached = values(t, "case", case, "cached_tokens");
        assert!(cached.iter().all(|c| *c == 0.0), "{case}: {cached:?}");
        let ttft = values(t, "case", case, "ttft_ms");
        let cold = values(t, "case", case, "cold_ttft_ms");
        for (a, c) in ttft.iter().zip(&cold) {
            assert!(
                (a - c).abs() < c * 0.25,
                "{case}: reader {a} ms should be like cold {c} ms"
            );
        }
    }
}

#[test]
fn timing_attack_works_on_a_shared_cache_and_fails_with_salts() {
    let e = evaluate_sim("timing_leak", &["trials=120"], 5);
    let t = &e.report.summary;
    let shared = values(t, "policy", "shared", "attacker_accuracy")[0];
    let salted = values(t, "policy", "per_tenant_salt", "attacker_accuracy")[0];
    assert!(shared > 0.9, "shared cache should leak: {shared}");
    assert!(
        (0.3..0.7).contains(&salted),
        "salts should leak nothing: {salted}"
    );
    let hit = values(t, "policy", "shared", "hit_probe_cached_tokens")[0];
    assert!(
        hit >= 2032.0,
        "the probe reuses the victim's document: {hit}"
    );
    assert_eq!(
        values(t, "policy", "per_tenant_salt", "hit_probe_cached_tokens")[0],
        0.0
    );
}
