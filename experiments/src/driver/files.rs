//! The files of one run: each mode's `summary.csv`, `requests.csv`,
//! `steps.csv` and `meta.ron`, `compare.csv` for two modes, and the charts.
//!
//! Contract: [`Written`] collects the modes in order (real before sim) and
//! writes each mode's folder as it is added; [`Written::finish`] writes
//! `compare.csv` and the charts (every mode's series) and gives the run's
//! output. The same records always give the same bytes.

use super::{write, DriverError, Evaluation, RunOptions, RunOutput};
use crate::backend::Backend;
use crate::catalogue::{Experiment, Report};
use crate::output::{self, ConditionMeta, Meta};
use crate::settings::Settings;
use crate::{caption, charts, compare};
use sim::RunRecords;
use std::path::{Path, PathBuf};

/// The modes written so far; every mode runs the same scripts, so the
/// first describes the workload.
#[derive(Default)]
pub(super) struct Written {
    files: Vec<PathBuf>,
    results: Vec<(&'static str, PathBuf, Report)>,
    step_errors_pct: Vec<f64>,
    infos: Vec<crate::backend::BackendInfo>,
    workload: Option<String>,
}

impl Written {
    /// One mode's folder from its evaluation.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn add(
        &mut self,
        exp: &dyn Experiment,
        settings: &Settings,
        backend: &dyn Backend,
        opts: &RunOptions,
        evaluation: &Evaluation,
        exp_dir: &Path,
        seeds: &[u64],
    ) -> Result<(), DriverError> {
        // Each measured step's prediction, priced once for steps.csv and the errors.
        let predicted: Option<Vec<Vec<f64>>> = backend.step_predictor().map(|predictor| {
            evaluation
                .runs
                .iter()
                .map(|r| output::predicted_seconds(r, predictor))
                .collect()
        });
        if let Some(predicted) = &predicted {
            let errors = output::step_errors_pct(&evaluation.runs, predicted);
            self.step_errors_pct.extend(errors);
        }
        let info = backend.info();
        let dir = exp_dir.join(info.mode);
        self.workload
            .get_or_insert_with(|| caption::workload_line(&evaluation.conditions));
        let mode_files = write_mode_files(
            exp,
            settings,
            backend,
            opts,
            (evaluation, predicted.as_deref()),
            &dir,
            seeds,
        )?;
        self.files.extend(mode_files);
        self.results
            .push((info.mode, dir, evaluation.report.clone()));
        self.infos.push(info);
        Ok(())
    }

    /// `compare.csv` (two modes) and the charts; the run's output.
    pub(super) fn finish(mut self, exp_dir: &Path) -> Result<RunOutput, DriverError> {
        let mut compared = None;
        if let [(_, _, real), (_, _, sim)] = self.results.as_slice() {
            let table = compare::compare(&real.summary, &sim.summary, sim.key_columns);
            write(
                exp_dir.join("compare.csv"),
                &table.to_csv(),
                &mut self.files,
            )?;
            compared = Some(table);
        }
        let subtitle = caption::subtitle(&self.infos, self.workload.as_deref().unwrap_or(""));
        self.files
            .extend(draw_charts(&self.results, exp_dir, &subtitle)?);
        let (_, dir, report) = self
            .results
            .pop()
            .ok_or_else(|| DriverError::Meta("no backend to run on".into()))?;
        Ok(RunOutput {
            dir,
            files: self.files,
            report,
            compare: compared,
            step_errors_pct: self.step_errors_pct,
        })
    }
}

/// `summary.csv`, `requests.csv`, `steps.csv` (with each step's
/// prediction, where there are predictions) and `meta.ron` of one mode.
fn write_mode_files(
    exp: &dyn Experiment,
    settings: &Settings,
    backend: &dyn Backend,
    opts: &RunOptions,
    (evaluation, predicted): (&Evaluation, Option<&[Vec<f64>]>),
    dir: &Path,
    seeds: &[u64],
) -> Result<Vec<PathBuf>, DriverError> {
    std::fs::create_dir_all(dir).map_err(|error| DriverError::Io {
        path: dir.to_path_buf(),
        error,
    })?;
    let Evaluation {
        conditions,
        runs,
        report,
    } = evaluation;
    let mut files = Vec::new();
    let labelled: Vec<(String, &RunRecords)> = conditions
        .iter()
        .map(|c| c.label.clone())
        .zip(runs)
        .collect();
    write(
        dir.join("summary.csv"),
        &report.summary.to_csv(),
        &mut files,
    )?;
    let io_err = |name: &str| {
        let path = dir.join(name);
        move |error| DriverError::Io { path, error }
    };
    let requests = output::requests_csv(&labelled).map_err(io_err("requests.csv"))?;
    write(dir.join("requests.csv"), &requests, &mut files)?;
    // A backend that cannot see the engine's steps writes no steps.csv
    // (meta.ron says why), rather than a file that looks like an idle engine.
    if backend.observes_steps() {
        let steps =
            output::steps_csv_predicted(&labelled, predicted).map_err(io_err("steps.csv"))?;
        write(dir.join("steps.csv"), &steps, &mut files)?;
    }
    let meta = Meta {
        experiment: exp.name(),
        seed: opts.seed,
        seeds: seeds.to_vec(),
        settings,
        backend: backend.info(),
        conditions: conditions
            .iter()
            .map(|c| ConditionMeta {
                label: c.label.clone(),
                engine: c.engine.clone(),
                seed: c.seed,
                requests: c.script.requests.len(),
                kv_blocks: backend.kv_blocks(&c.engine),
            })
            .collect(),
        commit: output::git_commit(),
        date_utc: opts.date_utc.clone(),
    };
    let meta_text = ron::ser::to_string_pretty(&meta, ron::ser::PrettyConfig::default())
        .map_err(|e| DriverError::Meta(e.to_string()))?;
    write(dir.join("meta.ron"), &meta_text, &mut files)?;
    Ok(files)
}

/// Every chart of the first report, with the series of every mode and
/// `subtitle` (what ran, see [`caption`]) under each title.
fn draw_charts(
    results: &[(&str, PathBuf, Report)],
    dir: &Path,
    subtitle: &str,
) -> Result<Vec<PathBuf>, DriverError> {
    let mut files = Vec::new();
    let Some((_, _, first)) = results.first() else {
        return Ok(files);
    };
    for spec in &first.charts {
        let specs: Vec<(figures::Source, &charts::ChartSpec)> = results
            .iter()
            .filter_map(|(mode, _, report)| {
                let source = if *mode == "real" {
                    figures::Source::Real
                } else {
                    figures::Source::Sim
                };
                report
                    .charts
                    .iter()
                    .find(|c| c.stem == spec.stem)
                    .map(|c| (source, c))
            })
            .collect();
        let drawn = charts::draw(&specs, dir, subtitle).map_err(|e| DriverError::Figure {
            stem: spec.stem.clone(),
            message: e.to_string(),
        })?;
        files.extend(drawn);
    }
    Ok(files)
}
