//! Where a plan's step costs and KV capacity come from.
//!
//! Contract:
//! - With a calibrated profile for the model (`--profile FILE`, or the first
//!   profile, by file name, in the shipped profiles folder whose provenance
//!   names the `--model` preset; its model shape must match that preset's, or
//!   the plan fails naming the file), each target GPU gets the profile moved
//!   there by `calibration::transfer::transfer` (unchanged on the GPU it was
//!   measured on).
//! - Otherwise each target GPU gets sim's datasheet `RooflineModel` with its
//!   default efficiencies, and the plan says so ([`Basis::Roofline`]).
//! - KV capacity is sim's helper `RooflineModel::kv_cache_blocks` (memory
//!   size × `gpu_memory_utilization` − weights − activation reserve, in
//!   blocks, null block included), whatever prices the steps: memory
//!   accounting needs only the datasheet and the model shape. An explicit
//!   `num_gpu_blocks` setting wins, as in the engine.

use super::error::PlanError;
use calibration::transfer::transfer;
use calibration::CostProfile;
use engine::{BatchShape, EngineConfig, SeqShape};
use serde::Serialize;
use sim::{CostModel, GpuSpec, ModelShape, RooflineModel};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Folder of the profiles shipped with the source tree.
pub const SHIPPED_PROFILES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../calibration/profiles");

/// What prices a GPU's steps.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub enum Basis {
    /// A calibrated profile, moved to this GPU.
    Profile {
        path: PathBuf,
        measured_on: String,
        /// The profile's provenance method after transfer.
        method: String,
    },
    /// sim's datasheet roofline (no profile for the model).
    Roofline,
}

/// One target GPU with its cost model.
#[derive(Clone)]
pub struct GpuModel {
    pub gpu: GpuSpec,
    pub model: ModelShape,
    pub cost: Arc<dyn CostModel>,
    pub basis: Basis,
}

impl GpuModel {
    /// `measured` (loaded from `path`) moved to `target`.
    pub fn from_profile(measured: &CostProfile, path: &Path, target: &GpuSpec) -> Self {
        let moved = transfer(measured, target);
        Self {
            gpu: target.clone(),
            model: measured.model.clone(),
            basis: Basis::Profile {
                path: path.to_path_buf(),
                measured_on: measured.gpu.name.clone(),
                method: moved.provenance.method.clone(),
            },
            cost: Arc::new(moved),
        }
    }

    /// sim's roofline for `target`.
    pub fn roofline(target: &GpuSpec, model: &ModelShape) -> Self {
        Self {
            gpu: target.clone(),
            model: model.clone(),
            cost: Arc::new(RooflineModel::new(target.clone(), model.clone())),
            basis: Basis::Roofline,
        }
    }

    /// One line for reports.
    pub fn describe(&self) -> String {
        match &self.basis {
            Basis::Profile {
                path, measured_on, ..
            } if *measured_on == self.gpu.name => {
                format!(
                    "calibrated profile {} (measured on this GPU)",
                    path.display()
                )
            }
            Basis::Profile {
                path, measured_on, ..
            } => format!(
                "calibrated profile {} measured on {measured_on}, transferred",
                path.display()
            ),
            Basis::Roofline => "datasheet roofline (no calibrated profile for this model: \
                                sim's RooflineModel with default efficiencies)"
                .into(),
        }
    }

    /// KV-cache blocks, null block included (see the module docs).
    pub fn kv_blocks(&self, config: &EngineConfig) -> usize {
        config.num_gpu_blocks.unwrap_or_else(|| {
            RooflineModel::new(self.gpu.clone(), self.model.clone()).kv_cache_blocks(config)
        })
    }

    /// Milliseconds of a decode-only step of `batch` sequences at `context` tokens each.
    pub fn decode_step_ms(&self, batch: usize, context: usize) -> f64 {
        let seq = SeqShape {
            new_tokens: 1,
            context_before: u32::try_from(context).unwrap_or(u32::MAX),
            samples: true,
        };
        let shape = BatchShape {
            seqs: vec![seq; batch],
        };
        self.cost.step_seconds(&shape) * 1e3
    }

    /// Tokens per second of one step prefilling a fresh `tokens`-token prompt.
    pub fn prefill_tok_s(&self, tokens: usize) -> f64 {
        let shape = BatchShape {
            seqs: vec![SeqShape {
                new_tokens: u32::try_from(tokens).unwrap_or(u32::MAX),
                context_before: 0,
                samples: true,
            }],
        };
        tokens as f64 / self.cost.step_seconds(&shape)
    }
}

/// Tokens the KV cache holds: every block but the null block. (vLLM's
/// "GPU KV cache size" log line counts the null block too: `blocks * block_size`.)
pub fn kv_capacity_tokens(blocks: usize, block_size: usize) -> usize {
    blocks.saturating_sub(1) * block_size
}

fn shape_mismatch(path: &Path, profile: &CostProfile, model_name: &str) -> PlanError {
    PlanError::ProfileMismatch {
        path: path.to_path_buf(),
        message: format!(
            "the profile is for model {:?} but its shape {:?} is not --model {model_name}'s",
            profile.provenance.model, profile.model
        ),
    }
}

/// The profile to transfer: `explicit` if given (its model shape must match),
/// else the first `*.ron` in `shipped_dir` (by file name) for the model; `None`
/// when there is none.
pub fn choose_profile(
    explicit: Option<&Path>,
    shipped_dir: &Path,
    model_name: &str,
    shape: &ModelShape,
) -> Result<Option<(PathBuf, CostProfile)>, PlanError> {
    if let Some(path) = explicit {
        let profile = CostProfile::load(path)?;
        if profile.model != *shape {
            return Err(shape_mismatch(path, &profile, model_name));
        }
        return Ok(Some((path.to_path_buf(), profile)));
    }
    let Ok(dir) = std::fs::read_dir(shipped_dir) else {
        return Ok(None);
    };
    let mut files: Vec<PathBuf> = dir
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "ron"))
        .collect();
    files.sort();
    for path in files {
        // A shipped profile that does not load is a broken tree: say so.
        let profile = CostProfile::load(&path)?;
        if profile.provenance.model != model_name {
            continue;
        }
        // Same model name, other shape: a stale or mislabelled file; say so
        // rather than quietly falling back to the roofline.
        if profile.model != *shape {
            return Err(shape_mismatch(&path, &profile, model_name));
        }
        return Ok(Some((path, profile)));
    }
    Ok(None)
}
