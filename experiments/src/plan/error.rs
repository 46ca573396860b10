//! Errors of `exp plan`: each names the input at fault (flag, file, line,
//! field, GPU or engine setting) so the message alone says what to fix.

use crate::driver::DriverError;
use crate::settings::SettingsError;
use std::path::PathBuf;
use thiserror::Error;

#[derive(Debug, Error)]
pub enum PlanError {
    #[error("--slo {text:?}: {message}")]
    BadSlo { text: String, message: String },
    #[error("--gpu: {0}")]
    Gpu(String),
    #[error("--gpu-file: {0}")]
    GpuFile(#[from] calibration::datasheet::DatasheetError),
    #[error("--model {name:?}: {message}")]
    Model { name: String, message: String },
    #[error("{}: cannot read the workload: {source}", path.display())]
    WorkloadIo {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{}:{line}:{column}: invalid workload: {message}", path.display())]
    WorkloadSyntax {
        path: PathBuf,
        line: usize,
        column: usize,
        message: String,
    },
    #[error("{}:{line}: field `{field}`: {message}", path.display())]
    WorkloadField {
        path: PathBuf,
        line: usize,
        field: String,
        message: String,
    },
    #[error("{}: request {index} (in file order): {message}", path.display())]
    WorkloadEntry {
        path: PathBuf,
        index: usize,
        message: String,
    },
    #[error("{}: unknown workload format: use .ron (a workload description) or a .csv/.jsonl trace", path.display())]
    WorkloadFormat { path: PathBuf },
    #[error(transparent)]
    Trace(#[from] sim::workload::TraceError),
    #[error(transparent)]
    Workload(#[from] sim::WorkloadError),
    #[error(transparent)]
    Settings(#[from] SettingsError),
    #[error("engine settings: {0}")]
    Engine(#[from] engine::ConfigError),
    #[error("--profile: {0}")]
    Profile(#[from] calibration::ProfileError),
    #[error("{}: {message}", path.display())]
    ProfileMismatch { path: PathBuf, message: String },
    #[error("GPU {gpu}, {setting}: {source}")]
    Run {
        gpu: String,
        setting: String,
        source: super::search::SimError,
    },
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("figure {stem}: {message}")]
    Figure { stem: String, message: String },
    #[error("meta.ron: {0}")]
    Meta(String),
    #[error("experiment {0} is not in the catalogue")]
    MissingExperiment(&'static str),
    #[error("cb_sweep on {gpu}: {source}")]
    CbSweep { gpu: String, source: DriverError },
}
