//! Whole-engine runs: requests go in, exactly their outputs come out, and the
//! pool ends empty.

use crate::common;
use common::*;
use engine::request::FinishReason;
use engine::testing::FixedTokenRunner;
use engine::{EngineCore, Request};

#[test]
fn requests_finish_with_exactly_max_tokens_and_free_all_blocks() {
    let mut e = engine(small_config());
    e.add_request(req(1, prompt(0, 10), 5)).unwrap();
    e.add_request(req(2, prompt(100, 21), 3)).unwrap();
    let outcomes = run_to_idle(&mut e, 100);
    for (rid, n) in [(1, 5), (2, 3)] {
        assert_eq!(outputs_of(&outcomes, rid).len(), n);
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
    assert_eq!(outcomes.last().unwrap().kv_blocks_used, 0);
    // Outputs are the runner's tokens for the positions after each prompt.
    let expected: Vec<u32> = (10..15).map(|p| e.runner().inner.token_at(p)).collect();
    assert_eq!(outputs_of(&outcomes, 1), expected);
}

#[test]
fn finishes_with_stop_on_eos_unless_ignore_eos() {
    let runner = FixedTokenRunner::new(64, VOCAB);
    // The third output sits at position 8 + 2.
    let eos = runner.token_at(10);
    let mut e = EngineCore::new(small_config(), runner).unwrap();
    let stopping = Request {
        ignore_eos: false,
        eos_token_id: Some(eos),
        ..Request::new(1, prompt(0, 8), 6)
    };
    let ignoring = Request {
        ignore_eos: true,
        eos_token_id: Some(eos),
        ..Request::new(2, prompt(0, 8), 6)
    };
    e.add_request(stopping).unwrap();
    e.add_request(ignoring).unwrap();
    let mut finished = Vec::new();
    let mut counts = [0usize; 3];
    while e.has_unfinished() {
        let o = e.step().unwrap();
        finished.extend(o.finished);
        for (r, _) in o.tokens {
            counts[r.0 as usize] += 1;
        }
    }
    assert!(finished.contains(&(id(1), FinishReason::Stop)));
    assert!(finished.contains(&(id(2), FinishReason::Length)));
    assert_eq!(counts[1..], [3, 6]);
}

#[test]
fn length_limit_wins_over_eos_on_the_last_token() {
    let runner = FixedTokenRunner::new(64, VOCAB);
    let eos = runner.token_at(9);
    let mut e = EngineCore::new(small_config(), runner).unwrap();
    e.add_request(Request {
        ignore_eos: false,
        eos_token_id: Some(eos),
        ..Request::new(1, prompt(0, 8), 2)
    })
    .unwrap();
    let mut finished = Vec::new();
    while e.has_unfinished() {
        finished.extend(e.step().unwrap().finished);
    }
    assert_eq!(finished, vec![(id(1), FinishReason::Length)]);
}

#[test]
fn request_of_exactly_max_model_len_runs_to_completion() {
    let mut e = engine(small_config());
    e.add_request(req(1, prompt(0, 40), 24)).unwrap();
    let outcomes = run_to_idle(&mut e, 100);
    assert_eq!(outputs_of(&outcomes, 1).len(), 24);
    assert_eq!(e.kv_cache().num_used_blocks(), 0);
}

#[test]
fn modeled_seconds_and_shape_come_from_the_batch() {
    let mut e = engine(small_config());
    e.runner_mut().inner.modeled_seconds = Some(0.25);
    e.add_request(req(1, prompt(0, 10), 2)).unwrap();
    let first = e.step().unwrap();
    assert_eq!(first.modeled_seconds, Some(0.25));
    assert_eq!(first.shape.num_tokens(), 10);
    assert_eq!(first.shape.num_prefills(), 1);
    assert_eq!(first.kv_blocks_used, 3);
    let second = e.step().unwrap();
    assert!(second.shape.is_decode_only());
    assert_eq!(second.shape.seqs[0].context_before, 10);
    let idle = e.step().unwrap();
    assert!(idle.shape.seqs.is_empty());
    assert_eq!(idle.modeled_seconds, None);
}

#[test]
fn wrong_number_of_sampled_tokens_is_an_error() {
    struct Silent(FixedTokenRunner);
    impl engine::ModelRunner for Silent {
        fn num_kv_blocks(&self) -> usize {
            self.0.num_kv_blocks()
        }
        fn execute(
            &mut self,
            _batch: &engine::ScheduledBatch<'_>,
        ) -> Result<engine::RunnerOutput, engine::RunnerError> {
            Ok(engine::RunnerOutput::default())
        }
    }
    let mut e = EngineCore::new(small_config(), Silent(FixedTokenRunner::new(64, VOCAB))).unwrap();
    e.add_request(req(1, prompt(0, 4), 2)).unwrap();
    let err = e.step().unwrap_err();
    assert!(err.to_string().contains("sampled tokens"), "{err}");
}
