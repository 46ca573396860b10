//! Fitting a [`CostProfile`] to measured steps.
//!
//! Contract: [`fit`] takes measured (batch shape, seconds) samples, holds out
//! every `HOLDOUT_EVERY`-th sample, fits the remaining ones by non-negative
//! least squares on *relative* error (each row is divided by its measured
//! time, so a 1 ms decode step counts as much as a 30 ms prefill), and reports
//! the error on the held-out samples. Knots above any sample are filled by
//! continuing the curve's last fitted segment, so the profile never predicts a
//! zero cost for a batch larger than any it was measured on. The dense and
//! LM-head curves are fitted as non-negative increments, so they never fall.

use crate::features::{
    features, CHUNK_KV, DENSE_KNOTS, DENSE_START, LM_KNOTS, LM_START, NUM_FEATURES,
};
use crate::nnls::nnls;
use crate::profile::{CostProfile, Provenance};
use engine::BatchShape;
use sim::{CostModel, GpuSpec, ModelShape};
use thiserror::Error;

/// Every n-th sample is held out of the fit.
pub const HOLDOUT_EVERY: usize = 5;

#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    pub shape: BatchShape,
    pub seconds: f64,
}

#[derive(Debug, Error, PartialEq)]
pub enum FitError {
    #[error("only {0} usable samples; the fit needs at least {1}")]
    TooFewSamples(usize, usize),
}

/// The result of a fit: the profile and the errors behind its provenance.
#[derive(Debug, Clone)]
pub struct Fit {
    pub profile: CostProfile,
    /// |relative error| in percent of each held-out sample, in sample order.
    pub holdout_errors_pct: Vec<f64>,
}

fn finite(values: &[f64]) -> Vec<f64> {
    values.iter().copied().filter(|x| x.is_finite()).collect()
}

/// The project's percentile (`sim::records::percentile`) of the finite
/// `values`; NaN when there are none.
pub fn percentile(values: &[f64], p: f64) -> f64 {
    sim::records::percentile(&finite(values), p).unwrap_or(f64::NAN)
}

/// The median (statrs', through `sim::records::median`) of the finite
/// `values`; NaN when there are none.
pub fn median(values: &[f64]) -> f64 {
    sim::records::median(&finite(values)).unwrap_or(f64::NAN)
}

pub fn relative_error_pct(predicted: f64, measured: f64) -> f64 {
    (predicted - measured).abs() / measured * 100.0
}

/// Coordinate-descent sweeps [`fit`] gives the NNLS solver at most.
pub const NNLS_SWEEPS: usize = 200_000;

/// Samples a fit can use: a positive finite time and a non-empty batch.
fn usable(samples: &[Sample]) -> Vec<&Sample> {
    samples
        .iter()
        .filter(|s| s.seconds.is_finite() && s.seconds > 0.0 && !s.shape.seqs.is_empty())
        .collect()
}

/// Whether the `i`-th usable sample is held out of the fit.
fn held_out(i: usize) -> bool {
    i % HOLDOUT_EVERY == HOLDOUT_EVERY - 1
}

/// The non-negative least-squares problem [`fit`] solves: one row of `A` per
/// fitted (usable, not held-out) sample, its features in the increment basis
/// divided by its measured time, and `b` all ones. Returns (rows of `A`, `b`).
pub fn least_squares_problem(samples: &[Sample], model: &ModelShape) -> (Vec<Vec<f64>>, Vec<f64>) {
    usable(samples)
        .into_iter()
        .enumerate()
        .filter(|(i, _)| !held_out(*i))
        .map(|(_, s)| {
            let mut row = features(&s.shape, model);
            to_increment_basis(&mut row, DENSE_START, DENSE_KNOTS.len());
            to_increment_basis(&mut row, LM_START, LM_KNOTS.len());
            (row.iter().map(|f| f / s.seconds).collect(), 1.0)
        })
        .unzip()
}

pub fn fit(
    samples: &[Sample],
    gpu: GpuSpec,
    model: ModelShape,
    mut provenance: Provenance,
) -> Result<Fit, FitError> {
    let usable = usable(samples);
    let min = 2 * NUM_FEATURES;
    if usable.len() < min {
        return Err(FitError::TooFewSamples(usable.len(), min));
    }
    let held: Vec<&Sample> = usable
        .iter()
        .enumerate()
        .filter(|(i, _)| held_out(*i))
        .map(|(_, s)| *s)
        .collect();
    let (rows, rhs) = least_squares_problem(samples, &model);
    let solved = nnls(&rows, &rhs, NNLS_SWEEPS);
    let mut coefficients = [0.0; NUM_FEATURES];
    coefficients.copy_from_slice(&solved);
    from_increments(&mut coefficients, DENSE_START, DENSE_KNOTS.len());
    from_increments(&mut coefficients, LM_START, LM_KNOTS.len());
    // A knot is exercised when some sample puts weight on it or above it:
    // in the increment basis that is a non-zero column.
    let exercised = |j: usize| rows.iter().any(|r: &Vec<f64>| r[j] != 0.0);
    extend_past_last_exercised(&mut coefficients, DENSE_START, &DENSE_KNOTS, &exercised);
    extend_past_last_exercised(&mut coefficients, LM_START, &LM_KNOTS, &exercised);

    provenance.samples = usable.len();
    let mut profile = CostProfile::from_coefficients(&coefficients, gpu, model, provenance);
    // Without a short chunk over cached context among the samples its keys
    // are priced as a decode's, not free.
    if !exercised(CHUNK_KV) {
        profile.chunk_s_per_kv_token = None;
    }
    let holdout_errors_pct: Vec<f64> = held
        .iter()
        .map(|s| relative_error_pct(profile.step_seconds(&s.shape), s.seconds))
        .collect();
    profile.provenance.holdout_error_pct_median = median(&holdout_errors_pct);
    profile.provenance.holdout_error_pct_p90 = percentile(&holdout_errors_pct, 90.0);
    Ok(Fit {
        profile,
        holdout_errors_pct,
    })
}

/// Rewrites a curve's hat weights `w` in place as weights on its increments:
/// the value at knot `i` is the sum of increments `0..=i`, so increment `j`
/// carries `sum(w[j..])`. Non-negative increments make the fitted curve
/// non-decreasing (more tokens or more sampled sequences never cost less),
/// which also keeps the dense and LM-head curves from trading off where
/// decode-only samples cannot tell them apart.
fn to_increment_basis(row: &mut [f64; NUM_FEATURES], start: usize, len: usize) {
    let mut tail = 0.0;
    for j in (start..start + len).rev() {
        tail += row[j];
        row[j] = tail;
    }
}

/// Turns fitted increments back into knot values (prefix sums).
fn from_increments(c: &mut [f64; NUM_FEATURES], start: usize, len: usize) {
    for j in start + 1..start + len {
        c[j] += c[j - 1];
    }
}

/// Continues a curve above its last exercised knot along the last fitted
/// segment's slope. In the increment basis every knot at or below the highest
/// one a sample touches is exercised, so only the top of a curve can be
/// unexercised.
fn extend_past_last_exercised(
    c: &mut [f64; NUM_FEATURES],
    start: usize,
    knots: &[f64],
    exercised: &dyn Fn(usize) -> bool,
) {
    let Some(last) = (0..knots.len()).rev().find(|&i| exercised(start + i)) else {
        return;
    };
    let slope = match last {
        0 => c[start] / knots[0],
        _ => ((c[start + last] - c[start + last - 1]) / (knots[last] - knots[last - 1])).max(0.0),
    };
    for i in last + 1..knots.len() {
        c[start + i] = c[start + last] + slope * (knots[i] - knots[last]);
    }
}
