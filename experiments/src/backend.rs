//! Backends: what executes a condition's script on an engine.
//!
//! Contract: a [`Backend`] turns (engine settings, script) into
//! `sim::RunRecords`. Every backend drives the same `sim` event loop with the
//! same `engine::EngineCore`; only the clock and the model runner differ:
//! [`SimBackend`] uses the virtual clock and `sim::SimRunner` priced by a cost
//! model ([`cost`]: calibrated profile, a profile built into `exp`
//! ([`shipped`]) or datasheet roofline); [`RealBackend`] uses the wall clock
//! and a CPU or CUDA runner that is built once per process and reused by
//! every condition it can serve. [`EndpointBackend`] is real mode over HTTP:
//! it plays the script against an OpenAI-compatible server and times it on
//! the client ([`endpoint`]). A backend may report progress within a
//! condition ([`Backend::run_observed`]); the real ones do, per step or per
//! request. Experiments never see which backend ran them.

pub mod cost;
pub mod endpoint;
pub mod model;
mod real;
pub mod runner;
pub mod shipped;
mod sim_backend;
pub mod step_error;

pub use cost::{cost_for, operator_cost, CostBasis, CostSource, ProfileLookup, ResolvedCost};
pub use endpoint::{EndpointBackend, EndpointSpec};
pub use model::{LoadedModel, ModelChoice};
pub use real::RealBackend;
pub use runner::{RunnerKind, RunnerLimits};
pub use shipped::{ShippedProfile, SHIPPED};
pub use sim_backend::SimBackend;

use crate::catalogue::Condition;
use crate::fleet::{DisaggSpec, FleetSpec};
use crate::script::Script;
use engine::EngineConfig;
use serde::Serialize;
use sim::{CostModel, GpuSpec, RunRecords};
use thiserror::Error;

/// GPU used by sim mode when none is given.
pub const DEFAULT_GPU: &str = "h200-sxm";
/// Model used when none is given.
pub const DEFAULT_MODEL: &str = "qwen3-0.6b";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Real,
    Sim,
    Both,
}

impl Mode {
    /// The output folder name (`DIR/NAME/<mode>/`).
    pub fn dir_name(self) -> &'static str {
        match self {
            Mode::Real => "real",
            Mode::Sim => "sim",
            Mode::Both => "both",
        }
    }
}

#[derive(Debug, Error)]
pub enum BackendError {
    #[error("--gpu {name}: {message}")]
    UnknownGpu { name: String, message: String },
    #[error("--profile {path}: {message}")]
    Profile { path: String, message: String },
    #[error("--model {name}: {message}")]
    Model { name: String, message: String },
    #[error(
        "the {0} runner (real mode's default, or --backend {0}) is not in this binary: \
         rebuild with --features cuda on a machine with a GPU, or pass --backend cpu \
         (the CPU reference runner; slow, e.g. with --model tiny), or use --mode sim"
    )]
    BackendNotBuilt(String),
    /// A cost model that cannot stand for the runner it is compared with.
    #[error("{0}")]
    CostMismatch(String),
    /// A runner option the chosen runner cannot take.
    #[error("{0}")]
    RunnerOption(String),
    #[error("building the {backend} runner: {error}")]
    Runner {
        backend: &'static str,
        #[source]
        error: engine::RunnerError,
    },
    #[error("warming up the {backend} runner: {message}")]
    WarmUp {
        backend: &'static str,
        message: String,
    },
    #[error("the real runner failed earlier and could not be rebuilt: {0}")]
    RunnerLost(String),
    /// A fleet condition on a backend that drives a single engine.
    #[error(
        "this condition asks for {replicas} replica(s) behind the {router} router, but the \
         {backend} backend drives one engine on one device: run it with --mode sim"
    )]
    FleetUnsupported {
        backend: &'static str,
        replicas: usize,
        router: &'static str,
    },
    /// A disaggregated condition on a backend that drives a single engine.
    #[error(
        "this condition asks for {prefill} prefill and {decode} decode replica(s), but the \
         {backend} backend drives one engine on one device: run it with --mode sim"
    )]
    DisaggUnsupported {
        backend: &'static str,
        prefill: usize,
        decode: usize,
    },
    #[error("a condition is either a routed fleet or a disaggregated one, not both")]
    FleetAndDisagg,
    #[error("router: {0}")]
    Router(#[from] sim::cluster::ClusterError),
    // Boxed: its variants carry URLs and server messages, and every result
    // of a backend (and of `exp plan`, which wraps it) would grow with them.
    #[error(transparent)]
    Endpoint(Box<endpoint::EndpointError>),
    /// `--endpoint` with an option that only the in-process engine takes.
    #[error("{0}")]
    EndpointOption(String),
    #[error(transparent)]
    Engine(#[from] engine::EngineError),
    #[error(transparent)]
    Run(#[from] sim::RunError),
    #[error(transparent)]
    StepError(#[from] step_error::StepErrorError),
}

impl From<endpoint::EndpointError> for BackendError {
    fn from(error: endpoint::EndpointError) -> Self {
        Self::Endpoint(Box::new(error))
    }
}

/// What ran the conditions, as recorded in `meta.ron`.
#[derive(Debug, Clone, Serialize)]
pub struct BackendInfo {
    pub mode: &'static str,
    /// Sim: the cost model that priced steps. Real: the cost model whose
    /// prediction of each measured step is in `steps.csv` (`predicted_ms`).
    pub cost_model: String,
    pub gpu: Option<GpuSpec>,
    pub model: String,
    /// Real mode: `cpu` or `cuda`, with the device name.
    pub runner: Option<String>,
    /// The cost model in a few words, for figure subtitles (sim:
    /// [`ResolvedCost::short_label`]; real: `measured`). Not in `meta.ron`,
    /// whose `cost_model` says it in full.
    #[serde(skip)]
    pub cost_label: String,
    /// Real mode over HTTP: the server, and what is measured how.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<endpoint::EndpointMeta>,
    /// Sim mode: the error the cost model's hold-outs measured for such
    /// predictions, where it has any (the operator model).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expected_error: Option<calibration::operators::profile::ExpectedError>,
}

/// How far a backend has got with one condition, reported while it runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProgressEvent {
    /// Requests of the condition's script that have finished.
    pub requests_done: usize,
    /// Engine steps taken so far.
    pub steps: u64,
}

pub trait Backend {
    fn info(&self) -> BackendInfo;
    /// Prompt token ids are drawn from `0..vocab()`.
    fn vocab(&self) -> u32;
    /// `Some(self)` when conditions may run at once (simulation); a real
    /// runner serves one condition at a time so they do not disturb each other.
    fn as_parallel(&self) -> Option<&(dyn Backend + Sync)> {
        None
    }
    /// KV-cache blocks (null block included) an engine with `engine` gets,
    /// when the backend knows it before running.
    fn kv_blocks(&self, engine: &EngineConfig) -> Option<usize>;
    /// The cost model that predicts each measured step (real backends), for
    /// `steps.csv`'s `predicted_ms` and the validation table.
    fn step_predictor(&self) -> Option<&dyn CostModel> {
        None
    }
    /// Whether the records hold the engine's steps (`steps.csv`); a server
    /// behind HTTP shows its requests only.
    fn observes_steps(&self) -> bool {
        true
    }
    /// Refuses, before any condition runs, conditions this backend cannot
    /// run as planned (an endpoint: options only the server sets).
    fn check_conditions(&self, conditions: &[Condition]) -> Result<(), BackendError> {
        let _ = conditions;
        Ok(())
    }
    /// This backend with every step off by `share` (−1..=1) of the error its
    /// cost model's hold-outs measured ([`step_error::StepErrorCost`]);
    /// `None` where it has no such error (a real runner, a cost model
    /// without hold-outs).
    fn with_step_error(&self, share: f64) -> Result<Option<Box<dyn Backend>>, BackendError> {
        let _ = share;
        Ok(None)
    }
    fn run(&self, engine: &EngineConfig, script: &Script) -> Result<RunRecords, BackendError>;
    /// [`Backend::run`], calling `observe` as the run progresses (after each
    /// step and each finished request) where the backend can tell; by
    /// default it runs without reporting (simulated conditions take
    /// moments, so they are counted whole).
    fn run_observed(
        &self,
        engine: &EngineConfig,
        script: &Script,
        observe: &dyn Fn(ProgressEvent),
    ) -> Result<RunRecords, BackendError> {
        let _ = observe;
        self.run(engine, script)
    }
    /// Runs `script` on `fleet.replicas` engines of `engine`, routed by
    /// `fleet.router`; each request's tag records its replica
    /// ([`crate::fleet::tag_with_replica`]). By default a backend drives one
    /// engine and refuses.
    fn run_fleet(
        &self,
        engine: &EngineConfig,
        fleet: &FleetSpec,
        script: &Script,
    ) -> Result<RunRecords, BackendError> {
        let _ = (engine, script);
        Err(BackendError::FleetUnsupported {
            backend: self.info().mode,
            replicas: fleet.replicas,
            router: fleet.router.name(),
        })
    }
    /// Runs `script` on a prefill pool and a decode pool of `engine`
    /// ([`DisaggSpec`]); each request's tag records both replicas
    /// ([`crate::fleet::tag_with_placement`]). By default a backend drives
    /// one engine and refuses.
    fn run_disagg(
        &self,
        engine: &EngineConfig,
        disagg: &DisaggSpec,
        script: &Script,
    ) -> Result<RunRecords, BackendError> {
        let _ = (engine, script);
        Err(BackendError::DisaggUnsupported {
            backend: self.info().mode,
            prefill: disagg.prefill(),
            decode: disagg.decode(),
        })
    }
}

/// Everything that picks the backends besides the mode.
#[derive(Debug, Clone)]
pub struct BackendSpec {
    /// Sim cost model (and the predictor of real steps).
    pub cost: CostSource,
    pub model: ModelChoice,
    /// Real runner: CPU or CUDA.
    pub runner: RunnerKind,
    /// Seed of synthetic weights (presets only).
    pub weights_seed: u64,
    /// CUDA runner on this many SMs (a green context); `None`: the whole GPU.
    pub sm_count: Option<usize>,
    /// Engine settings the real runner is first built for (it is rebuilt
    /// when a condition needs more).
    pub engine: EngineConfig,
    /// Real mode against this server instead of a runner in this process.
    pub endpoint: Option<EndpointSpec>,
}

impl Default for BackendSpec {
    fn default() -> Self {
        Self {
            cost: CostSource::Default(DEFAULT_GPU.into()),
            model: ModelChoice::Preset(DEFAULT_MODEL.into()),
            runner: RunnerKind::default(),
            weights_seed: 0,
            sm_count: None,
            engine: EngineConfig::default(),
            endpoint: None,
        }
    }
}

/// The backends `mode` runs on, in order (`both`: real, then sim), with the
/// default model and runner.
pub fn make_backends(mode: Mode, cost: &CostSource) -> Result<Vec<Box<dyn Backend>>, BackendError> {
    build_backends(
        mode,
        &BackendSpec {
            cost: cost.clone(),
            ..BackendSpec::default()
        },
    )
}

/// The backends `mode` runs on, in order (`both`: real, then sim). The real
/// runner is built (and warmed up) here, so a missing GPU fails before any
/// file is written. In `both` mode the sim side draws prompts from the same
/// vocabulary and gets the same KV-cache size as the real runner, so both
/// run identical scripts through identical schedulers.
pub fn build_backends(
    mode: Mode,
    spec: &BackendSpec,
) -> Result<Vec<Box<dyn Backend>>, BackendError> {
    let model = LoadedModel::config_only(&spec.model)?;
    let cost = cost::resolve(&spec.cost, &model)?;
    if mode == Mode::Both {
        cost::check_compares_with(&cost, spec.runner)?;
    }
    if let Some(endpoint) = &spec.endpoint {
        return endpoint_backends(mode, endpoint, cost, &model);
    }
    if mode == Mode::Sim {
        return Ok(vec![Box::new(SimBackend::new(cost, &model, None))]);
    }
    let weights = model.runner_weights(spec.weights_seed)?;
    let label = model.weights_label(spec.weights_seed);
    let real = RealBackend::new(
        spec.runner,
        model.clone(),
        weights,
        &spec.engine,
        spec.sm_count,
        &cost,
        label,
    )?;
    if mode == Mode::Both && spec.runner == RunnerKind::Cuda {
        cost::check_same_gpu(&cost, real.device_name())?;
    }
    let capacity = real.capacity();
    let mut out: Vec<Box<dyn Backend>> = vec![Box::new(real)];
    if mode == Mode::Both {
        out.push(Box::new(SimBackend::new(cost, &model, capacity)));
    }
    Ok(out)
}

/// `--endpoint`: the server (real), then in `both` mode the sim twin with
/// the cost model and KV capacity the options give it.
fn endpoint_backends(
    mode: Mode,
    spec: &EndpointSpec,
    cost: ResolvedCost,
    model: &LoadedModel,
) -> Result<Vec<Box<dyn Backend>>, BackendError> {
    if mode == Mode::Sim {
        return Err(BackendError::EndpointOption(format!(
            "--endpoint {} runs the experiment against a server: use --mode real (the default \
             with --endpoint) or --mode both (server and sim twin), or leave --endpoint out",
            spec.url
        )));
    }
    let mut out: Vec<Box<dyn Backend>> = vec![Box::new(EndpointBackend::connect(spec, model)?)];
    if mode == Mode::Both {
        out.push(Box::new(SimBackend::new(cost, model, None)));
    }
    Ok(out)
}
