//! `add_request_hashed`: a prompt's block hashes computed elsewhere change
//! nothing but the time. Hashes of this engine's rule are taken; hashes of
//! another rule (algorithm, block size) or too many for the prompt are
//! ignored, so even wrong ones cannot change a run.

use crate::common::*;
use engine::kv_cache::hashing::{extend_block_hashes, BlockHash};
use engine::kv_cache::PromptHashes;
use engine::{HashAlgo, Request};

fn hashes_of(algo: HashAlgo, block_size: usize, request: &Request) -> PromptHashes {
    let tokens = &request.prompt_token_ids;
    let blocks = (tokens.len() - 1) / block_size;
    let mut hashes = Vec::new();
    let salt = request.cache_salt.as_deref();
    extend_block_hashes(algo, block_size, tokens, salt, &mut hashes, blocks);
    PromptHashes {
        algo,
        block_size,
        hashes,
    }
}

/// Two rounds over one shared prefix, so the second round hits the cache.
fn requests() -> Vec<Request> {
    (0..6)
        .map(|i| {
            let mut p = prompt(0, 24);
            p.extend(prompt(100 + 10 * i, 5));
            let r = req(u64::from(i), p, 3);
            if i % 3 == 2 {
                r.with_salt("other")
            } else {
                r
            }
        })
        .collect()
}

fn outcomes(hashes: impl Fn(&Request) -> Option<PromptHashes>) -> String {
    let mut e = engine(small_config());
    let mut all = Vec::new();
    for round in requests().chunks(3) {
        for r in round {
            match hashes(r) {
                Some(h) => e.add_request_hashed(r.clone(), &h).unwrap(),
                None => e.add_request(r.clone()).unwrap(),
            }
        }
        all.extend(run_to_idle(&mut e, 100));
    }
    format!("{all:?} {:?}", e.prefix_cache_stats())
}

/// The (queried, hit) prompt tokens `outcomes` ends with.
fn stats_of(outcomes: &str) -> (u64, u64) {
    let tail = outcomes.rsplit_once(" (").expect("stats").1;
    let (q, h) = tail.trim_end_matches(')').split_once(", ").expect("pair");
    (q.parse().expect("queried"), h.parse().expect("hit"))
}

#[test]
fn given_hashes_change_nothing_and_wrong_rules_are_ignored() {
    let plain = outcomes(|_| None);
    let (queried, hit) = stats_of(&plain);
    assert!(
        hit > 0 && hit < queried,
        "the second round hits the cache: {plain}"
    );
    let algo = small_config().prefix_caching_hash_algo;
    assert_eq!(outcomes(|r| Some(hashes_of(algo, 4, r))), plain);
    let other = match algo {
        HashAlgo::Sha256 => HashAlgo::Xxhash,
        HashAlgo::Xxhash => HashAlgo::Sha256,
    };
    assert_eq!(outcomes(|r| Some(hashes_of(other, 4, r))), plain);
    assert_eq!(outcomes(|r| Some(hashes_of(algo, 8, r))), plain);
    let too_many = |r: &Request| {
        let mut h = hashes_of(algo, 4, r);
        h.hashes
            .resize(r.prompt_token_ids.len() / 4 + 1, BlockHash([7; 32]));
        Some(h)
    };
    assert_eq!(outcomes(too_many), plain);
}
