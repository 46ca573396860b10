//! Real mode: wall clock and a CPU or CUDA runner, one condition at a time.

use super::runner::{self, AnyRunner, RunnerKind, RunnerLimits};
use super::{Backend, BackendError, BackendInfo, LoadedModel, ResolvedCost};
use crate::script::{Script, ScriptWorkload};
use engine::model::ModelWeights;
use engine::{EngineConfig, EngineCore, EngineError, ModelRunner};
use sim::{CostModel, RunError, RunRecords, WallClock};
use std::cell::RefCell;

struct Built {
    runner: AnyRunner,
    limits: RunnerLimits,
}

/// Runs conditions on a real runner that is built once and reused; it is
/// rebuilt (the old one dropped first, freeing the GPU) only when a condition
/// needs larger limits, or after a runner error left it in doubt.
pub struct RealBackend {
    kind: RunnerKind,
    model: LoadedModel,
    weights_label: String,
    /// Kept so the runner can be rebuilt: the seed of synthetic weights, or
    /// the host copy of loaded ones.
    weights: ModelWeights,
    slot: RefCell<Option<Built>>,
    /// Limits of the last runner built (grown, never shrunk).
    limits: RefCell<RunnerLimits>,
    device: String,
    predictor: ResolvedCost,
}

impl RealBackend {
    /// Builds and warms up the runner for `engine` (the first condition's
    /// settings, or the defaults); `predictor` prices each measured step.
    pub fn new(
        kind: RunnerKind,
        model: LoadedModel,
        weights: ModelWeights,
        engine: &EngineConfig,
        sm_count: Option<usize>,
        predictor: &ResolvedCost,
        weights_label: String,
    ) -> Result<Self, BackendError> {
        let limits = RunnerLimits::for_engine(engine).on_sms(sm_count);
        let runner = runner::build(kind, &model.config, &weights, &limits)?;
        let device = runner.device_name();
        Ok(Self {
            kind,
            model,
            weights_label,
            weights,
            slot: RefCell::new(Some(Built {
                runner,
                limits: limits.clone(),
            })),
            limits: RefCell::new(limits),
            device,
            predictor: predictor.clone(),
        })
    }

    /// KV blocks of the current runner (null block included).
    pub fn capacity(&self) -> Option<usize> {
        self.slot
            .borrow()
            .as_ref()
            .map(|b| b.runner.num_kv_blocks())
    }

    pub fn device_name(&self) -> &str {
        &self.device
    }

    /// Makes sure the slot holds a runner that serves `engine`.
    fn ensure(&self, slot: &mut Option<Built>, engine: &EngineConfig) -> Result<(), BackendError> {
        if let Some(b) = slot.as_ref() {
            if b.limits.covers(engine, b.runner.num_kv_blocks()) {
                return Ok(());
            }
        }
        let limits = self.limits.borrow().grown(engine);
        // Free the old runner's memory before the new one allocates.
        *slot = None;
        let runner = runner::build(self.kind, &self.model.config, &self.weights, &limits)?;
        *self.limits.borrow_mut() = limits.clone();
        *slot = Some(Built { runner, limits });
        Ok(())
    }
}

impl Backend for RealBackend {
    fn info(&self) -> BackendInfo {
        BackendInfo {
            mode: "real",
            cost_model: format!("measured; predicted_ms by {}", self.predictor.description),
            gpu: Some(self.predictor.gpu.clone()),
            model: self.weights_label.clone(),
            runner: Some(format!("{} on {}", self.kind.name(), self.device)),
            cost_label: "measured".into(),
        }
    }

    fn vocab(&self) -> u32 {
        self.model.prompt_vocab()
    }

    fn kv_blocks(&self, engine: &EngineConfig) -> Option<usize> {
        engine.num_gpu_blocks.or_else(|| self.capacity())
    }

    fn step_predictor(&self) -> Option<&dyn CostModel> {
        Some(self.predictor.model.as_ref())
    }

    fn run(&self, engine: &EngineConfig, script: &Script) -> Result<RunRecords, BackendError> {
        let mut slot = self.slot.borrow_mut();
        self.ensure(&mut slot, engine)?;
        let built = slot
            .as_mut()
            .ok_or_else(|| BackendError::RunnerLost("no runner after rebuilding".into()))?;
        let result = {
            let mut engines = vec![EngineCore::new(engine.clone(), &mut built.runner)?];
            let mut workload = ScriptWorkload::new(script.clone());
            let mut clock = WallClock::new();
            sim::run(&mut engines, &mut clock, &mut workload)
        };
        if matches!(result, Err(RunError::Engine(EngineError::Runner(_)))) {
            // The device state is in doubt: the next condition gets a new runner.
            *slot = None;
        }
        Ok(result?)
    }
}
