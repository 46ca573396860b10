//! cb_sweep on each target GPU, priced by the plan's cost model.
//!
//! Contract: the experiments crate's `cb_sweep` runs unchanged through
//! [`crate::driver::run_experiment`] on the GPU's [`SimBackend`] (the same
//! backend `exp run --mode sim` uses, with the plan's cost model for that GPU
//! and its KV capacity). Files land in the experiment's usual layout under
//! `DIR/<gpu>/cb_sweep/`; [`combined_csv`] joins the GPUs' summaries into one
//! table with a leading `gpu` column.

use super::error::PlanError;
use super::inputs::gpu_dir;
use crate::backend::SimBackend;
use crate::catalogue;
use crate::driver::{run_experiment, RunOptions, RunOutput};
use crate::settings::Settings;
use crate::table::{labelled_csv, Table};
use std::path::Path;

/// Runs cb_sweep on `target` under `out/<gpu>/`.
pub fn run_cb_sweep(
    target: &SimBackend,
    settings: &Settings,
    out: &Path,
    seed: u64,
    quiet: bool,
    date_utc: &str,
) -> Result<RunOutput, PlanError> {
    let exp = catalogue::find("cb_sweep").ok_or(PlanError::MissingExperiment("cb_sweep"))?;
    let gpu = &target.cost().gpu.name;
    let opts = RunOptions {
        out: gpu_dir(out, gpu),
        seed,
        quiet,
        prompts: None,
        date_utc: date_utc.to_string(),
    };
    run_experiment(exp, settings, &[target], &opts).map_err(|error| PlanError::CbSweep {
        gpu: gpu.clone(),
        error,
    })
}

/// One table of every GPU's cb_sweep summary, `gpu` column first.
pub fn combined_csv(runs: &[(String, &RunOutput)]) -> String {
    let tables: Vec<(&str, &Table)> = runs
        .iter()
        .map(|(gpu, run)| (gpu.as_str(), &run.report.summary))
        .collect();
    labelled_csv("gpu", &tables)
}
