//! Real mode: wall clock and a CPU or CUDA runner, one condition at a time.
//!
//! Progress ([`Backend::run_observed`]) is observed without touching the
//! event loop: the wall clock is told after every step and the workload of
//! every finished request, so thin wrappers around both count them.

use super::runner::{self, AnyRunner, RunnerKind, RunnerLimits};
use super::{Backend, BackendError, BackendInfo, LoadedModel, ProgressEvent, ResolvedCost};
use crate::script::{Script, ScriptWorkload};
use engine::model::ModelWeights;
use engine::{EngineConfig, EngineCore, EngineError, ModelRunner};
use sim::clock::Clock;
use sim::workload::{Arrival, Workload};
use sim::{CostModel, RunError, RunRecords, WallClock};
use std::cell::{Cell, RefCell};

/// Steps and finished requests of the running condition, reported to `observe`.
struct Counter<'a> {
    steps: Cell<u64>,
    requests_done: Cell<usize>,
    observe: &'a dyn Fn(ProgressEvent),
}

impl Counter<'_> {
    fn report(&self) {
        (self.observe)(ProgressEvent {
            requests_done: self.requests_done.get(),
            steps: self.steps.get(),
        });
    }
}

/// The wall clock, counting steps.
struct CountingClock<'a> {
    inner: WallClock,
    counter: &'a Counter<'a>,
}

impl Clock for CountingClock<'_> {
    fn now(&self) -> f64 {
        self.inner.now()
    }
    fn wait_until(&mut self, t: f64) {
        self.inner.wait_until(t);
    }
    fn step_finished(&mut self, modeled_seconds: Option<f64>) {
        self.inner.step_finished(modeled_seconds);
        self.counter.steps.set(self.counter.steps.get() + 1);
        self.counter.report();
    }
    fn seek(&mut self, t: f64) {
        self.inner.seek(t);
    }
}

/// The condition's script, counting finished requests.
struct CountingWorkload<'a> {
    inner: ScriptWorkload,
    counter: &'a Counter<'a>,
}

impl Workload for CountingWorkload<'_> {
    fn initial(&mut self) -> Vec<Arrival> {
        self.inner.initial()
    }
    fn on_finish(&mut self, id: u64, now: f64) -> Vec<Arrival> {
        let done = self.counter.requests_done.get() + 1;
        self.counter.requests_done.set(done);
        self.counter.report();
        self.inner.on_finish(id, now)
    }
}

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
            endpoint: None,
            expected_error: None,
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
        self.run_observed(engine, script, &|_| {})
    }

    fn run_observed(
        &self,
        engine: &EngineConfig,
        script: &Script,
        observe: &dyn Fn(ProgressEvent),
    ) -> Result<RunRecords, BackendError> {
        let mut slot = self.slot.borrow_mut();
        self.ensure(&mut slot, engine)?;
        let built = slot
            .as_mut()
            .ok_or_else(|| BackendError::RunnerLost("no runner after rebuilding".into()))?;
        let result = {
            let mut engines = vec![EngineCore::new(engine.clone(), &mut built.runner)?];
            let counter = Counter {
                steps: Cell::new(0),
                requests_done: Cell::new(0),
                observe,
            };
            let mut workload = CountingWorkload {
                inner: ScriptWorkload::new(script.clone()),
                counter: &counter,
            };
            let mut clock = CountingClock {
                inner: WallClock::new(),
                counter: &counter,
            };
            sim::run(&mut engines, &mut clock, &mut workload)
        };
        if matches!(result, Err(RunError::Engine(EngineError::Runner(_)))) {
            // The device state is in doubt: the next condition gets a new runner.
            *slot = None;
        }
        Ok(result?)
    }
}
