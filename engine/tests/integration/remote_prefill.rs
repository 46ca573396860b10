//! `add_remote_prefilled`: a request whose prompt (and first tokens) another
//! engine computed is admitted with that K/V in place and decodes from it,
//! exactly as the engine that prefilled it would have continued. Block size 4.

use crate::common;
use common::*;
use engine::request::{RequestError, RequestStatus};
use engine::{EngineConfig, Request};

fn config(budget: usize, usable_blocks: usize) -> EngineConfig {
    EngineConfig {
        max_num_seqs: 4,
        max_num_batched_tokens: budget,
        max_model_len: 64,
        block_size: 4,
        num_gpu_blocks: Some(usable_blocks + 1),
        ..EngineConfig::default()
    }
}

#[test]
fn decodes_after_the_sent_prompt_without_recomputing_it() {
    let mut local = engine(config(64, 40));
    local.add_request(req(1, prompt(0, 10), 4)).unwrap();
    let whole = run_to_idle(&mut local, 10);
    let outputs = outputs_of(&whole, 1);
    assert_eq!(outputs.len(), 4);

    // The decode side gets the prompt and the first token sampled there.
    let mut e = engine(config(64, 40));
    e.add_remote_prefilled(req(1, prompt(0, 10), 4), &outputs[..1])
        .unwrap();
    assert_eq!(e.request_status(id(1)), Some(RequestStatus::Waiting));
    let first = e.step().unwrap();
    let seq = scheduled(&e, 1).expect("scheduled");
    assert_eq!(
        (seq.start_pos, seq.num_tokens, seq.samples),
        (10, 1, true),
        "one decode over the 10 prompt tokens and the first output"
    );
    assert_eq!(seq.block_table.len(), 3, "blocks for 11 tokens");
    assert_eq!(e.num_computed_tokens(id(1)), Some(11));
    assert!(
        first.first_tokens.is_empty(),
        "the first token came earlier"
    );
    assert_eq!(first.admitted, vec![(id(1), 0)]);
    let rest = run_to_idle(&mut e, 10);
    let mut decoded = outputs_of(&[first], 1);
    decoded.extend(outputs_of(&rest, 1));
    assert_eq!(decoded, outputs[1..], "the local engine's later outputs");
    assert_eq!(rest.len(), 2, "3 decode steps in all, for max_tokens 4");
    assert_eq!(e.num_free_blocks(), 40);
}

#[test]
fn with_no_outputs_the_last_prompt_token_is_recomputed_as_in_vllm() {
    let mut e = engine(config(64, 40));
    e.add_remote_prefilled(req(1, prompt(0, 10), 2), &[])
        .unwrap();
    let o = e.step().unwrap();
    let seq = scheduled(&e, 1).expect("scheduled");
    assert_eq!((seq.start_pos, seq.num_tokens, seq.samples), (9, 1, true));
    assert_eq!(o.first_tokens, vec![id(1)]);
}

#[test]
fn the_budget_counts_only_the_decoded_token() {
    // A 40-token prompt needs 5 chunks of 8 locally; sent, it decodes at once.
    let mut e = engine(config(8, 40));
    e.add_remote_prefilled(req(1, prompt(0, 40), 3), &[7])
        .unwrap();
    e.add_request(req(2, prompt(100, 20), 1)).unwrap();
    e.step().unwrap();
    assert_eq!(tokens_of(&e, 1), 1);
    assert_eq!(tokens_of(&e, 2), 7, "the rest of the budget");
}

#[test]
fn sent_prompt_blocks_join_the_prefix_cache_and_local_hits_are_used() {
    let mut e = engine(config(64, 40));
    e.add_remote_prefilled(req(1, prompt(0, 10), 2), &[7])
        .unwrap();
    e.step().unwrap();
    // A local request with the same prompt hits its 2 full blocks.
    e.add_request(req(2, prompt(0, 10), 1)).unwrap();
    let o = e.step().unwrap();
    assert_eq!(o.admitted, vec![(id(2), 8)]);
    run_to_idle(&mut e, 10);
    // A sent request whose prompt is cached takes the hits, counted as vLLM's
    // decode instance counts them.
    e.add_remote_prefilled(req(3, prompt(0, 10), 2), &[7])
        .unwrap();
    let o = e.step().unwrap();
    assert_eq!(o.admitted, vec![(id(3), 8)]);
    assert_eq!(tokens_of(&e, 3), 1);
    assert_eq!(e.prefix_cache_stats(), (30, 16));
}

#[test]
fn a_preempted_sent_request_recomputes_everything_locally() {
    // 6 usable blocks, caching off: request 1 (4 prompt tokens, 20 outputs)
    // and the sent request 2 (15 + 1 tokens, 4 blocks) fill the pool, and in
    // the second step request 2 needs a 5th block and preempts itself.
    let mut e = engine(EngineConfig {
        enable_prefix_caching: false,
        max_model_len: 24,
        ..config(64, 6)
    });
    e.add_request(req(1, prompt(0, 4), 20)).unwrap();
    e.add_remote_prefilled(req(2, prompt(100, 15), 4), &[7])
        .unwrap();
    e.step().unwrap();
    assert_eq!(tokens_of(&e, 2), 1);
    assert_eq!(e.num_free_blocks(), 1);
    let o = e.step().unwrap();
    assert_eq!(o.preempted, vec![id(2)]);
    let outcomes = run_to_idle(&mut e, 40);
    let back = outcomes
        .iter()
        .position(|o| o.readmitted.iter().any(|(r, _)| *r == id(2)))
        .expect("readmitted");
    assert_eq!(
        outcomes[back].shape.seqs.last().map(|s| s.new_tokens),
        Some(17),
        "prompt, the sent token and the one decoded before the preemption"
    );
    assert_eq!(outputs_of(&outcomes, 2).len(), 2, "4 outputs in all");
}

#[test]
fn outputs_that_already_finish_the_request_are_refused() {
    let mut e = engine(config(64, 40));
    assert_eq!(
        e.add_remote_prefilled(req(1, prompt(0, 10), 2), &[7, 8]),
        Err(RequestError::RemoteOutputsComplete {
            id: id(1),
            outputs: 2,
            max_tokens: 2
        })
    );
    let stops = Request {
        ignore_eos: false,
        eos_token_id: Some(8),
        ..req(2, prompt(0, 10), 5)
    };
    let err = e.add_remote_prefilled(stops, &[7, 8]).unwrap_err();
    assert_eq!(
        err,
        RequestError::RemoteOutputsStopped {
            id: id(2),
            position: 1
        }
    );
    assert!(err.to_string().contains("EOS"), "{err}");
    // What add_request refuses is refused too, and nothing was queued.
    assert!(matches!(
        e.add_remote_prefilled(req(3, prompt(0, 60), 8), &[7]),
        Err(RequestError::TooLong { .. })
    ));
    assert!(!e.has_unfinished());
}
