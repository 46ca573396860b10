//! Which cost model prices simulated steps (and predicts measured ones).
//!
//! Contract ([`resolve`]):
//! - [`CostSource::Profile`]: the calibrated profile file, as measured;
//!   [`CostSource::ProfileOn`]: that profile moved to another datasheet GPU
//!   with `calibration::transfer`. A profile fitted for another model shape is
//!   rejected (its coefficients would price the wrong model).
//! - [`CostSource::Default`] (no `--profile`): the shipped profile
//!   [`SHIPPED_PROFILE`] when the model is `qwen3-0.6b` and the file exists
//!   (transferred when the GPU is not the one it was measured on), otherwise
//!   the datasheet roofline of the GPU. The file is read at run time, so a
//!   checkout without it builds and falls back; which one was used is in
//!   [`ResolvedCost::description`] (written to `meta.ron`).
//! - [`CostSource::Datasheet`]: the roofline, always.
//!
//! KV capacity in sim mode always comes from the GPU's memory (datasheet) and
//! the model shape.

use super::{BackendError, LoadedModel};
use calibration::CostProfile;
use sim::{CostModel, GpuSpec, ModelShape, RooflineModel};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The profile measured on the lent H200 for Qwen3-0.6B (committed later;
/// absent means "use the roofline").
pub const SHIPPED_PROFILE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../calibration/profiles/h200-qwen3-0.6b.ron"
);

/// Where sim mode's step costs come from.
#[derive(Debug, Clone, PartialEq)]
pub enum CostSource {
    /// Roofline from a datasheet GPU name (`calibration::datasheet`).
    Datasheet(String),
    /// A calibrated profile file, as measured.
    Profile(PathBuf),
    /// A calibrated profile file transferred to a datasheet GPU.
    ProfileOn(PathBuf, String),
    /// The shipped profile on this GPU when it applies, else its roofline.
    Default(String),
}

/// A cost model ready to price steps, and what to call it in records.
#[derive(Clone)]
pub struct ResolvedCost {
    pub model: Arc<dyn CostModel>,
    /// GPU whose memory sizes the simulated KV cache.
    pub gpu: GpuSpec,
    pub shape: ModelShape,
    pub description: String,
}

impl std::fmt::Debug for ResolvedCost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.description)
    }
}

impl ResolvedCost {
    /// KV-cache blocks (null block included) the simulated GPU holds for `engine`.
    pub fn kv_blocks(&self, engine: &engine::EngineConfig) -> usize {
        RooflineModel::new(self.gpu.clone(), self.shape.clone()).kv_cache_blocks(engine)
    }
}

fn gpu(name: &str) -> Result<GpuSpec, BackendError> {
    calibration::datasheet::lookup(name).map_err(|e| BackendError::UnknownGpu {
        name: name.to_string(),
        message: e.to_string(),
    })
}

fn roofline(gpu: GpuSpec, shape: ModelShape) -> ResolvedCost {
    ResolvedCost {
        description: format!("roofline (datasheet {})", gpu.name),
        model: Arc::new(RooflineModel::new(gpu.clone(), shape.clone())),
        gpu,
        shape,
    }
}

fn load_profile(path: &Path, shape: &ModelShape) -> Result<CostProfile, BackendError> {
    let err = |message: String| BackendError::Profile {
        path: path.display().to_string(),
        message,
    };
    // ProfileError already starts with the path; keep the message alone.
    let profile = CostProfile::load(path).map_err(|e| {
        let text = e.to_string();
        let shown = path.display().to_string();
        err(text
            .strip_prefix(&format!("{shown}: "))
            .unwrap_or(&text)
            .to_string())
    })?;
    if &profile.model != shape {
        return Err(err(format!(
            "the profile was fitted for another model shape ({} layers, hidden {}, vocab {}) \
             than the one run ({} layers, hidden {}, vocab {}); pass the matching --model",
            profile.model.num_layers,
            profile.model.hidden,
            profile.model.vocab,
            shape.num_layers,
            shape.hidden,
            shape.vocab
        )));
    }
    Ok(profile)
}

fn from_profile(profile: CostProfile, path: &Path, target: Option<GpuSpec>) -> ResolvedCost {
    let (profile, how) = match target {
        Some(t) if t != profile.gpu => {
            let how = format!("transferred from {} to {}", profile.gpu.name, t.name);
            (calibration::transfer::transfer(&profile, &t), how)
        }
        _ => (profile, "as measured".to_string()),
    };
    ResolvedCost {
        description: format!(
            "calibrated profile {} ({how}; device {}, held-out error median {:.1} %)",
            path.display(),
            profile.provenance.device,
            profile.provenance.holdout_error_pct_median
        ),
        gpu: profile.gpu.clone(),
        shape: profile.model.clone(),
        model: Arc::new(profile),
    }
}

/// The cost model `source` names, for `model`.
pub fn resolve(source: &CostSource, model: &LoadedModel) -> Result<ResolvedCost, BackendError> {
    let shape = ModelShape::from_qwen3(&model.config);
    match source {
        CostSource::Datasheet(name) => Ok(roofline(gpu(name)?, shape)),
        CostSource::Profile(path) => Ok(from_profile(load_profile(path, &shape)?, path, None)),
        CostSource::ProfileOn(path, name) => {
            let target = gpu(name)?;
            Ok(from_profile(
                load_profile(path, &shape)?,
                path,
                Some(target),
            ))
        }
        CostSource::Default(name) => {
            let target = gpu(name)?;
            let shipped = Path::new(SHIPPED_PROFILE);
            // Any model of Qwen3-0.6B's shape (preset or a downloaded copy).
            let applies = shape == ModelShape::qwen3_0_6b();
            if applies && shipped.is_file() {
                Ok(from_profile(
                    load_profile(shipped, &shape)?,
                    shipped,
                    Some(target),
                ))
            } else {
                Ok(roofline(target, shape))
            }
        }
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
        let provenance = Provenance {
            device: "test".into(),
            model: "tiny".into(),
            engine_commit: "x".into(),
            date: "2026-01-01".into(),
            method: "measured".into(),
            samples: 0,
            holdout_error_pct_median: 1.0,
            holdout_error_pct_p90: 2.0,
        };
        let gpu = calibration::datasheet::lookup("h200-sxm").unwrap();
        let p = CostProfile::from_coefficients(&[1e-5; NUM_FEATURES], gpu, shape, provenance);
        let path = dir.join("p.ron");
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
        if Path::new(SHIPPED_PROFILE).is_file() {
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
}
