//! Command-line options shared by `exp run`, `exp calibrate` and `exp validate`.
//!
//! Contract: `--backend cpu|cuda` (default: cuda; a binary built without
//! `--features cuda` needs `--backend cpu` for real mode), `--model PRESET|DIR` (default
//! `qwen3-0.6b`), `--weights-seed N` (synthetic weights of presets),
//! `--gpu NAME`, `--profile FILE.ron` and `--profiles-dir DIR` pick the sim
//! cost model (see `backend::cost`): a profile is used as measured, or
//! transferred to `--gpu` when both are given; without a profile the first
//! profile of the model's shape among those built into `exp` (the H200 one
//! for Qwen3-0.6B's shape), or in `--profiles-dir` instead, applies, moved to
//! `--gpu`, else the roofline. `--profile` wins over `--profiles-dir`, as in
//! `exp plan`.

use crate::backend::{BackendError, BackendSpec, CostSource, ModelChoice, RunnerKind};
use crate::backend::{DEFAULT_GPU, DEFAULT_MODEL};
use clap::{Args, ValueEnum};
use engine::EngineConfig;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize, Deserialize)]
pub enum BackendArg {
    Cpu,
    Cuda,
}

#[derive(Debug, Clone, PartialEq, Args, Serialize, Deserialize)]
pub struct CostArgs {
    /// GPU from the datasheet table (sim cost model; a --profile is transferred to it).
    #[arg(long)]
    pub gpu: Option<String>,
    /// Calibrated cost profile (RON) as the sim cost model.
    #[arg(long)]
    pub profile: Option<PathBuf>,
    /// Folder of profiles searched instead of the ones built into exp (ignored with --profile).
    #[arg(long)]
    pub profiles_dir: Option<PathBuf>,
    /// What prices simulated steps: a calibrated profile (shipped or --profile,
    /// else the roofline), or the operator model (any Qwen3 size on any
    /// datasheet GPU, with the error its hold-outs measured).
    #[arg(long, value_enum, default_value = "profile")]
    #[serde(default)]
    pub cost_model: CostModelArg,
    /// Operator profile (written by `exp transfer-check`) instead of the one
    /// built into exp; with --cost-model operators.
    #[arg(long)]
    #[serde(default)]
    pub operator_profile: Option<PathBuf>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CostModelArg {
    #[default]
    Profile,
    Operators,
}

impl CostModelArg {
    /// Whether the operator model prices the steps: asked for, or implied by
    /// naming an operator profile.
    pub fn is_operators(self, operator_profile: Option<&std::path::Path>) -> bool {
        self == Self::Operators || operator_profile.is_some()
    }
}

impl CostArgs {
    pub fn source(&self) -> CostSource {
        let gpu = || self.gpu.clone().unwrap_or_else(|| DEFAULT_GPU.into());
        if self
            .cost_model
            .is_operators(self.operator_profile.as_deref())
        {
            return CostSource::Operators {
                gpu: gpu(),
                file: self.operator_profile.clone(),
                conflicting: self.profile.clone().or_else(|| self.profiles_dir.clone()),
            };
        }
        match (&self.profile, &self.gpu, &self.profiles_dir) {
            (Some(p), Some(g), _) => CostSource::ProfileOn(p.clone(), g.clone()),
            (Some(p), None, _) => CostSource::Profile(p.clone()),
            (None, _, Some(dir)) => CostSource::Folder(dir.clone(), gpu()),
            (None, _, None) => CostSource::Default(gpu()),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Args, Serialize, Deserialize)]
pub struct RunnerArgs {
    /// Real-mode runner (default: cuda; a binary built without --features cuda needs cpu).
    #[arg(long, value_enum)]
    pub backend: Option<BackendArg>,
    /// Model preset (qwen3-0.6b, -1.7b, -4b, -8b, -14b, -32b, tiny) or a Hugging Face directory:
    /// config.json and safetensors, or config.json alone (seeded synthetic weights).
    #[arg(long, default_value = DEFAULT_MODEL)]
    pub model: String,
    /// Seed of the synthetic weights of a preset model.
    #[arg(long, default_value_t = 0)]
    pub weights_seed: u64,
    /// CUDA runner only: run on N of the GPU's SMs (a CUDA green context),
    /// a GPU of another balance between arithmetic, bandwidth and latency.
    #[arg(long, value_name = "N")]
    pub sm_count: Option<usize>,
}

impl RunnerArgs {
    pub fn kind(&self) -> RunnerKind {
        match self.backend {
            Some(BackendArg::Cpu) => RunnerKind::Cpu,
            Some(BackendArg::Cuda) => RunnerKind::Cuda,
            None => RunnerKind::default(),
        }
    }

    /// `--sm-count`, refused for the CPU runner (it has no SMs to limit).
    pub fn sm_count(&self) -> Result<Option<usize>, BackendError> {
        match (self.sm_count, self.kind()) {
            (Some(0), _) => Err(BackendError::RunnerOption(
                "--sm-count 0: give at least one SM, or leave --sm-count out for the whole GPU"
                    .into(),
            )),
            (Some(n), RunnerKind::Cpu) => Err(BackendError::RunnerOption(format!(
                "--sm-count {n} limits the CUDA runner's SMs; the CPU runner has none (use --backend cuda)"
            ))),
            (n, _) => Ok(n),
        }
    }

    pub fn spec(
        &self,
        cost: &CostArgs,
        engine: &EngineConfig,
    ) -> Result<BackendSpec, BackendError> {
        Ok(BackendSpec {
            cost: cost.source(),
            model: ModelChoice::parse(&self.model)?,
            runner: self.kind(),
            weights_seed: self.weights_seed,
            sm_count: self.sm_count()?,
            engine: engine.clone(),
            endpoint: None,
        })
    }
}
