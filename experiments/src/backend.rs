//! Backends: what executes a condition's script on an engine.
//!
//! Contract: a [`Backend`] turns (engine settings, script) into
//! `sim::RunRecords`. Every backend drives the same `sim` event loop with the
//! same `engine::EngineCore`; only the clock and the model runner differ. The
//! simulated backend uses the virtual clock and `sim::SimRunner` priced by a
//! roofline model from a GPU datasheet. Real mode (wall clock, CPU/CUDA
//! runner) is issue 5: [`make_backends`] reports it as not built rather than
//! pretending. Experiments never see which backend ran them.

use crate::script::{Script, ScriptWorkload};
use engine::model::config::Qwen3Config;
use engine::{EngineConfig, EngineCore};
use serde::Serialize;
use sim::{GpuSpec, ModelShape, RooflineModel, RunRecords, SimRunner, VirtualClock};
use std::path::PathBuf;
use std::sync::Arc;
use thiserror::Error;

/// GPU used by sim mode when none is given.
pub const DEFAULT_GPU: &str = "h200-sxm";
/// Model shape used by every experiment.
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

/// Where sim mode's step costs come from.
#[derive(Debug, Clone, PartialEq)]
pub enum CostSource {
    /// Roofline from a datasheet GPU name (`calibration::datasheet`).
    Datasheet(String),
    /// A calibrated profile file written by `calibration`.
    Profile(PathBuf),
}

#[derive(Debug, Error)]
pub enum BackendError {
    #[error("--mode {0}: real mode needs the issue-5 runner (not built yet); use --mode sim")]
    RealNotBuilt(&'static str),
    #[error("--profile {0}: calibrated profiles are not supported yet; use --gpu NAME")]
    ProfileUnsupported(String),
    #[error("--gpu {name}: {message}")]
    UnknownGpu { name: String, message: String },
    #[error("model shape: {0}")]
    Model(String),
    #[error(transparent)]
    Engine(#[from] engine::EngineError),
    #[error(transparent)]
    Run(#[from] sim::RunError),
}

/// What ran the conditions, as recorded in `meta.ron`.
#[derive(Debug, Clone, Serialize)]
pub struct BackendInfo {
    pub mode: &'static str,
    pub cost_model: String,
    pub gpu: Option<GpuSpec>,
    pub model: String,
}

pub trait Backend: Sync {
    fn info(&self) -> BackendInfo;
    /// Prompt token ids are drawn from `0..vocab()`.
    fn vocab(&self) -> u32;
    /// Whether conditions may run at once (true for simulation; a real GPU
    /// runs one condition at a time so they do not disturb each other).
    fn parallel_conditions(&self) -> bool;
    /// KV-cache blocks (null block included) an engine with `engine` gets,
    /// when the backend knows it before running.
    fn kv_blocks(&self, engine: &EngineConfig) -> Option<usize>;
    fn run(&self, engine: &EngineConfig, script: &Script) -> Result<RunRecords, BackendError>;
}

/// The backends `mode` runs on, in order (`both`: real, then sim); real
/// and both fail until the issue-5 runner exists.
pub fn make_backends(mode: Mode, cost: &CostSource) -> Result<Vec<Box<dyn Backend>>, BackendError> {
    match mode {
        Mode::Real => Err(BackendError::RealNotBuilt("real")),
        Mode::Both => Err(BackendError::RealNotBuilt("both")),
        Mode::Sim => Ok(vec![Box::new(SimBackend::new(cost)?)]),
    }
}

/// Discrete-event simulation with a datasheet roofline cost model.
pub struct SimBackend {
    gpu: GpuSpec,
    model: Qwen3Config,
}

impl SimBackend {
    pub fn new(cost: &CostSource) -> Result<Self, BackendError> {
        let name = match cost {
            CostSource::Profile(p) => {
                return Err(BackendError::ProfileUnsupported(p.display().to_string()))
            }
            CostSource::Datasheet(name) => name,
        };
        let gpu = calibration::datasheet::lookup(name).map_err(|e| BackendError::UnknownGpu {
            name: name.clone(),
            message: e.to_string(),
        })?;
        let model =
            Qwen3Config::preset(DEFAULT_MODEL).map_err(|e| BackendError::Model(e.to_string()))?;
        Ok(Self { gpu, model })
    }
}

impl SimBackend {
    fn cost(&self) -> RooflineModel {
        RooflineModel::new(self.gpu.clone(), ModelShape::from_qwen3(&self.model))
    }
}

impl Backend for SimBackend {
    fn info(&self) -> BackendInfo {
        BackendInfo {
            mode: "sim",
            cost_model: "roofline (datasheet)".into(),
            gpu: Some(self.gpu.clone()),
            model: DEFAULT_MODEL.into(),
        }
    }

    fn vocab(&self) -> u32 {
        // Regular tokens only: a real run on the same script must not feed
        // the special (control) tokens above them.
        let size = u32::try_from(self.model.vocab_size).unwrap_or(u32::MAX);
        size.min(sim::workload::QWEN3_REGULAR_VOCAB)
    }

    fn parallel_conditions(&self) -> bool {
        true
    }

    fn kv_blocks(&self, engine_cfg: &EngineConfig) -> Option<usize> {
        Some(
            engine_cfg
                .num_gpu_blocks
                .unwrap_or_else(|| self.cost().kv_cache_blocks(engine_cfg)),
        )
    }

    fn run(&self, engine_cfg: &EngineConfig, script: &Script) -> Result<RunRecords, BackendError> {
        let blocks = self.kv_blocks(engine_cfg).unwrap_or(0);
        let runner = SimRunner::new(Arc::new(self.cost()), blocks);
        let mut engines = vec![EngineCore::new(engine_cfg.clone(), runner)?];
        let mut workload = ScriptWorkload::new(script.clone());
        let mut clock = VirtualClock::new();
        Ok(sim::run(&mut engines, &mut clock, &mut workload)?)
    }
}
