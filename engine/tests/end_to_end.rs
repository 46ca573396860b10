//! Whole-engine runs: requests go in, exactly their outputs come out, and the
//! pool ends empty.

mod common;
use common::*;
use engine::request::FinishReason;

#[test]
fn requests_finish_with_exactly_max_tokens_and_free_all_blocks() {
    let mut e = engine(small_config());
    e.add_request(req(1, prompt(0, 10), 5)).unwrap();
    e.add_request(req(2, prompt(100, 21), 3)).unwrap();
    let outcomes = steps_until_idle(&mut e, 100);
    for (rid, n) in [(1, 5), (2, 3)] {
        let count = outcomes
            .iter()
            .flat_map(|o| &o.tokens)
            .filter(|(r, _)| *r == id(rid))
            .count();
        assert_eq!(count, n);
        let firsts = outcomes
            .iter()
            .flat_map(|o| &o.first_tokens)
            .filter(|r| **r == id(rid))
            .count();
        assert_eq!(firsts, 1);
        let finished: Vec<_> = outcomes
            .iter()
            .flat_map(|o| &o.finished)
            .filter(|(r, _)| *r == id(rid))
            .collect();
        assert_eq!(finished, vec![&(id(rid), FinishReason::Length)]);
    }
    assert_eq!(e.kv_cache().num_used_blocks(), 0);
    assert_eq!(e.num_free_blocks(), 63);
    // Outputs are the runner's tokens for the positions after each prompt.
    let out1: Vec<u32> = outcomes
        .iter()
        .flat_map(|o| &o.tokens)
        .filter(|(r, _)| *r == id(1))
        .map(|t| t.1)
        .collect();
    let expected: Vec<u32> = (10..15).map(|p| e.runner().token_at(p)).collect();
    assert_eq!(out1, expected);
}
