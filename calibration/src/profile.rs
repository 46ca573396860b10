//! A calibrated cost profile: what one runner on one GPU costs per step.
//!
//! Contract: a [`CostProfile`] is a RON file with its provenance (GPU, model,
//! engine commit, date, fit error) and the coefficients of the terms in
//! [`crate::features`], stored as named, readable fields (times in seconds).
//! It implements `sim::CostModel`; prediction is the dot product of the step's
//! features with the coefficients. The measured GPU's datasheet entry travels
//! with the profile so it can be transferred to another GPU
//! ([`crate::transfer`]). [`CostProfile::load`] reads a file and
//! [`CostProfile::from_ron`] parses text already in memory (a profile embedded
//! in a binary); both check every coefficient (finite, >= 0), the GPU's datasheet figures
//! (positive, finite) and the model shape (every dimension positive), and
//! their errors start with the file's path or the name the caller gives.

use crate::features::{
    features, CHUNK_KV, DECODE_KV, DECODE_SEQ, DENSE_KNOTS, DENSE_START, LM_KNOTS, LM_START,
    NUM_FEATURES, PREFILL_KEYS, PREFILL_PAIRS, PREFILL_SEQ,
};
use engine::BatchShape;
use serde::{Deserialize, Serialize};
use sim::{CostModel, GpuSpec, ModelShape};
use std::path::Path;
use thiserror::Error;

#[derive(Debug, Error)]
pub enum ProfileError {
    #[error("{path}: {message}")]
    Io { path: String, message: String },
    #[error("{path}: line {line}, column {column}: {message}")]
    Parse {
        path: String,
        line: usize,
        column: usize,
        message: String,
    },
    #[error("{path}: {field} must be a finite number >= 0 (found {value})")]
    BadValue {
        path: String,
        field: String,
        value: f64,
    },
    #[error(
        "{path}: gpu {gpu:?}: {field} must be a positive finite number (found {value}); \
         fix the profile's `gpu` entry (the datasheet figures of the GPU it was measured on)"
    )]
    BadGpu {
        path: String,
        gpu: String,
        field: &'static str,
        value: f64,
    },
    #[error(
        "{path}: model.{field} must be positive (found 0); \
         fix the profile's `model` entry (the shape of the model it was fitted for)"
    )]
    BadModel { path: String, field: &'static str },
    #[error("{path}: {field} has {found} knots, expected {expected}")]
    BadKnots {
        path: String,
        field: &'static str,
        found: usize,
        expected: usize,
    },
}

/// Where a profile comes from and how well it fits.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Provenance {
    /// Device name as the driver reports it, or the datasheet key for a transfer.
    pub device: String,
    /// Model preset or directory.
    pub model: String,
    pub engine_commit: String,
    /// UTC date of the measurement.
    pub date: String,
    /// How it was made: `measured`, or `transferred from <profile>`.
    pub method: String,
    pub samples: usize,
    /// Median and 90th percentile of |predicted - measured| / measured on grid
    /// points held out of the fit, in percent.
    pub holdout_error_pct_median: f64,
    pub holdout_error_pct_p90: f64,
}

/// A value of a piecewise-linear curve at one knot.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Knot {
    pub at: f64,
    pub seconds: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CostProfile {
    pub provenance: Provenance,
    /// Datasheet of the GPU the coefficients hold for.
    pub gpu: GpuSpec,
    /// Shape of the model the coefficients hold for.
    pub model: ModelShape,
    /// Fixed cost of a decode-only step (CUDA-graph replay, host work).
    pub step_overhead_graph_s: f64,
    /// Fixed cost of any other step (eager launches, host work).
    pub step_overhead_eager_s: f64,
    /// Dense layers by step token count (knots at `features::DENSE_KNOTS`).
    pub dense: Vec<Knot>,
    /// LM head by sampled sequences (knots at `features::LM_KNOTS`).
    pub lm_head: Vec<Knot>,
    pub decode_s_per_kv_token: f64,
    pub decode_s_per_seq: f64,
    pub prefill_s_per_qk_pair: f64,
    pub prefill_s_per_seq: f64,
    /// Per key a prefill chunk reads (context + new tokens); absent in
    /// profiles written before this term existed.
    #[serde(default)]
    pub prefill_s_per_key: f64,
    /// Per key a short chunk over a cached context reads on the decode
    /// path (`features::CHUNK_KV`); absent in profiles fitted before this
    /// term or on samples without such a chunk, which price those keys as
    /// a decode's (`decode_s_per_kv_token`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chunk_s_per_kv_token: Option<f64>,
}

impl CostProfile {
    /// Builds a profile from a coefficient vector ordered as `features`.
    pub fn from_coefficients(
        c: &[f64; NUM_FEATURES],
        gpu: GpuSpec,
        model: ModelShape,
        provenance: Provenance,
    ) -> Self {
        let knots = |at: &[f64], start: usize| {
            at.iter()
                .enumerate()
                .map(|(i, &a)| Knot {
                    at: a,
                    seconds: c[start + i],
                })
                .collect()
        };
        Self {
            provenance,
            gpu,
            model,
            step_overhead_graph_s: c[0],
            step_overhead_eager_s: c[1],
            dense: knots(&DENSE_KNOTS, DENSE_START),
            lm_head: knots(&LM_KNOTS, LM_START),
            decode_s_per_kv_token: c[DECODE_KV],
            decode_s_per_seq: c[DECODE_SEQ],
            prefill_s_per_qk_pair: c[PREFILL_PAIRS],
            prefill_s_per_seq: c[PREFILL_SEQ],
            prefill_s_per_key: c[PREFILL_KEYS],
            chunk_s_per_kv_token: Some(c[CHUNK_KV]),
        }
    }

    /// The coefficient vector ordered as `features`.
    pub fn coefficients(&self) -> [f64; NUM_FEATURES] {
        let mut c = [0.0; NUM_FEATURES];
        c[0] = self.step_overhead_graph_s;
        c[1] = self.step_overhead_eager_s;
        for (i, k) in self.dense.iter().enumerate().take(DENSE_KNOTS.len()) {
            c[DENSE_START + i] = k.seconds;
        }
        for (i, k) in self.lm_head.iter().enumerate().take(LM_KNOTS.len()) {
            c[LM_START + i] = k.seconds;
        }
        c[DECODE_KV] = self.decode_s_per_kv_token;
        c[DECODE_SEQ] = self.decode_s_per_seq;
        c[PREFILL_PAIRS] = self.prefill_s_per_qk_pair;
        c[PREFILL_SEQ] = self.prefill_s_per_seq;
        c[PREFILL_KEYS] = self.prefill_s_per_key;
        c[CHUNK_KV] = self
            .chunk_s_per_kv_token
            .unwrap_or(self.decode_s_per_kv_token);
        c
    }

    /// Reads and checks the profile in the RON file `path`.
    pub fn load(path: &Path) -> Result<Self, ProfileError> {
        let shown = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| ProfileError::Io {
            path: shown.clone(),
            message: e.to_string(),
        })?;
        Self::from_ron(&text, &shown)
    }

    /// Parses and checks a profile from RON `text` (a file's contents, or a
    /// profile embedded in a binary); errors name it `origin`.
    pub fn from_ron(text: &str, origin: &str) -> Result<Self, ProfileError> {
        let profile: Self = ron::from_str(text).map_err(|e| ProfileError::Parse {
            path: origin.into(),
            line: e.position.line,
            column: e.position.col,
            message: e.code.to_string(),
        })?;
        profile.check(origin)?;
        Ok(profile)
    }

    fn check(&self, path: &str) -> Result<(), ProfileError> {
        // A zero bandwidth or FLOP rate would make a transferred profile
        // infinitely fast (or slow) without any error.
        if let Some((field, value)) = crate::datasheet::invalid_field(&self.gpu) {
            return Err(ProfileError::BadGpu {
                path: path.into(),
                gpu: self.gpu.name.clone(),
                field,
                value,
            });
        }
        let m = &self.model;
        let shape = [
            ("num_layers", m.num_layers),
            ("hidden", m.hidden),
            ("intermediate", m.intermediate),
            ("num_q_heads", m.num_q_heads),
            ("num_kv_heads", m.num_kv_heads),
            ("head_dim", m.head_dim),
            ("vocab", m.vocab),
            ("bytes_per_param", m.bytes_per_param),
        ];
        if let Some((field, _)) = shape.into_iter().find(|(_, v)| *v == 0) {
            return Err(ProfileError::BadModel {
                path: path.into(),
                field,
            });
        }
        if self.dense.len() != DENSE_KNOTS.len() {
            return Err(ProfileError::BadKnots {
                path: path.into(),
                field: "dense",
                found: self.dense.len(),
                expected: DENSE_KNOTS.len(),
            });
        }
        if self.lm_head.len() != LM_KNOTS.len() {
            return Err(ProfileError::BadKnots {
                path: path.into(),
                field: "lm_head",
                found: self.lm_head.len(),
                expected: LM_KNOTS.len(),
            });
        }
        let named = [
            ("step_overhead_graph_s", self.step_overhead_graph_s),
            ("step_overhead_eager_s", self.step_overhead_eager_s),
            ("decode_s_per_kv_token", self.decode_s_per_kv_token),
            ("decode_s_per_seq", self.decode_s_per_seq),
            ("prefill_s_per_qk_pair", self.prefill_s_per_qk_pair),
            ("prefill_s_per_seq", self.prefill_s_per_seq),
            ("prefill_s_per_key", self.prefill_s_per_key),
            (
                "chunk_s_per_kv_token",
                self.chunk_s_per_kv_token.unwrap_or(0.0),
            ),
        ];
        let knots = self
            .dense
            .iter()
            .map(|k| ("dense", k.seconds))
            .chain(self.lm_head.iter().map(|k| ("lm_head", k.seconds)));
        for (field, value) in named.into_iter().chain(knots) {
            if !(value.is_finite() && value >= 0.0) {
                return Err(ProfileError::BadValue {
                    path: path.into(),
                    field: field.into(),
                    value,
                });
            }
        }
        Ok(())
    }

    pub fn save(&self, path: &Path) -> Result<(), ProfileError> {
        let io = |e: std::io::Error| ProfileError::Io {
            path: path.display().to_string(),
            message: e.to_string(),
        };
        let text =
            ron::ser::to_string_pretty(self, ron::ser::PrettyConfig::default()).map_err(|e| {
                ProfileError::Io {
                    path: path.display().to_string(),
                    message: e.to_string(),
                }
            })?;
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(io)?;
        }
        std::fs::write(path, text + "\n").map_err(io)
    }
}

impl CostModel for CostProfile {
    fn step_seconds(&self, batch: &BatchShape) -> f64 {
        let f = features(batch, &self.model);
        let c = self.coefficients();
        f.iter().zip(&c).map(|(a, b)| a * b).sum::<f64>().max(0.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn profile() -> CostProfile {
        let provenance = Provenance {
            device: "test".into(),
            model: "qwen3-0.6b".into(),
            engine_commit: "x".into(),
            date: "2026-01-01".into(),
            method: "measured".into(),
            samples: 0,
            holdout_error_pct_median: 1.0,
            holdout_error_pct_p90: 2.0,
        };
        let gpu = crate::datasheet::lookup("h200-sxm").unwrap();
        CostProfile::from_coefficients(
            &[1e-5; NUM_FEATURES],
            gpu,
            ModelShape::qwen3_0_6b(),
            provenance,
        )
    }

    #[test]
    fn text_in_memory_parses_like_a_file_and_errors_name_its_origin() {
        let p = profile();
        let text = ron::ser::to_string_pretty(&p, ron::ser::PrettyConfig::default()).unwrap();
        assert_eq!(CostProfile::from_ron(&text, "embedded:p.ron").unwrap(), p);
        let err = CostProfile::from_ron("(provenance: oops", "embedded:p.ron").unwrap_err();
        let shown = err.to_string();
        assert!(shown.starts_with("embedded:p.ron: line 1"), "{shown}");
        let negative = text.replacen("prefill_s_per_seq: ", "prefill_s_per_seq: -", 1);
        let err = CostProfile::from_ron(&negative, "embedded:p.ron").unwrap_err();
        assert!(
            matches!(&err, ProfileError::BadValue { path, field, .. }
                if path == "embedded:p.ron" && field == "prefill_s_per_seq"),
            "{err}"
        );
    }
}
