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
//!   model). [`ProfileLookup::Folder`]: the first `*.ron` in the folder, by
//!   file name, whose shape matches; none matching (or no folder) means the
//!   roofline. A `*.ron` there that does not load is an error (a broken tree),
//!   not a silent fallback. [`ProfileLookup::Roofline`]: the roofline.
//! - Otherwise the datasheet roofline of the target GPU.
//!
//! [`resolve`] maps the command line's [`CostSource`]: `--profile` alone is
//! used as measured; with `--gpu` it is transferred there; without
//! `--profile` the shipped profiles ([`SHIPPED_PROFILES`], read at run time,
//! so a checkout without them builds and falls back) are searched. Which cost
//! model was used, and from where, is in [`ResolvedCost::description`] and
//! [`ResolvedCost::basis`] (written to `meta.ron`).
//!
//! KV capacity in sim mode always comes from the GPU's memory (datasheet) and
//! the model shape ([`sim::cost::kv_cache_blocks`]), whatever prices steps.

use super::{BackendError, LoadedModel};
use calibration::CostProfile;
use serde::Serialize;
use sim::{CostModel, GpuSpec, ModelShape, RooflineModel};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Folder of the calibrated profiles shipped with the source tree (the one
/// measured on the lent H200 for Qwen3-0.6B is `h200-qwen3-0.6b.ron`).
pub const SHIPPED_PROFILES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../calibration/profiles");

/// [`SHIPPED_PROFILES`] without `..` where the folder exists, so records
/// name the profile by a readable path.
pub fn shipped_profiles_dir() -> PathBuf {
    std::fs::canonicalize(SHIPPED_PROFILES).unwrap_or_else(|_| PathBuf::from(SHIPPED_PROFILES))
}

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
}

/// Where [`cost_for`] looks for a calibrated profile.
#[derive(Debug, Clone, PartialEq)]
pub enum ProfileLookup {
    /// This file; its model shape must be the model's.
    File(PathBuf),
    /// The first `*.ron` here, by file name, of the model's shape, if any.
    Folder(PathBuf),
    /// No profile: the datasheet roofline.
    Roofline,
}

/// What prices the steps, for records.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub enum CostBasis {
    /// A calibrated profile, moved to the target GPU when measured elsewhere.
    Profile {
        path: PathBuf,
        /// Datasheet name of the GPU it was measured on.
        measured_on: String,
        /// The profile's provenance method on the target GPU.
        method: String,
    },
    /// sim's datasheet roofline with its default efficiencies.
    Roofline,
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
    }
}

fn read_profile(path: &Path) -> Result<CostProfile, BackendError> {
    // ProfileError already starts with the path; keep the message alone.
    CostProfile::load(path).map_err(|e| {
        let text = e.to_string();
        let shown = path.display().to_string();
        BackendError::Profile {
            path: shown.clone(),
            message: text
                .strip_prefix(&format!("{shown}: "))
                .unwrap_or(&text)
                .to_string(),
        }
    })
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

/// The first `*.ron` in `dir` (by file name) fitted for `shape`.
fn find_in_folder(
    dir: &Path,
    shape: &ModelShape,
) -> Result<Option<(PathBuf, CostProfile)>, BackendError> {
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
            return Ok(Some((path, profile)));
        }
    }
    Ok(None)
}

fn from_profile(measured: CostProfile, path: &Path, target: Option<&GpuSpec>) -> ResolvedCost {
    let source = measured.gpu.name.clone();
    let (profile, how) = match target {
        Some(t) if *t != measured.gpu => (
            calibration::transfer::transfer(&measured, t),
            format!("measured on {source}, transferred to {}", t.name),
        ),
        _ => (measured.clone(), format!("as measured on {source}")),
    };
    ResolvedCost {
        description: format!(
            "calibrated profile {} ({how}; device {}, held-out error median {:.1} % there)",
            path.display(),
            measured.provenance.device,
            measured.provenance.holdout_error_pct_median
        ),
        basis: CostBasis::Profile {
            path: path.to_path_buf(),
            measured_on: source,
            method: profile.provenance.method.clone(),
        },
        gpu: profile.gpu.clone(),
        shape: profile.model.clone(),
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
        ProfileLookup::File(path) => Some((path.clone(), load_profile(path, shape)?)),
        ProfileLookup::Folder(dir) => find_in_folder(dir, shape)?,
        ProfileLookup::Roofline => None,
    };
    Ok(match found {
        Some((path, profile)) => from_profile(profile, &path, Some(target)),
        None => roofline(target, shape),
    })
}

/// The cost model `source` names, for `model`.
pub fn resolve(source: &CostSource, model: &LoadedModel) -> Result<ResolvedCost, BackendError> {
    let shape = ModelShape::from_qwen3(&model.config);
    let shipped = || ProfileLookup::Folder(shipped_profiles_dir());
    match source {
        CostSource::Datasheet(name) => cost_for(&shape, &gpu(name)?, &ProfileLookup::Roofline),
        CostSource::Profile(path) => Ok(from_profile(load_profile(path, &shape)?, path, None)),
        CostSource::ProfileOn(path, name) => {
            cost_for(&shape, &gpu(name)?, &ProfileLookup::File(path.clone()))
        }
        CostSource::Default(name) => cost_for(&shape, &gpu(name)?, &shipped()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::ModelChoice;
    use calibration::features::NUM_FEATURES;
    use calibration::Provenance;

    fn model(name: &str) -> LoadedModel {
        LoadedModel::config_only(&ModelChoice::Preset(name.into())).unwrap()
    }

    fn write_profile(dir: &Path, shape: ModelShape) -> PathBuf {
        write_profile_as(dir, "p.ron", "tiny", shape)
    }

    fn write_profile_as(dir: &Path, file: &str, label: &str, shape: ModelShape) -> PathBuf {
        let provenance = Provenance {
            device: "test".into(),
            model: label.into(),
            engine_commit: "x".into(),
            date: "2026-01-01".into(),
            method: "measured".into(),
            samples: 0,
            holdout_error_pct_median: 1.0,
            holdout_error_pct_p90: 2.0,
        };
        let gpu = calibration::datasheet::lookup("h200-sxm").unwrap();
        let p = CostProfile::from_coefficients(&[1e-5; NUM_FEATURES], gpu, shape, provenance);
        let path = dir.join(file);
        p.save(&path).unwrap();
        path
    }

    #[test]
    fn default_uses_the_shipped_profile_only_when_it_applies() {
        let tiny = resolve(&CostSource::Default("h200-sxm".into()), &model("tiny")).unwrap();
        assert!(tiny.description.starts_with("roofline"), "{tiny:?}");
        let qwen = resolve(
            &CostSource::Default("h100-sxm".into()),
            &model("qwen3-0.6b"),
        )
        .unwrap();
        if Path::new(SHIPPED_PROFILES)
            .join("h200-qwen3-0.6b.ron")
            .is_file()
        {
            assert!(qwen.description.contains("transferred"), "{qwen:?}");
        } else {
            assert!(qwen.description.starts_with("roofline"), "{qwen:?}");
        }
        assert_eq!(qwen.gpu.name, "h100-sxm");
    }

    #[test]
    fn profiles_load_transfer_and_must_match_the_model() {
        let dir = std::env::temp_dir().join(format!("cost-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let tiny = model("tiny");
        let path = write_profile(&dir, ModelShape::from_qwen3(&tiny.config));
        let own = resolve(&CostSource::Profile(path.clone()), &tiny).unwrap();
        assert!(own.description.contains("as measured"), "{own:?}");
        assert_eq!(own.gpu.name, "h200-sxm");
        let moved = resolve(
            &CostSource::ProfileOn(path.clone(), "a100-80gb-sxm".into()),
            &tiny,
        )
        .unwrap();
        assert!(moved.description.contains("transferred"), "{moved:?}");
        assert_eq!(moved.gpu.name, "a100-80gb-sxm");
        let batch = engine::BatchShape {
            seqs: vec![engine::SeqShape {
                new_tokens: 1,
                context_before: 100,
                samples: true,
            }],
        };
        assert!(moved.model.step_seconds(&batch) > own.model.step_seconds(&batch));
        let e = resolve(&CostSource::Profile(path.clone()), &model("qwen3-0.6b")).unwrap_err();
        assert!(
            e.to_string().contains("p.ron") && e.to_string().contains("shape"),
            "{e}"
        );
        let e = resolve(&CostSource::ProfileOn(path, "gtx-1".into()), &tiny).unwrap_err();
        assert!(e.to_string().contains("gtx-1"), "{e}");
        std::fs::remove_dir_all(dir).ok();
    }

    #[test]
    fn a_folder_profile_is_matched_by_model_shape_not_by_its_label() {
        let dir = std::env::temp_dir().join(format!("cost-folder-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let qwen = ModelShape::qwen3_0_6b();
        let mut other = qwen.clone();
        other.num_layers = 12;
        // Sorted first, labelled as the model, but of another shape: skipped.
        write_profile_as(&dir, "a.ron", "qwen3-0.6b", other);
        // Labelled unlike any --model name, of the model's shape: used.
        write_profile_as(
            &dir,
            "b.ron",
            "qwen3-0.6b (synthetic weights, seed 0)",
            qwen.clone(),
        );
        let l4 = calibration::datasheet::lookup("l4").unwrap();
        let folder = ProfileLookup::Folder(dir.clone());
        let got = cost_for(&qwen, &l4, &folder).unwrap();
        assert!(
            got.description.contains("b.ron")
                && got
                    .description
                    .contains("measured on h200-sxm, transferred to l4"),
            "{got:?}"
        );
        assert!(got.is_transferred());
        assert_eq!(got.gpu.name, "l4");
        let tiny = ModelShape::from_qwen3(&model("tiny").config);
        let fallback = cost_for(&tiny, &l4, &folder).unwrap();
        assert_eq!(fallback.basis, CostBasis::Roofline);
        let none = cost_for(&qwen, &l4, &ProfileLookup::Folder(dir.join("absent"))).unwrap();
        assert_eq!(none.basis, CostBasis::Roofline);
        // A file in the folder that does not load is a broken tree: an error.
        std::fs::write(dir.join("c.ron"), "(not a profile").unwrap();
        let e = cost_for(&tiny, &l4, &folder).unwrap_err();
        assert!(e.to_string().contains("c.ron"), "{e}");
        std::fs::remove_dir_all(dir).ok();
    }

    #[test]
    fn kv_blocks_come_from_memory_unless_set_explicitly() {
        let h200 = calibration::datasheet::lookup("h200-sxm").unwrap();
        let shape = ModelShape::qwen3_0_6b();
        let cost = cost_for(&shape, &h200, &ProfileLookup::Roofline).unwrap();
        let mut engine = engine::EngineConfig::default();
        assert_eq!(
            cost.kv_blocks(&engine),
            sim::cost::kv_cache_blocks(&h200, &shape, &engine)
        );
        engine.num_gpu_blocks = Some(123);
        assert_eq!(cost.kv_blocks(&engine), 123);
    }
}
