//! Which cost model prices simulated steps (and predicts measured ones).
//!
//! Contract: [`cost_for`] is the one place that turns (model shape, target
//! GPU, where to look for a profile) into a cost model; `exp run`/`exp
//! validate` ([`resolve`]) and `exp plan` both go through it.
//! - A calibrated profile applies to a model when its model shape equals the
//!   model's ([`ModelShape`] equality; the provenance's model text is only a
//!   label). It is moved to the target GPU with `calibration::transfer`
//!   (unchanged when the target is the GPU it was measured on).
//! - [`ProfileLookup::File`] (`--profile FILE`): that profile; one fitted for
//!   another model shape is rejected (its coefficients would price the wrong
//!   model). [`ProfileLookup::Shipped`]: the first profile built into `exp`
//!   ([`super::shipped`]), by file name, whose shape matches.
//!   [`ProfileLookup::Folder`] (`--profiles-dir DIR`, in place of the shipped
//!   ones): the first `*.ron` in the folder, by file name, whose shape
//!   matches. None matching (or no folder) means the roofline. A profile
//!   there that does not load is an error (a broken tree), not a silent
//!   fallback. [`ProfileLookup::Roofline`]: the roofline.
//! - Otherwise the datasheet roofline of the target GPU.
//!
//! [`resolve`] maps the command line's [`CostSource`]: `--profile` alone is
//! used as measured; with `--gpu` it is transferred there; without
//! `--profile` the shipped profiles (or `--profiles-dir`'s) are searched.
//! Which cost model was used, and from where (a path, or
//! `shipped:<file name>`), is in [`ResolvedCost::description`] and
//! [`ResolvedCost::basis`] (written to `meta.ron`).
//!
//! [`check_compares_with`] refuses, for `--mode both`, a cost model that was
//! not measured on the kind of runner it is compared with.
//!
//! KV capacity in sim mode always comes from the GPU's memory (datasheet) and
//! the model shape ([`sim::cost::kv_cache_blocks`]), whatever prices steps.

use super::shipped::{SHIPPED, SHIPPED_OPERATORS};
use super::{BackendError, LoadedModel, RunnerKind};
use calibration::operators::profile::{ExpectedError, OperatorCostModel, OperatorProfile};
use calibration::CostProfile;
use serde::Serialize;
use sim::{CostModel, GpuSpec, ModelShape, RooflineModel};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Where sim mode's step costs come from (the command line's view).
#[derive(Debug, Clone, PartialEq)]
pub enum CostSource {
    /// Roofline from a datasheet GPU name (`calibration::datasheet`).
    Datasheet(String),
    /// A calibrated profile file, as measured.
    Profile(PathBuf),
    /// A calibrated profile file transferred to a datasheet GPU.
    ProfileOn(PathBuf, String),
    /// A shipped profile of the model's shape on this GPU, else its roofline.
    Default(String),
    /// A profile of the model's shape from this folder instead of the
    /// shipped ones, on this GPU, else its roofline.
    Folder(PathBuf, String),
    /// The operator model on this GPU, from `file` or the shipped operator
    /// profile; `conflicting` is a calibrated profile (or folder) also named,
    /// which is refused.
    Operators {
        gpu: String,
        file: Option<PathBuf>,
        conflicting: Option<PathBuf>,
    },
}

/// Where [`cost_for`] looks for a calibrated profile.
#[derive(Debug, Clone, PartialEq)]
pub enum ProfileLookup {
    /// This file; its model shape must be the model's.
    File(PathBuf),
    /// The first `*.ron` here, by file name, of the model's shape, if any.
    Folder(PathBuf),
    /// The first profile built into `exp`, by file name, of the model's
    /// shape, if any.
    Shipped,
    /// No profile: the datasheet roofline.
    Roofline,
}

/// What prices the steps, for records.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub enum CostBasis {
    /// A calibrated profile, moved to the target GPU when measured elsewhere.
    Profile {
        /// The file's path, or `shipped:<file name>` for a profile built
        /// into `exp`.
        source: String,
        /// Datasheet name of the GPU it was measured on.
        measured_on: String,
        /// The profile's provenance method on the target GPU.
        method: String,
    },
    /// sim's datasheet roofline with its default efficiencies.
    Roofline,
    /// The operator model (`calibration::operators`): a file's path, or
    /// `shipped:<file name>`.
    Operators { source: String },
}

/// A cost model ready to price steps, and what to call it in records.
#[derive(Clone)]
pub struct ResolvedCost {
    pub model: Arc<dyn CostModel>,
    /// GPU whose steps are priced and whose memory sizes the simulated KV cache.
    pub gpu: GpuSpec,
    pub shape: ModelShape,
    pub basis: CostBasis,
    pub description: String,
    /// The device a calibrated profile was measured on, as its provenance
    /// names it (`cpu (N threads)` for the CPU runner); `None` for the roofline.
    pub measured_device: Option<String>,
    /// The error this cost model's hold-outs measured for such predictions;
    /// `None` where none was measured (a profile away from where it was
    /// validated, the roofline).
    pub expected_error: Option<ExpectedError>,
}

impl std::fmt::Debug for ResolvedCost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.description)
    }
}

impl ResolvedCost {
    /// KV-cache blocks (null block included) the simulated GPU holds for
    /// `engine`; an explicit `num_gpu_blocks` wins, as in the engine.
    pub fn kv_blocks(&self, engine: &engine::EngineConfig) -> usize {
        engine
            .num_gpu_blocks
            .unwrap_or_else(|| sim::cost::kv_cache_blocks(&self.gpu, &self.shape, engine))
    }

    /// What prices the steps, in a few words for figure subtitles:
    /// `roofline`, `profile FILE.ron`, or `profile FILE.ron (measured on
    /// GPU, transferred)`.
    pub fn short_label(&self) -> String {
        match &self.basis {
            CostBasis::Roofline => "roofline".into(),
            CostBasis::Operators { .. } => "operator model".into(),
            CostBasis::Profile {
                source,
                measured_on,
                ..
            } => {
                let path = source.strip_prefix("shipped:").unwrap_or(source);
                let file = Path::new(path)
                    .file_name()
                    .map_or_else(|| path.to_string(), |f| f.to_string_lossy().into_owned());
                if self.is_transferred() {
                    format!("profile {file} (measured on {measured_on}, transferred)")
                } else {
                    format!("profile {file}")
                }
            }
        }
    }

    /// Whether a calibrated profile measured on another GPU was moved here.
    pub fn is_transferred(&self) -> bool {
        matches!(&self.basis, CostBasis::Profile { measured_on, .. } if *measured_on != self.gpu.name)
    }
}

fn gpu(name: &str) -> Result<GpuSpec, BackendError> {
    calibration::datasheet::lookup(name).map_err(|e| BackendError::UnknownGpu {
        name: name.to_string(),
        message: e.to_string(),
    })
}

fn roofline(gpu: &GpuSpec, shape: &ModelShape) -> ResolvedCost {
    ResolvedCost {
        description: format!("roofline (datasheet {})", gpu.name),
        model: Arc::new(RooflineModel::new(gpu.clone(), shape.clone())),
        gpu: gpu.clone(),
        shape: shape.clone(),
        basis: CostBasis::Roofline,
        measured_device: None,
        expected_error: None,
    }
}

/// A profile error as a [`BackendError`] naming `origin` once.
fn profile_error(origin: &str, e: calibration::ProfileError) -> BackendError {
    // ProfileError already starts with the origin; keep the message alone.
    let text = e.to_string();
    BackendError::Profile {
        path: origin.to_string(),
        message: text
            .strip_prefix(&format!("{origin}: "))
            .unwrap_or(&text)
            .to_string(),
    }
}

fn read_profile(path: &Path) -> Result<CostProfile, BackendError> {
    CostProfile::load(path).map_err(|e| profile_error(&path.display().to_string(), e))
}

fn load_profile(path: &Path, shape: &ModelShape) -> Result<CostProfile, BackendError> {
    let profile = read_profile(path)?;
    if &profile.model != shape {
        return Err(BackendError::Profile {
            path: path.display().to_string(),
            message: format!(
                "the profile was fitted for another model shape ({} layers, hidden {}, vocab {}) \
                 than the one run ({} layers, hidden {}, vocab {}); pass the matching --model",
                profile.model.num_layers,
                profile.model.hidden,
                profile.model.vocab,
                shape.num_layers,
                shape.hidden,
                shape.vocab
            ),
        });
    }
    Ok(profile)
}

/// The first `*.ron` in `dir` (by file name) fitted for `shape`, with its path.
fn find_in_folder(
    dir: &Path,
    shape: &ModelShape,
) -> Result<Option<(String, CostProfile)>, BackendError> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Ok(None);
    };
    let mut files: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "ron"))
        .collect();
    files.sort();
    for path in files {
        let profile = read_profile(&path)?;
        if profile.model == *shape {
            return Ok(Some((path.display().to_string(), profile)));
        }
    }
    Ok(None)
}

/// The first shipped profile (by file name) fitted for `shape`, with its label.
fn find_shipped(shape: &ModelShape) -> Result<Option<(String, CostProfile)>, BackendError> {
    for shipped in SHIPPED {
        let label = shipped.label();
        let profile = shipped.load().map_err(|e| profile_error(&label, e))?;
        if profile.model == *shape {
            return Ok(Some((label, profile)));
        }
    }
    Ok(None)
}

/// `measured`, known in records as `source`, on `target` (as measured without one).
fn from_profile(measured: CostProfile, source: String, target: Option<&GpuSpec>) -> ResolvedCost {
    let measured_on = measured.gpu.name.clone();
    let (profile, how) = match target {
        Some(t) if *t != measured.gpu => (
            calibration::transfer::transfer(&measured, t),
            format!("measured on {measured_on}, transferred to {}", t.name),
        ),
        _ => (measured.clone(), format!("as measured on {measured_on}")),
    };
    ResolvedCost {
        description: format!(
            "calibrated profile {source} ({how}; device {}, held-out error median {:.1} % there)",
            measured.provenance.device, measured.provenance.holdout_error_pct_median
        ),
        basis: CostBasis::Profile {
            source,
            measured_on,
            method: profile.provenance.method.clone(),
        },
        gpu: profile.gpu.clone(),
        shape: profile.model.clone(),
        measured_device: Some(measured.provenance.device.clone()),
        expected_error: None,
        model: Arc::new(profile),
    }
}

/// The cost model of `shape` on `target`: the profile `lookup` finds for the
/// shape, moved to `target`, else `target`'s datasheet roofline (see the
/// module docs).
pub fn cost_for(
    shape: &ModelShape,
    target: &GpuSpec,
    lookup: &ProfileLookup,
) -> Result<ResolvedCost, BackendError> {
    let found = match lookup {
        ProfileLookup::File(path) => Some((path.display().to_string(), load_profile(path, shape)?)),
        ProfileLookup::Folder(dir) => find_in_folder(dir, shape)?,
        ProfileLookup::Shipped => find_shipped(shape)?,
        ProfileLookup::Roofline => None,
    };
    Ok(match found {
        Some((source, profile)) => from_profile(profile, source, Some(target)),
        None => roofline(target, shape),
    })
}

/// Whether a profile was measured on the CPU reference runner (`exp
/// calibrate --backend cpu` records the device as `cpu (N threads)`).
fn measured_on_cpu(cost: &ResolvedCost) -> bool {
    cost.measured_device
        .as_deref()
        .is_some_and(|d| d.trim_start().to_ascii_lowercase().starts_with("cpu"))
}

/// Refuses a cost model that cannot stand for `runner` in `--mode both`,
/// where the sim side's errors against the real side are the result: the
/// CPU runner needs a profile measured on the CPU (a GPU profile or a
/// roofline would report every CPU step ~99 % too fast), and the CUDA
/// runner one that was not.
pub fn check_compares_with(cost: &ResolvedCost, runner: RunnerKind) -> Result<(), BackendError> {
    match (runner, measured_on_cpu(cost)) {
        (RunnerKind::Cpu, false) => Err(BackendError::CostMismatch(format!(
            "--mode both --backend cpu compares the CPU runner with {}, a cost model of the \
             GPU {}: pass a profile measured on the CPU (--profile P.ron, written by `exp \
             calibrate --backend cpu --grid small --out P.ron` with the same --model), or use \
             --mode real",
            cost.description, cost.gpu.name
        ))),
        (RunnerKind::Cuda, true) => Err(BackendError::CostMismatch(format!(
            "--mode both runs the CUDA runner, but the cost model is {}, measured on the CPU \
             runner: pass a profile measured on the GPU (or none, for the shipped one), or \
             --backend cpu",
            cost.description
        ))),
        _ => Ok(()),
    }
}

/// `--mode both` on a GPU: the sim must price the GPU the real runner ran
/// on, or every error it reports is that of another GPU. `device` is the
/// runner's device name; one [`crate::calibrate::datasheet_key`] does not
/// know (or the CPU) passes, as does a slice of the same GPU (`NAME@Nsm`,
/// whose chip [`calibration::operators::slices::chip_of`] names).
pub fn check_same_gpu(cost: &ResolvedCost, device: &str) -> Result<(), BackendError> {
    let Some(key) = crate::calibrate::datasheet_key(device) else {
        return Ok(());
    };
    if calibration::operators::slices::chip_of(&cost.gpu).name == key {
        return Ok(());
    }
    Err(BackendError::CostMismatch(format!(
        "--mode both ran the real runner on {device} (datasheet {key}) but the sim prices {}: \
         pass --gpu {key} so that both sides are the same GPU",
        cost.gpu.name
    )))
}

/// The cost model `source` names, for `model`.
pub fn resolve(source: &CostSource, model: &LoadedModel) -> Result<ResolvedCost, BackendError> {
    let shape = ModelShape::from_qwen3(&model.config);
    match source {
        CostSource::Datasheet(name) => cost_for(&shape, &gpu(name)?, &ProfileLookup::Roofline),
        CostSource::Profile(path) => Ok(from_profile(
            load_profile(path, &shape)?,
            path.display().to_string(),
            None,
        )),
        CostSource::ProfileOn(path, name) => {
            cost_for(&shape, &gpu(name)?, &ProfileLookup::File(path.clone()))
        }
        CostSource::Default(name) => cost_for(&shape, &gpu(name)?, &ProfileLookup::Shipped),
        CostSource::Folder(dir, name) => {
            cost_for(&shape, &gpu(name)?, &ProfileLookup::Folder(dir.clone()))
        }
        CostSource::Operators {
            gpu: name,
            file,
            conflicting,
        } => operator_cost(&shape, &gpu(name)?, file.as_deref(), conflicting.as_deref()),
    }
}

/// The Qwen3 family presets (the operator model's hold-outs cover them), with
/// their shapes.
fn family() -> Vec<(String, ModelShape)> {
    engine::model::PRESETS
        .iter()
        .filter(|m| m.starts_with("qwen3-"))
        .filter_map(|m| {
            engine::model::Qwen3Config::preset(m)
                .ok()
                .map(|c| (m.to_string(), ModelShape::from_qwen3(&c)))
        })
        .collect()
}

/// The operator model of `shape` on `target`, from `file` or the shipped
/// operator profile, with the error its hold-outs measured for such a
/// prediction. `conflicting`, a calibrated profile (or folder) also named on
/// the command line, is refused.
pub fn operator_cost(
    shape: &ModelShape,
    target: &GpuSpec,
    file: Option<&Path>,
    conflicting: Option<&Path>,
) -> Result<ResolvedCost, BackendError> {
    if let Some(p) = conflicting {
        return Err(BackendError::CostMismatch(format!(
            "--cost-model operators prices steps with the operator model; {} names a \
             calibrated profile too: drop it, or use --cost-model profile",
            p.display()
        )));
    }
    let (profile, source) = match file {
        Some(path) => (
            OperatorProfile::load(path).map_err(|e| BackendError::CostMismatch(e.to_string()))?,
            path.display().to_string(),
        ),
        None => {
            let shipped = SHIPPED_OPERATORS;
            let origin = format!("shipped:{}", shipped.name);
            (
                OperatorProfile::parse(shipped.text, &origin)
                    .map_err(|e| BackendError::CostMismatch(e.to_string()))?,
                origin,
            )
        }
    };
    let family = family();
    let member = family
        .iter()
        .find(|(_, s)| s == shape)
        .map(|(m, _)| m.as_str());
    let expected = profile.expected_error(member, shape, target, &family);
    Ok(ResolvedCost {
        description: format!(
            "operator model {source} (fitted on {} measurements) on datasheet {}; expected \
             error decode {:.0} %, prefill {:.0} % ({})",
            profile.gpu, target.name, expected.decode_pct, expected.prefill_pct, expected.basis
        ),
        model: Arc::new(OperatorCostModel {
            params: profile.params,
            shape: shape.clone(),
            gpu: target.clone(),
        }),
        gpu: target.clone(),
        shape: shape.clone(),
        basis: CostBasis::Operators { source },
        measured_device: None,
        expected_error: Some(expected),
    })
}

#[cfg(test)]
mod tests;
