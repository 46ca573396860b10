//! The experiment catalogue (docs/experiments.md: five experiments,
//! `poisson_mix`, the validation workload, `trace_replay`, a request trace
//! at its recorded times, `router_sweep`, routers over a simulated fleet
//! of replicas, and `pd_sweep`, aggregated against prefill/decode
//! disaggregated fleets) and the interface each implements.
//!
//! Contract: an [`Experiment`] turns settings and a seed into conditions
//! (engine settings + a seeded script each, condition `i` seeded from
//! `(seed, i)`), and turns the records of those conditions into a summary
//! table and charts. It never runs anything itself, so the same plan runs on
//! any backend (sim or real) and in any order or thread.

mod cb_sweep;
mod chunk_sweep;
mod latency;
mod load;
mod pd_sweep;
mod poisson_mix;
mod prefix_cache;
mod router_sweep;
mod salt_isolation;
mod timing_leak;
mod trace_replay;

use crate::charts::ChartSpec;
use crate::fleet::{DisaggSpec, FleetSpec};
use crate::script::Script;
use crate::settings::{ParamSpec, Settings, SettingsError};
use crate::table::Table;
use engine::EngineConfig;
use sim::workload::PromptSource;
use sim::RunRecords;
use thiserror::Error;

pub use load::{batch_stats, BatchStats};

#[derive(Debug, Error)]
pub enum ExperimentError {
    #[error(transparent)]
    Settings(#[from] SettingsError),
    #[error("condition {label}: {error}")]
    InvalidCondition {
        label: String,
        error: engine::ConfigError,
    },
    #[error("setting `{key}`: {message}")]
    BadParameter { key: &'static str, message: String },
    #[error("condition {label}: {message}")]
    Incomplete { label: String, message: String },
}

/// One condition: engine settings and the script it runs.
#[derive(Debug, Clone)]
pub struct Condition {
    /// Unique, human-readable, e.g. `max_num_seqs=1 concurrency=4`.
    pub label: String,
    pub engine: EngineConfig,
    pub script: Script,
    pub seed: u64,
    /// Replicas of `engine` behind a router ([`crate::fleet`]); `None`: one
    /// engine, as every experiment but `router_sweep` runs.
    pub fleet: Option<FleetSpec>,
    /// Prefill and decode pools of `engine` joined by a KV link
    /// ([`crate::fleet::DisaggSpec`]); `None` unless the experiment compares
    /// disaggregated serving (`pd_sweep`). At most one of `fleet` and
    /// `disagg` is set.
    pub disagg: Option<DisaggSpec>,
}

/// What an experiment reports.
#[derive(Debug, Clone)]
pub struct Report {
    pub summary: Table,
    /// Leading summary columns that identify a row (its condition); the
    /// numeric columns after them are metrics (compared in `--mode both`).
    pub key_columns: usize,
    pub charts: Vec<ChartSpec>,
}

pub trait Experiment: Sync {
    fn name(&self) -> &'static str;
    fn description(&self) -> &'static str;
    fn params(&self) -> &'static [ParamSpec];
    /// Whether its conditions need the simulator (a fleet of replicas); such
    /// an experiment is left out of `exp validate`'s default list.
    fn sim_only(&self) -> bool {
        false
    }
    /// Conditions in a fixed order; prompts come from `prompts` (random ids
    /// below the model's vocabulary, or English words through a tokenizer).
    fn plan(
        &self,
        settings: &Settings,
        seed: u64,
        prompts: &PromptSource,
    ) -> Result<Vec<Condition>, ExperimentError>;
    /// `runs[i]` holds the records of `conditions[i]`.
    fn summarize(
        &self,
        settings: &Settings,
        conditions: &[Condition],
        runs: &[RunRecords],
    ) -> Result<Report, ExperimentError>;
}

/// Every experiment, in catalogue order.
pub fn all() -> Vec<&'static dyn Experiment> {
    vec![
        &cb_sweep::CbSweep,
        &chunk_sweep::ChunkSweep,
        &prefix_cache::PrefixCache,
        &salt_isolation::SaltIsolation,
        &timing_leak::TimingLeak,
        &poisson_mix::PoissonMix,
        &trace_replay::TraceReplayExp,
        &router_sweep::RouterSweep,
        &pd_sweep::PdSweep,
    ]
}

pub fn find(name: &str) -> Option<&'static dyn Experiment> {
    all().into_iter().find(|e| e.name() == name)
}

/// Settings with the experiment's parameter defaults.
pub fn default_settings(exp: &dyn Experiment) -> Result<Settings, SettingsError> {
    Settings::new(exp.params())
}

/// A condition whose engine settings passed `validate()`.
pub(crate) fn condition(
    label: String,
    engine: EngineConfig,
    script: Script,
    seed: u64,
) -> Result<Condition, ExperimentError> {
    engine
        .validate()
        .map_err(|error| ExperimentError::InvalidCondition {
            label: label.clone(),
            error,
        })?;
    Ok(Condition {
        label,
        engine,
        script,
        seed,
        fleet: None,
        disagg: None,
    })
}

/// A parameter that must be at least `min`.
pub(crate) fn at_least(
    settings: &Settings,
    key: &'static str,
    min: usize,
) -> Result<usize, ExperimentError> {
    let v = settings.count(key)?;
    if v < min {
        return Err(ExperimentError::BadParameter {
            key,
            message: format!("{v} is too small; use at least {min}"),
        });
    }
    Ok(v)
}

/// Records of requests whose tag is `tag`, by id.
pub(crate) fn tagged<'a>(records: &'a RunRecords, tag: &str) -> Vec<&'a sim::RequestRecord> {
    let mut v: Vec<_> = records.requests.iter().filter(|r| r.tag == tag).collect();
    v.sort_by_key(|r| r.id);
    v
}

/// The record of request `id`, or an error naming what is missing.
pub(crate) fn request<'a>(
    records: &'a RunRecords,
    id: usize,
    label: &str,
) -> Result<&'a sim::RequestRecord, ExperimentError> {
    records
        .requests
        .iter()
        .find(|r| r.id == id as u64)
        .filter(|r| !r.token_times_s.is_empty())
        .ok_or_else(|| ExperimentError::Incomplete {
            label: label.to_string(),
            message: format!("request {id} produced no output token"),
        })
}

pub(crate) fn ms(seconds: f64) -> f64 {
    seconds * 1e3
}
