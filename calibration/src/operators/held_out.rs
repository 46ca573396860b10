//! The errors of the fits' hold-outs, summarised per hold-out, model, SM
//! count and step kind: what an operator profile keeps of `transfer.csv`
//! and states as the expected error of its predictions
//! ([`super::profile::OperatorProfile::expected_error`]).
//!
//! Contract: [`summarise`] groups [`HeldOutRow`]s by hold-out (`model`,
//! `sm_count` or `gpu`), the GPU of a `gpu` hold-out (targets
//! `MODEL@GPU@Nsm`; the calibration GPU's are `MODEL@Nsm`), model, SM count
//! and kind (`decode` or `prefill`, the quantity's first word), keeping the
//! number of steps, the median and the largest |error|.

use super::fit::HeldOutRow;
use serde::{Deserialize, Serialize};

/// The held-out errors of one hold-out and step kind.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HeldOutError {
    /// `model` (a size left out of the fit), `sm_count` (fit on the whole
    /// GPU only) or `gpu` (fit on the calibration GPU, measured on another).
    pub held_out: String,
    /// The GPU of a `gpu` hold-out (datasheet name); none for the others,
    /// which are the calibration GPU's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu: Option<String>,
    pub model: String,
    pub sm_count: u32,
    /// `decode` or `prefill`.
    pub kind: String,
    pub steps: usize,
    pub median_abs_pct: f64,
    pub max_abs_pct: f64,
}

/// Summarises held-out rows per (hold-out, model, SM count, kind).
pub fn summarise(rows: &[HeldOutRow]) -> Vec<HeldOutError> {
    let mut groups: Vec<(HeldOutError, Vec<f64>)> = Vec::new();
    for r in rows {
        // MODEL@Nsm, or MODEL@GPU@Nsm for another GPU.
        let (model, rest) = r.target.split_once('@').unwrap_or((&r.target, "0sm"));
        let (gpu, sms) = match rest.rsplit_once('@') {
            Some((gpu, sms)) => (Some(gpu.to_string()), sms),
            None => (None, rest),
        };
        let sm_count = sms.trim_end_matches("sm").parse().unwrap_or(0);
        let kind = r.quantity.split(' ').next().unwrap_or("").to_string();
        let key = (r.held_out.as_str(), &gpu, model, sm_count, kind.as_str());
        let found = groups.iter_mut().find(|(g, _)| {
            (
                g.held_out.as_str(),
                &g.gpu,
                g.model.as_str(),
                g.sm_count,
                g.kind.as_str(),
            ) == key
        });
        let e = r.error_pct.abs();
        match found {
            Some((_, errors)) => errors.push(e),
            None => groups.push((
                HeldOutError {
                    held_out: r.held_out.clone(),
                    gpu,
                    model: model.to_string(),
                    sm_count,
                    kind,
                    steps: 0,
                    median_abs_pct: 0.0,
                    max_abs_pct: 0.0,
                },
                vec![e],
            )),
        }
    }
    groups
        .into_iter()
        .map(|(mut g, mut errors)| {
            errors.sort_by(f64::total_cmp);
            g.steps = errors.len();
            g.median_abs_pct = errors[errors.len() / 2];
            g.max_abs_pct = errors[errors.len() - 1];
            g
        })
        .collect()
}
