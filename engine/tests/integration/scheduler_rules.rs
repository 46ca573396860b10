//! One test per rule of docs/design.md "What we match in vLLM v1", named
//! after the rule. Block size 4 throughout, so block arithmetic stays small.

use crate::common;
use common::*;
use engine::request::RequestStatus;
use engine::EngineConfig;

fn config(budget: usize, max_model_len: usize, usable_blocks: usize) -> EngineConfig {
    EngineConfig {
        max_num_seqs: 4,
        max_num_batched_tokens: budget,
        max_model_len,
        block_size: 4,
        num_gpu_blocks: Some(usable_blocks + 1),
        ..EngineConfig::default()
    }
}

#[test]
fn computed_tokens_catch_up_with_prompt_and_outputs_without_phases() {
    let mut e = engine(config(16, 64, 40));
    e.add_request(req(1, prompt(0, 6), 3)).unwrap();
    e.step().unwrap();
    e.add_request(req(2, prompt(100, 20), 2)).unwrap();
    e.step().unwrap();
    // One batch mixes a decode of request 1 and a prefill chunk of request 2.
    let shape = &e.runner().last;
    assert_eq!(shape.len(), 2);
    assert_eq!(
        (shape[0].start_pos, shape[0].num_tokens, shape[0].samples),
        (6, 1, true)
    );
    assert_eq!(
        (shape[1].start_pos, shape[1].num_tokens, shape[1].samples),
        (0, 15, false)
    );
    assert_eq!(e.num_computed_tokens(id(1)), Some(7));
    assert_eq!(e.num_computed_tokens(id(2)), Some(15));
    assert_eq!(e.request_tokens(id(1)).unwrap().len(), 8);
}

#[test]
fn running_requests_take_budget_before_waiting_ones() {
    let mut e = engine(config(16, 64, 40));
    e.add_request(req(1, prompt(0, 30), 2)).unwrap();
    e.step().unwrap();
    assert_eq!(tokens_of(&e, 1), 16);
    e.add_request(req(2, prompt(100, 8), 2)).unwrap();
    e.step().unwrap();
    // Request 1 (running) takes its remaining 14 first; request 2 gets what is left.
    assert_eq!(tokens_of(&e, 1), 14);
    assert_eq!(tokens_of(&e, 2), 2);
    assert_eq!(e.runner().last[0].id, id(1));
}

#[test]
fn running_requests_are_served_in_order_until_the_budget_is_spent() {
    let mut e = engine(config(16, 64, 40));
    e.add_request(req(1, prompt(0, 10), 4)).unwrap();
    e.add_request(req(2, prompt(100, 30), 4)).unwrap();
    e.add_request(req(3, prompt(200, 30), 4)).unwrap();
    e.step().unwrap();
    assert_eq!(
        (tokens_of(&e, 1), tokens_of(&e, 2), tokens_of(&e, 3)),
        (10, 6, 0)
    );
    e.step().unwrap();
    // Request 1 decodes, request 2 takes the rest; request 3 (waiting) gets nothing.
    assert_eq!(
        (tokens_of(&e, 1), tokens_of(&e, 2), tokens_of(&e, 3)),
        (1, 15, 0)
    );
    assert_eq!(waiting(&e), vec![3]);
}

#[test]
fn long_prefill_threshold_caps_chunk() {
    let mut e = engine(EngineConfig {
        long_prefill_token_threshold: 8,
        ..config(64, 64, 40)
    });
    e.add_request(req(1, prompt(0, 20), 2)).unwrap();
    e.add_request(req(2, prompt(100, 5), 2)).unwrap();
    e.step().unwrap();
    // Both the running-to-be and the waiting request are capped at 8.
    assert_eq!((tokens_of(&e, 1), tokens_of(&e, 2)), (8, 5));
    e.step().unwrap();
    assert_eq!((tokens_of(&e, 1), tokens_of(&e, 2)), (8, 1));
    e.step().unwrap();
    assert_eq!(tokens_of(&e, 1), 4);
    assert!(scheduled(&e, 1).unwrap().samples);
}

#[test]
fn max_num_seqs_caps_running() {
    let mut e = engine(EngineConfig {
        max_num_seqs: 2,
        ..config(64, 64, 60)
    });
    for n in 1..=5 {
        e.add_request(req(n, prompt(100 * n as u32, 4), 3)).unwrap();
    }
    let first = e.step().unwrap();
    assert_eq!(first.admitted, vec![(id(1), 0), (id(2), 0)]);
    assert_eq!(waiting(&e), vec![3, 4, 5]);
    while e.has_unfinished() {
        e.step().unwrap();
        assert!(e.num_running() <= 2);
    }
}

#[test]
fn chunking_off_admits_only_whole_prompts() {
    let off = EngineConfig {
        enable_chunked_prefill: false,
        ..config(32, 32, 40)
    };
    let mut e = engine(off);
    e.add_request(req(1, prompt(0, 20), 2)).unwrap();
    e.add_request(req(2, prompt(100, 20), 2)).unwrap();
    e.add_request(req(3, prompt(200, 4), 2)).unwrap();
    let first = e.step().unwrap();
    // Request 2 does not fit in the 12 tokens left, and it stops admission:
    // request 3 would fit but waits behind it.
    assert_eq!(first.admitted, vec![(id(1), 0)]);
    assert_eq!(waiting(&e), vec![2, 3]);
    e.step().unwrap();
    assert_eq!(
        (tokens_of(&e, 1), tokens_of(&e, 2), tokens_of(&e, 3)),
        (1, 20, 4)
    );

    // The same workload with chunking on splits request 2.
    let mut on = engine(config(32, 32, 40));
    on.add_request(req(1, prompt(0, 20), 2)).unwrap();
    on.add_request(req(2, prompt(100, 20), 2)).unwrap();
    on.step().unwrap();
    assert_eq!(tokens_of(&on, 2), 12);
}

#[test]
fn head_of_line_blocking_when_no_blocks() {
    let mut e = engine(config(64, 20, 6));
    e.add_request(req(1, prompt(0, 16), 4)).unwrap();
    e.add_request(req(2, prompt(100, 12), 4)).unwrap();
    e.add_request(req(3, prompt(200, 4), 4)).unwrap();
    let first = e.step().unwrap();
    // Request 1 holds 4 of 6 blocks; request 2 needs 3; request 3 would fit in
    // 1 but is not considered.
    assert_eq!(first.admitted, vec![(id(1), 0)]);
    assert_eq!(waiting(&e), vec![2, 3]);
    assert_eq!(e.num_free_blocks(), 2);
}

/// 6 usable blocks, budget 8, caching off: request 1 (4 prompt tokens, 20
/// outputs) and request 2 (16 prompt tokens) fill the pool after 3 steps, and
/// in the 4th request 2, the last running request, preempts itself.
fn running_out_of_blocks() -> Engine {
    let mut e = engine(EngineConfig {
        enable_prefix_caching: false,
        ..config(8, 24, 6)
    });
    e.add_request(req(1, prompt(0, 4), 20)).unwrap();
    e.add_request(req(2, prompt(100, 16), 4)).unwrap();
    e
}

#[test]
fn preemption_evicts_most_recently_admitted_until_it_fits_or_self() {
    // 6 usable blocks, budget 8: request 2 runs out of blocks and, being the
    // last running request, preempts itself.
    let mut e = running_out_of_blocks();
    for _ in 0..3 {
        assert!(e.step().unwrap().preempted.is_empty());
    }
    assert_eq!(e.num_free_blocks(), 0);
    let o = e.step().unwrap();
    assert_eq!(o.preempted, vec![id(2)]);
    assert_eq!(
        tokens_of(&e, 1),
        1,
        "request 1 still decodes in the preempting step"
    );
    assert_eq!(tokens_of(&e, 2), 0);
    assert_eq!(e.request_status(id(2)), Some(RequestStatus::Preempted));
    assert_eq!(e.num_preemptions(id(2)), Some(1));
}

#[test]
fn nothing_is_admitted_in_a_step_that_preempted() {
    // Same setup: after request 2 preempts itself, 4 blocks are free and 7
    // tokens of budget are left, enough for a chunk of request 2, yet nothing
    // is admitted until the next step.
    let mut e = running_out_of_blocks();
    for _ in 0..3 {
        e.step().unwrap();
    }
    let o = e.step().unwrap();
    assert_eq!(o.preempted, vec![id(2)]);
    assert!(o.admitted.is_empty() && o.readmitted.is_empty());
    assert_eq!(e.num_free_blocks(), 4);
    assert_eq!(o.shape.num_tokens(), 1);
    let next = e.step().unwrap();
    assert_eq!(next.readmitted, vec![(id(2), 0)]);
    assert_eq!(tokens_of(&e, 2), 7);
}

#[test]
fn preempted_request_goes_to_front_and_recomputes() {
    let mut e = engine(EngineConfig {
        max_num_seqs: 2,
        enable_prefix_caching: false,
        ..config(64, 24, 6)
    });
    e.add_request(req(1, prompt(0, 8), 16)).unwrap();
    e.add_request(req(2, prompt(100, 8), 8)).unwrap();
    e.add_request(req(3, prompt(200, 4), 2)).unwrap();
    // Steps 1-5: both run (2 + 1 blocks each); step 6: request 1 needs a 4th
    // block and preempts request 2, which goes ahead of request 3.
    for _ in 0..5 {
        assert!(e.step().unwrap().preempted.is_empty());
    }
    let o = e.step().unwrap();
    assert_eq!(o.preempted, vec![id(2)]);
    assert_eq!(waiting(&e), vec![2, 3]);
    assert_eq!(e.num_computed_tokens(id(2)), Some(0));
    assert!(e.block_table(id(2)).unwrap().is_empty());
    let outputs_before = e.request_tokens(id(2)).unwrap().len() - 8;
    assert_eq!(outputs_before, 5);
    let mut outcomes = vec![o];
    while e.has_unfinished() {
        let o = e.step().unwrap();
        if o.readmitted.iter().any(|r| r.0 == id(2)) {
            // Recompute: prompt and earlier outputs, from position 0.
            let seq = scheduled(&e, 2).unwrap();
            assert_eq!(
                (seq.start_pos, seq.num_tokens, seq.samples),
                (0, 8 + outputs_before, true)
            );
        }
        outcomes.push(o);
    }
    assert!(outcomes
        .iter()
        .any(|o| o.readmitted.iter().any(|r| r.0 == id(2))));
    assert_eq!(outputs_of(&outcomes, 2).len(), 8 - outputs_before);
    assert!(
        !outcomes.iter().any(|o| o.first_tokens.contains(&id(2))),
        "first token came before preemption"
    );
}

#[test]
fn preempted_blocks_are_freed_tail_first() {
    let mut e = engine(EngineConfig {
        max_num_seqs: 2,
        enable_prefix_caching: false,
        ..config(64, 24, 6)
    });
    e.add_request(req(1, prompt(0, 8), 16)).unwrap();
    e.add_request(req(2, prompt(100, 8), 8)).unwrap();
    for _ in 0..5 {
        e.step().unwrap();
    }
    let victim_table = e.block_table(id(2)).unwrap().to_vec();
    assert_eq!(victim_table.len(), 3);
    e.step().unwrap();
    // Freed in reverse order, the victim's last block was at the head of the
    // free queue and went to request 1; the rest follow in reverse.
    assert_eq!(e.block_table(id(1)).unwrap().last(), victim_table.last());
    assert_eq!(
        e.kv_cache().pool().free_queue(),
        vec![victim_table[1], victim_table[0]]
    );
}

#[test]
fn last_prompt_token_is_always_computed() {
    for (len, cached) in [(16, 12), (17, 16), (3, 0)] {
        let mut e = engine(config(64, 64, 40));
        e.add_request(req(1, prompt(0, len), 1)).unwrap();
        run_to_idle(&mut e, 10);
        e.add_request(req(2, prompt(0, len), 1)).unwrap();
        let o = e.step().unwrap();
        assert_eq!(o.admitted, vec![(id(2), cached)], "prompt of {len}");
        let seq = scheduled(&e, 2).unwrap();
        assert_eq!((seq.start_pos, seq.num_tokens), (cached, len - cached));
    }
}

#[test]
fn full_blocks_cached_at_schedule_time_hit_in_same_step() {
    let mut e = engine(config(64, 64, 40));
    e.add_request(req(1, prompt(0, 16), 2)).unwrap();
    e.add_request(req(2, prompt(0, 18), 2)).unwrap();
    let o = e.step().unwrap();
    // Request 1's 4 blocks were cached when scheduled; request 2, admitted
    // after it in the same step, reads them before they are written.
    assert_eq!(o.admitted, vec![(id(1), 0), (id(2), 16)]);
    let (t1, t2) = (e.block_table(id(1)).unwrap(), e.block_table(id(2)).unwrap());
    assert_eq!(t1[..4], t2[..4]);
    assert!(t1.iter().all(|&b| e.kv_cache().ref_count(b) == 2));
    assert_eq!(e.kv_cache().ref_count(t2[4]), 1);
}

#[test]
fn full_blocks_of_output_tokens_are_cached() {
    let mut e = engine(config(64, 64, 40));
    e.add_request(req(1, prompt(0, 6), 6)).unwrap();
    let outcomes = run_to_idle(&mut e, 20);
    // Prompt + 6 outputs = 12 tokens; the last output is never computed, so
    // blocks 0 and 1 (positions 0..8, two of them outputs) are cached.
    let mut reused = prompt(0, 6);
    reused.extend(outputs_of(&outcomes, 1));
    reused.push(7);
    e.add_request(req(2, reused, 1)).unwrap();
    assert_eq!(e.step().unwrap().admitted, vec![(id(2), 8)]);
}

#[test]
fn hit_counters_count_tokens_not_preempted() {
    let mut e = engine(config(64, 64, 40));
    e.add_request(req(1, prompt(0, 16), 1)).unwrap();
    e.add_request(req(2, prompt(0, 18), 1)).unwrap();
    e.add_request(req(3, prompt(500, 5), 1)).unwrap();
    run_to_idle(&mut e, 10);
    assert_eq!(e.prefix_cache_stats(), (16 + 18 + 5, 16));

    // Request 2 shares request 1's prompt, is preempted, and finds 12 tokens
    // (blocks request 1 still holds) cached when re-admitted: not counted.
    let mut e = engine(EngineConfig {
        max_num_seqs: 2,
        ..config(64, 24, 6)
    });
    e.add_request(req(1, prompt(0, 8), 16)).unwrap();
    e.add_request(req(2, prompt(0, 8), 8)).unwrap();
    let first = e.step().unwrap();
    assert_eq!(first.admitted, vec![(id(1), 0), (id(2), 4)]);
    let before = e.prefix_cache_stats();
    assert_eq!(before, (16, 4));
    let mut readmitted = Vec::new();
    let mut preempted = Vec::new();
    while e.has_unfinished() {
        let o = e.step().unwrap();
        readmitted.extend(o.readmitted);
        preempted.extend(o.preempted);
    }
    assert_eq!(preempted, vec![id(2)]);
    assert_eq!(readmitted, vec![(id(2), 12)]);
    assert_eq!(e.prefix_cache_stats(), before);
}

#[test]
fn caching_off_never_hits() {
    let mut e = engine(EngineConfig {
        enable_prefix_caching: false,
        ..config(64, 64, 40)
    });
    e.add_request(req(1, prompt(0, 16), 1)).unwrap();
    e.add_request(req(2, prompt(0, 16), 1)).unwrap();
    assert_eq!(e.step().unwrap().admitted, vec![(id(1), 0), (id(2), 0)]);
    assert_eq!(e.prefix_cache_stats(), (32, 0));
}

fn cached_for(writer: Option<&str>, reader: Option<&str>) -> usize {
    let mut e = engine(config(64, 64, 40));
    let with = |r: engine::Request, s: Option<&str>| match s {
        Some(s) => r.with_salt(s),
        None => r,
    };
    e.add_request(with(req(1, prompt(0, 20), 1), writer))
        .unwrap();
    run_to_idle(&mut e, 10);
    e.add_request(with(req(2, prompt(0, 20), 1), reader))
        .unwrap();
    e.step().unwrap().admitted[0].1
}

#[test]
fn cache_salt_separates_tenants() {
    assert_eq!(
        cached_for(Some("a"), Some("a")),
        16,
        "same salt reuses up to the last full block"
    );
    assert_eq!(cached_for(Some("a"), Some("b")), 0);
    assert_eq!(cached_for(Some("a"), None), 0);
    assert_eq!(cached_for(None, Some("a")), 0);
    assert_eq!(cached_for(None, None), 16);
}
