//! A cost model whose every step is off by a given share: the step error a
//! cost model's hold-outs measured, made systematic, to see what it does to
//! the figures a run reports.
//!
//! Contract: [`StepErrorCost`] prices a step as its inner model does, times
//! `1 + share × decode_pct / 100` when the step is decodes only
//! ([`BatchShape::is_decode_only`]) and `1 + share × prefill_pct / 100`
//! otherwise (a mixed step is priced as a prefill). `share` is in −1..=1, so
//! a step is never priced at or below zero while both errors stay under
//! 100 %; [`StepErrorCost::new`] refuses anything else.

use calibration::operators::profile::ExpectedError;
use engine::BatchShape;
use sim::{CostModel, GpuHistory};
use std::sync::Arc;

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum StepErrorError {
    #[error("a step error share of {0} is outside -1..=1")]
    Share(f64),
    #[error("a step error of {0} % would price a step at or below zero")]
    Error(f64),
}

pub struct StepErrorCost {
    inner: Arc<dyn CostModel>,
    decode_factor: f64,
    prefill_factor: f64,
}

impl StepErrorCost {
    /// `inner` with `share` of `error`'s decode and prefill errors added to
    /// every step.
    pub fn new(
        inner: Arc<dyn CostModel>,
        error: &ExpectedError,
        share: f64,
    ) -> Result<Self, StepErrorError> {
        if !(-1.0..=1.0).contains(&share) {
            return Err(StepErrorError::Share(share));
        }
        for pct in [error.decode_pct, error.prefill_pct] {
            if !(0.0..100.0).contains(&pct) {
                return Err(StepErrorError::Error(pct));
            }
        }
        Ok(Self {
            inner,
            decode_factor: 1.0 + share * error.decode_pct / 100.0,
            prefill_factor: 1.0 + share * error.prefill_pct / 100.0,
        })
    }

    fn factor(&self, batch: &BatchShape) -> f64 {
        if batch.is_decode_only() {
            self.decode_factor
        } else {
            self.prefill_factor
        }
    }
}

impl CostModel for StepErrorCost {
    fn step_seconds(&self, batch: &BatchShape) -> f64 {
        self.inner.step_seconds(batch) * self.factor(batch)
    }

    fn step_seconds_after(&self, batch: &BatchShape, idle_s: f64, history: &mut GpuHistory) -> f64 {
        self.inner.step_seconds_after(batch, idle_s, history) * self.factor(batch)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use engine::SeqShape;

    struct Fixed;
    impl CostModel for Fixed {
        fn step_seconds(&self, _: &BatchShape) -> f64 {
            0.010
        }
    }

    fn error(decode_pct: f64, prefill_pct: f64) -> ExpectedError {
        ExpectedError {
            decode_pct,
            prefill_pct,
            basis: "test".into(),
            off_ground: Vec::new(),
        }
    }

    fn batch(seqs: &[(u32, u32)]) -> BatchShape {
        BatchShape {
            seqs: seqs
                .iter()
                .map(|&(context_before, new_tokens)| SeqShape {
                    new_tokens,
                    context_before,
                    samples: true,
                })
                .collect(),
        }
    }

    #[test]
    fn decode_steps_take_the_decode_error_and_any_prefill_the_prefill_error() {
        let cost = StepErrorCost::new(Arc::new(Fixed), &error(8.0, 4.0), 1.0).unwrap();
        let decode = batch(&[(300, 1), (40, 1)]);
        let mixed = batch(&[(300, 1), (0, 512)]);
        assert!((cost.step_seconds(&decode) - 0.0108).abs() < 1e-12);
        assert!((cost.step_seconds(&mixed) - 0.0104).abs() < 1e-12);
        let low = StepErrorCost::new(Arc::new(Fixed), &error(8.0, 4.0), -0.5).unwrap();
        assert!((low.step_seconds(&decode) - 0.0096).abs() < 1e-12);
    }

    #[test]
    fn shares_outside_one_and_errors_of_a_whole_step_are_refused() {
        for share in [1.5, -1.01, f64::NAN] {
            let e = StepErrorCost::new(Arc::new(Fixed), &error(8.0, 4.0), share);
            assert!(matches!(e, Err(StepErrorError::Share(_))), "{share}");
        }
        let e = StepErrorCost::new(Arc::new(Fixed), &error(100.0, 4.0), -1.0);
        assert_eq!(e.err(), Some(StepErrorError::Error(100.0)));
    }
}
