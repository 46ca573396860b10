//! Runs one experiment on one backend and writes its files.
//!
//! Contract: conditions run in parallel (rayon) when the backend allows it;
//! each condition's script and seed are fixed by the plan, so results do not
//! depend on the thread count or order. Writes `DIR/NAME/<mode>/summary.csv`,
//! `requests.csv`, `steps.csv`, `meta.ron` and the charts under `DIR/NAME/`.

use crate::backend::{Backend, BackendError};
use crate::catalogue::{Condition, Experiment, ExperimentError, Report};
use crate::charts;
use crate::output::{self, ConditionMeta, Meta};
use crate::settings::Settings;
use indicatif::{ProgressBar, ProgressStyle};
use rayon::prelude::*;
use sim::RunRecords;
use std::path::{Path, PathBuf};
use thiserror::Error;

#[derive(Debug, Error)]
pub enum DriverError {
    #[error(transparent)]
    Experiment(#[from] ExperimentError),
    #[error("condition {label}: {source}")]
    Backend { label: String, source: BackendError },
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("chart {stem}: {message}")]
    Figure { stem: String, message: String },
    #[error("meta.ron: {0}")]
    Meta(String),
}

#[derive(Debug, Clone)]
pub struct RunOptions {
    pub out: PathBuf,
    pub seed: u64,
    /// No progress bar.
    pub quiet: bool,
}

#[derive(Debug)]
pub struct RunOutput {
    /// `DIR/NAME/<mode>/`.
    pub dir: PathBuf,
    /// Every file written (CSV, RON, figures).
    pub files: Vec<PathBuf>,
    pub report: Report,
}

fn write(path: PathBuf, text: &str, files: &mut Vec<PathBuf>) -> Result<(), DriverError> {
    std::fs::write(&path, text).map_err(|source| DriverError::Io {
        path: path.clone(),
        source,
    })?;
    files.push(path);
    Ok(())
}

fn progress(n: usize, quiet: bool, name: &str) -> ProgressBar {
    if quiet {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(n as u64).with_message(name.to_string());
    if let Ok(style) =
        ProgressStyle::with_template("{msg} [{bar:30}] {pos}/{len} conditions ({elapsed})")
    {
        bar.set_style(style.progress_chars("=> "));
    }
    bar
}

/// Runs every condition of `conditions` on `backend`, in condition order.
pub fn run_conditions(
    backend: &dyn Backend,
    conditions: &[Condition],
    bar: &ProgressBar,
) -> Result<Vec<RunRecords>, DriverError> {
    let one = |c: &Condition| {
        let r = backend
            .run(&c.engine, &c.script)
            .map_err(|source| DriverError::Backend {
                label: c.label.clone(),
                source,
            });
        bar.inc(1);
        r
    };
    if backend.parallel_conditions() {
        conditions.par_iter().map(one).collect()
    } else {
        conditions.iter().map(one).collect()
    }
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
    bar: &ProgressBar,
) -> Result<Evaluation, DriverError> {
    let conditions = exp.plan(settings, seed, backend.vocab())?;
    bar.set_length(conditions.len() as u64);
    let runs = run_conditions(backend, &conditions, bar)?;
    let report = exp.summarize(settings, &conditions, &runs)?;
    Ok(Evaluation {
        conditions,
        runs,
        report,
    })
}

/// Evaluates `exp` and writes its files under `opts.out`.
pub fn run_experiment(
    exp: &dyn Experiment,
    settings: &Settings,
    backend: &dyn Backend,
    opts: &RunOptions,
) -> Result<RunOutput, DriverError> {
    let bar = progress(0, opts.quiet, exp.name());
    let Evaluation {
        conditions,
        runs,
        report,
    } = evaluate(exp, settings, backend, opts.seed, &bar)?;
    bar.finish_and_clear();

    let info = backend.info();
    let exp_dir = opts.out.join(exp.name());
    let dir = exp_dir.join(info.mode);
    std::fs::create_dir_all(&dir).map_err(|source| DriverError::Io {
        path: dir.clone(),
        source,
    })?;
    let mut files = Vec::new();
    let labelled: Vec<(String, &RunRecords)> = conditions
        .iter()
        .map(|c| c.label.clone())
        .zip(runs.iter())
        .collect();
    write(
        dir.join("summary.csv"),
        &report.summary.to_csv(),
        &mut files,
    )?;
    let io_err = |name: &str| {
        let path = dir.join(name);
        move |source| DriverError::Io { path, source }
    };
    let requests = output::requests_csv(&labelled).map_err(io_err("requests.csv"))?;
    write(dir.join("requests.csv"), &requests, &mut files)?;
    let steps = output::steps_csv(&labelled).map_err(io_err("steps.csv"))?;
    write(dir.join("steps.csv"), &steps, &mut files)?;
    let meta = Meta {
        experiment: exp.name(),
        seed: opts.seed,
        settings,
        backend: info.clone(),
        conditions: conditions
            .iter()
            .map(|c| ConditionMeta {
                label: c.label.clone(),
                engine: c.engine.clone(),
                seed: c.seed,
                requests: c.script.requests.len(),
            })
            .collect(),
        commit: output::git_commit(),
        date_utc: output::utc_now(),
    };
    let meta_text = ron::ser::to_string_pretty(&meta, ron::ser::PrettyConfig::default())
        .map_err(|e| DriverError::Meta(e.to_string()))?;
    write(dir.join("meta.ron"), &meta_text, &mut files)?;
    let source = if info.mode == "real" {
        figures::Source::Real
    } else {
        figures::Source::Sim
    };
    files.extend(draw_charts(&report, source, &exp_dir)?);
    Ok(RunOutput { dir, files, report })
}

fn draw_charts(
    report: &Report,
    source: figures::Source,
    dir: &Path,
) -> Result<Vec<PathBuf>, DriverError> {
    let mut files = Vec::new();
    for spec in &report.charts {
        let drawn = charts::draw(spec, source, dir).map_err(|e| DriverError::Figure {
            stem: spec.stem.clone(),
            message: e.to_string(),
        })?;
        files.extend(drawn);
    }
    Ok(files)
}
