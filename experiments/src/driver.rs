//! Runs one experiment on one backend and writes its files.
//!
//! Contract: conditions run in parallel (rayon) when the backend allows it;
//! each condition's script and seed are fixed by the plan, so results do not
//! depend on the thread count or order. Writes `DIR/NAME/<mode>/summary.csv`,
//! `requests.csv`, `steps.csv` (only from a backend that sees the engine's
//! steps: not from an endpoint), `meta.ron` and the charts under `DIR/NAME/`
//! (subtitled with every backend that ran and the workload, [`caption`]);
//! before any condition runs, the backend may refuse the plan
//! ([`Backend::check_conditions`]);
//! with two backends (real, then sim) also `DIR/NAME/compare.csv`. A backend
//! with a step predictor (real mode) gets a `predicted_ms` column in
//! `steps.csv`: the cost model's price of each measured step's batch.
//! [`run_experiment`] writes into a staging folder that then replaces
//! `DIR/NAME/` whole ([`crate::run_dir`]); [`write_run`] and [`commit`] are
//! its two halves, for callers that add files of their own in between.

mod files;

use crate::backend::{Backend, BackendError, ProgressEvent};
use crate::catalogue::{Condition, Experiment, ExperimentError, Report};
use crate::progress;
use crate::run_dir::{RunDirError, StagedRun};
use crate::settings::Settings;
use crate::table::Table;
use files::Written;
use indicatif::ProgressBar;
use rayon::prelude::*;
use sim::workload::PromptSource;
use sim::RunRecords;
use std::path::{Path, PathBuf};
use std::time::Instant;
use thiserror::Error;

#[derive(Debug, Error)]
pub enum DriverError {
    #[error(transparent)]
    Experiment(#[from] ExperimentError),
    // The message carries the cause, so no `source` (it would print twice).
    #[error("condition {label}: {error}")]
    Backend { label: String, error: BackendError },
    #[error("{path}: {error}")]
    Io {
        path: PathBuf,
        error: std::io::Error,
    },
    #[error("chart {stem}: {message}")]
    Figure { stem: String, message: String },
    #[error("meta.ron: {0}")]
    Meta(String),
    #[error("prompts: {0}")]
    Prompts(String),
    /// Conditions the backend refused before any ran.
    #[error("{0}")]
    Unrunnable(BackendError),
    #[error(transparent)]
    RunDir(#[from] RunDirError),
    // Boxed: the estimate it carries would make every result of the driver
    // (and of `exp plan`, which wraps it) large.
    #[error(transparent)]
    Memory(#[from] Box<crate::memory::MemoryError>),
}

#[derive(Debug, Clone)]
pub struct RunOptions {
    pub out: PathBuf,
    pub seed: u64,
    /// No progress bar.
    pub quiet: bool,
    /// Prompts of English words through this tokenizer; random token ids
    /// below each backend's vocabulary when `None`.
    pub prompts: Option<PromptSource>,
    /// `date_utc` of every `meta.ron` written ([`engine::date::output_date`]
    /// when the command started; a merge's shards' date).
    pub date_utc: String,
}

#[derive(Debug)]
pub struct RunOutput {
    /// `DIR/NAME/<mode>/` of the last mode run.
    pub dir: PathBuf,
    /// Every file written (CSV, RON, figures).
    pub files: Vec<PathBuf>,
    /// The last mode's report.
    pub report: Report,
    /// `compare.csv`'s table, when two modes ran.
    pub compare: Option<Table>,
    /// |predicted − measured| / measured in percent, for every step of every
    /// condition of a backend with a step predictor (real mode).
    pub step_errors_pct: Vec<f64>,
}

fn write(path: PathBuf, text: &str, files: &mut Vec<PathBuf>) -> Result<(), DriverError> {
    std::fs::write(&path, text).map_err(|error| DriverError::Io {
        path: path.clone(),
        error,
    })?;
    files.push(path);
    Ok(())
}

fn run_one(
    backend: &dyn Backend,
    c: &Condition,
    observe: &dyn Fn(ProgressEvent),
) -> Result<RunRecords, DriverError> {
    let run = match (&c.fleet, &c.disagg) {
        (Some(_), Some(_)) => Err(BackendError::FleetAndDisagg),
        (Some(fleet), None) => backend.run_fleet(&c.engine, fleet, &c.script),
        (None, Some(disagg)) => backend.run_disagg(&c.engine, disagg, &c.script),
        (None, None) => backend.run_observed(&c.engine, &c.script, observe),
    };
    run.map_err(|error| DriverError::Backend {
        label: c.label.clone(),
        error,
    })
}

/// Runs every condition of `conditions` on `backend`, in condition order
/// (at once when the backend allows it, `bar` counting conditions; else one
/// after another, `bar` counting requests, [`progress`]).
pub fn run_conditions(
    backend: &dyn Backend,
    conditions: &[Condition],
    bar: &ProgressBar,
) -> Result<Vec<RunRecords>, DriverError> {
    if let Some(parallel) = backend.as_parallel() {
        return conditions
            .par_iter()
            .map(|c| {
                let r = run_one(parallel, c, &|_| {});
                bar.inc(1);
                r
            })
            .collect();
    }
    let total = conditions.iter().map(|c| c.script.requests.len()).sum();
    progress::count_requests(bar, total);
    let mut done_before = 0;
    let mut runs = Vec::with_capacity(conditions.len());
    for (i, c) in conditions.iter().enumerate() {
        let shown = progress::ConditionProgress {
            bar,
            done_before,
            index: i + 1,
            conditions: conditions.len(),
            started: Instant::now(),
        };
        runs.push(run_one(backend, c, &|event| shown.show(event))?);
        done_before += c.script.requests.len();
        bar.set_position(done_before as u64);
    }
    Ok(runs)
}

/// An experiment's conditions, their records and its report, before any file is written.
#[derive(Debug)]
pub struct Evaluation {
    pub conditions: Vec<Condition>,
    pub runs: Vec<RunRecords>,
    pub report: Report,
}

/// Plans, runs and summarizes `exp` without writing files; `bar` counts conditions.
pub fn evaluate(
    exp: &dyn Experiment,
    settings: &Settings,
    backend: &dyn Backend,
    seed: u64,
    prompts: Option<&PromptSource>,
    bar: &ProgressBar,
) -> Result<Evaluation, DriverError> {
    let conditions = prepare(exp, settings, backend, seed, prompts)?;
    // Before any condition runs: a run that cannot fit fails now, not when
    // the kernel kills it.
    crate::memory::check(exp, &conditions, backend).map_err(Box::new)?;
    bar.set_length(conditions.len() as u64);
    let runs = run_conditions(backend, &conditions, bar)?;
    summarize(exp, settings, conditions, runs)
}

/// The report of `conditions` from their records (one per condition, in
/// order), as [`evaluate`] makes it.
pub fn summarize(
    exp: &dyn Experiment,
    settings: &Settings,
    conditions: Vec<Condition>,
    runs: Vec<RunRecords>,
) -> Result<Evaluation, DriverError> {
    let report = exp.summarize(settings, &conditions, &runs)?;
    Ok(Evaluation {
        conditions,
        runs,
        report,
    })
}

/// `exp`'s conditions for `backend` and `seed`, checked by the backend
/// ([`Backend::check_conditions`]) but not run.
pub fn prepare(
    exp: &dyn Experiment,
    settings: &Settings,
    backend: &dyn Backend,
    seed: u64,
    prompts: Option<&PromptSource>,
) -> Result<Vec<Condition>, DriverError> {
    let random;
    let prompts = match prompts {
        Some(p) => {
            check_vocab(p, backend.vocab())?;
            p
        }
        None => {
            random = PromptSource::random_tokens(backend.vocab())
                .map_err(|e| DriverError::Prompts(e.to_string()))?;
            &random
        }
    };
    let conditions = exp.plan(settings, seed, prompts)?;
    backend
        .check_conditions(&conditions)
        .map_err(DriverError::Unrunnable)?;
    Ok(conditions)
}

/// Rejects tokenizer prompts with ids the backend's model does not have.
fn check_vocab(prompts: &PromptSource, vocab: u32) -> Result<(), DriverError> {
    let largest = match prompts {
        PromptSource::RandomTokens { high, .. } => high.saturating_sub(1),
        PromptSource::Words { words } => words.iter().flatten().copied().max().unwrap_or(0),
    };
    if largest >= vocab {
        return Err(DriverError::Prompts(format!(
            "the tokenizer produces token id {largest} but the model's vocabulary has {vocab} \
             ids; use the model's own tokenizer.json"
        )));
    }
    Ok(())
}

/// Evaluates `exp` on each backend (real first, then sim, in `--mode both`)
/// and writes its files into `OUT/NAME/` ([`crate::run_dir`]: staged, then
/// put in place of the previous run's folder): each mode's folder, the
/// charts with every mode's series, and `compare.csv` when there are two modes.
pub fn run_experiment(
    exp: &dyn Experiment,
    settings: &Settings,
    backends: &[&dyn Backend],
    opts: &RunOptions,
) -> Result<RunOutput, DriverError> {
    let staged = StagedRun::begin(&opts.out, exp.name())?;
    let output = write_run(exp, settings, backends, opts, staged.path(), &[opts.seed])?;
    commit(staged, output)
}

/// Puts a staged run in place; the output's paths become the final ones.
pub fn commit(staged: StagedRun, mut output: RunOutput) -> Result<RunOutput, DriverError> {
    output.dir = staged.final_path(&output.dir);
    output.files = staged.commit(&output.files)?;
    Ok(output)
}

/// [`run_experiment`]'s work, writing into `exp_dir` as it is; `seeds`
/// (the first is `opts.seed`, whose files are written) go into `meta.ron`.
pub fn write_run(
    exp: &dyn Experiment,
    settings: &Settings,
    backends: &[&dyn Backend],
    opts: &RunOptions,
    exp_dir: &Path,
    seeds: &[u64],
) -> Result<RunOutput, DriverError> {
    let mut written = Written::default();
    for backend in backends {
        let bar = progress::conditions_bar(opts.quiet, exp.name());
        let evaluation = evaluate(
            exp,
            settings,
            *backend,
            opts.seed,
            opts.prompts.as_ref(),
            &bar,
        )?;
        bar.finish_and_clear();
        written.add(exp, settings, *backend, opts, &evaluation, exp_dir, seeds)?;
    }
    written.finish(exp_dir)
}

/// [`write_run`] for one backend whose records are already at hand
/// (`exp merge` of a sharded run): the same files from the same records.
pub fn write_evaluated(
    exp: &dyn Experiment,
    settings: &Settings,
    backend: &dyn Backend,
    opts: &RunOptions,
    evaluation: &Evaluation,
    exp_dir: &Path,
    seeds: &[u64],
) -> Result<RunOutput, DriverError> {
    let mut written = Written::default();
    written.add(exp, settings, backend, opts, evaluation, exp_dir, seeds)?;
    written.finish(exp_dir)
}
