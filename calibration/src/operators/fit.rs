//! Fitting the operator model, and checking it on what the fit never saw.
//!
//! Contract:
//! - [`fit_points`] fits [`OperatorParams`] to measured steps by least
//!   squares on the log of predicted over measured time (every step weighs
//!   the same in relative error), Levenberg–Marquardt from
//!   [`OperatorParams::initial`].
//! - [`leave_one_model_out`]: for each model size, fit on every other size's
//!   steps (all SM counts) and predict the size's steps.
//! - [`sm_count_holdout`]: fit on the whole GPU's steps of every size, predict
//!   every SM-limited step, each slice described only by its SM count, its
//!   share of FLOP/s and its measured copy bandwidth.
//! - Each prediction is a [`HeldOutRow`] (written as `transfer.csv`).

use super::family::FamilyPoint;
use super::{lm, step_time, OperatorParams};

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum OperatorFitError {
    #[error("no measured steps to fit: the fit needs at least {needed}, got {got}")]
    TooFewPoints { needed: usize, got: usize },
    #[error("the fit did not converge to positive finite parameters: {0:?}")]
    Diverged(OperatorParams),
}

/// Index of the overlap exponent in [`OperatorParams::to_vec`].
const OVERLAP: usize = 6;

/// Stored exponent is `1 + x` so that the optimiser's positive `x` keeps it above 1.
fn to_free(p: &OperatorParams) -> Vec<f64> {
    let mut v = p.to_vec();
    v[OVERLAP] -= 1.0;
    v.to_vec()
}

fn from_free(x: &[f64]) -> OperatorParams {
    let mut v = [0.0; OperatorParams::LEN];
    v.copy_from_slice(x);
    v[OVERLAP] += 1.0;
    OperatorParams::from_vec(&v)
}

pub fn predict_s(p: &OperatorParams, pt: &FamilyPoint) -> f64 {
    step_time(p, &pt.shape, &pt.gpu, &pt.step).total()
}

pub fn fit_points(points: &[&FamilyPoint]) -> Result<OperatorParams, OperatorFitError> {
    if points.len() < OperatorParams::LEN {
        return Err(OperatorFitError::TooFewPoints {
            needed: OperatorParams::LEN,
            got: points.len(),
        });
    }
    let residuals = |x: &[f64]| {
        let p = from_free(x);
        points
            .iter()
            .map(|pt| (predict_s(&p, pt) / pt.measured_s).ln())
            .collect::<Vec<f64>>()
    };
    let x = lm::minimize(residuals, &to_free(&OperatorParams::initial()), 300);
    let p = from_free(&x);
    if p.is_valid() {
        Ok(p)
    } else {
        Err(OperatorFitError::Diverged(p))
    }
}

/// One held-out prediction.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct HeldOutRow {
    /// `model` or `sm_count`: what the fit left out.
    pub held_out: String,
    /// The held-out model and SM count, e.g. `qwen3-4b@132sm`.
    pub target: String,
    /// The step, e.g. `decode b=64 ctx=300`.
    pub quantity: String,
    pub predicted_ms: f64,
    pub measured_ms: f64,
    pub error_pct: f64,
}

fn row(held_out: &str, p: &OperatorParams, pt: &FamilyPoint) -> HeldOutRow {
    let predicted = predict_s(p, pt);
    HeldOutRow {
        held_out: held_out.to_string(),
        target: format!("{}@{}sm", pt.model, pt.gpu.sm_count),
        quantity: pt.target(),
        predicted_ms: predicted * 1e3,
        measured_ms: pt.measured_s * 1e3,
        error_pct: 100.0 * (predicted - pt.measured_s) / pt.measured_s,
    }
}

pub fn leave_one_model_out(points: &[FamilyPoint]) -> Result<Vec<HeldOutRow>, OperatorFitError> {
    let mut models: Vec<&str> = points.iter().map(|p| p.model.as_str()).collect();
    models.sort();
    models.dedup();
    let mut out = Vec::new();
    for m in models {
        let train: Vec<&FamilyPoint> = points.iter().filter(|p| p.model != m).collect();
        let params = fit_points(&train)?;
        out.extend(
            points
                .iter()
                .filter(|p| p.model == m)
                .map(|p| row("model", &params, p)),
        );
    }
    Ok(out)
}

pub fn sm_count_holdout(
    points: &[FamilyPoint],
    whole_sm_count: u32,
) -> Result<Vec<HeldOutRow>, OperatorFitError> {
    let train: Vec<&FamilyPoint> = points
        .iter()
        .filter(|p| p.gpu.sm_count == whole_sm_count)
        .collect();
    let params = fit_points(&train)?;
    Ok(points
        .iter()
        .filter(|p| p.gpu.sm_count != whole_sm_count)
        .map(|p| row("sm_count", &params, p))
        .collect())
}
