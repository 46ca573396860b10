//! cb_sweep on each target GPU, priced by the plan's cost model.
//!
//! Contract: the experiments crate's `cb_sweep` runs unchanged through
//! [`crate::driver::run_experiment`] on a [`PlanBackend`]: sim's event loop
//! and `SimRunner` with the plan's cost model for that GPU (transferred
//! profile or roofline) and its KV capacity. Files land in the experiment's
//! usual layout under `DIR/<gpu>/cb_sweep/`; [`combined_csv`] joins the
//! GPUs' summaries into one table with a leading `gpu` column.

use super::cost::GpuModel;
use super::error::PlanError;
use super::inputs::gpu_dir;
use crate::backend::{Backend, BackendError, BackendInfo};
use crate::catalogue;
use crate::driver::{run_experiment, RunOptions, RunOutput};
use crate::script::{Script, ScriptWorkload};
use crate::settings::Settings;
use crate::table::csv_field;
use engine::{EngineConfig, EngineCore};
use sim::{RunRecords, SimRunner, VirtualClock};
use std::path::Path;

/// A sim backend with any cost model.
pub struct PlanBackend<'a> {
    pub target: &'a GpuModel,
    pub model_name: &'a str,
}

impl Backend for PlanBackend<'_> {
    fn info(&self) -> BackendInfo {
        BackendInfo {
            mode: "sim",
            cost_model: self.target.describe(),
            gpu: Some(self.target.gpu.clone()),
            model: self.model_name.to_string(),
            runner: None,
        }
    }

    fn vocab(&self) -> u32 {
        super::evaluate::prompt_vocab(&self.target.model)
    }

    fn as_parallel(&self) -> Option<&(dyn Backend + Sync)> {
        Some(self)
    }

    fn kv_blocks(&self, engine: &EngineConfig) -> Option<usize> {
        Some(self.target.kv_blocks(engine))
    }

    fn run(&self, engine: &EngineConfig, script: &Script) -> Result<RunRecords, BackendError> {
        let runner = SimRunner::new(self.target.cost.clone(), self.target.kv_blocks(engine));
        let mut engines = vec![EngineCore::new(engine.clone(), runner)?];
        let mut workload = ScriptWorkload::new(script.clone());
        Ok(sim::run(
            &mut engines,
            &mut VirtualClock::new(),
            &mut workload,
        )?)
    }
}

/// Runs cb_sweep for `target` under `out/<gpu>/`.
pub fn run_cb_sweep(
    target: &GpuModel,
    model_name: &str,
    settings: &Settings,
    out: &Path,
    seed: u64,
    quiet: bool,
) -> Result<RunOutput, PlanError> {
    let exp = catalogue::find("cb_sweep").ok_or(PlanError::MissingExperiment("cb_sweep"))?;
    let backend = PlanBackend { target, model_name };
    let opts = RunOptions {
        out: gpu_dir(out, &target.gpu.name),
        seed,
        quiet,
        prompts: None,
    };
    run_experiment(exp, settings, &[&backend], &opts).map_err(|error| PlanError::CbSweep {
        gpu: target.gpu.name.clone(),
        error,
    })
}

/// One table of every GPU's cb_sweep summary, `gpu` column first.
pub fn combined_csv(runs: &[(String, &RunOutput)]) -> String {
    let mut out = String::new();
    for (i, (gpu, run)) in runs.iter().enumerate() {
        for (j, line) in run.report.summary.to_csv().lines().enumerate() {
            match (i, j) {
                (0, 0) => out.push_str("gpu,"),
                (_, 0) => continue,
                _ => {
                    out.push_str(&csv_field(gpu));
                    out.push(',');
                }
            }
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}
