//! `exp plan --shard K/N`: one share of the grid, and the file it writes.
//!
//! Contract:
//! - The work units are every (GPU, setting) pair in
//!   [`super::evaluate::grid_points`] order, split as [`crate::shard`]
//!   says (round robin; `K` from 1; at most as many shards as points).
//! - A shard searches its points (single-engine search, and fleet sizing
//!   when a fleet is sized) and writes only `DIR/shard.ron`
//!   ([`PlanShard`]): the plan's arguments (without `--out` and `--shard`),
//!   a [`fingerprint`] of the inputs they resolved to, the date it started
//!   and its points' results. The best settings, curves, cb_sweep, CSVs and
//!   figures are made by `exp merge` ([`super::merge`]) from all shards
//!   together, exactly as an unsharded run makes them.

use super::error::PlanError;
use super::evaluate::PointResult;
use super::inputs::PlanInputs;
use super::workload::PlanWorkload;
use super::PlanArgs;
use crate::output::git_commit;
use crate::shard::ShardFile;
use serde::Serialize;
use sha2::{Digest, Sha256};
use std::path::PathBuf;

/// What a plan's shard writes ([`crate::shard::SHARD_FILE`]).
pub type PlanShard = ShardFile<PlanArgs, PointResult>;

/// `args` as every shard of one plan has them.
pub fn shared_args(args: &PlanArgs) -> PlanArgs {
    PlanArgs {
        out: PathBuf::new(),
        shard: None,
        quiet: false,
        ..args.clone()
    }
}

fn workload_digest(workload: &PlanWorkload) -> String {
    let mut h = Sha256::new();
    match workload {
        PlanWorkload::Synthetic { shape, .. } => h.update(format!("{shape:?}")),
        PlanWorkload::Trace { entries, .. } => {
            for e in entries {
                h.update(format!("{e:?}\n"));
            }
        }
    }
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

#[derive(Serialize)]
struct Fingerprint<'a> {
    commit: String,
    model: &'a str,
    engine: &'a engine::EngineConfig,
    grid: (&'a [usize], &'a [usize]),
    method: &'a super::search::SearchMethod,
    slo: &'a super::slo::Slo,
    workload: String,
    workload_sha256: String,
    /// Each GPU and what prices its steps.
    gpus: Vec<(&'a sim::GpuSpec, &'a str)>,
    cb_settings: &'a crate::settings::Settings,
    /// Rate, router, largest fleet, prices.
    fleet: Option<(
        f64,
        &'static str,
        usize,
        &'a [Option<super::prices::GpuPrice>],
    )>,
}

/// The resolved inputs, one item a line (RON), and the code's commit:
/// shards with equal fingerprints searched the same plan.
pub fn fingerprint(inputs: &PlanInputs) -> Result<String, PlanError> {
    let f = Fingerprint {
        commit: git_commit(),
        model: &inputs.model_name,
        engine: &inputs.engine,
        grid: (&inputs.batched_tokens, &inputs.num_seqs),
        method: &inputs.method,
        slo: &inputs.slo,
        workload: inputs.workload.describe(),
        workload_sha256: workload_digest(&inputs.workload),
        gpus: inputs
            .targets
            .iter()
            .map(|t| (&t.cost().gpu, t.cost().description.as_str()))
            .collect(),
        cb_settings: &inputs.cb_settings,
        fleet: inputs.fleet.as_ref().map(|f| {
            (
                f.goal.rate,
                f.goal.router.name(),
                f.goal.max_replicas,
                f.prices.as_slice(),
            )
        }),
    };
    ron::ser::to_string_pretty(&f, ron::ser::PrettyConfig::default())
        .map_err(|e| PlanError::Meta(e.to_string()))
}
