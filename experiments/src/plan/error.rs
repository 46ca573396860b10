//! Errors of `exp plan`: each names the input at fault (flag, file, line,
//! field, GPU or engine setting) so the message alone says what to fix.
//! As in the rest of the crate, a message carries its cause in the text and
//! no variant exposes it as `source` (`{:#}` would print it twice).

use crate::backend::BackendError;
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
    GpuFile(calibration::datasheet::DatasheetError),
    #[error("{}: cannot read the workload: {error}", path.display())]
    WorkloadIo {
        path: PathBuf,
        error: std::io::Error,
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
    #[error(transparent)]
    Date(#[from] engine::date::DateError),
    #[error("engine settings: {0}")]
    Engine(engine::ConfigError),
    /// The model (`--model`) or its cost model (`--profile`, a shipped
    /// profile) could not be read.
    #[error(transparent)]
    Backend(#[from] BackendError),
    #[error("GPU {gpu}, {setting}: {error}")]
    Run {
        gpu: String,
        setting: String,
        error: BackendError,
    },
    #[error("{}: {error}", path.display())]
    Io {
        path: PathBuf,
        error: std::io::Error,
    },
    #[error("figure {stem}: {message}")]
    Figure { stem: String, message: String },
    #[error("meta.ron: {0}")]
    Meta(String),
    #[error("experiment {0} is not in the catalogue")]
    MissingExperiment(&'static str),
    #[error("cb_sweep on {gpu}: {error}")]
    CbSweep { gpu: String, error: DriverError },
    /// The price table (`--prices`, or the built-in one).
    #[error("GPU prices {file}: {message}")]
    Prices { file: String, message: String },
    /// Fleet sizing inputs (`--set qps=`, `--trace`, `--router`, ...).
    #[error("fleet sizing: {0}")]
    Fleet(String),
    /// `--shard`, or shards that are not one complete set.
    #[error(transparent)]
    Shard(#[from] crate::shard::ShardError),
    /// `exp merge`: the shards do not fit the plan's inputs as read now.
    #[error("exp merge: {0}")]
    Merge(String),
}

impl From<calibration::datasheet::DatasheetError> for PlanError {
    fn from(e: calibration::datasheet::DatasheetError) -> Self {
        Self::GpuFile(e)
    }
}

impl From<engine::ConfigError> for PlanError {
    fn from(e: engine::ConfigError) -> Self {
        Self::Engine(e)
    }
}
