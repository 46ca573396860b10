//! `EngineCore::add_request` refuses prompt token ids outside the runner's
//! vocabulary, naming the request, the position, the id and the vocabulary;
//! a runner that reads no ids (a simulated one) accepts any.

use crate::cpu_runner_support;

use engine::model::{Qwen3Config, Qwen3Weights};
use engine::testing::FixedTokenRunner;
use engine::{
    EngineConfig, EngineCore, ModelRunner, Request, RequestError, RequestId, RunnerError,
    RunnerOutput, ScheduledBatch,
};

/// A test runner whose model has `vocab` token ids.
struct WithVocab {
    inner: FixedTokenRunner,
    vocab: usize,
}

impl ModelRunner for WithVocab {
    fn num_kv_blocks(&self) -> usize {
        self.inner.num_kv_blocks()
    }
    fn vocab_size(&self) -> Option<usize> {
        Some(self.vocab)
    }
    fn execute(&mut self, batch: &ScheduledBatch<'_>) -> Result<RunnerOutput, RunnerError> {
        self.inner.execute(batch)
    }
}

/// Engine settings whose KV pool 64 blocks can hold.
fn small() -> EngineConfig {
    EngineConfig {
        max_model_len: 256,
        ..EngineConfig::default()
    }
}

fn engine_with_vocab(vocab: usize) -> EngineCore<WithVocab> {
    let runner = WithVocab {
        inner: FixedTokenRunner::new(64, vocab as u32),
        vocab,
    };
    EngineCore::new(small(), runner).expect("engine")
}

#[test]
fn an_id_at_or_past_the_vocabulary_is_refused_naming_it_and_the_fix() {
    let mut core = engine_with_vocab(100);
    let err = core
        .add_request(Request::new(7, vec![1, 99, 100, 5], 4))
        .unwrap_err();
    assert!(
        matches!(
            err,
            RequestError::TokenOutOfVocab {
                id: RequestId(7),
                position: 2,
                token: 100,
                vocab: 100
            }
        ),
        "{err:?}"
    );
    let msg = err.to_string();
    assert!(
        msg.contains("request 7")
            && msg.contains("id 100")
            && msg.contains("0..100")
            && msg.contains("draw prompt ids below 100"),
        "{msg}"
    );
    assert!(!core.has_unfinished(), "the refused request was not queued");
    core.add_request(Request::new(8, vec![0, 99], 4))
        .expect("ids below the vocabulary are accepted");
    assert!(core.has_unfinished());
}

#[test]
fn tokens_sampled_by_a_prefill_engine_are_checked_too() {
    let mut core = engine_with_vocab(100);
    let err = core
        .add_remote_prefilled(Request::new(7, vec![1, 2, 3], 4), &[100])
        .unwrap_err();
    assert!(
        matches!(
            err,
            RequestError::TokenOutOfVocab {
                position: 3,
                token: 100,
                ..
            }
        ),
        "{err:?}"
    );
    assert!(!core.has_unfinished());
}

#[test]
fn a_runner_without_a_vocabulary_accepts_any_id() {
    let mut core = EngineCore::new(small(), FixedTokenRunner::new(64, 10)).expect("engine");
    assert_eq!(core.runner().vocab_size(), None);
    core.add_request(Request::new(1, vec![u32::MAX, 3], 2))
        .expect("a simulated runner reads no ids");
}

#[test]
fn the_cpu_runner_reports_its_models_vocabulary_to_the_engine() {
    let config = Qwen3Config::tiny();
    let weights = Qwen3Weights::synthetic(&config, 3);
    let runner = cpu_runner_support::runner(&config, &weights);
    assert_eq!(runner.vocab_size(), Some(config.vocab_size));
    let engine = EngineConfig {
        num_gpu_blocks: Some(runner.num_kv_blocks()),
        ..small()
    };
    let mut core = EngineCore::new(engine, runner).expect("engine");
    let past = config.vocab_size as u32;
    let err = core
        .add_request(Request::new(3, vec![1, past], 2))
        .unwrap_err();
    assert!(
        matches!(err, RequestError::TokenOutOfVocab { position: 1, .. }),
        "{err:?}"
    );
}
