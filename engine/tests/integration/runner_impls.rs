//! `&mut R` and `Box<R>` (`Box<dyn ModelRunner>` included) are runners: an
//! engine built on either runs requests to completion with the same outputs
//! as one that owns its runner, and the runner's errors still reach `step()`.

use crate::common;
use common::*;
use engine::testing::FixedTokenRunner;
use engine::{EngineCore, ModelRunner, RunnerError, RunnerOutput, ScheduledBatch, StepOutcome};

/// Two requests through `engine` until both finish; every step's outcome.
fn serve<R: ModelRunner>(engine: &mut EngineCore<R>) -> Vec<StepOutcome> {
    engine.add_request(req(1, prompt(0, 10), 5)).unwrap();
    engine.add_request(req(2, prompt(100, 21), 3)).unwrap();
    let mut outcomes = Vec::new();
    while engine.has_unfinished() {
        assert!(outcomes.len() < 100, "engine did not finish");
        outcomes.push(engine.step().expect("step"));
    }
    assert_eq!(engine.kv_cache().num_used_blocks(), 0);
    outcomes
}

/// Outputs of the reference engine, which owns its runner.
fn owned_outputs() -> (Vec<u32>, Vec<u32>) {
    let mut e = EngineCore::new(small_config(), FixedTokenRunner::new(64, VOCAB)).unwrap();
    let outcomes = serve(&mut e);
    (outputs_of(&outcomes, 1), outputs_of(&outcomes, 2))
}

#[test]
fn an_engine_on_a_borrowed_runner_finishes_and_leaves_the_runner_to_its_owner() {
    let mut runner = FixedTokenRunner::new(64, VOCAB);
    let outputs = {
        let mut e = EngineCore::new(small_config(), &mut runner).unwrap();
        let outcomes = serve(&mut e);
        (outputs_of(&outcomes, 1), outputs_of(&outcomes, 2))
    };
    assert_eq!(outputs, owned_outputs());
    assert_eq!(outputs.0.len(), 5);
    assert_eq!(outputs.1.len(), 3);
    // The owner still has the runner, with the work of the engine it lent it to.
    let batches = runner.batches;
    assert!(batches > 0);
    assert_eq!(runner.tokens, 10 + 21 + 4 + 2);
    // A second engine borrows the same runner.
    let mut again = EngineCore::new(small_config(), &mut runner).unwrap();
    serve(&mut again);
    assert_eq!(again.runner().batches, 2 * batches);
}

#[test]
fn an_engine_on_a_boxed_dyn_runner_finishes() {
    let runner: Box<dyn ModelRunner> = Box::new(FixedTokenRunner::new(64, VOCAB));
    let mut e: EngineCore<Box<dyn ModelRunner>> = EngineCore::new(small_config(), runner).unwrap();
    assert_eq!(e.runner().num_kv_blocks(), 64);
    let outcomes = serve(&mut e);
    assert_eq!(
        (outputs_of(&outcomes, 1), outputs_of(&outcomes, 2)),
        owned_outputs()
    );
}

/// Fails every batch.
struct Broken;
impl ModelRunner for Broken {
    fn num_kv_blocks(&self) -> usize {
        64
    }
    fn execute(&mut self, _batch: &ScheduledBatch<'_>) -> Result<RunnerOutput, RunnerError> {
        Err(RunnerError::Device {
            what: "lost".into(),
            source: "the device fell off the bus".into(),
        })
    }
}

#[test]
fn errors_of_borrowed_and_boxed_runners_reach_step() {
    let mut broken = Broken;
    let mut borrowed = EngineCore::new(small_config(), &mut broken).unwrap();
    borrowed.add_request(req(1, prompt(0, 4), 2)).unwrap();
    let err = borrowed.step().unwrap_err();
    assert!(err.to_string().contains("lost"), "{err}");

    let boxed: Box<dyn ModelRunner> = Box::new(Broken);
    let mut e = EngineCore::new(small_config(), boxed).unwrap();
    e.add_request(req(1, prompt(0, 4), 2)).unwrap();
    let err = e.step().unwrap_err();
    assert!(err.to_string().contains("lost"), "{err}");
}
