//! Runs the plan: the settings search on every target GPU, the best
//! setting's latency-vs-rate curve, and one `plan.csv` row per GPU.
//!
//! Contract: (GPU, setting) searches, each with its fleet sizing when a
//! fleet is sized ([`search_points`]), run in parallel (rayon) and are each
//! determined by their inputs, so results do not depend on thread count or
//! on which shard ran them; [`finish`] turns every point's outcome into the
//! per-GPU plans. The per-GPU figures are:
//! - `decode_step_b{1,16,64}_ms`: one decode-only step of B sequences, each
//!   at the workload's mean context (mean prompt + half the mean output);
//! - `prefill_tok_s_3200`: one step prefilling a fresh 3,200-token prompt
//!   (the prefix length of prefix_cache), tokens / step time;
//! - `kv_capacity_tokens`: at the best setting (the activation reserve grows
//!   with `max_num_batched_tokens` and `max_num_seqs`), or at the base engine
//!   options when no setting meets the SLO;
//! - `max_qps_under_slo` with the best setting (see [`search::best`]); 0 and
//!   empty settings, with a note saying why, when no setting meets the SLO;
//!   with a cost model that states a held-out error, its band
//!   (`max_qps_band`, [`qps_band`]): the best setting searched again with
//!   every step off by −1 and +1 times that error.

use super::cost::{decode_step_ms, kv_capacity_tokens, prefill_tok_s};
use super::error::PlanError;
use super::fleet_size::{size_fleet, FleetSearch};
use super::inputs::PlanInputs;
use super::search::{self, RatePoint, SettingResult, Steady};
use super::steady;
use crate::backend::{Backend, BackendError, SimBackend};
use indicatif::ProgressBar;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use sim::workload::{PromptSource, TraceReplay};
use sim::Arrival;

/// Fractions of the best rate the figure's curve is drawn at.
pub const CURVE_FRACTIONS: [f64; 7] = [0.25, 0.5, 0.75, 0.9, 1.0, 1.1, 1.25];
pub const PREFILL_TOKENS: usize = 3200;
pub const DECODE_BATCHES: [usize; 3] = [1, 16, 64];

/// One row of `plan.csv`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PlanRow {
    pub gpu: String,
    pub decode_step_ms: [f64; 3],
    pub prefill_tok_s_3200: f64,
    pub kv_capacity_tokens: usize,
    pub max_qps_under_slo: f64,
    pub best_max_num_batched_tokens: Option<usize>,
    pub best_max_num_seqs: Option<usize>,
    /// Requests per run of the best setting's answer.
    pub requests_per_run: Option<usize>,
    pub steady_state: Option<Steady>,
    /// Why `max_qps_under_slo` is 0, when it is; that the best setting sits
    /// at the edge of the grid, or is not at steady state, when it does.
    pub note: Option<String>,
    /// The error the cost model's hold-outs measured for such predictions
    /// (the operator model only).
    pub expected_error: Option<calibration::operators::profile::ExpectedError>,
    /// `max_qps_under_slo` searched again with every step off by −1 and +1
    /// times that error (the best setting, [`qps_band`]): the least and the
    /// most of the three.
    pub max_qps_band: Option<(f64, f64)>,
}

impl PlanRow {
    /// The expected error of `max_qps_under_slo`, %: its band's wider side,
    /// else (no band: no setting met the SLO) the larger step error.
    pub fn qps_error_pct(&self) -> Option<f64> {
        let e = self.expected_error.as_ref()?;
        Some(match self.max_qps_band {
            Some((low, high)) if self.max_qps_under_slo > 0.0 => {
                (self.max_qps_under_slo - low).max(high - self.max_qps_under_slo)
                    / self.max_qps_under_slo
                    * 100.0
            }
            _ => e.step_pct(),
        })
    }
}

/// Everything found for one GPU.
pub struct GpuPlan {
    pub target: SimBackend,
    pub results: Vec<SettingResult>,
    /// Per setting (aligned with `results`), its fleet sizing: empty
    /// without a fleet to size, `None` for a setting not sized.
    pub fleets: Vec<Option<FleetSearch>>,
    pub curve: Vec<RatePoint>,
    pub row: PlanRow,
}

/// One grid point's outcome: the single-engine search of one (GPU,
/// setting) and, when a fleet is sized, that setting's fleet. A shard's
/// `shard.ron` holds these for its points.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PointResult {
    /// Position in [`grid_points`].
    pub index: usize,
    pub setting: SettingResult,
    pub fleet: Option<FleetSearch>,
}

/// Context length of the decode-step figures.
pub fn decode_context(inputs: &PlanInputs) -> usize {
    let (prompt, output) = inputs.workload.mean_tokens();
    (prompt + output / 2.0).round() as usize
}

/// The longest run's requests at one request per second, prompts drawn
/// once; every shorter run is a prefix of it.
pub fn unit_arrivals(inputs: &PlanInputs) -> Result<Vec<Arrival>, PlanError> {
    let entries = inputs
        .workload
        .unit_rate_entries(inputs.method.max_requests, inputs.method.seed);
    // Regular tokens only, as in every sim run (`LoadedModel::prompt_vocab`).
    let vocab = inputs.targets.first().map_or(2, |t| t.vocab());
    let source = PromptSource::random_tokens(vocab)
        .map_err(|e| PlanError::Workload(sim::WorkloadError::Prompt(e)))?;
    let replay = TraceReplay::new(entries, &source, inputs.method.seed, 1, 0)?;
    Ok(replay.arrivals().to_vec())
}

fn run_error(target: &SimBackend, setting: String) -> impl FnOnce(BackendError) -> PlanError + '_ {
    move |error| PlanError::Run {
        gpu: target.cost().gpu.name.clone(),
        setting,
        error,
    }
}

/// Every grid point as (GPU index, setting): GPUs in the order asked,
/// settings in [`search::grid`] order within each.
pub fn grid_points(inputs: &PlanInputs) -> Vec<(usize, (usize, usize))> {
    let grid = search::grid(&inputs.batched_tokens, &inputs.num_seqs);
    (0..inputs.targets.len())
        .flat_map(|g| grid.iter().map(move |s| (g, *s)))
        .collect()
}

/// Searches the grid points at `indices` (into [`grid_points`]) in
/// parallel, and sizes each one's fleet when there is one to size.
pub fn search_points(
    inputs: &PlanInputs,
    unit: &[Arrival],
    indices: &[usize],
    bar: &ProgressBar,
) -> Result<Vec<PointResult>, PlanError> {
    let points = grid_points(inputs);
    bar.set_length(indices.len() as u64);
    indices
        .par_iter()
        .map(|&index| {
            let (g, setting) = points[index];
            let target = &inputs.targets[g];
            let label = format!(
                "max_num_batched_tokens={} max_num_seqs={}",
                setting.0, setting.1
            );
            let whole_trace = inputs.workload.is_trace();
            let single = steady::search_steady(
                target,
                &inputs.engine,
                setting,
                unit,
                &inputs.slo,
                &inputs.method,
                whole_trace,
            )
            .map_err(run_error(target, label.clone()))?;
            let fleet = match &inputs.fleet {
                Some(f) => size_fleet(
                    target,
                    &inputs.engine,
                    &single,
                    unit,
                    whole_trace,
                    &f.goal,
                    &inputs.slo,
                    &inputs.method,
                )
                .map_err(run_error(target, label))?,
                None => None,
            };
            bar.inc(1);
            Ok(PointResult {
                index,
                setting: single,
                fleet,
            })
        })
        .collect()
}

/// Searches every GPU x setting, then draws each GPU's curve.
pub fn evaluate(inputs: &PlanInputs, bar: &ProgressBar) -> Result<Vec<GpuPlan>, PlanError> {
    let unit = unit_arrivals(inputs)?;
    let all: Vec<usize> = (0..grid_points(inputs).len()).collect();
    let points = search_points(inputs, &unit, &all, bar)?;
    finish(inputs, &unit, points)
}

/// Each GPU's plan from every grid point's outcome (`points` in
/// [`grid_points`] order, as [`search_points`] over all of them, or the
/// shards of `exp merge` put together, return them): the best setting, its
/// latency-vs-rate curve and the `plan.csv` row.
pub fn finish(
    inputs: &PlanInputs,
    unit: &[Arrival],
    points: Vec<PointResult>,
) -> Result<Vec<GpuPlan>, PlanError> {
    let jobs = grid_points(inputs);
    if points.len() != jobs.len() || points.iter().enumerate().any(|(i, p)| p.index != i) {
        return Err(PlanError::Merge(format!(
            "{} grid point results for a grid of {}, or out of order",
            points.len(),
            jobs.len()
        )));
    }
    let mut per_gpu: Vec<Vec<SettingResult>> = vec![Vec::new(); inputs.targets.len()];
    let mut fleets: Vec<Vec<Option<FleetSearch>>> = vec![Vec::new(); inputs.targets.len()];
    for ((g, _), p) in jobs.iter().zip(points) {
        per_gpu[*g].push(p.setting);
        if inputs.fleet.is_some() {
            fleets[*g].push(p.fleet);
        }
    }
    let curves: Vec<Vec<RatePoint>> = inputs
        .targets
        .par_iter()
        .zip(&per_gpu)
        .map(|(target, results)| curve(inputs, target, results, unit))
        .collect::<Result<_, _>>()?;
    let bands: Vec<Option<(f64, f64)>> = inputs
        .targets
        .par_iter()
        .zip(&per_gpu)
        .map(|(target, results)| qps_band(inputs, target, results, unit))
        .collect::<Result<_, _>>()?;
    Ok(inputs
        .targets
        .iter()
        .zip(per_gpu)
        .zip(fleets)
        .zip(curves)
        .zip(bands)
        .map(|((((target, results), fleets), curve), band)| {
            let mut row = row(inputs, target, &results);
            row.max_qps_band = band;
            GpuPlan {
                target: target.clone(),
                results,
                fleets,
                curve,
                row,
            }
        })
        .collect())
}

/// The best setting's max QPS under the SLO searched again on `target`
/// with every step off by −1 and +1 times its held-out error, from the
/// answer at hand (same setting, same requests per run): the least and the
/// most of the three. `None` without a held-out error or a best setting.
fn qps_band(
    inputs: &PlanInputs,
    target: &SimBackend,
    results: &[SettingResult],
    unit: &[Arrival],
) -> Result<Option<(f64, f64)>, PlanError> {
    let Some(best) = search::best(results) else {
        return Ok(None);
    };
    let (mut low, mut high) = (best.max_qps, best.max_qps);
    for share in [-1.0, 1.0] {
        let Some(off) = target
            .off_by(share)
            .map_err(run_error(target, best.label()))?
        else {
            return Ok(None);
        };
        let r = search::search_setting(
            &off,
            &inputs.engine,
            (best.max_num_batched_tokens, best.max_num_seqs),
            (unit, best.requests),
            &inputs.slo,
            &inputs.method,
            search::Start::Hint(best.max_qps),
        )
        .map_err(run_error(target, best.label()))?;
        (low, high) = (low.min(r.max_qps), high.max(r.max_qps));
    }
    Ok(Some((low, high)))
}

fn curve(
    inputs: &PlanInputs,
    target: &SimBackend,
    results: &[SettingResult],
    unit: &[Arrival],
) -> Result<Vec<RatePoint>, PlanError> {
    let Some(best) = search::best(results) else {
        return Ok(Vec::new());
    };
    let mut engine = inputs.engine.clone();
    engine.max_num_batched_tokens = best.max_num_batched_tokens;
    engine.max_num_seqs = best.max_num_seqs;
    CURVE_FRACTIONS
        .par_iter()
        .map(|f| {
            search::measure(
                target,
                &engine,
                &unit[..best.requests.min(unit.len())],
                best.max_qps * f,
                &inputs.slo,
                inputs.method.warmup_pct,
            )
            .map(|mut p| {
                // At or above saturation the queue grows without bound.
                p.meets_slo &= best.saturation_rps.is_none_or(|s| p.rate_per_s < s);
                p
            })
            .map_err(run_error(target, best.label()))
        })
        .collect()
}

fn row(inputs: &PlanInputs, target: &SimBackend, results: &[SettingResult]) -> PlanRow {
    let context = decode_context(inputs);
    let cost = target.cost();
    let best = search::best(results);
    let mut engine = inputs.engine.clone();
    if let Some(b) = best {
        engine.max_num_batched_tokens = b.max_num_batched_tokens;
        engine.max_num_seqs = b.max_num_seqs;
    }
    let note = match best {
        Some(b) => {
            let notes: Vec<String> = edge_notes(inputs, b)
                .into_iter()
                .chain(b.note.clone())
                .collect();
            (!notes.is_empty()).then(|| notes.join("; "))
        }
        None => {
            // Every setting failed; the first one's reason (per-setting
            // reasons are in plan_search.csv).
            let first = results
                .iter()
                .find_map(|r| r.note.as_deref())
                .unwrap_or("no setting was searched");
            Some(format!("no setting meets the SLO ({first})"))
        }
    };
    PlanRow {
        gpu: cost.gpu.name.clone(),
        decode_step_ms: DECODE_BATCHES.map(|b| decode_step_ms(&*cost.model, b, context)),
        prefill_tok_s_3200: prefill_tok_s(&*cost.model, PREFILL_TOKENS),
        kv_capacity_tokens: kv_capacity_tokens(target.capacity_blocks(&engine), engine.block_size),
        max_qps_under_slo: best.map_or(0.0, |b| b.max_qps),
        best_max_num_batched_tokens: best.map(|b| b.max_num_batched_tokens),
        best_max_num_seqs: best.map(|b| b.max_num_seqs),
        requests_per_run: best.map(|b| b.requests),
        steady_state: best.map(|b| b.steady),
        note,
        expected_error: cost.expected_error.clone(),
        max_qps_band: None,
    }
}

/// A best value at an end of a grid dimension searched at more than one
/// value: past that end the rate may be higher still.
fn edge_notes(inputs: &PlanInputs, best: &SettingResult) -> Vec<String> {
    [
        (
            "max_num_batched_tokens",
            &inputs.batched_tokens,
            best.max_num_batched_tokens,
        ),
        ("max_num_seqs", &inputs.num_seqs, best.max_num_seqs),
    ]
    .into_iter()
    .filter_map(|(key, values, chosen)| {
        let (lo, hi) = (values.iter().min()?, values.iter().max()?);
        if lo == hi {
            return None;
        }
        let end = if chosen == *hi {
            "largest"
        } else if chosen == *lo {
            "smallest"
        } else {
            return None;
        };
        Some(format!(
            "best {key}={chosen} is the {end} searched: the grid may not hold the best \
             setting; extend it with --set {key}=..."
        ))
    })
    .collect()
}
