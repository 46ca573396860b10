//! The operator model as a cost model: fitted parameters, where they came
//! from, the errors measured on what the fits held out, and the expected
//! error of a prediction that follows from them.
//!
//! Contract:
//! - [`OperatorProfile`] is what `exp transfer-check` writes
//!   (`operator_profile.ron`): the parameters fitted on every measurement,
//!   and per hold-out (a model size on the whole GPU, or a (model, SM count)
//!   slice) the median and largest |error| of its decode and prefill steps.
//!   A file of another [`FORMAT`] (or with fields this build does not know)
//!   is an error that says how to refit.
//! - [`OperatorCostModel`] prices a step of a model shape on a GPU with the
//!   parameters ([`super::step_time`]).
//! - [`OperatorProfile::expected_error`]: on the calibration GPU, a family
//!   size gets the largest error its own hold-out showed; another shape the
//!   largest over every held-out size. On another GPU the largest error of
//!   the held-out SM-count slices nearest in SM count is added (the slices
//!   are the only measured change of GPU), unless that GPU (or that slice of
//!   it) was itself measured and held out (`gpu` hold-outs): then its own
//!   errors, the larger of them and the size's for a shape outside the
//!   family. What no hold-out covers (a size
//!   outside the family's range, an SM count outside the slices', another
//!   architecture) is listed in [`ExpectedError::off_ground`].

pub use super::held_out::{summarise, HeldOutError};
use super::{step_time, OperatorParams};
use engine::BatchShape;
use serde::{Deserialize, Serialize};
use sim::{CostModel, GpuHistory, GpuSpec, ModelShape};
use std::path::Path;

/// The layout version of an operator profile file (2: decode attention's
/// cost per key and KV head, `decode_kv_key_cost`; 3: the key costs of the
/// kernel of a warp per KV head, `heads_kv_key_cost` and `heads_key_cost`;
/// 4: `decode_block_cost` counted per query head in blocks that write split
/// partials, so a format-3 value would price them wrong; 5: a GEMM's wave
/// latency paid for its first [`super::gemm::EXPOSED_WAVES`] waves only, so
/// a format-4 `gemm_wave_latency` is fitted for another model; 6: a prefill
/// attention iteration's unshared latency, `prefill_iteration_latency`; 7:
/// the cost per key of the decode block that finishes last,
/// `decode_lone_key_cost`; 8: decode attention reads its keys at
/// `read_bandwidth_share` (was `gemm_bandwidth_share`, the GEMMs' alone) and
/// the contention exponent joins its times only, so a format-7 file's shares
/// are fitted for another model; 9: a chip-wide cap on the busy SMs'
/// tensor rate, `burst_flops_share`, stream-K for a product's last partial
/// wave, and a slice's GEMMs reading the whole chip's DRAM, so a format-8
/// file's GEMM shares and rates are fitted for another model; 10: decode
/// attention's blocks run in waves of what fits on an SM, each as long as a
/// block alone, `decode_wave_latency` and `decode_warp_key_latency`; the
/// longest block's tail is the last wave, so `decode_lone_key_cost` is gone).
pub const FORMAT: u32 = 10;

#[derive(Debug, thiserror::Error)]
pub enum OperatorProfileError {
    #[error("reading {path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error(
        "{path}: not an operator profile this exp reads ({message}); refit it with \
         `exp transfer-check --out DIR` (no GPU needed) and pass DIR/operator_profile.ron"
    )]
    Parse { path: String, message: String },
    #[error(
        "{path}: operator profile format {found}, this exp reads format {FORMAT}; refit it \
         with `exp transfer-check --out DIR` and pass DIR/operator_profile.ron"
    )]
    Format { path: String, found: u32 },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OperatorProfile {
    pub format: u32,
    /// Datasheet name of the GPU every measurement was taken on.
    pub gpu: String,
    /// The measurement files, and when the fit ran.
    pub fitted_on: String,
    pub params: OperatorParams,
    pub held_out: Vec<HeldOutError>,
}

/// What a prediction's error is expected to be, and why.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ExpectedError {
    /// Expected |error| of decode steps (and so of inter-token latency), %.
    pub decode_pct: f64,
    /// Expected |error| of prefill steps (and so of time to first token), %.
    pub prefill_pct: f64,
    /// Which hold-outs the figures come from.
    pub basis: String,
    /// What no hold-out measured; empty when the prediction is on measured ground.
    pub off_ground: Vec<String>,
}

impl ExpectedError {
    /// The larger of the two: a bound for figures that mix both (throughput).
    pub fn step_pct(&self) -> f64 {
        self.decode_pct.max(self.prefill_pct)
    }
}

impl OperatorProfile {
    pub fn parse(text: &str, path: &str) -> Result<Self, OperatorProfileError> {
        // The format first, so an old file says "refit" rather than "field x".
        #[derive(Deserialize)]
        struct Version {
            #[serde(default)]
            format: u32,
        }
        let version: Option<Version> = ron::from_str(text).ok();
        match version.map(|v| v.format) {
            // No format field (a file of bare parameters) fails below.
            Some(0) | Some(FORMAT) | None => {}
            Some(found) => {
                return Err(OperatorProfileError::Format {
                    path: path.into(),
                    found,
                })
            }
        }
        ron::from_str(text).map_err(|e| OperatorProfileError::Parse {
            path: path.into(),
            message: e.to_string(),
        })
    }

    pub fn load(path: &Path) -> Result<Self, OperatorProfileError> {
        let p = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| OperatorProfileError::Io {
            path: p.clone(),
            source,
        })?;
        Self::parse(&text, &p)
    }

    /// The largest `kind` error of the `held_out` rows `own` accepts when
    /// there are any, else of those `any` accepts: a size's own hold-out
    /// where it was measured, every size's where it was not.
    fn worst_own_else_any(
        &self,
        held_out: &str,
        own: &dyn Fn(&HeldOutError) -> bool,
        any: &dyn Fn(&HeldOutError) -> bool,
        kind: &str,
    ) -> f64 {
        let has_own = self
            .held_out
            .iter()
            .any(|e| e.held_out == held_out && own(e));
        if has_own {
            self.worst(held_out, own, kind)
        } else {
            self.worst(held_out, any, kind)
        }
    }

    fn worst(&self, held_out: &str, keep: impl Fn(&HeldOutError) -> bool, kind: &str) -> f64 {
        self.held_out
            .iter()
            .filter(|e| e.held_out == held_out && e.kind == kind && keep(e))
            .map(|e| e.max_abs_pct)
            .fold(0.0, f64::max)
    }

    /// The expected error of predictions for `model` (its preset name, when
    /// it is one) of `shape` on `gpu`; `family` holds the held-out sizes'
    /// shapes, whose range is the measured ground.
    pub fn expected_error(
        &self,
        model: Option<&str>,
        shape: &ModelShape,
        gpu: &GpuSpec,
        family: &[(String, ModelShape)],
    ) -> ExpectedError {
        let mut off_ground = Vec::new();
        let member = model.filter(|m| {
            self.held_out
                .iter()
                .any(|e| e.held_out == "model" && e.model == *m)
        });
        let whole = whole_sm_count(&self.gpu);
        let (mut decode, mut prefill, mut basis) = match member {
            Some(m) => (
                self.worst("model", |e| e.model == m && e.sm_count == whole, "decode"),
                self.worst("model", |e| e.model == m && e.sm_count == whole, "prefill"),
                format!(
                    "the fit without {m}, on its steps on the whole {}",
                    self.gpu
                ),
            ),
            None => {
                let size = shape.linear_params() as f64;
                let sizes: Vec<f64> = family
                    .iter()
                    .map(|(_, s)| s.linear_params() as f64)
                    .collect();
                let (lo, hi) = sizes
                    .iter()
                    .fold((f64::MAX, 0.0f64), |(l, h), s| (l.min(*s), h.max(*s)));
                if !sizes.is_empty() && (size < lo || size > hi) {
                    off_ground.push(format!(
                        "a model of {:.1} B linear parameters, outside the {:.1}-{:.1} B of the held-out sizes",
                        size * 1e-9,
                        lo * 1e-9,
                        hi * 1e-9
                    ));
                }
                (
                    self.worst("model", |e| e.sm_count == whole, "decode"),
                    self.worst("model", |e| e.sm_count == whole, "prefill"),
                    format!(
                        "the largest over every held-out model size on the whole {}",
                        self.gpu
                    ),
                )
            }
        };
        let measured = self.measured_on(&gpu.name, gpu.sm_count, member);
        if let Some((d, p, on)) = measured.filter(|_| gpu.name != self.gpu) {
            // Another GPU that was measured and held out: its own errors.
            (decode, prefill) = match member {
                Some(_) => (d, p),
                None => (decode.max(d), prefill.max(p)),
            };
            basis = match member {
                Some(m) => format!(
                    "the fit on the {} predicting {m} measured on {on}",
                    self.gpu
                ),
                None => format!(
                    "{basis}, or the fit on the {} predicting every size measured on {on}, \
                     whichever is larger",
                    self.gpu
                ),
            };
        } else if gpu.name != self.gpu {
            let slices: Vec<u32> = self
                .held_out
                .iter()
                .filter(|e| e.held_out == "sm_count")
                .map(|e| e.sm_count)
                .collect();
            let distance = |s: u32| (f64::from(s).ln() - f64::from(gpu.sm_count.max(1)).ln()).abs();
            if let Some(nearest) = slices
                .iter()
                .copied()
                .min_by(|a, b| distance(*a).total_cmp(&distance(*b)))
            {
                // The size's own slice, else every size's (the larger sizes
                // were not measured on slices).
                let own = |e: &HeldOutError| {
                    e.sm_count == nearest && member.is_some_and(|m| e.model == m)
                };
                let any = |e: &HeldOutError| e.sm_count == nearest;
                decode += self.worst_own_else_any("sm_count", &own, &any, "decode");
                prefill += self.worst_own_else_any("sm_count", &own, &any, "prefill");
                basis.push_str(&format!(
                    ", plus the fit on the whole {} predicting its {nearest}-SM slices",
                    self.gpu
                ));
                let (lo, hi) = slices
                    .iter()
                    .fold((u32::MAX, 0), |(l, h), s| (l.min(*s), h.max(*s)));
                if gpu.sm_count < lo {
                    off_ground.push(format!(
                        "{} SMs, fewer than the {lo} of the smallest held-out slice",
                        gpu.sm_count
                    ));
                }
                if gpu.sm_count > hi.max(whole) {
                    off_ground.push(format!(
                        "{} SMs, more than the calibration GPU's",
                        gpu.sm_count
                    ));
                }
            }
            if !same_architecture(&self.gpu, &gpu.name) {
                off_ground.push(format!(
                    "{}: another architecture than the {} (its per-SM rates, clocks and caches \
                     were never held out)",
                    gpu.name, self.gpu
                ));
            }
        }
        ExpectedError {
            decode_pct: decode,
            prefill_pct: prefill,
            basis,
            off_ground,
        }
    }

    /// The largest decode and prefill errors of the `gpu` hold-out measured on
    /// the datasheet GPU of `name` (`NAME` or a slice `NAME@Nsm`) at
    /// `sm_count` SMs: `model`'s own when it was measured there, else every
    /// size's; with a description of the ground. `None` when no such GPU was
    /// held out.
    fn measured_on(
        &self,
        name: &str,
        sm_count: u32,
        model: Option<&str>,
    ) -> Option<(f64, f64, String)> {
        let base = name.split('@').next().unwrap_or(name);
        let here = |e: &HeldOutError| {
            e.held_out == "gpu" && e.gpu.as_deref() == Some(base) && e.sm_count == sm_count
        };
        if !self.held_out.iter().any(here) {
            return None;
        }
        let own = |e: &HeldOutError| here(e) && model.is_some_and(|m| e.model == m);
        let worst = |kind: &str| self.worst_own_else_any("gpu", &own, &here, kind);
        let ground = if name.contains('@') {
            format!("{base} limited to {sm_count} SMs")
        } else {
            format!("the {base}")
        };
        Some((worst("decode"), worst("prefill"), ground))
    }
}

/// SMs of the calibration GPU as the datasheet has it (132 for the H200).
fn whole_sm_count(name: &str) -> u32 {
    crate::datasheet::lookup(name).map_or(0, |g| g.sm_count)
}

/// The architecture of a datasheet GPU, by its name; `None` for a name this
/// table does not know (a user's own entry).
pub fn architecture(name: &str) -> Option<&'static str> {
    const PREFIXES: [(&str, &str); 8] = [
        ("h100", "hopper"),
        ("h200", "hopper"),
        ("a100", "ampere"),
        ("a10g", "ampere"),
        ("rtx-30", "ampere"),
        ("l40", "ada"),
        ("l4", "ada"),
        ("rtx-40", "ada"),
    ];
    PREFIXES
        .iter()
        .find(|(prefix, _)| name.starts_with(prefix))
        .map(|(_, arch)| *arch)
}

fn same_architecture(a: &str, b: &str) -> bool {
    architecture(a).is_some() && architecture(a) == architecture(b)
}

/// The operator model pricing one model shape on one GPU.
#[derive(Debug, Clone)]
pub struct OperatorCostModel {
    pub params: OperatorParams,
    pub shape: ModelShape,
    pub gpu: GpuSpec,
}

impl CostModel for OperatorCostModel {
    fn step_seconds(&self, batch: &BatchShape) -> f64 {
        step_time(&self.params, &self.shape, &self.gpu, batch).total()
    }

    fn step_seconds_after(&self, batch: &BatchShape, idle_s: f64, history: &mut GpuHistory) -> f64 {
        super::burst::after(&self.params, &self.shape, &self.gpu, batch, idle_s, history)
    }
}

#[cfg(test)]
#[path = "profile_tests.rs"]
mod tests;
